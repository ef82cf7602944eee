"""Pair the implementations of two runs (or two implementations of one run) and compare times.

Pure: no I/O, no device libraries. Times are seconds.

For each pair, with ``a`` the reference and ``b`` the candidate:

    ratio r        = median(b) / median(a)            (> 1: b is slower)
    [lo, hi]       = 95% percentile-bootstrap CI of r  (analysis.significance.bootstrap_ratio_ci)
    p              = two-sided Mann-Whitney U p-value of a vs b
    significant    = Benjamini-Hochberg at level alpha over every row's p

    When either side was measured in several rounds (``run --repeat``, ``ab``, several runs
    per side), samples of one round are not independent of each other: the rounds are the units.
    r is the ratio of the geometric means of the round medians, [lo, hi] the t interval on the
    log round medians and p the two-sided p-value of the same t statistic (analysis.sequential:
    pooled over both sides, with Welch-Satterthwaite's degrees of freedom at equal rounds, and in
    Welch's form over moderated sides of unequal rounds; two
    implementations of one run measured in the same rounds are paired by round from
    PAIRED_MIN_ROUNDS rounds on). Where ten or more pairs are compared over
    rounds, each pair's spread borrows strength from the others (``moderate``: the empirical-Bayes
    moderated t of analysis.sequential), so three rounds a side can decide.

Verdict rule, first match wins (tau = threshold, default 0.05):

    INCONCLUSIVE   fewer than MIN_SAMPLES (5) samples on either side
    SAME           1/(1+tau) <= lo  and  hi <= 1+tau
                   (both sides holding the very same samples, in the same rounds, as when a
                   run is compared with itself, is the same measurement: r = 1, [lo, hi] = [1, 1])
                   (the CI rules out any change as large as the threshold, even
                   when the change is statistically detectable: tau is the
                   smallest change worth reporting)
    SLOWER         lo > 1 and significant, or lo > 1+tau and directional   (b is slower than a)
    FASTER         hi < 1 and significant, or hi < 1/(1+tau) and directional
    INCONCLUSIVE   otherwise (too noisy to tell at this threshold)

    directional    the unadjusted one-sided test in the direction of the change is at alpha
                   (two-sided p <= 2 alpha)

    An interval that lies wholly beyond the band decides without the Benjamini-Hochberg
    correction across rows: it is a test of "the change is tau or more" at (1 - confidence) / 2,
    which an identical pair passes far more rarely than that (it must clear 1 by tau, not merely
    exclude it); the one-sided test at alpha keeps that rare even with a tiny tau. Requiring the
    BH-corrected two-sided test at alpha = 0.01 against a 95% interval left a 12% speedup,
    interval [0.813, 0.945] and p = 0.014, INCONCLUSIVE (issue 16).

The summary ``geomean_speedup`` is ``geomean(1 / ratio)`` over the rows of whole implementations:
how many times faster b is than a overall (> 1: b is faster), from the same estimates the rows show
(over rounds a row's ratio is of geometric means, not of the medians shown beside it). Parts are
shown as rows but left out of it: the byte floor (the same read kernel in both runs, a ratio near 1
whatever the code did) and an overlapped implementation's compute and comm parts (already in it).
Runs over several devices (``run --devices``, Ray) record each case's GPU. When either run does,
a key is compared only when both sides measured it on the same GPU model (device name and spec
id); otherwise it is listed in ``not_comparable`` (a key with both sides' models), never as a
row. Runs of one device each are compared whatever they ran on (comparing GPUs is a use).

Keys a row is identified by: ``f"{case_id}/{impl}"`` for two runs, the bare
``case_id`` for two implementations of one run. A key measured (status "ok"
with samples) on one side only is listed in ``only_in_a`` / ``only_in_b``, and
``Comparison.other_side`` says what the other side holds instead (``"absent"``
or its status, e.g. ``"incorrect"``); a key measured on neither side is not listed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from solbench.analysis.pooling import combine_runs, samples
from solbench.analysis.rounds import group_by_round
from solbench.analysis.sequential import LogRatio, between_runs, log_ratio, moderated, side_priors, variance_prior
from solbench.analysis.significance import (
    MIN_SAMPLES,
    benjamini_hochberg,
    bootstrap_ratio_ci,
    geometric_mean,
    mann_whitney_p,
)
from solbench.errors import ConfigError, ResultsFormatError
from solbench.results.model import MAX_RUN_SD, CaseResult, Environment, ImplResult, Protocol, RunResult

Verdict = Literal["FASTER", "SLOWER", "SAME", "INCONCLUSIVE"]

__all__ = [
    "Comparison",
    "ComparisonRow",
    "Estimate",
    "Pair",
    "Pairing",
    "Unpaired",
    "as_one_run",
    "check_run_sd",
    "compare_impls",
    "compare_runs",
    "comparison_verdict",
    "device_model",
    "estimate",
    "pair_impls",
    "pair_runs",
    "run_offset_vars",
    "samples",
    "unmeasured_reason",
]


@dataclass(frozen=True)
class ComparisonRow:
    """One key compared: times of a and b, their ratio with its CI, and the verdict."""

    key: str  # "case_id/impl" (two runs) or "case_id" (two implementations)
    case_id: str
    workload: str
    label_a: str  # implementation name on side a
    label_b: str  # implementation name on side b
    median_a: float  # seconds
    median_b: float  # seconds
    ratio: float  # median_b / median_a (> 1: b slower)
    ci_low: float | None  # None when a side has fewer than MIN_SAMPLES samples
    ci_high: float | None
    sol_a: float | None  # T_SOL / T of a (1.0 is the speed of light)
    sol_b: float | None
    p_value: float | None  # two-sided Mann-Whitney p, unadjusted; None when not tested
    verdict: Verdict
    n_a: int = 0
    n_b: int = 0
    rounds_a: int = 1  # rounds (processes) the samples of each side came from
    rounds_b: int = 1
    own_a: bool = False  # sol_a is against a's own T_SOL, not the case's (own_t_sol)
    own_b: bool = False


@dataclass(frozen=True)
class Comparison:
    """Every paired key of two sides, the keys present on one side only, and a summary."""

    rows: tuple[ComparisonRow, ...]
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]
    geomean_speedup: float | None  # geomean(1 / ratio) over the rows but parts; > 1: b faster; None: none
    label_a: str
    label_b: str
    threshold: float
    alpha: float = 0.01
    confidence: float = 0.95
    other_side: dict[str, str] = field(default_factory=dict)  # one-sided key -> "absent" or the other status
    not_comparable: dict[str, str] = field(default_factory=dict)  # key -> "model a vs model b" (other GPU model)
    # key -> how each side launched it, where one replayed a CUDA graph and the other could not (launched_apart)
    launched_differently: dict[str, str] = field(default_factory=dict)
    run_sd: float = 0.0  # sd of a run's own offset priced in over rounds (two sets of runs; analysis.gate)
    device: str = ""  # what the runs were measured on (:func:`devices`)
    # each side's peaks id where its SOL is against peaks measured on the host (``solbench calibrate``), else ""
    measured_peaks: tuple[str, str] = ("", "")
    geomean_rows: int = 0  # the rows geomean_speedup is over (every row but parts)

    def geomean_over(self) -> str:
        """Which rows the geomean is over, where the rows' counts include parts it leaves out ("" else)."""
        left = len(self.rows) - self.geomean_rows
        return f" over {self.geomean_rows} rows, {left} part(s) such as the byte floor left out" if left else ""

    def count(self, verdict: Verdict) -> int:
        """How many rows have this verdict."""
        return sum(1 for r in self.rows if r.verdict == verdict)


