"""Compiling ahead (solbench.execute.warm): the run's own torch.compile cache, filled side by side
before the first round, then loaded by the measuring workers."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from solbench.cli import main
from solbench.execute import warm
from solbench.kernels.requirements import requirement_missing
from solbench.measure.worker import MeasureSettings
from solbench.plan.prepare import Unit
from solbench.plan.workloads import plan
from solbench.results import store

WORKLOAD = "tests/data/compiled.yaml"


def _units(device: str = "cpu") -> list[Unit]:
    return [Unit(p.spec, p.path, tuple(p.cases), tuple(p.spec.implementations)) for p in plan([WORKLOAD], device)]


@pytest.mark.skipif(requirement_missing("inductor", "cpu") is not None, reason="no C++ compiler for Inductor")
def test_warm_tasks_are_the_compiling_implementations_of_every_case_in_run_order():
    tasks = warm.warm_tasks(_units(), MeasureSettings(compile_cache="/c"), "cpu", threads=3)
    assert [(t.case.params["n"], t.impl) for t in tasks] == [(64, "compiled"), (128, "compiled")]
    assert all(t.warm == 3 and t.settings.compile_cache == "/c" for t in tasks)  # on_gpu needs CUDA: left out
    met = {n: all(requirement_missing(need, "cuda") is None for need in needs)
           for n, needs in (("compiled", ["inductor"]), ("on_gpu", ["compile"]))}
    on_gpu = warm.warm_tasks(_units(), MeasureSettings(compile_cache="/c"), "cuda", threads=3)
    assert [(t.case.params["n"], t.impl) for t in on_gpu] == [(n, name) for n in (64, 128)
                                                              for name in ("compiled", "on_gpu") if met[name]]
    first = tasks[0].case.id
    only = warm.warm_tasks(_units(), MeasureSettings(), "cpu", threads=1, keys=(f"{first}/compiled",))
    assert [(t.case.id, t.impl) for t in only] == [(first, "compiled")]


@pytest.mark.skipif(requirement_missing("inductor", "cpu") is not None, reason="no C++ compiler for Inductor")
def test_nothing_is_compiled_ahead_where_one_process_would_do_it_alone():
    settings = MeasureSettings(compile_cache="/nowhere")
    one_job = warm.compile_ahead(_units(), settings, device="cpu", device_index=None, jobs=1, timeout_s=10)
    assert (one_job.jobs, one_job.tasks) == (0, 2)
    no_cache = warm.compile_ahead(_units(), MeasureSettings(), device="cpu", device_index=None, jobs=4, timeout_s=10)
    assert no_cache.jobs == 0 and no_cache.tasks == 0


def test_default_jobs_are_half_the_cpus_within_one_and_eight():
    assert [warm.default_jobs(n) for n in (1, 2, 3, 16, 64)] == [1, 1, 1, 8, 8]


def test_the_run_folder_is_removed_and_a_kept_folder_is_left(tmp_path):
    with warm.cache_folder(None) as folder:
        Path(folder, "x").write_text("1")
        assert Path(folder).is_dir()
    assert not Path(folder).exists()
    kept = tmp_path / "cache"
    with warm.cache_folder(kept) as folder:
        Path(folder, "x").write_text("1")
    assert (kept / "x").read_text() == "1" and folder == str(kept.absolute())


def test_only_autotuning_choices_are_forgotten(tmp_path):
    (tmp_path / "ab").mkdir()
    (tmp_path / "ab" / "k.best_config").write_text("{}")
    (tmp_path / "ab" / "k.py").write_text("# kernel")
    (tmp_path / "k2.best_config").write_text("{}")
    assert warm._forget_autotuning(str(tmp_path)) == 2
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == ["k.py"]


@pytest.mark.skipif(requirement_missing("inductor", "cpu") is not None, reason="no C++ compiler for Inductor")
def test_a_run_compiles_ahead_and_its_measuring_workers_load_the_cache():
    from solbench import api

    events: list[tuple[str, dict]] = []
    options = api.RunOptions(impls=("compiled",), compile_jobs=2, budget_s=0.02, min_samples=3, max_samples=5)
    run = api.run([WORKLOAD], options, device="cpu", progress=lambda e, d: events.append((e, d)))
    assert run.protocol.compile_ahead == 2 and run.protocol.compile_cache == "run"
    assert run.harness["compile_ahead_s"] > 0
    compiled = [r for c in run.cases for r in c.impls if r.name == "compiled"]
    assert len(compiled) == 2 and all(r.status == "ok" for r in compiled)
    # every graph the measuring workers needed came from the cache the run filled ahead
    assert all(r.protocol.get("compile_cache_hits", 0) >= 1 for r in compiled)
    assert all("compile_cache_misses" not in r.protocol for r in compiled)
    assert all(r.protocol["compile_threads"] == 1 for r in compiled)  # loaders start no compile pool
    assert [d for e, d in events if e == "compile_ahead"] == [{"tasks": 2, "jobs": 2}]
    assert sorted(d["done"] for e, d in events if e == "compiled_ahead") == [1, 2]
    assert [e for e, _ in events].index("compiled_ahead") < [e for e, _ in events].index("impl")  # before timing


@pytest.mark.skipif(requirement_missing("inductor", "cpu") is not None, reason="no C++ compiler for Inductor")
def test_without_compiling_ahead_the_worker_compiles_for_itself_into_a_kept_folder(tmp_path):
    out, kept = tmp_path / "run.json", tmp_path / "cache"
    result = CliRunner().invoke(main, ["run", WORKLOAD, "--device", "cpu", "-o", str(out), "-q", "-i", "compiled",
                                       "--case", "n=64", "--compile-jobs", "0", "--compile-cache", str(kept),
                                       "--budget", "0.02", "--min-samples", "3", "--max-samples", "5"])
    assert result.exit_code == 0, result.output
    run = store.load(out)
    assert run.protocol.compile_ahead == 0 and run.protocol.compile_cache == str(kept.absolute())
    assert "compile_ahead_s" not in run.harness
    (compiled,) = [r for c in run.cases for r in c.impls if r.name == "compiled"]
    assert compiled.status == "ok" and compiled.protocol.get("compile_cache_misses", 0) >= 1
    assert "compile_threads" not in compiled.protocol  # it compiles for itself: torch's own threads
    assert any(kept.rglob("*.py"))  # Inductor's generated code stayed in the kept folder


def test_an_exact_fp32_reference_gives_every_precision_setting_back_as_found():
    """torch.compile keys its cache on these strings: a reference computed before the call must
    leave them as found, or the worker misses what the run compiled ahead (seen: "none" -> "ieee")."""
    import torch

    from solbench.measure.runner import _exact_fp32

    owners = (torch.backends.cuda.matmul, torch.backends.cudnn, torch.backends.cudnn.conv, torch.backends.cudnn.rnn)
    if not hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        pytest.skip("torch before 2.9 has only the legacy booleans")
    before = [o.fp32_precision for o in owners]
    with _exact_fp32():
        assert torch.backends.cuda.matmul.allow_tf32 is False and torch.backends.cudnn.allow_tf32 is False
    assert [o.fp32_precision for o in owners] == before


def test_tasks_side_by_side_stay_within_the_memory_budget_and_one_always_runs():
    assert warm.fits(0, 10**15, 1)  # nothing running: a task larger than the budget still runs, alone
    assert warm.fits(4, 6, 10) and not warm.fits(5, 6, 10)
    assert warm.fits(10**15, 10**15, None)  # no budget known: no limit


def test_a_warm_task_holds_one_input_set_its_outputs_and_on_a_gpu_a_context():
    from dataclasses import replace

    (task, *_) = warm.warm_tasks(_units(), MeasureSettings(compile_cache="/c"), "cpu", threads=1)
    n = task.case.params["n"]
    tensors = n * 16 * 4 + 2 * n * 16 * 4  # x; y for the call and for the reference (float32: no copies)
    assert warm.task_bytes(task) == int(tensors * warm.TENSOR_MARGIN)
    assert warm.task_bytes(replace(task, device="cuda")) == warm.task_bytes(task) + warm.CONTEXT_BYTES


def test_processes_compiling_ahead_that_had_to_be_killed_are_counted(monkeypatch):
    """A worker killed for not exiting when asked skipped its exit's finalizers: the harness says how
    many (``compile_ahead_killed``), and says nothing where none was."""
    from solbench.measure import pool
    from solbench.results.model import ImplResult

    made: list = []

    def make(linger: bool):
        class Worker:
            overstayed = False

            def __init__(self, *args, **kwargs):
                made.append(self)

            def run(self, task, timeout_s):
                return ImplResult(task.impl, "ok"), False

            def close(self):
                self.overstayed = linger

        return Worker

    monkeypatch.setattr(pool, "preload_compiler", lambda: True)
    monkeypatch.setattr(warm, "_forget_autotuning", lambda folder: 0)
    settings = MeasureSettings(compile_cache="/nonexistent-cache")
    for linger in (True, False):
        made.clear()
        monkeypatch.setattr(pool, "ProcessWorker", make(linger))
        ahead = warm.compile_ahead(_units(), settings, device="cpu", device_index=None, jobs=2, timeout_s=10)
        killed = len(made) if linger else 0  # a lane starts its worker at its first task: one or two
        assert ahead.jobs == 2 and made and ahead.killed == killed
        assert ahead.harness().get("compile_ahead_killed", 0) == killed and "compile_ahead_s" in ahead.harness()
        assert ("compile_ahead_killed" in ahead.harness()) == linger
    assert warm.Ahead().harness() == {}
