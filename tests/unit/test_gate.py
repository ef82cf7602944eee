import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from solbench import exitcodes
from solbench.analysis.gate import (
    ThresholdRule,
    case_verdict,
    cases_to_rerun,
    check_fingerprints,
    gate,
    gate_with_rerun,
    merge_samples,
    parse_threshold,
    unconfirmed,
)
from solbench.errors import ConfigError, GateRefused, ResultsFormatError
from solbench.report.compare_console import gate_table
from solbench.report.compare_json import gate_json
from solbench.report.junit import gate_junit
from solbench.report.markdown import gate_markdown
from solbench.results.model import FAILED_STATUSES, RunResult
from tests.unit.factories import T_SOL, make_env, make_run, noisy

# ---- the issue's statistical acceptance tests -------------------------------------------
# 1,000 seeded trials each; 30 lognormal samples per side with 1% relative noise; default
# gate settings (threshold 5%, alpha 0.01, 95% bootstrap CI with 2,000 resamples).
TRIALS = 1000
N = 30
NOISE = 0.01


def _verdicts(slowdown: float, *, noise: float = NOISE, seed: int = 0) -> Counter[str]:
    rng = np.random.default_rng(seed)
    out: Counter[str] = Counter()
    for t in range(TRIALS):
        base = make_run({"c": {"x": noisy(rng, N, 1e-3, noise)}})
        cur = make_run({"c": {"x": noisy(rng, N, 1e-3 * slowdown, noise)}})
        out[gate(base, cur, seed=t).verdicts[0].verdict] += 1
    return out


def test_aa_false_regressions_at_most_one_percent():
    v = _verdicts(1.0, seed=1)
    assert v["REGRESSION"] / TRIALS <= 0.01
    assert v["FASTER"] / TRIALS <= 0.01
    assert v["PASS"] / TRIALS >= 0.99  # and the gate does decide: A/A passes


def test_true_ten_percent_speedup_reported_faster_at_least_99_percent():
    v = _verdicts(1 / 1.10, seed=5)
    assert v["FASTER"] / TRIALS >= 0.99
    assert v["REGRESSION"] == 0


def test_true_ten_percent_slowdown_caught_at_least_99_percent():
    v = _verdicts(1.10, seed=2)
    assert v["REGRESSION"] / TRIALS >= 0.99


def test_true_three_percent_slowdown_below_five_percent_threshold_not_flagged():
    v = _verdicts(1.03, seed=3)
    assert v["REGRESSION"] / TRIALS <= 0.01
    assert v["PASS"] / TRIALS >= 0.99


def test_too_noisy_to_decide_is_inconclusive_never_pass():
    # 10% noise cannot resolve a true 10% slowdown against a 5% threshold with 30 samples:
    # the gate must not call it PASS (measured: ~73% INCONCLUSIVE, ~27% REGRESSION, <0.5% PASS).
    v = _verdicts(1.10, noise=0.10, seed=4)
    assert v["PASS"] / TRIALS <= 0.01
    assert v["INCONCLUSIVE"] / TRIALS >= 0.5


# ---- thresholds -------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "fraction"), [
    ("5%", 0.05), ("0.05", 0.05), ("median:5%", 0.05), (" Median : 2.5 % ", 0.025),
    ("median:0.1", 0.1), ("150%", 1.5), ("1e-2", 0.01), (".5%", 0.005),
])
def test_parse_threshold(text, fraction):
    rule = parse_threshold(text)
    assert rule == ThresholdRule("median", pytest.approx(fraction))


@pytest.mark.parametrize("text", ["mean:5%", "min:5%", "5", "1.5", "0%", "0", "-5%", "", "abc",
                                  "median:", "5%%", "median:5%:x", "1e400%", "1e400"])
def test_parse_threshold_rejects(text):
    with pytest.raises(ConfigError):
        parse_threshold(text)


@pytest.mark.parametrize(("low", "high", "sig", "expected"), [
    (None, None, True, "INCONCLUSIVE"),
    (1.06, 1.10, True, "REGRESSION"),
    (1.06, 1.10, False, "INCONCLUSIVE"),  # beyond the threshold, rank test disagrees
    (1.05, 1.10, True, "INCONCLUSIVE"),  # lo must exceed 1 + tau strictly
    (1.01, 1.049, False, "PASS"),  # hi < 1 + tau rules the slowdown out
    (1.01, 1.05, False, "INCONCLUSIVE"),  # a CI reaching 1 + tau does not rule out a slowdown of tau
    (0.80, 0.90, True, "PASS"),  # faster, but the "faster" rank test does not agree: a plain pass
    (1.00, 1.07, True, "INCONCLUSIVE"),  # straddles the threshold
])
def test_case_verdict_rule(low, high, sig, expected):
    assert case_verdict(low, high, sig, 0.05) == expected


@pytest.mark.parametrize(("low", "high", "faster_sig", "expected"), [
    (0.80, 0.90, True, "FASTER"),  # whole CI below 1/1.05 and the rank test agrees
    (0.80, 0.90, False, "PASS"),
    (0.90, 0.96, True, "PASS"),  # 0.96 > 1/1.05 = 0.952: not faster by the threshold
    (0.80, 1.02, True, "PASS"),  # straddles 1: not confidently faster
])
def test_case_verdict_faster_rule(low, high, faster_sig, expected):
    assert case_verdict(low, high, False, 0.05, faster_significant=faster_sig) == expected


# ---- fingerprints -----------------------------------------------------------------------

def test_fingerprints_same_minor_versions_match():
    assert check_fingerprints(make_env(), make_env(cuda="12.6", torch="2.5.0", host="other")) == []


