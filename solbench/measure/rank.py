"""What one rank of a multi-rank workload does for one task (:mod:`solbench.execute.group` starts them).

The steps of :mod:`solbench.measure.worker`, with the ranks kept in lockstep (an implementation
calls collectives, so every rank must make the same calls in the same order)::

    inputs of every rank r from seed + k + RANK_SEED_STRIDE·r (each rank draws all of them, so the
      reference needs no communication); the reference gets each input stacked over ranks
      ([world_size, *shape], fp32) and returns this rank's outputs (it may take ``rank``)
    correctness: every input set, then the first again, on every rank; no rank stops early;
      then the ranks agree (any rank failed -> all stop; the failing rank reports why)
    timing: the measurement loop over a GroupTimer: per sample a host barrier, on CUDA a one-element
      NCCL all-reduce (the GPUs leave it together), the rank's own timer, then the max over ranks
      of the sample (and of the elapsed time, so every rank stops after the same sample)
    after timing: the worker's checks on unseen inputs, drawn per rank the same way

Parts (``part: compute|comm``) are timed the same way but neither checked nor scored.
A rank that raises between two collectives leaves the others waiting in the next one: the
group runner (:mod:`solbench.execute.group`) reports the fault and kills the group.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from solbench.device import threads
from solbench.impls.registry import resolve
from solbench.measure import tensors
from solbench.measure.criteria import BeatOrStop, CIWidth
from solbench.measure.loop import CheatDetected, measure
from solbench.measure.runner import CaseInputs, _call, _exact_fp32, missing_requirement, no_nan
from solbench.measure.worker import (
    Task,
    WorkerState,
    _Checker,
    _Incorrect,
    _worst,
    as_status,
    guarded,
    set_up,
)
from solbench.results.model import Correctness, ImplResult
from solbench.workload.cases import Case
from solbench.workload.schema import WorkloadSpec

RANK_SEED_STRIDE = 100_003  # rank r draws from seed + k + r·stride (never a seed + FRESH_SEED_OFFSET)
PEER_FAILED = "another rank failed"  # the message of a rank that stopped because a peer failed


@dataclass(frozen=True)
class RankContext:
    """This rank's place in its group, and the host-side (gloo) group used to keep ranks in step."""

    rank: int
    world: int
    backend: str  # "nccl" or "gloo": what implementations' collectives use
    device: str  # "cuda" or "cpu"
    control: Any  # a gloo process group: barriers and agreement, never timed

    def agree(self, values: Sequence[float]) -> list[float]:
        """The elementwise max of ``values`` over ranks."""
        import torch.distributed as dist

        t = torch.tensor(list(values), dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.control)
        return [float(v) for v in t.tolist()]

    def barrier(self) -> None:
        import torch.distributed as dist

        dist.barrier(group=self.control)


def rank_seed(seed: int, rank: int) -> int:
    """The seed rank ``rank``'s inputs are drawn from, for a run seed (plus input-set offset)."""
    return seed + RANK_SEED_STRIDE * rank


def prepare_rank(spec: WorkloadSpec, case: Case, device: str, base_dir: Path | None, *, input_sets: int,
                 seed: int, rank: int, world: int, keep: Mapping[str, Any] | None = None,
                 kept_seed: int = 0) -> CaseInputs:
    """This rank's input sets, and the reference outputs of this rank for each. ``keep``: inputs every set
    takes as given on this rank (those set-up saw, drawn from ``kept_seed``); each peer's are drawn again
    from that seed, as the peer drew them, so the reference sees every rank's."""
    reference = resolve(spec.reference, base_dir)
    names = [t.name for t in case.outputs]
    sets, refs = [], []
    kept = [keep if q == rank else tensors.make_inputs(case, device, rank_seed(kept_seed, q))
            for q in range(world)] if keep else []  # every rank's, as set-up saw them: the same for every set
    for k in range(input_sets):
        every = [tensors.make_inputs(case, device, rank_seed(seed + k, q)) for q in range(world)]
        for inputs, given in zip(every, kept, strict=False):
            inputs.update({key: given[key] for key in keep or ()})
        with _exact_fp32():
            stacked = {name: torch.stack([tensors.upcast(e, spec.reference_dtype)[name] for e in every])
                       for name in every[0]}
            value = _call(reference, stacked, {**case.params, "rank": rank, "world_size": world})
        refs.append(tensors.as_outputs(value, names, strict=False))
        no_nan(spec.reference, refs[-1], names, k)
        sets.append(every[rank])
        del every, stacked
    return CaseInputs(tuple(sets), tuple(refs))


