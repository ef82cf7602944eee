"""The run loop: every case, every implementation, each through its worker; results as they come.

    for each pass (the first round; then rounds 2 to ``repeat`` together, each round of a point in
                   a worker of its own; then the rounds added where intervals are still wide; every
                   check until a point has passed them all once, lighter checks after that:
                   solbench.measure.worker):
        for each workload (its workers start side by side first; none start while measuring):
            for each case (run_case):
                every implementation's worker sets up and checks, side by side, then waits;
                then one at a time: it times, checks after timing -> ImplResult (faults are statuses)
                merge the case's rounds so far (pooling.merge_rounds), score the case;
                hand the partial run to on_case (which saves it)
            retire the workload's workers

Workers are retired after each workload, so every round starts fresh processes: new CUDA
contexts, new allocations (inputs, flush buffers), the timer's spin sized again. Rounds 2 to
``repeat`` share a pass because each pass pays its workers' start, and an H200 starts CUDA contexts
one at a time (about 0.11 s each, ``bench/worker_steps.py``): fewer, larger batches; the same
processes. A multi-rank workload, whose rank group holds every GPU, keeps one round a pass.

Ctrl-C stops the loop: the run measured so far is returned marked incomplete, inside
:class:`~solbench.errors.RunInterrupted`, so the caller can save it and exit 130.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol

from solbench.errors import RunInterrupted
from solbench.measure.pool import slot_key as _slot_key
from solbench.measure.worker import MeasureSettings, Phases, Task
from solbench.plan.prepare import Unit as Unit  # re-exported: executors take the plan's units
from solbench.results.model import FAILED_STATUSES, CaseResult, ImplResult, RunResult
from solbench.workload.cases import Case
from solbench.workload.schema import WorkloadSpec

Progress = Callable[[str, dict[str, Any]], None]


class Executor(Protocol):
    """Runs tasks: in worker processes (:class:`~solbench.measure.pool.Pool`) or in-process.

    Runs over several devices (:mod:`solbench.execute.shard`) also call ``abort()`` where an
    executor has it: kill its workers now, from another thread (Ctrl-C).
    """

    def prestart(self, keys: Any) -> None: ...
    def run(self, key: tuple[str, str], task: Task, timeout_s: float,
            progress: Progress | None = None) -> ImplResult: ...
    def retire(self, keys: Any) -> None: ...
    def close(self) -> None: ...


class Interrupted(Exception):
    """Ctrl-C during a run; ``result`` holds everything measured before it."""

    def __init__(self, result: RunResult) -> None:
        super().__init__("interrupted")
        self.result = result


def measure_units(units: Sequence[Unit], run: RunResult, executor: Executor, *, device: str,
                  settings: MeasureSettings, timeout_s: float, l2_bytes: int | None,
                  score: Callable[[Unit, Case, Sequence[ImplResult]], CaseResult],
                  emit: Progress, on_case: Callable[[RunResult], None] | None = None,
                  keys: Sequence[str] = (), repeat: int = 1, nvml_id: str | None = None,
                  variant: Callable[[WorkloadSpec, Case, str], WorkloadSpec] | None = None,
                  max_rounds: int = 0, target_rel_ci: float = 0.01, rounds_spread: str = "case") -> RunResult:
    """Measure every case of every unit, ``repeat`` rounds; see the module docstring.

    With ``max_rounds`` above ``repeat``, rounds are then added, one at a time, to the points (case
    and implementation) whose interval over rounds is still wider than ±``target_rel_ci``
    (:func:`solbench.analysis.allocation.rounds_needed`; with ``rounds_spread`` "case", and the
    spread pooled over the case's points, ``case_rounds_needed``), until none is or ``max_rounds`` is reached.
    ``nvml_id`` is the device UUID workers read clocks by after every sample (None: no readings).
    ``variant(spec, case, impl)`` may return the spec to send for one implementation and case.
    """
    from solbench.execute.group import with_groups

    executor = with_groups(executor, units, device)  # multi-rank workloads: one process per rank
    rounds: dict[tuple[int, str], list[list[ImplResult]]] = {}  # (unit, case) -> each round's results
    scored: dict[tuple[int, str], CaseResult] = {}
    before = run.cases
    clock = Harness(run.harness)
    skips = [_skipped(unit, device) for unit in units]

    checked = Checked()
    started_before = getattr(executor, "started", None)  # worker processes (Pool.started), for the harness
    overstayed_before = getattr(executor, "overstayed", None)  # and those killed at their exit (Pool.overstayed)
    escaped_before = getattr(executor, "escaped", None)  # processes that left their worker's group (Pool.escaped)
    merged: dict[tuple[int, str], tuple[int, list[ImplResult]]] = {}  # (unit, case) -> (its rounds, merged)

    def merged_rounds(key: tuple[int, str]) -> list[ImplResult]:
        """The case's rounds so far merged per implementation, merged once per count of rounds (merging
        takes a two-level bootstrap per point: the scoring after each case and the plan before each pass
        would otherwise merge every case again)."""
        per_round = rounds[key]
        hit = merged.get(key)
        if hit is None or hit[0] != len(per_round):
            hit = merged[key] = (len(per_round), _merged(per_round))
        return hit[1]

    def capped(n: int, case_id: str, name: str) -> int | None:
        """The samples cap of a point's next round: n* from its rounds so far (none before the second)."""
        return _samples_cap(rounds.get((n, case_id), []), name, settings)

    def one_round(asked: Callable[[int, str, str], int]) -> None:
        """One pass over the units: ``asked(unit, case id, implementation)`` rounds of each point
        (0: none), each round in a worker of its own; none of a point that failed in an earlier round
        (:func:`ended`)."""
        nonlocal run
        started_pass = False

        def slots(n: int, case_id: str, name: str) -> int:
            return 0 if ended(rounds.get((n, case_id), ()), name) else asked(n, case_id, name)

        def passed_over(n: int, case: Case) -> None:
            """A case none of whose points gets a round here: counted done where some were asked for."""
            if (rounds_asked := max((asked(n, case.id, name) for name in units[n].impls), default=0)):
                emit("case_done", {"case": case.id, "rounds": rounds_asked})  # every point asked for had ended

        for n, unit in enumerate(units):
            depth = {name: max((slots(n, c.id, name) for c in unit.cases), default=0) for name in unit.impls}
            names = [name for name in unit.impls if depth[name]]
            if not names:
                for case in unit.cases:
                    passed_over(n, case)
                continue
            emit("workers", {"workload": unit.spec.name})
            worker_keys = [_slot_key(k, s) for k in _keys(unit, skips[n]) if k[1] in names for s in range(depth[k[1]])]
            held = {(c.id, name): held_before(rounds.get((n, c.id), []), name, device)
                    for c in unit.cases for name in names if slots(n, c.id, name)}
            fit = bool(worker_keys) and fits_side_by_side(
                executor, worker_keys[0], settings, len(worker_keys),
                [c for c in unit.cases if any(slots(n, c.id, name) for name in names)],
                unit.spec.reference_dtype, device, max(held.values(), default=0))
            with clock("workers_s"), clock.reaping(executor):
                executor.prestart(worker_keys)  # all of them, before anything is measured
            if not started_pass:
                started_pass = True
                clock.count("passes")
            for case in unit.cases:
                wanted = {name: k for name in names if (k := slots(n, case.id, name))}
                if not wanted:
                    passed_over(n, case)
                    continue
                task = Task(unit.spec, case, "", str(unit.path.parent.absolute()), device, settings, l2_bytes,
                            nvml_id, release_after=not fit, workload_file=str(unit.path.absolute()))
                made = {name: _job(executor, unit, task, name, skips[n], timeout_s, emit, variant, checked,
                                   capped(n, case.id, name)) for name in wanted}
                passes = max(wanted.values())
                jobs = [replace(made[name], slot=s, held=held[(case.id, name)])
                        for s in range(passes) for name in wanted if wanted[name] > s]
                with clock("tasks_s"):
                    results = run_case(jobs, clock)
                clock.add_tasks(results)
                per_round = rounds.setdefault((n, case.id), [])
                for s in range(passes):
                    per_round.append([r for j, r in zip(jobs, results, strict=True) if j.slot == s])
                scored[(n, case.id)] = score(unit, case, merged_rounds((n, case.id)))
                run = replace(run, cases=(*before, *scored.values()), harness=clock.totals())
                if on_case is not None:
                    with clock("save_s"):
                        on_case(run)
                emit("case_done", {"case": case.id, "rounds": passes})
            with clock("workers_s"):
                executor.retire(worker_keys)

    def first(n: int, case_id: str, name: str) -> int:
        return int(not keys or f"{case_id}/{name}" in keys)

    multi_rank = [_ranks(unit) > 1 for unit in units]
    try:
        if repeat > 1:
            emit("round", {"round": 1, "of": repeat})
        one_round(first)  # every check in full
        if repeat > 1:  # rounds 2 to repeat in one pass, each in a worker of its own (a rank group: one a pass)
            emit("round", {"round": 2, "last": repeat, "of": repeat})
            one_round(lambda n, case_id, name: first(n, case_id, name) * (1 if multi_rank[n] else repeat - 1))
        for r in range(3, repeat + 1) if any(multi_rank) else ():  # the rank groups' rounds 3 on, a pass each
            emit("round", {"round": r, "of": repeat})
            one_round(lambda n, case_id, name: first(n, case_id, name) * int(multi_rank[n]))
        for _ in range(repeat, max_rounds):  # every pass adds a round to each point it measures
            pending = _undecided(rounds, target_rel_ci, max_rounds, units, rounds_spread, merged_rounds)
            if not pending:
                break
            deepest: dict[tuple[int, str], int] = {}
            for (n, c, _), k in pending.items():
                deepest[(n, c)] = max(deepest.get((n, c), 0), k)
            emit("more", {"cases": sum(deepest.values()), "points": len(pending),
                          "rounds": sum(pending.values()), "of": max_rounds})
            one_round(functools.partial(_in_pending, pending))
    except KeyboardInterrupt:
        run = replace(run, complete=False, notes=(*run.notes, "interrupted (Ctrl-C or SIGTERM): the cases listed are "
                                                  "all that were measured"), harness=clock.totals())
        raise RunInterrupted(run) from None
    finally:
        with clock("workers_s"), clock.reaping(executor):
            executor.close()
        started = getattr(executor, "started", None)
        if isinstance(started, int) and isinstance(started_before, int):
            clock.count("worker_processes", started - started_before)
        overstayed = getattr(executor, "overstayed", None)
        if isinstance(overstayed, int) and isinstance(overstayed_before, int) and overstayed > overstayed_before:
            clock.count("workers_killed", overstayed - overstayed_before)
        escaped = getattr(executor, "escaped", None)
        if isinstance(escaped, int) and isinstance(escaped_before, int) and escaped > escaped_before:
            clock.count("escaped_killed", escaped - escaped_before)
            run = note_escaped(run, escaped - escaped_before)
    return replace(run, harness=clock.totals())


