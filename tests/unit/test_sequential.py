"""Error rates of the adaptive gate under optional stopping, and the paired compare; seeded simulations.

Noise model (issue 16, measured on an H200): a per-round offset with sd 1.5% (the per-process
state), within-round sample noise sd 2%, 10-20 samples a round. An ``ab`` trial starts with three
rounds per side and looks again after every four added rounds (``execute.alternate``), stopping at
its first verdict or at 15 rounds (K = 4 looks, each at alpha / 4); ``run --gate-against`` adds
four rounds a look to the current side only, up to eight (K = 3). The rule is the gate's own
(``sequential.gate_codes``, checked against ``gate()`` below). Vectorized over trials; no timing
thresholds.
"""

import math
from dataclasses import replace

import numpy as np
import pytest

from solbench.analysis.adaptive import ROUNDS_A_LOOK, looks_for
from solbench.analysis.compare import compare_impls, compare_runs
from solbench.analysis.gate import gate
from solbench.analysis.sequential import (
    FASTER,
    MIN_PRIOR_POINTS,
    PAIRED_MIN_ROUNDS,
    PASS,
    PRIOR_DISCOUNT,
    REGRESSION,
    UNDECIDED,
    gate_codes,
    log_ratio,
    look_levels,
    median_sampling_var,
    t_stats,
    variance_prior,
)
from solbench.analysis.tdist import t_ppf, t_sf
from solbench.results.model import Timing
from tests.unit.factories import make_run

SD_ROUND, SD_SAMPLE, TAU = 0.015, 0.02, 0.05


def _round_medians(rng, trials, rounds, shift=1.0, sd_round=SD_ROUND):
    """log round medians of (trials, rounds): offset + the median of 10-20 noisy log samples."""
    n = rng.integers(10, 21, size=(trials, rounds))
    noise = rng.normal(0.0, SD_SAMPLE, size=(trials, rounds, 20))
    noise = np.where(np.arange(20) < n[..., None], noise, np.nan)
    return math.log(shift) + rng.normal(0.0, sd_round, size=(trials, rounds)) + np.nanmedian(noise, axis=-1)


AB_CAP = 15  # ab's default --max-rounds


def _adaptive(shift, *, trials=6000, first=3, cap=AB_CAP, both=True, seed=0, sd_cur=SD_ROUND, step=ROUNDS_A_LOOK):
    """Verdict and rounds used per trial. both: ab (both sides get ``step`` rounds a look, as
    ``measure_ab`` adds them); else run --gate-against (the baseline keeps its ``first`` rounds)."""
    rng = np.random.default_rng(seed)
    base = _round_medians(rng, trials, cap)
    cur = _round_medians(rng, trials, cap, shift, sd_round=sd_cur)
    at = [*range(first, cap, step), cap]
    looks = len(at)
    if both and step == ROUNDS_A_LOOK:
        assert looks == looks_for(first, cap)  # what ab splits its error rates over
    verdict = np.full(trials, UNDECIDED)
    used = np.full(trials, cap)
    for r in at:
        d, se, df = t_stats(base[:, :r if both else first], cur[:, :r])
        v = gate_codes(d, se, df, TAU, looks=looks)
        new = (verdict == UNDECIDED) & (v != UNDECIDED)
        verdict[new], used[new] = v[new], r
    return verdict, used


def test_ab_same_code_never_regresses_and_mostly_passes_in_a_few_rounds():
    verdict, used = _adaptive(1.0, seed=1)
    assert np.mean(verdict == REGRESSION) <= 0.01  # measured 0 of 6000
    assert np.mean(verdict == PASS) >= 0.99  # measured 100% (one round a look, up to 10: 99.93%)
    assert np.median(used) <= 7  # decided at the first look or the second (3 rounds, then 7)


def test_ab_catches_a_ten_percent_slowdown():
    verdict, _ = _adaptive(1.10, seed=2)
    assert np.mean(verdict == REGRESSION) >= 0.99  # measured 100% (one round a look, up to 10: 99.87%)
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