@dataclass(frozen=True)
class Pair:
    """The same key measured on both sides (both "ok", both with samples)."""

    key: str
    case_id: str
    workload: str
    a: ImplResult
    b: ImplResult
    t_sol: float = 0.0  # the case's T_SOL (an implementation scored against its own differs: ``own_t_sol``)


def own_t_sol(r: ImplResult, case_t_sol: float) -> bool:
    """Whether ``r`` was scored against a T_SOL of its own (an FP8 GEMM: another dtype's peak, its own
    bytes), not its case's: its SOL is against that one (``report.flags.own``)."""
    s = r.score
    return s is not None and s.t_sol is not None and abs(s.t_sol - case_t_sol) > 1e-9 * max(case_t_sol, 1e-30)


def point_launch(r: ImplResult) -> str:
    """How a point's calls were made: "graph" (a CUDA graph's replay, ``--launch graph``), "stream",
    or "mixed" (replayed in some rounds or runs, launched in others: ``analysis.pooling``)."""
    return str(r.protocol.get("launch") or "stream")


def run_launch(p: Protocol) -> str:
    """How a run's calls were made: "graph" (``--launch graph``), else "stream" (a run from before
    ``--launch`` records none and launched on the stream)."""
    return "graph" if p.launch == "graph" else "stream"