def escaped_note(n: int) -> str:
    """The run's note where implementations left processes behind outside their workers' groups."""
    return (f"killed {n} process{'es' if n != 1 else ''} that an implementation left running outside "
            "its worker's process group (setsid()): it tried to outlive its worker")


def note_escaped(run: RunResult, n: int) -> RunResult:
    """``run`` with :func:`escaped_note` added where ``n`` processes were killed (unchanged where none)."""
    return replace(run, notes=(*run.notes, escaped_note(n))) if n else run


class Checked:
    """Which points (any hashable key per case and implementation) have passed every check in this
    invocation: their later rounds check lighter (``Task.checks``, :mod:`solbench.measure.worker`).
    A point whose first round did not pass them (skipped, failed) is checked in full again.
    It also counts each point's timed samples so far (``Task.seen``): the rate at which timed calls
    are verified runs on over the point's rounds (:func:`solbench.measure.loop.measure`)."""

    def __init__(self) -> None:
        self._keys: set[Any] = set()
        self._seen: dict[Any, int] = {}

    def checks(self, key: Any) -> str:
        """The checks the point ``key`` needs now: "full" until it has passed them all, then "light"."""
        return "light" if key in self._keys else "full"

    def note(self, key: Any, result: ImplResult) -> None:
        """A result of the point ``key``: ok under every check marks it."""
        if result.status == "ok" and result.protocol.get("checks") != "light":
            self._keys.add(key)
        if result.status == "ok" and result.timing is not None:
            self._seen[key] = self._seen.get(key, 0) + len(result.timing.samples)

    def seen(self, key: Any) -> int:
        """The point ``key``'s timed samples in its ok rounds so far."""
        return self._seen.get(key, 0)


