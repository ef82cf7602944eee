"""``run --repeat N``: rounds with fresh workers, stored as one run with round labels.

The session loop is driven by a fake executor (no processes, no timing); one end-to-end CPU run
checks the record, not any time.
"""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from solbench import api
from solbench.analysis.rounds import summarize
from solbench.cli import main
from solbench.errors import ConfigError
from solbench.execute import session
from solbench.measure.worker import MeasureSettings
from solbench.results import store
from solbench.results.model import ImplResult, Timing
from tests.unit.factories import kept_as_given, make_run

DOUBLE = "tests/data/double.yaml"
FAST = ["--budget", "0.05", "--min-samples", "5", "--max-samples", "20", "--device", "cpu"]


class FakeExecutor:
    """Records what the loop asks for; round r of every task returns samples of (r + 1) ms."""

    def __init__(self):
        self.events = []
        self.round = 0

    def prestart(self, keys):
        self.events.append(("prestart", tuple(keys)))

    def run(self, key, task, timeout_s, progress=None):
        self.events.append(("run", key, task.case.id))
        value = (self.round + 1) * 1e-3
        return ImplResult(task.impl, "ok", timing=Timing((value,) * 6, value, value, value, "converged"))

    def retire(self, keys):
        self.events.append(("retire", tuple(keys)))
        self.round += 1

    def close(self):
        self.events.append(("close",))


def _units():
    planned = api.plan([DOUBLE], "cpu", impls=("baseline",))
    return [session.Unit(p.spec, p.path, p.cases, ("baseline",)) for p in planned]


def test_every_round_starts_and_retires_its_own_workers():
    ex = FakeExecutor()
    saved = []
    run = session.measure_units(_units(), make_run({}), ex, device="cpu", settings=MeasureSettings(), timeout_s=1.0,
                                l2_bytes=None, score=kept_as_given, emit=lambda e, d: None, on_case=saved.append, repeat=3)
    kinds = [e[0] for e in ex.events]
    # round 1 in a pass of its own (every check); rounds 2 and 3 in the next, each in its own worker
    assert kinds == ["prestart", "run", "run", "retire", "prestart"] + ["run"] * 4 + ["retire", "close"]
    assert ex.events[4][1] == (("double", "baseline"), ("double", "baseline#2"))
    assert len(saved) == 4  # the run is handed over after every case of every pass
    ids = [c.case_id for c in run.cases]
    assert len(ids) == 2 and ids == [c.case_id for c in saved[1].cases]  # each case once, in order
    timing = run.cases[0].impls[0].timing
    assert timing.rounds == (0,) * 6 + (1,) * 6 + (2,) * 6
    assert timing.median == pytest.approx(2e-3)  # median of the round medians 1, 2, 2 ms
    assert saved[0].cases[0].impls[0].timing.rounds == ()  # partial saves hold the rounds so far
    assert saved[2].cases[0].impls[0].timing.n_rounds == 3


class CostedExecutor(FakeExecutor):
    """Also reports what each task's phases cost, and records the samples cap each task was given."""

    def __init__(self):
        super().__init__()
        self.caps = []
        self.rng = np.random.default_rng(5)

    def run(self, key, task, timeout_s, progress=None):
        self.caps.append((self.round, task.settings.max_samples))
        values = tuple(1e-3 * np.exp(self.rng.normal(0.01 * self.round, 0.02, 30)))
        timing = Timing(values, float(np.median(values)), min(values), max(values), "converged")
        return ImplResult(task.impl, "ok", timing=timing,
                          protocol={"setup_s": 0.05, "check_s": 0.1, "after_s": 0.05, "sample_s": 0.06})


