"""The gate's between-run term (analysis.gate, "Between runs"): a run's own offset, shared by all its
rounds, priced into gates between separate runs. Seeded simulations and synthetic runs; no timing
depends on this machine.

Noise model: the rounds of ``test_sequential`` (per-round offset sd 1.5%, within-round sample sd 2%,
10-20 samples a round) plus one offset a run with sd 0.5%; ``run --gate-against``'s schedule (the
baseline fixed, four current rounds a look, up to eight more; K = 3 looks).
"""

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from solbench.analysis.adaptive import ROUNDS_A_LOOK
from solbench.analysis.allocation import (
    more_current_rounds_to_decide,
    more_rounds_to_decide,
    rounds_for_half_width,
    within_run_offsets,
)
from solbench.analysis.compare import compare_runs
from solbench.analysis.gate import DEFAULT_RUN_SD, gate, gate_with_rerun
from solbench.analysis.pooling import run_offsets
from solbench.analysis.sequential import (
    PASS,
    REGRESSION,
    UNDECIDED,
    between_runs,
    gate_codes,
    log_ratio,
    moderated,
    t_stats,
    variance_prior,
)
from solbench.analysis.tdist import t_ppf
from solbench.analysis.thresholds import parse_run_sd
from solbench.cli import main
from solbench.errors import ConfigError
from solbench.report.compare_json import gate_json
from solbench.report.markdown import undecided_note
from solbench.results import store
from tests.unit.factories import make_run
from tests.unit.test_sequential import GATE_AGAINST_RERUN, TAU, _round_medians

S_RUN = 0.005


def _gate_against(shift, s_gate, *, first, trials=8000, seed=0, s_true=S_RUN):
    """Verdicts of ``run --gate-against`` trials whose two runs each carry an offset of sd ``s_true``,
    decided with the term priced at ``s_gate``."""
    rng = np.random.default_rng(seed)
    cap = first + GATE_AGAINST_RERUN
    base = _round_medians(rng, trials, cap) + rng.normal(0.0, s_true, size=(trials, 1))
    cur = _round_medians(rng, trials, cap, shift) + rng.normal(0.0, s_true, size=(trials, 1))
    at = [*range(first, cap, ROUNDS_A_LOOK), cap]
    verdict = np.full(trials, UNDECIDED)
    for r in at:
        d, se, df = t_stats(base[:, :first], cur[:, :r])
        v = gate_codes(d, np.sqrt(se ** 2 + 2.0 * s_gate ** 2), df, TAU, looks=len(at))
        new = (verdict == UNDECIDED) & (v != UNDECIDED)
        verdict[new] = v[new]
    return verdict


def test_an_unpriced_run_offset_breaks_the_error_share_and_a_priced_one_keeps_it():
    """A six-round baseline, the truth on the threshold (1.05): without the term a wrong PASS and a
    wrong REGRESSION each exceed their 2.5% share (measured 4.7% and 4.5%: deeper baselines shrink
    the interval, not the offsets); priced at the true sd, each stays within it (0.8%, 0.8%)."""
    blind = _gate_against(1.05, 0.0, first=6, seed=105)
    priced = _gate_against(1.05, S_RUN, first=6, seed=105)
    assert np.mean(blind == PASS) > 0.025 and np.mean(blind == REGRESSION) > 0.025
    assert np.mean(priced == PASS) <= 0.025 and np.mean(priced == REGRESSION) <= 0.025


def test_a_priced_run_offset_never_calls_same_code_a_regression_and_catches_ten_percent():
    """Same code: no REGRESSION, and most trials PASS (measured 97.4%); a 10% slowdown never PASSes
    and is caught in most trials (96.1%): the rest stay INCONCLUSIVE, never a wrong verdict."""
    same = _gate_against(1.0, S_RUN, first=6, seed=100)
    slow = _gate_against(1.10, S_RUN, first=6, seed=110)
    assert np.mean(same == REGRESSION) == 0.0 and np.mean(same == PASS) >= 0.95
    assert np.mean(slow == PASS) == 0.0 and np.mean(slow == REGRESSION) >= 0.95


