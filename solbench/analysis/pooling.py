"""Put samples measured apart together, key by key: rounds of one run, several runs of one side,
and re-measurements for the gate.

Pure: no I/O, no device libraries. Times are seconds.

    merge_rounds(results)   one implementation measured in R rounds -> one result whose Timing
                            labels each sample with its round; median and CI over rounds
                            (analysis.rounds: grand median, two-level bootstrap)
    combine_runs(runs)      several runs of one side (``gate --baseline a.json b.json``) -> one run;
                            every round of every run is a round of the result
    merge_samples(cur, new) a re-measurement pooled into the run it re-measures (run --gate-against --rerun)
    run_offsets(runs)       several runs of one tree -> the sd of a run's own offset (the gate's run_sd)
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import chain
from typing import Any

import numpy as np

from solbench.analysis import stats
from solbench.analysis.rounds import group_by_round, round_medians, summarize
from solbench.results.model import FAILED_STATUSES, CaseResult, ImplResult, RunResult, Score, Timing

__all__ = ["RunOffsets", "combine_runs", "concat_timings", "merge_rounds", "merge_samples", "merges", "rounds_apart",
           "run_offsets", "samples"]

_CLOCKS = ("sm_clock_mhz", "mem_clock_mhz", "power_w", "throttle_reasons")


def samples(r: ImplResult) -> tuple[float, ...]:
    """Raw timing samples of a result (empty when it has no timing)."""
    return r.timing.samples if r.timing is not None else ()


def _labels(t: Timing) -> tuple[int, ...]:
    return t.rounds if t.rounds else (0,) * t.n


def _column(timings: Sequence[Timing], name: str) -> tuple[Any, ...]:
    """One clock column over several timings; padded with None where a timing has none."""
    if not any(getattr(t, name) for t in timings):
        return ()
    return tuple(v for t in timings for v in (getattr(t, name) or (None,) * t.n))


def concat_timings(timings: Sequence[Timing], labels: Sequence[Sequence[int]],
                   stop_reason: str | None = None) -> Timing:
    """Several timings as one: samples and clock readings concatenated, ``labels[i]`` the round of
    each sample of ``timings[i]``.

    One distinct label: no labels are kept, and median and CI are the single-run ones (median,
    order-statistic CI). Several: median and CI over rounds (:func:`analysis.rounds.summarize`).
    """
    pooled = tuple(chain.from_iterable(t.samples for t in timings))
    flat = tuple(np.fromiter(chain.from_iterable(labels), dtype=np.int64).tolist())
    if len(flat) != len(pooled):
        raise ValueError(f"{len(flat)} round labels for {len(pooled)} samples")
    reasons = [t.stop_reason for t in timings]
    reason = stop_reason or "+".join(dict.fromkeys(reasons))
    clocks = {name: _column(timings, name) for name in _CLOCKS}
    if len(set(flat)) <= 1:
        low, high = stats.median_ci(pooled)
        return Timing(pooled, stats.median(pooled), low, high, reason, **clocks)
    s = summarize(pooled, flat)
    return Timing(pooled, s.median, s.ci_low, s.ci_high, reason, rounds=flat, **clocks)


def _rescaled(score: Score | None, old: float, new: float) -> Score | None:
    """Every T-proportional figure scales by T_old / T_new; speedup and S depend on another time."""
    if score is None or new <= 0 or old <= 0:
        return score
    k = old / new

    def scaled(x: float | None) -> float | None:
        return None if x is None else x * k

    return replace(score, sol=score.sol * k, mfu=scaled(score.mfu), mbu=score.mbu * k,
                   achieved_flops=score.achieved_flops * k, achieved_bandwidth=score.achieved_bandwidth * k,
                   speedup=None, s_score=None, algbw=scaled(score.algbw), busbw=scaled(score.busbw), overlap=None,
                   floor_fraction=scaled(score.floor_fraction))


def _measured(r: ImplResult) -> bool:
    return r.status == "ok" and bool(samples(r))


# counters a worker records per task (measure.worker): summed over rounds
COUNTED = ("compile_cache_hits", "compile_cache_misses", "cublaslt_tuned", "cublaslt_reused", "check_extra_calls")
# the seconds of a task's phases (measure.worker.Phases, gpu_busy, the graph check): summed over rounds,
# as task_s is, so that a point's phases add up to its task_s and not to its first round's
PHASE_SECONDS = ("setup_s", "setup_alone_s", "check_s", "check_alone_s", "sample_s", "after_s", "gpu_busy_s",
                 "capture_s")


def _combine(results: Sequence[ImplResult], labels: Sequence[Callable[[Timing], tuple[int, ...]]],
             what: str, of: int | None = None) -> ImplResult:
    """One result from several of the same implementation (rounds, or runs); ``of``: how many there
    were in all, where a failure ended the implementation's before the last (the message says so)."""
    total = max(of or 0, len(results))
    for i, r in enumerate(results):
        if r.status in FAILED_STATUSES:  # failing once is a failure, whatever the others did
            return replace(r, message=f"{what} {i + 1} of {total}: {r.message}" if total > 1 else r.message)
    if len(results) == 1:
        return results[0]
    ok = [(r, lab) for r, lab in zip(results, labels, strict=True) if _measured(r)]
    if not ok:
        return results[0]
    first = ok[0][0]
    assert first.timing is not None
    timings = [r.timing for r, _ in ok if r.timing is not None]
    timing = concat_timings(timings, [lab(t) for t, (_, lab) in zip(timings, ok, strict=True)])
    task_s = sum(float(r.protocol.get("task_s", 0.0)) for r, _ in ok)
    protocol = {**first.protocol, "rounds": timing.n_rounds}
    for key in COUNTED:  # set-up work done or taken from the run's caches, over every round
        if any(key in r.protocol for r, _ in ok):
            protocol[key] = sum(int(r.protocol.get(key, 0)) for r, _ in ok)
    for key in PHASE_SECONDS:
        spent = [r.protocol[key] for r, _ in ok if isinstance(r.protocol.get(key), int | float)]
        if spent:
            protocol[key] = round(sum(spent), 6)
    caps = [r.protocol["samples_cap"] for r, _ in ok if "samples_cap" in r.protocol]
    if caps:  # the samples allocated to each round after the first (analysis.allocation): the last
        protocol["samples_cap"] = caps[-1]
    light = sum(r.protocol.get("checks") == "light" for r, _ in ok)
    if light:  # rounds after the first, checked lighter (solbench.measure.worker)
        protocol["light_rounds"] = light
    if "task_s" in first.protocol:
        protocol["task_s"] = round(task_s, 4)
    launches = [str(r.protocol.get("launch", "stream")) for r, _ in ok]
    if "launch" in first.protocol and len(set(launches)) > 1:  # a capture failed in some of them only
        protocol["launch"] = "mixed"
        protocol[f"launch_by_{what}"] = json.dumps(launches)
        protocol["graph_fallback"] = next(str(r.protocol["graph_fallback"]) for r, _ in ok
                                          if r.protocol.get("graph_fallback"))
    one_queue = sum(r.protocol.get("work_queues") == "1" for r, _ in ok)
    if one_queue:  # rounds whose worker's context had one work queue (solbench.measure.queues)
        protocol[f"one_queue_{what}s"] = one_queue
    streams = [int(r.protocol["streams"]) for r, _ in ok if "streams" in r.protocol]
    if streams:  # the most streams CUPTI saw the checked calls use, in any of them
        protocol["streams"] = max(streams)
    protocol.update(_beside_faults([r.protocol for r, _ in ok]))
    peaks = [int(r.protocol["memory_peak_bytes"]) for r, _ in ok if "memory_peak_bytes" in r.protocol]
    if peaks:  # the most device memory any of them held (solbench.measure.worker.peak_reserved)
        protocol["memory_peak_bytes"] = max(peaks)
    for key in ("kernels", "kernel_shapes"):
        chosen = [r.protocol.get(key) for r, _ in ok]
        if all(isinstance(k, str) for k in chosen) and len(set(chosen)) > 1:
            # a library chose other kernels, or launched them with other grids, in some processes:
            # each one's, in order, as a JSON list (protocol values are scalars)
            protocol[f"{key}_by_{what}"] = json.dumps(chosen)
    return replace(first, timing=timing, score=_rescaled(first.score, first.timing.median, timing.median),
                   protocol=protocol)


