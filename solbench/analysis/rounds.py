"""Statistics over rounds: samples grouped by the process (round) that measured them. Pure.

A run measured in R rounds (``run --repeat R``, several runs per side of a gate, or both sides of
``ab``) holds R groups of samples, each from a fresh worker with fresh allocations. Samples within
a round share that process's state (where buffers landed in memory, which cuBLAS algorithm was
picked, the clock and power state of the moment); rounds differ by it. A confidence interval
computed from the pooled samples as if they were independent sees only the noise inside a round
and is far too narrow when rounds differ (the per-process offsets measured in issue 8 reach 6%
while each run's CI claimed ±1%). Here the rounds are the units:

    estimate      the grand median: the median of the R round medians (each round weighs the
                  same however many samples it took; one odd round cannot drag it)
    spread        max / min of the round medians (1.0: the rounds agree)
    CI            two-level (hierarchical) bootstrap (Davison & Hinkley 1997, sec. 3.8; Ren et
                  al. 2010, "Nonparametric bootstrapping for hierarchical data"):

                      repeat B times:
                          draw R rounds with replacement                  # between rounds
                          for each drawn round: one of its within-round bootstrap medians
                          theta* = median of the R drawn round medians
                      se = standard error of log theta* (below)

The interval is a *standard* bootstrap interval on the log scale (Efron & Tibshirani 1993,
ch. 12.2 and 13.2), with the quantile of Student's t rather than the normal, because the spread
between rounds is itself estimated from R values:

    se   = sd(log theta*) * sqrt(R / (R - 1))      (the bootstrap variance of a statistic of R
                                                    clusters is low by (R - 1) / R; Davison &
                                                    Hinkley 1997, sec. 3.8)
    CI   = exp(log theta_hat -/+ t_{R-1, (1+c)/2} * se)

A percentile interval cannot reach beyond the R round medians: in simulation (seeded, in the
tests) it covered the true median 64% of the time with two rounds and 83% with three when the
rounds differed by a 2% process offset; this interval covers 95% or more from two rounds up, and
matches the percentile interval's width from about five. With one round there is no spread
between rounds to estimate: the ordinary (one-level) percentile bootstrap of the median, as for
a single run.

``hierarchical_ratio`` resamples each of two sides this way, independently; the standard error of
``log(ratio)`` adds both sides' variances and its degrees of freedom follow Welch and Satterthwaite
(Welch 1947), a side with one round counting its samples - 1 (its between-round spread is
unobserved: give both sides several rounds). One-sided p-values come from the same t statistic, so
"the (1 - 2 alpha) interval excludes 1" and "p <= alpha" are the same statement. ``gate`` and
``compare`` do not use it: they decide over rounds with the t test on the log round medians in
``analysis.sequential.log_ratio``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from solbench.analysis.significance import _as_samples, _bootstrap_medians
from solbench.analysis.stats import median_ci
from solbench.analysis.tdist import t_cdf, t_ppf, t_sf

__all__ = [
    "RatioEstimate",
    "RoundSummary",
    "grand_median",
    "group_by_round",
    "hierarchical_ci",
    "hierarchical_ratio",
    "pooled_ci",
    "round_medians",
    "round_spread",
    "summarize",
]

DEFAULT_BOOT = 4000


@dataclass(frozen=True)
class RoundSummary:
    """A measurement in rounds: the grand median, its CI and how far the rounds disagree."""

    rounds: int
    median: float  # median of the round medians (seconds)
    ci_low: float
    ci_high: float
    spread: float  # max / min of the round medians; 1.0 with one round
    round_medians: tuple[float, ...]


@dataclass(frozen=True)
class RatioEstimate:
    """``median(b) / median(a)`` over rounds, its CI and one-sided bootstrap p-values."""

    ratio: float
    ci_low: float
    ci_high: float
    p_slower: float  # H1: b is slower (ratio > 1)
    p_faster: float  # H1: b is faster (ratio < 1)
    rounds_a: int
    rounds_b: int


def group_by_round(samples: Sequence[float], rounds: Sequence[int] = ()) -> list[np.ndarray]:
    """Samples split by round label, in order of first appearance; no labels: one round.

    Raises ValueError when labels are given but do not match the samples one to one.
    """
    x = _as_samples(samples, "samples")
    if not rounds:
        return [x]
    if len(rounds) != x.size:
        raise ValueError(f"{len(rounds)} round labels for {x.size} samples")
    _, first, inverse = np.unique(np.asarray(rounds).astype(np.int64), return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first)] = np.arange(first.size)  # label -> its place in order of first appearance
    key = rank[inverse.ravel()]
    grouped = x[np.argsort(key, kind="stable")]  # stable: each round keeps its samples' order
    return np.split(grouped, np.cumsum(np.bincount(key))[:-1])


def round_medians(groups: Sequence[np.ndarray]) -> np.ndarray:
    """The median of each round."""
    if not groups:
        raise ValueError("no rounds")
    return np.array([float(np.median(g)) for g in groups])


def grand_median(groups: Sequence[np.ndarray]) -> float:
    """The median of the round medians (the point estimate over rounds)."""
    return float(np.median(round_medians(groups)))


def round_spread(groups: Sequence[np.ndarray]) -> float:
    """max / min of the round medians: 1.0 when the rounds agree (or there is one)."""
    meds = round_medians(groups)
    return float(meds.max() / meds.min()) if meds.min() > 0 else math.inf


def _log_se(boot: np.ndarray, rounds: int) -> float:
    """Standard error of log(theta) from bootstrap replicates, corrected for R clusters."""
    if np.any(boot <= 0.0):
        raise ValueError("times must be positive")
    sd = float(np.std(np.log(boot), ddof=1)) if boot.size > 1 else 0.0
    return sd * math.sqrt(rounds / (rounds - 1)) if rounds > 1 else sd


def _t_quantile(confidence: float, df: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return float(t_ppf((1.0 + confidence) / 2.0, df))


def bootstrap_grand_medians(groups: Sequence[np.ndarray], n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``n_boot`` two-level bootstrap replicates of the grand median (module docstring).

    Each round's within-round bootstrap medians are drawn once (``n_boot`` per round); a replicate
    draws R rounds with replacement and, for each, one of that round's medians at random, so a
    round drawn twice gets two independent within-round resamples.

    Round i's medians come from their own stream, seeded by the first draw of ``rng`` and i, and
    are kept (:func:`_within_medians`): a run merges a point's rounds again after each new round
    (and scores it), and the earlier rounds' medians are the same numbers every time (replaying an
    8-round H200 o_proj run's 222 merges, ``bench/replay_merges.py``: 0.82 s before, 0.48 s after).
    """
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    r = len(groups)
    if r == 0:
        raise ValueError("no rounds")
    if r == 1:
        return _bootstrap_medians(groups[0], n_boot, rng)
    key = int(rng.integers(1 << 62))
    within = np.stack([_within_medians(np.asarray(g, dtype=float), n_boot, key, i)
                       for i, g in enumerate(groups)])  # (R, n_boot)
    which = rng.integers(0, r, size=(n_boot, r))
    pick = rng.integers(0, n_boot, size=(n_boot, r))
    return np.median(within[which, pick], axis=1)  # type: ignore[no-any-return]