def split_launched(pairing: Pairing) -> tuple[Pairing, list[Pair]]:
    """``pairing`` without the pairs whose sides were launched differently (a capture failed on one
    side only), and those pairs: never compared."""
    mixed = [p for p in pairing.pairs if point_launch(p.a) != point_launch(p.b)]
    return replace(pairing, pairs=tuple(p for p in pairing.pairs if p not in mixed)), mixed


def launched_apart(p: Pair, side_a: str, side_b: str) -> str:
    """What a pair launched differently reads: each side's launch, and why a call could not be
    captured (the ``graph_fallback`` of the side that has one)."""
    why = next((str(r.protocol["graph_fallback"]) for r in (p.a, p.b) if r.protocol.get("graph_fallback")), "")
    return f"{point_launch(p.a)} in {side_a}, {point_launch(p.b)} in {side_b}" + (f": {why}" if why else "")


@dataclass(frozen=True)
class Unpaired:
    """A key measured on one side only, with what each side holds (None: absent from that side)."""

    key: str
    case_id: str
    workload: str
    a: ImplResult | None
    b: ImplResult | None

    @property
    def other(self) -> ImplResult | None:
        """The result on the side where the key was not measured."""
        return self.b if _measured(self.a) else self.a


@dataclass(frozen=True)
class Pairing:
    """Result of matching two sides by key."""

    pairs: tuple[Pair, ...]
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]
    unpaired: tuple[Unpaired, ...] = ()  # the keys of only_in_a, then of only_in_b, in that order
    # keys measured on both sides but on different GPU models: (the key's results, model a, model b)
    other_model: tuple[tuple[Unpaired, str, str], ...] = ()


@dataclass(frozen=True)
class Estimate:
    """Ratio of medians of one pair with its bootstrap CI (None below MIN_SAMPLES)."""

    median_a: float
    median_b: float
    ratio: float
    ci_low: float | None
    ci_high: float | None
    n_a: int
    n_b: int
    rounds_a: int = 1
    rounds_b: int = 1
    p_slower: float | None = None  # rounds: one-sided p-values of the t test over rounds (else None:
    p_faster: float | None = None  # the caller runs Mann-Whitney on the samples)
    t: LogRatio | None = None  # rounds: the t statistic itself (analysis.sequential)
    identical: bool = False  # both sides hold the very same samples in the same rounds (one measurement)

    @property
    def over_rounds(self) -> bool:
        """Whether the estimate treats rounds as the units (either side has several)."""
        return max(self.rounds_a, self.rounds_b) > 1

    @property
    def testable(self) -> bool:
        """Enough samples on both sides to draw a conclusion."""
        return self.ci_low is not None


def _measured(r: ImplResult | None) -> bool:
    return r is not None and r.status == "ok" and r.timing is not None and r.timing.n > 0


def unmeasured_reason(r: ImplResult | None) -> str:
    """Why a result has no samples to compare: ``"absent"``, its status, or ``"ok, no samples"``."""
    if r is None:
        return "absent"
    return "ok, no samples" if r.status == "ok" else r.status