def merge_rounds(results: Sequence[ImplResult], of: int | None = None) -> ImplResult:
    """One implementation on one case measured in rounds (``results[i]`` is round i) -> one result.

    A failure in any round is the result (its message says which round, of ``of`` where the case
    had more rounds than the implementation: a failure ends its rounds, solbench.execute.session).
    A round skipped where another was measured is an ``error`` (:func:`_skipped_beside_measured`).
    Rounds without samples (skipped in every round) are left out; the rest are concatenated with
    round labels ``0 .. R-1``, and the median and CI are taken over rounds. T-proportional scores
    are rescaled to the new median (the caller scores the case again anyway).
    """
    if not results:
        raise ValueError("no rounds")
    if not any(r.status in FAILED_STATUSES for r in results):
        mixed = _skipped_beside_measured(results, of)
        if mixed is not None:
            return mixed
    labels = [_constant(i) for i in range(len(results))]
    return _combine(results, labels, "round", of)


def _skipped_beside_measured(results: Sequence[ImplResult], of: int | None) -> ImplResult | None:
    """The first skipped round as an ``error``, where another round of the same point was measured; else None.

    The rounds of one run are made on one device with the same code and inputs, so a requirement
    cannot be met in one and missing in another. Left out of the merge, a skipped round let an
    implementation choose its rounds: in set-up, before any call of it runs (where a ``DeviceError``
    is still a skip, solbench.measure.worker), it can time its own kernels and say it needs another
    GPU whenever the round looks slow, keeping the fast ones (with ``--max-rounds`` the run even added
    rounds for those it dropped)."""
    measured = [i for i, r in enumerate(results) if _measured(r)]
    skipped = [i for i, r in enumerate(results) if r.status == "skipped"]
    if not measured or not skipped:
        return None
    total = max(of or 0, len(results))
    first, other = results[skipped[0]], measured[0]
    return replace(first, status="error", timing=None, score=None,
                   message=f"round {skipped[0] + 1} of {total}: skipped ({first.message}), where round {other + 1} "
                           "was measured: a requirement does not come and go between the rounds of one run (a "
                           "skipped round would be left out, so an implementation could keep only the rounds it "
                           "chose)")