GATE_AGAINST_RERUN = 8  # run --gate-against's default --rerun: four rounds a look, K = 3


def test_gate_against_a_fixed_baseline_needs_enough_baseline_rounds():
    """run --gate-against: only the current side gets rounds, four a look. A three-round baseline
    leaves about one same-code trial in 25 undecided; a six-round baseline decides nearly all."""
    cap3, cap6 = 3 + GATE_AGAINST_RERUN, 6 + GATE_AGAINST_RERUN
    v3, _ = _adaptive(1.0, first=3, cap=cap3, both=False, seed=6)
    v6, _ = _adaptive(1.0, first=6, cap=cap6, both=False, seed=6)
    assert np.mean(v3 == REGRESSION) == np.mean(v6 == REGRESSION) == 0.0
    assert np.mean(v3 == UNDECIDED) > 0.02  # measured 4.3% (a round a look, up to 7: 11%)
    assert np.mean(v6 == PASS) >= 0.99  # measured 99.9%
    caught, _ = _adaptive(1.10, first=6, cap=cap6, both=False, seed=7)
    assert np.mean(caught == REGRESSION) >= 0.99  # measured 99.8% (a round a look, up to 6: 99.35%)


def test_gate_against_at_the_threshold_keeps_each_error_share():
    """The four-rounds-a-look schedule of run --gate-against, the true ratio on the threshold: a
    wrong REGRESSION and a wrong PASS each stay below 2.5% over its K = 3 looks."""
    verdict, _ = _adaptive(1.05, first=3, cap=3 + GATE_AGAINST_RERUN, both=False, seed=4, trials=8000)
    assert np.mean(verdict == REGRESSION) <= 0.025 and np.mean(verdict == PASS) <= 0.025  # 1.7%, 1.9%


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
    t = log_ratio([np.exp(x) * np.ones(3) for x in la], [np.exp(x) * np.ones(3) for x in lb])
    assert t is not None and not t.welch and (t.d, t.se, t.df) == pytest.approx((float(d), float(se), float(df)))
    assert (t.var_a, t.var_b) == pytest.approx((la.var(ddof=1), lb.var(ddof=1)))  # kept for ``moderated``
    one = log_ratio([np.array([1e-3])], [np.exp(lb[i]) * np.ones(3) for i in range(6)])
    assert one is not None and one.df == 5 and not one.paired
    assert log_ratio([np.array([1e-3, 2e-3])], [np.array([1e-3])]) is None  # no spread between rounds


def _rounds_of(logs):
    """Rounds of three samples each whose medians are ``exp(logs)``."""
    return [np.exp(x) * np.array([0.999, 1.0, 1.001]) for x in logs]


@pytest.mark.parametrize("rounds", [3, 4, 6, 10])
def test_equal_rounds_of_unequal_spreads_take_welchs_degrees_of_freedom(rounds):
    """Equal rounds a side: the pooled and Welch standard errors are the same number, and the degrees of
    freedom are Welch-Satterthwaite's (scipy's ``ttest_ind(equal_var=False)``), not the pooled 2R - 2,
    which claim more than two sides spreading differently hold (the interval is too narrow); through
    compare too. Sides that spread alike keep 2R - 2."""
    from scipy import stats

    rng = np.random.default_rng(40 + rounds)
    la, lb = rng.normal(0.0, 0.002, rounds), rng.normal(0.01, 0.02, rounds)  # b spreads ten times a
    ref = stats.ttest_ind(lb, la, equal_var=False)
    t = log_ratio(_rounds_of(la), _rounds_of(lb))
    assert t is not None and not t.paired
    assert t.d / t.se == pytest.approx(ref.statistic) and t.df == pytest.approx(ref.df)
    assert t.df < 2 * rounds - 2
    low, high = ref.confidence_interval(0.95)
    assert t.interval(0.95) == pytest.approx((math.exp(low), math.exp(high)))
    assert t.p_slower() == pytest.approx(stats.ttest_ind(lb, la, equal_var=False, alternative="greater").pvalue)
    assert t_stats(la, lb)[2] == pytest.approx(ref.df)  # the vectorized statistic, as the simulations use it
    labels = [k for k in range(rounds) for _ in range(3)]
    row = compare_runs(_one_run(np.concatenate(_rounds_of(la)), labels),
                       _one_run(np.concatenate(_rounds_of(lb)), labels)).rows[0]
    assert (row.ci_low, row.ci_high) == pytest.approx((math.exp(low), math.exp(high)))
    alike = log_ratio(_rounds_of(la), _rounds_of(la + 0.01))  # the same spread on both sides
    assert alike is not None and alike.df == pytest.approx(2 * rounds - 2)


