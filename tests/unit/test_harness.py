"""The harness breakdown: phases recorded by workers and the run loop, rendered by show --harness."""

import io
from dataclasses import replace

from click.testing import CliRunner
from rich.console import Console

from solbench.cli import main
from solbench.report.harness import harness_rows, harness_table
from solbench.results import store
from tests.unit.factories import make_run


def test_a_cpu_run_records_every_phase_and_the_phases_fit_in_the_wall_time(tmp_path):
    out = tmp_path / "run.json"
    result = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "--device", "cpu", "-o", str(out), "-q",
                                       "--budget", "0.02", "--min-samples", "3", "--max-samples", "5"])
    assert result.exit_code in (0, 4), result.output
    run = store.load(out)
    h = run.harness
    for key in ("detect_s", "prepare_s", "workers_s", "tasks_s", "side_s", "side_setup_s", "side_check_s",
                "sample_s", "save_s", "wall_s"):
        assert key in h and h[key] >= 0, key
    # what happened inside the tasks the parent waited on: set-up and checks side by side (its wall
    # time; the workers' own seconds there overlap), then each timing loop alone
    assert h["side_s"] + h["sample_s"] <= h["tasks_s"]
    assert h["detect_s"] + h["prepare_s"] + h["workers_s"] + h["tasks_s"] + h["save_s"] <= h["wall_s"]
    # the wait for retired workers to exit (the last ones at the run's end) is part of workers_s
    assert "reap_s" in h and 0 < h["reap_s"] <= h["workers_s"]
    ok = [r for c in run.cases for r in c.impls if r.status == "ok"]
    assert ok and all("sample_s" in r.protocol and "setup_s" in r.protocol for r in ok)
    assert "gpu_busy_s" not in h  # the CPU timer has no spin or flush: no GPU-busy estimate


def test_rows_add_other_and_messaging_so_the_shares_sum_to_the_wall():
    run = make_run({"c": {"baseline": [1e-3] * 5}})
    run = replace(run, harness={"detect_s": 1.0, "prepare_s": 0.5, "workers_s": 2.0, "reap_s": 0.75,
                                                     "tasks_s": 4.0, "setup_s": 1.0, "check_s": 0.5,
                                                     "sample_s": 1.5, "after_s": 0.5, "save_s": 0.5,
                                                     "gpu_busy_s": 0.25, "capture_s": 0.4, "wall_s": 10.0})
    rows = {key: (seconds, share) for key, _, seconds, share in harness_rows(run)}
    assert rows["messaging_s"][0] == 0.5  # 4.0 - (1.0 + 0.5 + 1.5 + 0.5)
    assert rows["other_s"][0] == 2.0  # 10 - (1 + 0.5 + 2 + 4 + 0.5): the reap is inside the workers' 2
    assert rows["reap_s"] == (0.75, 0.075)
    assert rows["capture_s"] == (0.4, 0.04)  # a part of the set-up: in no sum of its own
    labels = [label for _, label, _, _ in harness_rows(run)]
    assert labels.index("  waiting for retired workers to exit (their teardown, beside the next start)") == \
        labels.index("start and retire worker processes") + 1  # shown under the worker row
    top = ("detect_s", "prepare_s", "workers_s", "tasks_s", "save_s", "other_s")
    assert abs(sum(rows[k][1] for k in top) - 1.0) < 1e-9
    assert rows["gpu_busy_s"][1] == 0.025
    text = io.StringIO()
    Console(file=text, width=120).print(harness_table(run))
    assert "GPU busy" in text.getvalue() and "2.5%" in text.getvalue()


def test_show_harness_of_a_run_without_a_record_is_one_line(tmp_path):
    path = store.save(make_run({"c": {"baseline": [1e-3] * 5}}), tmp_path / "old.json")
    result = CliRunner().invoke(main, ["show", str(path), "--harness"])
    assert result.exit_code == 2 and "no harness record" in result.output and "Traceback" not in result.output


def test_a_phase_leaves_out_the_time_spent_waiting_outside_it(monkeypatch):
    """A held task that waits for its turn inside its set-up (cuBLASLt tuning) does not count the wait
    as set-up: the allocation of samples reads set-up seconds as what a round costs."""
    from solbench.measure import worker

    now = iter([10.0, 11.0, 14.0, 16.0])  # set-up starts; the wait starts, ends; set-up ends
    monkeypatch.setattr(worker.time, "perf_counter", lambda: next(now))
    phases = worker.Phases()
    with phases("setup_s"):
        phases.outside(lambda: None)
    assert phases.seconds == {"setup_s": 3.0}  # 6 s in the block, 3 of them waiting