class Harness(Phases):
    """Where a run's wall time goes, as the parent sees it (``RunResult.harness``, ``show --harness``)::

        workers_s   starting and retiring worker processes (fork, CUDA context, imports); inside
                    it reap_s, the wait for retired workers to exit, where the executor says
                    (Pool.reap_s)
        tasks_s     waiting on workers for results; inside it side_s, the wall time of set-up
                    and checks side by side (run_case), side_after_s, the wall time of the checks
                    after timing side by side, and as the workers report: side_setup_s,
                    side_check_s and side_after_sum_s (summed over the workers side by side),
                    setup_s, check_s (tasks run alone), sample_s, after_s (tasks run alone;
                    worker.Phases), gpu_busy_s
                    (spin + flush + timed call: the device time the timing loop needed) and capture_s
                    (CUDA graphs captured and their replays checked, timer.GraphLaunch: inside set-up,
                    or inside the timing loop for a task not captured ahead)
        save_s      writing the partial run after each case (the caller's on_case)

    Two counts ride along: ``passes`` (passes over the workloads that started workers) and
    ``worker_processes`` (the worker processes started, replacements after a fault included, where
    the executor counts them: Pool.started; a rank group's processes are not counted); where any
    was, a third: ``workers_killed`` (retired workers killed for not exiting within
    pool.EXIT_WAIT_S of being asked: Pool.overstayed); where any was, a fourth: ``escaped_killed``
    (processes an implementation left running outside its worker's group, killed: Pool.escaped;
    the run notes them too). A pass's
    start and each process's CUDA context and exit are what the rounds cost beyond their tasks
    (``show --harness`` prints both below the table).

    The caller adds detect_s, prepare_s and wall_s (solbench.execute.run).
    """

    PHASES = ("setup_s", "check_s", "sample_s", "after_s", "gpu_busy_s", "capture_s")
    # held tasks: their set-up, checks and checks after timing ran side by side
    SIDE: ClassVar[dict[str, str]] = {"setup_s": "side_setup_s", "check_s": "side_check_s",
                                      "after_s": "side_after_sum_s"}

    def add_tasks(self, results: Sequence[ImplResult]) -> None:
        """Add what the workers reported of each task's phases; a held task's set-up and checks
        (side by side with others, inside ``side_s``) to ``side_setup_s`` and ``side_check_s``, but
        the part it did alone after taking its turn early (``setup_alone_s``, ``check_alone_s``:
        cuBLASLt tuning, :class:`solbench.measure.worker.Phases`) to ``setup_s`` and ``check_s``."""
        for r in results:
            side = r.protocol.get("side_by_side") == 1
            for name in self.PHASES:
                value = _seconds(r.protocol.get(name))
                if value is None:
                    continue
                if side and name in self.SIDE:
                    alone_key = Phases.ALONE.get(name)  # set-up and checks a tuning worker ran alone
                    alone = min(_seconds(r.protocol.get(alone_key)) or 0.0, value) if alone_key else 0.0
                    self._add(self.SIDE[name], value - alone)
                    if alone:
                        self._add(name, alone)
                else:
                    self._add(name, value)

    @contextlib.contextmanager
    def reaping(self, executor: Any) -> Iterator[None]:
        """Add to ``reap_s`` what ``executor`` spent waiting for retired workers to exit meanwhile
        (its ``reap_s`` counter; nothing where it has none)."""
        before = getattr(executor, "reap_s", None)
        try:
            yield
        finally:
            after = getattr(executor, "reap_s", None)
            if isinstance(before, float) and isinstance(after, float):
                self._add("reap_s", after - before)

    def _add(self, key: str, seconds: float) -> None:
        self.seconds[key] = self.seconds.get(key, 0.0) + seconds

    def count(self, key: str, n: int = 1) -> None:
        """Add ``n`` to the count ``key`` (``passes``, ``worker_processes``), kept beside the seconds."""
        self._add(key, float(n))

    def totals(self) -> dict[str, float]:
        return {k: round(v, 4) for k, v in self.seconds.items()}


