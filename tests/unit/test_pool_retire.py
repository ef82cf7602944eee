"""Retired workers tear down while the next ones start, and are gone before anything is measured
(:class:`solbench.measure.pool.Pool`). Real worker processes on the CPU; nothing is timed."""

import signal
from pathlib import Path
from types import SimpleNamespace

from solbench import api
from solbench.measure import pool
from solbench.measure.worker import MeasureSettings, Task

DOUBLE = "tests/data/double.yaml"
SETTINGS = MeasureSettings(timer="cpu", warmup=1, min_samples=3, max_samples=5, budget_s=0.05)


def _task(impl: str, path: str = DOUBLE) -> Task:
    (planned,) = api.plan([path], "cpu")
    return Task(planned.spec, planned.cases[0], impl, str(Path(path).parent.absolute()), "cpu", SETTINGS)


def test_retired_workers_are_gone_once_the_next_ones_are_ready():
    p = pool.Pool("cpu", None)
    try:
        p.prestart([("double", "baseline")])
        old = p._workers[("double", "baseline")]
        p.retire([("double", "baseline")])
        assert ("double", "baseline") not in p._workers and p._leaving == [old]  # asked to exit, not waited for
        p.prestart([("double", "baseline")])
        assert p._leaving == []
        assert old._proc.exitcode is not None  # exited before the new worker was handed a task
        assert p._workers[("double", "baseline")] is not old
    finally:
        p.close()


def test_a_task_after_a_retire_waits_for_the_retired_worker():
    p = pool.Pool("cpu", None)
    try:
        p.prestart([("double", "baseline"), ("double", "wrong")])
        leaving = p._workers[("double", "wrong")]
        p.retire([("double", "wrong")])
        result = p.run(("double", "baseline"), _task("baseline"), timeout_s=120)
        assert result.status == "ok", result.message
        assert leaving._proc.exitcode is not None
    finally:
        p.close()
    assert p._workers == {} and p._leaving == []


def test_a_retired_worker_that_does_not_exit_when_asked_is_killed_and_counted(monkeypatch):
    """A kill skips the exit's finalizers (a named semaphore left to the resource tracker), so the
    pool counts each worker it had to kill (the run's harness: ``workers_killed``)."""
    monkeypatch.setattr(pool, "EXIT_WAIT_S", 0.5)
    p = pool.Pool("cpu", None)
    try:
        result = p.run(("lingering", "baseline"), _task("baseline", "tests/data/lingering.yaml"), timeout_s=120)
        assert result.status == "ok", result.message
        worker = p._workers[("lingering", "baseline")]
        assert p.overstayed == 0 and not worker.overstayed
        p.retire([("lingering", "baseline")])
        p.prestart([])  # waits for the retired worker: killed once EXIT_WAIT_S has passed
        assert worker.overstayed and p.overstayed == 1
        assert worker._proc.exitcode == -signal.SIGKILL
    finally:
        p.close()


def test_a_cuda_worker_counts_its_devices_once():
    """torch asks NVML afresh at every device_count() before CUDA is initialized; a worker fills
    torch's cache from one runtime count (pool._count_devices_once), and leaves a torch without
    that cache, or with it already filled, as it is."""
    calls = []

    def count():
        calls.append(1)
        return 2

    fake = SimpleNamespace(cuda=SimpleNamespace(_cached_device_count=None),
                           _C=SimpleNamespace(_cuda_getDeviceCount=count))
    pool._count_devices_once(fake)
    assert fake.cuda._cached_device_count == 2 and len(calls) == 1
    pool._count_devices_once(fake)  # already filled: not counted again
    assert len(calls) == 1
    older = SimpleNamespace(cuda=SimpleNamespace(), _C=SimpleNamespace(_cuda_getDeviceCount=count))
    pool._count_devices_once(older)  # a torch without the cache: untouched
    assert not hasattr(older.cuda, "_cached_device_count") and len(calls) == 1


def test_a_profiled_worker_makes_the_folder_it_was_given(tmp_path, monkeypatch):
    """SOLBENCH_PROFILE_DIR naming a folder not made yet: the worker's profile still lands there
    (it used to fail on leaving, unseen, and the folder stayed empty)."""
    import os

    folder = tmp_path / "not" / "yet"
    monkeypatch.setenv(pool.PROFILE_ENV, str(folder))
    pool._profiled(lambda: None)
    assert {p.name for p in folder.iterdir()} == {f"worker-{os.getpid()}.prof", f"worker-{os.getpid()}.imports"}


def test_a_worker_that_does_not_start_in_time_is_a_start_up_timeout_not_a_crash(monkeypatch):
    # TimeoutError is an OSError: caught as one, a worker that missed the start-up limit read "crashed"
    w = pool.ProcessWorker("cpu", None)

    def late() -> None:
        raise TimeoutError

    monkeypatch.setattr(w, "_wait_ready", late)
    try:
        result, fatal = w.send(_task("baseline"), 10.0)
    finally:
        w.kill()
    assert fatal and result.status == "timeout"
    assert "did not start within" in result.message


def test_a_task_with_a_timeout_of_weeks_is_measured():
    # `run --timeout 1e7` (any finite number is taken): the parent's read of the worker's messages handed
    # the whole 115 days to poll, which refused it (OverflowError), and the run crashed
    w = pool.ProcessWorker("cpu", None)
    try:
        result, fatal = w.run(_task("baseline"), 1e7)
    finally:
        w.close()
    assert result.status == "ok" and not fatal, result.message
