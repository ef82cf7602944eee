"""Autotuning: search spaces, constraints, early stopping, the tuned file, and a CPU tuning run."""

import dataclasses
import functools
import json
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from solbench.cli import main
from solbench.errors import ConfigError, ResultsFormatError
from solbench.measure.criteria import CIWidth
from solbench.measure.runner import build_launches
from solbench.results.model import Timing
from solbench.tools import tune as tuning
from solbench.workload.cases import build_case
from solbench.workload.expr import ExprError
from solbench.workload.schema import Implementation, WorkloadSpec
from solbench.workload.tune_space import config_label, constraint_names, grid, holds, valid_configs
from tests.unit.factories import make_env

DATA = Path(__file__).resolve().parents[1] / "data"
TUNE_YAML = DATA / "tune_cpu.yaml"
# margin: never abandon a configuration early here (that path depends on timing; BeatOrStop is tested alone)
FAST = dict(budget_s=0.02, min_samples=3, max_samples=10, warmup=1, input_sets=1, confirm_rounds=1,
            confirm_max_rounds=2, margin=1e9)


# ------------------------------------------------------------------ constraints and grids


@pytest.mark.parametrize(("text", "scope", "expected"), [
    ("block <= hidden", {"block": 128, "hidden": 768}, True),
    ("block <= hidden", {"block": 1024, "hidden": 768}, False),
    ("32 <= block * rows <= 1024", {"block": 64, "rows": 4}, True),
    ("32 <= block * rows <= 1024", {"block": 512, "rows": 4}, False),
    ("hidden % (8 * vec) == 0 and vec != 2", {"hidden": 768, "vec": 4}, True),
    ("hidden % (8 * vec) == 0 and vec != 2", {"hidden": 768, "vec": 2}, False),
    ("block < 64 or not rows > 1", {"block": 128, "rows": 1}, True),
    ("block < 64 or not rows > 1", {"block": 128, "rows": 2}, False),
])
def test_constraints_evaluate_like_python(text, scope, expected):
    assert holds(text, scope) is expected


@pytest.mark.parametrize("text", ["block", "block <= hidden +", "__import__('os') == 1", "block in [1, 2]",
                                  "block <= hidden if 1 else 2"])
def test_malformed_constraints_are_refused(text):
    with pytest.raises(ExprError):
        constraint_names(text)


def test_constraint_names_and_unknown_name_at_evaluation():
    assert constraint_names("block * vec <= min(hidden, 4096)") == {"block", "vec", "hidden"}
    with pytest.raises(ExprError, match="unknown parameter 'vec'"):
        holds("block * vec <= 64", {"block": 8})


def test_grid_is_the_cartesian_product_in_declared_order():
    configs = list(grid({"a": [1, 2], "b": [10, 20, 30]}))
    assert len(configs) == 6
    assert configs[0] == {"a": 1, "b": 10} and configs[1] == {"a": 1, "b": 20} and configs[-1] == {"a": 2, "b": 30}
    assert config_label(configs[1]) == "a=1,b=20"


def test_valid_configs_filter_on_case_parameters_and_count_the_rest():
    kept, dropped = valid_configs({"tpr": [32, 64, 128, 256], "rows": [1, 4]},
                                  ["tpr * rows <= 256", "tpr * 8 <= hidden"], {"hidden": 768, "dtype": "bf16"})
    assert dropped == 8 - len(kept)
    assert {config_label(c) for c in kept} == {"tpr=32,rows=1", "tpr=32,rows=4", "tpr=64,rows=1", "tpr=64,rows=4"}


# ------------------------------------------------------------------ early stopping


def test_beat_or_stop_abandons_a_configuration_clearly_slower_than_the_best():
    inner = CIWidth(target=0.0001, min_samples=5, max_samples=100, budget_s=100.0)
    noisy_slow = [2.0, 2.2, 1.9, 2.1, 2.05, 1.95]  # CI of the median well above 1.1
    assert tuning.BeatOrStop(inner, bound=1.1).reason(noisy_slow, 0.0) == "beaten"
    assert tuning.BeatOrStop(inner, bound=3.0).reason(noisy_slow, 0.0) is None
    assert tuning.BeatOrStop(inner, bound=None).reason(noisy_slow, 0.0) is None
    assert tuning.BeatOrStop(inner, bound=1.1).reason(noisy_slow[:4], 0.0) is None  # fewer than min_samples


@pytest.mark.parametrize("n", [1, 3, 5])
def test_beat_or_stop_never_abandons_on_fewer_samples_than_a_95_percent_interval_needs(n):
    """The "beaten" rule claims the lower end of the median's 95% CI lies above the bound, but below 6 samples
    that lower end is the smallest sample, which lies above the median with probability 2^-n (50% at
    one sample, 12.5% at 3, 3.1% at 5): with --min-samples 1 a single slow first sample abandoned a
    configuration that could win. As CIWidth never says converged there, BeatOrStop waits for 6."""
    inner = CIWidth(target=0.0001, min_samples=1, max_samples=100, budget_s=100.0)
    slow = [2.0, 2.2, 1.9, 2.1, 2.05, 1.95]  # every sample far above the bound
    assert tuning.BeatOrStop(inner, bound=1.1).reason(slow[:n], 0.0) is None
    assert tuning.BeatOrStop(inner, bound=1.1).reason(slow, 0.0) == "beaten"


def test_beat_or_stop_keeps_the_inner_criterion():
    inner = CIWidth(target=0.01, min_samples=3, max_samples=4, budget_s=100.0)
    assert tuning.BeatOrStop(inner, bound=10.0).reason([1.0, 1.5, 2.0, 1.2], 0.0) == "max_samples"
    assert tuning.BeatOrStop(inner, bound=10.0).reason([1.0] * 6, 0.0) == "converged"


# ------------------------------------------------------------------ the runner contract


def _spy_setup(x, y, chunk):
    return {"x": x, "y": y, "seen": torch.tensor(chunk)}


def _spy_fn(x, y, seen, chunk, n):
    return x + y + 0 * seen, chunk, int(seen), n


def test_build_launches_passes_params_to_fn_and_to_a_setup_that_takes_them():
    spec = WorkloadSpec.model_validate(json.loads(json.dumps({
        "name": "w", "parameters": {"n": [4]}, "dtypes": ["float32"],
        "inputs": {"x": {"shape": ["n"]}, "y": {"shape": ["n"]}}, "outputs": {"out": {"shape": ["n"]}},
        "reference": "tests.unit.test_tune:_spy_fn",
        "implementations": {"baseline": {"fn": "tests.unit.test_tune:_spy_fn",
                                         "setup": "tests.unit.test_tune:_spy_setup", "params": {"chunk": 3}}}})))
    case = build_case(spec, {"n": 4}, "float32")
    sets = [{"x": torch.ones(4), "y": torch.ones(4)}]
    _, chunk, seen, n = build_launches(spec.implementations["baseline"], case, sets, None)[0]()
    assert (chunk, seen, n) == (3, 3, 4)  # fn got the param, setup saw it, the case parameter still flows


def test_tune_and_params_fields_validate():
    impl = Implementation.model_validate({"fn": "m:f", "params": {"block": 256},
                                          "tune": {"space": {"block": [128, 256]}, "constraints": ["block <= 4096"]}})
    assert impl.params == {"block": 256} and impl.tune is not None and impl.tune.space["block"] == [128, 256]
    with pytest.raises(ValueError):
        Implementation.model_validate({"fn": "m:f", "tune": {"space": {"block": []}}})
    with pytest.raises(ValueError):
        Implementation.model_validate({"fn": "m:f", "tune": {"space": {}}})


# ------------------------------------------------------------------ a tuning run on the CPU


@pytest.fixture(scope="module")
def cpu_result():
    return tuning.tune([TUNE_YAML], tuning.TuneOptions(**FAST), device="cpu")


def test_cpu_tuning_measures_every_valid_configuration(cpu_result):
    by_impl = {c.impl: c for c in cpu_result.cases}
    assert set(by_impl) == {"chunked", "no_tail"}  # the baseline declares no tune: space
    chunked = by_impl["chunked"]
    assert [t.params for t in chunked.trials] == [{"chunk": 16}, {"chunk": 24}, {"chunk": 64}]
    assert chunked.filtered == 1 and chunked.untried == 0  # chunk 128 > n = 64
    assert all(t.status == "ok" and t.median and t.n >= 1 for t in chunked.trials)
    assert chunked.hand_picked.status == "ok" and chunked.hand_picked.params == {}


def test_cpu_tuning_checks_each_configuration(cpu_result):
    no_tail = next(c for c in cpu_result.cases if c.impl == "no_tail")
    statuses = {t.params["chunk"]: t for t in no_tail.trials}
    assert statuses[16].status == "ok"
    assert statuses[24].status == "incorrect" and "NaN" in statuses[24].message and statuses[24].median is None
    assert no_tail.winner == {"chunk": 16}  # the only correct configuration


def test_the_winner_is_the_fastest_fully_measured_configuration(cpu_result):
    for c in cpu_result.cases:
        full = [t for t in c.trials if t.status == "ok" and t.stop_reason != "beaten"]
        assert c.winner == min(full, key=lambda t: t.median).params
        if c.impl == "no_tail":  # its winner is the configuration as declared: SAME, nothing to confirm
            assert c.verdict == "SAME" and c.confirm_winner is None
            continue
        assert c.confirm_winner is not None and c.confirm_hand_picked is not None
        ratios = c.confirm_round_ratios
        assert 2 <= len(ratios) <= 2 and c.gain == pytest.approx(math.prod(ratios) ** (1 / len(ratios)))