def test_rounds_after_the_first_get_the_samples_the_allocation_gives_them():
    from solbench.analysis.allocation import samples_next_round

    ex = CostedExecutor()
    settings = MeasureSettings(min_samples=10, max_samples=2000)
    run = session.measure_units(_units(), make_run({}), ex, device="cpu", settings=settings, timeout_s=1.0,
                                l2_bytes=None, score=kept_as_given, emit=lambda e, d: None, repeat=3)
    first = [cap for r, cap in ex.caps if r == 0]
    later = [cap for r, cap in ex.caps if r > 0]
    assert first == [2000, 2000] and len(later) == 4  # round 1 as configured; 2 cases x 2 later rounds
    assert all(10 <= cap < 2000 for cap in later)
    result = run.cases[0].impls[0]
    # rounds 2 and 3 share a pass: both get the cap that the first round's samples and costs give
    assert result.protocol["samples_cap"] == later[0] == later[1]
    round_1 = [result.timing.samples[:30]]  # 30 samples a round
    assert later[0] == samples_next_round(round_1, 0.2, 0.06, min_samples=10, max_samples=2000)


def test_one_round_is_todays_run():
    ex = FakeExecutor()
    run = session.measure_units(_units(), make_run({}), ex, device="cpu", settings=MeasureSettings(), timeout_s=1.0,
                                l2_bytes=None, score=kept_as_given, emit=lambda e, d: None)
    assert [e[0] for e in ex.events] == ["prestart", "run", "run", "retire", "close"]
    assert run.cases[0].impls[0].timing.rounds == ()


@pytest.fixture(scope="module")
def repeated(tmp_path_factory):
    out = tmp_path_factory.mktemp("repeat") / "run.json"
    result = CliRunner().invoke(main, ["run", DOUBLE, "-i", "baseline", "-i", "wrong", "--repeat", "2",
                                       "-o", str(out), *FAST])
    return result, store.load(out)


def test_run_repeat_stores_one_run_with_round_labels(repeated):
    result, run = repeated
    assert run.protocol.rounds == 2
    baseline = [r for c in run.cases for r in c.impls if r.name == "baseline"]
    assert len(baseline) == 2 and len(run.cases) == 2
    for r in baseline:
        t = r.timing
        assert r.status == "ok" and t.n_rounds == 2 and r.protocol["rounds"] == 2
        assert all(t.rounds.count(label) >= 5 for label in (0, 1))  # every round met min-samples
        s = summarize(t.samples, t.rounds)
        assert (t.median, t.ci_low, t.ci_high) == (s.median, s.ci_low, s.ci_high)
        assert r.score is not None and r.score.speedup == 1.0
    assert "rounds" in result.output and "2 rounds" in result.output


def test_run_repeat_reports_a_failure_with_its_round_and_exits_4(repeated):
    result, run = repeated
    wrong = [r for c in run.cases for r in c.impls if r.name == "wrong"]
    assert all(r.status == "incorrect" and r.message.startswith("round 1 of 2: ") for r in wrong)
    assert result.exit_code == 4


class FailingExecutor(FakeExecutor):
    """Like FakeExecutor, but the implementations named in ``fails`` time out in the round given."""

    def __init__(self, fails):
        super().__init__()
        self.fails = fails

    def run(self, key, task, timeout_s, progress=None):
        if self.fails.get(task.impl) == self.round:
            self.events.append(("run", key, task.case.id))
            return ImplResult(task.impl, "timeout", "no result within 1 s; the worker was killed")
        return super().run(key, task, timeout_s, progress)


def _two_impls():
    planned = api.plan([DOUBLE], "cpu", impls=("baseline", "wrong"))
    return [session.Unit(p.spec, p.path, p.cases, ("baseline", "wrong")) for p in planned]


