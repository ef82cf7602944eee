"""Error rates of the adaptive gate under optional stopping, and the paired compare; seeded simulations.

Noise model (issue 16, measured on an H200): a per-round offset with sd 1.5% (the per-process
state), within-round sample noise sd 2%, 10-20 samples a round. Each trial starts with three
rounds per side and looks again after every added round, stopping at its first verdict or at ten
rounds (K = 8 looks, each at alpha / 8). The rule is the gate's own (``sequential.gate_codes``,
checked against ``gate()`` below). Vectorized over trials; no timing thresholds.
"""

import math
from dataclasses import replace

import numpy as np
import pytest

from solbench.analysis.compare import compare_impls
from solbench.analysis.gate import gate
from solbench.analysis.sequential import (
    FASTER,
    PASS,
    REGRESSION,
    UNDECIDED,
    gate_codes,
    log_ratio,
    look_levels,
    t_stats,
)
from solbench.results.model import Timing
from tests.unit.factories import make_run

SD_ROUND, SD_SAMPLE, TAU = 0.015, 0.02, 0.05


def _round_medians(rng, trials, rounds, shift=1.0, sd_round=SD_ROUND):
    """log round medians of (trials, rounds): offset + the median of 10-20 noisy log samples."""
    n = rng.integers(10, 21, size=(trials, rounds))
    noise = rng.normal(0.0, SD_SAMPLE, size=(trials, rounds, 20))
    noise = np.where(np.arange(20) < n[..., None], noise, np.nan)
    return math.log(shift) + rng.normal(0.0, sd_round, size=(trials, rounds)) + np.nanmedian(noise, axis=-1)


def _adaptive(shift, *, trials=6000, first=3, cap=10, both=True, seed=0, sd_cur=SD_ROUND):
    """Verdict and rounds used per trial. both: ab (both sides get rounds); else run --gate-against
    (the baseline keeps its ``first`` rounds)."""
    rng = np.random.default_rng(seed)
    base = _round_medians(rng, trials, cap)
    cur = _round_medians(rng, trials, cap, shift, sd_round=sd_cur)
    looks = cap - first + 1
    verdict = np.full(trials, UNDECIDED)
    used = np.full(trials, cap)
    for r in range(first, cap + 1):
        d, se, df = t_stats(base[:, :r if both else first], cur[:, :r])
        v = gate_codes(d, se, df, TAU, looks=looks)
        new = (verdict == UNDECIDED) & (v != UNDECIDED)
        verdict[new], used[new] = v[new], r
    return verdict, used


def test_ab_same_code_never_regresses_and_mostly_passes_in_a_few_rounds():
    verdict, used = _adaptive(1.0, seed=1)
    assert np.mean(verdict == REGRESSION) <= 0.01  # measured 0 of 6000
    assert np.mean(verdict == PASS) >= 0.99  # measured 99.93%, median 4 rounds
    assert np.median(used) <= 5  # decided after about four rounds a side


def test_ab_catches_a_ten_percent_slowdown():
    verdict, _ = _adaptive(1.10, seed=2)
    assert np.mean(verdict == REGRESSION) >= 0.99  # measured 99.87%
    assert np.mean(verdict == PASS) == 0.0


def test_ab_three_percent_at_a_five_percent_threshold_is_no_regression():
    verdict, _ = _adaptive(1.03, seed=3)
    assert np.mean(verdict == REGRESSION) <= 0.01  # measured 0 of 6000


@pytest.mark.parametrize("shift", [1.05, 1.0 / 1.05])
def test_at_the_threshold_each_wrong_verdict_stays_within_its_share(shift):
    """The worst case: the true ratio on the threshold itself. A claim (REGRESSION, FASTER) and a
    PASS each stay below (1 - confidence) / 2 = 2.5% over all looks, stopping or not."""
    verdict, _ = _adaptive(shift, seed=4, trials=8000)
    if shift > 1:
        assert np.mean(verdict == REGRESSION) <= 0.025 and np.mean(verdict == PASS) <= 0.025
    else:
        assert np.mean(verdict == FASTER) <= 0.025


def test_without_the_split_optional_stopping_inflates_the_error():
    """The same looks each at the full level: wrong REGRESSION verdicts at the threshold exceed
    what the split allows (the split is what keeps the error rate, not luck)."""
    rng = np.random.default_rng(5)
    trials, cap = 8000, 10
    base, cur = _round_medians(rng, trials, cap), _round_medians(rng, trials, cap, 1.05)
    wrong_split = wrong_naive = np.zeros(trials, dtype=bool)
    for r in range(3, cap + 1):
        d, se, df = t_stats(base[:, :r], cur[:, :r])
        wrong_naive = wrong_naive | (gate_codes(d, se, df, TAU, looks=1) == REGRESSION)
        wrong_split = wrong_split | (gate_codes(d, se, df, TAU, looks=8) == REGRESSION)
    assert np.mean(wrong_naive) > 0.025 >= np.mean(wrong_split)


def test_gate_against_a_fixed_baseline_needs_enough_baseline_rounds():
    """run --gate-against: only the current side gets rounds. A three-round baseline leaves about
    one same-code trial in eight undecided at ten rounds; a six-round baseline decides nearly all."""
    v3, _ = _adaptive(1.0, first=3, both=False, seed=6)
    v6, _ = _adaptive(1.0, first=6, cap=12, both=False, seed=6)
    assert np.mean(v3 == REGRESSION) == np.mean(v6 == REGRESSION) == 0.0
    assert np.mean(v3 == UNDECIDED) > 0.05  # measured 11%
    assert np.mean(v6 == PASS) >= 0.99  # measured 99.85%
    caught, _ = _adaptive(1.10, first=6, cap=12, both=False, seed=7)
    assert np.mean(caught == REGRESSION) >= 0.99  # measured 99.35%


