"""Sharding cases over several devices (solbench.execute.shard): the scheduler alone, then the
threaded loop driven by fake executors (no processes, no timing; order is forced with events)."""

import _thread
import threading
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest

from solbench import api
from solbench.errors import RunInterrupted
from solbench.execute import shard
from solbench.execute.session import Unit
from solbench.execute.shard import Job, Lane, Scheduler, measure_sharded, plan_jobs
from solbench.measure.worker import MeasureSettings
from solbench.results.model import ImplResult, Peaks, Timing
from tests.unit.factories import make_case, make_env, make_run


def _job(order, unit, estimate, width=1):
    return Job(order, unit, SimpleNamespace(id=f"c{order}"), estimate, width)


def _unit(name, n_cases, impls=("baseline",), world_size=None):
    spec = SimpleNamespace(name=name, implementations={i: SimpleNamespace(requires=()) for i in impls})
    if world_size is not None:
        spec.world_size = world_size
    cases = tuple(SimpleNamespace(id=f"{name}[{k}]") for k in range(n_cases))
    return Unit(spec, api.Path("w.yaml"), cases, tuple(impls))


# --- planning and the scheduler (pure) ---

def test_jobs_are_longest_first_and_keep_plan_order_on_ties():
    units = [_unit("a", 2), _unit("b", 2)]
    est = {"a[0]": 1.0, "a[1]": 5.0, "b[0]": 5.0, "b[1]": 2.0}
    jobs = plan_jobs(units, lambda u, c: est[c.id])
    assert [j.case.id for j in jobs] == ["a[1]", "b[0]", "b[1]", "a[0]"]
    assert [j.order for j in jobs] == [1, 2, 3, 0]  # order: position in plan order
    assert [j.unit for j in jobs] == [0, 1, 1, 0]


def test_width_is_the_workloads_world_size_and_one_without_it():
    jobs = plan_jobs([_unit("a", 1), _unit("g", 1, world_size=2)], lambda u, c: 1.0)
    assert sorted((j.unit, j.width) for j in jobs) == [(0, 1), (1, 2)]


def test_a_free_lane_keeps_to_its_workload_then_starts_a_new_one_then_shares():
    jobs = [_job(0, 0, 9), _job(1, 1, 8), _job(2, 0, 3), _job(3, 1, 1), _job(4, 2, 0.5), _job(5, 0, 3),
            _job(6, 0, 3)]
    s = Scheduler(jobs, [0, 1])
    assert [(j.order, lanes) for j, lanes in s.assign([0, 1])] == [(0, (0,)), (1, (1,))]
    # lane 1 is free first: its own workload (unit 1) before the longer jobs of unit 0
    assert [(j.order, lanes) for j, lanes in s.assign([1])] == [(3, (1,))]
    # lane 1 again: unit 1 has nothing queued; unit 2 was never started: it goes before sharing
    assert [j.order for j, _ in s.assign([1])] == [4]
    # lane 1 again: nothing of its own, nothing unstarted: it shares unit 0 (3 jobs of 3 queued)
    assert [j.order for j, _ in s.assign([1])] == [2]
    assert s.warm[1] == {1, 2, 0}


def test_a_workload_is_shared_only_when_its_lane_keeps_more_than_the_thief_takes():
    # unit 0 is on lane 0; two equal jobs queued: lane 0 would finish them as soon as a cold lane 1
    s = Scheduler([_job(0, 0, 5), _job(1, 0, 2), _job(2, 0, 2)], [0, 1])
    s.assign([0])
    assert s.assign([1]) == []
    # three queued: lane 1 takes one (6 - 2 > 2 + cold 0) ...
    s = Scheduler([_job(0, 0, 5), _job(1, 0, 2), _job(2, 0, 2), _job(3, 0, 2)], [0, 1])
    s.assign([0])
    assert [j.order for j, _ in s.assign([1])] == [1]
    # ... unless starting the workload on a new lane costs more than that (e.g. a compilation)
    s = Scheduler([_job(0, 0, 5), _job(1, 0, 2), _job(2, 0, 2), _job(3, 0, 2)], [0, 1], cold={0: 30.0})
    s.assign([0])
    assert s.assign([1]) == []


def test_a_lane_retires_a_workload_once_nothing_of_it_is_queued():
    s = Scheduler([_job(0, 0, 2), _job(1, 0, 1)], [0, 1])
    s.assign([0])
    assert s.to_retire(0) == []  # job 1 of unit 0 is still queued
    s.assign([0])
    assert s.to_retire(0) == [0] and s.to_retire(0) == []  # once


def test_a_wide_job_takes_several_lanes_and_waits_for_them():
    s = Scheduler([_job(0, 0, 9, width=2), _job(1, 1, 1)], [0, 1])
    # only lane 1 free: the wide job cannot start; the narrow one goes ahead
    assert [(j.order, lanes) for j, lanes in s.assign([1])] == [(1, (1,))]
    assert s.assign([0]) == []
    assert [(j.order, lanes) for j, lanes in s.assign([0, 1])] == [(0, (0, 1))]