def test_a_point_that_failed_in_round_1_gets_no_more_rounds_and_says_so():
    """A failure in any round is the point's result whatever the others measure: a kernel that never
    returns costs one timeout, not one a round (rounds 2 and 3 share a pass). The other
    implementations keep every round."""
    failed_in = 0
    ex = FailingExecutor({"wrong": failed_in})
    events = []
    run = session.measure_units(_two_impls(), make_run({}), ex, device="cpu", settings=MeasureSettings(),
                                timeout_s=1.0, l2_bytes=None, score=kept_as_given,
                                emit=lambda e, d: events.append((e, d)), repeat=3)
    cases = len(run.cases)
    ran = [e for e in ex.events if e[0] == "run"]
    assert sum(key[1].startswith("wrong") for _, key, _ in ran) == cases * (failed_in + 1)
    assert sum(key[1].startswith("baseline") for _, key, _ in ran) == cases * 3
    for case in run.cases:
        wrong = next(r for r in case.impls if r.name == "wrong")
        assert wrong.status == "timeout" and wrong.message.startswith(f"round {failed_in + 1} of 3: no result")
    assert sum(d.get("rounds", 1) for e, d in events if e == "case_done") == cases * 3  # progress: every round


def test_a_case_whose_every_point_failed_is_still_counted_done():
    ex = FailingExecutor({"baseline": 0, "wrong": 0})
    events = []
    run = session.measure_units(_two_impls(), make_run({}), ex, device="cpu", settings=MeasureSettings(),
                                timeout_s=1.0, l2_bytes=None, score=kept_as_given,
                                emit=lambda e, d: events.append((e, d)), repeat=3)
    assert len([e for e in ex.events if e[0] == "run"]) == 2 * len(run.cases)  # round 1 only
    assert sum(d.get("rounds", 1) for e, d in events if e == "case_done") == 3 * len(run.cases)
    assert not any(e[0] == "prestart" and e[1] for e in ex.events[2:])  # no worker started for rounds 2-3


def test_repeat_must_be_positive():
    result = CliRunner().invoke(main, ["run", DOUBLE, "--repeat", "0", *FAST])
    assert result.exit_code == 2 and "--repeat" in result.output
    assert Path(DOUBLE).exists()


def test_the_api_refuses_rounds_no_run_can_honour():
    """RunOptions(repeat=-2) measured the default three rounds and RunOptions(max_rounds=-1) was recorded as
    the run's cap; the API now refuses both, as the CLI's ranges do (0: the default rounds, or none added)."""
    from solbench.plan.options import RunOptions

    for bad in ({"repeat": -2}, {"repeat": True}, {"repeat": 2.5}, {"max_rounds": -1}, {"max_rounds": True}):
        with pytest.raises(ConfigError, match=r"--repeat|--max-rounds"):
            RunOptions(**bad)
    assert RunOptions(repeat=0, max_rounds=0).max_rounds == 0 and RunOptions(max_rounds=None).max_rounds is None


def test_a_variant_spec_is_sent_for_each_implementation_and_case():
    sent = []

    class Spy(FakeExecutor):
        def run(self, key, task, timeout_s, progress=None):
            sent.append(task.spec.name)
            return super().run(key, task, timeout_s, progress)

    units = _units()
    renamed = units[0].spec.model_copy(update={"name": "variant"})
    session.measure_units(units, make_run({}), Spy(), device="cpu", settings=MeasureSettings(), timeout_s=1.0,
                          l2_bytes=None, score=kept_as_given, emit=lambda e, d: None,
                          variant=lambda spec, case, name: renamed)
    assert sent == ["variant", "variant"]


class OffsetExecutor(FakeExecutor):
    """Seeded: each task's samples sit around a per-round offset; the case named ``noisy`` has a large
    spread between rounds (5%), every other case a tiny one (0.05%)."""

    def __init__(self, seed=0):
        super().__init__()
        self.rng = np.random.default_rng(seed)

    def run(self, key, task, timeout_s, progress=None):
        self.events.append(("run", key, task.case.id, self.round))
        spread = 0.05 if "n=64" in task.case.id else 0.0005
        centre = 1e-3 * float(np.exp(self.rng.normal(0.0, spread)))
        samples = tuple(centre * (1 + 0.0001 * i) for i in range(6))
        return ImplResult(task.impl, "ok", timing=Timing(samples, centre, centre, centre, "converged"))