def impl_keys(run: RunResult, impl: str | None) -> Iterator[tuple[str, CaseResult, ImplResult]]:
    """Every ``case_id/impl`` key of a run with its case and result (one implementation with
    ``impl``); ResultsFormatError on a key seen twice."""
    seen: set[str] = set()
    for case in run.cases:
        for r in case.impls:
            if impl is not None and r.name != impl:
                continue
            key = f"{case.case_id}/{r.name}"
            if key in seen:
                raise ResultsFormatError(f"duplicate result for {key!r} in one run")
            seen.add(key)
            yield key, case, r


def device_model(run: RunResult, case: CaseResult) -> str:
    """The GPU model a case was measured on: its own device record, else the run's environment."""
    return _model(case.device or run.environment)


def _model(env: Environment) -> str:
    return f"{env.device_name} ({env.spec_id})"


def devices(runs: Sequence[RunResult]) -> str:
    """What ``runs`` were measured on, in words: each GPU model (or CPU) their cases name, once
    (:func:`device_model`), ``"NVIDIA H200 (h200-sxm)"``; a run without cases by its environment."""
    found = [device_model(run, c) for run in runs for c in run.cases] or [_model(run.environment) for run in runs]
    return ", ".join(dict.fromkeys(found))


def _split(entries: dict[str, tuple[CaseResult, ImplResult | None, ImplResult | None]],
           models: dict[str, tuple[str, str]] | None = None) -> Pairing:
    pairs: list[Pair] = []
    only_a: list[Unpaired] = []
    only_b: list[Unpaired] = []
    other: list[tuple[Unpaired, str, str]] = []
    for key, (case, ra, rb) in entries.items():
        ok_a, ok_b = _measured(ra), _measured(rb)
        if ok_a and ok_b and models is not None and models[key][0] != models[key][1]:
            other.append((Unpaired(key, case.case_id, case.workload, ra, rb), *models[key]))
        elif ok_a and ok_b:
            assert ra is not None and rb is not None
            pairs.append(Pair(key, case.case_id, case.workload, ra, rb, case.t_sol))
        elif ok_a or ok_b:
            (only_a if ok_a else only_b).append(Unpaired(key, case.case_id, case.workload, ra, rb))
    return Pairing(tuple(pairs), tuple(u.key for u in only_a), tuple(u.key for u in only_b),
                   (*only_a, *only_b), tuple(other))


def pair_runs(a: RunResult, b: RunResult, impl: str | None = None, *, same_model: bool = True) -> Pairing:
    """Match results of two runs by ``f"{case_id}/{impl}"`` (optionally one impl only).

    With ``same_model``, when either run records per-case devices, a key measured on different GPU
    models goes to ``other_model`` instead of ``pairs`` (module docstring).
    """
    entries: dict[str, tuple[CaseResult, ImplResult | None, ImplResult | None]] = {}
    models: dict[str, tuple[str, str]] = {}
    for key, case, r in impl_keys(a, impl):
        entries[key] = (case, r, None)
        models[key] = (device_model(a, case), "")
    for key, case, r in impl_keys(b, impl):
        prev = entries.get(key)
        entries[key] = (prev[0], prev[1], r) if prev else (case, None, r)
        models[key] = (models.get(key, ("", ""))[0], device_model(b, case))
    per_case = any(c.device is not None for run in (a, b) for c in run.cases)
    return _split(entries, models if same_model and per_case else None)


def pair_impls(run: RunResult, impl_a: str, impl_b: str) -> Pairing:
    """Match two implementations within each case of one run; keys are case ids."""
    entries: dict[str, tuple[CaseResult, ImplResult | None, ImplResult | None]] = {}
    for case in run.cases:
        if case.case_id in entries:
            raise ResultsFormatError(f"duplicate case {case.case_id!r} in one run")
        entries[case.case_id] = (case, case.impl(impl_a), case.impl(impl_b))
    return _split(entries)


