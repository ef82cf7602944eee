"""Statistics over rounds (analysis/rounds.py) on seeded synthetic samples; no device, no timing."""

import math

import numpy as np
import pytest

from solbench.analysis import rounds as R
from solbench.analysis.significance import mann_whitney_p


def _rounds(rng, n_rounds, offset_sd, noise=0.01, n=40, median=1.0, shift=1.0):
    """Groups of lognormal samples whose round medians are median * shift * exp(offset_r)."""
    offsets = rng.normal(0.0, offset_sd, n_rounds)
    return [median * shift * np.exp(o + rng.normal(0.0, noise, int(rng.integers(n // 2, n + 1))))
            for o in offsets]


def test_group_by_round_keeps_first_appearance_order():
    groups = R.group_by_round([1.0, 2.0, 3.0, 4.0, 5.0], [7, 3, 7, 3, 9])
    assert [g.tolist() for g in groups] == [[1.0, 3.0], [2.0, 4.0], [5.0]]
    assert [g.tolist() for g in R.group_by_round([1.0, 2.0])] == [[1.0, 2.0]]


def test_group_by_round_refuses_labels_that_do_not_match():
    with pytest.raises(ValueError, match="3 round labels for 2 samples"):
        R.group_by_round([1.0, 2.0], [0, 0, 1])
    with pytest.raises(ValueError, match="empty"):
        R.group_by_round([])


def test_grand_median_is_the_median_of_round_medians_and_spread_their_range():
    groups = [np.array([1.0, 1.0, 50.0]), np.array([2.0, 2.0]), np.array([4.0])]
    assert R.grand_median(groups) == 2.0  # round medians 1, 2, 4: one outlier sample moves nothing
    assert R.round_spread(groups) == 4.0
    summary = R.summarize([1.0, 1.0, 50.0, 2.0, 2.0, 4.0], [0, 0, 0, 1, 1, 2], n_boot=500)
    assert summary.rounds == 3 and summary.round_medians == (1.0, 2.0, 4.0)
    assert summary.median == 2.0 and summary.spread == 4.0
    assert summary.ci_low < 2.0 < summary.ci_high


def test_all_equal_samples_give_a_point_interval():  # MAD = 0 within and between rounds
    groups = [np.full(10, 3e-6), np.full(12, 3e-6), np.full(8, 3e-6)]
    est, lo, hi = R.hierarchical_ci(groups, n_boot=200)
    assert est == lo == hi == pytest.approx(3e-6)
    r = R.hierarchical_ratio(groups, groups, n_boot=200)
    assert (r.ratio, r.ci_low, r.ci_high, r.p_slower, r.p_faster) == (1.0, 1.0, 1.0, 1.0, 1.0)


def test_one_round_is_the_ordinary_bootstrap_of_the_median():
    rng = np.random.default_rng(3)
    x = rng.lognormal(0.0, 0.05, 200)
    est, lo, hi = R.hierarchical_ci([x], n_boot=2000, seed=1)
    boot = R.bootstrap_grand_medians([x], 2000, np.random.default_rng(1))
    assert est == pytest.approx(float(np.median(x)))
    assert (lo, hi) == pytest.approx(tuple(np.quantile(boot, [0.025, 0.975])))


def test_deterministic_for_a_seed():
    rng = np.random.default_rng(0)
    groups = _rounds(rng, 4, 0.02)
    assert R.hierarchical_ci(groups, seed=5) == R.hierarchical_ci(groups, seed=5)
    assert R.hierarchical_ci(groups, seed=5) != R.hierarchical_ci(groups, seed=6)


def _coverage(n_rounds, offset_sd, trials=200, seed=11):
    """How often the two-level and the naive pooled 95% CIs contain the true grand median (1.0)."""
    rng = np.random.default_rng(seed)
    hier = naive = 0
    for t in range(trials):
        groups = _rounds(rng, n_rounds, offset_sd)
        _, lo, hi = R.hierarchical_ci(groups, n_boot=1000, seed=t)
        hier += lo <= 1.0 <= hi
        plo, phi = R.pooled_ci(np.concatenate(groups))
        naive += plo <= 1.0 <= phi
    return hier / trials, naive / trials


@pytest.mark.parametrize("n_rounds", [3, 5, 10])
def test_two_level_ci_covers_the_grand_median_when_rounds_differ(n_rounds):
    """A 2% offset per round (process state), 1% noise inside: the pooled CI sees only the 1%."""
    hier, naive = _coverage(n_rounds, offset_sd=0.02)
    assert 0.90 <= hier <= 1.0, hier
    assert naive < 0.6, naive


def test_two_level_ci_still_covers_without_offsets():
    hier, naive = _coverage(5, offset_sd=0.0, trials=100)
    assert hier >= 0.93 and naive >= 0.85


def test_two_level_ci_narrows_as_rounds_are_added():
    rng = np.random.default_rng(2)
    widths = {}
    for n_rounds in (3, 10, 30):
        w = []
        for t in range(30):
            _, lo, hi = R.hierarchical_ci(_rounds(rng, n_rounds, 0.02), n_boot=500, seed=t)
            w.append(math.log(hi / lo))
        widths[n_rounds] = float(np.median(w))
    assert widths[3] > widths[10] > widths[30]


def test_ratio_finds_a_ten_percent_slowdown_across_rounds():
    rng = np.random.default_rng(4)
    a = _rounds(rng, 5, 0.01)
    b = _rounds(rng, 5, 0.01, shift=1.10)
    r = R.hierarchical_ratio(a, b)
    assert r.ci_low > 1.0 and r.ci_low <= 1.10 <= r.ci_high
    assert r.p_slower < 0.01 < r.p_faster
    assert (r.rounds_a, r.rounds_b) == (5, 5)
    assert R.hierarchical_ratio(b, a).p_faster < 0.01


def test_ratio_false_positive_rate_holds_when_rounds_differ():
    """Same code on both sides, 2% process offsets: the two-level test keeps its level; a rank test
    on the pooled samples (treating them as independent) fires most of the time."""
    rng = np.random.default_rng(5)
    fired = naive = 0
    trials = 150
    for t in range(trials):
        a, b = _rounds(rng, 5, 0.02), _rounds(rng, 5, 0.02)
        fired += R.hierarchical_ratio(a, b, n_boot=1000, seed=t).p_slower <= 0.025
        naive += mann_whitney_p(np.concatenate(b), np.concatenate(a), "greater") <= 0.025
    assert fired / trials <= 0.06
    assert naive / trials > 0.2


def test_ratio_ci_and_p_value_agree():
    rng = np.random.default_rng(6)
    for t in range(40):
        a, b = _rounds(rng, 4, 0.02), _rounds(rng, 3, 0.02, shift=1.03)
        r = R.hierarchical_ratio(a, b, n_boot=500, seed=t, confidence=0.95)
        assert (r.ci_low > 1.0) == (r.p_slower < 0.025)
        assert (r.ci_high < 1.0) == (r.p_faster < 0.025)


def test_ratio_refuses_non_positive_times():
    with pytest.raises(ValueError):
        R.hierarchical_ratio([np.array([0.0, 0.0])], [np.array([1.0, 2.0])], n_boot=50)


def test_each_rounds_bootstrap_medians_are_its_own_and_drawn_once(monkeypatch):
    """A run merges a point's rounds again after every new round: the earlier rounds' within-round
    bootstrap medians are the same numbers each time (their own stream), taken from the cache, and
    the interval of the same rounds is the same whatever was merged before."""
    rng = np.random.default_rng(11)
    groups = [rng.lognormal(0.0, 0.02, size=15) * (1 + 0.01 * i) for i in range(4)]
    calls = []
    real = R._bootstrap_medians
    monkeypatch.setattr(R, "_bootstrap_medians", lambda g, n, r: calls.append(len(g)) or real(g, n, r))
    monkeypatch.setattr(R, "_WITHIN_CACHE", {})
    first = R.hierarchical_ci(groups[:3], seed=5)
    assert len(calls) == 3
    R.hierarchical_ci(groups, seed=5)  # one round more: only its medians are drawn
    assert len(calls) == 4
    assert R.hierarchical_ci(groups[:3], seed=5) == first and len(calls) == 4
    monkeypatch.setattr(R, "_WITHIN_CACHE", {})
    assert R.hierarchical_ci(groups[:3], seed=5) == first  # drawn afresh: the same numbers
    key = 123
    a = R._within_medians(groups[0], 200, key, 0)
    assert not np.array_equal(a, R._within_medians(groups[0], 200, key, 1))  # each round its stream
    assert not a.flags.writeable  # a cached array cannot be changed under a later caller


def test_the_within_round_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(R, "_WITHIN_CACHE", {})
    monkeypatch.setattr(R, "_WITHIN_CACHE_MAX", 3)
    g = np.linspace(1.0, 2.0, 9)
    for i in range(5):
        R._within_medians(g, 50, 7, i)
    assert len(R._WITHIN_CACHE) == 3