def test_what_a_task_does_after_taking_its_turn_early_counts_as_alone(monkeypatch):
    """A held task that tunes takes its turn inside its set-up; the rest of its set-up and its checks
    then run while the other workers wait: the parent counts them as the run's own time, not as
    side by side (they were the harness table's "messaging" before)."""
    from solbench.execute.session import Harness
    from solbench.measure import worker
    from solbench.results.model import ImplResult

    # set-up starts; the wait starts, ends; the turn is taken; set-up ends; checks start, end
    now = iter([10.0, 11.0, 14.0, 14.0, 16.0, 17.0, 18.0])
    monkeypatch.setattr(worker.time, "perf_counter", lambda: next(now))
    phases = worker.Phases()
    with phases("setup_s"):
        phases.turn(lambda: None)
    with phases("check_s"):
        pass
    assert phases.seconds == {"setup_s": 3.0, "setup_alone_s": 2.0, "check_s": 1.0, "check_alone_s": 1.0}

    harness = Harness({})
    early = ImplResult("tuned", "ok", protocol={**phases.seconds, "side_by_side": 1})
    beside = ImplResult("plain", "ok", protocol={"setup_s": 4.0, "check_s": 0.5, "side_by_side": 1,
                                                 "capture_s": 0.375})
    alone = ImplResult("lone", "ok", protocol={"setup_s": 0.25, "check_s": 0.125, "capture_s": 0.125})
    harness.add_tasks([early, beside, alone])
    assert harness.seconds == {"side_setup_s": 5.0, "setup_s": 2.25, "side_check_s": 0.5, "check_s": 1.125,
                               "capture_s": 0.5}


def test_a_task_gives_back_the_last_tasks_cached_memory_as_it_starts_and_at_its_end_only_when_told(monkeypatch):
    """Given back at a task's end, the blocks went back right before the next worker timed (the byte
    floor read 10% slow for its first samples on the H200); at a task's start nothing is timed. At
    its end too where the parent cannot promise that every worker's tasks fit side by side."""
    from types import SimpleNamespace

    from solbench.measure import worker
    from solbench.results.model import ImplResult

    events = []
    monkeypatch.setattr(worker, "release_cached", lambda: events.append("give back"))

    def body():
        events.append("task")
        return ImplResult("x", "ok", "")

    for device, release_after, expected in (("cuda", False, ["give back", "task"]),
                                            ("cuda", True, ["give back", "task", "give back"]),
                                            ("cpu", True, ["task"])):
        events.clear()
        task = SimpleNamespace(device=device, impl="x", release_after=release_after)
        result, fatal = worker.guarded(task, worker.WorkerState(), body)
        assert (result.status, fatal) == ("ok", False)
        assert events == expected, (device, release_after)

    def crashes():
        events.append("task")
        raise SystemExit(3)

    events.clear()  # a fatal task's process leaves: nothing more is asked of its CUDA context
    task = SimpleNamespace(device="cuda", impl="x", release_after=True)
    result, fatal = worker.guarded(task, worker.WorkerState(), crashes)
    assert (result.status, fatal) == ("crashed", True) and events == ["give back", "task"]


def test_workers_keep_a_tasks_memory_to_its_next_task_only_where_every_case_fits_side_by_side():
    """``Task.release_after``: False only where every worker of a pass, each holding the most a case
    takes, fits in the executor's hold budget; a budget too small, or none, gives memory back as each
    task ends."""
    from solbench.execute import session
    from solbench.execute.warm import held_bytes
    from solbench.measure.worker import MeasureSettings, Task
    from tests.unit.factories import kept_as_given
    from tests.unit.test_rounds_run import OffsetExecutor, _units

    units = _units()
    need = max(held_bytes(c, input_sets=MeasureSettings().input_sets, reference_dtype=units[0].spec.reference_dtype,
                          device="cpu") for c in units[0].cases)
    most = len(units[0].impls) * 2  # workers of one pass: rounds 2-3 go out together, each in a worker of its own

    class Budgeted(OffsetExecutor):
        def __init__(self, budget):
            super().__init__()
            self.budget, self.tasks = budget, []

        def hold_budget(self, key):
            return self.budget

        def hold(self, key, task, timeout_s, progress=None):  # settled at once: no turn to wait for
            return self.run(key, task, timeout_s, progress)

        def run(self, key, task, timeout_s, progress=None):
            self.tasks.append(task)
            return super().run(key, task, timeout_s, progress)

    # (budget, given back as the task ends: in round 1 (one task a case), in rounds 2-3 (two at once))
    for budget, first, later in ((need * most, False, False), (need * most - 1, False, True),
                                 (need - 1, True, True), (None, True, True)):
        ex = Budgeted(budget)
        session.measure_units(units, make_run({}), ex, device="cpu", settings=MeasureSettings(), timeout_s=1.0,
                              l2_bytes=None, score=kept_as_given, emit=lambda e, d: None, repeat=3)
        got = {(t.checks, t.release_after) for t in ex.tasks}
        assert got == {("full", first), ("light", later)}, budget
    assert Task.__dataclass_fields__["release_after"].default is True  # where nobody says: as before


