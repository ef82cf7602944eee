"""Rich tables for ``solbench compare`` and ``solbench gate``. Never prints."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from solbench.compare import Comparison
from solbench.gate import GateResult
from solbench.report.units import format_ci, format_p, format_percent, format_ratio, format_seconds

__all__ = ["comparison_table", "gate_table"]

_STYLE = {
    "FASTER": "bold green", "SLOWER": "bold red", "SAME": "dim", "INCONCLUSIVE": "yellow",
    "PASS": "green", "REGRESSION": "bold red", "MISSING": "dim",
}
_GATE_ORDER = {"REGRESSION": 0, "INCONCLUSIVE": 1, "MISSING": 2, "PASS": 3}


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
    for side, keys in ((a, c.only_in_a), (b, c.only_in_b)):
        for k in keys:
            t.add_row(Text(k), *[""] * 7, Text(f"only in {side}", style="dim"))
    return t


def gate_table(g: GateResult) -> Table:
    """One row per key, regressions first; the caption holds the overall verdict."""
    counts = ", ".join(f"{g.count(v)} {v.lower()}" for v in ("REGRESSION", "INCONCLUSIVE", "PASS", "MISSING"))
    caption = (f"{g.overall} (exit {g.exit_code}): {counts}; alpha {g.alpha:g} (BH)"
               + (f"; {g.reruns} rerun(s)" if g.reruns else ""))
    if g.fingerprint_diffs:
        caption += "\ncross-hardware (allowed): " + "; ".join(g.fingerprint_diffs)
    t = Table(title="regression gate", title_justify="left", caption=caption, caption_justify="left")
    for col in ("case", "baseline", "current", "ratio", f"{g.confidence:.0%} CI", "threshold",
                "p (adj.)", "verdict"):
        t.add_column(col, justify="left" if col in ("case", "verdict") else "right")
    for v in sorted(g.verdicts, key=lambda v: _GATE_ORDER[v.verdict]):
        t.add_row(Text(v.key), format_seconds(v.median_base), format_seconds(v.median_cur), format_ratio(v.ratio),
                  format_ci(v.ci_low, v.ci_high), f"+{format_percent(v.threshold)}",
                  format_p(v.p_adjusted), Text(v.verdict, style=_STYLE[v.verdict]))
    return t