def test_equal_rounds_of_unequal_spreads_cover_the_true_ratio():
    """Three rounds a side, one side spreading eight times the other (seeded, 40,000 trials of the
    statistic the gate and compare decide on): the 95% interval holds the true ratio in 94.3% of
    trials and the two-sided test at 0.01 rejects a true ratio of one in 1.6%; with the pooled 4
    degrees of freedom they were 90.1% and 3.6%. Alike, it is conservative (96.7% and 0.5%)."""
    rng = np.random.default_rng(22)
    la, lb = rng.normal(0.0, 0.01, (40_000, 3)), rng.normal(0.0, 0.08, (40_000, 3))
    d, se, df = t_stats(la, lb)
    covered = np.abs(d) <= t_ppf(0.975, df) * se
    rejected = 2.0 * t_sf(np.abs(d) / se, df) <= 0.01
    assert np.mean(covered) >= 0.935 and np.mean(rejected) <= 0.02


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


# Borrowing strength across the points of one comparison (the moderated t). Spreads differ from
# point to point as on the H200 (o_proj: between-round sd median 0.78%, p90 1.83%): lognormal
# around 0.8% with log-sd 0.67; 50 points, three rounds a side, the gate's fixed-sample rule.
POINTS = 50


def _uneven(rng, trials, shift):
    """(d, se, df, s^2) of 50 points a trial, three rounds a side, spreads uneven across points."""
    sd = 0.008 * np.exp(rng.normal(0.0, 0.67, size=(trials, POINTS)))
    base = rng.normal(0.0, 1.0, size=(trials, POINTS, 3)) * sd[..., None]
    cur = math.log(shift) + rng.normal(0.0, 1.0, size=(trials, POINTS, 3)) * sd[..., None]
    d, se, df = t_stats(base, cur)
    return d, se, df, (se / math.sqrt(2.0 / 3.0)) ** 2


def _moderated_codes(d, se, df, var):
    """The gate's codes with each trial's points moderated by the prior fitted over them."""
    out = np.empty(d.shape, dtype=int)
    for i in range(d.shape[0]):
        prior = variance_prior(var[i], df[i])
        assert prior is not None
        post = (prior.df * prior.var + df[i] * var[i]) / (prior.df + df[i])
        out[i] = gate_codes(d[i], np.sqrt(post * 2.0 / 3.0), df[i] + prior.df, TAU)
    return out


@pytest.mark.parametrize("shift,wrong", [(1.05, REGRESSION), (1.05, PASS), (1.0 / 1.05, FASTER)])
def test_moderated_verdicts_keep_their_error_share_with_uneven_spreads(shift, wrong):
    """On the threshold itself, each wrong verdict stays below (1 - 0.95) / 2 = 2.5% of points
    (measured 2.3-2.4%; the undiscounted prior reached 2.7-2.8%)."""
    d, se, df, var = _uneven(np.random.default_rng(11), 400, shift)
    codes = _moderated_codes(d, se, df, var)
    assert np.mean(codes == wrong) <= 0.025