@pytest.mark.parametrize(("field", "value", "label"), [
    ("device_name", "NVIDIA A100-SXM4-80GB", "device"), ("spec_id", "a100-sxm", "spec"),
    ("driver", "560.28.03", "driver"), ("cuda", "13.0", "CUDA major"),
    ("torch", "3.0.0", "torch major"), ("torch", None, "torch major"),
    ("device_kind", "cpu", "device kind"),
])
def test_fingerprint_differences_are_named(field, value, label):
    diffs = check_fingerprints(make_env(), make_env(**{field: value}))
    assert len(diffs) == 1 and diffs[0].startswith(label + ":")


def _pair(base_env=None, cur_env=None) -> tuple[RunResult, RunResult]:
    rng = np.random.default_rng(10)
    return (make_run({"c": {"x": noisy(rng, N)}}, environment=base_env),
            make_run({"c": {"x": noisy(rng, N)}}, environment=cur_env))


def test_mismatched_fingerprints_refused_unless_allowed():
    base, cur = _pair(make_env(), make_env(device_name="NVIDIA A100-SXM4-80GB", driver="535.1"))
    with pytest.raises(GateRefused) as info:
        gate(base, cur)
    assert isinstance(info.value, ConfigError) and info.value.exit_code == 2
    assert "device" in str(info.value) and "driver" in str(info.value)
    result = gate(base, cur, allow_cross_hardware=True)
    assert result.overall == "PASS" and len(result.fingerprint_diffs) == 2


# ---- decisions, missing cases and exit codes --------------------------------------------

def _mixed(**cases_cur: list[float]) -> tuple[RunResult, RunResult]:
    rng = np.random.default_rng(20)
    base = make_run({"same": {"x": noisy(rng, N)}, "slow": {"x": noisy(rng, N)},
                     "tiny": {"x": noisy(rng, 3)}, "gone": {"x": noisy(rng, N)}})
    cur = make_run({"same": {"x": noisy(rng, N)}, "slow": {"x": noisy(rng, N, 1.2e-3)},
                    "tiny": {"x": noisy(rng, 3)}, "new": {"x": noisy(rng, N)}})
    return base, cur


def test_verdicts_missing_cases_and_overall():
    base, cur = _mixed()
    g = gate(base, cur)
    by = {v.key: v for v in g.verdicts}
    assert {k: v.verdict for k, v in by.items()} == {
        "same/x": "PASS", "slow/x": "REGRESSION", "tiny/x": "INCONCLUSIVE",
        "gone/x": "MISSING", "new/x": "MISSING"}
    assert g.overall == "REGRESSION" and g.exit_code == exitcodes.REGRESSION == 1
    slow = by["slow/x"]
    assert slow.ratio == pytest.approx(1.2, rel=0.02) and slow.ci_low > 1.05
    assert slow.p_adjusted is not None and slow.p_value <= slow.p_adjusted <= 0.01
    assert "too few samples" in by["tiny/x"].reason and by["tiny/x"].p_value is None
    assert "absent from the current run" in by["gone/x"].reason and by["new/x"].ratio is None
    assert "current run only" in by["new/x"].reason
    assert (by["gone/x"].status_base, by["gone/x"].status_cur) == ("ok", None)
    # single runs: the PASS and the REGRESSION are no verdict until a fresh process confirms them
    assert sorted(cases_to_rerun(g)) == ["same/x", "slow/x", "tiny/x"]


def test_exit_codes():
    base, cur = _mixed()
    assert gate(base, cur, impl="x").exit_code == 1
    only_pass = gate(*_pair())
    assert (only_pass.overall, only_pass.exit_code) == ("PASS", exitcodes.OK)
    rng = np.random.default_rng(30)
    b2 = make_run({"a": {"x": noisy(rng, N)}, "t": {"x": noisy(rng, 4)}, "gone": {"x": noisy(rng, N)}})
    c2 = make_run({"a": {"x": noisy(rng, N)}, "t": {"x": noisy(rng, 4)}})
    inc = gate(b2, c2)
    assert (inc.overall, inc.exit_code) == ("INCONCLUSIVE", exitcodes.INCONCLUSIVE)
    # MISSING alone never fails the gate
    missing_only = gate(make_run({"a": {"x": noisy(rng, N)}, "gone": {"x": noisy(rng, N)}}),
                        make_run({"a": {"x": noisy(rng, N)}}))
    assert missing_only.exit_code == 0 and missing_only.count("MISSING") == 1



def test_missing_cases_report_the_rounds_each_side_really_has():
    """A side with no samples of a key reports 0 rounds, the other its own count (the JSON said 1 and 1)."""
    rng = np.random.default_rng(31)
    base = make_run({"a": {"x": noisy(rng, N)}, "gone": {"x": noisy(rng, N)}}, rounds=3)
    cur = make_run({"a": {"x": noisy(rng, N)}, "new": {"x": noisy(rng, N)}}, rounds=3)
    g = gate(base, cur)
    rows = {v["key"]: v for v in gate_json(g)["verdicts"]}
    assert (rows["gone/x"]["rounds_base"], rows["gone/x"]["rounds_cur"]) == (3, 0)
    assert (rows["new/x"]["rounds_base"], rows["new/x"]["rounds_cur"]) == (0, 3)
    assert (rows["a/x"]["rounds_base"], rows["a/x"]["rounds_cur"]) == (3, 3)
    # the note on rounds names the decided cases' counts only, not a MISSING side's 0
    assert "(3 baseline, 3 current)" in gate_markdown(g)

