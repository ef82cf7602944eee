"""Markdown for PR comments and ``$GITHUB_STEP_SUMMARY``: runs, comparisons and gate verdicts.

Returns text only; the CLI decides where it goes (appending to the step summary
when that variable is set).
"""

from __future__ import annotations

from collections.abc import Sequence

from solbench.analysis.compare import Comparison
from solbench.analysis.gate import CASE_VERDICTS, GateCaseVerdict, GateResult
from solbench.analysis.pooling import APART
from solbench.analysis.suite_summary import DEFAULT_PS
from solbench.report import dry_cells, flags
from solbench.report.collective_cells import collective_columns, is_part, part_label
from solbench.report.console import peaks_elsewhere, rounds_phrase, run_notes, threads
from solbench.report.suites import summary_markdown
from solbench.report.timing_cells import extra_cell, timing_columns
from solbench.report.units import (
    format_ci,
    format_p,
    format_pct,
    format_percent,
    format_ratio,
    format_seconds,
)
from solbench.results.model import CaseResult, ImplResult, RunResult, Timing
from solbench.text import first_few

__all__ = [
    "comparison_markdown",
    "gate_markdown",
    "rounds_note",
    "run_markdown",
    "side_cell",
    "split_key",
    "threshold_cell",
    "threshold_summary",
]

_GATE_ICON = {"PASS": "✅", "FASTER": "🚀", "REGRESSION": "❌", "BROKEN": "💥", "STILL-BROKEN": "🔴",
              "INCONCLUSIVE": "⚠️", "MISSING": "➖"}
BASELINE_ROUNDS = 6  # rounds a saved baseline wants (README, "A stored baseline limits run --gate-against")
_GATE_ORDER = {v: i for i, v in enumerate(CASE_VERDICTS)}  # BROKEN and REGRESSION first, PASS last


def threshold_cell(v: GateCaseVerdict) -> str:
    """``+5%``, with `` (workload)`` when it is the workload's recorded gate_threshold."""
    return f"+{format_percent(v.threshold)}" + (" (workload)" if v.threshold_source == "workload" else "")


def side_cell(median: float | None, status: str | None) -> str:
    """A side's median, or why it has none: its status in capitals (``INCORRECT``), or ``absent``."""
    if median is not None:
        return format_seconds(median)
    return "absent" if status is None else status.upper()


def threshold_summary(g: GateResult) -> str:
    """Where the thresholds came from, in a few words."""
    if g.threshold is not None:
        return f"threshold {format_percent(g.threshold)} (explicit, every case)"
    return "threshold: each workload's recorded gate_threshold, else 5%"


def split_key(key: str) -> tuple[str, str]:
    """``"o_proj[tokens=16]/fused"`` -> ``("o_proj[tokens=16]", "fused")``; a bare case id -> ``(id, "")``."""
    if key.endswith("]") or "/" not in key:
        return key, ""
    case, impl = key.rsplit("/", 1)
    return case, impl


def _cell(text: str) -> str:
    """Escape a value for a Markdown table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(header: list[str], align: str, rows: list[list[str]]) -> list[str]:
    sep = [":---" if a == "l" else "---:" for a in align]
    return [_row(header), _row(sep), *(_row([_cell(c) for c in r]) for r in rows)]


def _sol(x: float | None) -> str:
    return f"{x:.2f}" if x is not None else "—"


def sol_cell(x: float | None, measured: str, own: bool = False) -> str:
    """A compared side's SOL, marked ``!`` above 1 where that side's peaks were measured (``measured``: their id),
    and ``*`` where it is against the implementation's own T_SOL (``own``), as the run table marks it."""
    return flags.mark(_sol(x), flags.above(x, measured) + (flags.OWN if own else ""))


def above_note(c: Comparison) -> str:
    """What ``!`` and ``*`` mean, where some row's SOL carries them (empty: none does)."""
    ids = [spec for spec, side in zip(c.measured_peaks, ("a", "b"), strict=True)
           if any(flags.above(getattr(r, f"sol_{side}"), spec) for r in c.rows)]
    notes = [flags.above_legend(spec) for spec in dict.fromkeys(ids)]
    if any(r.own_a or r.own_b for r in c.rows):
        notes.append(f"{flags.OWN} SOL against the implementation's own T_SOL (another dtype's peak or its own "
                     "bytes), not the case's: SOL across the arrow can move the other way from the times")
    return "; ".join(notes)