def _rounds_run(rng, shift, rounds, n=15, sd_round=0.01, cases=("a", "b", "c")):
    def samples():
        offsets = rng.normal(0.0, sd_round, size=rounds).repeat(n)
        return list(1e-3 * shift * np.exp(offsets + rng.normal(0.0, 0.01, rounds * n)))
    return make_run({c: {"k": samples()} for c in cases}, rounds=rounds)


def test_the_gate_adds_the_term_to_the_t_interval_per_run_a_side():
    """Fewer than ten points (no moderation): the interval is exp(d -/+ t se'), se'^2 = se^2 +
    S^2 (1/m_base + 1/m_cur) for sides of m runs; the degrees of freedom stay the rounds'."""
    rng = np.random.default_rng(3)
    base = [_rounds_run(rng, 1.0, 3) for _ in range(2)]
    cur = _rounds_run(rng, 1.02, 4)
    for side, m in ((base[0], 1), (base, 2)):
        plain = gate(side, cur, threshold=0.05)
        priced = gate(side, cur, threshold=0.05, run_sd=0.01)
        assert priced.run_sd == 0.01 and plain.run_sd == 0.0
        for p, v in zip(plain.verdicts, priced.verdicts, strict=True):
            half = math.log(p.ci_high / p.ci_low) / 2.0
            q = float(t_ppf(0.975, p.rounds_base + p.rounds_cur - 2))
            se = math.sqrt((half / q) ** 2 + 0.01 ** 2 * (1.0 / m + 1.0))
            assert math.log(v.ci_high / v.ci_low) / 2.0 == pytest.approx(q * se, rel=1e-9)
            assert v.ratio == pytest.approx(p.ratio)


def test_single_runs_and_a_zero_term_are_decided_as_before():
    rng = np.random.default_rng(4)
    one_base, one_cur = _rounds_run(rng, 1.0, 1), _rounds_run(rng, 1.0, 1)
    a, b = gate(one_base, one_cur, threshold=0.05), gate(one_base, one_cur, threshold=0.05, run_sd=0.01)
    assert [(v.ci_low, v.ci_high, v.verdict) for v in a.verdicts] == [(v.ci_low, v.ci_high, v.verdict)
                                                                      for v in b.verdicts]
    base, cur = _rounds_run(rng, 1.0, 3), _rounds_run(rng, 1.0, 3)
    assert gate(base, cur, run_sd=0.0) == gate(base, cur)


def test_the_term_is_added_after_moderation_and_only_once():
    """``moderated`` keeps the term in se; ``between_runs`` never stacks a second one."""
    rng = np.random.default_rng(5)
    a = [np.exp(rng.normal(0.0, 0.01, 15) + o) for o in rng.normal(0.0, 0.01, 3)]
    b = [np.exp(rng.normal(0.0, 0.01, 15) + o) for o in rng.normal(0.0, 0.01, 3)]
    t = log_ratio(a, b)
    priced = between_runs(t, 2e-4)
    assert priced.se == pytest.approx(math.sqrt(t.se ** 2 + 2e-4))
    assert between_runs(priced, 5e-4) == priced
    prior = variance_prior([0.01 ** 2 * (1.0 + 0.1 * i) for i in range(12)], [4.0] * 12)
    both = moderated(priced, prior)
    alone = moderated(t, prior)
    assert both.se == pytest.approx(math.sqrt(alone.se ** 2 + 2e-4))
    with pytest.raises(ValueError):
        between_runs(t, -1e-6)