def test_added_rounds_go_only_to_the_points_still_wider_than_the_target():
    units = _units()
    ids = [c.id for c in units[0].cases]
    assert any("n=64" in i for i in ids) and any("n=64" not in i for i in ids), ids
    ex = OffsetExecutor()
    events = []
    run = session.measure_units(units, make_run({}), ex, device="cpu", settings=MeasureSettings(), timeout_s=1.0,
                                l2_bytes=None, score=kept_as_given, emit=lambda e, d: events.append((e, d)), repeat=3,
                                max_rounds=8, target_rel_ci=0.01)
    rounds = {c.case_id: c.impls[0].timing.n_rounds for c in run.cases}
    tight = [i for i in ids if "n=64" not in i]
    noisy = [i for i in ids if "n=64" in i]
    assert all(rounds[i] == 3 for i in tight), rounds  # decided after the first three rounds
    assert all(rounds[i] > 3 for i in noisy), rounds  # 5% between rounds: more were added
    added = [e for e in ex.events if e[0] == "run" and e[3] >= 3]
    assert added and all("n=64" in e[2] for e in added)  # only the wide point was measured again
    assert any(e == "more" for e, _ in events)
    assert max(rounds.values()) <= 8
    # the progress bar ends full: every case-round counted once (rounds 2-3 share a pass; added rounds too)
    done = sum(d.get("rounds", 1) for e, d in events if e == "case_done")
    assert done == len(ids) * 3 + sum(d["cases"] for e, d in events if e == "more")
    assert done == sum(rounds.values())  # one implementation a case: its rounds are the case's


def test_no_rounds_are_added_without_max_rounds():
    ex = OffsetExecutor()
    run = session.measure_units(_units(), make_run({}), ex, device="cpu", settings=MeasureSettings(), timeout_s=1.0,
                                l2_bytes=None, score=kept_as_given, emit=lambda e, d: None, repeat=3)
    assert {c.impls[0].timing.n_rounds for c in run.cases} == {3}


def test_rounds_target_and_max_rounds_reach_the_run_loop(tmp_path, monkeypatch):
    """The CLI's --max-rounds and --rounds-target (else --target) are what the run loop gets."""
    seen = []

    def fake_measure_units(units, run, executor, **kwargs):
        seen.append(kwargs)
        executor.close()
        return run

    monkeypatch.setattr(session, "measure_units", fake_measure_units)
    for extra, want in ((["--rounds-target", "0.03"], 0.03), ([], 0.01)):
        result = CliRunner().invoke(main, ["run", DOUBLE, *FAST, "--repeat", "2", "--max-rounds", "5", "-q",
                                           "-o", str(tmp_path / f"run{len(seen)}.json"), *extra])
        assert result.exit_code == 0, result.output
        assert seen[-1]["max_rounds"] == 5 and seen[-1]["repeat"] == 2
        assert seen[-1]["target_rel_ci"] == want


def test_max_rounds_below_the_default_rounds_is_refused_as_below_repeat_is(tmp_path):
    """--max-rounds 2 without --repeat: the run measures 3 rounds (the default) and can add none, so the
    option and --rounds-target would be ignored while the record claimed a cap of 2; refused (exit 2), as
    --max-rounds 2 --repeat 3 is, before anything is measured."""
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, ["run", DOUBLE, *FAST, "-i", "baseline", "--max-rounds", "2",
                                       "--rounds-target", "0.05", "-q", "-o", str(out)])
    assert result.exit_code == 2, result.output
    assert "--max-rounds (2)" in result.output and "3" in result.output
    assert not out.exists()
    with pytest.raises(ConfigError, match="--max-rounds"):
        api.run([DOUBLE], api.RunOptions(impls=("baseline",), repeat=4, max_rounds=3), device="cpu")


