"""torch.compile paid once per run: one cache folder for the run's workers, filled ahead in parallel.

A run's workers share one compile cache (``MeasureSettings.compile_cache``, which each worker
sets as ``TORCHINDUCTOR_CACHE_DIR``): Inductor's FX graphs and generated code, and the Triton
binaries it builds. Without more, the first round's worker of each compiled implementation still
compiles every case itself, one case after the other, while the GPU waits (KernelBench level 1:
about 20 s a problem on the H200).

Before the first round, :func:`compile_ahead` therefore sets up and calls once every (case,
implementation) that declares torch.compile (``requires: [inductor]`` or ``[compile]``), and the
first case of every implementation whose set-up builds C++/CUDA sources (``requires: [build]``:
SOL-ExecBench's C++ solutions, built into torch's extensions folder, which the measuring workers
then load; on an H200 each took 60-66 s to build inside a measuring worker, one after another), in
``jobs`` processes side by side, each compiling with its share of the CPUs. Nothing is timed then.
The measuring workers load what they need from the folder (a cache hit: seconds, not tens), with
one Inductor compile thread: they start no pool of compile processes (:func:`measuring`).

Autotuning: what Inductor chooses by timing candidates on the device is stored as
``*.best_config`` files. The processes compiling ahead ran side by side on one device, so their
timings are not trusted: those files are removed afterwards, and the first measuring worker of
each kernel times the candidates again, alone on the device; later rounds reuse its choice.

A fault while compiling ahead is not a result: the measuring worker meets it again and reports it.
The folder is the run's own (made and removed by :func:`cache_folder`) unless the caller names
one to keep across runs (``--compile-cache DIR``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from solbench.measure.worker import MeasureSettings, Task
from solbench.plan.prepare import Unit, free_memory
from solbench.workload.cases import Case

COMPILING = frozenset({"inductor", "compile"})  # requirements that mean torch.compile
BUILDING = "build"  # the set-up builds C++/CUDA sources: once per implementation, not per case
MAX_JOBS = 8
MEMORY_SHARE = 0.8  # of the free memory, for the tasks compiling side by side
CONTEXT_BYTES = 1 << 30  # a CUDA context, cuBLAS workspace and Inductor's own buffers, roughly
# What a worker's allocator held at its peak over the tensors counted (worker_bytes): an implementation's
# workspace, graph pools, the timer's buffers, fresh inputs for the checks after timing, the allocator's
# rounding. On an H100, o_proj's workers peaked at up to 3.0x the tensors at 16384 tokens (5.27 GiB) and
# 4.3-6.6x at 1-2048 tokens (0.54-1.70 GiB), with a context of about 0.5 GiB beside it (bench/memory_peaks.py);
# 4x and a 1 GiB context cover every point.
TENSOR_MARGIN = 4.0
AUTOTUNE_GLOB = "*.best_config"

Progress = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class Ahead:
    """What compiling ahead did: tasks, the processes used, the wall time, the tasks that failed,
    and the processes killed for not exiting within pool.EXIT_WAIT_S of being asked."""

    tasks: int = 0
    jobs: int = 0
    seconds: float = 0.0
    failed: int = 0
    autotune_removed: int = 0
    killed: int = 0

    def harness(self) -> dict[str, float]:
        """What the run's harness (``RunResult.harness``) records of it; nothing where no process compiled."""
        if not self.jobs:
            return {}
        killed = {"compile_ahead_killed": float(self.killed)} if self.killed else {}
        return {"compile_ahead_s": self.seconds, **killed}