def test_rounds_cannot_decide_a_ratio_within_the_offsets_of_the_threshold():
    """At 1.045 against 5% the gap is 0.48%; a 0.5% offset a side (1.96 x 0.71% = 1.4%) covers it:
    no number of rounds decides, per side or on the current side alone. Far from the threshold the
    term only asks for more rounds than without it."""
    d, var = math.log(1.045), 2 * 0.005 ** 2
    assert within_run_offsets(d, 0.05, var, confidence=0.95)
    assert not within_run_offsets(d, 0.05, 0.0, confidence=0.95)
    assert more_rounds_to_decide(d, 0.01, 0.05, 3, confidence=0.95, run_var=var) is None
    assert more_current_rounds_to_decide(d, 0.01, 0.05, 3, 3, confidence=0.95, run_var=var) is None
    assert more_rounds_to_decide(d, 0.01, 0.05, 3, confidence=0.95) is not None
    far = math.log(1.0)
    plain = more_rounds_to_decide(far, 0.02, 0.05, 3, confidence=0.95)
    priced = more_rounds_to_decide(far, 0.02, 0.05, 3, confidence=0.95, run_var=2 * 0.01 ** 2)
    assert plain is not None and priced is not None and priced > plain
    assert rounds_for_half_width(1e-4, 0.01, run_var=1e-4, cap=50) == 50  # the floor alone is wider than 1%


def _bound_runs(rng):
    """Three points over six rounds a side, the current 4% slower: decided without the term,
    stuck within a 1% offset a run of the 5% threshold with it."""
    return _rounds_run(rng, 1.0, 6, n=30, sd_round=0.001), _rounds_run(rng, 1.04, 6, n=30, sd_round=0.001)


def test_a_case_within_the_offsets_says_so_and_the_note_asks_for_more_runs():
    base, cur = _bound_runs(np.random.default_rng(6))
    assert gate(base, cur, threshold=0.05).overall == "PASS"
    result = gate(base, cur, threshold=0.05, run_sd=0.01)
    assert result.overall == "INCONCLUSIVE"
    assert all(v.run_bound and v.more_rounds is None and v.current_rounds is None for v in result.verdicts)
    assert "within the runs' own offsets" in result.verdicts[0].reason
    note = undecided_note(result)
    assert "3 lie within the runs' own offsets (sd 1.00% a run)" in note and "--baseline A B C" in note
    assert "more round(s) per side" not in note  # rounds would not help
    one = replace(result, verdicts=result.verdicts[:1])
    assert "1 lies within" in undecided_note(one) and "decides it;" in undecided_note(one)
    doc = gate_json(result)
    assert doc["run_sd"] == 0.01 and all(u["run_bound"] for u in doc["undecided"])
    from rich.console import Console

    from solbench.report.compare_console import gate_table

    console = Console(width=200, record=True)
    console.print(gate_table(result))
    assert console.export_text().count("more runs a side decide it") == 3



@pytest.mark.parametrize(("rounds_base", "asks_for_repeat"), [(3, True), (6, False), (9, False)])
def test_the_note_asks_for_a_six_round_baseline_only_where_the_baseline_has_fewer(rounds_base, asks_for_repeat):
    """A baseline already measured in six rounds or more (two 3-round runs a side, a --repeat 6 run) that
    still keeps a case undecided needs more rounds than that, not `run --repeat 6` again."""
    base, cur = _bound_runs(np.random.default_rng(6))
    result = gate(base, cur, threshold=0.05, run_sd=0.01)
    stuck = replace(result, verdicts=tuple(replace(v, run_bound=False, more_rounds=4, current_rounds=None,
                                                   rounds_base=rounds_base) for v in result.verdicts))
    note = undecided_note(stuck)
    assert f"the baseline's {rounds_base} round(s) keep the interval wider than the threshold" in note
    assert ("`run --repeat 6`" in note) is asks_for_repeat, note
    assert "`run --max-rounds 16 --rounds-target 0.01`" in note