def estimate(a: ImplResult, b: ImplResult, *, confidence: float = 0.95, seed: int = 0,
             n_boot: int = 2000, paired: bool = False, key: str = "", sides: tuple[str, str] = ("a", "b")) -> Estimate:
    """Medians of both sides, ``ratio = median_b / median_a`` and its bootstrap CI.

    Below MIN_SAMPLES samples on either side the ratio of the medians is still
    reported, but ``ci_low``/``ci_high`` are None (nothing may be concluded).
    A side measured in several rounds makes it an estimate over rounds (module docstring);
    ``paired``: a and b were measured in the same rounds (same labels), pair them by round.
    Raises ResultsFormatError on a zero, negative or non-finite time, naming ``key`` (the pair's) and
    which of ``sides`` (the two sides' labels) holds it.
    """
    sa, sb = np.asarray(samples(a), dtype=float), np.asarray(samples(b), dtype=float)
    for side, s in zip(sides, (sa, sb), strict=True):
        bad = s[~(np.isfinite(s) & (s > 0.0))]
        if bad.size:
            raise ResultsFormatError(f"{key or f'{a.name}/{b.name}'} ({side}): times must be positive and finite, "
                                     f"got {float(bad[0])!r}")
    ga, gb = _groups(a), _groups(b)
    if min(sa.size, sb.size) >= MIN_SAMPLES and _identical(ga, gb):  # one measurement on both sides
        med = float(np.median([np.median(g) for g in ga]))
        return Estimate(med, med, 1.0, 1.0, 1.0, sa.size, sb.size, len(ga), len(gb),
                        *((1.0, 1.0) if len(ga) > 1 else (None, None)), identical=True)
    if max(len(ga), len(gb)) > 1:
        same = _same_rounds(a, b) if paired else None
        if same is not None:
            ga, gb = same
        return _over_rounds(ga, gb, confidence=confidence, paired=same is not None)
    med_a, med_b = float(np.median(sa)), float(np.median(sb))
    if min(sa.size, sb.size) < MIN_SAMPLES:
        return Estimate(med_a, med_b, med_b / med_a, None, None, sa.size, sb.size)
    ratio, low, high = bootstrap_ratio_ci(sa, sb, confidence=confidence, n_boot=n_boot, seed=seed)
    return Estimate(med_a, med_b, ratio, low, high, sa.size, sb.size)


def _identical(ga: list[np.ndarray], gb: list[np.ndarray]) -> bool:
    """Whether two sides hold the same samples in the same rounds (the same measurement)."""
    return len(ga) == len(gb) and all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(ga, gb, strict=True))


def _groups(r: ImplResult) -> list[np.ndarray]:
    try:
        return group_by_round(samples(r), r.timing.rounds if r.timing is not None else ())
    except ValueError as exc:
        raise ResultsFormatError(f"implementation {r.name!r}: {exc}") from None


def _same_rounds(a: ImplResult, b: ImplResult) -> tuple[list[np.ndarray], list[np.ndarray]] | None:
    """Both sides' rounds in label order when they were measured in the same rounds, else None."""
    ta, tb = a.timing, b.timing
    if ta is None or tb is None or not ta.rounds or set(ta.rounds) != set(tb.rounds):
        return None
    labels = sorted(set(ta.rounds))
    xa, xb = np.asarray(ta.samples), np.asarray(tb.samples)
    la, lb = np.asarray(ta.rounds), np.asarray(tb.rounds)
    return [xa[la == k] for k in labels], [xb[lb == k] for k in labels]


def _over_rounds(ga: list[np.ndarray], gb: list[np.ndarray], *, confidence: float, paired: bool) -> Estimate:
    n_a, n_b = sum(g.size for g in ga), sum(g.size for g in gb)
    t = log_ratio(ga, gb, paired=paired)
    assert t is not None  # one side has two rounds at least
    med_a, med_b = float(np.median([np.median(g) for g in ga])), float(np.median([np.median(g) for g in gb]))
    if min(n_a, n_b) < MIN_SAMPLES:
        return Estimate(med_a, med_b, t.ratio, None, None, n_a, n_b, len(ga), len(gb), t=t)
    low, high = t.interval(confidence)
    return Estimate(med_a, med_b, t.ratio, low, high, n_a, n_b, len(ga), len(gb), t.p_slower(), t.p_faster(), t)


