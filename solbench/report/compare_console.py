"""Rich tables for ``solbench compare`` and ``solbench gate``. Never prints."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from solbench.analysis.compare import Comparison
from solbench.analysis.gate import CASE_VERDICTS, GateResult
from solbench.report.markdown import rounds_note, side_cell, threshold_cell, threshold_summary
from solbench.report.units import format_ci, format_p, format_percent, format_ratio, format_seconds

__all__ = ["comparison_table", "gate_table"]

_STYLE = {
    "FASTER": "bold green", "SLOWER": "bold red", "SAME": "dim", "INCONCLUSIVE": "yellow",
    "PASS": "green", "REGRESSION": "bold red", "BROKEN": "bold red reverse", "MISSING": "dim",
}
_GATE_ORDER = {v: i for i, v in enumerate(CASE_VERDICTS)}  # BROKEN and REGRESSION first, PASS last


def _sol(x: float | None) -> str:
    return f"{x:.2f}" if x is not None else "—"


def comparison_table(c: Comparison) -> Table:
    """One row per paired key, then one row per key measured on one side only."""
    a, b = c.label_a, c.label_b
    counts = ", ".join(f"{c.count(v)} {v.lower()}" for v in ("FASTER", "SLOWER", "SAME", "INCONCLUSIVE"))
    t = Table(title=Text(f"{b} vs {a}"), title_justify="left",
              caption=f"geomean speedup of {escape(b)} over {escape(a)}: {format_ratio(c.geomean_speedup)} ({counts}); "
                      f"SAME within ±{format_percent(c.threshold)}, alpha {c.alpha:g} (BH)",
              caption_justify="left")
    for col in ("case", a, b, f"{b}/{a}", f"{c.confidence:.0%} CI", f"SOL {a}", f"SOL {b}", "p", "verdict"):
        t.add_column(col, justify="left" if col in ("case", "verdict") else "right")
    for r in c.rows:
        t.add_row(Text(r.key), format_seconds(r.median_a), format_seconds(r.median_b), format_ratio(r.ratio),
                  format_ci(r.ci_low, r.ci_high), _sol(r.sol_a), _sol(r.sol_b), format_p(r.p_value),
                  Text(r.verdict, style=_STYLE[r.verdict]))
    for side, other, keys in ((a, b, c.only_in_a), (b, a, c.only_in_b)):
        for k in keys:
            t.add_row(Text(k), *[""] * 7,
                      Text(f"only in {side} ({other}: {c.other_side.get(k, 'absent')})", style="dim"))
    for k, models in c.not_comparable.items():
        t.add_row(Text(k), *[""] * 7, Text(f"not comparable: other GPU model ({models})", style="dim"))
    return t


def gate_table(g: GateResult) -> Table:
    """One row per key, broken and regressed first; the caption holds the overall verdict."""
    counts = ", ".join(f"{g.count(v)} {v.lower()}" for v in CASE_VERDICTS)
    caption = (f"{g.overall} (exit {g.exit_code}): {counts}; {threshold_summary(g)}; alpha {g.alpha:g} (BH)"
               + (f"; {g.reruns} rerun(s)" if g.reruns else "") + escape(rounds_note(g)))
    if g.fingerprint_diffs:
        caption += "\ncross-hardware (allowed): " + "; ".join(g.fingerprint_diffs)
    t = Table(title="regression gate", title_justify="left", caption=caption, caption_justify="left")
    for col in ("case", "baseline", "current", "ratio", f"{g.confidence:.0%} CI", "threshold",
                "p (adj.)", "verdict", "note"):
        t.add_column(col, justify="left" if col in ("case", "verdict", "note") else "right")
    for v in sorted(g.verdicts, key=lambda v: _GATE_ORDER[v.verdict]):
        note = v.reason if v.verdict in ("BROKEN", "MISSING") else ""
        if v.verdict == "INCONCLUSIVE" and v.more_rounds is not None:
            note = f"needs ~{v.more_rounds} more round(s) per side"
        t.add_row(Text(v.key), side_cell(v.median_base, v.status_base), side_cell(v.median_cur, v.status_cur),
                  format_ratio(v.ratio), format_ci(v.ci_low, v.ci_high), threshold_cell(v), format_p(v.p_adjusted),
                  Text(v.verdict, style=_STYLE[v.verdict]), Text(note, style="dim"))
    return t
