"""The two-stage allocation: variance components, samples a round, rounds for a target; and the
gate's undecided cases with what would decide them. Seeded synthetic samples only."""

import math
from dataclasses import replace

import numpy as np
import pytest

from solbench.analysis.adaptive import Looks
from solbench.analysis.allocation import (
    PRIOR_SIGMA_B,
    SIGMA_B_FLOOR,
    more_current_rounds_to_decide,
    more_rounds_to_decide,
    optimal_samples,
    rounds_for_half_width,
    rounds_needed,
    samples_next_round,
    variance_components,
)
from solbench.analysis.gate import gate, gate_with_rerun
from solbench.analysis.pooling import combine_runs, merge_rounds
from solbench.errors import ConfigError
from solbench.report.compare_json import gate_json
from solbench.report.markdown import gate_markdown
from solbench.results.model import Timing
from tests.unit.factories import make_impl, make_run


def _rounds(rng, rounds, n, sd_b, sd_w, shift=1.0):
    return [shift * 1e-3 * np.exp(rng.normal(0, sd_b) + rng.normal(0, sd_w, n)) for _ in range(rounds)]


def test_variance_components_recover_the_simulated_ones():
    rng = np.random.default_rng(0)
    est = [variance_components(_rounds(rng, 40, 19, 0.0113, 0.021)) for _ in range(30)]
    assert math.sqrt(np.mean([v.sigma_w2 for v in est])) == pytest.approx(0.021, rel=0.05)
    assert math.sqrt(np.mean([v.sigma_b2 for v in est])) == pytest.approx(0.0113, rel=0.15)
    one = variance_components(_rounds(rng, 1, 19, 0.01, 0.02))
    assert one.sigma_b2 == 0.0 and one.rounds == 1
    with pytest.raises(ValueError):
        variance_components([np.array([1e-3, -1.0])])


def test_optimal_samples_is_cochrans_rule_on_the_h200_numbers():
    # sigma_b 0.78% / 1.13%, sigma_w 2.1% (issue 16); c_r / c_s = 100 and 25
    assert optimal_samples(0.0078 ** 2, 0.021 ** 2, 0.2, 0.002) == 34
    assert optimal_samples(0.0113 ** 2, 0.021 ** 2, 0.2, 0.002) == 23
    assert optimal_samples(0.0078 ** 2, 0.021 ** 2, 25.0, 1.0) == 17
    assert optimal_samples(0.0113 ** 2, 0.021 ** 2, 25.0, 1.0) == 12
    assert optimal_samples(0.0, 0.021 ** 2, 1.0, 1.0, max_samples=500) == 500  # no spread between rounds
    assert optimal_samples(1.0, 1e-9, 1.0, 1.0, min_samples=10) == 10  # clamped


def test_samples_next_round_puts_the_samples_where_the_variance_is():
    rng = np.random.default_rng(3)
    one = _rounds(rng, 1, 40, 0.0, 0.021)
    # one round: sigma_b unobserved, the prior; c_r 0.2 s, c_s 80 ms / 40 = 2 ms
    n1 = samples_next_round(one, 0.2, 0.08)
    assert n1 == optimal_samples(PRIOR_SIGMA_B ** 2, variance_components(one).sigma_w2, 0.2, 0.002)
    assert 20 < n1 < 50  # the H200 numbers' neighbourhood (docstring: 34)
    agreeing = _rounds(rng, 4, 40, 0.0, 0.021)  # rounds that agree: sigma_b at the floor, more samples
    n_agree = samples_next_round(agreeing, 0.2, 0.08)
    assert n_agree == optimal_samples(SIGMA_B_FLOOR ** 2, variance_components(agreeing).sigma_w2, 0.2, 0.002)
    assert n_agree > n1
    spread = _rounds(rng, 12, 40, 0.03, 0.021)  # rounds 3% apart: samples buy little, rounds a lot
    assert samples_next_round(spread, 0.2, 0.08) < n1
    assert samples_next_round(one, 2.0, 0.08) > n1  # a dearer round: more samples in each
    assert samples_next_round(one, 0.2, 0.08, max_samples=25) == 25
    assert samples_next_round(one, 0.2, 0.0) is None  # nothing timed: no allocation