def _keys(title: str, keys: tuple[str, ...], other: str, why: dict[str, str]) -> list[str]:
    if not keys:
        return []
    return [f"**{title}** ({len(keys)}): " + ", ".join(f"`{k}` ({other}: {_cell(why.get(k, 'absent'))})"
                                                        for k in keys), ""]


def verdict_counts(c: Comparison) -> str:
    """``"3 faster, 0 slower, 1 same, 0 inconclusive"``: a comparison's rows by verdict, in every view."""
    return ", ".join(f"{c.count(v)} {v.lower()}" for v in ("FASTER", "SLOWER", "SAME", "INCONCLUSIVE"))


def ratio_note(c: Comparison) -> str:
    """How the rows' ratios and intervals were made (over rounds, or from one round's samples)."""
    over = sum(max(r.rounds_a, r.rounds_b) > 1 for r in c.rows)
    notes = []
    if over:
        notes.append("Over rounds: the ratio of the geometric means of the round medians, a t interval on them; "
                     "the times shown are medians of the round medians (as in the run table), so the ratio "
                     "need not equal their quotient.")
    if over < len(c.rows):
        notes.append("One round a side: the ratio of the medians, a percentile-bootstrap interval.")
    return " ".join(notes)


def comparison_markdown(c: Comparison) -> str:
    """A comparison as a Markdown section: settings, one row per key, one-sided keys, geomean."""
    a, b = _cell(c.label_a), _cell(c.label_b)
    lines = [
        f"### solbench compare: {b} vs {a}",
        "",
        (f"Measured on {_cell(c.device)}. " if c.device else "")
        + f"Ratio = {b} time / {a} time (< 1: {b} is faster), {c.confidence:.0%} CI. {ratio_note(c)} "
        f"SAME within ±{format_percent(c.threshold)}; FASTER/SLOWER need the CI beyond the band with a "
        f"one-sided test at {c.alpha:g}, or a test significant at {c.alpha:g} (Benjamini-Hochberg)."
        + (f" Over rounds, each run's own offset (sd {c.run_sd:.2%}) widens the interval."
           if c.run_sd > 0 and any(max(r.rounds_a, r.rounds_b) > 1 for r in c.rows) else ""),
        "",
    ]
    if c.rows:
        by_impl = any(split_key(r.key)[1] for r in c.rows)  # two runs: case and implementation apart
        rows = [[*(split_key(r.key) if by_impl else (r.key,)), format_seconds(r.median_a),
                 format_seconds(r.median_b), format_ratio(r.ratio, threshold=c.threshold),
                 format_ci(r.ci_low, r.ci_high, threshold=c.threshold), sol_cell(r.sol_a, c.measured_peaks[0], r.own_a),
                 sol_cell(r.sol_b, c.measured_peaks[1], r.own_b), format_p(r.p_value), r.verdict] for r in c.rows]
        header = ["Case", *(["Impl"] if by_impl else []), a, b, f"{b}/{a}", "CI", f"SOL {a}", f"SOL {b}", "p",
                  "Verdict"]
        lines += [*_table(header, ("ll" if by_impl else "l") + "rrrrrrrl", rows), ""]
        beaten = above_note(c)
        if beaten:
            lines += [_cell(beaten) + ".", ""]
    else:
        lines += ["No case was measured on both sides.", ""]
    lines += _keys(f"Only in {a}", c.only_in_a, b, c.other_side) + _keys(f"Only in {b}", c.only_in_b, a, c.other_side)
    for why, keys in (("other GPU model", c.not_comparable), ("launched differently", c.launched_differently)):
        if keys:
            lines += [f"Not comparable, {why}:", "", *(f"- `{k}`: {how}" for k, how in keys.items()), ""]
    counts = verdict_counts(c)
    geo = format_ratio(c.geomean_speedup)
    lines.append(f"**Geomean speedup of {b} over {a}: {geo}**{c.geomean_over()} ({len(c.rows)} cases: {counts})")
    return "\n".join(lines) + "\n"


def _gate_row(v: GateCaseVerdict) -> list[str]:
    p = format_p(v.p_adjusted) if v.p_adjusted is not None else "—"
    return [v.case_id, v.impl, side_cell(v.median_base, v.status_base), side_cell(v.median_cur, v.status_cur),
            format_ratio(v.ratio, threshold=v.threshold),
            format_ci(v.ci_low, v.ci_high, threshold=v.threshold), threshold_cell(v), p,
            f"{_GATE_ICON[v.verdict]} {v.verdict}"]