def test_a_case_wider_than_the_lanes_is_skipped(tmp_path):
    narrow, other = _units(tmp_path, (1, 1))
    wide = Unit(SimpleNamespace(name=other.spec.name, implementations=other.spec.implementations, world_size=4),
                other.path, other.cases, other.impls)
    run = _measure([narrow, wide], _lanes(2, []), group=lambda lanes, unit: pytest.fail("no group of 4"))
    assert [c.case_id for c in run.cases] == [narrow.cases[0].id, wide.cases[0].id]
    assert {(r.status, r.message) for r in run.cases[1].impls} == {
        ("skipped", "needs 4 devices at once (world_size); this run has 2")}
    assert run.cases[0].device is not None and run.cases[1].device is None  # measured on no device (it named lane 0's)
    with pytest.raises(ValueError):
        Scheduler([_job(0, 0, 1, width=4)], [0, 1])


def test_pinned_jobs_run_only_on_their_lanes():
    s = Scheduler([_job(0, 0, 9), _job(1, 0, 1)], [0, 1], pinned={0: (1,), 1: (1,)})
    assert s.assign([0]) == []
    assert [(j.order, lanes) for j, lanes in s.assign([0, 1])] == [(0, (1,))]


# --- the threaded loop with fake executors ---

class Fake:
    """A lane's executor; every task returns samples of (lane + 1) ms and is logged with its lane."""

    def __init__(self, lane, log, hook=None):
        self.lane, self.log, self.hook = lane, log, hook
        self.aborted = threading.Event()
        self.closed = False

    def prestart(self, keys):
        self.log.append(("prestart", self.lane, tuple(keys)))

    def run(self, key, task, timeout_s, progress=None):
        self.log.append(("start", self.lane, task.case.id, task.impl))
        if self.hook is not None:
            self.hook(self, task)
        self.log.append(("end", self.lane, task.case.id, task.impl))
        value = (self.lane + 1) * 1e-3 if isinstance(self.lane, int) else 1e-2
        return ImplResult(task.impl, "ok", timing=Timing((value,) * 6, value, value, value, "converged"))

    def retire(self, keys):
        self.log.append(("retire", self.lane, tuple(keys)))

    def close(self):
        self.closed = True

    def abort(self):
        self.aborted.set()


def _units(tmp_path, counts=(2, 2)):
    lines = ["workloads:"]
    for w, n in enumerate(counts):
        sizes = ", ".join(str(64 * (k + 1)) for k in range(n))
        lines += [f"  - name: w{w}", f"    parameters: {{n: [{sizes}]}}", "    dtypes: [float32]",
                  "    inputs: {x: {shape: [n]}}", "    outputs: {y: {shape: [n]}}",
                  "    ops: [{op: mul, numel: n, inputs: 1}]", "    reference: tests.unit.helpers:double",
                  "    implementations: {baseline: tests.unit.helpers:double, other: tests.unit.helpers:double}"]
    path = tmp_path / "w.yaml"
    path.write_text("\n".join(lines) + "\n")
    return [Unit(p.spec, p.path, p.cases, tuple(p.spec.implementations)) for p in api.plan([path], "cpu")]


def _lanes(n, log, hook=None, made=None):
    def factory(lane):
        def make():
            ex = Fake(lane, log, hook)
            if made is not None:
                made.append(ex)
            return ex
        return make

    def score(lane):
        def s(unit, case, impls):
            c = replace(make_case(case.id, {}, workload=unit.spec.name), impls=tuple(impls))
            return replace(c, peaks=Peaks(None, 1.0, 1.0, f"lane {lane}"))
        return s

    return [Lane(i, "cpu", factory(i), score(i), make_env(device_index=i, device_name=f"GPU{i}"))
            for i in range(n)]


def _measure(units, lanes, **kw):
    kw.setdefault("estimate", lambda u, c: float(c.params["n"]))
    return measure_sharded(units, make_run({}), lanes, settings=MeasureSettings(), timeout_s=1.0,
                           emit=lambda e, d: None, **kw)


def test_the_run_lists_cases_in_plan_order_whoever_finishes_first(tmp_path):
    units = _units(tmp_path)
    first_done = threading.Event()

    def hook(ex, task):
        if ex.lane == 0:
            assert first_done.wait(60)  # lane 0 finishes only after lane 1 has finished a case
        elif task.impl == "other":
            first_done.set()

    log, saved = [], []
    run = _measure(units, _lanes(2, log, hook), on_case=saved.append)
    ids = [c.id for u in units for c in u.cases]
    assert [c.case_id for c in run.cases] == ids
    assert len(saved) == 4 and [c.case_id for c in saved[0].cases] != ids[:1]  # lane 1's case came first
    for partial in saved:  # every partial run is in plan order too
        got = [c.case_id for c in partial.cases]
        assert got == [i for i in ids if i in got]


def test_each_case_is_scored_and_fingerprinted_by_the_lane_that_measured_it(tmp_path):
    log = []
    run = _measure(_units(tmp_path), _lanes(2, log))
    where = {e[2]: e[1] for e in log if e[0] == "start"}
    for case in run.cases:
        lane = where[case.case_id]
        assert case.device.device_index == lane and case.device.device_name == f"GPU{lane}"
        assert case.peaks.source == f"lane {lane}"
        assert case.impls[0].timing.median == pytest.approx((lane + 1) * 1e-3)
    assert {where[c.case_id] for c in run.cases} == {0, 1}  # both lanes were used


