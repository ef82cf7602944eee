"""Significance tests behind ``solbench compare`` and the CI regression gate.

Pure functions on raw timing samples (seconds); numpy and scipy only, no I/O.

* ``bootstrap_ratio_ci``: percentile bootstrap CI of ``median(b) / median(a)``
  (Efron 1979; Efron & Tibshirani 1993, ch. 13). Linear in the samples: above
  ``_RESAMPLE_MAX_N`` a resample's median is drawn from its order-statistic distribution
  (``_order_statistic_medians``), not from a drawn resample.
* ``mann_whitney_p``: Mann-Whitney U rank test (Mann & Whitney 1947).
* ``bh_adjust`` / ``benjamini_hochberg``: false-discovery-rate control across
  cases (Benjamini & Hochberg 1995).
* ``geometric_mean``: the summary of ratios (Fleming & Wallace 1986).

``MIN_SAMPLES`` is the smallest sample count per side at which callers may draw
a conclusion. With n = 5 per side the exact one-sided Mann-Whitney p-value can
reach 1/C(10, 5) = 0.004, just below the default alpha of 0.01; below that no
test at alpha = 0.01 can ever fire, so verdicts must be INCONCLUSIVE.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

MIN_SAMPLES = 5
_CHUNK = 4_000_000  # resample indices held in memory at once (32 MB of int64)
# Above this many samples a side's bootstrap medians come from their order-statistic distribution
# (_order_statistic_medians, O(n_boot): 0.25 ms for 4000 replicates) instead of drawn resamples
# (O(n_boot * n): 6 ms at 100 samples, 110 ms at 2000). Both draw from the same distribution. The
# threshold was 4096 (twice the default --max-samples) until a run that re-scores its points after
# every round spent 15 s of an H200 o_proj run (70 points, up to 8 rounds) in these resamples.
_RESAMPLE_MAX_N = 32

Alternative = Literal["less", "greater", "two-sided"]

__all__ = [
    "MIN_SAMPLES",
    "benjamini_hochberg",
    "bh_adjust",
    "bootstrap_ratio_ci",
    "geometric_mean",
    "mann_whitney_p",
]


def _as_samples(x: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float).ravel()
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def _bootstrap_medians(x: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of ``n_boot`` resamples of ``x`` drawn with replacement (the bootstrap distribution
    of the sample median), in time linear in ``n_boot`` once ``x`` is sorted.

    ``x`` is sorted first, so the median of a resample ``x[idx]`` is ``x`` at the middle order
    statistic(s) of ``idx``. Up to ``_RESAMPLE_MAX_N`` samples the indices are drawn and
    partitioned (``_resampled_medians``: the same numbers as ``np.median(x[idx], axis=1)``);
    beyond, the middle order statistics of the indices are drawn directly
    (``_order_statistic_medians``), from the same distribution in O(n_boot) instead of
    O(n_boot * n).
    """
    xs = np.sort(x)
    if xs.size <= _RESAMPLE_MAX_N:
        return _resampled_medians(xs, n_boot, rng)
    return _order_statistic_medians(xs, n_boot, rng)


