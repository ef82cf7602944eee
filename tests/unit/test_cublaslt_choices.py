"""cuBLASLt autotuning paid once per run: the first worker times the algorithms, later ones reuse
the fastest (:func:`solbench.impls.cublaslt.plan_tuned`). A stand-in for nvmath's ``Matmul`` (plan,
algorithms) and for the timing (:func:`~solbench.impls.cublaslt.fastest`) drive it on the CPU."""

import numpy as np
import pytest

from solbench.impls import cublaslt

REAL_FASTEST = cublaslt.fastest  # the fixture below stands in for it; the last test times through it


class Algo:
    def __init__(self, config: int):
        self.config = config

    def as_numpy(self):
        return np.array([self.config, 7], dtype=np.int64)


class FakeMatmul:
    """Offers ``configs`` in heuristic order; autotuning finds ``fastest`` best."""

    def __init__(self, configs, fastest):
        self.offered = [Algo(c) for c in configs]
        self.fastest = fastest
        self.algorithms = ()
        self.plans = []
        self.tuned = 0

    def plan(self, *, stream=None, algorithms=None, **kwargs):
        self.plans.append((algorithms, kwargs))
        self.algorithms = tuple(algorithms) if algorithms is not None else tuple(self.offered)
        return self.algorithms


@pytest.fixture(autouse=True)
def timed(monkeypatch):
    """``fastest`` without a GPU: the stand-in's own answer, counted."""

    def fastest(mm, offered, timer, iterations=5, *, before=None):
        assert timer == "the harness's timer"
        mm.tuned += 1
        return [a.config for a in offered].index(mm.fastest)

    monkeypatch.setattr(cublaslt, "fastest", fastest)
    with cublaslt.tuning(lambda: "the harness's timer"):  # as a measuring worker opens it around a task
        yield