def test_moderation_decides_more_identical_points_and_never_claims_a_regression():
    d, se, df, var = _uneven(np.random.default_rng(12), 400, 1.0)
    own = gate_codes(d, se, df, TAU)
    shared = _moderated_codes(d, se, df, var)
    assert np.mean(shared == REGRESSION) == 0.0 and np.mean(own == REGRESSION) == 0.0
    assert np.mean(shared == PASS) > np.mean(own == PASS)


def test_a_ten_percent_slowdown_is_caught_more_often_with_moderation():
    d, se, df, var = _uneven(np.random.default_rng(13), 400, 1.10)
    own = gate_codes(d, se, df, TAU)
    shared = _moderated_codes(d, se, df, var)
    assert np.mean(shared == PASS) == 0.0
    assert np.mean(shared == REGRESSION) > np.mean(own == REGRESSION)


def test_the_variance_prior_recovers_a_known_prior():
    """Variances drawn as s0^2 * d0 / chi2(d0) (the prior), then s^2 = sigma^2 chi2(4) / 4."""
    rng = np.random.default_rng(14)
    d0, s0 = 8.0, 0.01
    sigma2 = s0 ** 2 * d0 / rng.chisquare(d0, size=4000)
    s2 = sigma2 * rng.chisquare(4, size=4000) / 4
    prior = variance_prior(s2, np.full(4000, 4.0))
    assert prior is not None
    assert 6.0 < prior.df / PRIOR_DISCOUNT < 10.5 and 0.9 * s0 ** 2 < prior.var < 1.1 * s0 ** 2


def test_the_prior_needs_ten_points_and_is_capped_at_their_degrees_of_freedom():
    rng = np.random.default_rng(15)
    assert variance_prior(np.full(MIN_PRIOR_POINTS - 1, 1e-4), np.full(MIN_PRIOR_POINTS - 1, 4.0)) is None
    same = 1e-4 * rng.chisquare(4, size=40) / 4  # one true variance: the spreads vary by chance only
    prior = variance_prior(same, np.full(40, 4.0))
    assert prior is not None and prior.df <= PRIOR_DISCOUNT * 160.0
    assert prior.df > PRIOR_DISCOUNT * 20.0  # mostly pooled


def test_gate_moderates_only_where_ten_points_are_over_rounds():
    """Through gate(), three runs a side (each a round): with 12 points the verdicts carry the
    borrowed degrees of freedom and the interval of a point narrows; with that point alone not."""
    rng = np.random.default_rng(16)
    cases = [f"c{k}" for k in range(12)]

    def side():
        return [make_run({c: {"x": list(1e-5 * np.exp(rng.normal(0.0, 0.01) + rng.normal(0.0, 0.005, 12)))}
                          for c in cases}) for _ in range(3)]

    def only_c0(runs):
        return [replace(r, cases=tuple(c for c in r.cases if c.case_id == "c0")) for r in runs]

    base, cur = side(), side()
    many = next(v for v in gate(base, cur, threshold=TAU).verdicts if v.key == "c0/x")
    one = next(v for v in gate(only_c0(base), only_c0(cur), threshold=TAU).verdicts if v.key == "c0/x")
    assert (many.rounds_base, many.rounds_cur) == (3, 3) == (one.rounds_base, one.rounds_cur)
    assert many.ratio == pytest.approx(one.ratio)
    assert many.ci_high - many.ci_low < one.ci_high - one.ci_low