def test_rounds_for_a_one_percent_interval():
    var = 0.0113 ** 2 + math.pi / 2 * 0.021 ** 2 / 19
    r = rounds_for_half_width(var, 0.01)
    assert r == 9
    t = __import__("scipy").stats.t
    assert t.ppf(0.975, r - 1) * math.sqrt(var / r) <= math.log(1.01) < t.ppf(0.975, r - 2) * math.sqrt(var / (r - 1))
    assert rounds_for_half_width(var, 0.01, sides=2) > r  # a ratio of two sides needs more
    assert rounds_for_half_width(var, 1e-6, cap=50) == 50


def test_rounds_needed_for_the_run_loop():
    rng = np.random.default_rng(1)

    def timing(rounds, sd_b, sd_w=0.021):
        groups = _rounds(rng, rounds, 19, sd_b, sd_w)
        return merge_rounds([make_impl("x", list(g)) for g in groups]).timing

    assert rounds_needed(Timing((1e-3,) * 10, 1e-3, 1e-3, 1e-3, "converged"), 0.01, 10) == 2
    quiet, noisy = timing(3, 0.001, 0.005), timing(3, 0.03)
    assert rounds_needed(quiet, 0.01, 10) == 3  # already tight: no more rounds
    # no spread between rounds, 2.1% within: a round median still errs by 0.6%, t_2 = 4.30 -> four rounds
    assert rounds_needed(timing(3, 0.0), 0.01, 10) == 4
    assert rounds_needed(noisy, 0.01, 10) == 10  # wide: up to the cap
    assert 3 <= rounds_needed(timing(3, 0.0113), 0.01, 40) <= 40


def test_more_rounds_to_decide():
    assert more_rounds_to_decide(math.log(1.05), 0.02, 0.05, 3, confidence=0.95) is None  # on the threshold
    near, far = (more_rounds_to_decide(math.log(x), 0.02, 0.05, 3, confidence=0.95) for x in (1.03, 1.0))
    assert near > far >= 1


def test_current_rounds_alone_cannot_beat_the_baselines_rounds():
    # sd 3% a round, 3 baseline rounds: its share alone, 1.96 * 3% / sqrt(3) = 3.4%, is wider than
    # the 2% between a ratio of 1.03 and the threshold: no number of current rounds decides
    assert more_current_rounds_to_decide(math.log(1.03), 0.03, 0.05, 3, 3, confidence=0.95) is None
    # with 8 baseline rounds it is 2.1%... still wider than the 2% gap; at a ratio of 1.0 (gap 4.9%) it decides
    assert more_current_rounds_to_decide(math.log(1.03), 0.03, 0.05, 8, 3, confidence=0.95) is None
    alone = more_current_rounds_to_decide(0.0, 0.03, 0.05, 3, 3, confidence=0.95)
    both = more_rounds_to_decide(0.0, 0.03, 0.05, 3, confidence=0.95)
    assert alone is not None and alone > both >= 1  # one side adding alone needs more than both sides adding
    # what it returns decides: t over R_base + R_cur - 2 df at the returned rounds clears the gap, one fewer does not
    from scipy import stats

    def half(r):
        return stats.t.ppf(0.975, 3 + r - 2) * 0.03 * math.sqrt(1 / 3 + 1 / r)

    assert half(3 + alone) <= math.log(1.05) < half(3 + alone - 1)
    assert more_current_rounds_to_decide(math.log(1.05), 0.01, 0.05, 3, 3, confidence=0.95) is None  # on it


def _side(rng, rounds, shift, sd_b=0.015, n=15, cases=("a", "b")):
    runs = [make_run({c: {"k": list(g)} for c, g in zip(cases, [_rounds(rng, 1, n, sd_b, 0.02, shift)[0]
                                                                 for _ in cases], strict=True)})
            for _ in range(rounds)]
    return runs


def test_an_undecided_case_says_what_would_decide_it():
    rng = np.random.default_rng(2)
    result = gate(_side(rng, 3, 1.0, sd_b=0.03), _side(rng, 3, 1.04, sd_b=0.03), threshold=0.05)
    und = result.undecided
    assert und and all(v.more_rounds is not None and v.more_rounds >= 1 for v in und)
    assert all("more round" in v.reason and "per side" in v.reason for v in und)
    md, js = gate_markdown(result), gate_json(result)
    assert "undecided (INCONCLUSIVE)" in md and und[0].key in md
    assert [u["key"] for u in js["undecided"]] == [v.key for v in und] and js["looks"] == 1
    assert [u["current_rounds"] for u in js["undecided"]] == [v.current_rounds for v in und]