@pytest.fixture
def choices(tmp_path, monkeypatch):
    monkeypatch.setattr(cublaslt.torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    monkeypatch.setattr(cublaslt.torch.cuda, "current_device", lambda: 0)
    monkeypatch.setenv(cublaslt.CHOICES_ENV, str(tmp_path))
    return tmp_path


def test_without_a_folder_the_machine_keeps_the_choices_for_later_runs(tmp_path, monkeypatch):
    """No --compile-cache DIR: the choice goes to the user's cache folder, where a later run (a later
    process: here a later plan) finds it, so runs on one machine run the same algorithm."""
    monkeypatch.setattr(cublaslt.torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    monkeypatch.setattr(cublaslt.torch.cuda, "current_device", lambda: 0)
    monkeypatch.delenv(cublaslt.CHOICES_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cublaslt.machine_choices() == tmp_path / "solbench"
    mm = FakeMatmul([1, 2, 3], fastest=3)
    assert cublaslt.plan_tuned(mm, None, epilog="BIAS") == "tuned"
    assert mm.tuned == 1 and [a.config for a in mm.algorithms] == [3]  # planned again with the fastest only
    assert mm.plans[0] == (None, {"epilog": "BIAS"}) and mm.plans[1][1] == {"epilog": "BIAS"}
    assert len(list((tmp_path / "solbench" / "cublaslt").glob("*.json"))) == 1
    later_run = FakeMatmul([1, 2, 3], fastest=1)
    assert cublaslt.plan_tuned(later_run, None, epilog="BIAS") == "reused"
    assert later_run.tuned == 0 and [a.config for a in later_run.algorithms] == [3]


def test_a_folder_that_cannot_be_written_only_means_tuning_again(tmp_path, monkeypatch):
    monkeypatch.setattr(cublaslt.torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    monkeypatch.setattr(cublaslt.torch.cuda, "current_device", lambda: 0)
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the folder would go
    monkeypatch.setenv(cublaslt.CHOICES_ENV, str(blocked))
    for _ in range(2):
        mm = FakeMatmul([1, 2], fastest=2)
        assert cublaslt.plan_tuned(mm, None) == "tuned" and [a.config for a in mm.algorithms] == [2]


def test_a_later_worker_reuses_the_fastest_without_timing(choices):
    start, _ = cublaslt.plans_since(0)
    first = FakeMatmul([1, 2, 3], fastest=2)
    assert cublaslt.plan_tuned(first, None, epilog="BIAS") == "tuned"
    later = FakeMatmul([1, 2, 3], fastest=3)  # would tune differently: it must not tune at all
    assert cublaslt.plan_tuned(later, None, epilog="BIAS") == "reused"
    assert later.tuned == 0
    assert [a.config for a in later.algorithms] == [2]  # planned again with the chosen one only
    assert later.plans[-1][1] == {"epilog": "BIAS"}  # the same plan arguments
    _, added = cublaslt.plans_since(start)
    assert added["cublaslt_tuned"] == 1
    assert added["cublaslt_reused"] == 1


def test_another_problem_is_tuned_for_itself(choices):
    cublaslt.plan_tuned(FakeMatmul([1, 2, 3], fastest=2), None)
    other = FakeMatmul([1, 2, 4], fastest=4)  # a different heuristic answer: a different problem
    assert cublaslt.plan_tuned(other, None) == "tuned"
    assert [a.config for a in other.algorithms] == [4]


def test_an_unreadable_choice_is_tuned_again(choices):
    cublaslt.plan_tuned(FakeMatmul([5, 6], fastest=6), None)
    (path,) = (choices / "cublaslt").glob("*.json")
    path.write_text("{not json")
    again = FakeMatmul([5, 6], fastest=5)
    assert cublaslt.plan_tuned(again, None) == "tuned"
    assert [a.config for a in again.algorithms] == [5]


def test_one_algorithm_offered_is_not_worth_a_file(choices):
    mm = FakeMatmul([9], fastest=9)
    assert cublaslt.plan_tuned(mm, None) == "single"
    assert mm.tuned == 0 and len(mm.plans) == 1
    assert not (choices / "cublaslt").exists()


def test_each_plan_records_the_algorithm_it_runs(choices):
    start, _ = cublaslt.plans_since(0)
    cublaslt.plan_tuned(FakeMatmul([1, 2, 3], fastest=2), None)
    cublaslt.plan_tuned(FakeMatmul([1, 2, 3], fastest=3), None)  # reuses 2
    cublaslt.plan_tuned(FakeMatmul([4, 5], fastest=5), None)
    count, since = cublaslt.plans_since(start)
    assert count == start + 3
    labels = since["cublaslt_algorithms"].split(",")
    assert len(labels) == 2  # two problems, one algorithm each: the reused plan runs the tuned one
    assert all(label.startswith("?:") and len(label) == 10 for label in labels)  # id (unknown here):hash
    assert cublaslt.plans_since(count) == (count, {})


def test_a_tie_goes_to_the_heuristics_earlier_algorithm():
    """Within 2% of the fastest counts as tied: the earliest in the heuristic's order wins, so a
    difference the tuner cannot resolve never makes two runs choose differently."""
    assert cublaslt.first_within([10.0, 9.9, 9.0]) == 2  # 10% slower is not a tie
    assert cublaslt.first_within([10.1, 10.0, 9.95]) == 0  # within 2% of 9.95: the first one
    assert cublaslt.first_within([11.0, 10.1, 10.0]) == 1
    assert cublaslt.first_within([10.0, 10.0], tie=0.0) == 0


def test_a_kept_compile_cache_keeps_the_choices_too(tmp_path):
    """--compile-cache DIR: the measuring workers keep cuBLASLt choices in DIR (a CI baseline and the
    run gated against it share them); without it, in the machine's store ("")."""
    from types import SimpleNamespace

    from solbench import api
    from solbench.execute import warm
    from solbench.measure.worker import MeasureSettings

    (planned,) = api.plan(["tests/data/double.yaml"], "cpu")
    units = [warm.Unit(planned.spec, planned.path, tuple(planned.cases), tuple(planned.spec.implementations))]
    info = SimpleNamespace(kind="cpu", index=None)
    for kept, expected in ((tmp_path / "kept", str((tmp_path / "kept").absolute())), (None, "")):
        options = SimpleNamespace(compile_jobs=0, timeout_s=10.0, compile_cache_dir=kept)
        settings, _ = warm.ahead_of_run(units, MeasureSettings(), str(tmp_path / "run"), info, options)
        assert settings.choices == expected


def test_a_plan_waits_for_the_device_to_itself_before_it_tunes_and_only_then(choices):
    """Inside a worker's task, tuning first waits for the task's turn; a plan that reuses a kept
    choice, or has one algorithm only, times nothing and does not wait."""
    waits = []
    with cublaslt.tuning(lambda: "the harness's timer", wait=lambda: waits.append(len(waits))):
        first = FakeMatmul([1, 2, 3], fastest=2)
        assert cublaslt.plan_tuned(first, stream=None) == "tuned"
        assert waits == [0] and first.tuned == 1
        later = FakeMatmul([1, 2, 3], fastest=3)
        assert cublaslt.plan_tuned(later, stream=None) == "reused"
        assert cublaslt.plan_tuned(FakeMatmul([5], fastest=5), stream=None) == "single"
    assert waits == [0]


def test_outside_a_worker_nothing_is_tuned_or_kept(choices):
    """No harness timer outside ``tuning`` (a library call): the heuristic's first algorithm, nothing
    timed and nothing written, so a later worker still tunes the problem for itself."""
    inside, cublaslt._TUNING[:] = cublaslt._TUNING[:], []  # out of the fixture's tuning block for a moment
    try:
        mm = FakeMatmul([4, 6], fastest=6)
        assert cublaslt.plan_tuned(mm, stream=None) == "heuristic"
    finally:
        cublaslt._TUNING[:] = inside
    assert mm.tuned == 0 and [a.config for a in mm.algorithms] == [4]
    assert not any(choices.rglob("*.json"))


class FakeTimer:
    """The harness timer's shape: ``sample(i)`` gives launch i's seconds; the first ``warm`` samples
    (the untimed passes) read 100 s, which no median may see."""

    def __init__(self, seconds, warm):
        self.seconds, self.warm, self.taken, self.released = seconds, warm, 0, False

    def prepare(self, launches):
        assert len(launches) == len(self.seconds)

    def sample(self, i):
        self.taken += 1
        return 100.0 if self.taken <= self.warm else self.seconds[i]

    def release(self):
        self.released = True


def test_the_tuner_ranks_the_timed_passes_and_breaks_near_ties_to_the_heuristics_order(monkeypatch):
    monkeypatch.setattr(cublaslt.torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(cublaslt.torch.cuda, "current_stream", lambda device=None: None)
    offered = [Algo(c) for c in (1, 2, 3)]
    timer = FakeTimer([2e-5, 1.01e-5, 1e-5], warm=cublaslt.WARM_PASSES * 3)
    assert cublaslt.medians(FakeMatmul([1, 2, 3], 1), offered, timer, iterations=4) == [2e-5, 1.01e-5, 1e-5]
    assert timer.taken == (cublaslt.WARM_PASSES + 4) * 3 and timer.released
    timer = FakeTimer([2e-5, 1.01e-5, 1e-5], warm=cublaslt.WARM_PASSES * 3)
    assert REAL_FASTEST(FakeMatmul([1, 2, 3], 1), offered, timer, iterations=4) == 1  # 1% off the best: a tie


def test_what_runs_before_the_gemm_runs_once_before_the_tuning_worker_waits_for_its_turn(choices):
    """The FP8 plan's quantizing kernel (a Triton JIT: about a second to compile on a fresh machine) ran for
    the first time inside the tuning, after the worker took its turn, while every other worker waited at
    theirs (an H100 run: 1.07 s alone). It is now called once before the wait, side by side; a plan that
    reuses a kept choice calls it not at all."""
    events = []
    with cublaslt.tuning(lambda: "the harness's timer", wait=lambda: events.append("wait")):
        assert cublaslt.plan_tuned(FakeMatmul([1, 2], fastest=2), None, before=lambda: events.append("before")) \
            == "tuned"
        assert events == ["before", "wait"]
        events.clear()
        assert cublaslt.plan_tuned(FakeMatmul([1, 2], fastest=2), None, before=lambda: events.append("before")) \
            == "reused"
        assert events == []
