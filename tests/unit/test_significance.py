import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from solbench.analysis import significance as sig
from solbench.analysis.significance import (
    benjamini_hochberg,
    bh_adjust,
    bootstrap_ratio_ci,
    geometric_mean,
    mann_whitney_p,
)

# Benjamini & Hochberg (1995), section 4: 15 p-values from a clinical trial. At q = 0.05
# Bonferroni rejects 3 hypotheses, the step-up procedure rejects 4.
BH95_P = [0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344, 0.0459,
          0.3240, 0.4262, 0.5719, 0.6528, 0.7590, 1.0000]


@pytest.mark.parametrize("n", [5, 6, 29, 30])
def test_bootstrap_medians_match_numpy_median_of_resamples(n):
    x = np.random.default_rng(1).lognormal(0.0, 0.2, n)
    fast = sig._bootstrap_medians(x, 500, np.random.default_rng(7))
    idx = np.random.default_rng(7).integers(0, n, size=(500, n))
    assert np.allclose(fast, np.median(np.sort(x)[idx], axis=1))


def test_bootstrap_medians_chunked_for_memory(monkeypatch):
    x = np.random.default_rng(1).lognormal(0.0, 0.2, 31)
    whole = sig._bootstrap_medians(x, 1000, np.random.default_rng(3))
    monkeypatch.setattr(sig, "_CHUNK", 100)  # 3 resamples per chunk
    chunked = sig._bootstrap_medians(x, 1000, np.random.default_rng(3))
    assert chunked.shape == (1000,) and np.array_equal(whole, chunked)


@pytest.mark.parametrize("n", [11, 21])
def test_order_statistic_medians_follow_the_exact_bootstrap_distribution(n):
    # Odd n: the resample's median is xs[j] with j its (h+1)-th smallest index, and
    # P(j <= k) = P(Binomial(n, (k+1)/n) >= h+1) exactly. 200k seeded draws must match that CDF.
    xs = np.arange(1.0, n + 1.0)
    draws = sig._order_statistic_medians(xs, 200_000, np.random.default_rng(4))
    h = n // 2
    exact = stats.binom.sf(h, n, np.arange(1, n + 1) / n)
    observed = np.searchsorted(np.sort(draws), xs, side="right") / draws.size
    assert np.max(np.abs(observed - exact)) < 0.005
    assert set(np.unique(draws)) <= set(xs)


@pytest.mark.parametrize("n", [12, 40])
def test_order_statistic_medians_match_resampled_medians(n):
    # Even n (a mean of two order statistics drawn jointly): the distribution of the drawn
    # medians matches medians of drawn resamples, value by value.
    xs = np.sort(np.random.default_rng(2).lognormal(0.0, 0.2, n))
    direct = sig._order_statistic_medians(xs, 100_000, np.random.default_rng(5))
    resampled = sig._resampled_medians(xs, 100_000, np.random.default_rng(6))
    values = np.union1d(direct, resampled)
    cdf = [np.searchsorted(np.sort(d), values, side="right") / d.size for d in (direct, resampled)]
    assert np.max(np.abs(cdf[0] - cdf[1])) < 0.01
    assert np.mean(direct) == pytest.approx(np.mean(resampled), rel=1e-3)


def test_large_samples_take_the_order_statistic_path_with_the_same_interval(monkeypatch):
    # Above _RESAMPLE_MAX_N samples the interval comes from drawn order statistics; forced back
    # onto resampling, the same data give the same interval up to Monte-Carlo noise.
    rng = np.random.default_rng(8)
    n = sig._RESAMPLE_MAX_N + 1000
    a, b = rng.lognormal(0, 0.02, n), 1.002 * rng.lognormal(0, 0.02, n)
    ratio, low, high = bootstrap_ratio_ci(a, b, seed=1)
    monkeypatch.setattr(sig, "_RESAMPLE_MAX_N", n)
    ratio_r, low_r, high_r = bootstrap_ratio_ci(a, b, seed=1)
    assert ratio == ratio_r and (low, high) != (low_r, high_r)  # two paths, one point estimate
    width = high_r - low_r
    assert abs(low - low_r) < 0.1 * width and abs(high - high_r) < 0.1 * width


def test_bootstrap_ratio_point_estimate_and_determinism():
    rng = np.random.default_rng(0)
    a, b = rng.lognormal(0, 0.01, 30), 1.1 * rng.lognormal(0, 0.01, 30)
    ratio, low, high = bootstrap_ratio_ci(a, b, seed=3)
    assert ratio == pytest.approx(np.median(b) / np.median(a))
    assert low < ratio < high
    assert low > 1.08 and high < 1.12
    assert bootstrap_ratio_ci(a, b, seed=3) == (ratio, low, high)
    assert bootstrap_ratio_ci(a, b, seed=4) != (ratio, low, high)


def test_bootstrap_ci_widens_with_confidence():
    rng = np.random.default_rng(2)
    a, b = rng.lognormal(0, 0.05, 30), rng.lognormal(0, 0.05, 30)
    _, lo90, hi90 = bootstrap_ratio_ci(a, b, confidence=0.90)
    _, lo99, hi99 = bootstrap_ratio_ci(a, b, confidence=0.99)
    assert lo99 <= lo90 and hi90 <= hi99 and (hi99 - lo99) > (hi90 - lo90)


