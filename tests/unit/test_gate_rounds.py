"""Gate and compare over several runs per side, rounds merged and runs combined; synthetic samples only.

Each synthetic run draws its own process offset (the per-process state issue 8 measured) on top
of 1% noise inside the run. No verdict depends on the machine.
"""

import json
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner
from rich.console import Console

from solbench.analysis.compare import compare_runs, estimate
from solbench.analysis.gate import gate, gate_with_rerun
from solbench.analysis.pooling import combine_runs, concat_timings, merge_rounds, merge_samples
from solbench.analysis.rounds import summarize
from solbench.cli import main
from solbench.errors import GateRefused
from solbench.results import store
from solbench.results.model import ImplResult, Timing
from tests.unit.factories import make_env, make_impl, make_run

CASES = ("a", "b", "c")


def _run(rng, offset_sd, shift=1.0, n=30, **kwargs):
    offset = rng.normal(0.0, offset_sd)
    return make_run({c: {"k": list(1e-3 * shift * np.exp(offset + rng.normal(0.0, 0.01, n)))} for c in CASES},
                    **kwargs)


def _side(rng, n_runs, offset_sd, shift=1.0, **kwargs):
    return [_run(rng, offset_sd, shift, **kwargs) for _ in range(n_runs)]


def _count(result, verdict):
    return sum(v.verdict == verdict for v in result.verdicts)


def test_several_runs_per_side_never_call_a_process_offset_a_regression():
    """Same code, 3% offsets between runs: one run against one run calls some cases REGRESSION;
    four runs per side, decided over runs, never do."""
    rng = np.random.default_rng(1)
    multi = single = 0
    for _ in range(20):
        base, cur = _side(rng, 4, 0.03), _side(rng, 4, 0.03)
        multi += _count(gate(base, cur, threshold=0.05), "REGRESSION")
        single += _count(gate(base[0], cur[0], threshold=0.05), "REGRESSION")
    assert multi == 0
    assert single > 0


def test_several_runs_per_side_catch_a_ten_percent_slowdown():
    rng = np.random.default_rng(2)
    for _ in range(10):
        result = gate(_side(rng, 5, 0.01), _side(rng, 5, 0.01, shift=1.10), threshold=0.05)
        assert result.overall == "REGRESSION" and _count(result, "REGRESSION") == len(CASES)
        v = result.verdicts[0]
        assert (v.rounds_base, v.rounds_cur) == (5, 5) and v.n_base == 150
        assert "over 5 vs 5 rounds" in v.reason and v.p_value is not None and v.p_value < 0.01


def test_same_code_over_runs_passes_when_runs_agree():
    rng = np.random.default_rng(3)
    result = gate(_side(rng, 5, 0.005), _side(rng, 5, 0.005), threshold=0.05)
    assert result.overall == "PASS"


def test_one_run_per_side_is_decided_exactly_as_before():
    rng = np.random.default_rng(4)
    base, cur = _run(rng, 0.0), _run(rng, 0.0, shift=1.2)
    assert gate([base], [cur]) == gate(base, cur)
    est = estimate(base.cases[0].impls[0], cur.cases[0].impls[0])
    assert not est.over_rounds and est.p_slower is None  # Mann-Whitney, as for single runs


def test_runs_of_one_side_must_share_a_fingerprint():
    rng = np.random.default_rng(5)
    other = _run(rng, 0.0, environment=make_env(driver="999.1"))
    with pytest.raises(GateRefused, match="baseline runs were measured on different"):
        gate([_run(rng, 0.0), other], [_run(rng, 0.0)])
    assert gate([_run(rng, 0.0), other], [_run(rng, 0.0)], allow_cross_hardware=True).verdicts


def _timing(samples, rounds=()):
    return concat_timings([Timing(tuple(samples), 0.0, 0.0, 0.0, "converged")], [rounds or (0,) * len(samples)])


def test_combine_runs_keeps_every_run_and_round_apart():
    one = make_run({"a": {"k": [1.0] * 6}}, gate_thresholds={"demo": 0.1})
    two_rounds = make_run({"a": {"k": [2.0] * 6}, "b": {"k": [5.0] * 6}}, gate_thresholds={"demo": 0.2})
    impl = two_rounds.cases[0].impls[0]
    impl = replace(impl, timing=_timing([2.0, 2.0, 2.0, 3.0, 3.0, 3.0], (0, 0, 0, 1, 1, 1)))
    two_rounds = replace(two_rounds, cases=(replace(two_rounds.cases[0], impls=(impl,)), two_rounds.cases[1]))
    both = combine_runs([one, two_rounds])
    t = both.cases[0].impls[0].timing
    assert t.rounds == (0,) * 6 + (1, 1, 1, 2, 2, 2) and t.n_rounds == 3
    assert t.median == 2.0  # median of the round medians 1, 2, 3
    assert both.cases[1].impls[0].timing.samples == (5.0,) * 6  # a key in one run only: as it was
    assert both.gate_thresholds == {"demo": 0.1}  # the first run's record wins
    assert both.protocol.rounds == 3 and "combined from 2 runs" in both.notes[-1]


