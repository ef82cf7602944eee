"""Runs that compile have the fork server import torch.compile's machinery once, before the first
worker is forked (:func:`solbench.measure.pool.preload_compiler`). Each check runs in a fresh
interpreter, whose fork server starts with the preload list it is given."""

import os
import sys
from types import SimpleNamespace

import pytest

from solbench import api
from solbench.execute import warm
from solbench.measure import pool, preload
from solbench.measure.worker import MeasureSettings
from tests.unit.preloading import first_task

PRELOAD_YAML = "tests/data/preload/preload.yaml"

def test_a_compiling_runs_workers_start_with_torch_compile_imported():
    assert first_task("compiler", PRELOAD_YAML, "cpu").startswith("ok")


def test_other_runs_workers_do_not():
    line = first_task("plain", PRELOAD_YAML, "cpu")
    assert line.startswith("error") and "not imported before the task" in line


def test_compiling_ahead_asks_for_the_preload_only_where_something_compiles(monkeypatch, tmp_path):
    asked = []
    monkeypatch.setattr(pool, "preload_compiler", lambda: asked.append(True) or True)
    info = SimpleNamespace(kind="cpu", index=None)
    options = SimpleNamespace(compile_jobs=0, timeout_s=10.0, compile_cache_dir=None)  # nothing compiles ahead
    for path, compiles in (("tests/data/double.yaml", False), ("tests/data/compiled.yaml", True)):
        planned = api.plan([path], "cpu")
        units = [warm.Unit(p.spec, p.path, tuple(p.cases), tuple(p.spec.implementations)) for p in planned]
        asked.clear()
        warm.ahead_of_run(units, MeasureSettings(), str(tmp_path), info, options)
        assert bool(asked) == compiles, path


def test_the_preload_imports_without_letting_torch_initialize_cuda(monkeypatch):
    """The imports run with PYTORCH_NVML_BASED_CUDA_CHECK=1 (torch.cuda.is_available() then asks NVML,
    not the driver), the variable is restored after, and an import that fails does not stop it."""
    monkeypatch.syspath_prepend("tests/data/preload")
    for name in ("sees_nvml_check", "raises_at_import"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.delenv(preload.NVML_CHECK, raising=False)
    monkeypatch.delenv(preload.TAINTED, raising=False)
    preload.preload(("raises_at_import", "sees_nvml_check"), initialized=lambda: False)
    assert sys.modules["sees_nvml_check"].SEEN == "1"
    assert preload.NVML_CHECK not in os.environ and preload.TAINTED not in os.environ
    monkeypatch.setenv(preload.NVML_CHECK, "0")
    del sys.modules["sees_nvml_check"]
    preload.preload(("sees_nvml_check",), initialized=lambda: False)
    assert sys.modules["sees_nvml_check"].SEEN == "1" and os.environ[preload.NVML_CHECK] == "0"


def test_an_import_that_initializes_cuda_stops_the_preload_and_is_named(monkeypatch):
    monkeypatch.syspath_prepend("tests/data/preload")
    monkeypatch.delitem(sys.modules, "sees_nvml_check", raising=False)
    monkeypatch.delenv(preload.TAINTED, raising=False)
    seen = []
    preload.preload(("json", "sees_nvml_check"), initialized=lambda: seen.append(True) or True)
    assert os.environ[preload.TAINTED] == "json" and seen == [True]
    assert "sees_nvml_check" not in sys.modules  # nothing imported after the tainting one


def test_a_cuda_worker_of_a_tainted_fork_server_refuses_to_start(monkeypatch):
    monkeypatch.delenv(preload.TAINTED, raising=False)
    preload.refuse_tainted("cuda")  # nothing set: starts
    monkeypatch.setenv(preload.TAINTED, "cupy")
    preload.refuse_tainted("cpu")  # the CPU does not care
    with pytest.raises(RuntimeError, match=r"initialized CUDA while importing 'cupy'.*SOLBENCH_PRELOAD=0"):
        preload.refuse_tainted("cuda")


def _maps() -> str:
    with open("/proc/self/maps") as f:
        return f.read()


def test_the_driver_check_loads_nothing_on_a_machine_without_libcuda():
    if "libcuda.so" in _maps():
        pytest.skip("libcuda is loaded in this process (a GPU machine): covered by tests/gpu")
    assert preload.driver_initialized() is False
    assert "libcuda.so" not in _maps()


def test_gpu_runs_ask_for_the_library_preload_and_cpu_runs_do_not(monkeypatch, tmp_path):
    asked = []
    monkeypatch.setattr(pool, "preload_libraries", lambda: asked.append(True) or True)
    options = SimpleNamespace(compile_jobs=0, timeout_s=10.0, compile_cache_dir=None)
    planned = api.plan(["tests/data/double.yaml"], "cpu")
    units = [warm.Unit(p.spec, p.path, tuple(p.cases), tuple(p.spec.implementations)) for p in planned]
    for kind, wanted in (("cpu", False), ("cuda", True)):
        asked.clear()
        warm.ahead_of_run(units, MeasureSettings(), str(tmp_path), SimpleNamespace(kind=kind, index=None, uuid=None), options)
        assert bool(asked) == wanted, kind


def test_the_library_preload_is_listed_once_and_can_be_turned_off(monkeypatch):
    from multiprocessing import forkserver

    extra = (pool.LIBRARY_PRELOAD, pool.COMPILER_PRELOAD)  # a run earlier in this process may have added them
    monkeypatch.setattr(pool, "_PRELOAD", [name for name in pool._PRELOAD if name not in extra])
    monkeypatch.setattr(forkserver._forkserver, "_forkserver_pid", None)
    monkeypatch.setenv("SOLBENCH_PRELOAD", "0")
    assert not pool.preload_libraries() and not pool.preload_compiler()
    assert pool.LIBRARY_PRELOAD not in pool._PRELOAD and pool.COMPILER_PRELOAD not in pool._PRELOAD
    monkeypatch.delenv("SOLBENCH_PRELOAD")
    assert pool.preload_libraries() and pool.preload_libraries()
    assert pool._PRELOAD.count(pool.LIBRARY_PRELOAD) == 1


def test_a_worker_that_dies_while_starting_is_not_blamed_on_the_implementation(tmp_path):
    worker = pool.ProcessWorker("cpu", None, tree=str(tmp_path / "no such tree"))
    try:
        result, fatal = worker.run(SimpleNamespace(impl="baseline"), 60)
    finally:
        worker.close()  # its log and scratch folder removed
    assert fatal and result.status == "crashed"
    assert "while starting, before it ran any task" in result.message
    assert "FileNotFoundError" in result.message and "in the implementation" not in result.message


def test_a_workers_tqdm_bars_take_a_lock_of_that_process_not_a_semaphore():
    """torch.fx makes a tqdm bar for every graph torch.compile runs; tqdm's default lock in a worker
    the fork server started is a named semaphore, which a killed worker never unlinks (the resource
    tracker's "leaked semaphore" warning at the end of a GPU suite run)."""
    pytest.importorskip("tqdm")
    line = first_task("plain", "tests/data/preload/bars.yaml", "cpu")
    assert line.startswith("ok"), line
