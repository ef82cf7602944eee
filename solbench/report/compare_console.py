"""Rich tables for ``solbench compare`` and ``solbench gate``. Never prints."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from solbench.analysis.compare import Comparison
from solbench.analysis.gate import CASE_VERDICTS, GateResult
from solbench.report.markdown import (
    above_note,
    ratio_note,
    rounds_note,
    side_cell,
    sol_cell,
    split_key,
    threshold_cell,
    threshold_summary,
    verdict_counts,
)
from solbench.report.units import format_ci, format_p, format_percent, format_ratio, format_seconds

__all__ = ["comparison_table", "gate_table", "short_cases", "unpaired"]

_STYLE = {
    "FASTER": "bold green", "SLOWER": "bold red", "SAME": "dim", "INCONCLUSIVE": "yellow",
    "PASS": "green", "REGRESSION": "bold red", "BROKEN": "bold red reverse", "STILL-BROKEN": "red", "MISSING": "dim",
}
_GATE_ORDER = {v: i for i, v in enumerate(CASE_VERDICTS)}  # BROKEN and REGRESSION first, PASS last


def _items(case_id: str) -> tuple[str, list[str]]:
    """``"o_proj[tokens=16,hidden=4096,bfloat16]"`` -> ``("o_proj", ["tokens=16", "hidden=4096", "bfloat16"])``."""
    if "[" not in case_id or not case_id.endswith("]"):
        return case_id, []
    name, inner = case_id[:-1].split("[", 1)
    return name, [item for item in inner.split(",") if item]


def short_cases(case_ids: list[str]) -> tuple[dict[str, str], str]:
    """Each case id shortened to what varies across the table, and the constant part, said once.

    ``o_proj[tokens=16,hidden=4096,bfloat16]`` and ``o_proj[tokens=64,hidden=4096,bfloat16]`` read
    ``tokens=16`` and ``tokens=64``, with ``o_proj: hidden=4096 bfloat16`` under the table; the
    workload stays in each cell when the table holds several. Nothing is cut: the full ids are the
    constant part plus the cell.
    """
    parsed = {c: _items(c) for c in dict.fromkeys(case_ids)}
    if len(parsed) == 1:  # nothing to compare against: the id as it is
        return {c: c for c in parsed}, ""
    names = {name for name, _ in parsed.values()}
    lists = [items for _, items in parsed.values()]
    constant = [x for x in lists[0] if all(x in items for items in lists)] if len(lists) > 1 else []
    short = {}
    for case_id, (name, items) in parsed.items():
        varying = " ".join(x for x in items if x not in constant)
        short[case_id] = (f"{name} {varying}" if len(names) > 1 else varying or name).strip()
    shared = f"{next(iter(names))}: " if len(names) == 1 else "every case: "
    return short, (shared + " ".join(constant)) if constant else ""


def _key_columns(t: Table, cases: list[str], impls: list[str] | None) -> None:
    """The case (and implementation) columns: the only ones that wrap (the numbers never do), so
    on a narrow terminal a key wraps at spaces or folds, and never ends in an ellipsis."""
    for name, cells in (("case", cases), ("impl", impls)):
        if cells is not None:
            t.add_column(name, justify="left", overflow="fold")


def unpaired(c: Comparison) -> dict[str, str]:
    """Every key with no ratio, and why: measured on one side only, or not comparable."""
    why = {}
    for side, other, one_sided in ((c.label_a, c.label_b, c.only_in_a), (c.label_b, c.label_a, c.only_in_b)):
        why.update({k: f"only in {side} ({other}: {c.other_side.get(k, 'absent')})" for k in one_sided})
    why.update({k: f"not comparable: other GPU model ({models})" for k, models in c.not_comparable.items()})
    why.update({k: f"not comparable: launched differently ({how})" for k, how in c.launched_differently.items()})
    return why


def comparison_table(c: Comparison) -> Table:
    """One row per paired key, then one row per key measured on one side only."""
    a, b = c.label_a, c.label_b
    counts = verdict_counts(c)
    on = f" on {c.device}" if c.device else ""
    beaten = above_note(c)
    geo = f"{format_ratio(c.geomean_speedup)}{c.geomean_over()}"
    t = Table(title=Text(f"{b} vs {a}{on} (ratio = {b} time / {a} time; SOL: {a} → {b})"), title_justify="left",
              caption=f"geomean speedup of {escape(b)} over {escape(a)}: {geo} ({counts}); "
                      f"SAME within ±{format_percent(c.threshold)}, alpha {c.alpha:g} (BH)"
                      + (f"\n{escape(ratio_note(c))}" if c.rows else "")
                      + (f"\n{escape(beaten)}." if beaten else ""),
              caption_justify="left")
    apart = unpaired(c)
    keys = [r.key for r in c.rows] + list(apart)
    by_impl = any(split_key(k)[1] for k in keys)  # two runs: keys are case/impl
    short, constant = short_cases([split_key(k)[0] for k in keys]) if keys else ({}, "")
    impls = sorted({split_key(k)[1] for k in keys})
    if by_impl and len(impls) == 1:  # one implementation throughout: said once, under the table
        constant, by_impl = f"{constant}; impl {impls[0]}".lstrip("; "), False
    if constant:
        t.caption = f"{escape(constant)}\n{t.caption}"
    _key_columns(t, list(short.values()), [split_key(k)[1] for k in keys] if by_impl else None)
    ratio = f"{b}/{a}" if len(a) + len(b) < 10 else "ratio"  # the title says which way
    for col in (a, b, f"{ratio} ({c.confidence:.0%} CI)", "SOL", "p", "verdict"):  # the runs' names, never markup
        t.add_column(Text(col), justify="left" if col == "verdict" else "right", no_wrap=col != "verdict")

    def key(k: str) -> list[Text]:
        case, impl = split_key(k)
        return [Text(short[case]), Text(impl)] if by_impl else [Text(short[case])]

    for r in c.rows:
        t.add_row(*key(r.key), format_seconds(r.median_a), format_seconds(r.median_b),
                  f"{format_ratio(r.ratio, threshold=c.threshold)} "
                  f"{format_ci(r.ci_low, r.ci_high, threshold=c.threshold)}",
                  f"{sol_cell(r.sol_a, c.measured_peaks[0], r.own_a)} → "
                  f"{sol_cell(r.sol_b, c.measured_peaks[1], r.own_b)}",
                  format_p(r.p_value),
                  Text(r.verdict, style=_STYLE[r.verdict]))
    for k, why in apart.items():
        t.add_row(*key(k), *[""] * 5, Text(why, style="dim"))
    return t


def gate_table(g: GateResult, exit_code: int | None = None) -> Table:
    """One row per key, broken and regressed first; the caption holds the overall verdict and the exit
    code (``exit_code``: the command's, where more severe than the gate's, e.g. ``ab``'s 4)."""
    counts = ", ".join(f"{g.count(v)} {v.lower()}" for v in CASE_VERDICTS)
    code = g.exit_code if exit_code is None else exit_code
    own = "" if code == g.exit_code else f"; the gate's own: {g.exit_code}"
    caption = (f"{g.overall} (exit {code}{own}): {counts}; {threshold_summary(g)}; alpha {g.alpha:g} (BH)"
               + (f"; {g.reruns} rerun(s)" if g.reruns else "") + escape(rounds_note(g)))
    if g.fingerprint_diffs:
        caption += "\ncross-hardware (allowed): " + escape("; ".join(g.fingerprint_diffs))
    if g.cards:
        caption += "\n" + escape(g.cards)
    if g.load:
        caption += "\n" + escape(g.load)
    t = Table(title=Text(f"regression gate{f' on {g.device}' if g.device else ''}"), title_justify="left",
              caption=caption, caption_justify="left")
    notes = {v.key: v.reason for v in g.verdicts if v.verdict in ("BROKEN", "STILL-BROKEN", "MISSING") and v.reason}
    notes.update({v.key: f"needs ~{v.more_rounds} more round(s) per side" if v.more_rounds is not None
                  else v.reason.split(": ", 1)[-1] if v.reason.startswith("CI [") else v.reason
                  for v in g.verdicts if v.verdict == "INCONCLUSIVE"})  # the CI is in its own column
    notes.update({v.key: "within the runs' own offsets of the threshold: more runs a side decide it"
                  for v in g.verdicts if v.run_bound})
    for v in g.verdicts:  # the two runs chose other algorithms or kernels: said beside the verdict
        if v.choices:
            notes[v.key] = "; ".join(filter(None, (notes.get(v.key), f"the runs {v.choices}")))
        if v.apart:  # and rounds that read far from the rest of their side (a slow process)
            notes[v.key] = "; ".join(filter(None, (notes.get(v.key), v.apart)))
    short, constant = short_cases([v.case_id for v in g.verdicts]) if g.verdicts else ({}, "")
    impls = sorted({v.impl for v in g.verdicts})
    if len(impls) == 1:  # one implementation throughout: said once, under the table
        constant = f"{constant}; impl {impls[0]}".lstrip("; ")
    if constant:
        t.caption = f"{escape(constant)}\n{t.caption}"
    _key_columns(t, list(short.values()), [v.impl for v in g.verdicts] if len(impls) > 1 else None)
    for col in ("baseline", "current", "ratio", f"{g.confidence:.0%} CI", "threshold", "p (adj.)", "verdict",
                *(("note",) if notes else ())):  # no column that would always be empty
        t.add_column(col, justify="left" if col in ("verdict", "note") else "right", no_wrap=col != "note")
    for v in sorted(g.verdicts, key=lambda v: _GATE_ORDER[v.verdict]):
        note = [Text(notes.get(v.key, ""), style="dim")] if notes else []
        key = [Text(short[v.case_id]), Text(v.impl)] if len(impls) > 1 else [Text(short[v.case_id])]
        t.add_row(*key, side_cell(v.median_base, v.status_base),
                  side_cell(v.median_cur, v.status_cur),
                  format_ratio(v.ratio, threshold=v.threshold),
                  format_ci(v.ci_low, v.ci_high, threshold=v.threshold), threshold_cell(v),
                  format_p(v.p_adjusted),
                  Text(v.verdict, style=_STYLE[v.verdict]), *note)
    return t