def test_the_note_says_when_the_current_run_alone_cannot_decide():
    # 3% between rounds on both sides, ratio 1.04: the baseline's three rounds alone leave the
    # interval wider than the 1% left to the threshold; the note sends the user to the baseline
    rng = np.random.default_rng(2)
    result = gate(_side(rng, 3, 1.0, sd_b=0.03), _side(rng, 3, 1.04, sd_b=0.03), threshold=0.05)
    und = [v for v in result.undecided if v.more_rounds is not None]
    assert und and all(v.current_rounds is None for v in und)
    md = gate_markdown(result)
    assert f"cannot decide {len(und)} of them" in md and "baseline's 3 round(s)" in md
    assert "measure it with `run --repeat 6`" in md  # the depth a saved baseline wants
    assert "`run --max-rounds 16 --rounds-target 0.01` (up to 16 rounds at ±1%)" in md  # a tighter target; also
    # on the CPU, which adds rounds only with --max-rounds (--rounds-target alone is refused there)


def test_the_note_gives_the_rerun_that_would_decide_from_the_current_run_alone():
    # a quiet 10-round baseline, a noisy 3-round current run: more current rounds alone decide it
    rng = np.random.default_rng(3)
    result = gate(_side(rng, 10, 1.0, sd_b=0.01), _side(rng, 3, 1.02, sd_b=0.03), threshold=0.05)
    alone = [v.current_rounds for v in result.undecided if v.more_rounds is not None]
    assert alone and None not in alone
    md = gate_markdown(result)
    assert f"(`run --gate-against --rerun {max(alone)}`)" in md
    assert "`run --repeat 6`" not in md  # a 10-round baseline is deep enough: no advice about it


def test_the_note_asks_for_a_deeper_baseline_where_it_has_fewer_than_six_rounds():
    # a quiet 3-round baseline, a noisy 3-round current run: more current rounds alone decide it, and
    # the note adds that a six-round baseline leaves fewer cases undecided
    rng = np.random.default_rng(2)
    result = gate(_side(rng, 3, 1.0, sd_b=0.01), _side(rng, 3, 1.02, sd_b=0.03), threshold=0.05)
    alone = [v.current_rounds for v in result.undecided if v.more_rounds is not None]
    assert alone and None not in alone
    assert "A baseline measured in 6 rounds or more (`run --repeat 6`)" in gate_markdown(result)


def test_rerun_over_rounds_adds_rounds_to_undecided_cases_only_and_keeps_decided_verdicts():
    rng = np.random.default_rng(3)
    base = _side(rng, 4, 1.0, sd_b=0.005, cases=("a", "b"))
    # "a" identical and quiet, "b" noisy: only "b" should be measured again
    cur_runs = [make_run({"a": {"k": list(_rounds(rng, 1, 15, 0.005, 0.02)[0])},
                          "b": {"k": list(_rounds(rng, 1, 15, 0.04, 0.02, 1.03)[0])}}) for _ in range(3)]
    cur = combine_runs(cur_runs)
    calls = []

    def remeasure(keys, rounds):
        assert rounds == 1
        calls.append(list(keys))
        return make_run({k.split("/")[0]: {"k": list(_rounds(rng, 1, 15, 0.005, 0.02, 1.03)[0])} for k in keys})

    first = gate(base, cur, threshold=0.05, looks=5)
    assert {v.key: v.verdict for v in first.verdicts}["a/k"] == "PASS"
    result = gate_with_rerun(base, cur, remeasure, 4, threshold=0.05)
    assert calls and all(keys == ["b/k"] for keys in calls)
    by = {v.key: v for v in result.verdicts}
    assert by["a/k"] == next(v for v in first.verdicts if v.key == "a/k")  # kept from the first look
    assert by["b/k"].rounds_cur == 3 + len(calls) and result.looks == 5


def test_rerun_in_steps_adds_that_many_rounds_a_look_and_splits_over_fewer_looks():
    rng = np.random.default_rng(5)
    base = _side(rng, 3, 1.0, sd_b=0.03, cases=("a",))
    cur = combine_runs([make_run({"a": {"k": list(_rounds(rng, 1, 15, 0.03, 0.02, 1.02)[0])}}) for _ in range(3)])
    asked = []

    def remeasure(keys, rounds):
        asked.append(rounds)
        runs = [make_run({"a": {"k": list(_rounds(rng, 1, 15, 0.03, 0.02, 1.02)[0])}}) for _ in range(rounds)]
        return combine_runs(runs)

    assert gate(base, cur, threshold=0.05, looks=3).verdicts[0].verdict == "INCONCLUSIVE"
    result = gate_with_rerun(base, cur, remeasure, 7, step=4, threshold=0.05)
    assert result.looks == 3  # after 0, 4 and 7 rounds added
    assert asked and asked == [4, 3][:len(asked)]  # four, then what is left of the seven
    assert result.reruns == sum(asked) and result.verdicts[0].rounds_cur == 3 + sum(asked)
    with pytest.raises(ConfigError):
        gate_with_rerun(base, cur, remeasure, 7, step=0, threshold=0.05)