def _constant(label: int) -> Callable[[Timing], tuple[int, ...]]:
    return lambda t: (label,) * t.n


def _run_labels(index: int, offsets: dict[tuple[int, int], int]) -> Callable[[Timing], tuple[int, ...]]:
    """Round labels of run ``index``'s samples renumbered: each (run, round) gets the next free
    label in order of first appearance (``offsets`` is shared by the runs of one key)."""
    def labels(t: Timing) -> tuple[int, ...]:
        distinct, first, inverse = np.unique(np.asarray(_labels(t), dtype=np.int64), return_index=True,
                                             return_inverse=True)
        new = np.empty(distinct.size, dtype=np.int64)
        for j in np.argsort(first):
            new[j] = offsets.setdefault((index, int(distinct[j])), len(offsets))
        return tuple(new[inverse.ravel()].tolist())

    return labels


def combine_runs(runs: Sequence[RunResult]) -> RunResult:
    """Several runs of the same code on the same machine as one run with every round labelled.

    Keys (``case_id/impl``) are matched across runs; each run's rounds (one, for a run without
    round labels) become distinct rounds of the result. A key that failed in any run is that
    failure. The first run gives the environment, spec, protocol and the case records; the
    caller checks beforehand that the fingerprints agree (``gate.check_fingerprints``).
    """
    if not runs:
        raise ValueError("no runs")
    if len(runs) == 1:
        return runs[0]
    cases: dict[str, CaseResult] = {}
    found: dict[str, dict[str, list[tuple[int, ImplResult]]]] = {}
    for j, run in enumerate(runs):
        for case in run.cases:
            cases.setdefault(case.case_id, case)
            by_impl = found.setdefault(case.case_id, {})
            for r in case.impls:
                by_impl.setdefault(r.name, []).append((j, r))
    merged = []
    for case_id, case in cases.items():
        impls = []
        for entries in found[case_id].values():
            offsets: dict[tuple[int, int], int] = {}
            impls.append(_combine([r for _, r in entries], [_run_labels(j, offsets) for j, _ in entries], "run"))
        merged.append(replace(case, impls=tuple(impls)))
    thresholds: dict[str, float] = {}
    for run in runs:
        thresholds = {**run.gate_thresholds, **thresholds}
    first = runs[0]
    files = tuple(dict.fromkeys(f for run in runs for f in run.workload_files))
    rounds = max((r.timing.n_rounds for c in merged for r in c.impls if r.timing is not None), default=1)
    return replace(first, cases=tuple(merged), workload_files=files, gate_thresholds=thresholds,
                   protocol=replace(first.protocol, rounds=rounds), complete=all(r.complete for r in runs),
                   notes=(*first.notes, f"combined from {len(runs)} runs (each run's rounds kept apart)"))