def test_a_noisier_current_side_keeps_the_error_rate():
    """The pooled t assumes both sides spread alike; a current side twice as noisy between rounds
    still makes no A/A regression and no wrong PASS at 10%."""
    aa, _ = _adaptive(1.0, seed=8, sd_cur=2 * SD_ROUND)
    slow, _ = _adaptive(1.10, seed=9, sd_cur=2 * SD_ROUND)
    assert np.mean(aa == REGRESSION) <= 0.01 and np.mean(slow == PASS) <= 0.01


def test_the_vectorized_rule_is_the_gates_rule():
    """gate_codes on one point equals gate() on runs holding those rounds (both paths, K = 1 and 8)."""
    rng = np.random.default_rng(10)
    for trial in range(12):
        shift = (1.0, 1.03, 1.06, 1.10)[trial % 4]
        runs = []
        for s in (1.0, shift):
            samples, labels = [], []
            for r in range(4):
                x = s * 1e-3 * np.exp(rng.normal(0, SD_ROUND) + rng.normal(0, SD_SAMPLE, 15))
                samples += list(x)
                labels += [r] * 15
            runs.append((samples, labels))
        base, cur = (_one_run(s, lab) for s, lab in runs)
        la, lb = (np.log([np.median(np.array(s)[np.array(lab) == r]) for r in range(4)]) for s, lab in runs)
        for looks in (1, 8):
            d, se, df = t_stats(la, lb)
            code = int(gate_codes(d, se, df, TAU, looks=looks))
            name = {UNDECIDED: "INCONCLUSIVE", PASS: "PASS", REGRESSION: "REGRESSION", FASTER: "FASTER"}[code]
            assert gate(base, cur, threshold=TAU, looks=looks).verdicts[0].verdict == name


def _with_rounds(run, labels):
    """``run`` (one case) with every implementation's samples labelled by round."""
    case = run.cases[0]
    impls = tuple(replace(i, timing=Timing(i.timing.samples, i.timing.median, 0.0, 1.0, "converged",
                                           rounds=tuple(labels))) for i in case.impls)
    return replace(run, cases=(replace(case, impls=impls),))


def _one_run(samples, labels):
    return _with_rounds(make_run({"c": {"x": samples}}), labels)


def test_look_levels_split_both_error_rates():
    assert look_levels(0.01, 0.95, 1) == (0.01, 0.95)
    a, c = look_levels(0.01, 0.95, 8)
    assert a == pytest.approx(0.00125) and c == pytest.approx(1 - 0.05 / 8)
    with pytest.raises(ValueError):
        look_levels(0.01, 0.95, 0)


def test_pooled_t_matches_scipy_and_a_one_round_side_borrows_the_spread():
    from scipy import stats

    rng = np.random.default_rng(11)
    la, lb = rng.normal(0, 0.01, 4), rng.normal(0.02, 0.01, 6)
    d, se, df = t_stats(la, lb)
    ref = stats.ttest_ind(lb, la, equal_var=True)
    assert float(d / se) == pytest.approx(ref.statistic) and df == 8
    one = log_ratio([np.array([1e-3])], [np.exp(lb[i]) * np.ones(3) for i in range(6)])
    assert one is not None and one.df == 5 and not one.paired
    assert log_ratio([np.array([1e-3, 2e-3])], [np.array([1e-3])]) is None  # no spread between rounds


def test_pairing_by_round_is_the_paired_t_and_needs_five_rounds():
    from scipy import stats

    rng = np.random.default_rng(12)
    common = rng.normal(0, 0.02, 6)
    a = [np.exp(c + rng.normal(0, 0.005, 9)) for c in common]
    b = [0.9 * np.exp(c + rng.normal(0, 0.005, 9)) for c in common]
    t = log_ratio(a, b, paired=True)
    ref = stats.ttest_rel(np.log([np.median(x) for x in b]), np.log([np.median(x) for x in a]))
    assert t is not None and t.paired and t.df == 5 and t.d / t.se == pytest.approx(ref.statistic)
    assert not log_ratio(a[:4], b[:4], paired=True).paired  # four rounds: pooled
    assert log_ratio(a, b).se > 2 * t.se  # the shared round offsets cancel in pairs


def _impls_in_rounds(rng, rounds, shift, shared_sd, own_sd, n=15):
    """Two implementations of one run in the same rounds: a shared round offset plus each one's own."""
    xs, ys, labels = [], [], []
    for r in range(rounds):
        shared = rng.normal(0, shared_sd)
        xs += list(1e-3 * np.exp(shared + rng.normal(0, own_sd) + rng.normal(0, SD_SAMPLE, n)))
        ys += list(shift * 1e-3 * np.exp(shared + rng.normal(0, own_sd) + rng.normal(0, SD_SAMPLE, n)))
        labels += [r] * n
    return _with_rounds(make_run({"c": {"base": xs, "fused": ys}}), labels)


def test_compare_calls_a_twelve_percent_speedup_faster():
    rng = np.random.default_rng(13)
    verdicts = [compare_impls(_impls_in_rounds(rng, 6, 0.876, 0.015, 0.01), "base", "fused").rows[0].verdict
                for _ in range(100)]
    assert verdicts.count("FASTER") >= 99


def test_compare_in_one_run_rarely_claims_a_difference_between_identical_implementations():
    rng = np.random.default_rng(14)
    claims = 0
    trials = 300
    for rounds in (3, 6):
        for _ in range(trials):
            row = compare_impls(_impls_in_rounds(rng, rounds, 1.0, 0.015, 0.01), "base", "fused").rows[0]
            claims += row.verdict in ("FASTER", "SLOWER")
    assert claims / (2 * trials) <= 0.01