@pytest.mark.parametrize("status", sorted(FAILED_STATUSES))
def test_ok_in_baseline_failing_now_is_broken_and_fails(status):
    rng = np.random.default_rng(31)
    base = make_run({"a": {"x": noisy(rng, N), "y": noisy(rng, N)}})
    cur = make_run({"a": {"x": noisy(rng, N), "y": noisy(rng, N)}}, statuses={"a/y": status},
                   messages={"a/y": "max abs err 0.5 > atol\nsecond line"})
    g = gate(base, cur)
    by = {v.key: v for v in g.verdicts}
    assert {k: v.verdict for k, v in by.items()} == {"a/x": "PASS", "a/y": "BROKEN"}
    y = by["a/y"]
    assert (y.impl, y.case_id, y.status_base, y.status_cur) == ("y", "a", "ok", status)
    assert f"{status.upper()} in the current run: max abs err 0.5 > atol" in y.reason
    assert "second line" not in y.reason and "second line" in y.detail and "last line of the worker" in y.detail
    assert y.median_base == pytest.approx(1e-3, rel=0.02) and y.median_cur is None
    assert (g.overall, g.exit_code) == ("BROKEN", exitcodes.REGRESSION)
    assert cases_to_rerun(g) == ["a/x"]  # a failure is not noise: never re-measured (a/x: a single-run PASS)


def test_broken_outranks_regression_and_inconclusive():
    base, cur = _mixed()
    rng = np.random.default_rng(36)
    base = make_run({**{c.case_id: {"x": list(c.impls[0].timing.samples)} for c in base.cases},
                     "bad": {"x": noisy(rng, N)}})
    cur = make_run({**{c.case_id: {"x": list(c.impls[0].timing.samples)} for c in cur.cases},
                    "bad": {"x": []}}, statuses={"bad/x": "crashed"})
    g = gate(base, cur)
    assert g.count("REGRESSION") == 1 and g.count("INCONCLUSIVE") == 1 and g.count("BROKEN") == 1
    assert (g.overall, g.exit_code) == ("BROKEN", 1)


def test_only_broken_cases_still_decide_instead_of_refusing():
    # nothing measured in common, but the one case broke: that is exit 1, not "bad input"
    rng = np.random.default_rng(37)
    g = gate(make_run({"a": {"x": noisy(rng, N)}}), make_run({"a": {"x": []}}, statuses={"a/x": "incorrect"}))
    assert [v.verdict for v in g.verdicts] == ["BROKEN"] and g.exit_code == 1


def test_skipped_now_is_missing_not_a_failure():
    rng = np.random.default_rng(38)
    base = make_run({"a": {"x": noisy(rng, N), "y": noisy(rng, N)}})
    cur = make_run({"a": {"x": noisy(rng, N), "y": []}}, statuses={"a/y": "skipped"},
                   messages={"a/y": "needs CuPy"})
    g = gate(base, cur)
    y = next(v for v in g.verdicts if v.key == "a/y")
    assert y.verdict == "MISSING" and y.status_cur == "skipped"
    assert "skipped in the current run (needs CuPy)" in y.reason and "not compared" in y.reason
    assert (g.overall, g.exit_code) == ("PASS", 0)


def test_failing_in_both_runs_is_still_broken_and_fixed_now_is_missing():
    rng = np.random.default_rng(39)
    base = make_run({"a": {"x": noisy(rng, N), "y": [], "z": []}}, statuses={"a/y": "error", "a/z": "incorrect"})
    cur = make_run({"a": {"x": noisy(rng, N), "y": [], "z": noisy(rng, N)}}, statuses={"a/y": "error"})
    result = gate(base, cur)
    by = {v.key: v for v in result.verdicts}
    assert set(by) == {"a/x", "a/y", "a/z"}
    # y fails on both sides: not broken by the change, but a failing implementation never passes a gate
    assert by["a/y"].verdict == "STILL-BROKEN" and "ERROR in the baseline too" in by["a/y"].reason
    assert (result.overall, result.exit_code) == ("STILL-BROKEN", 1)
    assert by["a/z"].verdict == "MISSING" and "incorrect in the baseline" in by["a/z"].reason


def test_failing_in_both_runs_does_not_blame_the_change_yet_fails_the_gate():
    """A case failing in both runs was BROKEN, the verdict of a case the change broke: a CI owner read
    the change as the cause. It is STILL-BROKEN now, exit 1 all the same (a failing implementation never
    passes); a case the change broke, or a regression, names the overall verdict before it."""
    rng = np.random.default_rng(45)
    base = make_run({"a": {"x": noisy(rng, N), "y": [], "s": []}}, statuses={"a/y": "incorrect", "a/s": "skipped"})
    cur = make_run({"a": {"x": noisy(rng, N), "y": [], "s": []}}, statuses={"a/y": "incorrect", "a/s": "error"})
    by = {v.key: v for v in gate(base, cur).verdicts}
    assert by["a/y"].verdict == "STILL-BROKEN" and by["a/y"].status_base == "incorrect"
    assert "not broken by this change" in by["a/y"].reason
    # skipped in the baseline: nothing says it worked or failed there, so the change is not cleared
    assert by["a/s"].verdict == "BROKEN" and "too" not in by["a/s"].reason and "skipped in the baseline" in by["a/s"].reason
    only = make_run({"a": {"x": [], "y": []}}, statuses={"a/x": "incorrect", "a/y": "error"})
    g = gate(only, only)  # nothing compared, but a case fails: exit 1, not "bad input"
    assert (g.overall, g.exit_code, g.count("STILL-BROKEN")) == ("STILL-BROKEN", 1, 2)
    slower = make_run({"a": {"x": noisy(rng, N, 2e-3), "y": []}}, statuses={"a/y": "incorrect"})
    assert gate(make_run({"a": {"x": noisy(rng, N), "y": []}}, statuses={"a/y": "incorrect"}), slower,
                seed=1).overall == "REGRESSION"
    junit = ET.fromstring(gate_junit(g))
    assert junit.get("failures") == "2" and [f.get("type") for f in junit.iter("failure")] == ["STILL-BROKEN"] * 2
    assert "still-broken = failing now and in the baseline" in gate_markdown(g).lower()