def test_a_gpu_run_adds_rounds_by_default_unless_told_otherwise():
    """On a GPU with no --repeat: up to 16 rounds at ±2% (a later gate can decide against the run);
    --repeat, --max-rounds, a gate's re-measure (keys) and the CPU keep their own rounds."""
    from solbench.plan.options import (
        DEFAULT_GPU_MAX_ROUNDS,
        DEFAULT_GPU_ROUNDS_TARGET,
        RunOptions,
        added_rounds_for,
    )

    assert added_rounds_for(RunOptions(), "cuda") == (DEFAULT_GPU_MAX_ROUNDS, DEFAULT_GPU_ROUNDS_TARGET)
    assert added_rounds_for(RunOptions(rounds_target_rel_ci=0.03), "cuda") == (DEFAULT_GPU_MAX_ROUNDS, 0.03)
    assert added_rounds_for(RunOptions(), "cpu")[0] == 0
    assert added_rounds_for(RunOptions(repeat=5), "cuda")[0] == 0
    assert added_rounds_for(RunOptions(keys=("c/i",)), "cuda")[0] == 0
    assert added_rounds_for(RunOptions(max_rounds=0), "cuda")[0] == 0
    assert added_rounds_for(RunOptions(max_rounds=6), "cuda") == (6, 0.01)  # its target: --target
    assert RunOptions().rounds_spread == "case"
    with pytest.raises(ConfigError, match="rounds-spread"):
        RunOptions(rounds_spread="pooled")  # the API refuses what the CLI's choice list refuses


def test_the_run_records_the_rounds_it_may_add(tmp_path):
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, ["run", DOUBLE, *FAST, "-i", "baseline", "--repeat", "2", "--max-rounds", "5",
                                       "--rounds-target", "0.02", "-q", "-o", str(out)])
    assert result.exit_code == 0, result.output
    p = store.load(out).protocol
    assert (p.rounds, p.max_rounds, p.rounds_target, p.rounds_spread) == (2, 5, 0.02, "case")
    result = CliRunner().invoke(main, ["run", DOUBLE, *FAST, "-i", "baseline", "--repeat", "2", "--max-rounds", "3",
                                       "--rounds-spread", "own", "-q", "-o", str(tmp_path / "own.json")])
    assert result.exit_code == 0, result.output
    assert store.load(tmp_path / "own.json").protocol.rounds_spread == "own"
    result = CliRunner().invoke(main, ["run", DOUBLE, *FAST, "--rounds-spread", "pooled", "-q"])
    assert result.exit_code == 2 and "pooled" in result.output
    result = CliRunner().invoke(main, ["run", DOUBLE, *FAST, "-i", "baseline", "-q", "-o", str(tmp_path / "cpu.json")])
    assert result.exit_code == 0, result.output
    p = store.load(tmp_path / "cpu.json").protocol
    assert (p.rounds, p.max_rounds, p.rounds_spread) == (3, 0, "")  # the CPU: three rounds, none added


class AllocatedExecutor(CostedExecutor):
    """Round 1 converges on 30 samples; later rounds take the samples their allocation gives them and stop
    there, as the worker's CIWidth does: "max_samples" at the cap the parent set."""

    def run(self, key, task, timeout_s, progress=None):
        self.caps.append((self.round, task.settings.max_samples))
        n = 30 if self.round == 0 else task.settings.max_samples
        values = tuple(1e-3 * np.exp(self.rng.normal(0.0, 0.02, n)))
        timing = Timing(values, float(np.median(values)), min(values), max(values),
                        "converged" if self.round == 0 else "max_samples")
        return ImplResult(task.impl, "ok", timing=timing,
                          protocol={"setup_s": 0.05, "check_s": 0.1, "after_s": 0.05, "sample_s": 0.06})


