"""What a worker does for one implementation on one case: check it, time it, check it again.

The same code runs in a worker process (the default) and in the calling process
(``--in-process``, for debugging). A task is plain data; the worker draws the inputs itself from
the run's seed, so no tensor crosses a process boundary::

    requirements met?                      else skipped
    inputs (each input set from the seed), reference outputs in fp32
    set-up once per input set              (untimed)
    correctness: every input set, then the first again; after each call
        outputs plain, fresh, not aliasing inputs or earlier outputs; inputs unchanged;
        outputs settled (nothing still writing them); within tolerance of the reference
    timing: the measurement loop; a random sample of timed calls is verified as above
    after timing: inputs unchanged; a fresh input set the implementation has never seen
        (set-up and call) is verified; nothing the harness relies on was replaced

A later round of a point that has passed every check once in the same invocation
(``Task.checks == "light"``, set by :class:`solbench.execute.session.Checked`) checks lighter: one
checked call (the first input set) instead of every set and a repeat, no unseen input sets after
timing. An earlier round ran every check on the same code and inputs, in a process just as fresh;
what a later round's process could do differently (work skipped on some calls, outputs still being
written, inputs changed) the checked call, the verified samples and the after-timing input check
still see.

Faults become statuses: error (an exception, ``KeyboardInterrupt`` and ``GeneratorExit`` too), oom,
reward_hack (a check above failed), incorrect, skipped. A CUDA error that poisons the context, or
``sys.exit`` called by the implementation, is ``crashed``, and the worker process must be replaced
(``fatal``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import os
import random
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, ClassVar

import torch

from solbench.device import threads
from solbench.device.timer import make_timer, resolved_launch
from solbench.errors import DeviceError
from solbench.impls import cublaslt
from solbench.impls.registry import ResolveError
from solbench.measure import guards, tensors, wire
from solbench.measure import queues as work_queues
from solbench.measure.criteria import BeatOrStop, CIWidth
from solbench.measure.loop import CheatDetected, measure
from solbench.measure.runner import (
    CaseInputs,
    build_launches,
    draw_inputs,
    missing_requirement,
    prepare_case,
    refill,
    tolerance_for,
)
from solbench.results.model import KERNEL_CUT_MARK, Correctness, ImplResult
from solbench.workload.cases import Case
from solbench.workload.schema import WorkloadSpec

FRESH_SEED_OFFSET = 1_000_003  # the post-timing input set: a seed no timed input set uses
# the message of an ok result timed with nothing held ahead of its calls (solbench.device.timer: unheld)
UNHELD = ("timed with the host in the window: its call outlasted the hold ahead of it on every try (it "
          "synchronizes with the device, or its host side takes longer than the hold), so launch overhead "
          "could not be kept out")


@dataclass(frozen=True)
class MeasureSettings:
    """How to time: the run options a worker needs (plain data)."""

    timer: str = "cold"
    flush: str = "clean"
    launch: str = "stream"  # cold timer: the call launched ("stream") or a CUDA graph's replay ("graph")
    warmup: int = 3
    input_sets: int = 2
    seed: int = 0
    target_rel_ci: float = 0.01
    min_samples: int = 10
    max_samples: int = 2000
    budget_s: float = 2.0
    threads: int = 0  # torch CPU threads while measuring (solbench.device.threads); 0: leave as set
    compile_cache: str = ""  # the run's torch.compile cache folder (solbench.execute.warm); "": torch's default
    choices: str = ""  # where cuBLASLt choices are kept: --compile-cache DIR; "": the machine's (impls.cublaslt)
    compile_threads: int = 0  # Inductor's compile threads in measuring workers; 0: torch's (execute.warm sets 1)

    @classmethod
    def of(cls, options: Any, device_kind: str) -> MeasureSettings:
        """The settings carried by a run's (or a tuning run's) options, field by field by name;
        on the CPU the timer is always the wall clock."""
        values = {f.name: getattr(options, f.name) for f in fields(cls) if hasattr(options, f.name)}
        if "launch" in values:  # "auto": a graph's replay for the cold timer on CUDA
            values["launch"] = resolved_launch(values["launch"], values.get("timer", "cold"), device_kind)
        if device_kind == "cpu":
            values["timer"] = "cpu"
        return cls(**values)


@dataclass(frozen=True)
class Task:
    """One implementation of one case, as sent to a worker."""

    spec: WorkloadSpec
    case: Case
    impl: str
    base_dir: str | None
    device: str  # "cpu" or "cuda"
    settings: MeasureSettings
    l2_bytes: int | None = None
    nvml_id: str | None = None  # the device's UUID for NVML (clocks read between samples); None: none
    warm: int = 0  # > 0: compile ahead (solbench.execute.warm) with this many Inductor compile threads
    checks: str = "full"  # "light" in a later round of the same invocation (see _checked_and_timed)
    seen: int = 0  # the point's samples timed in earlier rounds of the invocation (the verification rate)
    wait_turn: bool = False  # set up and check, then wait for the parent's word before timing (_wait_turn)
    # and once timed, wait for its word again before the checks after timing (_wait_checks): they then run
    # side by side with the case's other workers' checks, once every one of them has timed
    wait_checks: bool = False
    # give the GPU memory the task leaves cached back as it ends (another worker may need it), not only
    # as the next task starts: False only where the parent knows every worker's tasks fit side by side
    release_after: bool = True
    workload_file: str | None = None  # the file that declares the workload: an implementation whose import
    # fails is named at its entry there (None: by the implementation's own file only)
    # ``solbench tune``: stop timing once the median's CI lies above this many seconds (BeatOrStop: "beaten")
    beaten_above: float | None = None


TREE: str | None = None  # ``ab``: the checkout this worker process resolves implementations in


@dataclass
class WorkerState:
    """What a worker keeps across tasks: the tamper snapshot and its timers."""

    tamper: guards.TamperGuard = field(default_factory=guards.TamperGuard)
    timers: dict[tuple[str, str], Any] = field(default_factory=dict)
    probes: dict[str, Any] = field(default_factory=dict)

    def timer(self, task: Task) -> Any:
        key = (task.settings.timer, task.settings.flush, task.settings.launch)
        if key not in self.timers:
            self.timers[key] = make_timer(task.device, task.settings.timer, l2_bytes=task.l2_bytes,
                                          flush=task.settings.flush, launch=task.settings.launch)
            self.tamper.watch(f"timer {key[0]}", self.timers[key])  # its bound clock, its methods
        return self.timers[key]

    def probe(self, task: Task) -> Any:
        """The NVML clock probe of the task's device, or None (CPU, no NVML, unknown device)."""
        if task.device != "cuda" or task.nvml_id is None:
            return None
        if task.nvml_id not in self.probes:
            from solbench.device.nvml import clock_probe

            self.probes[task.nvml_id] = clock_probe(task.nvml_id)
        return self.probes[task.nvml_id]


