"""Pool the samples of a re-measurement into a run, key by key (for ``gate_with_rerun``).

Pure: no I/O, no device libraries. Times are seconds.
"""

from __future__ import annotations

from dataclasses import replace

from solbench.analysis import stats
from solbench.compare import samples
from solbench.results.model import FAILED_STATUSES, CaseResult, ImplResult, RunResult, Score, Timing

__all__ = ["merge_samples"]


def _pooled(old: ImplResult, new: ImplResult) -> ImplResult:
    pooled = samples(old) + samples(new)
    med = stats.median(pooled)
    low, high = stats.median_ci(pooled)
    score = old.score
    if score is not None and med > 0 and old.timing is not None and old.timing.median > 0:
        k = old.timing.median / med  # every T-proportional figure scales by T_old / T_new
        score = Score(sol=score.sol * k, mfu=None if score.mfu is None else score.mfu * k,
                      mbu=score.mbu * k, achieved_flops=score.achieved_flops * k,
                      achieved_bandwidth=score.achieved_bandwidth * k, speedup=None, s_score=None)
    return replace(old, timing=Timing(pooled, med, low, high, "pooled"), score=score)


def _merged(r: ImplResult, new: ImplResult | None) -> ImplResult:
    if new is None:
        return r
    if new.status in FAILED_STATUSES:
        return new  # failing on a second try is a failure, whatever the first try did
    if new.status != "ok" or not samples(new):
        return r  # skipped, or nothing usable re-measured: keep what we had
    return _pooled(r, new) if r.status == "ok" and samples(r) else new


def _merge_case(case: CaseResult, fresh: dict[str, ImplResult]) -> CaseResult:
    impls = tuple(_merged(r, fresh.get(f"{case.case_id}/{r.name}")) for r in case.impls)
    return replace(case, impls=impls)


def merge_samples(cur: RunResult, fresh: RunResult, keys: list[str] | None = None) -> RunResult:
    """``cur`` with the samples of ``fresh`` appended, key by key (``case_id/impl``).

    Only keys in ``keys`` are merged (all of ``fresh`` when None). For each merged
    key measured "ok" on both: samples are concatenated, median and its
    order-statistic CI recomputed (``analysis.stats``), ``stop_reason`` becomes
    ``"pooled"``, and the T-proportional scores (sol, mfu, mbu, achieved FLOP/s
    and bytes/s) are rescaled to the pooled median; ``speedup`` and ``s_score``
    depend on another implementation's time and are set to None.

    A re-measurement that failed (a status in ``FAILED_STATUSES``: incorrect,
    error, crashed, timeout, ...) replaces the current result, so the gate
    reports the case BROKEN rather than keeping the earlier good samples; one
    that is "skipped" or has no samples leaves the current result untouched;
    one that is "ok" where the current is not replaces it.
    """
    wanted = None if keys is None else set(keys)
    fresh_by_key = {f"{c.case_id}/{r.name}": r for c in fresh.cases for r in c.impls
                    if wanted is None or f"{c.case_id}/{r.name}" in wanted}
    return replace(cur, cases=tuple(_merge_case(c, fresh_by_key) for c in cur.cases))