def default_jobs(cpus: int | None = None) -> int:
    """Processes that compile side by side: half the CPUs (each gets two compile threads), at most 8."""
    cpus = cpus or os.cpu_count() or 1
    return max(1, min(MAX_JOBS, cpus // 2))


@contextlib.contextmanager
def cache_folder(kept: Path | None) -> Iterator[str]:
    """The run's compile cache folder: ``kept`` (made if missing, left in place), or a fresh
    temporary one that is removed when the run ends."""
    if kept is not None:
        kept.mkdir(parents=True, exist_ok=True)
        yield str(kept.absolute())
        return
    folder = tempfile.mkdtemp(prefix="solbench-compile-")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def warm_tasks(units: Sequence[Unit], settings: MeasureSettings, device: str, *, threads: int,
               keys: Sequence[str] = ()) -> list[Task]:
    """One warm task per (case, implementation) that compiles and can run on ``device``, in run order;
    ``keys`` as in a run."""
    from solbench.measure.runner import missing_requirement

    tasks = []
    for unit in units:
        impls = unit.spec.implementations
        compiling = [n for n in unit.impls if (COMPILING | {BUILDING}) & set(impls[n].requires)
                     and missing_requirement(impls[n], device) is None]
        built: set[str] = set()  # a build serves every case: the first case's task builds it
        for case in unit.cases:
            for name in compiling:
                if (keys and f"{case.id}/{name}" not in keys) or name in built:
                    continue
                if not COMPILING & set(impls[name].requires):
                    built.add(name)
                tasks.append(Task(unit.spec, case, name, str(unit.path.parent.absolute()), device, settings,
                                  warm=threads))
    return tasks


def side_by_side_bytes(info: Any) -> int | None:
    """The case tensors a run's workers may hold at once while they set up and check side by side
    (:func:`solbench.execute.session.run_case`): ``MEMORY_SHARE`` of the free memory where the
    tensors go; None (one task at a time) where it cannot be read."""
    free = free_memory(info)
    return None if free is None else int(free * MEMORY_SHARE)


def fits(used: int, need: int, budget: int | None) -> bool:
    """Whether a warm task needing ``need`` bytes may start beside tasks holding ``used``: always when
    none runs (one task at a time is what the run itself needs), else within ``budget`` (None: no limit)."""
    return budget is None or used == 0 or used + need <= budget


def held_bytes(case: Case, *, input_sets: int, reference_dtype: str, device: str) -> int:
    """Device memory one worker may hold at once for ``case``: its tensors as the worker holds them
    (:func:`~solbench.workload.cases.worker_bytes`: the input sets, outputs, and references at the
    reference's dtype) times ``TENSOR_MARGIN``, and on a GPU a context (``CONTEXT_BYTES``).

    What decides which workers set up side by side (:func:`solbench.execute.session.run_case`) and
    whether they may keep cached memory between tasks (``Task.release_after``), with
    :func:`measured_held` where earlier passes measured more. Counting the tensors
    alone, at the case's dtype, an ``ab`` of o_proj on an 80 GB H100 set up every worker of a
    16384-token case side by side and let all of them keep their caches: each held 3.3-4.9 GiB against
    the 0.94 GiB counted, and the case ran out of memory.
    With ``TENSOR_MARGIN`` at 1.5, 17 workers set up side by side at 3.6 GiB counted each and the
    same cases still ran out of memory: each held up to 5.3 GiB. Each task's result records what the
    allocator really held (``memory_peak_bytes``; ``bench/memory_peaks.py`` sets it against this)."""
    from solbench.workload.cases import worker_bytes

    tensors = worker_bytes(case, input_sets=input_sets, reference_dtype=reference_dtype)
    return int(tensors * TENSOR_MARGIN) + (CONTEXT_BYTES if device == "cuda" else 0)


def measured_held(peaks: Iterable[int], device: str) -> int:
    """Device memory a worker was measured to hold for a point: the largest of its earlier rounds'
    allocator peaks (``memory_peak_bytes``) and, on a GPU, a context (``CONTEXT_BYTES``); 0 where
    none was recorded. The count of a worker's tensors (:func:`held_bytes`) cannot see what an
    implementation allocates beside them: the whole ResNet-50 at batch 256 counted 2.9 GiB a worker
    (two input sets), while its workers' allocators peaked at 5.2-13.3 GiB (activations, graph pools,
    cuDNN workspaces), so its second and third rounds, twelve workers set up side by side, ran out of
    memory on an 80 GB H100."""
    most = max(peaks, default=0)
    return most + (CONTEXT_BYTES if device == "cuda" else 0) if most else 0


def task_bytes(task: Task, *, input_sets: int = 1) -> int:
    """What ``task`` holds (:func:`held_bytes`); a warm task compiles on one input set."""
    return held_bytes(task.case, input_sets=input_sets, reference_dtype=task.spec.reference_dtype,
                      device=task.device)


def compile_ahead(units: Sequence[Unit], settings: MeasureSettings, *, device: str, device_index: int | None,
                  jobs: int, timeout_s: float, keys: Sequence[str] = (), tree: str | None = None,
                  emit: Progress | None = None, free_bytes: int | None = None) -> Ahead:
    """Run the warm tasks in ``jobs`` worker processes side by side (see the module docstring).

    Where anything compiles, the fork server first preloads torch.compile
    (:func:`solbench.measure.pool.preload_compiler`). Does nothing more where fewer than two
    processes would work at once (one job, or one task): the measuring worker compiling for itself
    costs the same. Tasks side by side hold at most
    ``MEMORY_SHARE`` of ``free_bytes`` (the device's, or the host's on the CPU; None: no limit), so
    that large problems compile one after the other instead of running each other out of memory.
    Ctrl-C kills the processes and is raised.
    """
    from solbench.measure import pool

    if not settings.compile_cache:
        return Ahead()
    cpus = os.cpu_count() or 1
    tasks = warm_tasks(units, settings, device, threads=max(1, cpus // max(jobs, 1)), keys=keys)
    if tasks:
        pool.preload_compiler()  # the run compiles: torch.compile imported once, before the first fork
    jobs = min(jobs, len(tasks))
    if jobs < 2:
        return Ahead(len(tasks))
    emit = emit or (lambda event, data: None)
    emit("compile_ahead", {"tasks": len(tasks), "jobs": jobs})
    queue: deque[Task] = deque(tasks)
    lock = threading.Condition()
    live: list[Any] = []
    failed, used, done, killed = [0], [0], [0], [0]
    budget = None if free_bytes is None else int(free_bytes * MEMORY_SHARE)
    start = time.perf_counter()

    def retire(worker: Any) -> None:
        worker.close()
        with lock:
            killed[0] += worker.overstayed

    def lane() -> None:
        worker = None
        while True:
            with lock:
                if not queue:
                    break
                task = queue.popleft()
            if worker is None:
                worker = pool.ProcessWorker(device, device_index, tree, threads=task.warm if device == "cpu" else 0)
                with lock:
                    live.append(worker)
            need = task_bytes(task)
            with lock:
                lock.wait_for(lambda need=need: fits(used[0], need, budget))
                used[0] += need
            try:
                result, fatal = worker.run(task, timeout_s)
            finally:
                with lock:
                    used[0] -= need
                    lock.notify_all()
            with lock:
                failed[0] += result.status != "ok"
                done[0] += 1
                event = {"case": task.case.id, "impl": task.impl, "status": result.status, "done": done[0],
                         "of": len(tasks)}
            emit("compiled_ahead", event)
            if fatal:
                retire(worker)
                worker = None
        if worker is not None:
            retire(worker)

    threads = [threading.Thread(target=lane, name=f"solbench-compile-{i}", daemon=True) for i in range(jobs)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.2)
    except KeyboardInterrupt:
        with lock:
            queue.clear()
            for worker in live:
                worker.abort()
        raise
    removed = _forget_autotuning(settings.compile_cache)
    return Ahead(len(tasks), jobs, round(time.perf_counter() - start, 3), failed[0], removed, killed[0])


INTERRUPTED = "interrupted (Ctrl-C or SIGTERM) while compiling ahead: nothing was measured"


def interrupted(runs: Any) -> Any:
    """Ctrl-C while compiling ahead, as the run (or the runs, ``ab``) to save: marked incomplete."""
    if isinstance(runs, list | tuple):
        return [interrupted(r) for r in runs]
    return replace(runs, complete=False, notes=(*runs.notes, INTERRUPTED))


def _forget_autotuning(folder: str) -> int:
    """Remove the autotuning choices made while compiling ahead (timed side by side); how many."""
    removed = 0
    for path in Path(folder).rglob(AUTOTUNE_GLOB):
        with contextlib.suppress(OSError):
            path.unlink()
            removed += 1
    return removed


def ahead_of_run(units: Sequence[Unit], settings: MeasureSettings, folder: str, info: Any, options: Any, *,
                 keys: Sequence[str] = (), tree: str | None = None,
                 emit: Progress | None = None) -> tuple[MeasureSettings, Ahead]:
    """A run's (or one ``ab`` tree's) compiling ahead: the settings with the cache ``folder``, the
    units compiled ahead in ``options.compile_jobs`` processes (None: :func:`default_jobs`) within the
    free memory, and the settings the measuring workers then get (:func:`measuring`)."""
    if info.kind == "cuda":
        from solbench.measure import pool

        pool.preload_libraries()  # CuPy and nvmath-python imported once, before the first fork
    kept = options.compile_cache_dir  # cuBLASLt choices kept there too; else in the machine's store
    settings = replace(settings, compile_cache=folder, choices=str(Path(kept).absolute()) if kept else "")
    jobs = default_jobs() if options.compile_jobs is None else options.compile_jobs
    ahead = compile_ahead(units, settings, device=info.kind, device_index=info.index, jobs=jobs,
                          timeout_s=options.timeout_s, keys=keys, tree=tree, emit=emit, free_bytes=free_memory(info))
    return measuring(settings, ahead), ahead


def measuring(settings: MeasureSettings, ahead: Ahead) -> MeasureSettings:
    """The settings of the measuring workers: where the run compiled ahead they only load compiled
    code, so Inductor gets one compile thread there (no pool of compile processes to start)."""
    return replace(settings, compile_threads=1) if ahead.jobs else settings


def recorded(protocol: Any, folder: str, kept: Path | None, ahead: Ahead) -> Any:
    """The run's protocol with its compile cache and what was compiled ahead."""
    label = "" if not folder else "run" if kept is None else str(kept.absolute())
    return replace(protocol, compile_cache=label, compile_ahead=ahead.jobs)