def moderate(ests: Sequence[Estimate], confidence: float) -> list[Estimate]:
    """Every estimate over rounds with its t moderated by the prior fitted over all of them
    (pooled and paired estimates each over their own kind; analysis.sequential.variance_prior), and
    for Welch's form each side's own variances by a prior fitted over that side's (``side_priors``);
    the others unchanged. Fewer than MIN_PRIOR_POINTS of a kind: unchanged."""
    out = list(ests)
    for paired in (False, True):
        idx = [i for i, e in enumerate(ests) if e.t is not None and e.t.paired == paired and e.t.prior_df == 0.0]
        prior = variance_prior([ests[i].t.sd_round ** 2 for i in idx],  # type: ignore[union-attr]
                               [ests[i].t.spread_df for i in idx])  # type: ignore[union-attr]
        if prior is None:
            continue
        sides = side_priors([ests[i].t for i in idx])  # type: ignore[misc]
        for i in idx:
            e = ests[i]
            t = moderated(e.t, prior, sides)  # type: ignore[arg-type]
            if e.ci_low is None:
                out[i] = dataclasses.replace(e, t=t)
                continue
            low, high = t.interval(confidence)
            out[i] = dataclasses.replace(e, ci_low=low, ci_high=high, p_slower=t.p_slower(),
                                         p_faster=t.p_faster(), t=t)
    return out


def check_run_sd(run_sd: float) -> None:
    """ConfigError for a run sd outside [0, MAX_RUN_SD) (nan included)."""
    if not 0.0 <= run_sd < MAX_RUN_SD:
        raise ConfigError(f"run sd must be at least 0 and below {MAX_RUN_SD:.0%}, got {run_sd!r}")


def _runs_measuring(side: RunResult | Sequence[RunResult]) -> dict[str, int]:
    """How many runs of ``side`` measured each ``case_id/impl`` key (ok, with samples)."""
    counts: dict[str, int] = {}
    for run in side_runs(side):
        for key in {f"{c.case_id}/{r.name}" for c in run.cases for r in c.impls if _measured(r)}:
            counts[key] = counts.get(key, 0) + 1
    return counts


def run_offset_vars(run_sd: float, a: RunResult | Sequence[RunResult], b: RunResult | Sequence[RunResult],
                    keys: Sequence[str]) -> list[float]:
    """``S^2 (1/m_a + 1/m_b)`` for each ``case_id/impl`` key: what the runs' own offsets (sd ``run_sd``
    = S) add to the variance of the log ratio of sides ``a`` and ``b`` (analysis.sequential, "Between
    runs"), with m_a and m_b the runs of each side that measured that key. A point that one run of a
    side of three measured carries that one run's offset, not a third of it (a case new in the newest
    of the baseline runs, or the runs of a side measuring different workloads), so its interval is not
    narrowed by runs that hold none of it. ConfigError for a bad run sd (:func:`check_run_sd`)."""
    check_run_sd(run_sd)
    ma, mb = _runs_measuring(a), _runs_measuring(b)
    return [run_sd ** 2 * (1.0 / ma.get(k, 1) + 1.0 / mb.get(k, 1)) for k in keys]  # a key no run measured: 1


def with_run_offsets(ests: Sequence[Estimate], run_vars: Sequence[float], confidence: float) -> list[Estimate]:
    """Every pooled estimate over rounds with the runs' own offsets added to its standard error
    (``run_vars``: one for each estimate, :func:`run_offset_vars`), its interval and p values recomputed
    at ``confidence``; paired and single-run estimates unchanged. Apply after ``moderate``: the prior
    is fitted on the rounds' own spreads."""
    if len(run_vars) != len(ests):
        raise ValueError(f"{len(run_vars)} run offset variances for {len(ests)} estimates")
    out = []
    for e, var in zip(ests, run_vars, strict=True):
        if var != 0.0 and e.t is not None and not e.t.paired and e.ci_low is not None:
            t = between_runs(e.t, var)
            low, high = t.interval(confidence)
            e = dataclasses.replace(e, ci_low=low, ci_high=high, p_slower=t.p_slower(), p_faster=t.p_faster(), t=t)
        out.append(e)
    return out