def test_a_round_that_stopped_at_its_allocation_is_not_marked_as_stopped_before_converging():
    """Rounds 2 on stop at the samples the allocation gives them; that stop read "max_samples", so every such
    point carried the run table's dagger ("stopped on the budget or the sample cap before converging") though
    it stopped where the protocol planned: 37 of 103 points of a GPU run of workloads/attn.yaml."""
    from solbench.report import flags

    ex = AllocatedExecutor()
    settings = MeasureSettings(min_samples=10, max_samples=2000)
    run = session.measure_units(_units(), make_run({}), ex, device="cpu", settings=settings, timeout_s=1.0,
                                l2_bytes=None, score=kept_as_given, emit=lambda e, d: None, repeat=3)
    assert all(10 <= cap < 2000 for r, cap in ex.caps if r > 0)
    timing = run.cases[0].impls[0].timing
    assert timing.stop_reason == "converged+allocated"
    assert flags.STOPPED not in flags.time_marks(timing, 1.0)
    assert flags.STOPPED in flags.time_marks(replace(timing, stop_reason="budget+allocated"), 1.0)


def test_a_points_samples_cap_comes_from_its_own_implementations_rounds():
    from solbench.analysis.allocation import samples_next_round

    rng = np.random.default_rng(9)
    costs = {"setup_s": 0.05, "check_s": 0.1, "after_s": 0.05, "sample_s": 0.06}

    def result(name, level, spread):
        values = tuple(level * np.exp(rng.normal(0.0, spread, 20)))
        return ImplResult(name, "ok", timing=Timing(values, float(np.median(values)), min(values), max(values),
                                                    "converged"), protocol=costs)

    # two rounds of one case: a steady implementation and a noisy one whose round medians move apart
    per_round = [[result("steady", 1e-3, 0.005), result("noisy", 2e-3, 0.05)],
                 [result("steady", 1e-3, 0.005), result("noisy", 2.2e-3, 0.05)]]
    settings = MeasureSettings(min_samples=10, max_samples=2000)
    for name in ("steady", "noisy"):
        own = [r.timing.samples for results in per_round for r in results if r.name == name]
        assert session._samples_cap(per_round, name, settings) == samples_next_round(
            own, 0.2, 0.06, min_samples=10, max_samples=2000)
    assert session._samples_cap(per_round, "absent", settings) is None
    assert session._samples_cap([], "steady", settings) is None


def test_a_pass_adds_each_point_the_rounds_its_spread_asks_for_each_in_a_worker_of_its_own():
    """One pass, not one per round: the noisy point's added rounds (at most PASS_ROUNDS) start their
    workers together, one per round, and each result is a round of its own in the record."""
    from solbench.analysis.allocation import rounds_needed

    units = _units()
    ex = OffsetExecutor(seed=3)
    run = session.measure_units(units, make_run({}), ex, device="cpu", settings=MeasureSettings(), timeout_s=1.0,
                                l2_bytes=None, score=kept_as_given, emit=lambda e, d: None, repeat=3,
                                max_rounds=12, target_rel_ci=0.01)
    prestarts = [e[1] for e in ex.events if e[0] == "prestart"]
    first_added = prestarts[3]
    assert first_added[0] == ("double", "baseline")
    assert first_added[1:] == tuple(("double", f"baseline#{k}") for k in range(2, len(first_added) + 1))
    assert 2 <= len(first_added) <= session.PASS_ROUNDS
    noisy = next(c for c in run.cases if "n=64" in c.case_id).impls[0].timing
    assert noisy.n_rounds > 3 + len(first_added) - 1  # every added worker's result is a round of its own
    assert len(prestarts) - 3 < noisy.n_rounds - 3  # fewer passes than added rounds
    # what the first three rounds asked for, as the pass gave it (at most PASS_ROUNDS at once)
    first_three = Timing(noisy.samples[:18], 1.0, 1.0, 1.0, "converged", rounds=noisy.rounds[:18])
    asked = rounds_needed(first_three, 0.01, 12) - 3
    assert len(first_added) == min(asked, session.PASS_ROUNDS)


