"""A case's workers set up and check side by side, then time one at a time
(:func:`solbench.execute.session.run_case`, :class:`solbench.measure.pool.Held`).

The order is tested with fake executors (no processes, no timing); the pipe protocol with real
worker processes on the CPU, where two set-ups that wait for each other pass only side by side.
"""

import contextlib
import json
import multiprocessing
import shutil
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from types import SimpleNamespace

import pytest

from solbench import api
from solbench.execute import session, warm
from solbench.measure import pool, wire
from solbench.measure.watch import Watch
from solbench.measure.worker import MeasureSettings, Task
from solbench.report.console import run_notes
from solbench.report.harness import harness_rows
from solbench.results.model import ImplResult
from tests.unit.factories import make_case, make_run

DOUBLE = "tests/data/double.yaml"
MEET = Path("tests/data/side_by_side")
SETTINGS = MeasureSettings(timer="cpu", warmup=1, min_samples=3, max_samples=5, budget_s=0.05)


def _task(path: str | Path, impl: str = "") -> Task:
    (planned,) = api.plan([str(path)], "cpu")
    return Task(planned.spec, planned.cases[0], impl, str(Path(path).parent.absolute()), "cpu", SETTINGS)


class _Held:
    """Reaches its turn, or (``early``: a status) is over before it, like pool.Held; then times."""

    checked_beside = False

    def __init__(self, log: list, name: str, early: str | tuple[str, str] | None = None, busy: bool = False) -> None:
        self.log, self.name, self._busy = log, name, busy
        status, message = early if isinstance(early, tuple) else (early, "")
        self.result = ImplResult(name, status, message) if status else None

    def busy(self) -> bool:  # still setting up or checking when a task before it failed
        return self._busy

    def reach_turn(self) -> bool:
        self.log.append(("turn", self.name))
        return self.result is None

    def time(self) -> bool:
        if self.result is None:
            self.log.append(("time", self.name))
        return self.result is None

    def check(self) -> None:
        pass

    def finish(self) -> ImplResult:
        return self.result or ImplResult(self.name, "ok", "")


class _CheckedHeld(_Held):
    """Like pool.Held: timed at its turn, then held again before its checks after timing, which end
    in ``late`` (a status) where given."""

    def __init__(self, log: list, name: str, late: str | None = None) -> None:
        super().__init__(log, name)
        self.late = late

    def check(self) -> None:
        self.log.append(("check", self.name))
        self.checked_beside = True

    def finish(self) -> ImplResult:
        self.log.append(("result", self.name))
        self.result = ImplResult(self.name, self.late or "ok", "")
        return self.result


class _TimedHolding:
    def __init__(self, log: list, late: dict[str, str] | None = None) -> None:
        self.log, self.late = log, late or {}

    def hold_budget(self, key):
        return 1 << 30

    def hold(self, key, task, timeout_s, progress=None):
        self.log.append(("sent", task.impl))
        return _CheckedHeld(self.log, task.impl, self.late.get(task.impl))

    def run(self, key, task, timeout_s, progress=None):
        self.log.append(("alone", task.impl))
        return ImplResult(task.impl, "ok", "")

    def retire(self, keys):
        self.log.extend(("retire", key[1]) for key in keys)


class _Holding:
    """An executor that can hold tasks, logging what it is asked in order."""

    def __init__(self, log: list, budget: int | None, early: dict[str, str | tuple[str, str]] | None = None,
                 busy: tuple[str, ...] = ()) -> None:
        self.log, self.budget, self.early, self.busy = log, budget, early or {}, busy

    def hold_budget(self, key):
        return self.budget

    def hold(self, key, task, timeout_s, progress=None):
        self.log.append(("sent", task.impl))
        return _Held(self.log, task.impl, self.early.get(task.impl), task.impl in self.busy)

    def run(self, key, task, timeout_s, progress=None):
        self.log.append(("alone", task.impl))
        return ImplResult(task.impl, "ok", "")

    def retire(self, keys):
        self.log.extend(("retire", key[1]) for key in keys)


class _Plain:
    """An executor without ``hold_budget`` (in-process)."""

    def __init__(self, log: list) -> None:
        self.log = log

    def run(self, key, task, timeout_s, progress=None):
        self.log.append(("alone", task.impl))
        return ImplResult(task.impl, "ok", "")


def _jobs(executor, names, cap=None):
    task = _task(DOUBLE)
    return [session.Job(executor, replace(task, impl=n), 60.0, lambda e, d: None,
                        (DOUBLE, "double", task.case.id, n), cap=cap)
            for n in names]


def test_every_worker_reaches_its_turn_before_any_is_timed_and_they_time_in_order():
    log: list = []
    results = session.run_case(_jobs(_Holding(log, budget=1 << 30), ["a", "b", "c"]))
    assert log == [("sent", "a"), ("sent", "b"), ("sent", "c"),
                   ("turn", "a"), ("turn", "b"), ("turn", "c"),
                   ("time", "a"), ("time", "b"), ("time", "c")]
    assert [r.name for r in results] == ["a", "b", "c"]
    assert all(r.protocol["side_by_side"] == 1 for r in results)


def test_the_checks_after_timing_start_only_once_every_worker_has_timed():
    """Timing is alone on the device; the checks after timing (fresh inputs, references) then run at
    once, not one after the other while the case's other workers wait."""
    log: list = []
    clock = session.Harness()
    results = session.run_case(_jobs(_TimedHolding(log), ["a", "b", "c"]), clock)
    assert log == [("sent", "a"), ("sent", "b"), ("sent", "c"),
                   ("turn", "a"), ("turn", "b"), ("turn", "c"),
                   ("time", "a"), ("time", "b"), ("time", "c"),
                   ("check", "a"), ("check", "b"), ("check", "c"),
                   ("result", "a"), ("result", "b"), ("result", "c")]
    assert all(r.protocol["side_by_side"] == 1 for r in results)
    assert "side_after_s" in clock.seconds and "side_s" in clock.seconds