def _beside_faults(protocols: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What some rounds met beside other workers, before each ran again alone (execute.session): the
    first one's fault and how many rounds met one; nothing where none did."""
    faults = [p for p in protocols if "beside_fault" in p]
    if not faults:
        return {}
    return {"beside_fault": str(faults[0]["beside_fault"]),
            "beside_fault_rounds": sum(int(f.get("beside_fault_rounds", 1)) for f in faults)}


def _pooled(old: ImplResult, new: ImplResult) -> ImplResult:
    """A re-measurement added to a result: its rounds added as new rounds, a single run's too (rounds
    must stay apart: see analysis.rounds). Pooled into one round, a re-measured single run was tested as
    if its samples were independent while the baseline's one process was never measured again: a
    simulated 5% slowdown (processes spreading 1.5%) was then called REGRESSION in 29% of trials by
    ``run --gate-against``; as rounds, the baseline's process offset is priced by the current side's
    spread between rounds."""
    assert old.timing is not None and new.timing is not None
    a, b = old.timing, new.timing
    offset = max(_labels(a)) + 1
    labels = [_labels(a), tuple(offset + x for x in _labels(b))]
    timing = concat_timings([a, b], labels, "pooled")
    protocol = {**old.protocol, **_beside_faults([old.protocol, new.protocol])}
    return replace(old, timing=timing, score=_rescaled(old.score, a.median, timing.median), protocol=protocol)


def merges(new: ImplResult) -> bool:
    """Whether a re-measurement changes the result it is merged into (:func:`merge_samples`): it failed,
    or it is "ok" with samples; a skipped one, or one with nothing usable, leaves it as it was."""
    return new.status in FAILED_STATUSES or (new.status == "ok" and bool(samples(new)))


def _merged(r: ImplResult, new: ImplResult | None) -> ImplResult:
    if new is None or not merges(new):
        return r  # skipped, or nothing usable re-measured: keep what we had
    if new.status in FAILED_STATUSES:
        return new  # failing on a second try is a failure, whatever the first try did
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
    depend on another implementation's time and are set to None. A result
    already measured in several rounds gets the re-measurement as one more
    round (median and CI over rounds).

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


APART = 0.03  # a round median this far (relative) from its point's median round is named (rounds_apart)


def rounds_apart(r: ImplResult, side: str = "") -> str:
    """The rounds of ``r`` whose median lies more than ``APART`` from the median of its round
    medians, with how far, after ``side`` ("baseline round 5 +10.8%, round 10 +11.0%"), or "":
    fewer than three rounds, or none that far. The gate names them beside a verdict, and a run's
    notes beside its point.

    On an H200, 19 of 1,454 o_proj point-rounds read more than 3% from their point's median round,
    18 of them slow; they held the deepest points' intervals open (BENCHMARKS.md, issue 16,
    twenty-seventh session). Naming them tells a CI owner that a verdict's width comes from a
    process that ran slow, not from the code. They are not left out of the verdict: they are part
    of what the rounds sample."""
    t = r.timing
    if t is None or t.n_rounds < 3:
        return ""
    medians = [float(m) for m in round_medians(group_by_round(t.samples, t.rounds))]
    middle = statistics.median(medians)
    far = [(i + 1, m / middle - 1) for i, m in enumerate(medians) if abs(m / middle - 1) > APART]
    if not far:
        return ""
    return " ".join(filter(None, (side, ", ".join(f"round {i} {d:+.1%}" for i, d in far))))


def _no_common_point(runs: Sequence[RunResult], names: Sequence[str] | None) -> str:
    """Why no point can be compared over ``runs`` (named ``names``, else by their place): a run measured
    none in rounds (``--repeat``), or each did but not the same points (other workloads or cases)."""
    for k, run in enumerate(runs):
        if not any(_measured(r) and r.timing is not None and r.timing.n_rounds > 1 and not r.protocol.get("part")
                   for c in run.cases for r in c.impls):
            name = names[k] if names is not None else f"run {k + 1} of {len(runs)}"
            if run.protocol.timer == "none":
                return f"{name}: a dry run (--dry-run), which measured nothing; give measured runs"
            return f"{name}: measured no point in rounds (two or more): measure with --repeat 2 or more (default 3)"
    return ("no point was measured in rounds by every run: each run measured some, not the same ones (runs of other "
            "workloads, cases or implementations?); give runs of one tree's same cases")


@dataclass(frozen=True)
class RunOffsets:
    """What several runs of one tree say about a run's own offset (the gate's ``run_sd``)."""

    sd: float  # pooled: sqrt(max(0, mean over points of between - within)); the value for --run-sd
    median: float  # sqrt(max(0, median over points of between - within)): a typical point's
    points: int  # points measured in rounds by every run (byte floors left out)
    runs: int
    largest: tuple[tuple[str, float], ...]  # up to five ``case_id/impl`` keys with the largest own excess (signed sd)
    # points some run measured that are not pooled: not measured in rounds (two or more) by every run
    left_out: tuple[str, ...] = ()


def run_offsets(runs: Sequence[RunResult], names: Sequence[str] | None = None) -> RunOffsets:
    """The sd of a run's own offset in log time, from ``runs`` of one tree (at least three).

    Per point measured in rounds (two or more) by every run: each run's mean log round median (the
    gate's statistic), the variance of those means over the runs (``between``, ddof 1), and what the
    runs' own rounds predict for it (``within``: the mean over runs of var(log round medians) / rounds).
    ``between - within`` estimates S^2 without bias; pooled over points (their mean) it is the ``sd``
    returned, and the median over points gives a typical point's. Byte floors (``part: floor``)
    are left out, as the gate leaves them out; the other points some run measured but not pooled are
    named (``left_out``). ValueError with fewer than three runs or no such point
    (naming the run that measured none in rounds by ``names``, where given).
    """
    if len(runs) < 3:
        raise ValueError(f"a run's own offset needs three runs of one tree at least, got {len(runs)}")
    logs: dict[str, list[np.ndarray]] = {}
    for run in runs:
        for case in run.cases:
            for r in case.impls:
                if _measured(r) and r.timing is not None and not r.protocol.get("part"):
                    medians = round_medians(group_by_round(r.timing.samples, r.timing.rounds))
                    logs.setdefault(f"{case.case_id}/{r.name}", []).append(np.log(medians))
    excess: dict[str, float] = {}
    for key, per_run in logs.items():
        if len(per_run) != len(runs) or min(m.size for m in per_run) < 2:
            continue
        means = np.array([m.mean() for m in per_run])
        within = float(np.mean([np.var(m, ddof=1) / m.size for m in per_run]))
        excess[key] = float(np.var(means, ddof=1)) - within
    if not excess:
        raise ValueError(_no_common_point(runs, names))
    values = np.array(list(excess.values()))
    top = sorted(excess.items(), key=lambda kv: kv[1], reverse=True)[:5]
    return RunOffsets(sd=float(np.sqrt(max(0.0, values.mean()))), median=float(np.sqrt(max(0.0, np.median(values)))),
                      points=len(excess), runs=len(runs),
                      largest=tuple((k, float(np.sign(v) * np.sqrt(abs(v)))) for k, v in top),
                      left_out=tuple(k for k in logs if k not in excess))