def test_a_lane_never_measures_two_cases_at_once_and_every_task_runs_once(tmp_path):
    log = []
    _measure(_units(tmp_path, (3, 2, 2)), _lanes(3, log))
    for lane in range(3):
        events = [e for e in log if e[1] == lane and e[0] in ("start", "end")]
        assert all(a[0] == "start" and b[0] == "end" and a[2:] == b[2:] for a, b in zip(events[::2], events[1::2], strict=True))
    starts = [e[2:] for e in log if e[0] == "start"]
    assert len(starts) == len(set(starts)) == 7 * 2


def test_workers_are_started_before_and_retired_after_a_workload_on_each_lane(tmp_path):
    log = []
    _measure(_units(tmp_path, (2, 2)), _lanes(1, log))
    kinds = [(e[0], e[2][0][0] if e[0] in ("prestart", "retire") else e[2].split("[")[0]) for e in log]
    assert kinds[0] == ("prestart", "w1") or kinds[0] == ("prestart", "w0")
    retired = [k for k in kinds if k[0] == "retire"]
    assert sorted(retired) == [("retire", "w0"), ("retire", "w1")]
    first = kinds.index(retired[0])
    assert all(k[1] == retired[0][1] for k in kinds[:first] if k[0] == "start")  # one workload at a time


def test_rounds_start_fresh_executors_and_keep_each_case_on_its_lane(tmp_path):
    log, made = [], []
    run = _measure(_units(tmp_path), _lanes(2, log, made=made), repeat=3)
    assert len(made) == 6 and all(ex.closed for ex in made)  # a fresh executor per lane and round
    lanes = {}
    for e in log:
        if e[0] == "start":
            lanes.setdefault(e[2], set()).add(e[1])
    assert all(len(s) == 1 for s in lanes.values())
    for case in run.cases:
        t = case.impls[0].timing
        assert t.n_rounds == 3 and len(t.samples) == 18


def test_ctrl_c_kills_the_lanes_and_keeps_the_finished_cases(tmp_path, sigint_raises_keyboard_interrupt):
    units = _units(tmp_path, (3,))
    made = []

    def hook(ex, task):
        if task.case.id == units[0].cases[1].id:  # the second case: Ctrl-C while it runs
            _thread.interrupt_main()
            assert ex.aborted.wait(60)  # blocks like a worker until the lanes are aborted

    saved = []
    with pytest.raises(RunInterrupted) as stop:
        _measure(units, _lanes(1, [], hook, made), estimate=lambda u, c: -float(c.params["n"]),
                 on_case=saved.append)
    run = stop.value.result
    assert not run.complete and "interrupted" in run.notes[-1]
    assert [c.case_id for c in run.cases] == [units[0].cases[0].id]
    assert made[0].aborted.is_set() and made[0].closed


def test_an_error_in_a_lane_stops_the_run_and_is_raised(tmp_path):
    made = []

    def hook(ex, task):
        if ex.lane == 1:
            raise RuntimeError("lane broke")

    with pytest.raises(RuntimeError, match="lane broke"):
        _measure(_units(tmp_path), _lanes(2, [], hook, made))
    assert all(ex.closed for ex in made)


def test_a_wide_workload_gets_its_lanes_exclusively_through_the_group_executor(tmp_path):
    narrow, other = _units(tmp_path, (2, 2))
    wide = Unit(SimpleNamespace(name=other.spec.name, implementations=other.spec.implementations, world_size=2,
                                reference_dtype=other.spec.reference_dtype),
                other.path, other.cases, other.impls)
    log, groups = [], []

    def group(lanes, unit):
        assert unit is wide
        groups.append(tuple(lane.index for lane in lanes))
        return Fake("g", log)

    run = _measure([narrow, wide], _lanes(2, log), group=group)
    assert len(groups) == 2 and all(sorted(g) == [0, 1] for g in groups)  # each wide case: both lanes
    runs = [e for e in log if e[0] in ("start", "end")]
    for i, e in enumerate(runs):
        if e[0] == "start" and e[1] == "g":
            assert runs[i + 1][:2] == ("end", "g")  # nothing else ran while a wide case ran
    assert [c.case_id for c in run.cases] == [c.id for u in (narrow, wide) for c in u.cases]


def test_a_wide_workload_without_a_group_executor_is_skipped(tmp_path):
    narrow, other = _units(tmp_path, (1, 1))
    wide = Unit(SimpleNamespace(name=other.spec.name, implementations=other.spec.implementations, world_size=2,
                                reference_dtype=other.spec.reference_dtype),
                other.path, other.cases, other.impls)
    log = []
    run = _measure([narrow, wide], _lanes(2, log))
    statuses = {(c.workload, r.name): (r.status, r.message) for c in run.cases for r in c.impls}
    assert statuses[(wide.spec.name, "baseline")] == ("skipped", shard.NO_GROUP.format(n=2))
    assert statuses[(narrow.spec.name, "baseline")][0] == "ok"
    # skipped before any lane took it: no device measured it (it read as lane 0's GPU, in the CSV too)
    assert {c.device is None for c in run.cases if c.workload == wide.spec.name} == {True}
    assert not [e for e in log if e[0] == "start" and e[2].startswith(wide.spec.name)]