def rounds_note(g: GateResult) -> str:
    """One sentence when some case was decided over rounds (several runs, ``--repeat``, ``ab``)."""
    over = [v for v in g.verdicts  # MISSING and BROKEN cases were not decided, whatever rounds they hold
            if v.verdict not in ("MISSING", "BROKEN", "STILL-BROKEN") and max(v.rounds_base, v.rounds_cur) > 1]
    if not over:
        return ""
    base = sorted({v.rounds_base for v in over})
    cur = sorted({v.rounds_cur for v in over})
    looks = (f" Error rates split over {g.looks} looks (each at alpha/{g.looks}, CI at "
             f"{1 - (1 - g.confidence) / g.looks:.2%}): undecided cases got more rounds at each look."
             if g.looks > 1 else "")
    source = f", {g.run_sd_source}" if g.run_sd_source else ""
    runs = (f" Each side's own run offset (sd {g.run_sd:.2%}{source}: what rounds do not show) widens the interval."
            if g.run_sd > 0 else "")
    return (f" Decided over rounds ({'/'.join(map(str, base))} baseline, {'/'.join(map(str, cur))} current): "
            "ratio of the geometric means of the round medians, t interval on the log round medians, and "
            "the t test in place of Mann-Whitney; the times shown are medians of the round medians (as in the run "
            "table), so the ratio need not equal their quotient, nor lie on the same side of 1." + runs + looks)


def undecided_note(g: GateResult) -> str:
    """What a CI owner can do about INCONCLUSIVE cases: which, the interval each reached, what decides it."""
    und = g.undecided
    if not und:
        return ""
    bound = [v for v in und if v.run_bound]  # more_rounds None too: no number of rounds decides them
    over_rounds = [v for v in und if v.more_rounds is not None]
    hint = (f" {len(bound)} {'lies' if len(bound) == 1 else 'lie'} within the runs' own offsets (sd {g.run_sd:.2%} "
            "a run) of the threshold: no number of rounds decides "
            f"{'it' if len(bound) == 1 else 'them'}; gate several runs a side (`gate --baseline A B C --current "
            "D E F`), or measure both trees in one invocation (`ab`).") if bound else ""
    if not over_rounds:
        if not bound:
            hint = " Measure in rounds (`run --repeat`, `ab`) so that more rounds can decide them."
    else:
        hint += (f" At the measured spread about {max(v.more_rounds for v in over_rounds)} more round(s) per side "
                "would decide them all (`ab --max-rounds`; a saved baseline measured with `run --max-rounds`); "
                "a ratio on the threshold itself needs a different threshold, not more rounds.")
        alone = [v.current_rounds for v in over_rounds]
        stuck = sum(r is None for r in alone)
        if stuck:
            held = sorted({v.rounds_base for v in over_rounds if v.current_rounds is None})
            rounds = str(held[0]) if len(held) == 1 else f"{held[0]}-{held[-1]}"
            repeat = (f"`run --repeat {BASELINE_ROUNDS}`, or where it is noisy with "
                      if held[0] < BASELINE_ROUNDS else "")
            hint += (f" Re-measuring the current run alone (`run --gate-against --rerun`) cannot decide {stuck} "
                     f"of them: the baseline's {rounds} round(s) keep the interval wider than the threshold, so "
                     f"the baseline needs more rounds: measure it with {repeat}`run --max-rounds 16 "
                     "--rounds-target 0.01` (up to 16 rounds at ±1%).")
        else:
            hint += (f" Re-measuring the current run alone would take about {max(alone)} more round(s) "
                     f"(`run --gate-against --rerun {max(alone)}`).")
            if min(v.rounds_base for v in over_rounds) < BASELINE_ROUNDS:
                hint += (f" A baseline measured in {BASELINE_ROUNDS} rounds or more (`run --repeat "
                         f"{BASELINE_ROUNDS}`) leaves fewer cases undecided.")
    if any(v.apart for v in und):
        hint += (f" Rounds named in brackets read more than {APART:.0%} from the rest of their side: a process "
                 "that ran slow or fast widens the interval, not the code; more rounds dilute it.")
    return f"{len(und)} undecided (INCONCLUSIVE): " + first_few([
        f"{v.key} {format_ratio(v.ratio, threshold=v.threshold)} "
        f"{format_ci(v.ci_low, v.ci_high, threshold=v.threshold)}" + (f" [{v.apart}]" if v.apart else "")
        for v in und], 10) + "." + hint