def test_failing_in_the_baseline_and_gone_now_is_missing_not_left_out():
    """A key INCORRECT in the baseline and absent (or skipped) in the current run was left out of the
    gate's output entirely, where every other key that leaves the current run is MISSING."""
    rng = np.random.default_rng(44)
    base = make_run({"a": {"x": noisy(rng, N), "y": [], "z": []}}, statuses={"a/y": "incorrect", "a/z": "crashed"})
    cur = make_run({"a": {"x": noisy(rng, N), "z": []}}, statuses={"a/z": "skipped"}, messages={"a/z": "needs CuPy"})
    result = gate(base, cur)
    by = {v.key: v for v in result.verdicts}
    assert set(by) == {"a/x", "a/y", "a/z"}
    assert (by["a/y"].verdict, by["a/y"].status_base, by["a/y"].status_cur) == ("MISSING", "incorrect", None)
    assert "absent from the current run" in by["a/y"].reason and "INCORRECT in the baseline" in by["a/y"].reason
    assert (by["a/z"].verdict, by["a/z"].status_cur) == ("MISSING", "skipped")
    assert "skipped in the current run (needs CuPy)" in by["a/z"].reason and "CRASHED in the baseline" in by["a/z"].reason
    assert by["a/y"].rounds_base == by["a/y"].rounds_cur == 0
    assert (result.overall, result.exit_code) == ("PASS", 0)  # MISSING passes, as for every key gone


def test_faster_case_is_reported_and_passes():
    rng = np.random.default_rng(42)
    g = gate(make_run({"c": {"x": noisy(rng, N)}}), make_run({"c": {"x": noisy(rng, N, 0.8e-3)}}))
    v = g.verdicts[0]
    assert v.verdict == "FASTER" and v.alternative == "faster"
    assert v.p_adjusted is not None and v.p_adjusted <= 0.01 and "1.25x as fast" in v.reason
    assert (g.overall, g.exit_code) == ("PASS", 0)


def test_no_case_in_common_is_a_config_error():
    rng = np.random.default_rng(32)
    with pytest.raises(ConfigError, match="no measured case in common"):
        gate(make_run({"a": {"x": noisy(rng, N)}}), make_run({"b": {"x": noisy(rng, N)}}))


def test_all_equal_samples_do_not_crash():
    flat = make_run({"c": {"x": [1e-3] * 20}})
    assert gate(flat, flat).overall == "PASS"
    g = gate(flat, make_run({"c": {"x": [2e-3] * 20}}))
    assert g.overall == "REGRESSION" and g.verdicts[0].ci_low == pytest.approx(2.0)


def test_small_improvement_passes_without_claiming_faster():
    rng = np.random.default_rng(33)
    g = gate(make_run({"c": {"x": noisy(rng, N)}}), make_run({"c": {"x": noisy(rng, N, 0.98e-3)}}))
    assert g.overall == "PASS" and g.verdicts[0].verdict == "PASS"  # 2% < the 5% threshold


def _close_pair(recorded_base=None, recorded_cur=None) -> tuple[RunResult, RunResult]:
    """A true 7% slowdown with 0.2% noise: a regression at 5%, a pass at 10%."""
    rng = np.random.default_rng(34)
    wl = {"c": "gemm"}
    base = make_run({"c": {"x": noisy(rng, N, 1e-3, 0.002)}}, workloads=wl, gate_thresholds=recorded_base)
    cur = make_run({"c": {"x": noisy(rng, N, 1.07e-3, 0.002)}}, workloads=wl, gate_thresholds=recorded_cur)
    return base, cur


def test_threshold_defaults_to_five_percent():
    g = gate(*_close_pair())
    assert g.overall == "REGRESSION" and g.threshold is None
    assert (g.verdicts[0].threshold, g.verdicts[0].threshold_source) == (0.05, "default")


def test_recorded_workload_threshold_applies_current_first_then_baseline():
    loose = gate(*_close_pair(recorded_cur={"gemm": 0.10}))
    assert loose.overall == "PASS"
    assert (loose.verdicts[0].threshold, loose.verdicts[0].threshold_source) == (0.10, "workload")
    assert gate(*_close_pair(recorded_base={"gemm": 0.10})).overall == "PASS"  # baseline's when current has none
    strict = gate(*_close_pair(recorded_base={"gemm": 0.10}, recorded_cur={"gemm": 0.05}))
    assert strict.overall == "REGRESSION"  # the current run's wins over the baseline's
    assert gate(*_close_pair(recorded_cur={"other": 0.10})).overall == "REGRESSION"


def test_explicit_threshold_always_wins_over_the_recorded_one():
    tight = gate(*_close_pair(recorded_cur={"gemm": 0.10}), threshold=0.05)
    assert tight.overall == "REGRESSION" and tight.threshold == 0.05
    assert tight.verdicts[0].threshold_source == "explicit"
    assert gate(*_close_pair(recorded_cur={"gemm": 0.01}), threshold=0.10).overall == "PASS"