def test_a_cpu_lane_skips_cuda_implementations_without_a_worker():
    unit = _unit("w", 1, impls=("baseline", "gpu"))
    unit.spec.implementations["gpu"].requires = ("cuda",)
    assert shard._skipped(unit, "cpu") == {"gpu": "needs CUDA (cuda)"}
    assert shard._skipped(unit, "cuda") == {}


def test_a_point_that_failed_in_a_round_gets_no_more_rounds_on_any_lane(tmp_path):
    """A failure in any round is the point's result: its later rounds are not run (a kernel that
    never returns costs one timeout, not one a round); the other implementations keep every round."""
    log = []

    class TimesOutOnce(Fake):
        def run(self, key, task, timeout_s, progress=None):
            if task.impl == "other":
                self.log.append(("start", self.lane, task.case.id, task.impl))
                return ImplResult(task.impl, "timeout", "no result within 1 s; the worker was killed")
            return super().run(key, task, timeout_s, progress)

    lanes = [replace(lane, make_executor=lambda i=lane.index: TimesOutOnce(i, log)) for lane in _lanes(2, log)]
    run = _measure(_units(tmp_path), lanes, repeat=3)
    started = [e for e in log if e[0] == "start"]
    assert sum(e[3] == "other" for e in started) == len(run.cases)  # round 1 only
    assert sum(e[3] == "baseline" for e in started) == 3 * len(run.cases)
    for case in run.cases:
        other = next(r for r in case.impls if r.name == "other")
        assert other.status == "timeout" and other.message.startswith("round 1 of 3: ")


def test_a_case_whose_every_point_failed_is_still_counted_done_each_round(tmp_path):
    """Later rounds run nothing of a case all of whose points failed, but the case still advances the
    progress on every round (the bar's total is cases x rounds)."""
    log, events = [], []

    class TimesOut(Fake):
        def run(self, key, task, timeout_s, progress=None):
            self.log.append(("start", self.lane, task.case.id, task.impl))
            return ImplResult(task.impl, "timeout", "no result within 1 s; the worker was killed")

    lanes = [replace(lane, make_executor=lambda i=lane.index: TimesOut(i, log)) for lane in _lanes(2, log)]
    units = _units(tmp_path)
    run = measure_sharded(units, make_run({}), lanes, settings=MeasureSettings(), timeout_s=1.0,
                          estimate=lambda u, c: float(c.params["n"]), emit=lambda e, d: events.append((e, d)),
                          repeat=3)
    assert sum(e[0] == "start" for e in log) == 2 * len(run.cases)  # round 1 only
    assert sum(e == "case_done" for e, _ in events) == 3 * len(run.cases)


def test_a_point_that_failed_in_a_round_gets_no_worker_started_in_later_rounds(tmp_path):
    """Rounds after a point's failure start no worker for it on any lane (a worker costs a process and a
    CUDA context): a job starts the workers of the implementations it still measures."""
    log, made = [], []

    class AlwaysTimesOut(Fake):
        def run(self, key, task, timeout_s, progress=None):
            if task.impl == "other":
                return ImplResult(task.impl, "timeout", "no result within 1 s; the worker was killed")
            return super().run(key, task, timeout_s, progress)

    def make(lane):
        made.append(AlwaysTimesOut(lane, []))
        return made[-1]

    lanes = [replace(lane, make_executor=lambda i=lane.index: make(i)) for lane in _lanes(2, log)]
    _measure(_units(tmp_path), lanes, repeat=3)
    later = [key for ex in made[2:] for e in ex.log if e[0] == "prestart" for key in e[2]]  # rounds 2 and 3
    assert len(made) == 6 and later
    assert not any(key[1] == "other" for key in later) and any(key[1] == "baseline" for key in later)


def test_the_run_notes_the_processes_the_lanes_killed_for_leaving_their_workers_group(tmp_path):
    """Each lane's pool counts what its sweeps killed (pool.sweep, Pool.escaped); the run notes the sum."""
    from solbench.execute.session import escaped_note

    class Escaping(Fake):
        def close(self):
            super().close()
            self.escaped = 1 + self.lane

    log = []
    lanes = [replace(lane, make_executor=lambda i=lane.index: Escaping(i, log)) for lane in _lanes(2, log)]
    run = _measure(_units(tmp_path), lanes, repeat=2)
    assert run.notes[-1] == escaped_note(2 * (1 + 2))  # two rounds of both lanes
    assert not _measure(_units(tmp_path), _lanes(2, log)).notes  # nothing killed: no note