def test_a_failure_in_any_run_or_round_is_the_result():
    ok = make_impl("k", [1.0] * 5)
    bad = ImplResult("k", "incorrect", "out of tolerance")
    assert merge_rounds([ok, bad, ok]).message == "round 2 of 3: out of tolerance"
    runs = [make_run({"a": {"k": [1.0] * 5}}), make_run({"a": {"k": [1.0] * 5}}, statuses={"a/k": "crashed"},
                                                          messages={"a/k": "SIGSEGV"})]
    combined = combine_runs(runs).cases[0].impls[0]
    assert combined.status == "crashed" and combined.message == "run 2 of 2: SIGSEGV"


def test_merge_rounds_labels_rounds_pads_clocks_and_takes_the_median_over_rounds():
    a = replace(make_impl("k", [1.0, 1.0, 1.0]), protocol={"task_s": 1.0, "spin_us": 20.0})
    a = replace(a, timing=replace(a.timing, sm_clock_mhz=(1980, 1980, 1755), throttle_reasons=(0, 0, 4)))
    b = replace(make_impl("k", [2.0, 2.0]), protocol={"task_s": 2.0})
    c = replace(make_impl("k", [4.0, 4.0, 4.0, 4.0]), protocol={"task_s": 0.5})
    merged = merge_rounds([a, b, c])
    t = merged.timing
    assert t.rounds == (0, 0, 0, 1, 1, 2, 2, 2, 2) and t.median == 2.0
    assert t.sm_clock_mhz == (1980, 1980, 1755, None, None, None, None, None, None)
    assert t.throttled == (False, False, True, False, False, False, False, False, False)
    s = summarize(t.samples, t.rounds)
    assert (t.ci_low, t.ci_high) == (s.ci_low, s.ci_high)
    assert merged.protocol == {"task_s": 3.5, "spin_us": 20.0, "rounds": 3}
    assert merged.score.sol == pytest.approx(a.score.sol / 2.0)  # rescaled to the new median
    skipped = ImplResult("k", "skipped", "needs CUDA")
    assert merge_rounds([skipped, skipped]) == skipped
    assert merge_rounds([a]) is a


def test_a_rerun_is_a_round_of_its_own_of_a_single_run_and_of_a_run_in_rounds():
    plain = make_run({"a": {"k": [1.0] * 5}})
    fresh = make_run({"a": {"k": [3.0] * 5}})
    pooled = merge_samples(plain, fresh).cases[0].impls[0].timing
    assert pooled.rounds == (0,) * 5 + (1,) * 5 and pooled.n_rounds == 2 and pooled.stop_reason == "pooled"
    in_rounds = combine_runs([plain, make_run({"a": {"k": [2.0] * 5}})])
    added = merge_samples(in_rounds, fresh).cases[0].impls[0].timing
    assert added.n_rounds == 3 and added.rounds[-5:] == (2,) * 5 and added.median == 2.0


def test_gate_with_rerun_accepts_several_baseline_runs():
    rng = np.random.default_rng(6)
    base = _side(rng, 3, 0.005)
    cur = _run(rng, 0.005)
    result = gate_with_rerun(base, cur, lambda keys, rounds: _run(rng, 0.005), 1, threshold=0.05)
    assert result.overall in ("PASS", "INCONCLUSIVE") and result.count("REGRESSION") == 0


def test_compare_over_runs_reports_rounds():
    rng = np.random.default_rng(7)
    c = compare_runs(_side(rng, 4, 0.005), _side(rng, 4, 0.005, shift=0.7), threshold=0.05)
    assert all(r.verdict == "FASTER" and (r.rounds_a, r.rounds_b) == (4, 4) for r in c.rows)


def _save(tmp_path, runs, prefix):
    return [str(store.save(r, tmp_path / f"{prefix}{i}.json")) for i, r in enumerate(runs)]


