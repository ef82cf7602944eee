"""Hand-built result records for unit tests (no device, no files).

    from tests.unit.factories import make_run

    run = make_run({"gemm-1024": {"torch": [1e-3] * 30, "fused": [8e-4] * 30}})
    run = make_run(..., environment=make_env(driver="560.1"), workloads={"gemm-1024": "gemm"})
    run = make_run(..., statuses={"gemm-1024/fused": "error"}, messages={"gemm-1024/fused": "boom"})
    run = make_run(..., gate_thresholds={"gemm": 0.1})   # as `run` records them
    run = with_samples(real_run, lambda impl: [1e-9] * 30)  # a real run's fingerprint, synthetic times
    run = as_suite(make_run(...), "kernelbench")  # imported problems, scored against "baseline"
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from solbench.analysis.scoring import ImplPeaks, score_impls
from solbench.analysis.sol import speed_of_light
from solbench.results.model import (
    CaseResult,
    Cost,
    Environment,
    ImplResult,
    Peaks,
    Protocol,
    RunResult,
    Score,
    SpecRef,
    Status,
    Timing,
)

T_SOL = 1e-4  # seconds: the speed of light every factory case is scored against


def make_env(**overrides: object) -> Environment:
    """An H100-like environment; override any field."""
    fields: dict[str, object] = dict(
        device_kind="cuda", device_name="NVIDIA H100 80GB HBM3", spec_id="h100-sxm",
        driver="550.54.15", cuda="12.4", torch="2.4.1+cu124", python="3.11.7",
    )
    fields.update(overrides)
    return Environment(**fields)  # type: ignore[arg-type]


def make_timing(samples: Sequence[float], rounds: int = 1) -> Timing:
    """Timing with the median and a rough order-statistic CI of the samples; ``rounds`` > 1 labels
    them as that many rounds (processes) of consecutive samples."""
    s = tuple(float(x) for x in samples)
    if not s:
        return Timing((), 0.0, 0.0, 0.0, "max_samples")
    srt = sorted(s)
    k = max(len(s) // 4, 0)
    labels = tuple(i * rounds // len(s) for i in range(len(s))) if rounds > 1 else ()
    return Timing(s, statistics.median(s), srt[k], srt[-1 - k], "converged", rounds=labels)


def make_impl(name: str, samples: Sequence[float], status: Status = "ok",
              message: str = "synthetic failure", rounds: int = 1) -> ImplResult:
    """An implementation result; failed statuses carry no timing or score."""
    if status != "ok":
        return ImplResult(name=name, status=status, message=message, log_tail="last line of the worker")
    timing = make_timing(samples, rounds)
    med = timing.median or 1.0
    score = Score(sol=T_SOL / med, mfu=None, mbu=T_SOL / med, achieved_flops=1e12,
                  achieved_bandwidth=1e12, speedup=None, s_score=None)
    return ImplResult(name=name, status="ok", timing=timing, score=score)


def make_case(case_id: str, impls: Mapping[str, Sequence[float]], *, workload: str = "demo",
              statuses: Mapping[str, Status] | None = None,
              messages: Mapping[str, str] | None = None, rounds: int = 1) -> CaseResult:
    """A case whose implementations have the given samples (seconds), in ``rounds`` rounds."""
    statuses, messages = statuses or {}, messages or {}
    cost = Cost(dtype="bf16", tensor_flops=2e9, vector_flops=0.0, fused_bytes=1e8, unfused_bytes=1e8)
    peaks = Peaks(tensor_flops=989e12, vector_flops=67e12, bandwidth=3.35e12, source="datasheet")
    return CaseResult(
        workload=workload, case_id=case_id, params={"n": 1024}, dtype="bf16", cost=cost,
        peaks=peaks, t_sol=T_SOL, bound="memory", intensity=20.0,
        impls=tuple(make_impl(name, s, statuses.get(f"{case_id}/{name}", "ok"),
                              messages.get(f"{case_id}/{name}", "synthetic failure"), rounds)
                    for name, s in impls.items()),
    )


def make_run(cases: Mapping[str, Mapping[str, Sequence[float]]], *,
             environment: Environment | None = None, workloads: Mapping[str, str] | None = None,
             statuses: Mapping[str, Status] | None = None, messages: Mapping[str, str] | None = None,
             gate_thresholds: Mapping[str, float] | None = None, rounds: int = 1) -> RunResult:
    """A RunResult from ``{case_id: {impl: samples}}``.

    ``workloads`` maps case_id to workload name (default "demo"); ``statuses``
    maps ``"case_id/impl"`` to a non-ok status and ``messages`` to its message;
    ``gate_thresholds`` maps workload names to the thresholds the run recorded; ``rounds`` > 1
    labels each implementation's samples as that many rounds.
    """
    workloads = workloads or {}
    protocol = Protocol(timer="cold", warmup=3, min_samples=10, max_samples=100,
                        target_rel_ci=0.005, budget_s=1.0, input_sets=1)
    return RunResult(
        created="2025-01-01T00:00:00Z", environment=environment or make_env(),
        spec=SpecRef(id="h100-sxm", name="H100 SXM", source="datasheet"), protocol=protocol,
        cases=tuple(make_case(cid, impls, workload=workloads.get(cid, "demo"), statuses=statuses,
                              messages=messages, rounds=rounds)
                    for cid, impls in cases.items()),
        gate_thresholds=dict(gate_thresholds or {}),
    )


def with_samples(run: RunResult, samples_of: Callable[[ImplResult], Sequence[float] | None]) -> RunResult:
    """``run`` with every implementation's samples replaced by ``samples_of(impl)``.

    Keeps everything else (environment fingerprint, case ids, statuses), so a real run can
    serve as a synthetic baseline of known times. ``samples_of`` returning None leaves that
    implementation as it is; an implementation given samples becomes "ok".
    """
    def swap(r: ImplResult) -> ImplResult:
        new = samples_of(r)
        if new is None:
            return r
        return replace(make_impl(r.name, new), correctness=r.correctness, protocol=r.protocol)

    return replace(run, cases=tuple(replace(c, impls=tuple(swap(r) for r in c.impls)) for c in run.cases))


def noisy(rng: np.random.Generator, n: int, median: float = 1e-3, rel_noise: float = 0.01) -> list[float]:
    """n lognormal samples with the given median and ~rel_noise relative spread."""
    return list(median * rng.lognormal(0.0, rel_noise, size=n))


def as_suite(run: RunResult, suite: str, *, case_ids: Sequence[str] | None = None,
             baseline: str = "baseline") -> RunResult:
    """``run`` with its cases (or those in ``case_ids``) made imported problems of ``suite``: a
    provenance ``source``, a traced cost, ``baseline`` named, and every ok implementation scored by
    :func:`solbench.analysis.scoring.score_impls` (speedup and S against the baseline's median)."""
    def imported(c: CaseResult) -> CaseResult:
        if case_ids is not None and c.case_id not in case_ids:
            return c
        cost = replace(c.cost, source="traced")
        peaks = {r.name: ImplPeaks(c.peaks, c.peaks) for r in c.impls}
        return replace(c, source=f"{suite}:/problems/{c.case_id}.py@{'0' * 64}", baseline=baseline, cost=cost,
                       t_sol=speed_of_light(cost, c.peaks).t_sol, impls=score_impls(cost, c.impls, peaks, baseline,
                                                                                     "cuda"))

    return replace(run, cases=tuple(imported(c) for c in run.cases))


def kept_as_given(unit: Any, case: Any, impls: Sequence[ImplResult]) -> CaseResult:
    """A run loop's ``score`` callback that keeps a case's results as they came (nothing scored)."""
    return replace(make_case(case.id, {}, workload=unit.spec.name), impls=tuple(impls))


class RoundCounter:
    """An executor stand-in for the run loop that counts rounds (each ``retire`` ends one) and starts and
    closes nothing; a subclass answers ``run``."""

    def __init__(self) -> None:
        self.round = 0

    def prestart(self, keys: Any) -> None:
        pass

    def retire(self, keys: Any) -> None:
        self.round += 1

    def close(self) -> None:
        pass