@pytest.mark.parametrize("rounds", [3, 1])
def test_gate_live_remeasures_a_run_in_rounds_four_rounds_a_look(monkeypatch, rounds):
    """run --gate-against: a current run in rounds gets ROUNDS_A_LOOK rounds a look (exactly that
    many: no rounds added on top), a single-round run one pooled re-measurement a look."""
    import solbench.execute.run as execute_run
    from solbench.plan.options import RunOptions

    rng = np.random.default_rng(6)
    base = _side(rng, 3, 1.0, sd_b=0.03, cases=("a",))
    one = [make_run({"a": {"k": list(_rounds(rng, 1, 15, 0.03, 0.02, 1.05)[0])}}) for _ in range(rounds)]
    cur = combine_runs(one)
    asked = []

    def fake_run(files, options, *, device="auto", **_):
        asked.append((tuple(files), options.keys, options.repeat, options.max_rounds, device))
        return combine_runs([make_run({"a": {"k": list(_rounds(rng, 1, 15, 0.03, 0.02, 1.05)[0])}})
                             for _ in range(options.repeat)])

    monkeypatch.setattr(execute_run, "run", fake_run)
    result = execute_run.gate_live(base, cur, ["w.yaml"], RunOptions(), rerun=8, device="cpu", threshold=0.05)
    step = 4 if rounds > 1 else 1
    assert asked and all(a == (("w.yaml",), ("a/k",), step, step, "cpu") for a in asked)
    assert result.looks == 1 + 8 // step and result.reruns == step * len(asked)


def test_looks_keep_verdicts_and_name_only_undecided_keys():
    rng = np.random.default_rng(4)
    base, cur = _side(rng, 3, 1.0), _side(rng, 3, 1.0)
    looks = Looks(8, threshold=0.05)
    keys = looks.undecided(base, cur)
    assert set(keys) == {v.key for v in looks.last.verdicts if v.verdict == "INCONCLUSIVE"}
    assert looks.result(base, cur).looks == 8 and looks.count == 2


def test_looks_measure_again_a_key_decided_between_single_rounds():
    """``ab --rounds 1``: after the first round a side is one process, and ab reports any verdict on
    time made there INCONCLUSIVE (gate.unconfirmed); such a key must get the added rounds that can
    decide it, not be left as decided with rounds to spare."""
    from solbench.analysis.adaptive import UNCONFIRMED_VERDICTS
    from solbench.analysis.gate import unconfirmed

    rng = np.random.default_rng(7)
    base, cur = (make_run({"c": {"k": list(1e-3 * np.exp(rng.normal(0, 0.002, 200)))}}) for _ in range(2))
    looks = Looks(5, threshold=0.05)
    assert looks.undecided(base, cur) == ["c/k"]
    assert looks.last is not None and looks.last.verdicts[0].verdict == "PASS"  # the gate's own, over one process
    assert unconfirmed(looks.result(base, cur), verdicts=UNCONFIRMED_VERDICTS).verdicts[0].verdict == "INCONCLUSIVE"
    over_rounds = [combine_runs(_side(rng, 3, 1.0, sd_b=0.001, n=30, cases=("c",))) for _ in range(2)]
    assert Looks(5, threshold=0.05).undecided(*over_rounds) == []  # decided over rounds: no more


