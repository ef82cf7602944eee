"""Marks for numbers that are less certain than they look, shared by every run table.

    time_marks(t, target)   "~"  the 95% CI of the median is wider than its target (ci_target: ±1% in one round,
                                 the rounds target, ±2% by default on a GPU, over rounds that were added to)
                            "†"  sampling stopped on the budget or the sample cap, not converged
    result_marks(r, p)      those, and "§" where the rounds ran different kernels (a library chose
                            another kernel, or launched one with another grid, in some processes:
                            ``protocol.kernels_by_round``, ``protocol.kernel_shapes_by_round``)
    over_peak(x, run)       "!"  SOL above 1 (or MFU/MBU above 100%) against *measured* peaks:
                                 the ceiling measurement, not the hardware, is what was beaten
    traced(case)            "‡"  on T_SOL: the cost was traced (what the reference executes), which
                                 can exceed the least work, so T_SOL can be high and no INVALID floor
                                 applies (:mod:`solbench.analysis.scoring`)
    t_sol(case, r)          "*"  on T_SOL: the implementation's own (another dtype's peak, ``peak_dtype``,
                                 or its own bytes, ``input_dtypes``: an FP8 weight made in set-up), which its
                                 SOL, MFU and MBU are against; the case's T_SOL otherwise
    legend(run)             one line explaining the marks the run's tables use (empty: none)

A mark follows the number (``"15.8 ms ±357.8% ~†"``, ``"2.07 !"``); the legend is printed under the
tables, so that no uncertain number is shown as plain fact.
"""

from __future__ import annotations

from solbench.analysis.compare import measured_peaks, own_t_sol
from solbench.report.units import format_seconds
from solbench.results.model import CaseResult, ImplResult, Protocol, RunResult, Timing

__all__ = ["ABOVE", "KERNELS", "OWN", "STOPPED", "TRACED", "WIDE", "above", "above_legend", "bound", "ci_target",
           "legend", "mark", "over_peak", "over_rounds", "own", "pooled", "result_marks", "t_sol", "time_marks",
           "traced"]

WIDE = "~"
STOPPED = "†"
ABOVE = "!"
TRACED = "‡"
KERNELS = "§"
OWN = "*"
_SLACK = 1.0 + 1e-9  # a CI exactly at the target converged


def half_width(t: Timing) -> float:
    """The CI half-width as a fraction of the median (0 for a zero median)."""
    return (t.ci_high - t.ci_low) / 2 / t.median if t.median else 0.0


def time_marks(t: Timing | None, target: float) -> str:
    """``~`` when the CI is wider than ``target``, ``†`` when sampling did not converge."""
    if t is None:
        return ""
    marks = WIDE if target > 0 and half_width(t) > target * _SLACK else ""
    if any(part not in ("converged", "allocated", "") for part in t.stop_reason.split("+")):  # "converged+budget"
        marks += STOPPED
    return marks


def pooled(t: Timing | None) -> bool:
    """Whether ``t``'s CI is over rounds (its samples came from more than one round)."""
    return t is not None and len(set(t.rounds)) > 1


def over_rounds(t: Timing | None, p: Protocol) -> bool:
    """Whether ``t``'s CI is over rounds that were added to points wider than ``rounds_target``."""
    return pooled(t) and p.rounds_target > 0


def ci_target(t: Timing | None, p: Protocol) -> float:
    """The CI half-width ``t`` aimed at: the rounds target where its CI is over added rounds
    (:func:`over_rounds`; ``rounds_target``: ±2% by default on a GPU), else the sampling target of one
    round (``target_rel_ci``)."""
    return p.rounds_target if over_rounds(t, p) else p.target_rel_ci


def result_marks(r: ImplResult, p: Protocol) -> str:
    """:func:`time_marks` of ``r``'s timing against its target (:func:`ci_target`), then ``§`` where its
    rounds ran different kernels or launch shapes."""
    differ = "kernels_by_round" in r.protocol or "kernel_shapes_by_round" in r.protocol
    return time_marks(r.timing, ci_target(r.timing, p)) + (KERNELS if differ else "")