def enter_tree(tree: str) -> None:
    """Make this worker process resolve implementations in the checkout ``tree`` (``solbench ab``).

    The harness (every solbench module this process has imported: the loop, timers, checks) stays
    the invoking solbench's, so both sides are measured by the same code. What is not imported
    yet comes from ``tree`` first: its folder leads ``sys.path`` and the search path of every
    package already imported that the tree also has (so ``solbench.impls.attn`` of a solbench
    checkout loads from the tree, and solbench's kernels other than the timer's gate build from its
    ``.cu`` sources), and it becomes the working folder (``file.py`` references that are not found
    next to the workload file are looked up there, never in the other tree).
    """
    global TREE
    import contextlib
    import importlib
    import os
    import sys

    from solbench.device import nvml, timer  # noqa: F401  (harness modules imported lazily elsewhere)
    from solbench.kernels import loader
    from solbench.workload import paths as references

    loader.builtin_source("gate.cu")  # the timer's gate kernel is the harness's too: read before the tree leads
    root = str(Path(tree).resolve())
    os.chdir(root)
    references.FALLBACK_DIR = root
    sys.path.insert(0, root)
    for name, module in list(sys.modules.items()):
        paths = getattr(module, "__path__", None)
        folder = Path(root, *name.split("."))
        if paths is not None and folder.is_dir() and str(folder) not in list(paths):
            with contextlib.suppress(AttributeError):  # a namespace package: follows sys.path, which leads
                paths.insert(0, str(folder))
    importlib.invalidate_caches()
    TREE = root


class Fatal(Exception):
    """The worker can no longer be trusted or used (poisoned CUDA context, sys.exit)."""


Emit = Callable[[str, dict[str, Any]], None]


def execute(task: Task, state: WorkerState, emit: Emit | None = None) -> tuple[ImplResult, bool]:
    """Run one task; returns (result, fatal). ``fatal`` means: replace this worker.

    The result's protocol records ``task_s``: the task's wall time in the worker (inputs, reference,
    set-up, checks and timing).
    """
    return guarded(task, state, lambda: _execute(task, state, emit or (lambda event, data: None)))


def guarded(task: Task, state: WorkerState, body: Callable[[], ImplResult]) -> tuple[ImplResult, bool]:
    """``body()`` (one task's checks and timing) with its wall time as ``task_s``; (result, fatal).

    A crash of the implementation's own making (sys.exit, a lost CUDA context), tampering with the
    process and any other cheat are fatal: the caller replaces the process. A ``KeyboardInterrupt`` or
    ``GeneratorExit`` it raises (past :func:`as_status`, which takes ``Exception`` only) is an
    ``error`` like any other exception, unless a signal can raise it here (:func:`_signalled`).
    """
    start = time.perf_counter()
    if task.device == "cuda":
        release_cached()
    try:
        result = body()
        result = replace(result, protocol={**result.protocol, "task_s": round(time.perf_counter() - start, 4)})
        fatal = result.status == "reward_hack"  # a process that cheated gets no other task
    except Fatal as exc:
        result, fatal = ImplResult(task.impl, "crashed", str(exc)), True
    except SystemExit as exc:
        result, fatal = ImplResult(task.impl, "crashed", f"the implementation called sys.exit({exc.code})"), True
    except (KeyboardInterrupt, GeneratorExit) as exc:
        if isinstance(exc, KeyboardInterrupt) and _signalled():
            raise
        result, fatal = _fault(task.impl, exc, ""), False
    tampered = state.tamper.tampered()
    if tampered is not None:  # the process is compromised: report it (unless a check already has) and start afresh
        return (result if result.status == "reward_hack" else ImplResult(task.impl, "reward_hack", tampered)), True
    for timer in state.timers.values():  # kept for the next task, without this one's inputs and outputs
        timer.release()
    if task.device == "cuda" and not fatal:  # a fatal task's context may be lost
        peak = peak_reserved()
        if peak:
            result = replace(result, protocol={**result.protocol, "memory_peak_bytes": peak})
        if task.release_after:
            release_cached()
    return wire.capped(result), fatal


def _signalled() -> bool:
    """Whether a signal may have raised a KeyboardInterrupt in this process: in-process
    (``--in-process``), Ctrl-C and SIGTERM (:func:`solbench.cli.common.handle_errors`) raise it, and
    must stop the run; a worker process ignores Ctrl-C (the parent's to handle) and handles no signal
    in Python, so one there is the implementation's own."""
    return any(callable(signal.getsignal(sig)) for sig in (signal.SIGINT, signal.SIGTERM))


def release_cached() -> None:
    """Give the blocks torch's allocator keeps from the last task back to the driver: at the start of
    every task, while the case's workers set up side by side and nothing is timed, and at its end too
    unless the parent says every worker's tasks fit side by side (``Task.release_after``).

    Other workers share the GPU: on an H200, a KernelBench compiled worker ran out of memory while its
    sibling's timer still held the 32 GiB of inputs it was timed on. Given back at the end of a task,
    the blocks went back right before the next worker's turn to time, and memory given back slows
    the GPU for several milliseconds: on an H200, after 3 GiB were given back (by this process or
    another), a read of 436 MB took 110 µs instead of 100 µs and a 16-token GEMM 18 µs instead of
    17 µs for their first 11-12 cold samples (``bench/transient_probe.py``). In o_proj runs the byte
    floor at 16384 tokens, timed right after ``fp8_dynamic`` gave back its GiB, read 110 µs for its
    first 1-10 samples in most rounds; with the blocks given back at the next task's start, in none
    of 30. Where the tasks do not all fit at once (they go out in groups, one after another, each
    needing what the earlier left cached: KernelBench's largest problems), memory comes first.

    The allocator's peak is reset with it: :func:`peak_reserved` is then the task's own."""
    torch.cuda.empty_cache()
    if torch.cuda.is_initialized():  # where it is not, there is no peak yet (and nothing to start for one)
        torch.cuda.reset_peak_memory_stats()