@pytest.mark.parametrize("status", ["timeout", "oom"])
def test_a_timeout_or_oom_in_checks_after_timing_beside_others_is_measured_again_alone(status):
    log: list = []
    results = session.run_case(_jobs(_TimedHolding(log, late={"b": status}), ["a", "b", "c"]))
    assert log[-1] == ("alone", "b")  # after every result of the group
    retired = [name for step, name in log if step == "retire"]
    assert retired == (["a", "c"] if status == "oom" else [])  # a hang holds no peer's memory
    assert [r.status for r in results] == ["ok", "ok", "ok"]
    assert results[1].protocol["side_by_side"] == "again alone" and results[0].protocol["side_by_side"] == 1


def test_a_task_over_before_its_turn_keeps_its_result_and_the_others_go_on():
    log: list = []
    results = session.run_case(_jobs(_Holding(log, budget=1 << 30, early={"b": "incorrect"}), ["a", "b", "c"]))
    assert [r.status for r in results] == ["ok", "incorrect", "ok"]
    assert log.index(("turn", "c")) < log.index(("time", "a"))
    assert ("alone", "b") not in log and ("time", "b") not in log


def test_a_timeout_while_a_peer_is_busy_is_measured_again_alone_while_the_others_wait():
    """A kernel that never returns beside it may be why: the task runs again alone, before anything is
    timed, and that result stands."""
    log: list = []
    results = session.run_case(_jobs(_Holding(log, budget=1 << 30, early={"b": "timeout"}, busy=("c",)),
                                     ["a", "b", "c"]))
    assert log == [("sent", "a"), ("sent", "b"), ("sent", "c"),
                   ("turn", "a"), ("turn", "b"), ("turn", "c"),
                   ("alone", "b"), ("time", "a"), ("time", "c")]
    assert [r.status for r in results] == ["ok", "ok", "ok"]
    assert results[1].protocol["side_by_side"] == "again alone"


@pytest.mark.parametrize("busy", [("c",), ()])
def test_an_oom_beside_held_peers_is_measured_again_alone_once_the_group_is_done(busy):
    """Peers waiting at their turn hold what they set up, busy or not (the shipped suite's ResNet-50 at
    batch 256 on an 80 GB H100: twelve workers side by side): the task runs again once every peer has
    its result and its worker is retired (a worker keeps its cache and context until it exits), and
    that result stands."""
    log: list = []
    results = session.run_case(_jobs(_Holding(log, budget=1 << 30, early={"b": "oom"}, busy=busy),
                                     ["a", "b", "c"]))
    assert log == [("sent", "a"), ("sent", "b"), ("sent", "c"),
                   ("turn", "a"), ("turn", "b"), ("turn", "c"),
                   ("time", "a"), ("time", "c"), ("retire", "a"), ("retire", "c"), ("alone", "b")]
    assert [r.status for r in results] == ["ok", "ok", "ok"]
    assert results[1].protocol["side_by_side"] == "again alone" and results[0].protocol["side_by_side"] == 1


UNKNOWN = ("error", "AcceleratorError: CUDA error: unknown error (at tensors.py:182)")


@pytest.mark.parametrize("fault", [UNKNOWN, ("error", "set-up failed: RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR"),
                                   ("error", "CUDARuntimeError: cudaErrorLaunchFailure: unspecified launch failure"),
                                   ("error", "RuntimeError: Triton Error [CUDA]: unknown error (at driver.py:60)"),
                                   ("error", "RuntimeError: CUDA driver error: unknown error"),
                                   ("crashed", "CUDA context lost: CUDA error: unknown error")])
def test_a_device_fault_beside_held_peers_runs_again_alone_in_a_fresh_worker(fault):
    """The whole ResNet-50's ``channels_last`` raised "CUDA error: unknown error" in a check with eleven
    peers beside it on an 80 GB H100: like an OOM, it runs again once the group is done, with every
    other worker retired, and in a worker of its own started afresh (a new CUDA context); that result
    stands, and says what it met beside the others."""
    log: list = []
    results = session.run_case(_jobs(_Holding(log, budget=1 << 30, early={"b": fault}), ["a", "b", "c"]))
    assert log[6:] == [("time", "a"), ("time", "c"), ("retire", "a"), ("retire", "c"), ("retire", "b"), ("alone", "b")]
    assert [r.status for r in results] == ["ok", "ok", "ok"]
    assert results[1].protocol["side_by_side"] == "again alone"
    assert results[1].protocol["beside_fault"] == f"{fault[0]}: {fault[1]}"
    assert "beside_fault" not in results[0].protocol


@pytest.mark.parametrize("fault", [("error", "set-up failed: ValueError: shapes (16, 64) and (32, 64) (at impl.py:12)"),
                                   ("error", "KeyError: 'w' (at impl.py:3)"),
                                   ("crashed", "the worker exited with code 3"),
                                   ("incorrect", "CUDA error text in an output check's detail")])
def test_an_implementations_own_failure_beside_peers_keeps_its_result(fault):
    log: list = []
    results = session.run_case(_jobs(_Holding(log, budget=1 << 30, early={"b": fault}), ["a", "b", "c"]))
    assert not any(step in ("alone", "retire") for step, _ in log)
    assert results[1].status == fault[0] and results[1].protocol["side_by_side"] == 1