def test_a_multi_rank_workload_gets_one_added_round_a_pass():
    from types import SimpleNamespace

    one = [ImplResult("nccl", "ok", timing=Timing(tuple(1e-3 * (1 + 0.05 * k) for k in range(6)), 1e-3, 1e-3,
                                                     1e-3, "converged"))]
    rounds = {(0, "case"): [one, [replace(one[0], timing=replace(one[0].timing, samples=(2e-3,) * 6))],
                            [replace(one[0], timing=replace(one[0].timing, samples=(1.5e-3,) * 6))]]}
    multi = SimpleNamespace(spec=SimpleNamespace(world_size=2))
    single = SimpleNamespace(spec=SimpleNamespace(world_size=1))
    assert session._undecided(rounds, 0.01, 12, [multi]) == {(0, "case", "nccl"): 1}
    assert session._undecided(rounds, 0.01, 12, [single]) == {(0, "case", "nccl"): session.PASS_ROUNDS}


def test_a_multi_rank_workload_keeps_one_round_a_pass_while_the_others_share_one(monkeypatch):
    """Rounds 2 and 3 of a one-process workload go out in one pass, each in its own worker; a
    multi-rank workload's rank group holds every GPU, so it gets rounds 2 and 3 in passes of their own."""
    from solbench.execute import group

    monkeypatch.setattr(group, "with_groups", lambda executor, units, device: executor)  # no rank processes here
    (single,) = _units()
    multi = session.Unit(single.spec.model_copy(update={"name": "double_ranks", "world_size": 2}), single.path,
                         single.cases, single.impls)
    ex = FakeExecutor()
    session.measure_units([single, multi], make_run({}), ex, device="cpu", settings=MeasureSettings(), timeout_s=1.0,
                          l2_bytes=None, score=kept_as_given, emit=lambda e, d: None, repeat=3)
    passes, keys = [], []
    for event in ex.events:
        if event[0] == "run":
            keys.append(event[1])
        elif event[0] == "retire" and event[1][0][0] == "double_ranks":  # the last workload's retire ends a pass
            passes.append(keys)
            keys = []
    assert len(passes) == 3  # round 1; rounds 2 (and 3 for the one-process workload); round 3 of the rank group
    assert passes[1].count(("double", "baseline")) == passes[1].count(("double", "baseline#2")) == 2
    assert passes[1].count(("double_ranks", "baseline")) == 2 and ("double_ranks", "baseline#2") not in passes[1]
    assert passes[2] == [("double_ranks", "baseline")] * 2  # two cases, one round each


def test_each_case_is_merged_once_per_count_of_its_rounds(monkeypatch):
    """Merging takes a bootstrap per point: the plan before each added pass reuses the merge the
    scoring made after the case's last pass, rather than merging every case again."""
    calls = []
    real = session._merged

    def counted(per_round):
        calls.append((id(per_round), len(per_round)))
        return real(per_round)

    monkeypatch.setattr(session, "_merged", counted)
    ex = OffsetExecutor()
    run = session.measure_units(_units(), make_run({}), ex, device="cpu", settings=MeasureSettings(), timeout_s=1.0,
                                l2_bytes=None, score=kept_as_given, emit=lambda e, d: None, repeat=3,
                                max_rounds=8, target_rel_ci=0.01)
    assert any(c.impls[0].timing.n_rounds > 3 for c in run.cases)  # passes were added, so plans were made
    assert calls and len(calls) == len(set(calls))  # never the same case with the same rounds twice


class CountingExecutor(FakeExecutor):
    """Counts the worker processes it would start, as Pool.started does: one per key not yet running."""

    def __init__(self):
        super().__init__()
        self.started = 0
        self._running = set()

    def prestart(self, keys):
        super().prestart(keys)
        fresh = [k for k in keys if k not in self._running]
        self._running.update(fresh)
        self.started += len(fresh)

    def retire(self, keys):
        super().retire(keys)
        self._running.difference_update(keys)