def test_a_lane_whose_retire_fails_stops_the_run_instead_of_leaving_it_waiting(tmp_path):
    """A retirement that raises (a Ray actor lost between cases) ended its lane's thread without a word
    while the scheduler went on handing that lane jobs nobody would run: the run waited forever. It
    is raised like a job's error, and every lane is closed."""
    made = []

    class RetireFails(Fake):
        def retire(self, keys):
            raise RuntimeError("lane lost")

    lanes = [replace(lane, make_executor=lambda i=lane.index: made.append(RetireFails(i, [])) or made[-1])
             for lane in _lanes(1, [])]
    outcome = []

    def measure():
        try:
            _measure(_units(tmp_path, (1, 1)), lanes)  # one lane: w0, retired, then w1 on the same lane
        except RuntimeError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=measure, daemon=True)
    thread.start()
    thread.join(60)  # only bounds the test: the run either raises at once or never returns
    assert not thread.is_alive(), "the run kept waiting for a lane whose thread had ended"
    assert [str(e) for e in outcome] == ["lane lost"] and all(ex.closed for ex in made)


def test_a_case_measured_before_runs_on_its_devices_lane_or_is_skipped_where_none_is_on_it(tmp_path):
    """Rounds added to cases measured before (run --gate-against's re-measure): each case on the lane of
    the device its first rounds recorded, never on whichever lane is free; a device no lane is on
    (a Ray actor placed elsewhere) skips the case, so nothing is pooled across devices."""
    units = _units(tmp_path, (1, 1))
    log = []
    lanes = _lanes(3, log)
    (w0,), (w1,) = (u.cases for u in units)
    gone = replace(lanes[2].environment, device_index=7, device_name="GPU7")
    measured_on = {("w0", w0.id): lanes[2].environment, ("w1", w1.id): gone}
    run = _measure(units, lanes, measured_on=measured_on, repeat=2)
    assert {(e[1], e[2]) for e in log if e[0] == "start"} == {(2, w0.id)}
    (first, second) = run.cases
    assert first.device.device_index == 2 and first.impls[0].timing.n_rounds == 2
    assert {(r.status, r.message) for r in second.impls} == {
        ("skipped", "its earlier rounds were measured on GPU7 (device 7), which this run has no lane on: a case's "
                    "rounds are not merged across devices")}
    assert second.device is None  # measured on no device (it named lane 0's)


def test_one_device_is_named_by_its_uuid_else_by_host_name_and_index():
    from tests.unit.factories import make_env

    a = make_env(device_uuid="GPU-a", device_index=0, host="n1")
    assert shard.same_device(a, replace(a, device_index=3))  # the UUID decides (a Ray actor sees index 0)
    assert not shard.same_device(a, replace(a, device_uuid="GPU-b"))
    cpu = make_env(device_kind="cpu", device_index=1, host="n1")
    assert shard.same_device(cpu, replace(cpu, host_load=0.5))
    assert not shard.same_device(cpu, replace(cpu, device_index=0))
    assert not shard.same_device(cpu, replace(cpu, host="n2"))


def test_a_multi_rank_case_measured_before_runs_on_the_same_group_of_lanes(tmp_path):
    """A multi-rank case records the first lane of its group only; its added rounds (run --gate-against)
    went to whichever lanes were free: first measured on lanes (1, 2), re-measured alone on (0, 1).
    A group is now its first lane and the lanes after it (lane order, wrapping round), so the lane a
    case records names its group, and the re-measure runs on the same GPUs."""
    narrow, other = _units(tmp_path, (1, 1))
    narrow = replace(narrow, cases=(replace(narrow.cases[0], params={**narrow.cases[0].params, "n": 4096}),))
    wide = Unit(SimpleNamespace(name=other.spec.name, implementations=other.spec.implementations, world_size=2,
                                reference_dtype=other.spec.reference_dtype),
                other.path, other.cases, other.impls)
    groups = []

    def group(lanes, unit):
        groups.append(tuple(lane.index for lane in lanes))
        return Fake("g", [])

    lanes = _lanes(3, [])
    first = _measure([narrow, wide], lanes, group=group)
    (case,) = [c for c in first.cases if c.workload == wide.spec.name]
    assert groups == [(1, 2)] and case.device.device_index == 1
    again = _measure([replace(narrow, cases=()), wide], lanes, group=group,  # the re-measure's cases only
                     measured_on={(c.workload, c.case_id): c.device for c in first.cases})
    assert groups == [(1, 2), (1, 2)]
    assert [(c.workload, c.device.device_index) for c in again.cases] == [(wide.spec.name, 1)]


def test_a_wide_job_takes_the_lanes_after_its_first_wrapping_round():
    s = Scheduler([_job(0, 0, 9, width=2)], [0, 1, 2, 3])
    assert s.assign([0, 2]) == []  # (0, 1) and (2, 3): neither free
    assert [(j.order, lanes) for j, lanes in s.assign([0, 3])] == [(0, (3, 0))]
    s = Scheduler([_job(0, 0, 9, width=2)], [0, 1, 2, 3])
    assert [(j.order, lanes) for j, lanes in s.assign([1, 2])] == [(0, (1, 2))]


# --- a lane lost (a Ray actor died): its work moves to the lanes left ---