def test_bootstrap_ci_covers_true_ratio_at_nominal_rate():
    # Calibration: the 95% interval should cover the true ratio ~95% of the time (percentile
    # bootstrap of medians is slightly conservative at n = 30; measured 0.96).
    rng = np.random.default_rng(5)
    covered = 0
    trials = 500
    for t in range(trials):
        a, b = rng.lognormal(0, 0.01, 30), 1.05 * rng.lognormal(0, 0.01, 30)
        _, low, high = bootstrap_ratio_ci(a, b, seed=t, n_boot=1000)
        covered += low <= 1.05 <= high
    assert 0.92 <= covered / trials <= 0.99


def test_bootstrap_all_equal_samples_give_a_degenerate_interval():
    ratio, low, high = bootstrap_ratio_ci([1e-3] * 20, [2e-3] * 20)
    assert (ratio, low, high) == pytest.approx((2.0, 2.0, 2.0))


@given(st.floats(min_value=1e-9, max_value=1e3))
@settings(max_examples=25, deadline=None)
def test_bootstrap_ratio_is_scale_invariant(scale):
    rng = np.random.default_rng(11)
    a, b = rng.lognormal(0, 0.1, 12), rng.lognormal(0.1, 0.1, 12)
    r1 = bootstrap_ratio_ci(a, b, n_boot=200)
    r2 = bootstrap_ratio_ci(a * scale, b * scale, n_boot=200)
    assert r2 == pytest.approx(r1, rel=1e-9)


@pytest.mark.parametrize(("a", "b"), [([], [1.0]), ([1.0], []), ([1.0, math.nan], [1.0]),
                                      ([0.0, 0.0, 1.0], [1.0]), ([1.0], [math.inf])])
def test_bootstrap_rejects_bad_input(a, b):
    with pytest.raises(ValueError):
        bootstrap_ratio_ci(a, b)


def test_bootstrap_rejects_bad_settings():
    with pytest.raises(ValueError):
        bootstrap_ratio_ci([1.0], [1.0], confidence=1.0)
    with pytest.raises(ValueError):
        bootstrap_ratio_ci([1.0], [1.0], n_boot=0)


def test_mann_whitney_all_equal_is_one_and_silent():
    # pytest turns warnings into errors: a zero-variance statistic must not warn.
    for alt in ("less", "greater", "two-sided"):
        assert mann_whitney_p([1e-3] * 30, [1e-3] * 30, alt) == 1.0
        assert mann_whitney_p([5.0], [5.0], alt) == 1.0


def test_mann_whitney_direction_follows_scipy():
    rng = np.random.default_rng(3)
    slow, fast = 1.1 * rng.lognormal(0, 0.01, 30), rng.lognormal(0, 0.01, 30)
    assert mann_whitney_p(slow, fast, "greater") < 1e-9
    assert mann_whitney_p(slow, fast, "less") > 0.99
    assert mann_whitney_p(slow, fast, "two-sided") < 1e-9
    ref = stats.mannwhitneyu(slow, fast, alternative="greater").pvalue
    assert mann_whitney_p(slow, fast, "greater") == pytest.approx(ref)


def test_mann_whitney_exact_small_samples():
    # Complete separation of 5 vs 5: the one-sided exact p-value is 1 / C(10, 5) = 1/252.
    assert mann_whitney_p([6, 7, 8, 9, 10], [1, 2, 3, 4, 5], "greater") == pytest.approx(1 / 252)
    assert 0.0 < mann_whitney_p([2.0], [1.0], "greater") <= 1.0  # n = 1 does not crash


def test_mann_whitney_constant_but_different_sides():
    assert mann_whitney_p([2.0] * 10, [1.0] * 10, "greater") < 1e-3


def test_mann_whitney_rejects_unknown_alternative():
    with pytest.raises(ValueError):
        mann_whitney_p([1.0], [2.0], "bigger")  # type: ignore[arg-type]


def test_benjamini_hochberg_reproduces_bh95_example():
    assert sum(benjamini_hochberg(BH95_P, q=0.05)) == 4
    assert benjamini_hochberg(BH95_P, q=0.05)[:5] == [True, True, True, True, False]
    assert sum(p <= 0.05 / len(BH95_P) for p in BH95_P) == 3  # Bonferroni, for contrast


def test_bh_adjust_matches_scipy_and_is_order_free():
    rng = np.random.default_rng(9)
    p = rng.uniform(0, 0.1, 40).tolist()
    assert bh_adjust(p) == pytest.approx(list(stats.false_discovery_control(p, method="bh")))
    perm = rng.permutation(40)
    assert [bh_adjust(p)[i] for i in perm] == pytest.approx(bh_adjust([p[i] for i in perm]))


@given(st.lists(st.floats(min_value=0.0, max_value=1.0), max_size=50))
@settings(max_examples=60, deadline=None)
def test_bh_adjusted_bounds(p):
    adj = bh_adjust(p)
    assert len(adj) == len(p)
    assert all(raw <= a + 1e-12 and a <= 1.0 for raw, a in zip(p, adj, strict=True))
    order = np.argsort(p, kind="stable")
    assert all(adj[i] <= adj[j] + 1e-12 for i, j in itertools.pairwise(order))


def test_benjamini_hochberg_edges():
    assert benjamini_hochberg([], q=0.01) == []
    with pytest.raises(ValueError):
        benjamini_hochberg([0.5], q=0.0)
    with pytest.raises(ValueError):
        bh_adjust([1.5])


def test_geometric_mean():
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert geometric_mean([0.5, 2.0]) == pytest.approx(1.0)
    for bad in ([], [1.0, 0.0], [-1.0]):
        with pytest.raises(ValueError):
            geometric_mean(bad)