class GroupTimer:
    """A rank's timer, sampled in step with the other ranks; each sample is the max over ranks."""

    def __init__(self, inner: Any, ctx: RankContext) -> None:
        self.inner = inner
        self.ctx = ctx
        self.name = inner.name
        self.now = 0.0  # the agreed elapsed seconds after the last sample (the loop's clock)
        self._t0 = time.monotonic()
        self._one = torch.ones(1, device="cuda") if ctx.backend == "nccl" else None

    @property
    def last_output(self) -> object:
        return self.inner.last_output

    @last_output.setter
    def last_output(self, value: object) -> None:
        self.inner.last_output = value

    @property
    def pending_s(self) -> list[float]:
        return self.inner.pending_s  # type: ignore[no-any-return]

    @pending_s.setter
    def pending_s(self, value: list[float]) -> None:
        self.inner.pending_s = value

    @property
    def stray(self) -> str | None:
        """The inner timer's report of work outliving the timed call (the CUPTI timer), or None."""
        return getattr(self.inner, "stray", None)

    @stray.setter
    def stray(self, value: str | None) -> None:
        self.inner.stray = value

    def prepare(self, launches: Sequence[Callable[[], Any]]) -> None:
        """The inner timer's preparation, with a spin, not a gate (each rank's gate would open when its
        own host released it; equal spins after the GPUs' all-reduce start the windows together);
        then every rank takes the longest spin (equal GPU lead-in)."""
        if hasattr(self.inner, "gate"):
            self.inner.gate = None
        self.inner.prepare(launches)
        if hasattr(self.inner, "spin_us"):
            self.inner.spin_us = self.ctx.agree([self.inner.spin_us])[0]
        if hasattr(self.inner, "agree_dry"):  # a sample taken again is taken again by every rank
            self.inner.agree_dry = self.either

    def either(self, flag: bool) -> bool:
        """True on every rank if it is True on any."""
        return self.ctx.agree([1.0 if flag else 0.0])[0] > 0

    def sample(self, index: int) -> float:
        import torch.distributed as dist

        self.ctx.barrier()
        if self._one is not None:  # the GPUs leave this together; the equal spins follow
            dist.all_reduce(self._one)
        seconds = self.inner.sample(index)
        seconds, self.now = self.ctx.agree([seconds, time.monotonic() - self._t0])
        return seconds

    def clock(self) -> float:
        return self.now

    def protocol(self) -> dict[str, Any]:
        return {**self.inner.protocol(), "rank_time": "max over ranks",
                "rank_sync": "barrier" + (" + 1-element NCCL all-reduce" if self._one is not None else "")}

    def output_index(self, index: int) -> int:
        return self.inner.output_index(index)  # type: ignore[no-any-return]


class AgreedDraws:
    """The timing loop's draws (which timed calls it verifies), the same on every rank: rank 0's,
    from the system's random source. A verified sample is followed by a call the loop discards
    (:func:`solbench.measure.loop.measure`), so every rank must verify the same samples to make the
    same calls (each call may be a collective)."""

    def __init__(self, ctx: RankContext) -> None:
        self.ctx = ctx
        self._system = random.SystemRandom()

    def random(self) -> float:
        return self.ctx.agree([self._system.random() if self.ctx.rank == 0 else 0.0])[0]


class _RankChecker(_Checker):
    """The worker's checks, with every rank making every call, and unseen inputs drawn per rank."""

    def __init__(self, task: Task, inputs: CaseInputs, kwargs: Sequence[Mapping[str, Any]],
                 ctx: RankContext) -> None:
        super().__init__(task, inputs, kwargs)
        self.ctx = ctx

    def lockstep(self, launches: Sequence[Callable[[], Any]]) -> tuple[Correctness, ImplResult | None]:
        """Every input set, then the first again; never stops early (the peers make the same calls)."""
        name = self.task.impl
        result = Correctness(True, 0.0, 0.0, self.tol.atol, self.tol.rtol)
        failure: ImplResult | None = None
        for k in [*range(len(launches)), 0]:
            tensors.poison_allocator(self.task.case, self.task.device)
            self.threads = set(threading.enumerate())
            value = launches[k]()
            if failure is not None:
                continue
            try:
                out = self._outputs(value)
                try:
                    values = self._settled(out)
                except CheatDetected as exc:
                    raise CheatDetected(f"input set {k}: {exc}") from None
                result = _worst(result, self._check(k, out, self.inputs.references[k], self.kwargs[k],
                                                    self.inputs.sets[k], self.input_guards[k], values))
                if not result.passed:
                    failure = ImplResult(name, "incorrect", result.detail, result)
                self.kept.extend(out)
            except CheatDetected as exc:
                failure = ImplResult(name, "reward_hack", str(exc))
            except _Incorrect as exc:
                failure = ImplResult(name, "incorrect", exc.correctness.detail, exc.correctness)
        return result, failure

    def _fresh_inputs(self, base_dir: Path | None, seed: int, keep: Mapping[str, Any] | None = None) -> CaseInputs:
        """The worker's unseen input set, drawn for this rank (its peers draw theirs in step), ``keep``'s
        inputs as set-up saw them on every rank (input set 0: each peer's drawn again from its seed)."""
        task = self.task
        return prepare_rank(task.spec, task.case, task.device, base_dir, input_sets=1, seed=seed,
                            rank=self.ctx.rank, world=self.ctx.world, keep=keep, kept_seed=task.settings.seed)


Emit = Callable[[str, dict[str, Any]], None]