def peak_reserved() -> int:
    """The most device memory torch's allocator held for this process since the task began (the
    result's ``memory_peak_bytes``): what the parent's estimate of a worker's memory
    (:func:`solbench.execute.warm.held_bytes`) must cover, besides the CUDA context."""
    return int(torch.cuda.max_memory_reserved())


def _execute(task: Task, state: WorkerState, emit: Emit) -> ImplResult:
    threads.apply(task.settings.threads)
    impl = task.spec.implementations[task.impl]
    reason = missing_requirement(impl, task.device)
    if reason is not None:
        return ImplResult(task.impl, "skipped", reason)
    base_dir = Path(task.base_dir) if task.base_dir is not None else None
    s = task.settings
    use_compile_cache(s.compile_cache)
    os.environ[cublaslt.CHOICES_ENV] = s.choices or str(cublaslt.machine_choices())
    if task.warm:
        return _compile_ahead(task, base_dir)
    if s.compile_threads:
        _compile_threads(s.compile_threads)
    if impl.part == "floor":
        return as_status(task, lambda: _time_floor(task, state, emit, base_dir))
    compiled = _compile_counts()
    plans, _ = cublaslt.plans_since(0)
    phases = Phases()
    emit = _turn_once(emit)
    with cublaslt.tuning(functools.partial(make_timer, task.device, "cold", l2_bytes=task.l2_bytes, flush=s.flush),
                         lambda: phases.turn(lambda: _wait_turn(task, emit))):
        with phases("setup_s"):  # inputs and references drawn, the implementation's set-up (compilation)
            ready = set_up(task, base_dir, lambda: prepare_case(task.spec, task.case, task.device, base_dir,
                                                                input_sets=s.input_sets, seed=s.seed))
        if isinstance(ready, ImplResult):
            return ready
        inputs, launches, kwargs = ready
        checker = _Checker(task, inputs, kwargs)
        del inputs, ready  # the checker alone holds the references now: it frees them after timing
        result = as_status(task, lambda: _checked_and_timed(task, state, emit, checker, launches, base_dir,
                                                             phases))
        if result.status == "skipped" and checker.ran:  # a requirement cannot go missing once a call has run
            result = ImplResult(task.impl, "error", f"{result.message} (raised after a call of it had run here: "
                                "an error, not skipped)")
    counts: dict[str, Any] = dict(_compile_counts(compiled))
    if counts and s.compile_threads:
        counts["compile_threads"] = s.compile_threads
    _, chosen = cublaslt.plans_since(plans)  # the cuBLASLt algorithms set-up chose: tuned, or kept ones
    return replace(result, protocol={**result.protocol, **phases.seconds, **counts, **chosen})


def _compile_counts(before: Mapping[str, int] | None = None) -> dict[str, int]:
    """Inductor's FX-graph cache lookups in this process (``compile_cache_hits`` / ``_misses``), less
    ``before``; only those that happened. A compiled implementation's result so says whether its
    worker loaded the run's cache (:mod:`solbench.execute.warm`) or compiled for itself."""
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return {}
    inductor = utils.counters["inductor"]
    now = {"compile_cache_hits": int(inductor["fxgraph_cache_hit"]),
           "compile_cache_misses": int(inductor["fxgraph_cache_miss"])}
    if before is None:
        return now
    return {k: v - before.get(k, 0) for k, v in now.items() if v - before.get(k, 0)}


def use_compile_cache(folder: str) -> None:
    """Point torch.compile's on-disk caches at the run's folder (:mod:`solbench.execute.warm`):
    Inductor's FX graphs and generated code, and the Triton binaries it builds, which Inductor keeps
    under it unless ``TRITON_CACHE_DIR`` is set. Inductor reads the variable at each use, so this
    works after torch is imported, before the first compilation. "" leaves torch's default."""
    if folder:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder


def _compile_threads(n: int) -> None:
    """Inductor's compile threads in this process: read from the environment when its config is first
    imported, set on the config where it already is. With one thread Inductor starts no pool of
    compile processes, which a worker that only loads compiled code does not need (on an H200 host,
    4 of the 5 s of a KernelBench problem's first compiled call, cache hit and all)."""
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = str(n)
    if "torch._inductor.config" in sys.modules:
        sys.modules["torch._inductor.config"].compile_threads = n


def _compile_ahead(task: Task, base_dir: Path | None) -> ImplResult:
    """A warm task: one input set, the implementation's set-up and one call, synchronized, so that
    what torch.compile builds lands in the run's cache. Nothing is checked, timed or kept; a fault is
    the status, and the measuring worker meets it again and reports it there."""
    _compile_threads(task.warm)  # its share of the CPUs
    phases = Phases()
    try:
        with phases("setup_s"):
            inputs = draw_inputs(task.spec, task.case, task.device, base_dir, task.settings.seed)
            (launch,) = build_launches(task.spec.implementations[task.impl], task.case, [inputs], base_dir)
            launch()
            if task.device == "cuda":
                torch.cuda.synchronize()
    except DeviceError as exc:
        return ImplResult(task.impl, "skipped", str(exc))
    except Exception as exc:
        _check_context(task.device, exc)
        return _fault(task.impl, exc, "compiling ahead: ")
    return ImplResult(task.impl, "ok", "compiled ahead", protocol=dict(phases.seconds))


