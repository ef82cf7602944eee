"""Table cells describing how a timing was taken: clock range, throttled samples, rounds.

    clock_cell(t)   -> "1755–1980"      SM MHz over the samples (one value: "1980")
                       "1755–1980 ⚠12"  12 samples taken under a throttle reason (power cap,
                                         thermal, hardware slowdown: results.model.THROTTLE_MASK)
    rounds_cell(t)  -> "3 · 2.4%"       3 rounds whose medians differ by 2.4% (max / min - 1)

Empty strings where nothing was recorded (CPU, no NVML, a single round).
"""

from __future__ import annotations

import statistics

from solbench.report.collective_cells import collective_cell
from solbench.results.model import ImplResult, RunResult, Timing

__all__ = ["clock_cell", "extra_cell", "has_clocks", "has_rounds", "round_medians", "rounds_cell", "timing_columns"]


def has_clocks(run: RunResult) -> bool:
    """Whether any timing of the run has per-sample clock readings."""
    return any(r.timing is not None and any(v is not None for v in r.timing.sm_clock_mhz)
               for c in run.cases for r in c.impls)


def has_rounds(run: RunResult) -> bool:
    """Whether any timing of the run was measured in several rounds."""
    return any(r.timing is not None and r.timing.n_rounds > 1 for c in run.cases for r in c.impls)


def timing_columns(run: RunResult) -> tuple[str, ...]:
    """The columns a run's tables add: "rounds" (:func:`rounds_cell`) and "SM MHz" (:func:`clock_cell`),
    each where the run recorded it."""
    return (("rounds",) if has_rounds(run) else ()) + (("SM MHz",) if has_clocks(run) else ())


def extra_cell(column: str, r: ImplResult) -> str:
    """One implementation's cell in a column a table adds: :func:`timing_columns`' or
    :func:`~solbench.report.collective_cells.collective_columns`'."""
    if column == "rounds":
        return rounds_cell(r.timing)
    if column == "SM MHz":
        return clock_cell(r.timing)
    return collective_cell(column, r)


def clock_cell(t: Timing | None) -> str:
    """The SM clock range over the samples in MHz, and how many ran under a throttle reason."""
    if t is None:
        return ""
    clocks = [c for c in t.sm_clock_mhz if c is not None]
    if not clocks:
        return ""
    lo, hi = min(clocks), max(clocks)
    text = str(lo) if lo == hi else f"{lo}–{hi}"
    throttled = sum(t.throttled)
    return text + (f" ⚠{throttled}" if throttled else "")


def round_medians(t: Timing) -> list[float]:
    """The median of each round, in order of first appearance."""
    groups: dict[int, list[float]] = {}
    for label, x in zip(t.rounds or (0,) * t.n, t.samples, strict=True):
        groups.setdefault(label, []).append(x)
    return [statistics.median(g) for g in groups.values()]


def rounds_cell(t: Timing | None) -> str:
    """How many rounds, and how far apart their medians are (max / min - 1)."""
    if t is None or t.n_rounds < 2:
        return ""
    meds = round_medians(t)
    spread = max(meds) / min(meds) - 1.0 if min(meds) > 0 else float("inf")
    return f"{len(meds)} · {spread:.1%}"