def test_a_device_fault_with_nobody_beside_it_keeps_its_result():
    log: list = []
    need = warm.task_bytes(_task(DOUBLE), input_sets=SETTINGS.input_sets)
    executor = _Holding(log, budget=need, early={"a": UNKNOWN})  # room for one: each a group of its own
    results = session.run_case(_jobs(executor, ["a"]))
    assert log == [("alone", "a")] and results[0].status == "ok"  # run whole, once: _Holding.run says ok
    log.clear()
    results = session.run_case(_jobs(_Holding(log, budget=1 << 30, early={"a": UNKNOWN}), ["a", "b"]))
    assert ("alone", "a") in log  # with a peer beside it, it runs again


def test_what_a_task_met_beside_the_others_is_recorded_when_it_runs_again_alone():
    log: list = []
    results = session.run_case(_jobs(_Holding(log, budget=1 << 30, early={"a": ("oom", "OutOfMemoryError: CUDA out "
                                                                                 "of memory"), "b": ("timeout", "60 s")},
                                              busy=("c",)), ["a", "b", "c"]))
    assert results[0].protocol["beside_fault"] == "oom: OutOfMemoryError: CUDA out of memory"
    assert results[1].protocol["beside_fault"] == "timeout: 60 s"  # run again at once, c still busy
    assert "beside_fault" not in results[2].protocol


def test_an_oom_beside_a_peer_that_timed_out_and_ran_again_alone_is_measured_again_alone():
    """The peer hung while it held what it set up: the OOM beside it runs again once the group is
    done, though the peer left the group to run again alone (before, both ran again at once)."""
    log: list = []
    results = session.run_case(_jobs(_Holding(log, budget=1 << 30, early={"a": "timeout", "b": "oom"},
                                              busy=("b",)), ["a", "b"]))
    assert log == [("sent", "a"), ("sent", "b"), ("turn", "a"), ("turn", "b"), ("alone", "a"), ("retire", "a"),
                   ("alone", "b")]
    assert [r.status for r in results] == ["ok", "ok"]
    assert [r.protocol["side_by_side"] for r in results] == ["again alone", "again alone"]


def test_each_oom_beside_held_peers_runs_again_with_every_other_worker_retired():
    """Two tasks of a group ran out of memory: while the first runs again alone, the second's worker
    (its context, and what it had set up before it failed, still cached) is gone too, and so is the
    first's (what its run left cached) while the second runs again."""
    log: list = []
    results = session.run_case(_jobs(_Holding(log, budget=1 << 30, early={"a": "oom", "b": "oom"}),
                                     ["a", "b", "c"]))
    assert log[6:] == [("time", "c"), ("retire", "b"), ("retire", "c"), ("alone", "a"),
                       ("retire", "a"), ("alone", "b")]
    assert [r.status for r in results] == ["ok", "ok", "ok"]
    assert [r.protocol["side_by_side"] for r in results] == ["again alone", "again alone", 1]


def test_a_failure_after_a_peer_timed_out_is_measured_again_alone():
    log: list = []
    results = session.run_case(_jobs(_Holding(log, budget=1 << 30, early={"a": "timeout", "b": "oom"}),
                                     ["a", "b", "c"]))
    assert ("alone", "b") in log and ("alone", "a") not in log  # nobody was busy when a timed out
    assert [r.status for r in results] == ["timeout", "ok", "ok"]


def test_a_hang_with_nobody_busy_beside_it_is_waited_for_once():
    log: list = []
    results = session.run_case(_jobs(_Holding(log, budget=1 << 30, early={"c": "timeout"}), ["a", "b", "c"]))
    assert not any(step == "alone" for step, _ in log)
    assert results[2].status == "timeout" and results[2].protocol["side_by_side"] == 1  # held, kept


def test_groups_hold_no_more_case_tensors_than_the_budget():
    need = warm.task_bytes(_task(DOUBLE), input_sets=SETTINGS.input_sets)
    log: list = []
    session.run_case(_jobs(_Holding(log, budget=2 * need), ["a", "b", "c"]))
    assert log == [("sent", "a"), ("sent", "b"), ("turn", "a"), ("turn", "b"), ("time", "a"), ("time", "b"),
                   ("alone", "c")]  # a group of one runs whole