def _resampled_medians(xs: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap medians of sorted ``xs`` by drawing ``n_boot`` x n indices: partitioning integer
    indices gives the same numbers as ``np.median(xs[idx], axis=1)``, about 25% faster. Resamples
    are drawn in chunks of at most ``_CHUNK`` indices to bound memory."""
    n = xs.size
    h = n // 2
    rows = max(1, _CHUNK // n)
    out = np.empty(n_boot)
    for start in range(0, n_boot, rows):
        idx = rng.integers(0, n, size=(min(rows, n_boot - start), n))
        if n % 2:
            med = xs[np.partition(idx, h, axis=1)[:, h]]
        else:
            part = np.partition(idx, [h - 1, h], axis=1)
            med = 0.5 * (xs[part[:, h - 1]] + xs[part[:, h]])
        out[start:start + med.size] = med
    return out


def _order_statistic_medians(xs: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap medians of sorted ``xs`` drawn from the exact distribution of the resample's
    middle order statistics, without drawing the resample.

    A resample's indices are ``floor(n U_i)`` with ``U_1..U_n`` iid uniform on (0, 1); flooring is
    monotone, so its k-th smallest index is ``floor(n U_(k))``, and the k-th order statistic of n
    uniforms is ``U_(k) ~ Beta(k, n - k + 1)`` (David & Nagaraja, *Order Statistics*, 3rd ed.,
    sec. 2.2). Given ``U_(k) = u`` the other ``n - k`` uniforms are iid on (u, 1), so
    ``U_(k+1) = u + (1 - u) V`` with ``V ~ Beta(1, n - k)`` (their minimum). With ``h = n // 2``:

        n odd:   median* = xs[floor(n U_(h+1))]
        n even:  median* = (xs[floor(n U_(h))] + xs[floor(n U_(h+1))]) / 2
    """
    n = xs.size
    h = n // 2
    if n % 2:
        return xs[_index(rng.beta(h + 1, n - h, size=n_boot), n)]  # type: ignore[no-any-return]
    u = rng.beta(h, n - h + 1, size=n_boot)
    v = u + (1.0 - u) * rng.beta(1, n - h, size=n_boot)
    return 0.5 * (xs[_index(u, n)] + xs[_index(v, n)])  # type: ignore[no-any-return]


def _index(u: np.ndarray, n: int) -> np.ndarray:
    """``floor(n u)`` as indices into n sorted samples (clipped against rounding at u ~ 1)."""
    return np.minimum((u * n).astype(np.int64), n - 1)


def bootstrap_ratio_ci(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Ratio of medians ``r = median(b) / median(a)`` with a percentile bootstrap CI.

    Each side is resampled independently with replacement ``n_boot`` times
    (Efron 1979), giving ``r*_i = median(b*_i) / median(a*_i)``; the interval is
    the ``(1 - c) / 2`` and ``(1 + c) / 2`` quantiles of the ``r*_i``
    (percentile method, Efron & Tibshirani 1993, eq. 13.5). The point estimate
    is the ratio of the observed medians. Deterministic for a given ``seed``.

    Returns ``(ratio, low, high)``. Raises ``ValueError`` on empty or
    non-finite input or when ``median(a) <= 0``.
    """
    xa = _as_samples(a, "a")
    xb = _as_samples(b, "b")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    med_a = float(np.median(xa))
    if med_a <= 0.0:
        raise ValueError("median(a) must be positive to form a ratio")
    ratio = float(np.median(xb)) / med_a
    rng = np.random.default_rng(seed)
    boot_a = _bootstrap_medians(xa, n_boot, rng)
    boot_b = _bootstrap_medians(xb, n_boot, rng)
    if np.any(boot_a <= 0.0):
        raise ValueError("samples of a must be positive to form a ratio")
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(boot_b / boot_a, [tail, 1.0 - tail])
    return ratio, float(low), float(high)


def mann_whitney_p(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    alternative: Alternative = "two-sided",
) -> float:
    """p-value of the Mann-Whitney U test (Mann & Whitney 1947).

    The alternative follows ``scipy.stats.mannwhitneyu``: ``"greater"`` means
    samples of ``a`` tend to be larger than those of ``b`` (for times: ``a`` is
    slower), ``"less"`` the opposite. scipy picks the exact distribution for
    small tie-free samples and the tie-corrected normal approximation
    otherwise. When every value in ``a`` and ``b`` is equal the statistic has
    zero variance and no evidence of a difference exists: the answer is 1.0.
    """
    xa = _as_samples(a, "a")
    xb = _as_samples(b, "b")
    if alternative not in ("less", "greater", "two-sided"):
        raise ValueError(f"unknown alternative {alternative!r}")
    if np.all(xa == xa[0]) and np.all(xb == xa[0]):
        return 1.0
    from scipy import stats  # here, not at the top: scipy.stats takes over a second to import

    p = float(stats.mannwhitneyu(xa, xb, alternative=alternative).pvalue)
    return 1.0 if math.isnan(p) else min(p, 1.0)


def bh_adjust(pvalues: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (Benjamini & Hochberg 1995).

    With the m p-values sorted ascending, ``p~_(i) = min_{j >= i} min(1, m p_(j) / j)``.
    Rejecting every hypothesis with ``p~ <= q`` is the step-up procedure of
    BH95 (largest k with ``p_(k) <= k q / m``), which keeps the expected
    false-discovery rate at or below q for independent or positively
    dependent tests.
    """
    p = np.asarray(pvalues, dtype=float)
    m = p.size
    if m == 0:
        return []
    if np.any(np.isnan(p)) or np.any(p < 0.0) or np.any(p > 1.0):
        raise ValueError("p-values must lie in [0, 1]")
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    adjusted_sorted = np.minimum(np.minimum.accumulate(scaled[::-1])[::-1], 1.0)
    adjusted = np.empty(m)
    adjusted[order] = adjusted_sorted
    return [float(v) for v in adjusted]


def benjamini_hochberg(pvalues: Sequence[float], q: float = 0.01) -> list[bool]:
    """Which hypotheses the BH step-up procedure rejects at FDR level ``q``.

    Equivalent to ``bh_adjust(pvalues)[i] <= q`` (Benjamini & Hochberg 1995).
    """
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1), got {q}")
    return [v <= q for v in bh_adjust(pvalues)]


def geometric_mean(values: Sequence[float] | np.ndarray) -> float:
    """Geometric mean ``exp(mean(log v))``: the right average for ratios
    (Fleming & Wallace 1986). Every value must be positive and finite."""
    v = _as_samples(values, "values")
    if np.any(v <= 0.0):
        raise ValueError("geometric mean needs positive values")
    return float(np.exp(np.mean(np.log(v))))