def test_tuned_file_keeps_only_confirmed_gains_and_round_trips(cpu_result):
    text = tuning.tuned_file(cpu_result)
    cfg = tuning.parse_tuned(text)
    assert cfg.spec_id == "cpu"
    expected = {(c.workload, c.impl, c.case_id) for c in cpu_result.cases if c.verdict == "FASTER"}
    assert set(cfg.entries) == expected
    data = json.loads(json.dumps(tuning.result_dict(cpu_result)))
    assert data["format"] == "solbench-tune/1" and len(data["cases"]) == 2
    assert all("samples" in t for case in data["cases"] for t in case["trials"])


def test_max_configs_and_patience_bound_the_search(tmp_path):
    text = TUNE_YAML.read_text().replace("space: {chunk: [16, 24]}", "space: {chunk: [24, 16]}")
    (tmp_path / "tunable.py").write_text((DATA / "tunable.py").read_text())
    path = tmp_path / "t.yaml"
    path.write_text(text)
    first = tuning.tune([path], tuning.TuneOptions(impls=("chunked",), max_configs=1, **FAST), device="cpu")
    assert len(first.cases[0].trials) == 1 and first.cases[0].untried == 2
    # no_tail: chunk 24 first, incorrect -> a miss; patience 1 stops before chunk 16
    patient = tuning.tune([path], tuning.TuneOptions(impls=("no_tail",), patience=1, **FAST), device="cpu")
    case = patient.cases[0]
    assert [t.params for t in case.trials] == [{"chunk": 24}] and case.untried == 1 and case.winner is None
    assert case.gain is None and case.confirm_winner is None


def test_a_workload_named_by_a_relative_path_finds_its_files_in_the_trial_workers(monkeypatch):
    """`solbench tune tests/data/tune_cpu.yaml` from the checkout: each trial's worker works in a scratch
    folder of its own, so the workload's folder must reach it as an absolute path, as run's does."""
    monkeypatch.chdir(DATA.parent)
    result = tuning.tune([Path("data") / TUNE_YAML.name], tuning.TuneOptions(impls=("chunked",), max_configs=1,
                                                                               **FAST), device="cpu")
    case = result.cases[0]
    assert case.hand_picked.status == "ok", case.hand_picked.message
    assert [t.status for t in case.trials] == ["ok"]


# ------------------------------------------------------------------ the tuned file


def _result_with(gains):
    cases = []
    for i, (hand, tuned) in enumerate(gains):
        trial = tuning.Trial({"chunk": 8 * (i + 1)}, "ok", median=tuned)
        cases.append(tuning.CaseTuning("w", "fused", f"w[n={i},float32]", "float32", {"n": i},
                                       tuning.Trial({}, "ok", median=hand), (trial,), 0, 0, trial.params,
                                       tuning.Trial({}, "ok", median=hand), trial,
                                       verdict="FASTER" if tuned < hand else "SLOWER"))
    return tuning.TuneResult("2026-01-01T00:00:00+00:00", make_env(spec_id="h200-sxm"), ("w.yaml",), {},
                             tuple(cases))