def test_the_harness_counts_the_passes_and_the_worker_processes_they_started():
    from solbench.report.harness import passes_line

    ex = CountingExecutor()
    ex.started = 5  # started before this run: not the run's
    run = session.measure_units(_units(), make_run({}), ex, device="cpu", settings=MeasureSettings(), timeout_s=1.0,
                                l2_bytes=None, score=kept_as_given, emit=lambda e, d: None, repeat=3)
    # round 1 alone (one worker), rounds 2 and 3 together (a worker each)
    assert run.harness["passes"] == 2
    assert run.harness["worker_processes"] == 3
    assert passes_line(run) == "2 passes over the workloads, 3 worker processes started (one per implementation and round)"

    plain = session.measure_units(_units(), make_run({}), FakeExecutor(), device="cpu", settings=MeasureSettings(),
                                  timeout_s=1.0, l2_bytes=None, score=kept_as_given, emit=lambda e, d: None, repeat=1)
    assert plain.harness["passes"] == 1 and "worker_processes" not in plain.harness  # it counts none
    assert passes_line(plain) == "1 pass over the workloads"
    assert passes_line(make_run({})) is None  # a run that recorded neither


class CountingOffsetExecutor(CountingExecutor, OffsetExecutor):
    """OffsetExecutor's seeded rounds, its processes counted."""

    def __init__(self, seed=0):
        super().__init__()
        self.rng = np.random.default_rng(seed)


def test_added_passes_are_counted_with_their_workers():
    ex = CountingOffsetExecutor(seed=3)
    run = session.measure_units(_units(), make_run({}), ex, device="cpu", settings=MeasureSettings(), timeout_s=1.0,
                                l2_bytes=None, score=kept_as_given, emit=lambda e, d: None, repeat=3,
                                max_rounds=12, target_rel_ci=0.01)
    prestarts = [e[1] for e in ex.events if e[0] == "prestart"]
    assert run.harness["passes"] == len(prestarts) > 2  # one workload: one prestart a pass; rounds were added
    assert run.harness["worker_processes"] == sum(len(set(keys)) for keys in prestarts)


def test_the_harness_counts_the_workers_killed_for_not_exiting_when_asked():
    from solbench.report.harness import passes_line

    class Killing(CountingExecutor):
        overstayed = 2  # killed before this run: not the run's

        def close(self):
            super().close()
            self.overstayed += 1

    run = session.measure_units(_units(), make_run({}), Killing(), device="cpu", settings=MeasureSettings(),
                                timeout_s=1.0, l2_bytes=None, score=kept_as_given, emit=lambda e, d: None, repeat=1)
    assert run.harness["workers_killed"] == 1
    assert passes_line(run).endswith("; 1 killed for not exiting when asked (0 of them compiling ahead)")
    calm = session.measure_units(_units(), make_run({}), CountingExecutor(), device="cpu", settings=MeasureSettings(),
                                 timeout_s=1.0, l2_bytes=None, score=kept_as_given, emit=lambda e, d: None, repeat=1)
    assert "workers_killed" not in calm.harness and "killed" not in passes_line(calm)


def test_the_run_counts_and_notes_the_processes_killed_for_leaving_their_workers_group():
    from solbench.report.harness import passes_line

    class Escaping(CountingExecutor):
        escaped = 3  # killed before this run: not the run's

        def close(self):
            super().close()
            self.escaped += 2  # pool.sweep after the last workers closed

    run = session.measure_units(_units(), make_run({}), Escaping(), device="cpu", settings=MeasureSettings(),
                                timeout_s=1.0, l2_bytes=None, score=kept_as_given, emit=lambda e, d: None, repeat=1)
    assert run.harness["escaped_killed"] == 2
    assert passes_line(run).endswith("; 2 processes left outside a worker's group killed")
    assert run.notes[-1] == session.escaped_note(2)
    calm = session.measure_units(_units(), make_run({}), CountingExecutor(), device="cpu", settings=MeasureSettings(),
                                 timeout_s=1.0, l2_bytes=None, score=kept_as_given, emit=lambda e, d: None, repeat=1)
    assert "escaped_killed" not in calm.harness and not calm.notes