def test_gate_cli_takes_several_runs_after_each_option(tmp_path):
    rng = np.random.default_rng(8)
    base = _save(tmp_path, _side(rng, 4, 0.005), "base")
    same = _save(tmp_path, _side(rng, 4, 0.005), "same")
    slow = _save(tmp_path, _side(rng, 4, 0.005, shift=1.15), "slow")
    ok = CliRunner().invoke(main, ["gate", "--baseline", *base, "--current", *same, "--threshold", "5%", "--json"])
    assert ok.exit_code == 0, ok.output
    data = json.loads(ok.stdout)
    assert {(v["rounds_base"], v["rounds_cur"]) for v in data["verdicts"]} == {(4, 4)}
    bad = CliRunner().invoke(main, ["gate", "--threshold", "5%", "--current", *slow, "--baseline", *base])
    assert bad.exit_code == 1, bad.output
    assert "Decided over rounds" in bad.output or "over 4 vs 4 rounds" in bad.output
    eq = CliRunner().invoke(main, ["gate", f"--baseline={base[0]}", *base[1:], "--current", slow[0], "--json"])
    assert {(v["rounds_base"], v["rounds_cur"]) for v in json.loads(eq.stdout)["verdicts"]} == {(4, 1)}


def test_gate_cli_refuses_mixed_hardware_within_a_side(tmp_path):
    rng = np.random.default_rng(9)
    base = _save(tmp_path, [_run(rng, 0.0), _run(rng, 0.0, environment=make_env(driver="1.0"))], "b")
    cur = _save(tmp_path, [_run(rng, 0.0)], "c")
    result = CliRunner().invoke(main, ["gate", "--baseline", *base, "--current", *cur])
    assert result.exit_code == 2 and "baseline runs were measured on different" in result.output