@pytest.mark.parametrize("bad", [0.0, -0.1, float("nan"), float("inf"), "5%", True])
def test_a_bad_recorded_threshold_is_a_results_error(bad):
    with pytest.raises(ResultsFormatError, match="gate_threshold of workload 'gemm'"):
        gate(*_close_pair(recorded_cur={"gemm": bad}))


def test_benjamini_hochberg_spans_all_cases():
    # 5 vs 5 samples, completely separated: one-sided p = 1/252 ~ 0.004 < 0.01 alone, but
    # adjusted over 10 tested cases it becomes 0.04: the CI says slower, the FDR-controlled
    # rank test does not agree, so the case is INCONCLUSIVE rather than a regression.
    slow_base, slow_cur = [1e-3 * (1 + i / 100) for i in range(5)], [2e-3 * (1 + i / 100) for i in range(5)]
    alone = gate(make_run({"s": {"x": slow_base}}), make_run({"s": {"x": slow_cur}}))
    assert alone.verdicts[0].verdict == "REGRESSION"
    rng = np.random.default_rng(35)
    others_b = {f"o{i}": {"x": noisy(rng, N)} for i in range(9)}
    others_c = {f"o{i}": {"x": noisy(rng, N)} for i in range(9)}
    g = gate(make_run({"s": {"x": slow_base}, **others_b}), make_run({"s": {"x": slow_cur}, **others_c}))
    s = next(v for v in g.verdicts if v.key == "s/x")
    assert s.p_value == pytest.approx(1 / 252)
    assert s.p_adjusted == pytest.approx(10 / 252)
    assert s.verdict == "INCONCLUSIVE" and "rank test disagrees" in s.reason


def test_bad_settings_are_config_errors():
    base, cur = _pair()
    for kwargs in ({"threshold": 0.0}, {"threshold": -0.05}, {"alpha": 1.0}, {"confidence": 0.0}):
        with pytest.raises(ConfigError):
            gate(base, cur, **kwargs)


# ---- re-measuring suspects --------------------------------------------------------------

def test_merge_samples_pools_and_rescales():
    cur = make_run({"c": {"x": [1e-3] * 10, "y": [1e-3] * 10}})
    fresh = make_run({"c": {"x": [3e-3] * 11, "y": [9e-3] * 10}})
    merged = merge_samples(cur, fresh, ["c/x"])
    x, y = merged.cases[0].impl("x"), merged.cases[0].impl("y")
    assert x.timing.n == 21 and x.timing.n_rounds == 2  # the re-measurement is a round of its own
    assert x.timing.median == pytest.approx(2e-3)  # the median of the two round medians
    assert x.timing.stop_reason == "pooled" and x.timing.ci_low <= 2e-3 <= x.timing.ci_high
    assert x.score.sol == pytest.approx(T_SOL / 2e-3)
    assert y == cur.cases[0].impl("y")  # not asked for: untouched


def test_merge_samples_keeps_current_when_the_remeasurement_is_skipped():
    cur = make_run({"c": {"x": [1e-3] * 10}})
    fresh = make_run({"c": {"x": []}}, statuses={"c/x": "skipped"})
    assert merge_samples(cur, fresh) == cur


def test_a_remeasurement_that_fails_replaces_the_good_samples():
    cur = make_run({"c": {"x": [1e-3] * 10}})
    fresh = make_run({"c": {"x": []}}, statuses={"c/x": "timeout"})
    merged = merge_samples(cur, fresh)
    assert merged.cases[0].impl("x").status == "timeout"


def test_rerun_that_fails_turns_a_suspect_into_broken():
    rng = np.random.default_rng(43)
    base = make_run({"a": {"x": noisy(rng, N)}})
    cur = make_run({"a": {"x": noisy(rng, N, 1.2e-3)}})

    def crashes(keys: list[str], rounds: int) -> RunResult:
        return make_run({"a": {"x": []}}, statuses={"a/x": "crashed"})

    g = gate_with_rerun(base, cur, crashes, rerun=2)
    assert g.verdicts[0].verdict == "BROKEN" and g.reruns == 1 and g.exit_code == 1


class _Remeasure:
    """A fake live measurement: returns fixed samples for the requested keys, records calls."""

    def __init__(self, samples: list[float]):
        self.samples = samples
        self.calls: list[list[str]] = []

    def __call__(self, keys: list[str], rounds: int) -> RunResult:
        assert rounds == 1  # between single runs: one re-measurement (a new round) a look
        self.calls.append(list(keys))
        return make_run({k.split("/")[0]: {k.split("/")[1]: self.samples} for k in keys})


def test_rerun_resolves_a_too_small_sample():
    rng = np.random.default_rng(40)
    base = make_run({"a": {"x": noisy(rng, N)}, "b": {"x": noisy(rng, N)}})
    cur = make_run({"a": {"x": noisy(rng, N)}, "b": {"x": noisy(rng, 3)}})
    remeasure = _Remeasure(noisy(rng, N))
    g = gate_with_rerun(base, cur, remeasure, rerun=3)
    assert remeasure.calls[0] == ["a/x", "b/x"]  # a/x: a PASS from one process a side, confirmed once
    assert remeasure.calls[1:] == [["b/x"]] * (g.reruns - 1)  # then only the suspect, none once resolved
    assert g.overall == "PASS" and 1 <= g.reruns < 3
    a = next(v for v in g.verdicts if v.key == "a/x")
    assert (a.verdict, a.rounds_cur) == ("PASS", 2)
    b = next(v for v in g.verdicts if v.key == "b/x")
    assert b.n_cur == N * g.reruns + 3 and b.rounds_cur == g.reruns + 1  # each re-measurement a round