def _dying_lanes(n, log, dies, made=None, dies_retiring=(), on_lost=None):
    """Lanes whose executors raise LaneLost from ``dies(lane, task, round)`` on (or from their first
    retirement, for the lanes in ``dies_retiring``); a lost lane stays lost: every later call, and a
    fresh executor for a later round, raises too (as a dead Ray actor does). ``on_lost()``: called as a
    lane dies retiring."""
    from solbench.errors import LaneLost

    dead: set[int] = set()
    rounds = dict.fromkeys(range(n), 0)

    class Dying(Fake):
        def _alive(self):
            if self.lane in dead:
                raise LaneLost(f"the Ray actor of lane {self.lane} died (gone)")

        def prestart(self, keys):
            self._alive()
            super().prestart(keys)

        def run(self, key, task, timeout_s, progress=None):
            self._alive()
            if dies(self.lane, task, self.round):
                dead.add(self.lane)
                self.log.append(("died", self.lane, task.case.id, task.impl))
                self._alive()
            return super().run(key, task, timeout_s, progress)

        def retire(self, keys):
            if self.lane in dies_retiring:
                dead.add(self.lane)
                if on_lost is not None:
                    on_lost()
            self._alive()
            super().retire(keys)

    def make(lane):
        if lane in dead:
            raise LaneLost(f"the Ray actor of lane {lane} died (gone)")
        rounds[lane] += 1
        ex = Dying(lane, log)
        ex.round = rounds[lane]
        if made is not None:
            made.append(ex)
        return ex

    return [replace(lane, make_executor=lambda i=lane.index: make(i)) for lane in _lanes(n, log)], dead


def test_a_case_whose_lane_is_lost_in_the_first_round_is_measured_again_on_another(tmp_path):
    """Lane 1 dies while it measures its first case's first implementation: that case is measured again
    from its start on lane 0, the implementation that was running then measured last, and the run
    finishes there, every point ok, with a note of the loss."""
    log = []
    lanes, dead = _dying_lanes(2, log, lambda lane, task, rnd: lane == 1)
    units = _units(tmp_path)
    run = _measure(units, lanes)
    assert dead == {1}
    died = next(e for e in log if e[0] == "died")
    assert died[3] == "baseline"
    moved = [e[3] for e in log if e[0] == "start" and e[1] == 0 and e[2] == died[2]]
    assert moved == ["other", "baseline"]  # the one measuring when the lane died, last
    assert [c.case_id for c in run.cases] == [c.id for u in units for c in u.cases]
    for case in run.cases:
        assert [r.name for r in case.impls] == ["baseline", "other"]  # in the workload's order
        assert {r.status for r in case.impls} == {"ok"} and case.device.device_index == 0
    assert any(n.startswith("lane 1 (GPU1) was lost in the first round: the Ray actor of lane 1 died")
               and f"{died[2]} (baseline was being measured) is measured again" in n for n in run.notes)


def test_a_case_that_loses_a_second_lane_keeps_what_it_finished_and_the_run_goes_on(tmp_path):
    """An implementation that takes down whichever lane measures it (a hostile one killing its actor)
    costs two lanes at most: the second time, what that lane finished of the case stands, the
    implementation is crashed and not measured again, and the lane left measures every other case."""
    units = _units(tmp_path, (2, 2))
    target = units[0].cases[0].id
    log = []
    lanes, dead = _dying_lanes(3, log, lambda lane, task, rnd: task.case.id == target and task.impl == "other")
    run = _measure(units, lanes)
    assert len(dead) == 2
    case = next(c for c in run.cases if c.case_id == target)
    status = {r.name: (r.status, r.message) for r in case.impls}
    assert status["baseline"][0] == "ok" and status["other"][0] == "crashed"
    assert "the second lane this case lost" in status["other"][1]
    assert case.device.device_index in dead  # measured where it finished: the second lost lane
    others = [c for c in run.cases if c.case_id != target]
    assert len(others) == 3 and all(r.status == "ok" for c in others for r in c.impls)
    assert sum("was lost in the first round" in n for n in run.notes) == 2


def test_a_lane_lost_in_a_later_round_leaves_its_cases_the_rounds_they_have(tmp_path):
    """Rounds are never merged across devices: lane 1 dies in round 2 while measuring its case's second
    implementation, so that case keeps round 2 of its first implementation and round 1 of the second,
    lane 1's other cases keep round 1, and lane 0's cases get both rounds."""
    units = _units(tmp_path, (2, 2))
    log = []
    lanes, dead = _dying_lanes(2, log, lambda lane, task, rnd: lane == 1 and rnd == 2 and task.impl == "other")
    run = _measure(units, lanes, repeat=2)
    assert dead == {1}
    died = next(e for e in log if e[0] == "died")
    on = {c.case_id: c for c in run.cases}
    assert len(on) == 4
    for case in run.cases:
        rounds = {r.name: r.timing.n_rounds for r in case.impls}
        assert {r.status for r in case.impls} == {"ok"}
        if case.device.device_index == 0:
            assert rounds == {"baseline": 2, "other": 2}
        elif case.case_id == died[2]:
            assert rounds == {"baseline": 2, "other": 1}
        else:
            assert rounds == {"baseline": 1, "other": 1}
    assert any(n.startswith("lane 1 (GPU1) was lost in a later round") for n in run.notes)