def test_compare_cli_with_several_runs_per_side(tmp_path):
    rng = np.random.default_rng(10)
    a = _save(tmp_path, _side(rng, 3, 0.005), "a")
    b = _save(tmp_path, _side(rng, 3, 0.005, shift=0.5), "b")
    result = CliRunner().invoke(main, ["compare", "--baseline", *a, "--current", *b, "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    assert rows and all(r["verdict"] == "FASTER" and r["rounds_a"] == 3 for r in rows)
    assert json.loads(result.stdout)["label_a"].endswith("+2")
    usage = CliRunner().invoke(main, ["compare", "--baseline", *a])
    assert usage.exit_code == 2 and "together" in usage.output


def _in_rounds(medians, n=15):
    """One point measured in rounds whose medians are ``medians`` (seconds), a spread of ±0.2% inside each."""
    return merge_rounds([make_impl("k", list(m * np.linspace(0.998, 1.002, n))) for m in medians])


def test_an_undecided_verdict_names_the_rounds_that_read_far_from_their_side():
    """Two slow processes among a side's rounds (as on the H200: +11% in 2 of 16) widen the interval;
    the verdict names them, and a PASS names nothing."""
    from solbench.analysis.pooling import rounds_apart
    from solbench.report.compare_json import gate_json
    from solbench.report.markdown import undecided_note

    steady = [1e-3 * (1 + d) for d in (0.002, -0.004, 0.003, 0.0, -0.002, 0.001)]
    slow = [*steady, 1.11e-3, 1.108e-3]  # the median round: 1.0015e-3
    assert rounds_apart(_in_rounds(slow), "current") == "current round 7 +10.8%, round 8 +10.6%"
    assert rounds_apart(_in_rounds(steady), "baseline") == ""
    assert rounds_apart(make_impl("k", [1.0, 2.0, 3.0]), "baseline") == ""  # one round: nothing to compare
    base = make_run({"a": {"k": [1e-3] * 5}})
    base = replace(base, cases=(replace(base.cases[0], impls=(_in_rounds(steady[:3]),)),))
    cur = replace(base, cases=(replace(base.cases[0], impls=(_in_rounds(slow),)),))
    (v,) = gate(base, cur).verdicts
    assert v.verdict == "INCONCLUSIVE" and v.apart.startswith("current round 7 +")  # 3 steady rounds vs 8
    assert "rounds far from the rest of their side (current round 7" in v.reason
    g = gate(base, cur)
    assert "[current round 7" in undecided_note(g) and "a process that ran slow or fast" in undecided_note(g)
    assert json.loads(json.dumps(gate_json(g)))["undecided"][0]["apart"] == v.apart
    (same,) = gate(base, base).verdicts
    assert same.verdict == "PASS" and same.apart == ""


def test_a_run_notes_each_point_whose_rounds_include_a_slow_process():
    from solbench.report.console import run_notes

    run = make_run({"a": {"k": [1e-3] * 5}, "b": {"k": [1e-3] * 5}})
    slow = _in_rounds([1e-3, 1.002e-3, 0.999e-3, 1.001e-3, 1.09e-3])
    steady = _in_rounds([1e-3, 1.002e-3, 0.999e-3])
    run = replace(run, cases=(replace(run.cases[0], impls=(slow,)), replace(run.cases[1], impls=(steady,))))
    notes = [n for n in run_notes(run) if "rounds far from" in n]
    assert notes == [f"{run.cases[0].case_id} k: rounds far from the median of its rounds (round 5 +8.9%): a process "
                     "that ran slow or fast; the interval carries it"]


def test_over_rounds_the_gate_says_its_ratio_need_not_be_the_quotient_of_the_times_it_shows():
    """The times shown are medians of the round medians, the ratio is of their geometric means: a stored
    H200 pair read 27.1 µs -> 27.6 µs beside 0.997×. The note says so, as compare's does."""
    from solbench.report.compare_console import gate_table
    from solbench.report.markdown import gate_markdown

    rng = np.random.default_rng(3)
    rounds = [1.0, 1.0, 1.3]  # one slow round: median 1.0, geometric mean 1.09
    base = make_run({"c": {"k": [1e-3 * m * (1 + rng.normal(0, 1e-3)) for m in rounds for _ in range(10)]}},
                    rounds=3)
    cur = make_run({"c": {"k": [1.01e-3 * (1 + rng.normal(0, 1e-3)) for _ in range(30)]}}, rounds=3)
    (v,) = gate(base, cur).verdicts
    assert v.median_cur > v.median_base and v.ratio < 1  # the times and the ratio point opposite ways
    console = Console(width=400, record=True)
    console.print(gate_table(gate(base, cur)))
    for text in (gate_markdown(gate(base, cur)), console.export_text().replace("\n", " ")):
        assert "need not equal their quotient" in " ".join(text.split())


def test_a_gate_reason_never_prints_a_bound_as_the_threshold_it_is_not():
    """A PASS needs the CI below 1 + threshold: a bound of 1.049996 read "1.0500" in the reason."""
    from solbench.analysis.compare import Estimate
    from solbench.analysis.gate import _reason

    est = Estimate(1e-3, 1e-3, 1.0, 0.93, 1.049996, 30, 30)
    assert "CI [0.930000, 1.049996] rules out a slowdown of 5%" in _reason("PASS", est, 0.05, None, 0.01)
    plain = Estimate(1e-3, 1e-3, 1.0, 0.93, 1.04, 30, 30)
    assert "CI [0.9300, 1.0400]" in _reason("PASS", plain, 0.05, None, 0.01)


def test_a_threshold_prints_as_the_one_applied():
    """At one decimal a 0.25% threshold read "0.2%": a PASS whose CI reached 1.0023 said it ruled out a
    slowdown of 0.2%, and the table's threshold column said +0.2%."""
    from solbench.analysis.compare import Estimate
    from solbench.analysis.gate import _reason
    from solbench.report.units import format_percent

    est = Estimate(1e-3, 1.0022e-3, 1.0022, 1.0021, 1.0023, 30, 30)
    assert "CI [1.0021, 1.0023] rules out a slowdown of 0.25% or more" in _reason("PASS", est, 0.0025, None, 0.01)
    straddles = Estimate(1e-3, 1.0022e-3, 1.0022, 1.0020, 1.0026, 30, 30)
    assert "straddles 1+0.25%" in _reason("INCONCLUSIVE", straddles, 0.0025, None, 0.01)
    assert (format_percent(0.0025), format_percent(0.05), format_percent(0.125)) == ("0.25%", "5%", "12.5%")


def test_runs_of_one_side_that_differ_are_named_as_runs_of_that_side():
    """Two baseline runs on different drivers: the refusal named the second one "(current)"."""
    rng = np.random.default_rng(5)
    other = _run(rng, 0.0, environment=make_env(driver="999.1"))
    with pytest.raises(GateRefused) as refused:
        gate([_run(rng, 0.0), other], [_run(rng, 0.0)])
    assert "(baseline run 1) vs 999.1 (baseline run 2)" in str(refused.value)
    assert "current" not in str(refused.value)


def test_compare_cli_refuses_mixed_hardware_within_a_side_as_the_gate_does(tmp_path):
    """README: the runs of a side must share a fingerprint. compare merged a side's runs of two
    drivers (or of two timers) and compared them, exit 0."""
    rng = np.random.default_rng(9)
    base = _save(tmp_path, [_run(rng, 0.0), _run(rng, 0.0, environment=make_env(driver="1.0"))], "b")
    cur = _save(tmp_path, [_run(rng, 0.0)], "c")
    for args in (["--baseline", *base, "--current", *cur], ["--baseline", *cur, "--current", *base]):
        result = CliRunner().invoke(main, ["compare", *args])
        assert result.exit_code == 2, result.output
        assert "runs were measured on different hardware or software" in result.output
    same = _save(tmp_path, _side(rng, 2, 0.0), "s")
    assert CliRunner().invoke(main, ["compare", "--baseline", *same, "--current", *cur]).exit_code == 0