def gate_markdown(g: GateResult, exit_code: int | None = None) -> str:
    """A gate result as a Markdown section: overall verdict, counts, flagged cases first. ``exit_code``:
    the command's, where it differs from the gate's (``gate --require-all``, ``ab``'s 4): said in the heading,
    as the console's caption says it."""
    counts = ", ".join(f"{g.count(v)} {v.lower()}" for v in CASE_VERDICTS)
    code = ("" if exit_code is None or exit_code == g.exit_code
            else f" (exit {exit_code}; the gate's own: {g.exit_code})")
    lines = [
        f"### solbench gate: {_GATE_ICON[g.overall]} {g.overall}{code}",
        "",
        (f"Measured on {_cell(g.device)}. " if g.device else "")
        + f"{counts}. Regression = whole {g.confidence:.0%} CI of current/baseline median above "
        f"1 + threshold ({threshold_summary(g)}) and a Mann-Whitney test significant "
        f"at {g.alpha:g} after Benjamini-Hochberg; faster = the whole CI below 1/(1 + threshold), "
        f"likewise tested. Broken = failing now (incorrect, error, crashed, timeout, ...), ok in the baseline "
        f"or absent (or skipped) there; still-broken = failing now and in the baseline: not the change's "
        f"doing, yet it fails the gate as broken does; missing = not compared (absent, or skipped for a "
        f"requirement this machine lacks)." + (f" Reruns: {g.reruns}." if g.reruns else "") + rounds_note(g),
        "",
    ]
    if g.fingerprint_diffs:
        lines += ["> ⚠️ Compared across different hardware or software (allowed): "
                  + "; ".join(_cell(d) for d in g.fingerprint_diffs), ""]
    if g.cards:
        lines += [f"> {_cell(g.cards)}", ""]
    if g.load:
        lines += [f"> {_cell(g.load)}", ""]
    ordered = sorted(g.verdicts, key=lambda v: _GATE_ORDER[v.verdict])
    header = ["Case", "Impl", "Baseline", "Current", "Ratio", "CI", "Threshold", "p (adj.)", "Verdict"]
    lines += [*_table(header, "llrrrrrrl", [_gate_row(v) for v in ordered]), ""]
    if g.undecided:
        lines += [f"> {_cell(undecided_note(g))}", ""]
    flagged = [v for v in ordered if v.verdict != "PASS"]  # FASTER too: it is news
    lines += [f"- `{v.key}`: {v.verdict}: {_cell(v.reason)}" for v in flagged]
    return "\n".join(lines).rstrip("\n") + "\n"