def test_current_rounds_alone_plan_on_each_sides_own_spread():
    """A quiet baseline of 3 rounds (sd 0.3%), a current of 16 that spread 4% (slow processes): on
    the pooled spread the baseline's share alone looks too wide and the note would send the user to
    the baseline; on each side's own spread (the gate's Welch form for unequal rounds) a few more
    current rounds decide, and the number returned is the first that does."""
    from solbench.analysis.sequential import welch_se_df
    from solbench.analysis.tdist import t_ppf

    d, tau, vb, vc = math.log(1.03), 0.05, 0.003 ** 2, 0.04 ** 2
    pooled_sd = math.sqrt((2 * vb + 15 * vc) / 17)
    assert more_current_rounds_to_decide(d, pooled_sd, tau, 3, 16, confidence=0.95) is None
    alone = more_current_rounds_to_decide(d, pooled_sd, tau, 3, 16, confidence=0.95, side_vars=(vb, vc))
    assert alone is not None and alone >= 1
    gap = math.log(1.05) - d

    def half(r):
        se, df = welch_se_df(vb, vc, 3, r)
        return float(t_ppf(0.975, df)) * se

    assert half(16 + alone) <= gap < half(16 + alone - 1)
    # a noisy baseline is the floor: its own share alone is wider than the gap
    assert more_current_rounds_to_decide(d, pooled_sd, tau, 3, 16, confidence=0.95, side_vars=(vc, vb)) is None


def _exact_side(rounds, ratio, sd):
    """One case in ``rounds`` rounds whose log round medians have mean log(ratio ms) and sd ``sd`` exactly."""
    z = np.linspace(-1.0, 1.0, rounds)
    z = (z - z.mean()) / z.std(ddof=1)
    meds = 1e-3 * ratio * np.exp(sd * z)
    return make_run({"c": {"k": [m * (1.0 + 1e-4 * j) for m in meds for j in (-1, 0, 1, 2, 3)]}}, rounds=rounds)


def test_rounds_per_side_plan_on_both_sides_rounds_where_they_differ():
    """3 baseline rounds against 11 current ones: the baseline's few rounds keep the interval wide.
    Planned at the larger side's 11 the note said 1 more round per side, and 4 against 12 at the same
    spread and ratio still straddled the threshold. The rounds it names decide; one fewer does not."""
    def verdict(k):
        return gate(_exact_side(3 + k, 1.0, 0.03), _exact_side(11 + k, 1.08, 0.03), threshold=0.05).verdicts[0]

    v = verdict(0)
    assert v.verdict == "INCONCLUSIVE" and v.more_rounds is not None and v.more_rounds > 1
    assert verdict(v.more_rounds).verdict == "REGRESSION"
    assert verdict(v.more_rounds - 1).verdict == "INCONCLUSIVE"
    # equal rounds: as before
    assert more_rounds_to_decide(0.0, 0.03, 0.05, 3, other_rounds=3, confidence=0.95) == \
        more_rounds_to_decide(0.0, 0.03, 0.05, 3, confidence=0.95)


def _exact_medians(rounds, ratio, sd):
    z = np.linspace(-1.0, 1.0, rounds)
    return 1e-3 * ratio * np.exp(sd * (z - z.mean()) / z.std(ddof=1))


def _exact_run(cases):
    """``{case: (rounds, ratio, sd)}``: each case's log round medians with that mean and sd exactly."""
    runs = [make_run({c: {"k": [m * (1.0 + 1e-4 * j) for m in _exact_medians(*spec) for j in (-1, 0, 1, 2, 3)]}},
                     rounds=spec[0]) for c, spec in cases.items()]
    return replace(runs[0], cases=tuple(r.cases[0] for r in runs))


@pytest.mark.parametrize(("rounds", "sds"), [((3, 3), (0.02, 0.02)), ((3, 7), (0.01, 0.03)),
                                            ((3, 3), (0.03, 0.03)), ((3, 7), (0.03, 0.04))])
def test_rounds_per_side_plan_on_the_moderated_form_the_gate_decides_in(rounds, sds):
    """Thirteen points, so the gate moderates: its interval has 2R - 2 + d0 degrees of freedom, and
    sides of unequal rounds are decided in Welch's form on each side's posterior variance. Planned on
    2R - 2 alone and the pooled spread, the note asked for 3 more rounds a side where 2 decide at the
    same spread and ratio (3 against 3 rounds), and for 3 where 1 does (a quiet 3 against a noisy 7).
    Planned on the posterior of the rounds measured, held fixed, a point spreading more than the prior
    (3% against the others' 2%) was told 3 more (3 against 3) and 2 more (3 against 7, 3% and 4%) where
    the gate, moderating the same spread again over more rounds (less shrunk toward the prior), still
    straddled the threshold: the plan re-moderates at the rounds it plans (``LogRatio.at_rounds``)."""
    others = 0.02 * np.exp(np.random.default_rng(0).normal(0.0, 0.3, 12))

    def verdict(k):
        base = _exact_run({**{f"p{i}": (3, 1.0, s) for i, s in enumerate(others)}, "t": (rounds[0] + k, 1.0, sds[0])})
        cur = _exact_run({**{f"p{i}": (3, 1.0 + 0.001 * (i - 6), s) for i, s in enumerate(others)},
                          "t": (rounds[1] + k, 1.08, sds[1])})
        return next(v for v in gate(base, cur, threshold=0.05).verdicts if v.case_id == "t")

    v = verdict(0)
    assert v.verdict == "INCONCLUSIVE" and v.more_rounds is not None
    assert verdict(v.more_rounds).verdict == "REGRESSION"
    assert v.more_rounds == 1 or verdict(v.more_rounds - 1).verdict == "INCONCLUSIVE"