_WITHIN_CACHE: dict[tuple[bytes, int, int, int], np.ndarray] = {}
_WITHIN_CACHE_MAX = 1024  # entries of n_boot floats (2,000: 16 kB each)


def _within_medians(group: np.ndarray, n_boot: int, key: int, index: int) -> np.ndarray:
    """``n_boot`` bootstrap medians of one round, from the stream ``(key, index)``; the same
    arguments give the same numbers, computed once (a bounded cache keyed by a digest of the
    samples)."""
    digest = hashlib.blake2b(group.tobytes(), digest_size=16).digest()
    k = (digest, n_boot, key, index)
    cached = _WITHIN_CACHE.get(k)
    if cached is None:
        cached = _bootstrap_medians(group, n_boot, np.random.default_rng([key, index]))
        cached.setflags(write=False)
        if len(_WITHIN_CACHE) >= _WITHIN_CACHE_MAX:
            _WITHIN_CACHE.pop(next(iter(_WITHIN_CACHE)))
        _WITHIN_CACHE[k] = cached
    return cached


def hierarchical_ci(groups: Sequence[np.ndarray], *, confidence: float = 0.95, n_boot: int = DEFAULT_BOOT,
                    seed: int = 0) -> tuple[float, float, float]:
    """(grand median, low, high): the two-level bootstrap interval of the module docstring.

    One round: the percentile bootstrap of its median. R rounds:
    ``exp(log theta_hat -/+ t_{R-1} * se)`` with the corrected bootstrap standard error.
    """
    rng = np.random.default_rng(seed)
    boot = bootstrap_grand_medians(groups, n_boot, rng)
    est = grand_median(groups)
    r = len(groups)
    if r == 1:
        tail = (1.0 - confidence) / 2.0
        if not 0.0 < confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), got {confidence}")
        low, high = np.quantile(boot, [tail, 1.0 - tail])
        return est, float(low), float(high)
    half = _t_quantile(confidence, r - 1) * _log_se(boot, r)
    return est, est * math.exp(-half), est * math.exp(half)