def run_markdown(run: RunResult, fast_ps: Sequence[float] = DEFAULT_PS) -> str:
    """A run as Markdown: one table per workload (time, T_SOL, SOL, MFU, MBU, bound, speedup, S), then the
    suite summary (fast_p at ``fast_ps``, mean S) when the run holds suite problems, the legend of the
    marks, and the lines the terminal prints under its tables (why an implementation was not scored, the
    run's notes). A dry run
    (nothing timed) gets its costs instead (:func:`_dry_markdown`)."""
    if run.protocol.timer == "none":
        return _dry_markdown(run)
    env, p = run.environment, run.protocol
    other = peaks_elsewhere(run)
    lines = [f"### solbench run: {_cell(env.device_name)} ({run.spec.id}, {run.spec.source} peaks"
             f"{_cell(f'; {other}') if other else ''})", "",
             f"timer `{p.timer}`{f' (flush {p.flush})' if p.flush else ''}, median of adaptive samples "
             f"(95% CI of the median within ±{p.target_rel_ci * 100:.3g}% or {p.budget_s:g} s), "
             + (f"{threads(p.threads)}, " if p.threads else "")
             + "".join(f"{name} {value}, " for name, value in (("torch", env.torch), ("CUDA", env.cuda),
                                                               ("driver", env.driver)) if value)  # CPU: no CUDA
             + run.created, ""]
    if not run.complete:
        lines += [f"**INCOMPLETE**: stopped after {len(run.cases)} case(s) (interrupted or cancelled).", ""]
    by_workload: dict[str, list[CaseResult]] = {}
    for case in run.cases:
        by_workload.setdefault(case.workload, []).append(case)
    extra = timing_columns(run)
    if extra:
        notes = []
        if "rounds" in extra:
            where = "all in this process (--in-process)" if p.isolation == "in-process" else "each with fresh workers"
            notes.append(f"{rounds_phrase(p)}, {where}; time and ±CI over rounds; rounds: "
                         "count · spread of the round medians (max/min − 1)")
        if "SM MHz" in extra:
            notes.append("SM MHz: clock range over the samples; ⚠n: samples taken under a throttle reason"
                         + ("" if env.clocks_locked is None else
                            f"; clocks {'locked' if env.clocks_locked else 'not locked'}"))
        lines += ["; ".join(notes) + ".", ""]
    for workload, cases in by_workload.items():
        rows = []
        cols = [*extra, *collective_columns(cases)]
        for c in cases:
            params = " ".join(f"{k}={v}" for k, v in c.params.items()) + f" {c.dtype}"
            for r in c.impls:
                rows.append([params, r.name, *_impl_cells(run, c, r), *(extra_cell(e, r) for e in cols)])
        lines += [f"#### {_cell(workload)}", ""]
        lines += _table(["case", "impl", "time", "±CI", "T_SOL", "SOL", "MFU", "MBU", "bound", "speedup", "S", *cols],
                        "llrrrrrrlrr" + "r" * len(cols), rows)
        lines.append("")
    lines += summary_markdown(run, fast_ps)
    key = flags.legend(run)
    if key:
        lines += [key, ""]
    said = [n for n in run_notes(run) if n != key] + list(run.notes)  # as the terminal prints under its tables
    if said:
        lines += [f"- {_cell(note)}" for note in said] + [""]
    return "\n".join(lines)


def _dry_markdown(run: RunResult) -> str:
    """A dry run as Markdown: per workload, each case's FLOPs, bytes, T_SOL and bound (as the console's
    dry table), under a heading that says nothing was measured; no time, timer or sampling settings."""
    lines = [f"### solbench dry run: {_cell(run.environment.device_name)} ({run.spec.id}, {run.spec.source} "
             "peaks)", "", f"Nothing was measured: costs and T_SOL only, {run.created}", ""]
    by_workload: dict[str, list[CaseResult]] = {}
    for case in run.cases:
        by_workload.setdefault(case.workload, []).append(case)
    for workload, cases in by_workload.items():
        lines += [f"#### {_cell(workload)}", ""]
        lines += _table(list(dry_cells.COLUMNS), dry_cells.ALIGN, [dry_cells.cells(c) for c in cases])
        lines.append("")
    lines += [f"- {_cell(note)}" for note in run.notes]
    key = flags.legend(run)
    if key:
        lines += ["", key]
    return "\n".join(lines).rstrip("\n") + "\n"


def _time_cells(run: RunResult, r: ImplResult, t: Timing) -> list[str]:
    """The median and its CI half-width, marked."""
    half = (t.ci_high - t.ci_low) / 2 / t.median
    return [format_seconds(t.median), flags.mark(f"{half:.1%}", flags.result_marks(r, run.protocol))]


def _impl_cells(run: RunResult, c: CaseResult, r: ImplResult) -> list[str]:
    if r.timing is None:
        return [r.status.upper(), "", flags.t_sol(c), "", "", "", c.bound, "", ""]
    if is_part(r):
        return [*_time_cells(run, r, r.timing), flags.t_sol(c), part_label(r), "", "", c.bound, "", ""]
    if r.score is None:  # measured, not scored (INVALID: faster than the least possible time): its time says why
        return [*_time_cells(run, r, r.timing), flags.t_sol(c), r.status.upper(), "", "", c.bound, "", ""]
    s = r.score
    return [*_time_cells(run, r, r.timing),
            flags.t_sol(c, r), flags.mark(_sol(s.sol), flags.over_peak(s.sol, run)),
            flags.mark(format_pct(s.mfu), flags.over_peak(s.mfu, run)),
            flags.mark(format_pct(s.mbu), flags.over_peak(s.mbu, run)), flags.bound(c, r),
            f"{s.speedup:.2f}x" if s.speedup else "", f"{s.s_score:.2f}" if s.s_score is not None else ""]
