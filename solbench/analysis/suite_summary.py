"""Suite summaries: KernelBench's fast_p and the mean SOL-ExecBench score S, per implementation. Pure.

Over the cases of one suite in a run (``CaseResult.suite``: "kernelbench", "sol-execbench"; native
cases are left out). A case is one problem at one size: a KernelBench problem is one case, a
SOL-ExecBench problem one case per line of its ``workload.jsonl``. Each case counts once.

fast_p (KernelBench: Ouyang et al. 2025, "KernelBench: Can LLMs Write Efficient GPU Kernels?",
arXiv:2502.10517; ``fastp`` in the repository's ``src/score.py``): the fraction of the N cases on which the
implementation is correct AND faster than the baseline by more than a factor p::

    fast_p = (1 / N) · #{ i : correct_i  and  T_baseline,i / T_i > p }

N is every case of the suite in the run, so an implementation that failed (incorrect, crashed,
error, timeout, oom, reward_hack, INVALID, skipped) or has no result on a case counts as not fast
there, as in KernelBench, where a problem without a working kernel counts against it. fast_0 is
the fraction correct *with a baseline time*; fast_1 the fraction correct and faster than the
baseline. The comparison is strict (a speedup of exactly p is not fast), as in KernelBench.

Cases without a baseline time (the baseline failed, was not run, or the workload names none):
no speedup is known, so the implementation counts as not fast for every p (p = 0 included), and
the case is left out of the mean S; ``no_baseline`` counts them so that a low fast_p says why.

INVALID (a median below the physically possible floor, see :mod:`solbench.analysis.scoring`)
is a failure: not fast, S = 0. The floor applies only to analytic costs; imported problems have
traced costs, which are not floored, so their cases are INVALID only by an explicit analytic cost.

Mean S (SOL-ExecBench): per case S = 1 / (1 + (T - T_SOL) / (T_baseline - T_SOL)), already on
each scored implementation (:func:`solbench.analysis.sol.s_score`: 0.5 at the baseline's time,
1 at T_SOL). The mean is over the cases with a baseline time; there a failed or missing
implementation scores 0 (solbench's convention: failing must not raise the mean). ``mean_s`` is
None when no case has a baseline time.

The baseline itself is not summarised (its speedup is 1 and its S 0.5 by definition).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from solbench.results.model import CaseResult, RunResult

__all__ = ["DEFAULT_PS", "FastP", "SuiteImplSummary", "suite_summary"]

DEFAULT_PS: tuple[float, ...] = (0.0, 1.0)


@dataclass(frozen=True)
class FastP:
    """fast_p at one p: ``count`` of the suite's ``cases`` correct and faster than the baseline by > p."""

    p: float
    count: int
    fraction: float  # count / cases


@dataclass(frozen=True)
class SuiteImplSummary:
    """One implementation over one suite's cases in a run."""

    suite: str
    impl: str
    cases: int  # the suite's cases in the run: the denominator of fast_p
    correct: int  # cases where the implementation's status is ok
    failed: int  # cases where it has a result that is not ok (INVALID and skipped included)
    missing: int  # cases without a result of this implementation
    no_baseline: int  # cases without a baseline time: not fast, left out of the mean S
    fast: tuple[FastP, ...]
    mean_s: float | None  # over the cases with a baseline time (failed or missing: 0); None: none
    s_cases: int  # how many cases the mean S is over

    def fast_at(self, p: float) -> FastP | None:
        return next((f for f in self.fast if f.p == p), None)


def suite_summary(run: RunResult, ps: Sequence[float] = DEFAULT_PS) -> tuple[SuiteImplSummary, ...]:
    """fast_p for each p in ``ps`` and the mean S, per suite and implementation (see the module
    docstring). Suites in order of their first case, implementations in order of first appearance;
    empty when the run holds no suite cases."""
    if any(p < 0 for p in ps):
        raise ValueError(f"fast_p needs p >= 0, got {min(ps)}")
    by_suite: dict[str, list[CaseResult]] = {}
    for c in run.cases:
        if c.suite:
            by_suite.setdefault(c.suite, []).append(c)
    out = []
    for suite, cases in by_suite.items():
        baselines = {c.baseline for c in cases if c.baseline}
        names = list(dict.fromkeys(r.name for c in cases for r in c.impls if r.name not in baselines))
        out += [_one(suite, name, cases, tuple(sorted(set(ps)))) for name in names]
    return tuple(out)


def _baseline_time(case: CaseResult) -> float | None:
    base = case.impl(case.baseline) if case.baseline else None
    if base is None or base.status != "ok" or base.timing is None:
        return None
    return base.timing.median


def _one(suite: str, name: str, cases: Sequence[CaseResult], ps: tuple[float, ...]) -> SuiteImplSummary:
    correct = failed = missing = no_base = 0
    fast = dict.fromkeys(ps, 0)
    s_values: list[float] = []
    for c in cases:
        r = c.impl(name)
        has_base = _baseline_time(c) is not None
        no_base += not has_base
        if r is None:
            missing += 1
        elif r.status != "ok":
            failed += 1
        else:
            correct += 1
        score = r.score if r is not None and r.status == "ok" else None
        speedup = score.speedup if score is not None and has_base else None
        for p in ps:
            fast[p] += speedup is not None and speedup > p
        if has_base:
            s = score.s_score if score is not None else None
            s_values.append(s if s is not None else 0.0)
    n = len(cases)
    return SuiteImplSummary(
        suite=suite, impl=name, cases=n, correct=correct, failed=failed, missing=missing, no_baseline=no_base,
        fast=tuple(FastP(p, k, k / n if n else 0.0) for p, k in fast.items()),
        mean_s=sum(s_values) / len(s_values) if s_values else None, s_cases=len(s_values))