def test_a_lane_lost_between_rounds_is_left_out_of_the_later_ones(tmp_path):
    """An actor that died after its round (its next round's workers cannot start) loses its lane then:
    its cases keep the first round, the other lane measures both rounds of its own."""
    log = []
    lanes, dead = _dying_lanes(2, log, lambda lane, task, rnd: False)
    real = lanes[1].make_executor

    def make():
        ex = real()
        if ex.round == 2:
            dead.add(1)
            return real()  # raises LaneLost: the lane is dead
        return ex

    lanes[1] = replace(lanes[1], make_executor=make)
    run = _measure(_units(tmp_path), lanes, repeat=2)
    for case in run.cases:
        expected = 2 if case.device.device_index == 0 else 1
        assert {r.timing.n_rounds for r in case.impls} == {expected}
    assert {c.device.device_index for c in run.cases} == {0, 1}
    assert any(n.startswith("lane 1 (GPU1) was lost in a later round") for n in run.notes)


def test_a_run_whose_every_lane_is_lost_stops_in_one_line_keeping_the_cases_saved(tmp_path):
    from solbench.errors import DeviceError

    units = _units(tmp_path, (3,))
    second = units[0].cases[1].id
    log, saved = [], []
    lanes, _ = _dying_lanes(1, log, lambda lane, task, rnd: task.case.id == second)
    with pytest.raises(DeviceError) as err:
        _measure(units, lanes, estimate=lambda u, c: -float(c.params["n"]), on_case=saved.append)
    assert str(err.value).startswith("every lane was lost (the Ray actor of lane 0 died (gone))")
    assert "\n" not in str(err.value)
    assert [c.case_id for c in saved[-1].cases] == [units[0].cases[0].id]


def test_the_scheduler_drops_a_lost_lane_and_requeues_a_job_in_its_place():
    s = Scheduler([_job(0, 0, 9), _job(1, 0, 5), _job(2, 1, 1, width=2)], [0, 1], pinned={1: (1,)})
    stranded = s.drop(1)
    assert sorted(j.order for j in stranded) == [1, 2]  # pinned to the lost lane; wider than the lanes left
    assert s.lanes == (0,) and [j.order for j in s.queue] == [0]
    s.requeue(_job(3, 0, 20))
    s.requeue(_job(4, 0, 9))
    assert [j.order for j in s.queue] == [3, 0, 4]
    assert [j.order for j, _ in s.assign([0])] == [3]


def test_the_last_lane_lost_in_a_later_round_ends_the_run_with_the_rounds_measured(tmp_path):
    """Every case has its first round when the only lane dies in round 2: the run ends there, each case
    keeping the rounds it has, instead of stopping with nothing more to measure anywhere."""
    units = _units(tmp_path, (2,))
    log = []
    lanes, dead = _dying_lanes(1, log, lambda lane, task, rnd: rnd == 2 and task.impl == "other")
    run = _measure(units, lanes, repeat=3)
    assert dead == {0} and len(run.cases) == 2
    rounds = sorted(tuple(r.timing.n_rounds for r in c.impls) for c in run.cases)
    assert rounds == [(1, 1), (2, 1)]  # the case it died on kept round 2 of baseline; the other one round
    assert {r.status for c in run.cases for r in c.impls} == {"ok"}


def test_a_local_gpu_that_nvml_reports_lost_is_a_lost_lane_and_its_case_moves(tmp_path, monkeypatch):
    """A point that fails on a local GPU asks NVML whether the GPU is still there (WatchedGpu): one gone
    from the bus is a lost lane, its case measured again on the GPU left; a crash on a GPU that is
    there stays the implementation's."""
    from solbench.device import nvml
    from solbench.execute.lanes import WatchedGpu

    gone = {"uuid-1"}
    monkeypatch.setattr(nvml, "gpu_lost", lambda uuid: "NVML reports the GPU lost: GPU is lost" if uuid in gone else None)

    class CrashesOnLane1(Fake):
        def run(self, key, task, timeout_s, progress=None):
            if self.lane == 1 or (task.impl == "other" and task.case.id.startswith("w1")):
                self.log.append(("start", self.lane, task.case.id, task.impl))
                return ImplResult(task.impl, "crashed", "CUDA error: unspecified launch failure")
            return super().run(key, task, timeout_s, progress)

    log = []
    lanes = [replace(lane, make_executor=lambda i=lane.index: WatchedGpu(CrashesOnLane1(i, log), f"uuid-{i}",
                                                                        f"GPU {i}"))
             for lane in _lanes(2, log)]
    units = _units(tmp_path)
    run = _measure(units, lanes)
    assert all(c.device.device_index == 0 for c in run.cases)
    status = {(c.case_id, r.name): r.status for c in run.cases for r in c.impls}
    assert {s for (case, _), s in status.items() if case.startswith("w0")} == {"ok"}
    assert {status[(c.id, "other")] for c in units[1].cases} == {"crashed"}  # lane 0's own crashes stand
    assert any(n.startswith("lane 1 (GPU1) was lost in the first round: GPU 1 is gone (NVML reports the GPU lost")
               for n in run.notes)
    assert WatchedGpu(Fake(0, []), "uuid-0", "GPU 0").hold_budget(("w", "x")) is None  # every task through run