def test_rerun_confirms_a_real_regression():
    rng = np.random.default_rng(41)
    base = make_run({"a": {"x": noisy(rng, N)}})
    cur = make_run({"a": {"x": noisy(rng, N, 1.2e-3)}})
    remeasure = _Remeasure(noisy(rng, N, 1.2e-3))
    g = gate_with_rerun(base, cur, remeasure, rerun=2)
    assert g.overall == "REGRESSION" and g.reruns >= 1 and len(remeasure.calls) == g.reruns


def test_a_remeasure_that_measures_none_of_the_keys_stops_the_reruns():
    """A re-measure that skipped every undecided key (its device has no lane in a sharded run, a
    requirement gone) changed nothing, yet the gate asked again at every look and counted each as a
    round added: "8 re-measure rounds" where none was measured. It stops at the first such look."""
    rng = np.random.default_rng(40)
    base = make_run({"a": {"x": noisy(rng, N)}, "b": {"x": noisy(rng, N)}})
    cur = make_run({"a": {"x": noisy(rng, N)}, "b": {"x": noisy(rng, 3)}})
    calls = []

    def skips(keys: list[str], rounds: int) -> RunResult:
        calls.append(list(keys))
        return make_run({"b": {"x": []}}, statuses={"b/x": "skipped"})

    g = gate_with_rerun(base, cur, skips, rerun=5)
    assert calls == [["a/x", "b/x"]] and g.reruns == 0
    assert {v.key: v.verdict for v in g.verdicts} == {"a/x": "INCONCLUSIVE", "b/x": "INCONCLUSIVE"}


def test_rerun_zero_measures_nothing():
    base, cur = _mixed()
    remeasure = _Remeasure([1e-3] * N)
    g = gate_with_rerun(base, cur, remeasure, rerun=0)
    assert remeasure.calls == [] and g.reruns == 0
    # single runs: a slowdown no fresh process confirmed is undecided, and says how to decide it
    slow = next(v for v in g.verdicts if v.key == "slow/x")
    assert g.overall == "INCONCLUSIVE" and slow.verdict == "INCONCLUSIVE" and "not confirmed" in slow.reason
    # and so is a PASS, as standalone gate and ab make it: the same two runs get one answer from each command
    assert next(v for v in g.verdicts if v.key == "same/x").verdict == "INCONCLUSIVE"
    assert [v.verdict for v in g.verdicts] == [v.verdict for v in unconfirmed(gate(base, cur)).verdicts]
    confirmed = gate_with_rerun(base, cur, _Remeasure(noisy(np.random.default_rng(9), N, 1.2e-3)), rerun=4)
    assert confirmed.overall == "REGRESSION" and confirmed.reruns >= 1  # measured again, slow again: decided
    with pytest.raises(ConfigError):
        gate_with_rerun(base, cur, remeasure, rerun=-1)


def test_core_modules_import_no_device_or_ui_libraries():
    code = ("import sys, solbench.analysis.gate, solbench.analysis.compare, solbench.analysis.pooling, solbench.analysis.significance; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'cupy', 'yaml', 'rich', 'pynvml', 'click')))")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root)
    assert out.stdout.strip() == "[]"


def test_an_implementation_failing_now_fails_the_gate_even_when_it_failed_in_the_baseline_too():
    rng = np.random.default_rng(3)
    ok = make_run({"c": {"baseline": noisy(rng, N), "f": noisy(rng, N)}})
    bad = make_run({"c": {"baseline": noisy(rng, N), "f": noisy(rng, N)}}, statuses={"c/f": "incorrect"})
    for base, verdict in ((ok, "BROKEN"), (bad, "STILL-BROKEN")):
        result = gate(base, bad)
        f = next(v for v in result.verdicts if v.key == "c/f")
        assert f.verdict == verdict and f.status_cur == "incorrect"
        assert result.exit_code == 1
    fixed = gate(bad, ok)  # failing before, ok now: not compared, and no failure
    assert next(v for v in fixed.verdicts if v.key == "c/f").verdict == "MISSING" and fixed.exit_code == 0


def _with_algorithms(run: RunResult, label: str, key: str = "cublaslt_algorithms") -> RunResult:
    from dataclasses import replace

    return replace(run, cases=tuple(replace(c, impls=tuple(
        replace(i, protocol={**i.protocol, key: label}) for i in c.impls)) for c in run.cases))


def test_a_verdict_says_when_the_runs_autotuned_different_algorithms():
    rng = np.random.default_rng(21)
    base = _with_algorithms(make_run({"slow": {"x": noisy(rng, N)}, "same": {"x": noisy(rng, N)}}), "66:aaaa1111")
    cur = _with_algorithms(make_run({"slow": {"x": noisy(rng, N, 1.2e-3)}, "same": {"x": noisy(rng, N)}}),
                           "31:bbbb2222")
    by_key = {v.key: v for v in gate(base, cur).verdicts}
    assert by_key["slow/x"].verdict == "REGRESSION"
    assert "66:aaaa1111 in the baseline, 31:bbbb2222 in the current" in by_key["slow/x"].reason
    assert by_key["same/x"].verdict == "PASS" and "cuBLASLt" not in by_key["same/x"].reason
    assert by_key["slow/x"].choices and not by_key["same/x"].choices
    console = Console(width=400, record=True)
    console.print(gate_table(gate(base, cur)))
    row = next(line for line in console.export_text().splitlines() if "REGRESSION" in line and "│" in line)
    assert "66:aaaa1111 in the baseline" in row  # said beside the verdict, not only in the reason
    same = gate(base, _with_algorithms(cur, "66:aaaa1111"))
    assert all("cuBLASLt" not in v.reason for v in same.verdicts)  # the same algorithm: nothing to say