def comparison_verdict(ci_low: float | None, ci_high: float | None, significant: bool,
                       threshold: float, directional: bool = True) -> Verdict:
    """The verdict rule of the module docstring, on the CI of ``median_b / median_a``.

    ``significant``: the BH-adjusted two-sided test is at alpha; ``directional``: the unadjusted
    one-sided test in the direction of the change is (two-sided p <= 2 alpha).
    """
    if ci_low is None or ci_high is None:
        return "INCONCLUSIVE"
    if 1.0 / (1.0 + threshold) <= ci_low and ci_high <= 1.0 + threshold:
        return "SAME"
    if (ci_low > 1.0 + threshold and directional) or (ci_low > 1.0 and significant):
        return "SLOWER"
    if (ci_high < 1.0 / (1.0 + threshold) and directional) or (ci_high < 1.0 and significant):
        return "FASTER"
    return "INCONCLUSIVE"


def _two_sided(p: Pair, e: Estimate) -> float | None:
    """Two-sided p of a pair: the two-level test over rounds, else Mann-Whitney; None: untestable."""
    if not e.testable:
        return None
    if e.p_slower is not None and e.p_faster is not None:
        return min(1.0, 2.0 * min(e.p_slower, e.p_faster))
    return mann_whitney_p(samples(p.a), samples(p.b), "two-sided")


def _sol(r: ImplResult) -> float | None:
    return r.score.sol if r.score is not None else None


def _compare(pairing: Pairing, *, same_impl: bool, label_a: str, label_b: str, threshold: float,
             alpha: float, confidence: float, seed: int, n_boot: int, paired: bool = False,
             run_vars: Mapping[str, float] | None = None, run_sd: float = 0.0, device: str = "",
             measured_peaks: tuple[str, str] = ("", "")) -> Comparison:
    if not threshold > 0.0:
        raise ConfigError(f"threshold must be positive, got {threshold}")
    if not 0.0 < alpha < 1.0 or not 0.0 < confidence < 1.0:
        raise ConfigError(f"alpha and confidence must lie in (0, 1), got {alpha}, {confidence}")
    pairing, mixed = split_launched(pairing)
    apart = {p.key: launched_apart(p, label_a, label_b) for p in mixed}
    ests = moderate([estimate(p.a, p.b, confidence=confidence, seed=seed, n_boot=n_boot, paired=paired,
                              key=p.key, sides=(label_a, label_b)) for p in pairing.pairs], confidence)
    if run_vars is not None:  # separate runs: each point's share of the runs' own offsets, by key
        ests = with_run_offsets(ests, [run_vars[p.key] for p in pairing.pairs], confidence)
    pvals: list[float | None] = [_two_sided(p, e) for p, e in zip(pairing.pairs, ests, strict=True)]
    tested = [p for p in pvals if p is not None]
    flags = iter(benjamini_hochberg(tested, q=alpha))
    rows = []
    for pair, est, p in zip(pairing.pairs, ests, pvals, strict=True):
        sig = next(flags) if p is not None else False
        rows.append(ComparisonRow(
            key=pair.key, case_id=pair.case_id, workload=pair.workload,
            label_a=pair.a.name if same_impl else label_a,
            label_b=pair.b.name if same_impl else label_b,
            median_a=est.median_a, median_b=est.median_b, ratio=est.ratio,
            ci_low=est.ci_low, ci_high=est.ci_high, sol_a=_sol(pair.a), sol_b=_sol(pair.b),
            p_value=p, verdict=comparison_verdict(est.ci_low, est.ci_high, sig, threshold,
                                                  p is not None and p <= 2.0 * alpha),
            n_a=est.n_a, n_b=est.n_b, rounds_a=est.rounds_a, rounds_b=est.rounds_b,
            own_a=own_t_sol(pair.a, pair.t_sol), own_b=own_t_sol(pair.b, pair.t_sol),
        ))
    whole = [r for r, pair in zip(rows, pairing.pairs, strict=True)  # not the byte floor, not an overlap's parts
             if not pair.a.protocol.get("part") and not pair.b.protocol.get("part")]
    geo = geometric_mean([1.0 / r.ratio for r in whole]) if whole else None  # the rows' own estimates
    other = {u.key: unmeasured_reason(u.other) for u in pairing.unpaired}
    models = {u.key: f"{model_a} vs {model_b}" for u, model_a, model_b in pairing.other_model}
    return Comparison(tuple(rows), pairing.only_in_a, pairing.only_in_b, geo, label_a, label_b,
                      threshold, alpha, confidence, other, models, apart, run_sd, device, measured_peaks,
                      geomean_rows=len(whole))