def summarize(samples: Sequence[float], rounds: Sequence[int] = (), *, confidence: float = 0.95,
              n_boot: int = DEFAULT_BOOT, seed: int = 0) -> RoundSummary:
    """Grand median, its two-level CI, and the spread of a measurement in rounds."""
    groups = group_by_round(samples, rounds)
    med, low, high = hierarchical_ci(groups, confidence=confidence, n_boot=n_boot, seed=seed)
    meds = round_medians(groups)
    return RoundSummary(len(groups), med, low, high, round_spread(groups), tuple(float(m) for m in meds))


def _side(groups: Sequence[np.ndarray], boot: np.ndarray) -> tuple[float, float]:
    """(variance of log theta, degrees of freedom) of one side."""
    r = len(groups)
    var = _log_se(boot, r) ** 2
    return var, float(r - 1 if r > 1 else max(groups[0].size - 1, 1))


def hierarchical_ratio(a: Sequence[np.ndarray], b: Sequence[np.ndarray], *, confidence: float = 0.95,
                       n_boot: int = DEFAULT_BOOT, seed: int = 0) -> RatioEstimate:
    """``grand_median(b) / grand_median(a)`` with a two-level bootstrap CI and one-sided p-values.

    ::

        se^2 = se_a^2 + se_b^2                    (of log grand medians, each corrected)
        df   = se^4 / (se_a^4 / df_a + se_b^4 / df_b)     Welch-Satterthwaite
        CI   = ratio * exp(-/+ t_df * se);  t = log(ratio) / se
        p_slower = P(T_df >= t),  p_faster = P(T_df <= t)

    Raises ValueError on empty, non-finite or non-positive samples.
    """
    rng = np.random.default_rng(seed)
    boot_a = bootstrap_grand_medians(a, n_boot, rng)
    boot_b = bootstrap_grand_medians(b, n_boot, rng)
    med_a, med_b = grand_median(a), grand_median(b)
    if med_a <= 0.0 or med_b <= 0.0:
        raise ValueError("medians must be positive to form a ratio")
    var_a, df_a = _side(a, boot_a)
    var_b, df_b = _side(b, boot_b)
    ratio = med_b / med_a
    var = var_a + var_b
    if var <= 0.0:  # every sample equal on both sides: nothing varies, nothing to test
        same = math.isclose(ratio, 1.0)
        return RatioEstimate(ratio, ratio, ratio, 1.0 if same or ratio < 1 else 0.0,
                             1.0 if same or ratio > 1 else 0.0, len(a), len(b))
    df = var ** 2 / ((var_a ** 2 / df_a) + (var_b ** 2 / df_b))
    se = math.sqrt(var)
    half = _t_quantile(confidence, df) * se
    t = math.log(ratio) / se
    return RatioEstimate(ratio, ratio * math.exp(-half), ratio * math.exp(half),
                         float(t_sf(t, df)), float(t_cdf(t, df)), len(a), len(b))


def pooled_ci(samples: Sequence[float], z: float = 1.959963984540054) -> tuple[float, float]:
    """The naive interval: the order-statistic CI of the median of all samples pooled (for contrast).

    Treats every sample as independent, as a single run does: see the module docstring for why
    this is too narrow when rounds differ.
    """
    return median_ci(list(_as_samples(samples, "samples")), z)