def test_a_verdict_says_when_the_runs_ran_different_kernels():
    rng = np.random.default_rng(22)
    base = _with_algorithms(make_run({"slow": {"x": noisy(rng, N)}}), "sm90_gemm_a | add_kernel", "kernels")
    cur = _with_algorithms(make_run({"slow": {"x": noisy(rng, N, 1.2e-3)}}), "sm90_gemm_b | add_kernel", "kernels")
    (v,) = gate(base, cur).verdicts
    assert v.verdict == "REGRESSION"
    assert "baseline only: sm90_gemm_a; current only: sm90_gemm_b" in v.reason
    (same,) = gate(base, _with_algorithms(cur, "sm90_gemm_a | add_kernel", "kernels")).verdicts
    assert "kernels" not in same.reason


def test_kernel_names_cut_with_a_digest_compare_with_names_saved_without_one():
    """cuDNN's variants of one kernel differ after the first 96 characters: a cut name now carries a
    digest of the whole name, and a baseline saved before that (the bare cut) still compares alike."""
    from solbench.measure.worker import kernel_names

    rng = np.random.default_rng(23)
    long_a, long_b = "sm90_xmma_fprop_" + "x" * 80 + "_split1", "sm90_xmma_fprop_" + "x" * 80 + "_split2"
    new_a, new_b = kernel_names([long_a]), kernel_names([long_b])
    assert new_a != new_b and new_a[:96] == new_b[:96]
    slow = {"slow": {"x": noisy(rng, N, 1.2e-3)}}
    base = _with_algorithms(make_run({"slow": {"x": noisy(rng, N)}}), new_a, "kernels")
    (v,) = gate(base, _with_algorithms(make_run(slow), new_b, "kernels")).verdicts
    assert f"baseline only: {new_a}; current only: {new_b}" in v.reason
    old_style = _with_algorithms(make_run({"slow": {"x": noisy(rng, N)}}), long_a[:96], "kernels")
    (v,) = gate(old_style, _with_algorithms(make_run(slow), new_b, "kernels")).verdicts
    assert v.verdict == "REGRESSION" and "kernels" not in v.reason


def test_the_byte_floor_is_never_gated():
    """A ``part: floor`` result measures the card, not the code: twice as slow, or missing, it
    changes no verdict; the implementations beside it are gated as ever."""
    from dataclasses import replace as _replace

    rng = np.random.default_rng(5)

    def run(floor_s: float, impl_s: float) -> RunResult:
        r = make_run({"c": {"x": noisy(rng, N, impl_s, NOISE), "floor": noisy(rng, N, floor_s, NOISE)}})
        case = r.cases[0]
        impls = tuple(_replace(i, protocol={**i.protocol, "part": "floor"}) if i.name == "floor" else i
                      for i in case.impls)
        return _replace(r, cases=(_replace(case, impls=impls),))

    result = gate(run(1e-3, 1e-3), run(2e-3, 1e-3))
    assert [v.key for v in result.verdicts] == ["c/x"] and result.overall == "PASS"
    assert gate(run(1e-3, 1e-3), run(1e-3, 1.3e-3)).overall == "REGRESSION"


# ---- runs on two cards of one model ------------------------------------------------------
def _on(uuid: str | None, rng: np.random.Generator) -> RunResult:
    return make_run({"c": {"x": noisy(rng, N, 1e-3)}}, environment=make_env(device_uuid=uuid))


def test_gate_names_two_cards_of_one_model_and_still_decides():
    rng = np.random.default_rng(3)
    result = gate(_on("GPU-aaaaaaaa-1111", rng), _on("GPU-bbbbbbbb-2222", rng))
    assert result.overall == "PASS" and not result.fingerprint_diffs
    assert "baseline on GPU-aaaaaaa" in result.cards and "current on GPU-bbbbbbb" in result.cards
    console = Console(record=True, width=200)
    console.print(gate_table(result))
    assert "other cards of one model" in console.export_text()
    assert gate_json(result)["cards"] == result.cards
    assert result.cards in gate_markdown(result) and 'name="cards"' in gate_junit(result)


def test_gate_says_nothing_of_cards_on_one_card_or_where_a_run_does_not_record_it():
    rng = np.random.default_rng(4)
    assert gate(_on("GPU-aaaaaaaa-1111", rng), _on("GPU-aaaaaaaa-1111", rng)).cards == ""
    assert gate(_on(None, rng), _on("GPU-bbbbbbbb-2222", rng)).cards == ""
    several = [_on("GPU-aaaaaaaa-1111", rng), _on("GPU-cccccccc-3333", rng)]  # a side over two cards
    assert "GPU-aaaaaaa" in gate(several, _on("GPU-aaaaaaaa-1111", rng)).cards
    other_model = make_run({"c": {"x": noisy(rng, N, 1e-3)}},
                           environment=make_env(device_uuid="GPU-dddddddd-4444", device_name="NVIDIA A100-SXM4-80GB"))
    crossed = gate(_on("GPU-aaaaaaaa-1111", rng), other_model, allow_cross_hardware=True)
    assert crossed.fingerprint_diffs and crossed.cards == ""  # not "one model": the diffs say what differs


# ---- runs timed differently (--timer, --launch) are never gated together --------------------