def test_a_task_ready_to_time_leaves_no_set_up_running_on_the_device(monkeypatch):
    """Before its turn a worker's set-up is done on the device: the cold and CUPTI timers' warm-up
    synchronizes; with a timer that has none (the graph timer) the device is synchronized."""
    from types import SimpleNamespace

    from solbench.measure import worker

    calls = []
    monkeypatch.setattr(worker.torch.cuda, "synchronize", lambda *a: calls.append("synchronize"))
    warmed = SimpleNamespace(warm=lambda: calls.append("warm"))
    for timer, device, expected in ((warmed, "cuda", ["warm"]), (object(), "cuda", ["synchronize"]),
                                    (object(), "cpu", [])):
        calls.clear()
        state = SimpleNamespace(timer=lambda task, t=timer: t, probe=lambda task: None)
        worker._ready_to_time(SimpleNamespace(device=device), state)
        assert calls == expected, (timer, device)


def test_a_task_ready_to_time_captures_its_graphs_before_its_turn(monkeypatch):
    """With --launch graph the timer captures (and checks) the task's own launches before the turn,
    then warms up; the timing loop's prepare finds them captured (CudaColdTimer.capture)."""
    from types import SimpleNamespace

    from solbench.measure import worker

    calls = []
    launches = [lambda: None]
    timer = SimpleNamespace(capture=lambda got: calls.append(("capture", got)), warm=lambda: calls.append("warm"))
    state = SimpleNamespace(timer=lambda task: timer, probe=lambda task: None)
    worker._ready_to_time(SimpleNamespace(device="cuda"), state, launches)
    assert calls == [("capture", launches), "warm"] and calls[0][1] is launches
    calls.clear()
    worker._ready_to_time(SimpleNamespace(device="cuda"), state)  # no launches given: nothing captured
    assert calls == ["warm"]


def test_the_table_says_how_many_point_rounds_ran_with_one_work_queue():
    run = make_run({"c": {"a": [1e-3] * 4, "b": [1e-3] * 4}})
    run = replace(run, harness={"workers_s": 1.0, "wall_s": 2.0})
    text = io.StringIO()
    Console(file=text, width=120).print(harness_table(run))
    assert "work queue" not in text.getvalue()  # none did (a CPU run, or the switch off)
    rounds = (0, 0, 1, 1, 2, 2)
    a, b = run.cases[0].impls
    three = replace(a.timing, samples=(1e-3,) * 6, rounds=rounds)
    case = replace(run.cases[0], impls=(replace(a, timing=three, protocol={"one_queue_rounds": 2}),
                                        replace(b, timing=replace(b.timing, samples=(1e-3,) * 6, rounds=rounds))))
    text = io.StringIO()
    Console(file=text, width=160).print(harness_table(replace(run, cases=(case,))))
    assert "2 of 6 point-rounds ran in a worker with one CUDA work queue" in text.getvalue()


def test_a_point_merged_over_rounds_keeps_the_most_memory_any_round_held():
    from dataclasses import replace

    from solbench.analysis.pooling import merge_rounds
    from tests.unit.factories import make_impl

    rounds = [replace(make_impl("x", [1e-3] * 5), protocol={"memory_peak_bytes": peak}) for peak in (5, 9, 7)]
    assert merge_rounds(rounds).protocol["memory_peak_bytes"] == 9
    assert "memory_peak_bytes" not in merge_rounds([make_impl("x", [1e-3] * 5)] * 2).protocol  # the CPU


def test_the_table_names_the_point_whose_worker_held_the_most_memory():
    run = make_run({"c": {"a": [1e-3] * 4, "b": [1e-3] * 4}})
    run = replace(run, harness={"workers_s": 1.0, "wall_s": 2.0})
    text = io.StringIO()
    Console(file=text, width=160).print(harness_table(run))
    assert "worker memory" not in text.getvalue()  # a CPU run records none
    a, b = run.cases[0].impls
    case = replace(run.cases[0], impls=(replace(a, protocol={"memory_peak_bytes": 3 << 29}),
                                        replace(b, protocol={"memory_peak_bytes": 1 << 29})))
    text = io.StringIO()
    Console(file=text, width=160).print(harness_table(replace(run, cases=(case,))))
    assert f"largest worker memory: 1.50 GiB at {case.case_id} a" in text.getvalue()


def test_the_memory_line_names_a_case_id_whole():
    """A case id is ``workload[param=value,...,dtype]``: read as rich markup, the brackets were a style
    tag, and the line named the workload alone ("at w a")."""
    run = make_run({"w[n=64,float32]": {"a": [1e-3] * 4}})
    (a,) = run.cases[0].impls
    case = replace(run.cases[0], impls=(replace(a, protocol={"memory_peak_bytes": 3 << 29}),))
    run = replace(run, cases=(case,), harness={"workers_s": 1.0, "wall_s": 2.0})
    text = io.StringIO()
    Console(file=text, width=160).print(harness_table(run))
    assert "largest worker memory: 1.50 GiB at w[n=64,float32] a" in text.getvalue()


def test_giving_back_cached_memory_starts_no_cuda_to_reset_a_peak():
    """Where CUDA has not started (here: a CPU build), there is no peak to reset and none is started."""
    import torch

    from solbench.measure import worker

    assert not torch.cuda.is_initialized()
    worker.release_cached()  # was torch.cuda.reset_peak_memory_stats(): AttributeError on a CPU build
    assert not torch.cuda.is_initialized() and worker.peak_reserved() == 0