def measured_peaks(run: RunResult) -> str:
    """The run's peaks id where they were measured on the host (SOL above 1 then beat the measurement,
    not the hardware: report.flags), else ""."""
    return run.spec.id if run.spec.source == "measured" else ""


def side_runs(side: RunResult | Sequence[RunResult]) -> list[RunResult]:
    """A side given as one run or several, as the list of its runs."""
    return [side] if isinstance(side, RunResult) else list(side)


def as_one_run(runs: RunResult | Sequence[RunResult]) -> RunResult:
    """A side given as one run or several (``pooling.combine_runs``: each run's rounds kept apart)."""
    if isinstance(runs, RunResult):
        return runs
    return combine_runs(list(runs))


def compare_runs(a: RunResult | Sequence[RunResult], b: RunResult | Sequence[RunResult], *,
                 impl: str | None = None, threshold: float = 0.05, alpha: float = 0.01,
                 confidence: float = 0.95, seed: int = 0, n_boot: int = 2000,
                 label_a: str = "A", label_b: str = "B", run_sd: float = 0.0) -> Comparison:
    """Compare every ``case_id/impl`` measured in both sides (``b`` relative to ``a``).

    Each side is a run or several runs of the same code (combined, their rounds kept apart:
    the estimate is then over rounds, see the module docstring). ``impl`` restricts the
    comparison to one implementation name. Hardware fingerprints are not checked here (see
    ``gate.check_fingerprints``). ``run_sd``: the sd of a run's own offset, priced in over rounds
    as the gate does (analysis.gate, "Between runs"); 0 where both sides came from one invocation.
    """
    run_a, run_b = as_one_run(a), as_one_run(b)
    pairing = pair_runs(run_a, run_b, impl)
    keys = [p.key for p in pairing.pairs]
    return _compare(pairing, same_impl=True, label_a=label_a, label_b=label_b,
                    threshold=threshold, alpha=alpha, confidence=confidence, seed=seed, n_boot=n_boot,
                    run_vars=dict(zip(keys, run_offset_vars(run_sd, a, b, keys), strict=True)), run_sd=run_sd,
                    device=devices([*side_runs(a), *side_runs(b)]),
                    measured_peaks=(measured_peaks(run_a), measured_peaks(run_b)))


def compare_impls(run: RunResult, impl_a: str, impl_b: str, *, threshold: float = 0.05,
                  alpha: float = 0.01, confidence: float = 0.95, seed: int = 0,
                  n_boot: int = 2000) -> Comparison:
    """Compare implementation ``impl_b`` against ``impl_a`` within each case of one run.

    Both were measured in the same rounds of the run: from PAIRED_MIN_ROUNDS rounds on they are
    paired by round (the t test on the per-round log ratios, analysis.sequential).
    """
    return _compare(pair_impls(run, impl_a, impl_b), same_impl=False, label_a=impl_a,
                    label_b=impl_b, threshold=threshold, alpha=alpha, confidence=confidence,
                    seed=seed, n_boot=n_boot, paired=True, device=devices([run]),
                    measured_peaks=(measured_peaks(run),) * 2)