def _trial(samples):
    return tuning.Trial({}, "ok", median=sorted(samples)[len(samples) // 2], samples=tuple(samples))


def _rounds(medians, n=20):
    """One Trial per round: ``n`` samples within +-0.3% of each round's median (tight inside a round)."""
    return [_trial([m * (1 + 0.001 * (i % 7 - 3)) for i in range(n)]) for m in medians]


BASE = tuning.CaseTuning("w", "f", "c", "float32", {}, tuning.Trial({}, "ok"))


@pytest.mark.parametrize(("hand", "win", "verdict"), [
    ([1.00, 1.01, 0.99], [0.80, 0.81, 0.79], "FASTER"),
    ([1.00, 1.01, 0.99], [1.10, 1.11, 1.09], "SLOWER"),
    ([1.00, 1.002, 0.999, 1.001, 1.0], [1.001, 1.0, 1.0, 1.002, 0.999], "SAME"),
    ([1.00, 1.30, 1.25], [1.02, 0.98, 1.01], "INCONCLUSIVE"),  # the rounds disagree: undecided
    ([1.00], [0.80], "INCONCLUSIVE"),  # one round: nothing measures the spread between rounds
])
def test_confirmation_verdict_is_compares_over_rounds(hand, win, verdict):
    c = tuning.confirm(BASE, _rounds(hand), _rounds(win), min_gain=0.01)
    assert c.verdict == verdict
    assert len(c.confirm_round_ratios) == len(hand)
    assert c.gain == pytest.approx(math.prod(h / w for h, w in zip(hand, win, strict=True)) ** (1 / len(hand)))
    assert c.confirm_hand_picked.n == 20 * len(hand) and c.confirm_hand_picked.median == pytest.approx(
        sorted(hand)[len(hand) // 2])  # the median of the round medians
    if len(hand) > 1:
        low, high = c.confirm_ratio_ci
        assert low <= 1 / c.gain <= high and 0 <= c.confirm_p <= 1


def test_an_aa_confirmation_whose_rounds_differ_is_not_faster():
    """The same code on both sides; each measurement tight inside (+-0.3%) but measured in its own
    conditions (load, clocks), two of hand-picked's three at +25-30%. Pooling the samples as if
    independent called the winner 1.24x FASTER (the 1.645x and 1.18x A/A gains written to tuned.json);
    over rounds three ratios that disagree this much decide nothing."""
    from solbench.analysis.compare import comparison_verdict
    from solbench.analysis.significance import bootstrap_ratio_ci, mann_whitney_p

    hand, win = _rounds([1.00, 1.30, 1.25]), _rounds([1.02, 0.98, 1.01])
    pooled_hand = [x for t in hand for x in t.samples]
    pooled_win = [x for t in win for x in t.samples]
    _, low, high = bootstrap_ratio_ci(pooled_hand, pooled_win)  # the rule before: samples pooled
    p = mann_whitney_p(pooled_hand, pooled_win, "two-sided")
    assert comparison_verdict(low, high, p < tuning.ALPHA, 0.01) == "FASTER"
    c = tuning.confirm(BASE, hand, win, min_gain=0.01, looks=tuning.TuneOptions().confirm_looks)
    assert c.verdict == "INCONCLUSIVE" and c.confirm_ratio_ci[0] < 1 < c.confirm_ratio_ci[1]
    assert tuning.faster_cases(dataclasses.replace(_result_with([]), cases=(c,))) == []


def test_a_consistent_gain_is_faster_even_where_rounds_differ():
    """20% faster in every round while the rounds themselves differ by up to 40% (shared by both
    measurements of a round): from PAIRED_MIN_ROUNDS rounds on the rounds are paired, the offsets cancel."""
    from solbench.analysis.sequential import PAIRED_MIN_ROUNDS

    offsets = [1.0, 1.4, 0.9, 1.2, 1.05][:PAIRED_MIN_ROUNDS]
    c = tuning.confirm(BASE, _rounds(offsets), _rounds([0.8 * o for o in offsets]), min_gain=0.01,
                       looks=tuning.TuneOptions().confirm_looks)
    assert c.verdict == "FASTER" and c.gain == pytest.approx(1.25)
    assert c.confirm_ratio_ci[1] < 1 / 1.01


def _measuring(hand, win, calls):
    def measure_round(i):
        calls.append(i)
        return _rounds([hand[i % len(hand)]])[0], _rounds([win[i % len(win)]])[0]
    return measure_round


@pytest.mark.parametrize(("start", "cap"), [(3, 8), (2, 5), (1, 3)])
def test_undecided_confirmation_adds_rounds_up_to_the_cap(start, cap):
    calls = []
    # the same code, each measurement in its own conditions: never decided
    measure = _measuring([1.00, 1.30, 0.90, 1.25, 1.02, 0.85, 1.20, 1.10], [1.02, 0.95, 1.22, 1.01, 1.15, 1.28, 0.92, 1.0],
                         calls)
    options = tuning.TuneOptions(confirm_rounds=start, confirm_max_rounds=cap)
    c = tuning.confirm_in_rounds(BASE, measure, options)
    assert calls == list(range(cap)) and c.verdict == "INCONCLUSIVE" and len(c.confirm_round_ratios) == cap
    assert c.confirm_hand_picked.n == 20 * cap


def test_a_decided_confirmation_stops_at_its_first_look():
    calls = []
    c = tuning.confirm_in_rounds(BASE, _measuring([1.00, 1.01, 0.99], [0.80, 0.81, 0.79], calls),
                                 tuning.TuneOptions(confirm_rounds=3, confirm_max_rounds=8))
    assert c.verdict == "FASTER" and calls == [0, 1, 2]


def test_a_confirmation_decided_after_added_rounds_stops_there():
    """Two rounds leave a 10% gain undecided; added rounds decide it, and none is measured after that."""
    hand, win = [1.00, 1.03, 0.98, 1.0, 1.01, 0.99, 1.02, 1.0], [0.90, 0.94, 0.89, 0.9, 0.91, 0.9, 0.92, 0.9]
    options = tuning.TuneOptions(confirm_rounds=2, confirm_max_rounds=8)
    looks = [tuning.confirm(BASE, _rounds(hand[:r]), _rounds(win[:r]), 0.01, options.confirm_looks).verdict
             for r in range(2, 9)]
    first = 2 + next(i for i, v in enumerate(looks) if v != "INCONCLUSIVE")
    assert 2 < first < 8 and looks[first - 2] == "FASTER"
    calls = []
    c = tuning.confirm_in_rounds(BASE, _measuring(hand, win, calls), options)
    assert c.verdict == "FASTER" and calls == list(range(first))


def test_a_failed_confirmation_round_stops_the_confirmation():
    calls = []

    def measure_round(i):
        calls.append(i)
        bad = tuning.Trial({}, "incorrect", "out: 3 of 512 elements outside atol")
        return _rounds([1.0])[0], bad if i == 1 else _rounds([0.8])[0]

    c = tuning.confirm_in_rounds(BASE, measure_round, tuning.TuneOptions(confirm_rounds=3, confirm_max_rounds=8))
    assert calls == [0, 1] and c.verdict == "INCONCLUSIVE" and c.confirm_winner.status == "incorrect"


def test_confirm_rounds_above_the_cap_are_refused():
    with pytest.raises(ConfigError, match="--confirm-max-rounds"):
        tuning.TuneOptions(confirm_rounds=9, confirm_max_rounds=8)
    with pytest.raises(ConfigError, match="--confirm-max-rounds"):
        tuning.TuneOptions(confirm_rounds=1, confirm_max_rounds=1)


def test_tuned_file_merges_over_existing_entries_of_the_same_device():
    old = tuning.parse_tuned(tuning.tuned_file(_result_with([(2.0, 1.0)])))
    new = _result_with([(3.0, 1.0), (3.0, 1.0)])
    new = dataclasses.replace(new, cases=new.cases[1:])  # case 0 not tuned again: its entry stays
    cfg = tuning.parse_tuned(tuning.tuned_file(new, old))
    assert cfg.params_for("w", "fused", "w[n=0,float32]") == {"chunk": 8}
    assert cfg.params_for("w", "fused", "w[n=1,float32]") == {"chunk": 16}
    assert cfg.params_for("w", "other", "w[n=1,float32]") is None
    other_device = tuning.TunedConfig("b200", "B200", old.entries)
    assert len(tuning.parse_tuned(tuning.tuned_file(new, other_device)).entries) == 1  # not merged


@pytest.mark.parametrize(("verdict", "trial", "stays"), [
    ("SLOWER", {}, False), ("SAME", {}, False),  # hand-picked is as fast: it stays
    ("", {"stop_reason": "beaten"}, False),  # clearly slower than hand-picked: no winner
    ("", {"status": "incorrect", "median": None}, False),  # the old configuration is wrong now
    ("INCONCLUSIVE", {}, True),  # nothing decided: the old entry stays
])
def test_a_case_tuned_again_without_a_faster_winner_drops_its_old_entry(verdict, trial, stays):
    """The old entry's configuration (chunk=8) was measured again and lost to hand-picked: `run --tuned`
    went on applying it, slower than what the workload declares, though README says hand-picked stays."""
    old = tuning.parse_tuned(tuning.tuned_file(_result_with([(2.0, 1.0)])))
    (case,) = _result_with([(1.0, 2.0)]).cases
    t = dataclasses.replace(case.trials[0], **trial)
    case = dataclasses.replace(case, trials=(t,), verdict=verdict, winner=case.winner if verdict else None)
    new = dataclasses.replace(_result_with([]), cases=(case,))
    assert (tuning.parse_tuned(tuning.tuned_file(new, old)).params_for("w", "fused", case.case_id) is not None) \
        is stays
    untried = dataclasses.replace(new, cases=(dataclasses.replace(case, trials=()),))  # --max-configs stopped first
    assert tuning.parse_tuned(tuning.tuned_file(untried, old)).params_for("w", "fused", case.case_id) == {"chunk": 8}


def test_apply_sets_params_and_check_device_refuses_another_gpu():
    cfg = tuning.parse_tuned(tuning.tuned_file(_result_with([(2.0, 1.0)])))
    impl = Implementation(fn="m:f", params={"vec": 8, "chunk": 1})
    assert cfg.apply("w", "fused", "w[n=0,float32]", impl).params == {"vec": 8, "chunk": 8}
    assert cfg.apply("w", "fused", "w[n=9,float32]", impl) is impl
    cfg.check_device("h200-sxm")
    with pytest.raises(ConfigError, match="tuned configurations are for h200-sxm"):
        cfg.check_device("cpu")


@pytest.mark.parametrize("text", ["{", "[]", '{"format": "other"}', '{"format": "solbench-tuned/1"}',
                                  '{"format": "solbench-tuned/1", "spec_id": "x", "entries": [{"workload": "w"}]}'])
def test_malformed_tuned_files_are_results_format_errors(text):
    with pytest.raises(ResultsFormatError):
        tuning.parse_tuned(text, "t.json")


# ------------------------------------------------------------------ the CLI


def test_tune_cli_writes_results_and_tuned_file(tmp_path):
    out, tuned = tmp_path / "tune.json", tmp_path / "tuned.json"
    result = CliRunner().invoke(main, ["tune", str(TUNE_YAML), "--device", "cpu", "-i", "chunked", "-o", str(out),
                                       "--tuned-file", str(tuned), "--budget", "0.02", "--min-samples", "3",
                                       "--max-samples", "10", "--confirm-rounds", "1", "--margin", "1e9", "-v"])
    assert result.exit_code == 0, result.output
    assert "chunked_add[n=64,float32]" in result.output and "chunk=16" in result.output
    data = json.loads(out.read_text())
    assert [t["params"] for t in data["cases"][0]["trials"]] == [{"chunk": 16}, {"chunk": 24}, {"chunk": 64}]
    assert tuning.load_tuned(tuned).spec_id == "cpu"


def test_tune_cli_shows_its_progress_a_line_a_case_in_a_log_and_none_with_v(tmp_path):
    """A long tune printed nothing until it was done unless -v; off a terminal (a CI log) it prints the
    run's plain progress, a line a case and implementation tuned, counted against the total."""
    args = ["tune", str(TUNE_YAML), "--device", "cpu", "-i", "chunked", "-o", str(tmp_path / "tune.json"),
            "--tuned-file", str(tmp_path / "tuned.json"), "--budget", "0.02", "--min-samples", "3",
            "--max-samples", "10", "--confirm-rounds", "1", "--margin", "1e9"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    tuned = [c["case_id"] for c in json.loads((tmp_path / "tune.json").read_text())["cases"]]
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("solbench: [")]
    assert tuned and len(lines) == len(tuned)
    assert all(ln.startswith(f"solbench: [{i}/{len(tuned)}] {cid} chunked")
               for i, (ln, cid) in enumerate(zip(lines, tuned, strict=True), 1))
    verbose = CliRunner().invoke(main, [*args, "-v"])
    assert verbose.exit_code == 0 and "solbench: [" not in verbose.stderr


def test_tune_cli_without_o_writes_a_new_file_each_time_under_results(tmp_path):
    """Two tunes in the same second keep both logs: the default name has a random part, as a run's."""
    args = ["tune", str(TUNE_YAML), "--device", "cpu", "-i", "chunked", "--results-dir", str(tmp_path / "r"),
            "--budget", "0.02", "--min-samples", "3", "--max-samples", "10", "--confirm-rounds", "1", "--margin", "1e9"]
    for _ in range(2):
        assert CliRunner().invoke(main, args).exit_code == 0
    logs = sorted((tmp_path / "r" / "cpu").glob("*_tune.json"))
    assert len(logs) == 2 and all(json.loads(p.read_text())["cases"] for p in logs)
    assert (tmp_path / "r" / "cpu" / "tuned.json").is_file()


@pytest.mark.parametrize(("old", "new", "message"), [
    ('constraints: ["chunk <= n"]', 'constraints: ["chunk <= rows"]', "unknown parameter 'rows'"),
    ('constraints: ["chunk <= n"]', 'constraints: ["chunk"]', "is not a comparison"),
    ("space: {chunk: [16, 24, 64, 128]}", "space: {n: [16]}", "tuned parameter 'n' is also a case parameter"),
    ('constraints: ["chunk <= n"]', 'constraints: ["chunk <= n // (chunk - 24)"]',
     "division by zero in 'n // (chunk - 24)' (at n=64,chunk=24)"),
    ("space: {chunk: [16, 24, 64, 128]}", "space: {chunk: [16, true]}", "chunk.1: a boolean is not a number"),
    ("space: {chunk: [16, 24, 64, 128]}", "space: {chunk: [16, false]}", "chunk.1: a boolean is not a number"),
    ("space: {chunk: [16, 24, 64, 128]}", "space: {chunk: [16, .nan]}", "chunk.1: nan is not a finite number"),
    ("space: {chunk: [16, 24, 64, 128]}", "space: {chunk: [16, .inf]}", "chunk.1: inf is not a finite number"),
])
def test_bad_tune_spaces_are_one_line_errors_naming_the_line(tmp_path, old, new, message):
    (tmp_path / "tunable.py").write_text((DATA / "tunable.py").read_text())
    path = tmp_path / "t.yaml"
    path.write_text(TUNE_YAML.read_text().replace(old, new))
    result = CliRunner().invoke(main, ["tune", str(path), "--device", "cpu"])
    assert result.exit_code == 2
    line = result.output.strip()
    assert "\n" not in line and message in line and f"{path}:" in line and ".tune." in line


def test_a_multi_rank_workload_is_tuned_in_rank_groups(tmp_path):
    """Each trial of a world_size 2 workload runs in a rank group, one process a rank, as run measures it
    (tuned in one process as one rank alone, every trial was an error blaming the workload's reference):
    the right configurations are ok (an all-reduce in one process alone raises), the wrong one incorrect."""
    (tmp_path / "ranks.py").write_text((DATA / "ranks" / "ranks.py").read_text())
    text = (DATA / "ranks" / "ranks.yaml").read_text()
    path = tmp_path / "r.yaml"
    path.write_text(text.replace("      honest: ranks.py:all_reduce\n", "      chunked:\n        fn: ranks.py:chunked_all_reduce\n"
                                 "        tune: {space: {chunk: [2, 3, 4]}}\n", 1))
    result = tuning.tune([path], tuning.TuneOptions(workloads=("rank_faults",), impls=("chunked",), **FAST),
                         device="cpu")
    (case,) = result.cases
    assert case.hand_picked.status == "ok", case.hand_picked.message
    status = {t.params["chunk"]: t for t in case.trials}
    assert status[2].status == "ok" and status[4].status == "ok" and status[2].median and status[2].n >= 1
    assert status[3].status == "incorrect" and status[3].median is None
    assert case.winner in ({"chunk": 2}, {"chunk": 4})


def test_tune_without_a_tune_space_is_an_error():
    result = CliRunner().invoke(main, ["tune", str(DATA / "double.yaml"), "--device", "cpu"])
    assert result.exit_code == 2 and "no implementation with a tune: space" in result.output


@pytest.mark.parametrize(("impls", "says"), [
    (["chunked", "chunkd"], "-i: no implementation named chunkd (did you mean 'chunked'?) in the selected workloads"),
    (["chunked", "baseline"], "-i baseline: no tune: space in the selected workloads (tunable: chunked, no_tail)"),
    (["-w", "chunked_add", "-w", "plain"], "-w plain: no implementation with a tune: space"),
])
def test_tune_refuses_an_implementation_it_would_not_tune_before_measuring(impls, says, tmp_path, monkeypatch):
    """A typo or an implementation (a workload) without a tune: space beside one that has it was silently
    left out: the table then read as if every implementation (workload) named had been tuned."""
    monkeypatch.setattr(tuning, "_tune_case", lambda *a: pytest.fail("measured before refusing"))
    (tmp_path / "tunable.py").write_text((DATA / "tunable.py").read_text())
    path = tmp_path / "t.yaml"  # beside chunked_add, a workload of the same ops with no tune: space
    plain = TUNE_YAML.read_text().split("workloads:\n", 1)[1].split("    implementations:")[0]
    path.write_text(TUNE_YAML.read_text() + plain.replace("chunked_add\n", "plain\n", 1)
                    + "    implementations: {baseline: tunable.py:chunked_add}\n")
    args = impls if impls[0] == "-w" else [a for name in impls for a in ("-i", name)]
    result = CliRunner().invoke(main, ["tune", str(path), "--device", "cpu", "--results-dir", str(tmp_path / "r"),
                                       *args])
    assert result.exit_code == 2 and says in result.output and "\n" not in result.output.strip(), result.output


def test_the_cuda_tuning_demo_validates_and_is_skipped_on_the_cpu():
    result = tuning.tune([DATA / "tune_layernorm.yaml"], tuning.TuneOptions(**FAST), device="cpu")
    (case,) = result.cases
    assert case.hand_picked.status == "skipped" and case.winner is None
    assert case.filtered + len(case.trials) == 28 and {t.status for t in case.trials} == {"skipped"}


def test_a_tune_that_measured_nothing_says_so_and_offers_no_file_to_use(tmp_path):
    """On the CPU the CUDA demo is skipped: the command says why, not "use with: run --tuned"."""
    result = CliRunner().invoke(main, ["tune", str(DATA / "tune_layernorm.yaml"), "--device", "cpu",
                                       "--results-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output  # skipped is not a failure, as in `run`
    assert "nothing measured: every implementation was skipped (" in result.output
    assert "none new: no winner was FASTER" in result.output and "use with" not in result.output


def _tuned_chunked(tmp_path, params, options=None):
    """A tuned file (CPU) whose chunked_add n=64 entry sets ``params``, confirmed FASTER."""
    trial = tuning.Trial(params, "ok", median=1.0)
    case = tuning.CaseTuning("chunked_add", "chunked", "chunked_add[n=64,float32]", "float32", {"n": 64},
                             tuning.Trial({}, "ok", median=2.0), (trial,), 0, 0, trial.params,
                             tuning.Trial({}, "ok", median=2.0), trial, verdict="FASTER")
    result = tuning.TuneResult("2026-01-01T00:00:00+00:00", make_env(spec_id="cpu"), ("tune_cpu.yaml",),
                               {"launch": "stream"} if options is None else options, (case,))
    tuned = tmp_path / "tuned.json"
    tuned.write_text(tuning.tuned_file(result))
    return tuned


def test_run_with_a_tuned_file_passes_the_tuned_parameters(tmp_path):
    from click.testing import CliRunner

    from solbench.cli import main
    from solbench.results import store

    tuned = _tuned_chunked(tmp_path, {"chunk": 24})
    out = tmp_path / "run.json"
    r = CliRunner().invoke(main, ["run", "tests/data/tune_cpu.yaml", "-i", "chunked", "--tuned", str(tuned),
                                  "-o", str(out), "--budget", "0.02", "--min-samples", "3", "--device", "cpu"])
    assert r.exit_code == 0, r.output
    run = store.load(out)
    chunked = next(i for c in run.cases for i in c.impls if i.name == "chunked")
    assert chunked.status == "ok" and chunked.protocol["params"] == "chunk=24"


@pytest.mark.parametrize(("options", "note"), [
    ({"launch": "stream"}, None),  # tuned as this run launches: nothing to say
    ({"launch": "graph"}, "tuned: 1 configuration in {path} was tuned with --launch graph; this run launches "
                          "stream, under which another configuration may win"),
    ({}, None),  # a file from before tune recorded its launch: tuned on the stream, as this CPU run launches
])
def test_run_with_a_tuned_file_says_where_it_was_tuned_under_another_launch(options, note, tmp_path):
    """A tuned file records the launch each winner was measured under; a run that applies one under
    another launch (tuned with --launch stream, run as a graph's replay) says so in its notes."""
    from click.testing import CliRunner

    from solbench.cli import main
    from solbench.results import store

    tuned = _tuned_chunked(tmp_path, {"chunk": 24}, options)
    entry = json.loads(tuned.read_text())["entries"][0]
    assert entry.get("launch") == options.get("launch")
    out = tmp_path / "run.json"
    r = CliRunner().invoke(main, ["run", "tests/data/tune_cpu.yaml", "-i", "chunked", "--tuned", str(tuned),
                                  "-o", str(out), "--budget", "0.02", "--min-samples", "3", "--device", "cpu"])
    assert r.exit_code == 0, r.output
    notes = [n for n in store.load(out).notes if n.startswith("tuned:")]
    assert notes == ([] if note is None else [note.format(path=tuned)])


@pytest.mark.parametrize(("params", "says"), [
    ({"chunk": 48}, "(chunk=48 is not one of [16, 24, 64, 128])"),  # a value the space no longer has
    ({"rows": 24}, "(it sets rows, the tune: space chunk)"),  # a parameter renamed since
    # in the space, but its constraint excludes it on this case: it was applied silently
    ({"chunk": 128}, "(chunk=128 does not meet its constraint 'chunk <= n' on this case)"),
])
def test_run_refuses_a_tuned_configuration_its_tune_space_no_longer_holds(params, says, tmp_path):
    """The workload changed since tuning: run --tuned applied the old configuration silently (a value
    the author took out of the space, perhaps for being wrong on this GPU) and scored it as tuned."""
    tuned = _tuned_chunked(tmp_path, params)
    r = CliRunner().invoke(main, ["run", str(TUNE_YAML), "--tuned", str(tuned), "--results-dir", str(tmp_path / "r"),
                                  "--budget", "0.02", "--min-samples", "3", "--device", "cpu"])
    assert r.exit_code == 2, r.output
    assert r.output.strip() == (f"error: {tuned}: the configuration tuned for chunked on chunked_add[n=64,float32] is "
                                f"not in its tune: space now {says}: the workload changed since; run `solbench tune` "
                                "again")
    assert not [f for f in (tmp_path / "r").rglob("*") if f.is_file()]  # refused before anything was saved


def test_tuning_again_drops_an_entry_its_tune_space_no_longer_holds(tmp_path):
    """run --tuned refuses a stored configuration the tune: space no longer holds and says to tune again;
    tuning again kept that entry unless the case's new winner was FASTER (it was not measured: nothing new
    about it), so where hand-picked stayed (no_tail: its winner is the declared chunk=16, SAME) the same
    refusal came back after every tune. A configuration out of the space is now dropped (hand-picked stays)."""
    trial = tuning.Trial({"chunk": 48}, "ok", median=1.0)
    old = tuning.CaseTuning("chunked_add", "no_tail", "chunked_add[n=64,float32]", "float32", {"n": 64},
                            tuning.Trial({}, "ok", median=2.0), (trial,), 0, 0, trial.params,
                            tuning.Trial({}, "ok", median=2.0), trial, verdict="FASTER")
    tuned = tmp_path / "tuned.json"
    tuned.write_text(tuning.tuned_file(tuning.TuneResult("2026-01-01T00:00:00+00:00", make_env(spec_id="cpu"),
                                                         ("tune_cpu.yaml",), {}, (old,))))
    fast = ["--budget", "0.02", "--min-samples", "3", "--max-samples", "10", "--device", "cpu"]
    result = CliRunner().invoke(main, ["tune", str(TUNE_YAML), "-i", "no_tail", "--tuned-file", str(tuned), "-o",
                                       str(tmp_path / "log.json"), "--confirm-rounds", "1", "--margin", "1e9", *fast])
    assert result.exit_code == 4, result.output  # its chunk=24 is incorrect (the tiling bug): the command fails
    assert "no_tail[chunk=24]: INCORRECT" in result.output
    assert tuning.load_tuned(tuned).entries == {}  # yet the tuned file is written, the stale entry dropped
    ran = CliRunner().invoke(main, ["run", str(TUNE_YAML), "-i", "no_tail", "--tuned", str(tuned), "--results-dir",
                                    str(tmp_path / "r"), *fast])
    assert ran.exit_code == 0, ran.output  # no longer refused: "run `solbench tune` again"


def test_tuning_again_drops_an_entry_its_constraints_now_exclude(cpu_result):
    """A stored configuration still in the space but excluded by a constraint (added or tightened since) is
    never measured again (the grid holds only valid configurations), so it was "nothing new about it" and
    stayed in the tuned file for good, and run --tuned applied it. Tune records each case's constraints and
    the names they see, and drops such an entry (run --tuned refuses it, as one out of the space)."""
    chunked = next(c for c in cpu_result.cases if c.impl == "chunked")
    assert chunked.constraints == ["chunk <= n"] and chunked.scope == {"n": 64, "dtype": "float32"}
    old = dataclasses.replace(chunked, trials=(tuning.Trial({"chunk": 128}, "ok", median=1e-6),), winner={"chunk": 128},
                              confirm_hand_picked=tuning.Trial({}, "ok", median=1.0),
                              confirm_winner=tuning.Trial({"chunk": 128}, "ok", median=1e-6), verdict="FASTER",
                              confirm_round_ratios=())
    stored = tuning.parse_tuned(tuning.tuned_file(dataclasses.replace(cpu_result, cases=(old,))))
    assert stored.params_for("chunked_add", "chunked", chunked.case_id) == {"chunk": 128}
    again = dataclasses.replace(chunked, verdict="INCONCLUSIVE")  # nothing decided: an entry it can keep stays
    kept = tuning.parse_tuned(tuning.tuned_file(dataclasses.replace(cpu_result, cases=(again,)), stored))
    assert kept.params_for("chunked_add", "chunked", chunked.case_id) is None


def _entry(impl, case_id, params, workload="chunked_add"):
    return {"workload": workload, "impl": impl, "case_id": case_id, "params": params, "launch": "stream"}


def test_run_notes_tuned_entries_for_what_the_workload_no_longer_declares(tmp_path):
    """An entry for an implementation renamed or removed since, or for a case the workload's parameters no
    longer make, applies to nothing: run --tuned passed over it without a word, so the file read as if it were
    in effect. The run notes each (not those of implementations or cases it only left out: -i, --case)."""
    tuned = tmp_path / "tuned.json"
    tuned.write_text(json.dumps({"format": "solbench-tuned/1", "spec_id": "cpu", "entries": [
        _entry("chunked", "chunked_add[n=64,float32]", {"chunk": 24}),  # applied
        _entry("chunked", "chunked_add[n=32,float32]", {"chunk": 16}),  # n: [64] now
        _entry("renamed", "chunked_add[n=64,float32]", {"chunk": 16}),  # no implementation renamed
        _entry("no_tail", "chunked_add[n=64,float32]", {"chunk": 16}),  # declared, left out by -i
        _entry("x", "other[n=1]", {"chunk": 16}, workload="other")]}))  # a workload of another file
    out = tmp_path / "run.json"
    r = CliRunner().invoke(main, ["run", str(TUNE_YAML), "-i", "chunked", "--tuned", str(tuned), "-o", str(out),
                                  "--budget", "0.02", "--min-samples", "3", "--device", "cpu"])
    assert r.exit_code == 0, r.output
    from solbench.results import store

    notes = [n for n in store.load(out).notes if n.startswith("tuned:")]
    assert notes == [f"tuned: 2 entries in {tuned} name what their workload no longer declares and apply to nothing: "
                     "chunked_add chunked on chunked_add[n=32,float32] (no such case); chunked_add renamed on "
                     "chunked_add[n=64,float32] (no such implementation with a tune: space); tuning the workload "
                     "again drops them"]


def test_tuning_again_drops_entries_for_what_the_workload_no_longer_declares(cpu_result):
    """Tuning again merged over every older entry it did not tune, so one for a removed implementation or
    case stayed in the tuned file for good. Tune records what each workload it planned declares now (its
    implementations with a tune: space, and their cases), and drops the older entries of those workloads
    that name anything else; other workloads' entries stay."""
    assert cpu_result.declared == {"chunked_add": {"impls": ["chunked", "no_tail"],
                                                   "cases": ["chunked_add[n=64,float32]"]}}
    old = tuning.TunedConfig("cpu", "", {(e["workload"], e["impl"], e["case_id"]): e for e in [
        _entry("chunked", "chunked_add[n=32,float32]", {"chunk": 16}),
        _entry("renamed", "chunked_add[n=64,float32]", {"chunk": 16}),
        _entry("x", "other[n=1]", {"chunk": 16}, workload="other")]})
    inconclusive = tuple(dataclasses.replace(c, verdict="INCONCLUSIVE") for c in cpu_result.cases)
    merged = tuning.parse_tuned(tuning.tuned_file(dataclasses.replace(cpu_result, cases=inconclusive), old))
    assert set(merged.entries) == {("other", "x", "other[n=1]")}


def _write_once(x, out, calls=[]):  # noqa: B006 (a call counter kept across calls on purpose)
    calls.append(1)
    if len(calls) == 1:
        out.copy_(x * 2)


def test_a_destination_passing_launch_poisons_its_outputs_before_a_timed_call():
    """A call that writes its outputs once and then skips its work must not pass on the stale result:
    the timer calls ``poison`` before each timed call on the stream, as it does for a graph's replay."""
    spec = WorkloadSpec.model_validate(json.loads(json.dumps({
        "name": "w", "parameters": {"n": [4]}, "dtypes": ["float32"],
        "inputs": {"x": {"shape": ["n"]}}, "outputs": {"out": {"shape": ["n"]}},
        "reference": "tests.unit.test_tune:_spy_fn",
        "implementations": {"baseline": {"fn": "tests.unit.test_tune:_write_once", "destination": True}}})))
    case = build_case(spec, {"n": 4}, "float32")
    (launch,) = build_launches(spec.implementations["baseline"], case, [{"x": torch.ones(4)}], None)
    (first,) = launch()
    assert torch.equal(first, torch.full((4,), 2.0))
    launch.poison()
    (again,) = launch()  # skipped its work: the poison shows
    assert torch.isnan(again).all()


@pytest.mark.parametrize(("args", "says"), [
    (["--budget", "nan"], "--budget must be a positive finite number, got nan"),
    (["--target", "nan"], "--target must be a positive finite number, got nan"),
    (["--min-gain", "nan"], "--min-gain must be a positive finite number, got nan"),
    (["--min-gain", "inf"], "--min-gain must be a positive finite number, got inf"),  # every winner SAME
    (["--margin", "nan"], "--margin must be a finite number at least 0, got nan"),  # never abandons
    (["--timeout", "nan"], "--timeout must be a positive finite number, got nan"),  # no trial would ever end
    (["--min-samples", "20", "--max-samples", "5"], "--min-samples 20 is larger than --max-samples 5"),
])
def test_tune_refuses_knobs_it_cannot_honour_before_measuring(args, says, tmp_path):
    result = CliRunner().invoke(main, ["tune", str(TUNE_YAML), "--device", "cpu", "-i", "chunked",
                                       "--results-dir", str(tmp_path / "r"), *args])
    assert result.exit_code == 2 and result.output.strip() == f"error: {says}", result.output
    assert not (tmp_path / "r").exists()  # nothing measured, nothing written


def test_tune_refuses_one_file_for_the_log_and_the_tuned_configurations_before_measuring(tmp_path, monkeypatch):
    def measured(*args, **kwargs):
        raise AssertionError("measured before refusing")

    monkeypatch.setattr(tuning, "tune", measured)
    same = tmp_path / "t.json"
    result = CliRunner().invoke(main, ["tune", str(TUNE_YAML), "--device", "cpu", "-i", "chunked", "-o", str(same),
                                       "--tuned-file", str(same)])
    assert result.exit_code == 2 and "the tuned-configuration file" in result.output, result.output
    assert not same.exists()


def test_a_tuned_file_refused_after_tuning_keeps_the_tuning_log(tmp_path, monkeypatch):
    """The default tuned.json is read only once the device is known, after measuring: one of another
    device (or malformed) is refused then, exit 2, and what was measured is still written."""
    trial = tuning.Trial({"chunk": 24}, "ok", median=1e-5)
    case = tuning.CaseTuning("chunked_add", "chunked", "chunked_add[n=64,float32]", "float32", {"n": 64},
                             tuning.Trial({}, "ok", median=2e-5), (trial,), 0, 0, trial.params)
    monkeypatch.setattr(tuning, "tune", lambda *a, **k: tuning.TuneResult(
        "2026-01-01T00:00:00+00:00", make_env(spec_id="cpu"), (str(TUNE_YAML),), {}, (case,)))
    spec_dir = tmp_path / "r" / "cpu"
    spec_dir.mkdir(parents=True)
    (spec_dir / "tuned.json").write_text(tuning.tuned_file(_result_with([(2.0, 1.0)])))  # tuned on h200-sxm
    result = CliRunner().invoke(main, ["tune", str(TUNE_YAML), "--device", "cpu", "--results-dir", str(tmp_path / "r")])
    assert result.exit_code == 2 and "tuned on h200-sxm, this device is cpu" in result.output, result.output
    (log,) = spec_dir.glob("*_tune.json")
    assert json.loads(log.read_text())["cases"][0]["trials"][0]["params"] == {"chunk": 24}
    assert tuning.load_tuned(spec_dir / "tuned.json").spec_id == "h200-sxm"  # not replaced


def test_tune_merges_into_the_tuned_file_as_it_is_when_tuning_ends(tmp_path, monkeypatch):
    """--tuned-file was read before measuring and that copy merged: the entries another tune wrote into
    the file meanwhile (another workload, tuned beside it) were lost."""
    tuned = tmp_path / "tuned.json"
    mine = _result_with([(2.0, 1.0)])
    other = dataclasses.replace(mine.cases[0], workload="other")

    def tune_while_another_writes(*args, **kwargs):
        tuned.write_text(tuning.tuned_file(dataclasses.replace(mine, cases=(other,))))
        return mine

    monkeypatch.setattr(tuning, "tune", tune_while_another_writes)
    result = CliRunner().invoke(main, ["tune", str(TUNE_YAML), "--device", "cpu", "--tuned-file", str(tuned),
                                       "-o", str(tmp_path / "log.json")])
    assert result.exit_code == 0, result.output
    assert {k[0] for k in tuning.load_tuned(tuned).entries} == {"w", "other"}


@pytest.mark.parametrize("side", ["confirm_hand_picked", "confirm_winner"])
def test_an_implementation_that_fails_when_measured_again_exits_4(side, tmp_path, monkeypatch):
    """Hand-picked or the winner passed the check once, then failed it in the confirmation (a race, a
    stale buffer): the verdict was INCONCLUSIVE and the exit 0, though the implementation is wrong."""
    (case,) = _result_with([(2.0, 1.0)]).cases
    failed = tuning.Trial(getattr(case, side).params, "incorrect", "out: 3 of 512 elements outside atol")
    case = dataclasses.replace(case, verdict="INCONCLUSIVE", **{side: failed})
    monkeypatch.setattr(tuning, "tune", lambda *a, **k: dataclasses.replace(_result_with([]), cases=(case,)))
    result = CliRunner().invoke(main, ["tune", str(TUNE_YAML), "--device", "cpu", "--results-dir", str(tmp_path)])
    assert result.exit_code == 4, result.output
    assert f"failed: {case.case_id} fused" in result.output and "INCORRECT" in result.output  # in the table


def _tampering_add(x, y, chunk=8):
    if chunk == 24:  # a hostile configuration: it rebinds a function the harness relies on
        time.sleep = functools.partial(time.sleep)
    return x + y


def test_a_trial_that_tampers_with_its_process_is_that_configurations_reward_hack(tmp_path, monkeypatch):
    """A configuration that rebinds what the harness relies on is reward_hack, and its worker is replaced:
    the trials after it (honest ones, hand-picked measured again) run in a fresh process, not blamed for it."""
    monkeypatch.setattr(time, "sleep", time.sleep)  # given back at teardown, should the trial run here
    (tmp_path / "tunable.py").write_text((DATA / "tunable.py").read_text())
    path = tmp_path / "t.yaml"
    path.write_text(TUNE_YAML.read_text().replace("fn: tunable.py:chunked_add_no_tail",
                                                  "fn: tests.unit.test_tune:_tampering_add")
                    .replace("space: {chunk: [16, 24]}", "space: {chunk: [24, 16]}"))
    args = ["--budget", "0.02", "--min-samples", "3", "--max-samples", "10", "--confirm-rounds", "1", "--margin", "1e9"]
    result = CliRunner().invoke(main, ["tune", str(path), "--device", "cpu", "-i", "no_tail", "-o",
                                       str(tmp_path / "log.json"), "--results-dir", str(tmp_path / "r"), *args])
    # tuning goes on and keeps what it found, but a configuration that cheated is the command's failure:
    # exit 4, as `run` exits for a reward_hack, naming it on stderr
    assert result.exit_code == 4, result.output
    assert "tampered: " in result.stderr and "no_tail[chunk=24]" in result.stderr, result.stderr
    (case,) = json.loads((tmp_path / "log.json").read_text())["cases"]
    tampered, honest = case["trials"]
    assert tampered["status"] == "reward_hack" and "time.sleep" in tampered["message"]
    assert honest["status"] == "ok" and case["hand_picked"]["status"] == "ok" and case["winner"] == {"chunk": 16}
    assert (tmp_path / "r" / "cpu" / "tuned.json").is_file()


def test_a_trial_that_crashes_or_hangs_is_that_configurations_failure_and_tuning_goes_on(tmp_path):
    """Tuning measured every configuration in its own process: one that left it (os._exit), segfaulted
    or hung killed or stalled the whole tune, with the exit code of the crash, and nothing tuned before it
    (another case, the configurations already measured) was written. Each trial now runs in a worker, as
    run's implementations do: a crash or a hang is that configuration's status, and the others are tuned.
    In a process of its own: before the fix, the crash would take the test's process down with it."""
    (tmp_path / "tunable.py").write_text((DATA / "tunable.py").read_text())
    path = tmp_path / "t.yaml"
    path.write_text(TUNE_YAML.read_text().replace("fn: tunable.py:chunked_add\n", "fn: tunable.py:chunked_add_faulty\n")
                    .replace("space: {chunk: [16, 24, 64, 128]}", "space: {chunk: [16, 24, 32, 48, 64]}"))
    log, tuned = tmp_path / "log.json", tmp_path / "tuned.json"
    # the timeout starts once the worker is up: ample for an honest configuration, and it bounds the hang
    result = subprocess.run([sys.executable, "-m", "solbench", "tune", str(path), "--device", "cpu", "-o", str(log),
                             "--tuned-file", str(tuned), "--timeout", "5", "--budget", "0.02", "--min-samples", "3",
                             "--max-samples", "10", "--confirm-rounds", "1", "--margin", "1e9"],
                            capture_output=True, text=True, timeout=600)
    # tuning went on past every failed configuration, but they fail the command: an implementation that crashes,
    # hangs or is wrong under some parameters is not passed (exit 4, as run's failed implementation)
    assert result.returncode == 4, result.stderr[-3000:]
    assert "configurations that failed: " in result.stderr and "out of the tune: space with a constraint" in result.stderr
    cases = {c["impl"]: c for c in json.loads(log.read_text())["cases"]}
    assert list(cases) == ["chunked", "no_tail"]  # the case after the faulty one was tuned too
    trials = {t["params"]["chunk"]: t for t in cases["chunked"]["trials"]}
    assert {chunk: t["status"] for chunk, t in trials.items()} == {16: "ok", 24: "crashed", 32: "crashed",
                                                                   48: "timeout", 64: "ok"}
    assert "exited with code 3" in trials[24]["message"] and "SIGSEGV" in trials[32]["message"]
    assert "no result within 5 s" in trials[48]["message"]
    assert cases["chunked"]["hand_picked"]["status"] == "ok" and cases["chunked"]["winner"]["chunk"] in (16, 64)
    assert tuning.load_tuned(tuned).spec_id == "cpu"  # written, from what was measured
    assert "1 timeout" in result.stdout and "2 crashed" in result.stdout, result.stdout  # in the table


CRASH_OUTPUT = "launching chunk=24\nCUDA error: an illegal memory access was encountered"


class _QueueWorker:
    """A stand-in for a CUDA worker (pool.ProcessWorker): it records the work queues it was started with
    and answers each task as CUPTI would for a one-stream implementation; configuration chunk=24 crashes."""

    overstayed = False
    started: list = []  # noqa: RUF012 (the test reads what every worker was started with)

    def __init__(self, device, device_index, tree=None, threads=0, queues=None):
        self.queues = queues

    def wait_ready(self):
        pass

    def run(self, task, timeout_s, progress=None):
        self.started.append((task.impl, self.queues))
        if task.impl.endswith("[chunk=24]"):
            return tuning.ImplResult(task.impl, "crashed", "the worker process was killed by SIGSEGV",
                                     log_tail=CRASH_OUTPUT), True
        timing = Timing((1e-3,) * 12, 1e-3, 1e-3, 1e-3, "converged")
        return tuning.ImplResult(task.impl, "ok", timing=timing,
                                 protocol={"stream_check": "cupti", "streams": 1}), False

    def request_close(self):
        pass

    def close(self):
        pass


def test_every_trial_on_cuda_runs_with_the_work_queues_hand_picked_was_measured_with(monkeypatch):
    """The pool gives a replacement worker one CUDA work queue once CUPTI saw its (workload, implementation)
    on one stream (measure.queues), and all of a tune's configurations share that key: after one
    configuration crashed, every later configuration (and the confirmation) ran with one queue, where
    hand-picked and the configurations before had the driver's eight, so one that runs on several streams
    had them serialized and was measured slower than it is, against a best measured otherwise. Each
    configuration is another implementation: every worker of a tune keeps the driver's default."""
    from solbench.device import detect as detect_module
    from solbench.measure import pool, queues

    monkeypatch.delenv(queues.ENV, raising=False)
    monkeypatch.delenv(queues.SWITCH_ENV, raising=False)
    info = dataclasses.replace(detect_module.detect("cpu"), kind="cuda", index=0)
    monkeypatch.setattr(detect_module, "detect", lambda device="auto": info)
    monkeypatch.setattr(pool, "ProcessWorker", _QueueWorker)
    monkeypatch.setattr(pool, "sweep", lambda last=False: 0)
    _QueueWorker.started = []
    result = tuning.tune([TUNE_YAML], tuning.TuneOptions(impls=("chunked",), **FAST), device="cuda")
    assert [t.status for t in result.cases[0].trials] == ["ok", "crashed", "ok"]  # chunk 16, 24, 64
    assert _QueueWorker.started[0] == ("chunked", None)  # hand-picked: the driver's default
    assert {q for _, q in _QueueWorker.started} == {None}, _QueueWorker.started


def test_a_failed_configurations_worker_output_is_kept_in_the_log_and_shown(tmp_path, monkeypatch):
    """A configuration that crashed or timed out left only its status and the harness's one line ("the
    worker process was killed by SIGSEGV"): the worker's own last output (the CUDA error, the traceback),
    which the pool reads for every failed result, was dropped, so the log and the command said that it
    failed and never why. Each trial keeps it (bounded: pool.LOG_TAIL_LINES, LOG_TAIL_CHARS), the log
    holds it, and the command names every failed configuration with its status and message."""
    from solbench.device import detect as detect_module
    from solbench.measure import pool

    info = dataclasses.replace(detect_module.detect("cpu"), kind="cuda", index=0)
    monkeypatch.setattr(detect_module, "detect", lambda device="auto": info)
    monkeypatch.setattr(pool, "ProcessWorker", _QueueWorker)
    monkeypatch.setattr(pool, "sweep", lambda last=False: 0)
    result = tuning.tune([TUNE_YAML], tuning.TuneOptions(impls=("chunked",), **FAST), device="cuda")
    crashed = result.cases[0].trials[1]
    assert crashed.status == "crashed" and crashed.log_tail == CRASH_OUTPUT
    logged = json.loads(json.dumps(tuning.result_dict(result)))["cases"][0]["trials"][1]
    assert logged["log_tail"] == CRASH_OUTPUT
    monkeypatch.setattr(tuning, "tune", lambda *a, **k: result)
    log = tmp_path / "log.json"
    ran = CliRunner().invoke(main, ["tune", str(TUNE_YAML), "-o", str(log), "--results-dir", str(tmp_path)])
    assert ran.exit_code == 4, ran.output  # a configuration's crash is the implementation's failure, tuned or not
    assert ("configurations that failed: chunked_add[n=64,float32] chunked[chunk=24]: CRASHED: the worker process "
            f"was killed by SIGSEGV (every failure's message and worker output: {log})") in ran.stderr, ran.stderr


def test_the_failed_line_says_what_failed_and_why(tmp_path, monkeypatch):
    """`failed:` named the case and implementation, then "(as declared, in every configuration, or the
    winner measured again)": which of the three, and why, was nowhere on the screen."""
    (case,) = _result_with([(2.0, 1.0)]).cases
    hand = tuning.Trial({}, "crashed", "the worker process exited with code 3\n(os._exit?)", log_tail="boom")
    case = dataclasses.replace(case, hand_picked=hand, winner=None, confirm_hand_picked=None, confirm_winner=None,
                               verdict="")
    monkeypatch.setattr(tuning, "tune", lambda *a, **k: dataclasses.replace(_result_with([]), cases=(case,)))
    log = tmp_path / "log.json"
    ran = CliRunner().invoke(main, ["tune", str(TUNE_YAML), "-o", str(log), "--results-dir", str(tmp_path)])
    assert ran.exit_code == 4, ran.output
    assert (f"failed: {case.case_id} fused (as declared: CRASHED: the worker process exited with code 3) (every "
            f"failure's message and worker output: {log})") in ran.stderr, ran.stderr


class _LaunchWorker(_QueueWorker):
    """A stand-in CUDA worker that records how each task asked for its calls to be launched."""

    launches: list = []  # noqa: RUF012

    def run(self, task, timeout_s, progress=None):
        self.launches.append((task.impl, task.settings.launch))
        return super().run(task, timeout_s, progress)


@pytest.mark.parametrize(("launch", "traced", "expected"), [("auto", True, "graph"), ("auto", False, "stream"),
                                                            ("stream", True, "stream"), ("graph", True, "graph")])
def test_trials_on_cuda_are_launched_as_run_launches_them(launch, traced, expected, monkeypatch):
    """`run` times each call as a CUDA graph's replay by default on a GPU (--launch auto); tune timed every
    configuration launched on the stream, so a winner was picked under other launch conditions than the
    run that applies it. Tune resolves --launch as run does, and its log records the launch it used."""
    from solbench.device import cupti
    from solbench.device import detect as detect_module
    from solbench.measure import pool

    info = dataclasses.replace(detect_module.detect("cpu"), kind="cuda", index=0)
    monkeypatch.setattr(detect_module, "detect", lambda device="auto": info)
    monkeypatch.setattr(cupti, "wanted", lambda: traced)
    monkeypatch.setattr(pool, "ProcessWorker", _LaunchWorker)
    monkeypatch.setattr(pool, "sweep", lambda last=False: 0)
    _LaunchWorker.launches = []
    result = tuning.tune([TUNE_YAML], tuning.TuneOptions(impls=("chunked",), launch=launch, **FAST), device="cuda")
    assert {how for _, how in _LaunchWorker.launches} == {expected}, _LaunchWorker.launches
    assert result.options["launch"] == expected


FALLBACK = "the call synchronizes with the host while captured"


class _FallbackWorker(_QueueWorker):
    """A stand-in CUDA worker under --launch graph: every configuration is replayed from a graph but chunk=64,
    which cannot be captured and is launched on the stream instead, and is the fastest."""

    def run(self, task, timeout_s, progress=None):
        fast = task.impl.endswith("[chunk=64]")
        samples = tuple((0.5e-3 if fast else 1e-3) * (1 + 0.001 * (i % 5)) for i in range(12))
        timing = Timing(samples, samples[5], samples[0], samples[-1], "converged")
        protocol = {"launch": "stream", "graph_fallback": FALLBACK} if fast else {"launch": "graph"}
        return tuning.ImplResult(task.impl, "ok", timing=timing, protocol=protocol), False


def test_a_winner_timed_under_another_launch_than_hand_picked_is_said_to_be(tmp_path, monkeypatch):
    """Under --launch graph a configuration whose call cannot be captured is timed launched on the stream
    (ImplResult.protocol launch "stream", graph_fallback why), and tune compared it with hand-picked, timed
    as a graph's replay, as if like for like: a replay leaves out the launch overhead a call on the stream
    pays, so the gain is not the configuration's alone. Nothing recorded how any trial was launched. Each
    trial records its launch (and why it fell back), and a case whose winner was timed under another launch
    than hand-picked says so, in the log and under the table."""
    from solbench.device import cupti
    from solbench.device import detect as detect_module
    from solbench.measure import pool

    info = dataclasses.replace(detect_module.detect("cpu"), kind="cuda", index=0)
    monkeypatch.setattr(detect_module, "detect", lambda device="auto": info)
    monkeypatch.setattr(cupti, "wanted", lambda: True)
    monkeypatch.setattr(pool, "ProcessWorker", _FallbackWorker)
    monkeypatch.setattr(pool, "sweep", lambda last=False: 0)
    result = tuning.tune([TUNE_YAML], tuning.TuneOptions(impls=("chunked",), **FAST), device="cuda")
    (case,) = result.cases
    assert case.hand_picked.launch == "graph" and case.winner == {"chunk": 64}
    assert [(t.launch, t.graph_fallback) for t in case.trials] == [("graph", ""), ("graph", ""), ("stream", FALLBACK)]
    assert case.confirm_hand_picked.launch == "graph" and case.confirm_winner.launch == "stream"
    says = f"hand-picked was replayed from a CUDA graph, the winner launched on the stream ({FALLBACK})"
    assert case.launched_apart == says
    assert json.loads(json.dumps(tuning.result_dict(result)))["cases"][0]["launched_apart"] == says
    monkeypatch.setattr(tuning, "tune", lambda *a, **k: result)
    ran = CliRunner().invoke(main, ["tune", str(TUNE_YAML), "-o", str(tmp_path / "log.json"),
                                    "--results-dir", str(tmp_path)])
    assert ran.exit_code == 0, ran.output
    assert (f"not like for like: {case.case_id} chunked: {says}; a replay leaves out the launch overhead a call on "
            "the stream pays, so the gain is not the configuration's alone") in ran.stderr, ran.stderr
    alike = dataclasses.replace(case, trials=tuple(dataclasses.replace(t, launch="graph") for t in case.trials),
                                confirm_winner=dataclasses.replace(case.confirm_winner, launch="graph"))
    assert alike.launched_apart == ""


def test_tune_refuses_a_launch_it_does_not_know():
    with pytest.raises(ConfigError, match="--launch"):
        tuning.TuneOptions(launch="kernel")


def test_tune_refuses_graph_launch_where_run_refuses_it(monkeypatch):
    """On the CPU a graph launch would do nothing, and without CUPTI no replay is checked: run refuses
    both (plan.device), so tune does too, before measuring."""
    from solbench.device import cupti
    from solbench.device import detect as detect_module
    from solbench.errors import DeviceError

    with pytest.raises(ConfigError, match="on the CPU"):
        tuning.tune([TUNE_YAML], tuning.TuneOptions(launch="graph", **FAST), device="cpu")
    info = dataclasses.replace(detect_module.detect("cpu"), kind="cuda", index=0)
    monkeypatch.setattr(detect_module, "detect", lambda device="auto": info)
    monkeypatch.setattr(cupti, "wanted", lambda: False)
    with pytest.raises(DeviceError, match="cupti-python"):
        tuning.tune([TUNE_YAML], tuning.TuneOptions(launch="graph", **FAST), device="cuda")


def test_the_table_of_a_case_whose_constraints_exclude_every_configuration_reads_cleanly():
    from rich.console import Console

    from solbench.cli.tools import _tune_table

    hand = tuning.Trial({}, "ok", median=3e-5)
    case = tuning.CaseTuning("w", "chunked", "w[n=64,float32]", "float32", {"n": 64}, hand, filtered=2)
    result = tuning.TuneResult("2026-01-01T00:00:00+00:00", make_env(), ("f.yaml",), {}, (case,))
    console = Console(width=200, record=True)
    console.print(_tune_table(result))
    row = next(line for line in console.export_text().splitlines() if "chunked" in line)
    assert "2 excluded" in row and "; 2" not in row


def test_an_interrupted_tuning_keeps_the_cases_tuned_so_far(tmp_path, monkeypatch):
    done = []

    def tune_case(p, name, impl, case, *args):  # the first case is tuned, Ctrl-C during the second
        if done:
            raise KeyboardInterrupt
        done.append(tuning.CaseTuning(p.spec.name, name, case.id, "float32", {}, tuning.Trial({}, "ok", 3e-5)))
        return done[0]

    monkeypatch.setattr(tuning, "_tune_case", tune_case)
    log = tmp_path / "log.json"
    result = CliRunner().invoke(main, ["tune", str(TUNE_YAML), "--device", "cpu", "-o", str(log),
                                       "--results-dir", str(tmp_path)])
    assert result.exit_code == 130, result.output
    data = json.loads(log.read_text())
    assert data["complete"] is False and [c["impl"] for c in data["cases"]] == ["chunked"]
    assert "interrupted" in result.output


KILLED_WHILE_TUNING = """
import os, signal, sys
from solbench.tools import tune as tuning

done = []

def tune_case(p, name, impl, case, *args):  # the first case tuned, FASTER; the tune killed during the second
    if done:
        os.kill(os.getpid(), signal.SIGKILL)
    done.append(case.id)
    trial = tuning.Trial({"chunk": 24}, "ok", median=1.0)
    hand = tuning.Trial({}, "ok", median=2.0)
    return tuning.CaseTuning(p.spec.name, name, case.id, case.dtype, dict(case.params), hand, (trial,), 0, 0,
                             trial.params, hand, trial, verdict="FASTER")

tuning._tune_case = tune_case
from solbench.cli import main
main(sys.argv[1:])
"""


def test_a_tune_killed_while_tuning_keeps_the_cases_tuned_before(tmp_path):
    """The log and the tuned file were written only once every case was tuned: a tune killed on the way
    (SIGKILL: a job's time limit, the OOM killer) lost every case tuned before, each perhaps hours of
    measuring. Both are now written (atomically) as each case is tuned, as run saves its cases."""
    log, tuned = tmp_path / "log.json", tmp_path / "tuned.json"
    result = subprocess.run([sys.executable, "-c", KILLED_WHILE_TUNING, "tune", str(TUNE_YAML), "--device", "cpu",
                             "-o", str(log), "--tuned-file", str(tuned)], capture_output=True, text=True, timeout=300)
    assert result.returncode == -9, result.stderr[-3000:]
    data = json.loads(log.read_text())
    assert data["complete"] is False and [c["impl"] for c in data["cases"]] == ["chunked"]
    assert tuning.load_tuned(tuned).params_for("chunked_add", "chunked", "chunked_add[n=64,float32]") == {"chunk": 24}


def test_a_winner_that_is_the_hand_picked_configuration_is_same_never_a_tuned_gain():
    """no_tail declares chunk=16; its space's other value (24) is incorrect, so chunk=16 wins. The
    confirmation then timed one configuration against itself and, hand-picked always measured first,
    called it FASTER (a 3.5% "gain" written to tuned.json), SLOWER or INCONCLUSIVE by noise."""
    result = tuning.tune([TUNE_YAML], tuning.TuneOptions(impls=("no_tail",), **FAST), device="cpu")
    (case,) = result.cases
    assert case.winner == {"chunk": 16} and case.verdict == "SAME"
    assert case.confirm_winner is None and case.gain is None  # nothing to confirm: the same code
    assert tuning.faster_cases(result) == [] and json.loads(tuning.tuned_file(result))["entries"] == []


def test_run_tuned_names_the_workload_line_of_a_constraint_that_cannot_be_evaluated(tmp_path):
    """A constraint that parses but fails where the stored configuration is applied (a division by zero)
    is the workload's fault: the error names the workload file, the constraint's line and field, not only
    the tuned file."""
    shutil.copy(DATA / "tunable.py", tmp_path / "tunable.py")
    text = TUNE_YAML.read_text().replace('constraints: ["chunk <= n"]', 'constraints: ["n // (chunk - 128) < 9"]')
    workload = tmp_path / "tune_cpu.yaml"
    workload.write_text(text)
    line = 1 + text.splitlines().index('          constraints: ["n // (chunk - 128) < 9"]')
    tuned = _tuned_chunked(tmp_path, {"chunk": 128})
    r = CliRunner().invoke(main, ["run", str(workload), "--tuned", str(tuned), "--results-dir", str(tmp_path / "r"),
                                  "--budget", "0.02", "--min-samples", "3", "--device", "cpu"])
    assert r.exit_code == 2, r.output
    out = r.output.strip()
    assert out.startswith(f"error: {workload}:{line}: workloads.0.implementations.chunked.tune.constraints.0: "), out
    assert "division by zero" in out and f"where {tuned} applies the configuration tuned for chunked_add[n=64" in out
    assert "\n" not in out
    assert not [f for f in (tmp_path / "r").rglob("*") if f.is_file()]


def test_a_tuned_value_must_be_in_the_space_with_its_type_and_an_entry_given_once():
    """A hand-edited ``chunk: 64.0`` passed as 64 (``in`` compares 64.0 == 64), and the implementation then
    failed on a float; two entries for one case were read as one, the later silently winning."""
    from solbench.plan.tuned import out_of_space

    space = {"chunk": [16, 24, 64, 128]}
    assert out_of_space({"chunk": 64}, space) is None
    assert out_of_space({"chunk": 64.0}, space) == "chunk=64.0 is not one of [16, 24, 64, 128]"
    assert out_of_space({"chunk": True}, {"chunk": [1, 2]}) == "chunk=True is not one of [1, 2]"
    assert out_of_space({"chunk": "64"}, space) == "chunk='64' is not one of [16, 24, 64, 128]"
    doc = json.loads(tuning.tuned_file(_result_with([(2.0, 1.0)])))
    doc["entries"].append({**doc["entries"][0], "params": {"chunk": 16}})
    with pytest.raises(ResultsFormatError, match=r"two entries for fused on w\[n=0,float32\] \(w\): keep one"):
        tuning.parse_tuned(json.dumps(doc))


def test_constraints_that_exclude_every_configuration_are_said_and_tuning_nothing_is_exit_2(tmp_path):
    """``constraints: ["chunk > n"]`` (a typo for <=) left nothing to try: the tune exited 0 with "no winner
    was FASTER than hand-picked", as if configurations had been tried and lost."""
    (tmp_path / "tunable.py").write_text((DATA / "tunable.py").read_text())
    path = tmp_path / "t.yaml"
    text = TUNE_YAML.read_text().replace('constraints: ["chunk <= n"]', 'constraints: ["chunk > n * 4"]')
    path.write_text(text)
    args = ["tune", str(path), "--device", "cpu", "-i", "chunked", "-o", str(tmp_path / "log.json"),
            "--tuned-file", str(tmp_path / "tuned.json"), "--budget", "0.02", "--min-samples", "3",
            "--max-samples", "10", "--confirm-rounds", "1"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert ("nothing tried: the constraints exclude every configuration of 1 case(s): "
            "chunked_add[n=64,float32] chunked (4 excluded) (every case: check the constraints)") in result.output
    path.write_text(TUNE_YAML.read_text().replace('constraints: ["chunk <= n"]', 'constraints: ["n > 64"]')
                    .replace("parameters: {n: [64]}", "parameters: {n: [64, 256]}"))
    one = CliRunner().invoke(main, args)  # excluded on one case, tuned on the other: said, not a failure
    assert "nothing tried: the constraints exclude every configuration of 1 case(s)" in one.output, one.output
    assert "every case" not in one.output and one.exit_code == 0, one.output