def test_nvml_says_a_gpu_is_lost_only_for_its_lost_error(monkeypatch):
    from solbench.device import nvml

    class NVMLError(Exception):
        def __init__(self, value):
            super().__init__({15: "GPU is lost", 6: "Not Found"}[value])
            self.value = value

    class FakeNvml:
        NVML_ERROR_GPU_IS_LOST = 15

        def __init__(self, error):
            self.NVMLError, self.error, self.asked = NVMLError, error, []

        def nvmlDeviceGetHandleByUUID(self, uuid):
            self.asked.append(uuid)
            return "handle"

        def nvmlDeviceIsMigDeviceHandle(self, handle):
            return False

        def nvmlDeviceGetPciInfo(self, handle):
            if self.error is not None:
                raise NVMLError(self.error)
            return "pci"

    for error, expected in ((15, "NVML reports the GPU lost: GPU is lost"), (6, None), (None, None)):
        fake = FakeNvml(error)
        monkeypatch.setattr(nvml, "_state", {"module": fake, "tried": True})
        assert nvml.gpu_lost("abc") == expected
        assert fake.asked == ["GPU-abc"]
    monkeypatch.setattr(nvml, "_state", {"module": None, "tried": True})
    assert nvml.gpu_lost("GPU-abc") is None


def test_a_lane_lost_retiring_its_workers_hands_back_the_case_it_was_given_meanwhile(tmp_path):
    """A lane dies as it retires one workload's workers, while the scheduler has already handed it a case
    of another (rule 3): that case, never started there, is measured on the lane left; the run neither
    waits forever for it nor loses it."""
    units = _units(tmp_path, (1, 6))
    log = []
    lost = threading.Event()

    def dies(lane, task, rnd):
        # lane 0 holds its first case until lane 1 is lost, so w1's cases are still queued when lane 1,
        # done with w0's only case, retires w0's workers (and is handed one of them meanwhile)
        if lane == 0:
            lost.wait(30)  # only bounds the test
        return False

    lanes, dead = _dying_lanes(2, log, dies, dies_retiring=(1,), on_lost=lost.set)
    outcome = []

    def measure():
        outcome.append(_measure(units, lanes))

    thread = threading.Thread(target=measure, daemon=True)
    thread.start()
    thread.join(60)  # only bounds the test
    assert not thread.is_alive(), "the run kept waiting for a case handed to a lane that was lost"
    (run,) = outcome
    assert dead == {1} and len(run.cases) == 7
    assert {r.status for c in run.cases for r in c.impls} == {"ok"}
    assert any(n.startswith("lane 1 (GPU1) was lost in the first round") for n in run.notes)
    moved = {e[2] for e in log if e[0] == "start" and e[1] == 0 and e[2].startswith("w1")}
    assert len(moved) == 6  # every w1 case, the one handed to lane 1 among them, measured on lane 0


def test_a_lane_lost_retiring_its_workers_after_the_last_case_is_noted(tmp_path):
    """Lane 1 dies retiring its workers once the run has nothing left to hand out: no result is
    affected, but the loss is a note of the run, as any other loss is."""
    units = _units(tmp_path, (1, 1))
    log = []

    def dies(lane, task, rnd):  # lane 1 finishes last: its retirement comes after the scheduler's last job
        deadline = time.monotonic() + 30  # only bounds the test
        while lane == 1 and not any(e[:2] == ("retire", 0) for e in log) and time.monotonic() < deadline:
            time.sleep(0.01)
        return False

    lanes, dead = _dying_lanes(2, log, dies, dies_retiring=(1,))
    run = _measure(units, lanes)
    assert dead == {1} and len(run.cases) == 2
    assert {r.status for c in run.cases for r in c.impls} == {"ok"}
    assert [n for n in run.notes if n.startswith("lane 1 (GPU1) was lost in the first round: the Ray actor")]


@pytest.mark.parametrize("dies", ["in round 1", "in round 2", "retiring"])
def test_the_progress_counts_every_case_once_a_round_whatever_lanes_are_lost(tmp_path, dies):
    """The bar's total is cases x rounds: a case moved, kept or never measured after a loss still counts
    once a round, never twice."""
    units = _units(tmp_path, (1, 6))
    rule = {"in round 1": lambda lane, task, rnd: lane == 1 and rnd == 1 and task.impl == "other",
            "in round 2": lambda lane, task, rnd: lane == 1 and rnd == 2 and task.impl == "other",
            "retiring": lambda lane, task, rnd: False}[dies]
    lanes, dead = _dying_lanes(2, [], rule, dies_retiring=(1,) if dies == "retiring" else ())
    events = []
    run = measure_sharded(units, make_run({}), lanes, settings=MeasureSettings(), timeout_s=1.0,
                          estimate=lambda u, c: float(c.params["n"]), emit=lambda e, d: events.append((e, d)),
                          repeat=2)
    assert dead == {1} and len(run.cases) == 7
    done = [d["case"] for e, d in events if e == "case_done"]
    assert sorted(done) == sorted(c.case_id for c in run.cases for _ in range(2))