def execute_rank(task: Task, state: WorkerState, ctx: RankContext,
                 emit: Emit | None = None) -> tuple[ImplResult, bool]:
    """Run one task on this rank; (result, fatal), as :func:`solbench.measure.worker.execute`."""
    return guarded(task, state, lambda: _execute(task, state, ctx, emit or (lambda event, data: None)))


def _execute(task: Task, state: WorkerState, ctx: RankContext, emit: Emit) -> ImplResult:
    spec, case, name, s = task.spec, task.case, task.impl, task.settings
    if s.threads > 0:  # the run's CPU threads shared by the ranks, which all run at once
        threads.apply(max(1, s.threads // ctx.world))
    impl = spec.implementations[name]
    reason = missing_requirement(impl, task.device)
    if reason is not None:
        return ImplResult(name, "skipped", reason)
    graph = s.timer == "graph"
    if graph:  # NCCL in a captured graph needs its own set-up: time these cold
        task = replace(task, settings=replace(s, timer="cold"))
    replayed = task.settings.launch == "graph"
    if replayed:  # for the same reason, each call launched (--launch graph)
        task = replace(task, settings=replace(task.settings, launch="stream"))
    base_dir = Path(task.base_dir) if task.base_dir is not None else None
    emit("phase", {"phase": "inputs and reference"})
    ready = set_up(task, base_dir, lambda: prepare_rank(spec, case, task.device, base_dir, input_sets=s.input_sets,
                                                        seed=s.seed, rank=ctx.rank, world=ctx.world))
    if isinstance(ready, ImplResult):
        return ready
    inputs, launches, kwargs = ready
    checker = _RankChecker(task, inputs, kwargs, ctx)
    result = as_status(task, lambda: _checked_and_timed(task, state, ctx, emit, checker, launches))
    if graph and result.timing is not None:
        result = replace(result, protocol={**result.protocol, "timer": "cold (no graph timer for ranks)"})
    if replayed and result.timing is not None:
        result = replace(result, protocol={**result.protocol, "launch": "stream",
                                           "graph_fallback": "a rank of a multi-GPU group: NCCL in a captured graph "
                                                             "needs its own set-up, so each call is launched"})
    return result


def _agreed_untampered(state: WorkerState, ctx: RankContext, after: str, failed: bool = False) -> bool:
    """:func:`solbench.measure.worker.untampered` for a rank, agreed first so that no peer waits in a
    collective: CheatDetected on a rank whose snapshot changed; else whether any rank failed or did."""
    tampered = state.tamper.tampered(after)
    anyone = ctx.agree([1.0 if failed or tampered is not None else 0.0])[0]
    if tampered is not None:
        raise CheatDetected(tampered)
    return bool(anyone)


def _checked_and_timed(task: Task, state: WorkerState, ctx: RankContext, emit: Emit, checker: _RankChecker,
                       launches: Sequence[Callable[[], Any]]) -> ImplResult:
    name, s = task.impl, task.settings
    impl = task.spec.implementations[name]
    correctness: Correctness | None = None
    failure: ImplResult | None = None
    emit("phase", {"phase": "correctness calls"})
    if impl.part is None:
        correctness, failure = checker.lockstep(launches)
    else:  # a part does only part of the work: run it once per input set, check nothing
        for launch in launches:
            launch()
        if task.device == "cuda":
            torch.cuda.synchronize()
    if _agreed_untampered(state, ctx, "its correctness checks", failed=failure is not None):
        return failure or ImplResult(name, "skipped", PEER_FAILED)
    emit("phase", {"phase": "timer set-up"})
    timer = GroupTimer(state.timer(task), ctx)
    timer.pending_s.clear()
    criterion: Any = CIWidth(s.target_rel_ci, s.min_samples, s.max_samples, s.budget_s)
    if task.beaten_above is not None:  # tune's early stop; every rank decides alike on the agreed samples and clock
        criterion = BeatOrStop(criterion, task.beaten_above)
    timing = measure(timer, launches, criterion, warmup=s.warmup,
                     verify=checker.verify_timed if impl.part is None else None,
                     on_sample=lambda n: emit("sample", {"n": n}) if n % 10 == 0 else None,
                     on_value=lambda i, sec, v: emit("value", {"i": i, "s": sec, "v": v}),
                     rng=AgreedDraws(ctx), clock=timer.clock, probe=state.probe(task) if ctx.rank == 0 else None)
    protocol: dict[str, float | int | str] = {**timer.protocol(), "world_size": ctx.world, "backend": ctx.backend}
    timer.last_output = None
    if impl.env:
        protocol["env"] = ",".join(f"{k}={v}" for k, v in sorted(impl.env.items()))
    if impl.part is not None:
        protocol["part"] = impl.part
        return ImplResult(name, "ok", f"part: T_{impl.part}", None, timing, protocol=protocol)
    emit("phase", {"phase": "checks after timing"})
    if _agreed_untampered(state, ctx, "timing"):
        return ImplResult(name, "skipped", PEER_FAILED)
    # every rank makes the timed call again on new values, set-up not run again: in step, as every check
    checker.after_timing(launch=launches[0])
    return ImplResult(name, "ok", "", correctness, timing, protocol=protocol)