def _launched(run: RunResult, launch: str, points: dict[str, str] | None = None) -> RunResult:
    """``run`` recorded as timed with ``--launch launch``; ``points`` ("case/impl" -> launch) say
    how single points' calls were made (a fallback to the stream records why)."""
    from dataclasses import replace

    def impl(case_id: str, r):  # type: ignore[no-untyped-def]
        how = (points or {}).get(f"{case_id}/{r.name}", launch)
        extra = {"graph_fallback": "RuntimeError: operation not permitted when stream is capturing"} \
            if how == "stream" and launch == "graph" else {}
        return replace(r, protocol={**r.protocol, "launch": how, **extra})

    cases = tuple(replace(c, impls=tuple(impl(c.case_id, r) for r in c.impls)) for c in run.cases)
    return replace(run, protocol=replace(run.protocol, launch=launch), cases=cases)


def test_runs_launched_differently_are_refused():
    rng = np.random.default_rng(3)
    base = _launched(make_run({"c": {"x": noisy(rng, N, 1e-3, NOISE)}}), "graph")
    cur = _launched(make_run({"c": {"x": noisy(rng, N, 1e-3, NOISE)}}), "stream")
    with pytest.raises(GateRefused, match=r"timed differently: launch: graph \(baseline\) vs stream \(current\)"):
        gate(base, cur)
    old = make_run({"c": {"x": noisy(rng, N, 1e-3, NOISE)}})  # before --launch: launched on the stream
    assert gate(old, cur).overall == "PASS"


def test_a_point_one_side_could_not_capture_is_not_compared():
    rng = np.random.default_rng(4)
    base = _launched(make_run({"c": {"x": noisy(rng, N, 1e-3, NOISE), "y": noisy(rng, N, 1e-3, NOISE)}}), "graph")
    cur = _launched(make_run({"c": {"x": noisy(rng, N, 2e-3, NOISE), "y": noisy(rng, N, 1e-3, NOISE)}}), "graph",
                    {"c/x": "stream"})
    result = gate(base, cur)
    by_impl = {v.impl: v for v in result.verdicts}
    assert by_impl["x"].verdict == "MISSING"  # twice as slow, but timed another way: no verdict on it
    assert "launched differently (graph in the baseline, stream in the current run: RuntimeError" in by_impl["x"].reason
    assert by_impl["y"].verdict == "PASS" and result.overall == "PASS"


def test_no_case_in_common_but_launched_differently_says_so():
    """Every point of both runs launched differently was refused as "no measured case in common (0 in
    baseline only, 0 in current only)": read as runs of other cases, not as points timed another way."""
    rng = np.random.default_rng(6)
    base = _launched(make_run({"c": {"x": noisy(rng, N, 1e-3, NOISE)}}), "graph")
    cur = _launched(make_run({"c": {"x": noisy(rng, N, 1e-3, NOISE)}}), "graph", {"c/x": "stream"})
    with pytest.raises(ConfigError, match=r"0 in current only, 1 launched differently \(c/x:"):
        gate(base, cur)


def test_compare_sets_apart_a_pair_launched_differently():
    from solbench.analysis.compare import compare_impls, compare_runs
    from solbench.report.compare_json import comparison_json
    from solbench.report.markdown import comparison_markdown

    rng = np.random.default_rng(5)
    run = _launched(make_run({"c": {"baseline": noisy(rng, N, 2e-3, NOISE), "fused": noisy(rng, N, 1e-3, NOISE)},
                              "d": {"baseline": noisy(rng, N, 2e-3, NOISE), "fused": noisy(rng, N, 1e-3, NOISE)}}),
                    "graph", {"d/fused": "stream"})
    c = compare_impls(run, "baseline", "fused")
    assert [r.case_id for r in c.rows] == ["c"] and c.rows[0].verdict == "FASTER"
    assert list(c.launched_differently) == ["d"]
    assert c.launched_differently["d"].startswith("graph in baseline, stream in fused: RuntimeError")
    assert comparison_json(c)["launched_differently"] == c.launched_differently
    assert "Not comparable, launched differently" in comparison_markdown(c)
    other = _launched(run, "graph")  # every point a graph's replay
    assert compare_runs(other, run).launched_differently.keys() == {"d/fused"}


def test_a_verdict_says_when_the_same_kernels_ran_with_other_grids():
    """cuBLAS with another split-K factor in one process: the same kernel names, another grid."""
    rng = np.random.default_rng(23)
    base = _with_algorithms(_with_algorithms(make_run({"slow": {"x": noisy(rng, N)}}), "gemm | reduce", "kernels"),
                            "#1 grid 64x4x1 block 128x1x1 | #2 grid 16x1x1", "kernel_shapes")
    cur = _with_algorithms(_with_algorithms(make_run({"slow": {"x": noisy(rng, N, 1.2e-3)}}), "gemm | reduce",
                                            "kernels"), "#1 grid 64x8x1 block 128x1x1 | #2 grid 16x1x1",
                           "kernel_shapes")
    (v,) = gate(base, cur).verdicts
    assert v.verdict == "REGRESSION"
    assert ("launched their kernels with different grids or blocks (#1 grid 64x4x1 block 128x1x1 | #2 grid 16x1x1 "
            "in the baseline, #1 grid 64x8x1 block 128x1x1 | #2 grid 16x1x1 in the current)") in v.reason
    (same,) = gate(base, _with_algorithms(cur, "#1 grid 64x4x1 block 128x1x1 | #2 grid 16x1x1",
                                          "kernel_shapes")).verdicts
    assert "grids" not in same.reason