def test_slow_rounds_on_the_side_with_more_rounds_do_not_widen_the_other_sides_share():
    """Through gate(): a baseline of three tight rounds, a current of sixteen of which three ran 10%
    slow (a slow process now and then, the rounds an adaptive run adds to a noisy point). The pooled
    variance gave the slow rounds' spread to the baseline's three rounds as well (1.018x, [0.971, 1.068]:
    INCONCLUSIVE); Welch's form keeps each side's own, and the same code PASSes ([0.998, 1.040])."""
    rng = np.random.default_rng(17)
    cases = [f"c{k}" for k in range(12)]

    def run(slow=1.0):
        offset = rng.normal(0.0, 0.004)
        return make_run({c: {"x": list(1e-5 * (slow if c == "c0" else 1.0)
                                       * np.exp(offset + rng.normal(0.0, 0.004, 12)))} for c in cases})

    base = [run() for _ in range(3)]
    cur = [run(1.10 if k in (3, 8, 12) else 1.0) for k in range(16)]
    result = gate(base, cur, threshold=TAU)
    c0 = next(v for v in result.verdicts if v.key == "c0/x")
    assert (c0.rounds_base, c0.rounds_cur) == (3, 16)
    assert c0.verdict == "PASS" and c0.ci_high < 1.0 + TAU
    assert result.overall == "PASS"


def test_welchs_form_matches_scipy():
    from scipy import stats

    from solbench.analysis.sequential import welch_se_df

    rng = np.random.default_rng(12)
    la, lb = rng.normal(0, 0.01, 3), rng.normal(0.02, 0.03, 11)
    se, df = welch_se_df(la.var(ddof=1), lb.var(ddof=1), 3, 11)
    ref = stats.ttest_ind(lb, la, equal_var=False)
    assert (lb.mean() - la.mean()) / se == pytest.approx(ref.statistic) and df == pytest.approx(ref.df)


def test_moderating_welchs_form_moderates_each_side():
    """With a prior, each side's variance is its posterior and the degrees of freedom are
    Welch-Satterthwaite's over the two sides' (own + prior); an overwhelming prior leaves the prior's
    variance on both sides."""
    from solbench.analysis.sequential import VariancePrior, moderated

    la, lb = np.log([1.00, 1.01, 0.99]), np.log([1.0, 1.2, 0.9, 1.1, 1.05, 0.95, 1.0])
    t = log_ratio([np.exp(x) * np.ones(2) for x in la], [np.exp(x) * np.ones(2) for x in lb])
    assert t is not None and not t.welch  # unmoderated: pooled
    prior = VariancePrior(df=6.0, var=1e-4, points=20)
    m = moderated(t, prior)
    assert m.welch
    va = (6.0 * 1e-4 + 2 * la.var(ddof=1)) / 8.0
    vb = (6.0 * 1e-4 + 6 * lb.var(ddof=1)) / 12.0
    ua, ub = va / 3, vb / 7
    assert m.se == pytest.approx(math.sqrt(ua + ub))
    assert m.df == pytest.approx((ua + ub) ** 2 / (ua ** 2 / 8.0 + ub ** 2 / 12.0))
    assert m.prior_df == 6.0 and moderated(m, prior) == m  # once only
    assert m.side_vars() == pytest.approx((va, vb))
    huge = moderated(t, VariancePrior(df=1e9, var=1e-4, points=20))
    assert huge.se == pytest.approx(1e-2 * math.sqrt(1 / 3 + 1 / 7), rel=1e-6)


def test_moderating_equal_rounds_adds_the_prior_to_welchs_degrees_of_freedom():
    """Moderated at equal rounds, the spread stays the pooled posterior one (the statistic unchanged) and
    the degrees of freedom are the prior's plus Welch-Satterthwaite's over the point's own two sides
    (scipy), not the prior's plus 2R - 2: the rule of an unmoderated point, with the prior added."""
    from scipy import stats

    from solbench.analysis.sequential import VariancePrior, moderated

    rng = np.random.default_rng(23)
    la, lb = rng.normal(0.0, 0.002, 4), rng.normal(0.0, 0.02, 4)
    t = log_ratio(_rounds_of(la), _rounds_of(lb))
    m = moderated(t, VariancePrior(df=5.0, var=1e-4, points=20))
    assert not m.welch and m.prior_df == 5.0
    assert m.df == pytest.approx(5.0 + stats.ttest_ind(lb, la, equal_var=False).df)
    pooled = (3 * la.var(ddof=1) + 3 * lb.var(ddof=1)) / 6
    assert m.se == pytest.approx(math.sqrt((5.0 * 1e-4 + 6 * pooled) / 11 * (1 / 4 + 1 / 4)))
    assert m.at_rounds(4, 4) == pytest.approx((m.se, m.df))  # what the planners reapply
    alike = moderated(log_ratio(_rounds_of(la), _rounds_of(la + 0.01)), VariancePrior(df=5.0, var=1e-4, points=20))
    assert alike.df == pytest.approx(5.0 + 6)