def over_peak(value: float | None, run: RunResult) -> str:
    """``!`` for a fraction of the peak above 1 where the peaks are measured, else nothing."""
    return above(value, measured_peaks(run))


def above(value: float | None, measured: bool | str) -> str:
    """``!`` for a fraction of the peak above 1 against ``measured`` peaks (True, or their id), else nothing."""
    return ABOVE if value is not None and value > 1.0 and measured else ""


def above_legend(spec_id: str) -> str:
    """What ``!`` means, for peaks ``spec_id`` measured on the host."""
    return (f"{ABOVE} above 1 (100%) against peaks measured on this host ({spec_id}): "
            "the peak measurement was beaten, not the hardware; not a speed-of-light result")


def traced(case: CaseResult) -> str:
    """``‡`` for a case whose cost was traced rather than given analytically, else nothing."""
    return TRACED if case.cost.source == "traced" else ""


def own(case: CaseResult, r: ImplResult | None) -> bool:
    """Whether ``r`` is scored against a T_SOL of its own, not the case's (``Score.t_sol``)."""
    return r is not None and own_t_sol(r, case.t_sol)


def t_sol(case: CaseResult, r: ImplResult | None = None) -> str:
    """The T_SOL ``r`` is scored against, formatted: the case's, with ``‡`` when its cost was traced,
    or ``r``'s own with ``*``."""
    if own(case, r):
        return mark(format_seconds(r.score.t_sol), traced(case) + OWN)  # type: ignore[union-attr]
    return mark(format_seconds(case.t_sol), traced(case))


def bound(case: CaseResult, r: ImplResult | None = None) -> str:
    """The bound of the T_SOL ``r`` is scored against (:func:`t_sol`)."""
    s = r.score if r is not None else None
    return s.bound if own(case, r) and s is not None and s.bound else case.bound


def mark(text: str, marks: str) -> str:
    """``text`` followed by its marks, if any."""
    return f"{text} {marks}" if marks else text


def _impls(run: RunResult) -> list[ImplResult]:
    return [r for c in run.cases for r in c.impls if r.timing is not None]


def legend(run: RunResult) -> str:
    """The marks used anywhere in ``run``'s tables, explained in one line (empty: none used)."""
    p = run.protocol
    impls = _impls(run)
    marks = "".join(result_marks(r, p) for r in impls)
    beaten = any(over_peak(v, run) for r in impls if r.score is not None
                for v in (r.score.sol, r.score.mfu, r.score.mbu))
    parts = []
    if WIDE in marks:
        one, over = f"±{p.target_rel_ci * 100:.3g}%", f"±{p.rounds_target * 100:.3g}%"
        kinds = {over_rounds(r.timing, p) for r in impls if WIDE in time_marks(r.timing, ci_target(r.timing, p))}
        parts.append(f"{WIDE} the 95% CI is wider than its target ({one} in one round, {over} over rounds)"
                     if kinds == {True, False} else
                     f"{WIDE} the 95% CI over rounds is wider than the rounds target {over}" if kinds == {True} else
                     f"{WIDE} the 95% CI is wider than the target {one}")
    if STOPPED in marks:
        parts.append(f"{STOPPED} sampling stopped on the budget ({p.budget_s:g} s) or the sample cap "
                     f"({p.max_samples}) before the CI reached the target")
    if KERNELS in marks:
        parts.append(f"{KERNELS} the rounds ran different kernels (a library chose another kernel, or "
                     "another grid for it, in some processes; each round's: protocol.kernels_by_round, "
                     "kernel_shapes_by_round): the median mixes them")
    if beaten:
        parts.append(above_legend(run.spec.id))
    if any(own(c, r) for c in run.cases for r in c.impls):
        parts.append(f"{OWN} the implementation's own T_SOL and bound (another dtype's peak or its own bytes: an "
                     "input made once in set-up, as an FP8 weight), which its SOL, MFU and MBU are against")
    if any(traced(c) for c in run.cases):
        parts.append(f"{TRACED} T_SOL from a traced cost (what the reference executes, counted on the meta "
                     "device): it can exceed the least work needed, so T_SOL and SOL can read high, and no "
                     "INVALID floor is applied")
    return "; ".join(parts) + "." if parts else ""