class Phases:
    """Wall seconds of a task's phases, for the harness breakdown (``show --harness``)::

        setup_s   inputs, references and the implementation's set-up (compilation, autotuning)
        check_s   correctness calls and their comparison with the reference
        sample_s  the timing loop: spins, flushes, timed calls, verified samples, clock reads
        after_s   the anti-cheat checks after timing (fresh inputs, unseen calls)

    A held task that takes its turn inside its set-up (:meth:`turn`: cuBLASLt tuning) sets up and
    checks the rest of the way alone, while the other workers wait: that part of ``setup_s`` and
    ``check_s`` is also recorded as ``setup_alone_s`` and ``check_alone_s``, which the parent counts
    as time the run spent on this worker alone, not side by side
    (:class:`solbench.execute.session.Harness`).
    """

    ALONE: ClassVar[dict[str, str]] = {"setup_s": "setup_alone_s", "check_s": "check_alone_s"}

    def __init__(self, start: Mapping[str, float] | None = None) -> None:
        self.seconds: dict[str, float] = dict(start or {})
        self._outside = 0.0  # seconds spent in outside() so far
        self._alone_since: float | None = None  # when the task took its turn inside its set-up

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        """Add the wall time of the ``with`` block to phase ``name``, less what it spent in :meth:`outside`."""
        start, outside = time.perf_counter(), self._outside
        try:
            yield
        finally:
            end = time.perf_counter()
            spent = end - start - (self._outside - outside)
            self.seconds[name] = round(self.seconds.get(name, 0.0) + spent, 6)
            if self._alone_since is not None and name in self.ALONE:
                alone = min(spent, end - max(start, self._alone_since))
                key = self.ALONE[name]
                self.seconds[key] = round(self.seconds.get(key, 0.0) + alone, 6)

    def turn(self, wait: Callable[[], object]) -> None:
        """``wait()`` for the task's turn inside its set-up, in no phase; from then on the task works
        alone (the ``*_alone_s`` phases)."""
        self.outside(wait)
        self._alone_since = time.perf_counter()

    def outside(self, body: Callable[[], object]) -> None:
        """``body()``, its wall time in no phase (a held task waiting for its turn inside its set-up)."""
        start = time.perf_counter()
        try:
            body()
        finally:
            self._outside += time.perf_counter() - start


def set_up(task: Task, base_dir: Path | None,
           draw: Callable[[], CaseInputs]) -> tuple[CaseInputs, Sequence[Callable[[], Any]], Any] | ImplResult:
    """The task's inputs and references (``draw``) and its launches; a status where either fails."""
    name = task.impl
    try:
        inputs = draw()
    except DeviceError as exc:  # e.g. an input file this machine does not have
        return ImplResult(name, "skipped", str(exc))
    except Exception as exc:
        _check_context(task.device, exc)
        return _fault(name, exc, "reference failed: ")
    try:
        launches, kwargs = build_launches(task.spec.implementations[name], task.case, inputs.sets, base_dir,
                                          with_kwargs=True)
    except ResolveError as exc:  # e.g. its file imports a module this machine lacks
        if task.workload_file is None:
            return ImplResult(name, "error", str(exc))
        from solbench.config.workloads import located_in

        return ImplResult(name, "error", located_in(task.workload_file, task.spec.name, ["implementations", name],
                                                    str(exc)))
    except DeviceError as exc:  # a device library it needs is missing here: not its fault
        return ImplResult(name, "skipped", str(exc))
    except Exception as exc:
        _check_context(task.device, exc)
        return _fault(name, exc, "set-up failed: ")
    return inputs, launches, kwargs


def as_status(task: Task, body: Callable[[], ImplResult]) -> ImplResult:
    """``body()``, with what it raises as the implementation's status."""
    name = task.impl
    try:
        return body()
    except CheatDetected as exc:
        return ImplResult(name, "reward_hack", str(exc))
    except DeviceError as exc:  # e.g. a kernel that needs a newer GPU than this one
        return ImplResult(name, "skipped", str(exc))
    except _Incorrect as exc:
        return ImplResult(name, "incorrect", exc.correctness.detail, exc.correctness)
    except Exception as exc:
        _check_context(task.device, exc)
        return _fault(name, exc, "")