def _seconds(value: object) -> float | None:
    """A phase's seconds as a worker reported them, or None where it reported none (or not a number)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


PASS_ROUNDS = 4  # at most this many of a point's added rounds in one pass (as many workers of an implementation)


def ended(per_round: Sequence[Sequence[ImplResult]], name: str) -> bool:
    """Whether the implementation ``name`` failed in one of a point's rounds so far (incorrect,
    crashed, timed out, cheated...). A failure in any round is the point's result whatever the other
    rounds measure (:func:`solbench.analysis.pooling.merge_rounds`), so it gets no more rounds: a
    kernel that never returns costs one timeout, not one a round. A skipped round does not end it
    (the rounds that ran are its result)."""
    return any(r.name == name and r.status in FAILED_STATUSES for results in per_round for r in results)


def _in_pending(pending: dict[tuple[int, str, str], int], n: int, case_id: str, name: str) -> int:
    return pending.get((n, case_id, name), 0)


def _undecided(rounds: dict[tuple[int, str], list[list[ImplResult]]], target_rel_ci: float,
               cap: int, units: Sequence[Unit], spread: str = "case",
               merged: Callable[[tuple[int, str]], list[ImplResult]] | None = None) -> dict[tuple[int, str, str], int]:
    """(unit, case id, implementation) -> rounds to add in the next pass, for every ok point whose
    interval over its rounds is wider than ±target and would narrow to it within ``cap`` rounds.

    ``spread`` "own": the point's own spread says (allocation.rounds_needed); "case": and no fewer
    rounds than the spread pooled over the case's points asks for (allocation.case_rounds_needed),
    so that a point of a noisy case does not stop on three rounds that happen to agree.
    ``merged(key)``, where given, is the case's rounds merged (a cache); else they are merged here.
    A point gets the rounds its spread so far says it needs (minus those it has),
    at most PASS_ROUNDS in one pass, one at a time in a multi-rank workload (``units``, by index:
    a rank group holds every GPU). All of them go into one pass, each in a worker of its own, so the
    per-pass cost (starting the workers, a barrier per case) is paid once rather than once a round.
    The rounds still follow the measured spread: replaying five H200 o_proj runs, the plan after
    three rounds added up to within 3% of the point-rounds that adding one round a pass measured
    (``results/h200/issue16/session14``: 265 against 262, 260/267, 256/263, 289/291, 262/263).
    """
    from solbench.analysis.allocation import case_rounds_needed, rounds_needed

    pending = {}
    for (n, case_id), per_round in rounds.items():
        ranks = _ranks(units[n])
        points = [(r.name, r.timing) for r in (merged((n, case_id)) if merged is not None else _merged(per_round))
                  if r.status == "ok" and not r.protocol.get("part") and r.timing is not None]
        if spread == "case":
            needs = case_rounds_needed([t for _, t in points], target_rel_ci, cap)
        else:
            needs = [rounds_needed(t, target_rel_ci, cap) for _, t in points]
        for (name, timing), need in zip(points, needs, strict=True):
            more = need - timing.n_rounds
            if more > 0:
                pending[(n, case_id, name)] = 1 if ranks > 1 else min(more, PASS_ROUNDS)
    return pending


def fits_side_by_side(executor: Executor, key: tuple[str, str], settings: MeasureSettings, workers: int,
                      cases: Sequence[Case], reference_dtype: str, device: str, measured: int = 0) -> bool:
    """Whether ``workers`` workers may each keep the memory its last task left cached until its next
    task starts, when nothing is timed (``Task.release_after`` False): each holding the most any of
    ``cases`` takes (:func:`solbench.execute.warm.held_bytes`) or ``measured`` (the most a worker of
    these points held in earlier rounds), all within ``executor``'s hold budget.
    Otherwise, or where the executor cannot say, a worker gives it back as its task ends, since a
    worker of a later group or case may need it."""
    from solbench.execute.warm import held_bytes

    hold = getattr(executor, "hold_budget", None)
    budget = hold(key) if hold is not None else None
    most = max((held_bytes(c, input_sets=settings.input_sets, reference_dtype=reference_dtype, device=device)
                for c in cases), default=0)
    return budget is not None and workers * max(most, measured) <= budget


def held_before(per_round: Sequence[Sequence[ImplResult]], name: str, device: str) -> int:
    """What implementation ``name``'s workers were measured to hold at one case in its rounds so far
    (``per_round``: each round's results at that case; :func:`solbench.execute.warm.measured_held`)."""
    from solbench.execute.warm import measured_held

    return measured_held((int(r.protocol["memory_peak_bytes"]) for results in per_round for r in results
                          if r.name == name and "memory_peak_bytes" in r.protocol), device)


def _ranks(unit: Unit) -> int:
    """The processes one round of ``unit`` takes: its world size (a multi-rank workload's rank group
    holds every GPU), else 1."""
    return getattr(unit.spec, "world_size", 1)


def _samples_cap(per_round: Sequence[Sequence[ImplResult]], name: str, settings: MeasureSettings) -> int | None:
    """n* for the next round of implementation ``name`` at one case
    (:func:`solbench.analysis.allocation.samples_next_round`), from its ok results in ``per_round``
    (each round's results at that case); None where it has none, or where the costs were not recorded."""
    from solbench.analysis.allocation import samples_next_round

    ok = [r for results in per_round for r in results
          if r.name == name and r.status == "ok" and r.timing is not None and not r.protocol.get("part")]
    if not ok:
        return None
    last = ok[-1].protocol
    costs = [last.get(k) for k in ("setup_s", "check_s", "after_s", "sample_s")]
    if not all(isinstance(c, int | float) for c in costs):
        return None
    groups = [r.timing.samples for r in ok if r.timing is not None]  # one round each, in order
    return samples_next_round(groups, float(sum(costs[:3])), float(costs[3]),
                              min_samples=settings.min_samples, max_samples=settings.max_samples)


# the stop reason of a round that took the samples its allocation gave it (``Job.cap``): planned, not a
# stop before converging (the worker's loop says "max_samples": the cap it was given)
ALLOCATED = "allocated"


@dataclass
class Job:
    """One implementation of one case, ready for its executor (or already settled: ``result``)."""

    executor: Executor
    task: Task  # with the implementation's name, checks, seen and samples cap filled in
    timeout_s: float
    emit: Progress
    key: tuple[str, ...]  # the point, for ``checked``
    checked: Checked | None = None
    cap: int | None = None
    result: ImplResult | None = None  # skipped before it was sent
    slot: int = 0  # which of the point's rounds in this pass (each in its own worker)
    held: int = 0  # what the point's worker was measured to hold in earlier rounds (bytes; 0: none yet)

    @property
    def name(self) -> str:
        return self.task.impl

    @property
    def worker_key(self) -> tuple[str, str]:
        """The worker's key: (workload, implementation) as the unit names them (``key``), the
        implementation marked for a second or later round in one pass (:func:`_slot_key`)."""
        return _slot_key((self.key[1], self.key[3]), self.slot)

    def started(self) -> None:
        """Say which implementation the device works on now (progress)."""
        self.emit("impl", {"case": self.task.case.id, "impl": self.name})

    def run_alone(self) -> ImplResult:
        """The whole task through its executor, with nothing beside it."""
        self.started()
        return self.executor.run(self.worker_key, self.task, self.timeout_s, self.emit)


def _job(executor: Executor, unit: Unit, task: Task, name: str, skips: dict[str, str], timeout_s: float,
         emit: Progress, variant: Callable[[WorkloadSpec, Case, str], WorkloadSpec] | None = None,
         checked: Checked | None = None, cap: int | None = None) -> Job:
    """One implementation of one case (``task`` with its name filled in), for its executor; with
    ``checked``, with the checks the point needs (every check until it has passed them all once);
    with ``cap``, at most that many timed samples (the round's allocation, recorded as
    ``protocol.samples_cap``)."""
    key = (str(unit.path), unit.spec.name, task.case.id, name)
    if name in skips:
        return Job(executor, replace(task, impl=name), timeout_s, emit, key, checked,
                   result=ImplResult(name, "skipped", skips[name]))
    spec = variant(unit.spec, task.case, name) if variant is not None else unit.spec
    checks = checked.checks(key) if checked is not None else "full"
    seen = checked.seen(key) if checked is not None else 0
    if cap is not None:
        task = replace(task, settings=replace(task.settings, max_samples=cap))
    task = replace(task, spec=spec, impl=name, checks=checks, seen=seen)
    return Job(executor, task, timeout_s, emit, key, checked, cap)


def _one(executor: Executor, unit: Unit, task: Task, name: str, skips: dict[str, str], timeout_s: float,
         emit: Progress, variant: Callable[[WorkloadSpec, Case, str], WorkloadSpec] | None = None,
         checked: Checked | None = None, cap: int | None = None) -> ImplResult:
    """One implementation of one case through its worker (:func:`_job`), alone."""
    return run_case([_job(executor, unit, task, name, skips, timeout_s, emit, variant, checked, cap)])[0]


def run_case(jobs: Sequence[Job], clock: Phases | None = None) -> list[ImplResult]:
    """The results of a case's jobs, in order: set up and checked side by side, timed one at a time.

    Where the executors can hold a task at its turn (:meth:`solbench.measure.pool.Pool.hold`), the
    jobs go out in groups whose tensors fit the executor's ``hold_budget`` together
    (:func:`_groups`). Every worker of a group draws its inputs and references, sets up (compiles,
    plans) and runs its correctness and anti-cheat checks at once; then, with all of them waiting,
    each in turn is let go to time its calls alone on the device; once all have timed, they run
    their checks after timing (fresh inputs and references) at once again. Nothing is timed while
    another worker of the run works. Elsewhere (in-process, rank groups, a lone job) each job runs
    whole, one after the other.

    A held task that timed out before its turn, while a worker beside it was still busy or after one
    timed out, may owe it to that worker (a kernel that never returns shares the device): it is run
    again alone at once (``side_by_side: "again alone"``), and that result stands. A task that times
    out with nobody busy beside it keeps its result: a hang is waited for once. A held task that ran
    out of memory at any step beside other held workers (each holds its allocations while it waits
    at its turn), or met a device fault there (:func:`device_fault`: a CUDA error, a cuBLAS or cuDNN
    status), or whose checks after timing timed out beside other workers' checks, is run again
    alone once the group is done; before an OOM or a device fault is, the case's other workers are
    retired, so that neither their caches nor their contexts stay on the device
    (:func:`_retire_others`); after a device fault its own worker is replaced too (a fresh CUDA
    context). A result run again alone records what it met beside the others
    (``protocol.beside_fault``: "status: message").

    ``clock`` gets ``side_s``: the wall time until every held worker of a group reached its turn
    (or finished), and ``side_after_s``: the wall time of the checks after timing side by side; the
    results of held tasks say ``side_by_side: 1`` in their protocol.
    """
    clock = clock or Phases()
    results: list[ImplResult | None] = [j.result for j in jobs]
    waiting = [i for i, j in enumerate(jobs) if j.result is None]
    for group in _groups([jobs[i] for i in waiting], waiting):
        if len(group) == 1:
            results[group[0]] = jobs[group[0]].run_alone()
            continue
        held: dict[int, Any] = {}
        with clock("side_s"):
            for i in group:
                j = jobs[i]
                sent = j.executor.hold(j.worker_key, j.task, j.timeout_s, j.emit)
                if isinstance(sent, ImplResult):
                    results[i] = sent
                else:
                    held[i] = sent
            beside = len(held) > 1  # held side by side: an OOM may be a peer's doing, one run again alone too
            again = _waited(list(held.items()))
        for i in again:
            first = held.pop(i).result  # while the others wait at their turn, it runs alone
            results[i] = _again_alone(jobs[i], first)
        for i, h in held.items():  # one at a time: nothing else runs on the device meanwhile
            jobs[i].started()
            h.time()
        with clock("side_after_s"):  # then the checks after timing, every worker's at once
            for h in held.values():
                h.check()
            for i, h in held.items():
                results[i] = h.finish()
        late: list[int] = []
        crowded: set[int] = set()  # an OOM or a device fault: the others' memory may be why
        for i, h in held.items():
            r = results[i]
            assert r is not None
            memory = r.status == "oom" or device_fault(r)
            if (beside and memory) or (len(held) > 1 and h.checked_beside and r.status in AGAIN_ALONE):
                late.append(i)
                if memory:
                    crowded.add(i)
            results[i] = replace(r, protocol={**r.protocol, "side_by_side": 1})
        gone: set[int] = set()  # jobs whose workers were retired and not started again since
        for i in late:  # an OOM or a device fault beside other workers, a timeout in checks side by side
            first = results[i]
            assert first is not None
            if i in crowded:
                _retire_others(jobs, i, gone)
            if device_fault(first):  # and its own: it runs again in a fresh CUDA context
                jobs[i].executor.retire([jobs[i].worker_key])
            results[i] = _again_alone(jobs[i], first)
            gone.discard(i)  # its worker lives again (and keeps what this run left cached)
    done: list[ImplResult] = []
    for j, r in zip(jobs, results, strict=True):
        assert r is not None
        if j.cap is not None and j.result is None:
            r = replace(r, protocol={**r.protocol, "samples_cap": j.cap})
            if r.timing is not None and r.timing.stop_reason == "max_samples" and r.timing.n >= j.cap:
                r = replace(r, timing=replace(r.timing, stop_reason=ALLOCATED))  # where the round was planned to
        if j.checked is not None:
            j.checked.note(j.key, r)
        j.emit("impl_done", {"case": j.task.case.id, "impl": j.name, "status": r.status})
        done.append(r)
    return done


AGAIN_ALONE = frozenset({"timeout", "oom"})  # statuses a worker beside it can cause: measured again alone

# What a device library raises where the device or its memory failed it, rather than an
# implementation's own exception: beside other held workers it may be their doing. On an 80 GB H100
# the whole ResNet-50's `channels_last`, set up beside eleven peers that held 5-13 GiB each, raised
# "CUDA error: unknown error" in a correctness check (BENCHMARKS.md, issue 16, thirty-ninth session).
DEVICE_FAULT = re.compile(r"CUDA error|CUDA driver error|Triton Error \[CUDA\]|CUDA_ERROR_|cudaError|CUBLAS_STATUS_|"
                          r"CUDNN_STATUS_|CUFFT_|CUSOLVER_STATUS_|CUSPARSE_STATUS_|CURAND_STATUS_|AcceleratorError")


def device_fault(result: ImplResult) -> bool:
    """Whether a failed result is a device fault (:data:`DEVICE_FAULT`) rather than the
    implementation's own exception: an ``error``, or a ``crashed`` whose CUDA context the fault
    left unusable ("CUDA context lost: CUDA error: ..."; its worker is replaced anyway). A fault that
    is the implementation's (a bad launch, an illegal address) meets it again alone, and that result
    stands."""
    return result.status in ("error", "crashed") and DEVICE_FAULT.search(result.message) is not None


def _again_alone(job: Job, first: ImplResult | None) -> ImplResult:
    """``job`` run again alone: its result stands, marked, with what it first met beside the others."""
    r = job.run_alone()
    met = {"beside_fault": f"{first.status}: {first.message}"[:300]} if first is not None else {}
    return replace(r, protocol={**r.protocol, "side_by_side": "again alone", **met})


def _retire_others(jobs: Sequence[Job], keep: int, gone: set[int]) -> None:
    """Retire the workers of the case's other jobs (``gone``: those already retired, which it adds to)
    before the task ``keep`` that ran out of memory (or met a device fault) beside them runs again
    alone: a worker that has given its result still holds its allocator's cache (where
    ``Task.release_after`` let it) and its CUDA context until it exits; so do those of the group's
    other tasks to run again alone, before their turn and after it. Its executor starts it again
    where a later task needs it (:meth:`solbench.measure.pool.Pool.prestart`, which also waits for
    the retired to be gone). That waits only for its own executor's: those of another executor
    (``solbench ab``: the other tree's pool) are waited for here (``prestart([])``), so that none is
    still tearing down its context while ``keep`` sets up and times again alone."""
    others: list[Executor] = []
    for k, job in enumerate(jobs):
        if k != keep and k not in gone and job.result is None:
            job.executor.retire([job.worker_key])
            gone.add(k)
            if job.executor is not jobs[keep].executor and all(job.executor is not e for e in others):
                others.append(job.executor)
    for executor in others:
        executor.prestart([])  # starts nothing; waits for the workers it retired to be gone


def _waited(held: list[tuple[int, Any]]) -> list[int]:
    """Wait for every held task to reach its turn or end, in order; the places of those to run again
    alone at once: timed out while a later one was still busy, or after an earlier one timed out (an
    OOM or a device fault is run again once the group is done, with the case's other workers retired)."""
    again, timed_out = [], False
    for k, (i, h) in enumerate(held):
        h.reach_turn()
        status = h.result.status if h.result is not None else None
        if status == "timeout" and (timed_out or any(p.busy() for _, p in held[k + 1:])):
            again.append(i)
        timed_out = timed_out or status == "timeout"
    return again


def _groups(jobs: Sequence[Job], index: Sequence[int]) -> list[list[int]]:
    """``index`` (the jobs' places) cut into groups that go out side by side: consecutive jobs
    whose executors can hold tasks and whose memory fits their executor's ``hold_budget`` together:
    each job counted at its case tensors (:func:`~solbench.execute.warm.task_bytes`) or at what its
    point's worker held in earlier rounds (``Job.held``), whichever is more. A job that cannot go
    side by side is a group of its own."""
    from solbench.execute.warm import task_bytes

    groups: list[list[int]] = []
    used, joinable = 0, False
    for job, i in zip(jobs, index, strict=True):
        budget = _hold_budget(job)
        need = max(task_bytes(job.task, input_sets=job.task.settings.input_sets), job.held)
        if budget is not None and joinable and used + need <= budget:
            groups[-1].append(i)
            used += need
        else:
            groups.append([i])
            used, joinable = need, budget is not None
    return groups


def _hold_budget(job: Job) -> int | None:
    """The case bytes held tasks may keep at once beside ``job``'s, or None where its executor cannot
    hold it (``hold_budget``: a Pool, or a group executor for a one-process workload)."""
    budget = getattr(job.executor, "hold_budget", None)
    return budget(job.worker_key) if budget is not None else None


def _merged(per_round: list[list[ImplResult]]) -> list[ImplResult]:
    """Each implementation's rounds so far as one result (the first round alone: unchanged)."""
    if len(per_round) == 1:
        return per_round[0]
    from solbench.analysis.pooling import merge_rounds

    names = list(dict.fromkeys(r.name for results in per_round for r in results))
    return [merge_rounds([r for results in per_round for r in results if r.name == name], of=len(per_round))
            for name in names]


def _skipped(unit: Unit, device: str) -> dict[str, str]:
    """Implementations whose requirements this machine lacks: skipped without starting a worker."""
    from solbench.measure.runner import missing_requirement

    found = {name: missing_requirement(unit.spec.implementations[name], device) for name in unit.impls}
    return {name: reason for name, reason in found.items() if reason is not None}


def _keys(unit: Unit, skipped: dict[str, str]) -> list[tuple[str, str]]:
    return [(unit.spec.name, name) for name in unit.impls if name not in skipped]