def test_the_note_asks_for_a_six_round_baseline_where_any_stuck_case_has_fewer():
    """The advice took the most baseline rounds over every undecided case: a stuck case of a 3-round
    baseline beside an undecided one of 12 rounds lost the `run --repeat 6` advice it needs, and read
    "the baseline's 12 round(s)". It counts the stuck cases' rounds now."""
    base, cur = _bound_runs(np.random.default_rng(6))
    result = gate(base, cur, threshold=0.05, run_sd=0.01)
    first, second, *rest = result.verdicts
    mixed = replace(result, verdicts=(
        replace(first, run_bound=False, more_rounds=4, current_rounds=None, rounds_base=3),
        replace(second, run_bound=False, more_rounds=4, current_rounds=2, rounds_base=12),
        *(replace(v, run_bound=False, more_rounds=4, current_rounds=None, rounds_base=6) for v in rest)))
    note = undecided_note(mixed)
    assert "`run --repeat 6`" in note, note
    assert "the baseline's 3-6 round(s) keep the interval wider" in note, note


def test_gate_with_rerun_prices_the_term_at_every_look():
    rng = np.random.default_rng(7)
    base, cur = _bound_runs(rng)

    def remeasure(keys, n):  # any rounds: the offsets keep it undecided
        return _rounds_run(rng, 1.045, n, n=30, sd_round=0.001)

    result = gate_with_rerun(base, cur, remeasure, 8, step=ROUNDS_A_LOOK, threshold=0.05, run_sd=0.01)
    assert result.run_sd == 0.01 and result.overall == "INCONCLUSIVE" and result.reruns == 8


@pytest.mark.parametrize("bad", [-0.001, 0.5, float("nan")])
def test_a_run_sd_outside_zero_to_half_is_refused(bad):
    base, cur = _bound_runs(np.random.default_rng(8))
    with pytest.raises(ConfigError, match="run sd"):
        gate(base, cur, run_sd=bad)
    with pytest.raises(ConfigError, match="run sd"):
        compare_runs(base, cur, run_sd=bad)


@pytest.mark.parametrize("text,value", [("0.2%", 0.002), ("0.002", 0.002), ("0", 0.0), (" 1% ", 0.01)])
def test_parse_run_sd(text, value):
    assert parse_run_sd(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["2", "60%", "abc", "-1%", ""])
def test_parse_run_sd_refuses_what_is_not_a_small_fraction(text):
    with pytest.raises(ConfigError, match="run sd"):
        parse_run_sd(text)


def test_compare_between_runs_prices_the_term_too():
    base, cur = _bound_runs(np.random.default_rng(9))
    plain, priced = compare_runs(base, cur, threshold=0.05), compare_runs(base, cur, threshold=0.05, run_sd=0.01)
    assert priced.run_sd == 0.01
    for p, v in zip(plain.rows, priced.rows, strict=True):
        assert v.ci_low < p.ci_low and v.ci_high > p.ci_high


def _saved(tmp_path):
    base, cur = _bound_runs(np.random.default_rng(10))
    return str(store.save(base, tmp_path / "base.json")), str(store.save(cur, tmp_path / "cur.json"))


def test_gate_cli_prices_the_default_and_takes_run_sd(tmp_path):
    base, cur = _saved(tmp_path)
    runner = CliRunner()
    default = runner.invoke(main, ["gate", "--baseline", base, "--current", cur, "--threshold", "5%", "--json"])
    off = runner.invoke(main, ["gate", "--baseline", base, "--current", cur, "--threshold", "5%", "--json",
                               "--run-sd", "0"])
    wide = runner.invoke(main, ["gate", "--baseline", base, "--current", cur, "--threshold", "5%", "--json",
                                "--run-sd", "1%"])
    docs = [json.loads(r.stdout) for r in (default, off, wide)]
    assert [d["run_sd"] for d in docs] == [DEFAULT_RUN_SD, 0.0, 0.01]
    widths = [max(v["ci_high"] / v["ci_low"] for v in d["verdicts"]) for d in docs]
    assert widths[1] < widths[0] < widths[2]
    assert wide.exit_code == 3 and "within the runs' own offsets" in wide.stderr