@pytest.mark.parametrize(("rounds", "ratio"), [((6, 3), 1.08), ((3, 3), 1.09)])
def test_current_rounds_alone_plan_on_the_moderated_form_the_gate_decides_in(rounds, ratio):
    """As above for "re-measuring the current run alone would take about N" (13 points, moderated,
    the others' spreads uneven around 2%; this point's sides spread 3% each). Planned on the posterior
    of the rounds measured, held fixed, a 6-round baseline against a 3-round current was told 8 more
    current rounds where 12 decide (at 6 against 6 the plan pooled the two posteriors, where the gate
    moderates the pooled spread once), and 3 against 3 rounds were told 7 where 10 decide. Each is
    told the first number that decides."""
    others = 0.02 * np.exp(np.random.default_rng(0).normal(0.0, 0.8, 12))

    def verdict(k):
        base = _exact_run({**{f"p{i}": (3, 1.0, s) for i, s in enumerate(others)}, "t": (rounds[0], 1.0, 0.03)})
        cur = _exact_run({**{f"p{i}": (3, 1.0 + 0.001 * (i - 6), s) for i, s in enumerate(others)},
                          "t": (rounds[1] + k, ratio, 0.03)})
        return next(v for v in gate(base, cur, threshold=0.05).verdicts if v.case_id == "t")

    v = verdict(0)
    assert v.verdict == "INCONCLUSIVE" and v.current_rounds is not None
    assert verdict(v.current_rounds).verdict == "REGRESSION"
    assert v.current_rounds == 1 or verdict(v.current_rounds - 1).verdict == "INCONCLUSIVE"


def test_the_plan_at_the_rounds_measured_is_the_gates_own_t():
    """``LogRatio.at_rounds`` at the rounds measured gives the t's own se and df: pooled, unmoderated
    and moderated, and Welch's form (runs' offsets aside)."""
    from solbench.analysis.sequential import VariancePrior, log_ratio, moderated

    rng = np.random.default_rng(5)
    prior = VariancePrior(df=6.0, var=1e-4, points=20)
    for ra, rb in ((3, 3), (3, 11), (1, 4), (6, 2)):
        t = log_ratio([np.exp(rng.normal(0, 0.01, 5)) for _ in range(ra)],
                      [np.exp(rng.normal(0, 0.02, 5)) for _ in range(rb)])
        for u in (t, moderated(t, prior)):
            assert u.at_rounds(ra, rb) == pytest.approx((u.se, u.df), rel=1e-12)


def test_unmoderated_current_rounds_alone_plan_on_the_pooled_spread_they_will_make():
    """Unmoderated, a gate pools the two sides' variances weighted by their rounds, so current rounds
    move the pooled spread toward the current side's. A 1% baseline and a 3% current, 3 rounds each,
    ratio 1.1: on the spread as measured (2.2%) one more round looked enough; at four rounds the
    pooled spread is 2.4% and the interval still reaches the threshold. The plan follows the spread
    the added rounds will make, and the number returned is the first that decides under it."""
    from solbench.analysis.allocation import planned_se_df
    from solbench.analysis.tdist import t_ppf

    d, tau, vb, vc = math.log(1.1), 0.05, 0.01 ** 2, 0.03 ** 2
    measured = math.sqrt((vb + vc) / 2)
    fixed = more_current_rounds_to_decide(d, measured, tau, 3, 3, confidence=0.95)
    planned = more_current_rounds_to_decide(d, measured, tau, 3, 3, confidence=0.95, side_vars=(vb, vc), welch=False)
    gap = d - math.log(1.05)

    def half(r):
        se, df = planned_se_df((vb, vc), 3, r, welch=False)
        return float(t_ppf(0.975, df)) * se

    assert fixed == 1 and half(3 + fixed) > gap  # what the fixed spread promised does not decide
    assert planned is not None and planned > fixed
    assert half(3 + planned) <= gap < half(3 + planned - 1)