def test_groups_count_a_job_at_what_its_worker_held_in_earlier_rounds():
    need = warm.task_bytes(_task(DOUBLE), input_sets=SETTINGS.input_sets)
    log: list = []
    jobs = _jobs(_Holding(log, budget=3 * need), ["a", "b", "c"])
    session.run_case([replace(j, held=2 * need + 1) if j.name == "a" else j for j in jobs])
    assert log[:3] == [("alone", "a"), ("sent", "b"), ("sent", "c")]  # a and b: over the budget together
    log.clear()
    session.run_case([replace(j, held=need // 2) for j in _jobs(_Holding(log, budget=3 * need), ["a", "b", "c"])])
    assert [step for step, _ in log].count("sent") == 3  # a measured peak below the count lowers nothing


class _Peaked(_Holding):
    """Holds tasks within ``budget``; each result says its worker's allocator peaked at ``peak`` bytes.
    Logs each task sent held or run alone, with whether it was to give its cache back after."""

    def __init__(self, budget: int, peak: int) -> None:
        super().__init__([], budget)
        self.peak = peak

    def prestart(self, keys):
        pass

    def retire(self, keys):
        self.log.append(("retire",))

    def close(self):
        pass

    def hold(self, key, task, timeout_s, progress=None):
        self.log.append(("sent", task.impl, task.release_after))
        held = _Held(self.log, task.impl)
        held.finish = lambda: ImplResult(task.impl, "ok", timing=_timing(),  # type: ignore[method-assign]
                                         protocol={"memory_peak_bytes": self.peak})
        return held

    def run(self, key, task, timeout_s, progress=None):
        self.log.append(("alone", task.impl, task.release_after))
        return ImplResult(task.impl, "ok", timing=_timing(), protocol={"memory_peak_bytes": self.peak})


def _timing():
    from solbench.results.model import Timing

    return Timing((1e-3,) * 5, 1e-3, 1e-3, 1e-3, "converged")


def test_later_rounds_set_up_side_by_side_as_far_as_the_first_rounds_measured_peaks_allow():
    """Round 1 measures what each worker held; rounds 2 and 3 (a pass, a worker each) are grouped and
    told whether to keep their caches by it, not by the count of the case's tensors alone."""
    (planned,) = api.plan([DOUBLE], "cpu", impls=("baseline", "wrong"))
    unit = session.Unit(planned.spec, planned.path, planned.cases[:1], ("baseline", "wrong"))
    need = warm.task_bytes(_task(DOUBLE), input_sets=SETTINGS.input_sets)

    def passes(peak):
        ex = _Peaked(budget=5 * need, peak=peak)
        session.measure_units([unit], make_run({}), ex, device="cpu", settings=SETTINGS, timeout_s=1.0,
                              l2_bytes=None, score=lambda u, c, impls: replace(make_case(c.id, {}), impls=tuple(impls)),
                              emit=lambda e, d: None, repeat=3)
        cut = ex.log.index(("retire",))
        return ex.log[:cut], ex.log[cut + 1:-1]

    def shape(log):
        return "".join(step[0][1] for step in log)  # e: sent, u: turn, i: time

    first, later = passes(peak=need // 2)  # under the count: the count decides, as before
    assert shape(first) == "eeuuii" and shape(later) == "eeeeuuuuiiii"  # 2 x 1 and 4 x 1 within 5
    assert not any(step[2] for step in first + later if step[0] == "sent")  # all keep their caches
    first, later = passes(peak=2 * need)  # over it: 2 a group, and each gives its cache back
    assert shape(first) == "eeuuii"  # nothing measured yet
    assert shape(later) == "eeuuiieeuuii" and all(step[2] for step in later if step[0] == "sent")


def test_what_a_worker_held_is_its_largest_peak_and_a_context_on_a_gpu():
    gib = 1 << 30
    per_round = [[ImplResult("a", "ok", protocol={"memory_peak_bytes": 3 * gib}), ImplResult("b", "ok")],
                 [ImplResult("a", "oom", protocol={"memory_peak_bytes": 5 * gib})]]
    assert session.held_before(per_round, "a", "cuda") == 5 * gib + warm.CONTEXT_BYTES
    assert session.held_before(per_round, "a", "cpu") == 5 * gib
    assert session.held_before(per_round, "b", "cuda") == 0  # none recorded: the count decides
    assert session.held_before([], "a", "cuda") == 0


def test_without_a_budget_or_a_holding_executor_every_task_runs_alone_in_order():
    for executor in (_Holding([], budget=None), _Plain([])):
        results = session.run_case(_jobs(executor, ["a", "b"]))
        assert executor.log == [("alone", "a"), ("alone", "b")]
        assert all("side_by_side" not in r.protocol for r in results)


def test_a_run_with_a_multi_rank_workload_still_holds_its_one_process_tasks():
    """The suite has collectives.yaml: its rank groups run whole, every other task goes side by side."""
    from solbench.execute.group import GroupExecutor

    log: list = []
    wrapped = GroupExecutor(_Holding(log, budget=1 << 30), {"allreduce": 2}, "cpu")
    assert wrapped.hold_budget(("double", "a")) == 1 << 30
    assert wrapped.hold_budget(("allreduce", "nccl")) is None
    results = session.run_case(_jobs(wrapped, ["a", "b"]))
    assert log == [("sent", "a"), ("sent", "b"), ("turn", "a"), ("turn", "b"), ("time", "a"), ("time", "b")]
    assert all(r.protocol["side_by_side"] == 1 for r in results)
    with pytest.raises(AssertionError):
        wrapped.hold(("allreduce", "nccl"), _task(DOUBLE), 60.0)


def test_the_samples_cap_and_skips_are_recorded_as_before():
    log: list = []
    jobs = _jobs(_Holding(log, budget=1 << 30), ["a", "b"], cap=7)
    jobs[1] = replace(jobs[1], result=ImplResult("b", "skipped", "needs CUDA"))
    a, b = session.run_case(jobs)
    assert a.protocol["samples_cap"] == 7 and b.status == "skipped" and "samples_cap" not in b.protocol
    assert ("sent", "b") not in log


def test_the_harness_keeps_side_by_side_seconds_apart_from_tasks_run_alone():
    clock = session.Harness()
    side = ImplResult("a", "ok", "", protocol={"setup_s": 2.0, "check_s": 3.0, "sample_s": 1.0, "side_by_side": 1})
    alone = ImplResult("b", "ok", "", protocol={"setup_s": 0.5, "check_s": 0.25, "sample_s": 1.0})
    clock.add_tasks([side, alone])
    assert clock.seconds == {"side_setup_s": 2.0, "side_check_s": 3.0, "setup_s": 0.5, "check_s": 0.25,
                             "sample_s": 2.0}
    run = replace(make_run({}), harness={**clock.totals(), "tasks_s": 7.0, "side_s": 3.5, "wall_s": 10.0})
    rows = {key: seconds for key, _, seconds, _ in harness_rows(run)}
    # the workers' own seconds side by side (5.0) are not wall time: messaging = 7 - 3.5 - 0.5 - 0.25 - 2
    assert rows["side_s"] == 3.5 and rows["side_check_s"] == 3.0
    assert rows["messaging_s"] == pytest.approx(7.0 - 3.5 - 0.5 - 0.25 - 2.0)


def test_the_harness_counts_checks_after_timing_side_by_side_as_wall_time_once():
    clock = session.Harness()
    side = ImplResult("a", "ok", "", protocol={"setup_s": 2.0, "after_s": 1.5, "sample_s": 1.0, "side_by_side": 1})
    alone = ImplResult("b", "ok", "", protocol={"after_s": 0.5, "sample_s": 1.0})
    clock.add_tasks([side, alone])
    assert clock.seconds["side_after_sum_s"] == 1.5 and clock.seconds["after_s"] == 0.5
    run = replace(make_run({}), harness={**clock.totals(), "tasks_s": 9.0, "side_s": 3.0, "side_after_s": 1.25,
                                         "wall_s": 12.0})
    rows = {key: seconds for key, _, seconds, _ in harness_rows(run)}
    # the wall time side by side (1.25 s) counts, not the workers' own seconds (1.5 s)
    assert rows["messaging_s"] == pytest.approx(9.0 - 3.0 - 1.25 - 2.0 - 0.5)
    assert list(rows).index("side_after_sum_s") < list(rows).index("messaging_s")


def test_a_turn_message_has_no_fields():
    assert wire.parse(b'{"kind": "turn"}') == {"kind": "turn"}
    assert wire.parse(b'{"kind": "timed"}') == {"kind": "timed"}
    for kind in ("turn", "timed"):
        with pytest.raises(wire.BadMessage):
            wire.parse(b'{"kind": "%s", "now": 1}' % kind.encode())


@pytest.fixture
def meet(tmp_path):
    for name in ("meet.yaml", "meet.py"):  # late_a/late_b use CALLS (a fresh worker process each)
        shutil.copy(MEET / name, tmp_path / name)
    return tmp_path / "meet.yaml"


def _meet_jobs(p: pool.Pool, meet: Path, task: Task, names: tuple[str, ...]) -> list[session.Job]:
    """One job per implementation of meet.yaml's case, through the real pool ``p``."""
    return [session.Job(p, replace(task, impl=n), 120.0, lambda e, d: None, (str(meet), "meet", task.case.id, n))
            for n in names]


def test_real_workers_set_up_side_by_side_then_time_alone(meet):
    """a's set-up waits for b's and b's for a's: both pass only if their workers set up at once."""
    p = pool.Pool("cpu", None, side_by_side_bytes=1 << 30)
    task = _task(meet)
    try:
        jobs = _meet_jobs(p, meet, task, ("a", "b", "wrong", "dies"))
        a, b, wrong, dies = session.run_case(jobs)
        assert (a.status, b.status) == ("ok", "ok"), (a.message, b.message)
        assert a.protocol["side_by_side"] == 1 and a.timing is not None and a.timing.n >= SETTINGS.min_samples
        assert wrong.status == "incorrect"  # over before its turn: it never waited for one
        assert dies.status == "crashed" and ("meet", "dies") not in p._workers  # replaced, as after any crash
        again = p.run(("meet", "a"), replace(task, impl="a"), timeout_s=120)  # the same worker, not held
        assert again.status == "ok" and "side_by_side" not in again.protocol
    finally:
        p.close()
    assert p._workers == {}


def test_a_real_worker_out_of_memory_beside_others_runs_again_alone_once_they_are_retired(meet):
    """The pool retires the case's other workers (their caches and contexts go with them) before the task
    runs again alone, and starts them again when a later task needs them."""
    p = pool.Pool("cpu", None, side_by_side_bytes=1 << 30)
    task = _task(meet)
    try:
        jobs = _meet_jobs(p, meet, task, ("baseline", "crowded"))
        baseline, crowded = session.run_case(jobs)
        assert crowded.status == "ok" and crowded.protocol["side_by_side"] == "again alone", crowded.message
        assert baseline.status == "ok" and baseline.protocol["side_by_side"] == 1
        assert ("meet", "baseline") not in p._workers and p.started == 2  # retired, not started again yet
        again = p.run(("meet", "baseline"), replace(task, impl="baseline"), timeout_s=120)
        assert again.status == "ok" and p.started == 3
    finally:
        p.close()


def test_a_real_worker_with_a_device_fault_beside_others_runs_again_in_a_fresh_process(meet):
    """A set-up that raises a CUDA error beside another worker: both workers are retired, and the task
    runs again alone in a process started for it; the note under the tables says so."""
    p = pool.Pool("cpu", None, side_by_side_bytes=1 << 30)
    task = _task(meet)
    try:
        jobs = _meet_jobs(p, meet, task, ("baseline", "faulted"))
        baseline, faulted = session.run_case(jobs)
        assert baseline.status == "ok" and baseline.protocol["side_by_side"] == 1
        assert faulted.status == "ok" and faulted.protocol["side_by_side"] == "again alone", faulted.message
        assert "CUDA error: unknown error" in faulted.protocol["beside_fault"]
        assert ("meet", "baseline") not in p._workers and p.started == 3  # baseline retired, faulted's replaced
    finally:
        p.close()
    run = make_run({"meet[n=64]": {"baseline": [1e-3] * 5, "faulted": [1e-3] * 5}})
    case = run.cases[0]
    impls = tuple(replace(r, protocol={**r.protocol, "beside_fault": faulted.protocol["beside_fault"]})
                  if r.name == "faulted" else r for r in case.impls)
    (note,) = [n for n in run_notes(replace(run, cases=(replace(case, impls=impls),))) if "beside" in n]
    assert note.startswith("meet[n=64] faulted: error: set-up failed: RuntimeError: CUDA error: unknown error")
    assert note.endswith("then measured again alone: that result stands")


def test_a_device_fault_beside_the_other_trees_worker_runs_again_once_that_worker_is_gone(meet):
    """``solbench ab``: a case's jobs come from two pools (one per tree). The other pool's retired
    worker is waited for before the faulted task runs again alone, not left tearing down its context
    beside the rerun until that pool's next task."""
    mine, other = (pool.Pool("cpu", None, side_by_side_bytes=1 << 30) for _ in range(2))
    task = _task(meet)
    beside: list[bool] = []
    run = mine.run

    def rerun(key, task, timeout_s, progress=None):
        beside.extend(w._proc.is_alive() for w in other._leaving)  # retired, not yet waited for
        return run(key, task, timeout_s, progress)

    mine.run = rerun  # type: ignore[method-assign]
    try:
        (baseline,) = _meet_jobs(other, meet, task, ("baseline",))
        (faulted,) = _meet_jobs(mine, meet, task, ("faulted",))
        b, f = session.run_case([baseline, faulted])
        assert f.status == "ok" and f.protocol["side_by_side"] == "again alone", f.message
        assert b.protocol["side_by_side"] == 1 and ("meet", "baseline") not in other._workers
        assert beside == [] and other._leaving == []
    finally:
        mine.close()
        other.close()


def test_real_workers_run_their_checks_after_timing_side_by_side(meet):
    """late_a's and late_b's set-ups, run again by the checks after timing, each wait for the other's:
    both pass only if those checks run at once, after both have timed one at a time."""
    p = pool.Pool("cpu", None, side_by_side_bytes=1 << 30)
    task = _task(meet)
    clock = session.Harness()
    try:
        jobs = _meet_jobs(p, meet, task, ("late_a", "late_b"))
        a, b = session.run_case(jobs, clock)
        assert (a.status, b.status) == ("ok", "ok"), (a.message, b.message)
        assert a.protocol["side_by_side"] == 1 and a.timing is not None and b.timing is not None
        assert a.protocol["after_s"] > 0 and "side_after_s" in clock.seconds
        clock.add_tasks([a, b])
        assert "side_after_sum_s" in clock.seconds and "after_s" not in clock.seconds  # not counted as alone
    finally:
        p.close()


def test_a_timed_message_before_the_task_was_let_go_is_a_forgery(tmp_path):
    """A worker may say it has timed only once the parent let its held task go, and only once."""
    worker = object.__new__(pool.ProcessWorker)
    worker._conn, child = multiprocessing.Pipe()
    worker._frames = wire.Frames(worker._conn)
    worker._proc = SimpleNamespace(is_alive=lambda: False, join=lambda timeout=None: None, kill=lambda: None, pid=None)
    worker.log_path = str(tmp_path / "none.log")
    worker._held, worker._stops_after, worker._timing = True, True, False
    watch = Watch.of(replace(_task(DOUBLE), impl="baseline"))
    wire.send(child, "timed")
    result, fatal = worker.take(watch, None, time.monotonic())  # still at its turn: not let go
    assert result.status == "reward_hack" and fatal and "timed" in result.message
    worker._conn, child = multiprocessing.Pipe()
    worker._frames = wire.Frames(worker._conn)
    worker._timing = True  # let go (ProcessWorker.go)
    wire.send(child, "timed")
    wire.send(child, "timed")
    assert worker.take(watch, None, time.monotonic()) is pool.TIMED
    result, fatal = worker.take(watch, None, time.monotonic())  # twice
    assert result.status == "reward_hack" and "timed" in result.message


def _piped_worker(tmp_path: Path) -> tuple[pool.ProcessWorker, Connection]:
    """The parent's side of a held task's pipe (no process), its deadline passed a second ago."""
    worker = object.__new__(pool.ProcessWorker)
    worker._conn, child = multiprocessing.Pipe()
    worker._frames = wire.Frames(worker._conn)
    worker._proc = SimpleNamespace(is_alive=lambda: True, join=lambda timeout=None: None, kill=lambda: None, pid=None)
    worker.log_path = str(tmp_path / "none.log")
    worker._watch = Watch.of(replace(_task(DOUBLE), impl="baseline"))
    worker._held, worker._timeout_s, worker._deadline = True, 1.0, time.monotonic() - 1.0
    return worker, child


def _keeps_sending(child: Connection, sent: list[int]) -> Callable[[str, dict], None]:
    """A progress callback: each message read, the worker sends another (1000 of them, then its turn)."""
    def more(event: str, data: dict) -> None:
        sent.append(data["n"])
        if len(sent) < 1000:
            wire.send(child, "progress", event="sample", data={"n": data["n"] + 1})
        else:
            wire.send(child, "turn")
    return more


def test_a_turn_sent_by_the_deadline_counts_though_the_parent_reads_it_after(tmp_path):
    """A held task waits at its turn while the parent waits for the tasks before it: what it sent by
    then is read, its turn included, though its deadline passed meanwhile."""
    worker, child = _piped_worker(tmp_path)
    for n in range(3):
        wire.send(child, "progress", event="sample", data={"n": n})
    wire.send(child, "turn")
    seen: list[int] = []
    assert worker.wait(lambda event, data: seen.append(data["n"])) is None
    assert seen == [0, 1, 2]


def test_what_a_worker_sends_past_its_deadline_does_not_keep_it_alive(tmp_path):
    """A worker that keeps sending (an implementation that found its pipe) was read message after
    message past its deadline, and never timed out; only what it sent by the time the parent saw the
    deadline pass is read now."""
    worker, child = _piped_worker(tmp_path)
    wire.send(child, "progress", event="sample", data={"n": 0})
    sent: list[int] = []
    done = worker.wait(_keeps_sending(child, sent))
    assert done is not None, f"read {len(sent)} messages sent past the deadline, then its turn"
    result, fatal = done
    assert result.status == "timeout" and fatal and "no result within 1 s" in result.message
    assert sent == [0]


def test_a_held_worker_that_keeps_sending_is_still_busy(tmp_path):
    """Whether a later held task is still busy (an earlier one timed out beside it) reads what it
    had sent when asked, not what it sends meanwhile: one that never stops was read forever."""
    worker, child = _piped_worker(tmp_path)
    worker._deadline = time.monotonic() + 60.0
    wire.send(child, "progress", event="sample", data={"n": 0})
    sent: list[int] = []
    held = pool.Held(SimpleNamespace(), ("meet", "a"), worker, _keeps_sending(child, sent))
    assert held.busy() and held.result is None
    assert sent == [0]


def _half_a_turn(child: Connection) -> bytes:
    """Write a 'turn' message's length and its first byte (an implementation that found its pipe and
    stopped there); the rest of it."""
    turn = json.dumps({"kind": "turn"}).encode()
    child._send(struct.pack("!i", len(turn)) + turn[:1])
    return turn[1:]


def test_a_worker_that_sent_half_a_message_times_out(tmp_path, monkeypatch):
    """The rest of a message a worker began was waited for with no deadline: one that stopped halfway
    held the whole run; past its deadline (and STALL_S without a byte) it times out as any hang."""
    monkeypatch.setattr(wire, "STALL_S", 0.01)
    worker, child = _piped_worker(tmp_path)
    _half_a_turn(child)
    result, fatal = worker.wait()
    assert result.status == "timeout" and fatal and "no result within 1 s" in result.message


def test_a_held_worker_that_sent_half_a_message_is_still_busy(tmp_path):
    """Whether a later held task is still busy reads the messages it sent whole, not the rest of one it
    began (kept: read with the rest once that comes)."""
    worker, child = _piped_worker(tmp_path)
    worker._deadline = time.monotonic() + 60.0
    wire.send(child, "progress", event="sample", data={"n": 0})
    rest = _half_a_turn(child)
    seen: list[int] = []
    held = pool.Held(SimpleNamespace(), ("meet", "a"), worker, lambda event, data: seen.append(data["n"]))
    assert held.busy() and held.result is None and seen == [0]
    child._send(rest)
    assert not held.busy() and held.result is None  # at its turn


def _later(child: Connection, raw: bytes, piece: int, pause_s: float) -> threading.Thread:
    """A thread writing ``raw`` to the worker's end of the pipe ``piece`` bytes at a time, ``pause_s``
    apart (a worker the host schedules in bursts), until done or the parent's end is closed."""
    def write() -> None:
        with contextlib.suppress(OSError):
            for at in range(0, len(raw), piece):
                time.sleep(pause_s)
                child._send(raw[at:at + piece])
    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_a_result_under_way_at_the_deadline_is_read_not_timed_out(tmp_path, monkeypatch):
    """The parent reads held tasks' results one after another: a worker whose checks ended in time wrote
    its result while the parent read another's, and the pipe took its first bytes only. Read past the
    deadline, the result was a timeout at the first moment no more bytes were waiting, though they kept
    coming; it is read to its end now."""
    monkeypatch.setattr(wire, "STALL_S", 60.0)  # generous: the outcome, not the machine's speed, is tested
    monkeypatch.setattr(wire, "FINISH_S", 600.0)
    worker, child = _piped_worker(tmp_path)
    body = wire.result_text(ImplResult("baseline", "error", "x" * (4 << 20))).encode()
    raw, piece = struct.pack("!i", len(body)) + body, 32 << 10
    child._send(raw[:piece])
    writer = _later(child, raw[piece:], piece, 0.002)
    result, fatal = worker.wait()
    worker._conn.close()
    writer.join()
    assert result.status == "error" and not fatal, result.message


def test_a_message_begun_before_the_deadline_is_read_on_though_no_byte_is_waiting(tmp_path, monkeypatch):
    """Half a turn read while the task was busy, the rest not yet come when the parent looked past the
    deadline: that was a timeout at once; the rest is waited for as for any message under way."""
    monkeypatch.setattr(wire, "STALL_S", 60.0)
    worker, child = _piped_worker(tmp_path)
    worker._deadline = time.monotonic() + 60.0
    rest = _half_a_turn(child)
    held = pool.Held(SimpleNamespace(_settled=lambda key, result, fatal: result), ("meet", "a"), worker, None)
    assert held.busy()  # half of it read
    worker._deadline = time.monotonic() - 1.0
    writer = _later(child, rest, len(rest), 0.2)
    at_turn = held.reach_turn()
    writer.join()
    assert at_turn, held.result


def test_a_set_up_that_asks_for_the_device_alone_goes_on_at_its_turn(meet):
    """``alone`` asks for the device to itself in its set-up (as a cuBLASLt plan does before it tunes,
    :func:`solbench.impls.cublaslt.wait_alone`); ``slow`` sets up beside it. ``alone``'s set-up goes on
    only once ``slow`` has set up and checked: it fails if it runs while slow still sets up."""
    p = pool.Pool("cpu", None, side_by_side_bytes=1 << 30)
    task = _task(meet)
    try:
        jobs = _meet_jobs(p, meet, task, ("alone", "slow"))
        alone, slow = session.run_case(jobs)
        assert (alone.status, slow.status) == ("ok", "ok"), (alone.message, slow.message)
        assert alone.protocol["side_by_side"] == 1 and alone.timing is not None
        # the rest of its set-up and its checks ran alone, after its turn: the harness counts them so
        assert 0 < alone.protocol["setup_alone_s"] <= alone.protocol["setup_s"]
        assert 0 < alone.protocol["check_alone_s"] <= alone.protocol["check_s"]
        assert "setup_alone_s" not in slow.protocol
        again = p.run(("meet", "alone"), replace(task, impl="alone"), timeout_s=120)  # not held: no wait
        assert again.status == "ok"
    finally:
        p.close()


def test_a_turn_from_a_task_that_was_not_held_is_a_forgery(tmp_path):
    """A worker may say it reached its turn only while the parent holds its task, and only once."""
    for held in (False, True):
        worker = object.__new__(pool.ProcessWorker)  # no process: the parent's side of the pipe alone
        worker._conn, child = multiprocessing.Pipe()
        worker._frames = wire.Frames(worker._conn)
        worker._proc = SimpleNamespace(is_alive=lambda: False, join=lambda timeout=None: None, kill=lambda: None,
                                       pid=None)
        worker.log_path = str(tmp_path / "none.log")
        worker._held = held
        watch = Watch.of(replace(_task(DOUBLE), impl="baseline"))
        wire.send(child, "turn")
        wire.send(child, "turn")
        first = worker.take(watch, None, time.monotonic())
        assert (first is pool.TURN) == held
        if held:
            worker._held = False  # let go (ProcessWorker.go): a second turn is a forgery
            first = worker.take(watch, None, time.monotonic())
        result, fatal = first
        assert result.status == "reward_hack" and fatal and "turn" in result.message


def test_o_proj_workers_are_counted_at_what_they_held_on_an_80_gb_card():
    """An ``ab`` of o_proj on an 80 GB H100 (two trees, seven implementations, two rounds a pass) ran its
    16384-token cases out of memory: counted at the case's dtype, without the float32 references and a
    context, a worker looked like 0.94 GiB; its allocator peaked at 5.3 GiB, beside a context."""
    from types import SimpleNamespace

    from solbench.config.workloads import load_workload_file
    from solbench.workload.cases import expand

    (spec,) = [s for s in load_workload_file(Path("workloads/attn.yaml")) if s.name == "o_proj"]
    cases = expand(spec, "cuda")
    gib = 1 << 30

    def fits(free_gib, workers):
        budget = int(free_gib * gib * warm.MEMORY_SHARE)
        executor = SimpleNamespace(hold_budget=lambda key: budget)
        return session.fits_side_by_side(executor, ("o_proj", "fused"), MeasureSettings(), workers, cases,
                                         spec.reference_dtype, "cuda")

    held = {c.id: warm.held_bytes(c, input_sets=2, reference_dtype=spec.reference_dtype, device="cuda")
            for c in cases}
    peaks = {1: 0.54, 16: 0.68, 64: 0.81, 2048: 1.70, 16384: 5.27}  # GiB, the H100's largest per token count
    for c in cases:
        assert held[c.id] >= (peaks[c.params["tokens"]] + 0.5) * gib, c.id  # and a context of about 0.5 GiB
    assert not fits(79.0, 14) and not fits(79.0, 28)  # the H100's passes: give back as each task ends
    group = int(79.0 * gib * warm.MEMORY_SHARE) // max(held.values())
    assert group * (5.27 + 0.5) * gib < 79.0 * gib  # a group set up side by side fits as measured


def test_a_points_rounds_merged_keep_what_any_met_beside_the_others_and_count_them():
    from solbench.analysis.pooling import combine_runs, merge_rounds, merge_samples
    from solbench.results.model import Timing

    timing = Timing((1e-3,) * 4, 1e-3, 1e-3, 1e-3, "converged")

    def round_(**protocol):
        return ImplResult("a", "ok", timing=timing, protocol=protocol)

    merged = merge_rounds([round_(), round_(beside_fault="oom: x"), round_(beside_fault="error: CUDA error: y")])
    assert merged.protocol["beside_fault"] == "oom: x" and merged.protocol["beside_fault_rounds"] == 2
    assert "beside_fault" not in merge_rounds([round_(), round_()]).protocol
    run = make_run({"c": {"a": [1e-3] * 4}})

    def saved(result):
        return replace(run, cases=(replace(run.cases[0], impls=(result,)),))

    (combined,) = combine_runs([saved(merged), saved(round_()), saved(merged)]).cases[0].impls
    assert combined.protocol["beside_fault_rounds"] == 4  # runs combined: every run's rounds counted
    (again,) = merge_samples(saved(round_()), saved(round_(beside_fault="oom: z"))).cases[0].impls
    assert again.protocol["beside_fault"] == "oom: z" and again.protocol["beside_fault_rounds"] == 1
    (again,) = merge_samples(saved(merged), saved(round_(beside_fault="oom: z"))).cases[0].impls
    assert again.timing.n_rounds == 4 and again.protocol["beside_fault_rounds"] == 3  # measured again: counted too


@pytest.mark.parametrize(("message", "oom"), [
    ("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", True),
    ("cuFFT error: CUFFT_ALLOC_FAILED", True),
    ("cuDNN error: CUDNN_STATUS_ALLOC_FAILED", True),
    ("cuda.bindings: CUDA_ERROR_OUT_OF_MEMORY", True),
    ("cudaErrorMemoryAllocation", True),
    ("CUDA error: unknown error", False),
    ("out of resource: shared memory, Required: 262144, Hardware limit: 232448", False),  # Triton: not device memory
    ("shapes (16, 64) and (32, 64) cannot be multiplied", False),
])
def test_a_device_librarys_failed_allocation_is_out_of_memory(message, oom):
    """A cuBLAS handle or a cuDNN or cuFFT plan that cannot get its workspace says so in its own words:
    the task's status is oom (run again alone where it was beside others), not the implementation's error."""
    from solbench.measure import worker

    result = worker._fault("a", RuntimeError(message), "set-up failed: ")
    assert result.status == ("oom" if oom else "error")
    assert result.message.startswith("set-up failed: RuntimeError: ")