@pytest.mark.parametrize("argv,message", [
    (["gate", "--run-sd", "2"], "write '2%'"),
    (["compare", "baseline", "fused", "--run", "RUN", "--run-sd", "1%"], "share theirs"),
    (["run", "workloads/attn.yaml", "--run-sd", "1%"], "add --gate-against"),
])
def test_run_sd_misuse_is_a_usage_error(tmp_path, argv, message):
    base, _ = _saved(tmp_path)
    argv = [base if a == "RUN" else a for a in argv]
    if argv[0] == "gate":
        argv += ["--baseline", base, "--current", base]
    r = CliRunner().invoke(main, argv)
    assert r.exit_code == 2 and message in r.output


def _tree_runs(rng, s_true, runs=6, points=40, rounds=3, sd_round=0.01):
    """``runs`` runs of one tree: ``points`` points, each run one offset of sd ``s_true`` a point."""
    cases = [f"c{i}" for i in range(points)]
    out = []
    for _ in range(runs):
        out.append(make_run({c: {"k": list(1e-3 * np.exp(rng.normal(0.0, s_true)
                                                         + rng.normal(0.0, sd_round, rounds).repeat(20)
                                                         + rng.normal(0.0, 0.01, rounds * 20)))} for c in cases},
                            rounds=rounds))
    return out


def test_run_offsets_recovers_a_known_offset_and_finds_none_where_there_is_none():
    """40 points, six runs of three rounds (round sd 1%): a 1% offset a run is recovered within
    a fifth (measured 1.01%); without one the pooled estimate stays small (0.19%: the excess of a
    point can come out negative or positive by chance)."""
    rng = np.random.default_rng(20)
    with_offset = run_offsets(_tree_runs(rng, 0.01))
    assert with_offset.points == 40 and with_offset.runs == 6 and len(with_offset.largest) == 5
    assert 0.008 <= with_offset.sd <= 0.012
    assert run_offsets(_tree_runs(rng, 0.0)).sd < 0.004


def test_run_offsets_needs_three_runs_in_rounds():
    rng = np.random.default_rng(21)
    with pytest.raises(ValueError, match="three runs"):
        run_offsets(_tree_runs(rng, 0.01, runs=2))
    with pytest.raises(ValueError, match="--repeat"):
        run_offsets(_tree_runs(rng, 0.01, runs=3, rounds=1))