def _checked_and_timed(task: Task, state: WorkerState, emit: Emit, checker: _Checker,
                       launches: Sequence[Callable[[], Any]], base_dir: Path | None,
                       phases: Phases | None = None) -> ImplResult:
    name, s = task.impl, task.settings
    impl = task.spec.implementations[name]
    phases = phases or Phases()
    light = task.checks == "light"
    with phases("check_s"):
        correctness = checker.correctness(launches, light=light)
        untampered(state, "its correctness checks")  # what the checks ran under
    if not correctness.passed:
        return ImplResult(name, "incorrect", correctness.detail, correctness)
    with phases("setup_s"):
        _ready_to_time(task, state, launches)
    _wait_turn(task, emit)
    with phases("sample_s"):
        timer, timing, rewarmed = _timed(task, state, emit, launches, checker.verify_timed)
    protocol = {**timer.protocol(), **_tree_record(impl, base_dir), **gpu_busy(timer, timing, s.warmup + rewarmed),
                "rewarmed": rewarmed}
    if task.device == "cuda":
        protocol["stream_check"] = "cupti" if checker.trace is not None else "settle"
    if checker.kernels:  # which kernels this process's libraries chose (issue: per-process state)
        protocol["kernels"] = kernel_names(checker.kernels)
        shapes = kernel_shapes(checker.kernels, checker.shapes)
        if shapes:  # and how they were launched: a split-K factor or tile chosen per process shows here
            protocol["kernel_shapes"] = shapes
    if checker.extra_calls:
        protocol["check_extra_calls"] = checker.extra_calls
    if checker.streams:  # how many streams the checked calls' work ran on (queues.QueuePolicy.note reads it)
        protocol["streams"] = len(checker.streams)
    queues = os.environ.get(work_queues.ENV)
    if task.device == "cuda" and queues:
        protocol["work_queues"] = queues
    timer.last_output = None
    if timer.pending_s:  # recorded, not judged: host timing of a sync is too noisy to accuse on
        protocol["drain_us_median"] = round(sorted(timer.pending_s)[len(timer.pending_s) // 2] * 1e6, 1)
    _wait_checks(task, emit)
    with phases("after_s"):
        untampered(state, "timing")  # what the timed calls were verified under, before more calls
        checker.after_timing(unseen=not light, launch=launches[0])
    if light:
        protocol["checks"] = "light"
    if impl.params:
        protocol["params"] = ",".join(f"{k}={v}" for k, v in sorted(impl.params.items()))
    if impl.setup_reads:  # inputs its set-up may keep something from: the check after timing leaves them
        protocol["setup_reads"] = ",".join(impl.setup_reads)
    return ImplResult(name, "ok", UNHELD if protocol.get("hold") == "none" else "", correctness, timing,
                      protocol=protocol)


def untampered(state: WorkerState, after: str) -> None:
    """CheatDetected if a watched object was replaced since the snapshot, seen right ``after`` a step.

    The task's end compares the snapshot too; a patch that a later call takes off again would be gone
    by then, so a task also compares it right after its checks and right after timing."""
    tampered = state.tamper.tampered(after)
    if tampered is not None:
        raise CheatDetected(tampered)


def _ready_to_time(task: Task, state: WorkerState, launches: Sequence[Callable[[], Any]] = ()) -> None:
    """The task's timer and clock probe made before its turn, side by side with the other workers'
    set-up, not in the timing loop that every other worker waits on: a worker's first probe starts
    NVML (21 ms a worker in a profiled H200 o_proj run), the timer's own kernels are loaded, and with
    ``--launch graph`` the ``launches`` are captured and their replays checked (CudaColdTimer.capture).
    Then the device is synchronized: nothing of the set-up runs on into another worker's turn."""
    timer = state.timer(task)
    state.probe(task)
    capture = getattr(timer, "capture", None)
    if capture is not None and launches:
        capture(launches)
    warm = getattr(timer, "warm", None)  # cold and CUPTI timers: their kernels loaded (CudaColdTimer.warm)
    if warm is not None:
        warm()  # and synchronized
    elif task.device == "cuda":  # the graph timer
        torch.cuda.synchronize()


def _wait_turn(task: Task, emit: Emit) -> None:
    """A held task (``Task.wait_turn``: the parent sets up and checks a case's implementations side by
    side, :func:`solbench.execute.session.run_case`) waits here, set up and checked, until the parent
    lets it time: every other worker of the case is then idle. The wait is in no phase. A set-up that
    must have the device to itself (cuBLASLt tuning, :func:`solbench.impls.cublaslt.tuning`) waits
    here earlier; the task then waits once (:func:`_turn_once`)."""
    if task.wait_turn:
        emit("turn", {})


def _wait_checks(task: Task, emit: Emit) -> None:
    """A task held for its checks after timing (``Task.wait_checks``) says it has timed and waits
    here until the parent lets it go on: that is once every worker of the case has timed, so these
    checks (two fresh input sets and their references in a task's first round) run side by side, not
    one after another while the case's other workers wait. The wait is in no phase."""
    if task.wait_checks:
        emit("timed", {})


def _turn_once(emit: Emit) -> Emit:
    """``emit``, passing on only the first "turn": once let go, a held task keeps the device."""
    taken = False

    def once(event: str, data: dict[str, Any]) -> None:
        nonlocal taken
        if event == "turn":
            if taken:
                return
            taken = True
        emit(event, data)

    return once


def _timed(task: Task, state: WorkerState, emit: Emit, launches: Sequence[Callable[[], Any]],
           verify: Any = None) -> tuple[Any, Any, int]:
    """The timing loop over ``launches`` with the task's timer and stopping rule (the settings' CI width,
    given up once beaten where ``Task.beaten_above`` says); samples streamed to the parent as taken.
    Returns (timer, timing, the calls made and discarded after verified samples:
    :func:`solbench.measure.loop.measure`)."""
    s = task.settings
    timer = state.timer(task)
    timer.pending_s.clear()
    criterion: Any = CIWidth(s.target_rel_ci, s.min_samples, s.max_samples, s.budget_s)
    if task.beaten_above is not None:
        criterion = BeatOrStop(criterion, task.beaten_above)
    verified: list[int] = []

    def value(i: int, seconds: float, checked: bool) -> None:
        if checked:
            verified.append(i)
        emit("value", {"i": i, "s": seconds, "v": checked})

    timing = measure(timer, launches, criterion, warmup=s.warmup, verify=verify,
                     on_sample=lambda n: emit("sample", {"n": n}) if n % 10 == 0 else None,
                     on_value=value, rng=random.SystemRandom(), probe=state.probe(task), seen=task.seen)
    return timer, timing, sum(i < timing.n - 1 for i in verified)


def _time_floor(task: Task, state: WorkerState, emit: Emit, base_dir: Path | None) -> ImplResult:
    """A ``part: floor`` implementation (:mod:`solbench.impls.floor`): ``fn(src, dst)`` over buffers of the
    case's read and written bytes, timed like any implementation; nothing to check, never scored."""
    from solbench.impls import floor
    from solbench.impls.registry import resolve

    s = task.settings
    phases = Phases()
    with phases("setup_s"):
        read, write = floor.case_bytes(task.spec, task.case)
        src, dst = floor.buffers(read, write, task.device, s.seed)
        launch = functools.partial(resolve(task.spec.implementations[task.impl].fn, base_dir), src=src, dst=dst)
        launch()  # its kernel built and loaded in set-up, beside the other workers, not in the timing loop
        launches = [launch]
        _ready_to_time(task, state, launches)  # with --launch graph, captured here too, not in its turn
    _wait_turn(task, emit)
    with phases("sample_s"):
        timer, timing, _ = _timed(task, state, emit, launches)
    timer.last_output = None
    factor = floor.scale(read, write, src, dst)
    protocol = {**timer.protocol(), **gpu_busy(timer, timing, s.warmup), **phases.seconds, "part": "floor",
                "floor_read_bytes": src.nbytes, "floor_write_bytes": dst.nbytes, "floor_scale": round(factor, 6)}
    return ImplResult(task.impl, "ok", f"floor: the kernel reads {src.nbytes} B and writes {dst.nbytes} B; the case "
                      f"moves {read + write} B (T_floor = its time x {factor:.4f})", None, timing, protocol=protocol)


KERNEL_NAME_CHARS = 96  # a kernel's name as recorded: long templated names cut to this


def kernel_names(names: Sequence[str]) -> str:
    """The distinct kernels of the checked calls, in order of first launch, each name cut to
    ``KERNEL_NAME_CHARS`` (then ``~`` and 8 hex digits of the whole name's hash: cuDNN's variants
    of one kernel differ after the first 96 characters), joined by " | ": the result's ``kernels``,
    which the gate compares between runs and the rounds' merge between rounds (a library choosing
    another kernel in another process shows there)."""
    return " | ".join(_cut(name) for name in dict.fromkeys(names))


def kernel_shapes(names: Sequence[str], shapes: Sequence[str]) -> str:
    """The distinct launch shapes of the checked calls' kernels, each after the number of its kernel
    in ``kernels`` (:func:`kernel_names`, from 1), in order of first launch, joined by " | ":
    ``"#1 grid 132x1x1 block 384x1x1 cluster 1x1x1 smem 232448 | #2 grid 64x1x1 ..."``. The same
    kernel names with other grids are another algorithm (another split-K factor or tile) chosen
    in that process. Empty where CUPTI gave no shapes."""
    if len(shapes) != len(names) or not any(shapes):
        return ""
    number = {name: i + 1 for i, name in enumerate(dict.fromkeys(names))}
    return " | ".join(f"#{number[n]} {s}" for n, s in dict.fromkeys(zip(names, shapes, strict=True)) if s)


def _cut(name: str) -> str:
    if len(name) <= KERNEL_NAME_CHARS:
        return name
    return f"{name[:KERNEL_NAME_CHARS]}{KERNEL_CUT_MARK}{hashlib.blake2b(name.encode(), digest_size=4).hexdigest()}"


def gpu_busy(timer: Any, timing: Any, warmup: int) -> dict[str, float]:
    """``gpu_busy_s``: the seconds the device was kept busy by the timing loop (cold and CUPTI
    timers): every timed or warm-up call (``warmup``: with those discarded after verified samples),
    re-taken samples included, with its spin and its flush::

        calls x (spin + flush) + sum(samples) + (warm-up + redone) x median

    The harness ratio (``show --harness``) divides its sum by the run's wall time."""
    spin_us = getattr(timer, "spin_us", None)
    flush_us = getattr(timer, "flush_us", None)
    if spin_us is None or flush_us is None or not timing.samples:
        return {}
    extra = warmup + int(getattr(timer, "redone", 0))
    calls = len(timing.samples) + extra
    busy = calls * (spin_us + flush_us) * 1e-6 + sum(timing.samples) + extra * timing.median
    return {"gpu_busy_s": round(busy, 6)}


def _tree_record(impl: Any, base_dir: Path | None) -> dict[str, str]:
    """``ab``: the checkout this worker runs in and the file the implementation came from."""
    if TREE is None:
        return {}
    import inspect

    from solbench.impls.registry import resolve

    try:
        source = inspect.getsourcefile(resolve(impl.fn, base_dir)) or ""
    except (TypeError, OSError, ResolveError):
        source = ""
    return {"tree": TREE, "impl_file": source}


class _Incorrect(Exception):
    def __init__(self, correctness: Correctness) -> None:
        super().__init__(correctness.detail)
        self.correctness = correctness


class _Checker:
    """Runs the anti-cheat checks and the tolerance check around calls of one implementation."""

    def __init__(self, task: Task, inputs: CaseInputs, kwargs: Sequence[Mapping[str, Any]]) -> None:
        self.task = task
        self.inputs = inputs
        self.kwargs = kwargs
        self.names = [t.name for t in task.case.outputs]
        self.tol = tolerance_for(task.spec, task.spec.implementations[task.impl], task.case.dtype,
                                 task.case.scope)
        self.input_guards = [guards.InputGuard(s) for s in inputs.sets]
        self.kept: list[torch.Tensor] = []  # outputs of the correctness calls, kept alive
        # input set -> the values its first checked call returned (passed), and that check's result: a
        # verified timed call on that set whose outputs hold the same bits passed the same check
        self.checked: dict[int, tuple[list[torch.Tensor], Correctness]] = {}
        self.threads = set(threading.enumerate())
        self.trace = guards.stream_tracer(task.device)  # CUPTI side-stream check, where available
        self.kernels: list[str] = []  # what CUPTI saw the checked calls launch (names, in order)
        self.shapes: list[str] = []  # and each one's launch shape (grid, block, cluster, shared memory)
        self.streams: set[int] = set()  # the streams that work ran on
        # calls the CUPTI check made again (its spin ran dry, or CUPTI had to be primed): an
        # implementation that counts its calls sees them (protocol.check_extra_calls)
        self.extra_calls = 0
        # a call has returned: a DeviceError raised after it (to be skipped, not failed, where a check
        # would fail it: on unseen inputs, say) is an error
        self.ran = False

    def _call(self, launch: Callable[[], Any]) -> Any:
        """One untimed call; CheatDetected if CUPTI saw its GPU work outlive it on a side stream."""
        calls = 0

        def counted() -> Any:
            nonlocal calls
            calls += 1
            return launch()

        value, problem = guards.traced_call(counted, self.trace, self.kernels, self.streams, self.shapes)
        self.extra_calls += max(0, calls - 1)
        self.ran = True
        if problem is not None:
            raise CheatDetected(problem)
        return value

    def _outputs(self, value: Any) -> tuple[torch.Tensor, ...]:
        """The outputs in declared order; plain tensors with data, or CheatDetected / _Incorrect."""
        try:
            out = tensors.as_outputs(value, self.names, returns=self.task.spec.returns)
        except TypeError as exc:
            raise _Incorrect(Correctness(False, float("nan"), float("nan"), self.tol.atol, self.tol.rtol,
                                         str(exc))) from None
        problem = guards.plain_outputs(out, self.names)
        if problem is not None:
            raise CheatDetected(problem)
        return out

    def _settled(self, out: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The outputs' values when the call returned (:func:`guards.settled_outputs`);
        CheatDetected if they changed afterwards. Threads still alive after the wait are not
        waited for again by later checks."""
        values, problem = guards.settled_outputs(out, self.task.device, self.threads)
        self.threads = set(threading.enumerate())
        if problem is not None:
            raise CheatDetected(problem)
        return values

    def _check(self, k: int, out: Sequence[torch.Tensor], reference: Sequence[torch.Tensor],
               kwargs: Mapping[str, Any], inputs: Mapping[str, Any], guard: guards.InputGuard,
               values: Sequence[torch.Tensor] | None = None,
               same_as: tuple[list[torch.Tensor], Correctness] | None = None) -> Correctness:
        """``out`` checked for aliasing and input changes; ``values`` (default ``out``: the copy taken
        when the call returned) compared with ``reference``, or, where they hold the same bits as the
        values of a call on the same (unchanged) inputs that passed (``same_as``), that call's result."""
        earlier = () if self.task.spec.implementations[self.task.impl].destination else self.kept
        problem = (guards.aliased_outputs(out, self.names, {**kwargs, **inputs}, earlier)
                   or guard.changed(inputs))
        if problem is not None:
            raise CheatDetected(f"input set {k}: {problem}")
        values = out if values is None else values
        if same_as is not None and len(same_as[0]) == len(values) and all(
                guards.bits_equal(list(zip(values, same_as[0], strict=True)))):
            return same_as[1]
        atol, rtol = self.tol.atol, self.tol.rtol
        result = tensors.compare(values, reference, self.task.case, rtol, atol, self.tol.rel_l2, self.tol)
        if not result.passed:
            return Correctness(False, result.max_abs_err, result.max_rel_l2, atol, rtol,
                               f"input set {k}: {result.detail}")
        return result

    def correctness(self, launches: Sequence[Callable[[], Any]], light: bool = False) -> Correctness:
        """Every input set once, then the first again (a second call must be as right as the first);
        ``light``: the first input set once (a later round of the same invocation)."""
        result = Correctness(True, 0.0, 0.0, self.tol.atol, self.tol.rtol)
        order = [0] if light else [*range(len(launches)), 0]
        for k in order:
            tensors.poison_allocator(self.task.case, self.task.device)
            self.threads = set(threading.enumerate())
            refill(launches[k])
            try:
                out = self._outputs(self._call(launches[k]))
                values = self._settled(out)
            except CheatDetected as exc:
                raise CheatDetected(f"input set {k}: {exc}") from None
            checked = self._check(k, out, self.inputs.references[k], self.kwargs[k], self.inputs.sets[k],
                                  self.input_guards[k], values)
            result = _worst(result, checked)
            if not result.passed:
                return result
            if k not in self.checked and sum(v.nbytes for v in values) <= SAME_BITS_BYTES:
                self.checked[k] = (values, checked)
            self.kept.extend(out)
        return result

    def verify_timed(self, k: int, value: Any, seconds: float) -> str | None:
        """Check the output of one timed call (right after the sample was taken)."""
        try:
            out = self._outputs(value)
            values = self._settled(out)
            result = self._check(k, out, self.inputs.references[k], self.kwargs[k], self.inputs.sets[k],
                                 self.input_guards[k], values, self.checked.get(k))
        except _Incorrect as exc:
            return exc.correctness.detail
        except CheatDetected as exc:
            return str(exc)
        if not result.passed:
            return f"wrong output ({result.detail}) although the checked calls were right: work skipped on some calls"
        return None

    def after_timing(self, unseen: bool = True, launch: Callable[[], Any] | None = None) -> None:
        """After timing: inputs unchanged; then (``unseen``) two input sets the implementation has
        never seen.

        1. fresh tensors with fresh values (new addresses), set-up run on them: catches a result kept
           from earlier;
        2. new values written into the tensors it was timed on (same addresses), into every one its
           set-up may not prepare from (:func:`held`: neither ``fixed`` in the workload nor in the
           implementation's ``setup_reads``), and the timed call (``launch``, input set 0) made again
           without running set-up again: catches a result cached by data pointer, and one set-up
           computed (it runs on the very inputs it is timed on). Where no input is left to change, or
           without ``launch`` (the ranks of a multi-GPU workload), every input gets new values and
           set-up runs again: a result cached by data pointer only.
        """
        for k, (guard, inputs) in enumerate(zip(self.input_guards, self.inputs.sets, strict=True)):
            problem = guard.changed(inputs)
            if problem is not None:
                raise CheatDetected(f"input set {k}, during timing: {problem}")
        if not unseen:
            return
        # The saved inputs, the references and the checked calls' outputs are done with: freed before two
        # fresh input sets and their references are drawn (KernelBench's 8 GiB tensors: 56 GiB, where
        # compiled workers ran out of memory). An output returned again from a cache is still caught,
        # by its values: computed from other inputs, it is off by its own size.
        self.input_guards = []
        self.inputs = CaseInputs(self.inputs.sets, ())
        self.kept = []
        self.checked = {}
        task = self.task
        base_dir = Path(task.base_dir) if task.base_dir is not None else None
        impl = task.spec.implementations[task.impl]
        seed = task.settings.seed + FRESH_SEED_OFFSET
        fresh = self._fresh_inputs(base_dir, seed)
        self._verify_unseen("fresh inputs after timing", impl, base_dir, fresh.sets[0], fresh.references[0])
        del fresh
        timed = dict(self.inputs.sets[0])
        kept = held(task.spec, impl, timed) if launch is not None else []
        if all(key in kept for key in timed):  # nothing to change without set-up: every input, set-up run again
            kept, launch = [], None
        new = self._fresh_inputs(base_dir, seed + 1, keep={key: timed[key] for key in kept})
        changed = [key for key in timed if key not in kept]
        for key in changed:
            if isinstance(timed[key], torch.Tensor):  # through .data: the tensors' version counters stay as they
                timed[key].data.copy_(new.sets[0][key])  # were, or a cache keyed on them would see the change
            else:  # a Python number an input generator drew: the new set's, which its reference was given
                timed[key] = new.sets[0][key]
        if launch is None:
            self._verify_unseen("new values in the timed input tensors", impl, base_dir, timed, new.references[0])
            return
        what = (f"new values in {', '.join(changed)} (the tensors it was timed on; set-up not run again"
                + (f"; {', '.join(kept)} kept as set-up saw them)" if kept else ")"))
        self._verify_unseen(what, impl, base_dir, timed, new.references[0], launch=launch, kwargs=self.kwargs[0])

    def _fresh_inputs(self, base_dir: Path | None, seed: int, keep: Mapping[str, Any] | None = None) -> CaseInputs:
        """One input set (and its reference) the implementation has never seen, ``keep``'s inputs as given."""
        task = self.task
        return prepare_case(task.spec, task.case, task.device, base_dir, input_sets=1, seed=seed, keep=keep)

    def _verify_unseen(self, what: str, impl: Any, base_dir: Path | None, inputs: dict[str, torch.Tensor],
                       reference: Sequence[torch.Tensor], launch: Callable[[], Any] | None = None,
                       kwargs: Mapping[str, Any] | None = None) -> None:
        """One call on ``inputs`` checked against ``reference``: set-up run on them first, or (``launch``,
        with set-up's ``kwargs``) a call set up before, made again."""
        task = self.task
        if launch is None:
            launches, made = build_launches(impl, task.case, [inputs], base_dir, with_kwargs=True)
            launch, kwargs = launches[0], made[0]
        tensors.poison_allocator(task.case, task.device)
        refill(launch)
        guard = guards.InputGuard(inputs)
        self.threads = set(threading.enumerate())
        try:
            out = self._outputs(self._call(launch))
            result = self._check(0, out, reference, kwargs or {}, inputs, guard, self._settled(out))
        except CheatDetected as exc:
            raise CheatDetected(f"{what}: {exc}") from None
        if not result.passed:
            detail = result.detail.removeprefix("input set 0: ")
            if stale(result):
                raise CheatDetected(f"right on the inputs it was timed on, wrong on {what} ({detail}): a cached or "
                                    "skipped result, or one its set-up computed (an input set-up may prepare from, "
                                    "as a weight, is marked fixed: true in the workload; one set-up hands over in "
                                    "another form, in the implementation's setup_reads)")
            raise _Incorrect(Correctness(False, result.max_abs_err, result.max_rel_l2, result.atol, result.rtol,
                                         f"right on the inputs it was timed on, outside the tolerance on {what} "
                                         f"({detail}; relative L2 error {result.max_rel_l2:.2g}): a numerical "
                                         "difference, not a stale result"))


def held(spec: Any, impl: Any, inputs: Mapping[str, Any]) -> list[str]:
    """The inputs of ``inputs`` its set-up may prepare from, which the check after timing leaves as they
    were: those ``fixed`` in the workload (weights), those the implementation names in ``setup_reads``,
    and every value that is not a tensor (a number an input generator drew: bound into the call by
    set-up)."""
    declared = {name for name, t in spec.inputs.items() if t.fixed} | set(impl.setup_reads)
    return [key for key, value in inputs.items() if key in declared or not isinstance(value, torch.Tensor)]


# The largest outputs (bytes per input set) whose checked values are kept to verify timed calls by
# their bits (_Checker.checked): o_proj at 16384 tokens writes 128 MiB. Larger ones are compared
# with the reference every time, as before, rather than held twice.
SAME_BITS_BYTES = 256 << 20

# Relative L2 error at and above which a wrong output on unseen inputs reads as stale. An output
# computed from other random inputs (a cached result), or with part of the work skipped, is off by
# the size of the output itself (relative L2 error about 1.4 for independent draws, 0.7 with half
# of it left out); one computed from these inputs at another precision is off by far less (TF32
# against fp32: about 1e-3). Below it, the output is incorrect, not a cheat.
STALE_REL_L2 = 0.05


def stale(result: Correctness) -> bool:
    """Whether a failed check on unseen inputs reads as a stale (cached or skipped) result: a
    shape, dtype or NaN failure (no error measured), or a relative L2 error of ``STALE_REL_L2`` or more."""
    return not (math.isfinite(result.max_rel_l2) and result.max_rel_l2 < STALE_REL_L2)


def _worst(a: Correctness, b: Correctness) -> Correctness:
    if not b.passed:
        return b
    return Correctness(True, max(a.max_abs_err, b.max_abs_err), max(a.max_rel_l2, b.max_rel_l2), b.atol, b.rtol)


def _fault(name: str, exc: BaseException, prefix: str) -> ImplResult:
    """An exception from user code as a status: oom, or error with the exception and where."""
    text = _message(exc)
    first = f"{type(exc).__name__}: {text}".splitlines()[0] if text else type(exc).__name__
    if _is_oom(exc):
        return ImplResult(name, "oom", prefix + first)
    where = traceback.extract_tb(exc.__traceback__)
    at = f" (at {Path(where[-1].filename).name}:{where[-1].lineno})" if where else ""
    return ImplResult(name, "error", prefix + first + at)


# A device library's own words for an allocation it could not make (cublasCreate's workspace, a
# cuDNN or cuFFT plan's: CUBLAS_STATUS_ALLOC_FAILED, CUFFT_ALLOC_FAILED; the driver API's),
# lower-cased: each is out of memory, as torch's own is.
ALLOC_FAILED = ("out of memory", "can't allocate memory", "cannot allocate memory", "_alloc_failed",
                "cuda_error_out_of_memory", "cudaerrormemoryallocation")


def _message(exc: BaseException) -> str:
    """``str(exc)``, stripped; a note where the exception's own ``__str__`` raises (it is the
    implementation's code too: what it raises must not take the worker down)."""
    try:
        return str(exc).strip()
    except Exception as failed:
        return f"(its message could not be read: str() raised {type(failed).__name__})"


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError | torch.OutOfMemoryError):
        return True
    text = _message(exc).lower()
    return any(words in text for words in ALLOC_FAILED)


def _check_context(device: str, exc: BaseException) -> None:
    """Raise Fatal if a CUDA error left the context unusable (e.g. an illegal memory access)."""
    if device != "cuda" or _is_oom(exc):
        return
    try:
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").add_(1).item()
    except Exception as sync_exc:
        first = str(sync_exc).strip().splitlines()[0] if str(sync_exc).strip() else type(sync_exc).__name__
        raise Fatal(f"CUDA context lost: {first}") from None