def _sides_in_rounds(rng, points, shift, rounds=(3, 11), sds=(0.016, 0.008)):
    """``points`` pairs (baseline, current) of rounds of five samples, each side's log round medians
    normal around log(shift) (the baseline's around 0) with that side's sd, the same at every point."""
    def side(r, sd, s):
        meds = np.exp(math.log(s) + rng.normal(0.0, sd, size=(points, r)))
        return [[m * np.array([0.9999, 1.0, 1.0001, 1.0002, 1.0003]) for m in row] for row in meds]

    return list(zip(side(rounds[0], sds[0], 1.0), side(rounds[1], sds[1], shift), strict=True))


def test_welchs_form_moderates_each_side_toward_that_sides_own_prior():
    """Forty points whose baseline rounds all spread 2% (3 rounds) and current rounds 1% (11). One
    prior fitted on the pooled variances (dominated by the current side's rounds) shrank every
    baseline's variance toward the current's (1.5% on average where 2% was measured): the side with
    more rounds lent its spread to the other through the prior, what Welch's form is there to stop.
    Each side moderated toward a prior fitted on that side's own spreads keeps them (2.2% and 0.9%)."""
    from solbench.analysis.compare import _over_rounds, moderate

    pairs = _sides_in_rounds(np.random.default_rng(3), 40, 1.0, sds=(0.02, 0.01))
    ests = moderate([_over_rounds(a, b, confidence=0.95, paired=False) for a, b in pairs], 0.95)
    assert all(e.t is not None and e.t.welch for e in ests)
    va, vb = np.mean([e.t.side_vars() for e in ests], axis=0)
    assert va == pytest.approx(0.02 ** 2, rel=0.25) and vb == pytest.approx(0.01 ** 2, rel=0.25)


def _welch_trial(rng, shift, points=50):
    """One comparison of ``points`` points, a baseline of 3 rounds spreading 1.6% and a current of 11
    spreading 0.8% (a saved run against one whose points took more rounds), through
    ``compare.moderate``: (d, se, df) a point."""
    from solbench.analysis.compare import _over_rounds, moderate

    ests = moderate([_over_rounds(a, b, confidence=0.95, paired=False)
                     for a, b in _sides_in_rounds(rng, points, shift)], 0.95)
    return tuple(np.array([getattr(e.t, f) for e in ests]) for f in ("d", "se", "df"))


@pytest.mark.parametrize("wrong", [REGRESSION, PASS])
def test_welch_on_a_noisier_baseline_keeps_each_error_share(wrong):
    """A single look (``gate`` of saved runs), the baseline's rounds spreading twice the current's at
    every point, the true ratio on the threshold: each wrong verdict within its 2.5% share (plus the
    simulation's error). Both sides moderated toward one prior fitted on pooled variances reached
    8.0% wrong REGRESSION and 8.7% wrong PASS here; each side toward its own, 2.0% and 2.0%."""
    rng = np.random.default_rng(21)
    codes = np.concatenate([gate_codes(*_welch_trial(rng, 1.05), TAU) for _ in range(120)])
    assert np.mean(codes == wrong) <= 0.03