def test_spread_cli_prints_the_run_sd_to_gate_with(tmp_path):
    paths = [str(store.save(r, tmp_path / f"r{i}.json")) for i, r in enumerate(_tree_runs(np.random.default_rng(22),
                                                                                         0.01))]
    r = CliRunner().invoke(main, ["spread", *paths, "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["kind"] == "spread" and doc["runs"] == 6 and doc["points"] == 40
    assert 0.008 <= doc["run_sd"] <= 0.012
    text = CliRunner().invoke(main, ["spread", *paths])
    assert text.exit_code == 0 and f"--run-sd {doc['run_sd'] * 100:.2f}%" in text.stdout
    too_few = CliRunner().invoke(main, ["spread", *paths[:2]])
    assert too_few.exit_code == 2 and "three runs" in too_few.output
    twice = CliRunner().invoke(main, ["spread", paths[0], paths[1], paths[0]])  # would read as offset 0
    assert twice.exit_code == 2 and "holds the same samples as in" in twice.output


def test_spread_refuses_runs_of_other_hardware_or_timing_naming_the_difference(tmp_path):
    """One tree's offset is measured on one machine with one timer: a run from another driver or
    timed with another launch is refused (exit 2, the difference named), with no option to allow it."""
    runs = _tree_runs(np.random.default_rng(24), 0.01, runs=3)
    other_driver = replace(runs[2], environment=replace(runs[2].environment, driver="999.1"))
    other_launch = replace(runs[2], protocol=replace(runs[2].protocol, launch="graph"))
    for odd, said in ((other_driver, "different hardware or software: driver"), (other_launch, "timed differently")):
        paths = [str(store.save(r, tmp_path / f"r{i}.json")) for i, r in enumerate([*runs[:2], odd])]
        r = CliRunner().invoke(main, ["spread", *paths])
        assert r.exit_code == 2 and said in r.output and "--allow-cross-hardware" not in r.output, r.output


def test_a_saved_spread_is_what_later_gates_of_that_gpu_model_price(tmp_path):
    """``spread --save`` stores S per GPU model; ``gate`` without --run-sd prices it and says where it came
    from; --run-sd still wins; the record is not a run (``show`` reads the latest run, not it)."""
    runs = _tree_runs(np.random.default_rng(23), 0.01)
    paths = [str(store.save(r, tmp_path / f"r{i}.json")) for i, r in enumerate(runs)]
    rdir = str(tmp_path / "results")
    saved = CliRunner().invoke(main, ["spread", *paths, "--save", "--results-dir", rdir, "--json"])
    assert saved.exit_code == 0, saved.output
    doc = json.loads(saved.stdout)
    record = store.load_spread(Path(rdir), runs[0].spec.id)
    assert record is not None and record.run_sd == doc["run_sd"] and doc["saved"].endswith(".json")
    assert record.runs == tuple(paths) and record.points == 40

    def gate_json_of(*extra):
        r = CliRunner().invoke(main, ["gate", "--baseline", paths[0], "--current", paths[1], "--json",
                                      "--results-dir", rdir, *extra])
        assert r.exit_code in (0, 3), r.output
        return json.loads(r.stdout)

    priced = gate_json_of()
    assert priced["run_sd"] == record.run_sd and "spread" in priced["run_sd_source"]
    assert gate_json_of("--run-sd", "0.1%")["run_sd"] == 0.001
    store.save(runs[2], Path(rdir) / "h100-sxm" / "latest.json")
    shown = CliRunner().invoke(main, ["show", "--results-dir", rdir, "--json"])
    assert shown.exit_code == 0 and json.loads(shown.stdout)["cases"]


def test_without_a_saved_spread_the_gate_prices_the_default_and_says_so(tmp_path):
    base, cur = _saved(tmp_path)
    r = CliRunner().invoke(main, ["gate", "--baseline", base, "--current", cur, "--json",
                                  "--results-dir", str(tmp_path / "empty")])
    doc = json.loads(r.stdout)
    assert doc["run_sd"] == DEFAULT_RUN_SD and doc["run_sd_source"].startswith("default")


def test_a_malformed_spread_record_is_bad_input_naming_the_file(tmp_path):
    base, cur = _saved(tmp_path)
    spec = store.load(Path(base)).spec.id
    path = store.spread_path(tmp_path / "results", spec)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schema_version": 1, "run_sd": "wide"}))
    r = CliRunner().invoke(main, ["gate", "--baseline", base, "--current", cur, "--results-dir",
                                  str(tmp_path / "results")])
    assert r.exit_code == 2 and str(path) in r.output


def test_a_comparison_of_runs_in_rounds_says_it_priced_the_offsets():
    from solbench.report.markdown import comparison_markdown

    base, cur = _bound_runs(np.random.default_rng(24))
    assert "own offset (sd 1.00%)" in comparison_markdown(compare_runs(base, cur, run_sd=0.01))
    assert "own offset" not in comparison_markdown(compare_runs(base, cur))


def test_spread_refuses_an_offset_no_gate_takes_and_saves_nothing(tmp_path):
    """Runs that differ by more than a run's offset may (here one run 3x slower) give an sd that
    ``--run-sd`` refuses and that, saved, made every later gate of that GPU model exit 2: refused, exit 2."""
    runs = _tree_runs(np.random.default_rng(25), 0.01, runs=3)
    slow = replace(runs[2], cases=tuple(replace(c, impls=tuple(
        replace(r, timing=replace(r.timing, samples=tuple(3 * x for x in r.timing.samples))) for r in c.impls))
        for c in runs[2].cases))
    paths = [str(store.save(r, tmp_path / f"r{i}.json")) for i, r in enumerate([*runs[:2], slow])]
    rdir = tmp_path / "results"
    r = CliRunner().invoke(main, ["spread", *paths, "--save", "--results-dir", str(rdir)])
    assert r.exit_code == 2 and "at or above the 50%" in r.output, r.output
    assert store.load_spread(rdir, runs[0].spec.id) is None


def test_spread_of_runs_that_share_no_point_says_so_not_to_measure_in_rounds(tmp_path):
    """Three runs, each in rounds, of other cases (another workload file in one of them): nothing
    pairs, and the error must say that, not "measure with --repeat" (which they all were); a run
    measured in one round is named as the one to measure again."""
    rng = np.random.default_rng(26)
    runs = [*_tree_runs(rng, 0.0, runs=2, points=3), make_run({"other": {"k": [1e-3] * 30}}, rounds=3)]
    paths = [str(store.save(r, tmp_path / f"r{i}.json")) for i, r in enumerate(runs)]
    r = CliRunner().invoke(main, ["spread", *paths])
    assert r.exit_code == 2 and "--repeat" not in r.output and "not the same ones" in r.output, r.output
    single = _tree_runs(rng, 0.0, runs=1, points=3, rounds=1)[0]
    paths[2] = str(store.save(single, tmp_path / "single.json"))
    r = CliRunner().invoke(main, ["spread", *paths])
    assert r.exit_code == 2 and f"{paths[2]}: measured no point in rounds" in r.output, r.output
    dry = replace(runs[0], protocol=replace(runs[0].protocol, timer="none"),
                  cases=tuple(replace(c, impls=()) for c in runs[0].cases))
    dry_paths = [str(store.save(replace(dry, created=f"2025-01-0{i + 1}T00:00:00Z"), tmp_path / f"dry{i}.json"))
                 for i in range(3)]
    r = CliRunner().invoke(main, ["spread", *dry_paths])
    assert r.exit_code == 2 and f"{dry_paths[0]}: a dry run" in r.output and "--repeat" not in r.output, r.output


def _offset_runs(offsets, rounds=3, n=10):
    """One point, one run an offset (log time) each, every round's samples equal: within is 0 and the
    pooled sd is the sd of ``offsets`` exactly."""
    return [make_run({"c": {"k": [1e-3 * math.exp(o)] * (rounds * n)}}, rounds=rounds) for o in offsets]


def test_spread_prints_a_tiny_offset_as_the_gate_line_does_never_as_zero(tmp_path):
    """An sd of 0.003% (offsets -0.003%, 0, +0.003%): "sd 0.00%" beside "--run-sd 0.003%" read as none
    measured while the gate would price one."""
    paths = [str(store.save(r, tmp_path / f"r{i}.json")) for i, r in enumerate(_offset_runs([-3e-5, 0.0, 3e-5]))]
    doc = json.loads(CliRunner().invoke(main, ["spread", *paths, "--json"]).stdout)
    assert doc["run_sd"] == pytest.approx(3e-5)
    text = CliRunner().invoke(main, ["spread", *paths])
    assert text.exit_code == 0 and "0.00%" not in text.stdout, text.stdout
    assert "sd 0.003% pooled" in text.stdout and "--run-sd 0.003%" in text.stdout
    saved = CliRunner().invoke(main, ["spread", *paths, "--save", "--results-dir", str(tmp_path / "results")])
    assert saved.exit_code == 0 and "now price 0.003%" in saved.stdout, saved.stdout


def test_spread_names_the_device_and_timer_its_offset_was_measured_with(tmp_path):
    """The offset is a GPU model's and a timer's (a saved one is priced for that model only): the text
    and the JSON say which, as a run's header does, not a bare percent."""
    runs = _tree_runs(np.random.default_rng(27), 0.01, runs=3, points=4)
    paths = [str(store.save(r, tmp_path / f"r{i}.json")) for i, r in enumerate(runs)]
    text = CliRunner().invoke(main, ["spread", *paths])
    assert text.exit_code == 0 and text.stdout.startswith("3 runs on NVIDIA H100 80GB HBM3 (h100-sxm, timer cold)")
    doc = json.loads(CliRunner().invoke(main, ["spread", *paths, "--json"]).stdout)
    assert (doc["spec_id"], doc["device_name"], doc["timer"]) == ("h100-sxm", "NVIDIA H100 80GB HBM3", "cold")


def test_spread_names_the_points_it_left_out(tmp_path):
    """A point one run did not measure (here c1, failed there) or measured in one round (c2) cannot be
    pooled; spread said only how many points it pooled, so a CI owner could not tell its offset came
    from fewer cases than the runs hold, nor which."""
    runs = _tree_runs(np.random.default_rng(28), 0.01, runs=3, points=5)
    cases = list(runs[2].cases)
    cases[1] = replace(cases[1], impls=tuple(replace(r, status="error", timing=None) for r in cases[1].impls))
    cases[2] = replace(cases[2], impls=tuple(replace(r, timing=replace(r.timing, rounds=(0,) * len(r.timing.samples)))
                                             for r in cases[2].impls))
    whole = str(store.save(runs[2], tmp_path / "whole.json"))
    runs[2] = replace(runs[2], cases=tuple(cases))
    paths = [str(store.save(r, tmp_path / f"r{i}.json")) for i, r in enumerate(runs)]
    text = CliRunner().invoke(main, ["spread", *paths])
    assert text.exit_code == 0, text.output
    assert "3 points measured in rounds by every run" in text.stdout
    assert "left out 2 point(s) not measured in rounds by every run: c1/k, c2/k" in text.stdout
    doc = json.loads(CliRunner().invoke(main, ["spread", *paths, "--json"]).stdout)
    assert doc["points"] == 3 and doc["left_out"] == ["c1/k", "c2/k"]
    every = CliRunner().invoke(main, ["spread", *paths[:2], whole])
    assert every.exit_code == 0 and "5 points" in every.stdout and "left out" not in every.stdout


def test_spread_refuses_a_run_holding_two_results_for_one_point(tmp_path):
    """A hand-merged run holding a point twice (here once 20% slower), beside a run without it: the
    point's two results counted as two runs, and spread reported an 8% offset where the runs have none.
    Refused, exit 2, naming the file, as compare and gate refuse it."""
    rng = np.random.default_rng(28)

    def one(offset=0.0):
        return make_run({c: {"k": list(1e-3 * np.exp(offset + rng.normal(0.0, 0.001, 30)))} for c in ("c", "d")},
                        rounds=3)

    merged = one()
    merged = replace(merged, cases=(merged.cases[0], one(0.2).cases[0], merged.cases[1]))
    lacking = one()
    lacking = replace(lacking, cases=lacking.cases[1:])
    paths = [str(store.save(r, tmp_path / f"r{i}.json")) for i, r in enumerate([merged, one(), lacking])]
    r = CliRunner().invoke(main, ["spread", *paths])
    assert r.exit_code == 2 and f"{paths[0]}: duplicate result for 'c/k'" in r.output, r.output


def test_spread_says_an_offset_estimated_at_zero_is_an_estimate(tmp_path):
    """Three runs with no offset between them: the pooled excess comes out below zero and is kept at 0, which
    spread printed as "sd 0.00%" and --save stored without a word, so later gates priced nothing."""
    runs = _tree_runs(np.random.default_rng(0), 0.0, runs=3)
    assert run_offsets(runs).sd == 0.0
    paths = [str(store.save(r, tmp_path / f"r{i}.json")) for i, r in enumerate(runs)]
    text = CliRunner().invoke(main, ["spread", *paths])
    assert text.exit_code == 0, text.output
    assert "spread no more than their rounds predict: sd 0 is an estimate from 3 runs" in text.stderr
    runs = _tree_runs(np.random.default_rng(22), 0.01)  # an offset measured: nothing to say
    paths = [str(store.save(r, tmp_path / f"s{i}.json")) for i, r in enumerate(runs)]
    assert "is an estimate from" not in CliRunner().invoke(main, ["spread", *paths]).stderr