# A clock that counts in 32 ns steps: a 2.048 us kernel's samples spread by a step, every round's median alike
_STEP = 0.032e-6
_BASE_ROUND = np.array([2.048e-6] * 4 + [2.080e-6, 2.016e-6, 2.080e-6])
_CUR_ROUND = _BASE_ROUND + _STEP  # one step slower (1.6%), by the medians; by the samples hardly known


def test_tied_round_medians_keep_the_spread_their_samples_give():
    t = log_ratio([_BASE_ROUND] * 3, [_CUR_ROUND] * 3)
    floor = median_sampling_var([_BASE_ROUND] * 3 + [_CUR_ROUND] * 3)
    assert floor > 0.0 and t.se == pytest.approx(math.sqrt(floor * (1 / 3 + 1 / 3)))
    assert t.var_a == t.var_b == pytest.approx(floor)
    low, high = t.interval(0.95)
    assert low < 2.080 / 2.048 < high and high - low > 0.01  # not a ratio of one step exactly
    paired = log_ratio([_BASE_ROUND] * PAIRED_MIN_ROUNDS, [_CUR_ROUND] * PAIRED_MIN_ROUNDS, paired=True)
    assert paired.paired and paired.se == pytest.approx(math.sqrt(2 * floor / PAIRED_MIN_ROUNDS))


def test_a_gate_over_tied_round_medians_claims_no_regression_it_cannot_see():
    base = make_run({"c": {"k": list(_BASE_ROUND) * 3}}, rounds=3)
    cur = make_run({"c": {"k": list(_CUR_ROUND) * 3}}, rounds=3)
    v = gate(base, cur, threshold=0.01).verdicts[0]  # was REGRESSION, CI [1.0156, 1.0156], p = 0
    assert v.verdict == "INCONCLUSIVE" and v.ci_low < 1.01 < v.ci_high and v.p_value > 0.0
    far = make_run({"c": {"k": list(_BASE_ROUND * 1.2) * 3}}, rounds=3)
    assert gate(base, far, threshold=0.05).verdicts[0].verdict == "REGRESSION"  # a real step up still shows


def test_tied_round_medians_are_found_where_the_mean_of_their_logs_rounds():
    """At 2.08 us (65 steps) the mean of three equal logs need not be that log: se came out 1e-15, not 0,
    the floor was skipped, and one step was a REGRESSION with an interval of zero width (p 1e-52)."""
    base = np.array([65, 65, 65, 65, 66, 64, 66]) * _STEP
    cur = base + _STEP
    assert t_stats(np.log([base[0]] * 3), np.log([cur[0]] * 3))[1] > 0.0  # the rounding this is about
    floor = median_sampling_var([base] * 3 + [cur] * 3)
    assert log_ratio([base] * 3, [cur] * 3).se == pytest.approx(math.sqrt(floor * 2 / 3))
    paired = log_ratio([base] * PAIRED_MIN_ROUNDS, [cur] * PAIRED_MIN_ROUNDS, paired=True)
    assert paired.se == pytest.approx(math.sqrt(2 * floor / PAIRED_MIN_ROUNDS))
    v = gate(make_run({"c": {"k": list(base) * 3}}, rounds=3), make_run({"c": {"k": list(cur) * 3}}, rounds=3),
             threshold=0.01).verdicts[0]
    assert v.verdict == "INCONCLUSIVE" and v.ci_low < 1.01 < v.ci_high and v.p_value > 0.0


def test_median_sampling_var_is_the_large_sample_variance_of_a_median():
    rng = np.random.default_rng(7)
    groups = [np.exp(rng.normal(0.0, 0.02, 50)) for _ in range(4)]
    want = np.mean([math.pi / 2 * np.var(np.log(g), ddof=1) / g.size for g in groups])
    assert median_sampling_var(groups) == pytest.approx(want)
    assert median_sampling_var([np.full(5, 2e-6)] * 3) == 0.0  # nothing spreads: nothing to floor with
