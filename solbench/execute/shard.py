"""Cases sharded over several devices: one lane per device (a thread driving its own workers).

A lane is one GPU of this node (``run --devices``) or one GPU of a Ray cluster (``run --executor
ray``, :mod:`solbench.execute.ray_cluster`). Every case is a job; a job runs all implementations of
its case on one lane, so a case is never split between devices and a device never measures two
cases at once::

    jobs = every (workload, case); width = world_size; estimate = the case's time in an earlier
           run (history_estimates), else T_SOL x implementations (the dry run's figure)
    queue: longest estimate first (plan order on ties)
    whenever lanes are free, each free lane (in lane order) takes (Scheduler.assign):
        1. the longest queued job of a workload it holds warm workers for
        2. else the longest queued job of a workload no lane has started
        3. else the longest queued job of a workload another lane holds, if that lane would still
           have more left of it than the thief takes on: queued(w) - e(j) > e(j) + cold(w), with
           queued(w) the estimates of w's queued jobs and cold(w) its start-up cost on a new lane
           (0 when unknown: then a workload is shared only while 3 or more equal jobs are queued)
       a job of width k takes the picking lane and the k - 1 lanes after it in lane order (wrapping
       round; group()), and waits while any of them is busy: its first lane, the one its case
       records, names the whole group
    a lane whose workload has no queued job left retires that workload's workers
    the main thread scores each finished case against its own lane's device spec, attaches the
    lane's fingerprint, orders the run by plan order and hands it to on_case (saved every case)

Rule 1 keeps a workload's first-call costs (compilation, library heuristics, worker start-up)
on one device; rule 3 balances the end of the run without paying them again for a job the warm
lane would have finished as soon (torch.compile's first call costs tens of seconds).

``--repeat``: every round starts fresh workers and a case stays on the lane(s) it had in round 1,
so its rounds are never merged across devices. Rounds added later (``run --gate-against``'s
re-measure of the undecided cases, a run of its own) keep to that too: each case measured before
(``measured_on``: the device its first rounds recorded) runs on the lane of that device, and is
skipped, keeping the rounds it has, where the run has no lane on it (a Ray cluster's actors
placed elsewhere).

A lost lane (:class:`~solbench.errors.LaneLost`: a Ray actor whose node or process died, a local GPU
NVML reports lost after a point failed on it: :class:`solbench.execute.lanes.WatchedGpu`) measures
nothing more, in this round or any later one, and the run goes on over the lanes left::

    the case it was measuring, in round 1   measured again from its start on another lane, the
    (or had been handed, not yet started)   implementation it was measuring then run last; a case
                                            moves once (MOVES_PER_CASE) for a loss while one of its
                                            implementations ran: losing a second lane so, it keeps
                                            what that lane finished, the implementation running
                                            then is crashed and the rest are not measured
    in a later round                        keeps its earlier rounds and what the lost lane finished
                                            of this one; no more rounds (they are never merged
                                            across devices)
    cases it measured before, queued cases  keep their rounds; no more rounds; a queued case
    pinned to it                            never measured is skipped, saying why
    no lane left                            the run stops in one line (DeviceError), the cases
                                            measured so far saved

Each loss is a note of the run. A lane lost with a case moved and measured elsewhere changes no
status: the exit code is the results'.

Ctrl-C (in the main thread): every lane's workers are killed, the lanes' threads joined, and the
cases finished so far are raised inside RunInterrupted, as in the single-device loop.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from solbench.errors import DeviceError, LaneLost, RunInterrupted
from solbench.execute.session import Executor, Progress, Unit, _keys, _merged, _one, ended, note_escaped
from solbench.measure.worker import MeasureSettings, Task
from solbench.results.model import CaseResult, Environment, ImplResult, RunResult
from solbench.workload.cases import Case

Score = Callable[[Unit, Case, Sequence[ImplResult]], CaseResult]
JOIN_TIMEOUT_S = 60.0  # a lane's thread after its workers were killed (Ctrl-C)
MOVES_PER_CASE = 1  # lanes a case may lose in its first round and still be measured again on another


def world_size(unit: Unit) -> int:
    """Devices a unit's cases need at once (``world_size`` of its workload; 1 when absent)."""
    return max(1, int(getattr(unit.spec, "world_size", 1) or 1))


@dataclass(frozen=True)
class Job:
    """One case to measure on one lane (or ``width`` lanes at once)."""

    order: int  # position in plan order: where the case goes in the run
    unit: int  # index of its unit (workload)
    case: Case
    estimate: float  # seconds; used for ordering only
    width: int = 1
    last: str = ""  # the implementation to measure last: the one measuring when the case lost a lane


def plan_jobs(units: Sequence[Unit], estimate: Callable[[Unit, Case], float]) -> list[Job]:
    """Every case of every unit as a job, longest estimate first (plan order on ties)."""
    jobs, order = [], 0
    for u, unit in enumerate(units):
        for case in unit.cases:
            jobs.append(Job(order, u, case, float(estimate(unit, case)), world_size(unit)))
            order += 1
    return sorted(jobs, key=lambda j: -j.estimate)


class Scheduler:
    """Which queued job each free lane takes (rules in the module docstring). Pure: no threads.

    ``pinned`` maps a job's order to the lanes it must run on (rounds after the first); ``cold``
    a unit's start-up cost on a lane that has not run it (same unit as the estimates; default 0).
    """

    def __init__(self, jobs: Sequence[Job], lanes: Sequence[int],
                 pinned: Mapping[int, tuple[int, ...]] | None = None, cold: Mapping[int, float] | None = None) -> None:
        self.queue = list(jobs)
        self.cold = dict(cold or {})
        self.lanes = tuple(lanes)
        self.pinned = dict(pinned or {})
        self.warm: dict[int, set[int]] = {lane: set() for lane in self.lanes}  # lane -> units
        self.started: set[int] = set()
        if any(j.width > len(self.lanes) for j in self.queue):
            raise ValueError("a job is wider than the lanes (measure_sharded skips those)")

    def assign(self, free: Sequence[int]) -> list[tuple[Job, tuple[int, ...]]]:
        """Jobs to start now, each with its lanes (the first drives it); every lane used once."""
        avail = [lane for lane in self.lanes if lane in set(free)]
        out = []
        for lane in list(avail):
            if lane not in avail:
                continue  # taken by a wider job this call
            job = self._pick(lane, avail)
            if job is None:
                continue
            lanes = self.pinned.get(job.order) or group(self.lanes, lane, job.width)
            self.queue.remove(job)
            for x in lanes:
                avail.remove(x)
            if job.width == 1:
                self.warm[lane].add(job.unit)
            self.started.add(job.unit)
            out.append((job, tuple(lanes)))
        return out

    def _pick(self, lane: int, avail: Sequence[int]) -> Job | None:
        fits = [j for j in self.queue if self._fits(j, lane, avail)]
        rules: tuple[Callable[[Job], bool], ...] = (
            lambda j: j.unit in self.warm[lane], lambda j: j.unit not in self.started, self._worth_sharing)
        for rule in rules:
            job = next((j for j in fits if rule(j)), None)
            if job is not None:
                return job
        return None

    def _worth_sharing(self, job: Job) -> bool:
        """Rule 3: the lanes holding the job's workload keep more of it than a new lane takes on."""
        if job.order in self.pinned or not any(job.unit in units for units in self.warm.values()):
            return True  # no lane holds it (a wide workload): nothing to keep warm
        queued = sum(j.estimate for j in self.queue if j.unit == job.unit)
        return queued - job.estimate > job.estimate + self.cold.get(job.unit, 0.0)

    def _fits(self, job: Job, lane: int, avail: Sequence[int]) -> bool:
        want = self.pinned.get(job.order) or group(self.lanes, lane, job.width)
        return want[0] == lane and all(x in avail for x in want)

    def drop(self, lane: int) -> list[Job]:
        """Take a lost lane out of service; returns the queued jobs that can no longer run (pinned to
        it, or wider than the lanes left), taken out of the queue."""
        self.lanes = tuple(x for x in self.lanes if x != lane)
        self.warm.pop(lane, None)
        stranded = [j for j in self.queue if lane in self.pinned.get(j.order, ()) or j.width > len(self.lanes)]
        self.queue = [j for j in self.queue if j not in stranded]
        return stranded

    def requeue(self, job: Job) -> None:
        """Queue a job again (its lane was lost while it ran), in its place: longest first, plan order on ties."""
        self.queue = sorted([*self.queue, job], key=lambda j: (-j.estimate, j.order))

    def to_retire(self, lane: int) -> list[int]:
        """Units whose workers ``lane`` holds and no queued job needs any more (forgotten here)."""
        queued = {j.unit for j in self.queue}
        done = sorted(self.warm[lane] - queued)
        self.warm[lane] -= set(done)
        return done


def group(lanes: Sequence[int], first: int, width: int) -> tuple[int, ...]:
    """The lanes a job of ``width`` starting on ``first`` runs on: it and the ones after it in lane order,
    wrapping round (lanes (0, 1, 2), first 2, width 2: (2, 0))."""
    at = list(lanes).index(first)
    return tuple(lanes[(at + k) % len(lanes)] for k in range(width))


def history_estimates(units: Sequence[Unit],
                      history: RunResult) -> tuple[dict[tuple[str, str], float], dict[int, float]]:
    """Estimates from a run measured before: each case's time (the sum of its implementations'
    ``task_s``) and each unit's start-up cost on a fresh lane (its slowest case minus its median
    case: the first-call costs its first case paid). Cases the run lacks are left out."""
    times: dict[tuple[str, str], float] = {}
    for case in history.cases:
        spent = [float(r.protocol["task_s"]) for r in case.impls
                 if isinstance(r.protocol.get("task_s"), (int, float))]
        if spent:
            times[(case.workload, case.case_id)] = sum(spent)
    cold = {}
    for u, unit in enumerate(units):
        known = sorted(times[(unit.spec.name, c.id)] for c in unit.cases if (unit.spec.name, c.id) in times)
        if len(known) > 1:
            cold[u] = max(0.0, known[-1] - known[len(known) // 2])
    return times, cold


@dataclass(frozen=True)
class Lane:
    """One device a job can run on, and how to score and fingerprint what it measured."""

    index: int  # lane number (the CUDA index for local GPUs)
    device: str  # "cuda" or "cpu" (what a Task names)
    make_executor: Callable[[], Executor]  # fresh workers for a round
    score: Score  # against this device's spec
    environment: Environment | None  # the fingerprint stored with each case (None: the run's own)
    l2_bytes: int | None = None
    nvml_id: str | None = None


# world_size > 1: an executor running the unit's tasks as one process group over these lanes
GroupExecutor = Callable[[Sequence[Lane], Unit], Executor]
NO_GROUP = "needs {n} devices as one process group, which this executor cannot start"


def measure_sharded(units: Sequence[Unit], run: RunResult, lanes: Sequence[Lane], *, settings: MeasureSettings,
                    timeout_s: float, estimate: Callable[[Unit, Case], float], emit: Progress,
                    on_case: Callable[[RunResult], None] | None = None, keys: Sequence[str] = (),
                    repeat: int = 1, group: GroupExecutor | None = None,
                    variant: Callable[[Any, Case, str], Any] | None = None,
                    cold: Mapping[int, float] | None = None,
                    measured_on: Mapping[tuple[str, str], Environment] | None = None) -> RunResult:
    """Measure every case on the lanes, ``repeat`` rounds (module docstring); the run in plan order.

    ``cold``: each unit's start-up cost on a fresh lane, in the estimates' unit (Scheduler).
    ``measured_on``: the device each (workload, case id) measured before was measured on; such a
    case runs on that device's lane, or is skipped where no lane is on it (module docstring)."""
    jobs = plan_jobs(units, estimate)
    too_wide = [j for j in jobs if j.width > len(lanes)]
    jobs = [j for j in jobs if j.width <= len(lanes)]
    # no executor starts a process group: a multi-rank case is skipped before any lane takes it
    groupless = [j for j in jobs if j.width > 1] if group is None else []
    jobs = [j for j in jobs if j not in groupless]
    pinned, astray = pin_lanes(jobs, units, lanes, measured_on or {})
    gone = {job.order for job, _ in astray}
    jobs = [j for j in jobs if j.order not in gone]
    # skipped before any lane takes them, in every round: (job, why)
    unplaced = [(j, f"needs {j.width} devices at once (world_size); this run has {len(lanes)}")
                for j in sorted(too_wide, key=lambda j: j.order)]
    unplaced += [(j, NO_GROUP.format(n=j.width)) for j in groupless]
    unplaced += [(j, f"its earlier rounds were measured on {_named(device)}, which this run has no lane on: "
                     "a case's rounds are not merged across devices") for j, device in astray]
    state = _State(units, run, lanes, emit, on_case, keys)
    escaped = 0  # processes left outside a worker's group, killed by the lanes' pools (pool.sweep)
    try:
        for r in range(repeat):
            if repeat > 1:
                emit("round", {"round": r + 1, "of": repeat})
            for job, why in unplaced:
                state.add(job, (lanes[0].index,), state.skipped(job, why), measured=False)
            live = [lane for lane in lanes if lane.index not in state.lost]
            # their lanes were lost in an earlier round: they keep the rounds they have
            gone = [j for j in jobs if any(x in state.lost for x in pinned.get(j.order, ())) or j.width > len(live)]
            for job in gone:
                state.emit("case_done", {"case": job.case.id, "device": pinned.get(job.order, (lanes[0].index,))[0]})
            runnable = [j for j in jobs if j not in gone]
            if not live:
                if runnable:
                    raise DeviceError(f"every lane was lost ({'; '.join(state.lost.values())}): the run stops here")
                continue
            ctx = _Round(units, live, settings, timeout_s, keys, group, variant, state, first=r == 0)
            placed = ctx.run(Scheduler(runnable, [lane.index for lane in live], pinned, cold))
            pinned = {**pinned, **placed}
            counts = (getattr(executor, "escaped", 0) for executor in ctx.executors.values())  # each lane's pool
            escaped += sum(n for n in counts if isinstance(n, int))
    except KeyboardInterrupt:
        note = "interrupted (Ctrl-C or SIGTERM): the cases listed are all that were measured"
        stopped = replace(state.run, complete=False, notes=(*state.run.notes, note))
        raise RunInterrupted(stopped) from None
    return note_escaped(state.run, escaped)  # a Ray actor's pool kills them too, uncounted here


def pin_lanes(jobs: Sequence[Job], units: Sequence[Unit], lanes: Sequence[Lane],
              measured_on: Mapping[tuple[str, str], Environment]) -> tuple[dict[int, tuple[int, ...]],
                                                                           list[tuple[Job, Environment]]]:
    """The lanes each job measured before must run on (job order -> lanes, as Scheduler's ``pinned``):
    its device's lane, and for a multi-rank job the lanes after it (``group``: the first lane names the
    group); and the jobs whose device no lane is on, each with that device, in plan order."""
    pinned: dict[int, tuple[int, ...]] = {}
    astray: list[tuple[Job, Environment]] = []
    for job in jobs:
        device = measured_on.get((units[job.unit].spec.name, job.case.id))
        if device is None:
            continue
        lane = next((lane.index for lane in lanes
                     if lane.environment is not None and same_device(lane.environment, device)), None)
        if lane is None:
            astray.append((job, device))
        else:
            pinned[job.order] = group([lane.index for lane in lanes], lane, job.width)
    return pinned, sorted(astray, key=lambda item: item[0].order)


def same_device(a: Environment, b: Environment) -> bool:
    """Whether two fingerprints name one device: the same UUID where both have one, else the same
    host, kind, name and index."""
    if a.device_uuid and b.device_uuid:
        return a.device_uuid == b.device_uuid
    return (a.host, a.device_kind, a.device_name, a.device_index) == (b.host, b.device_kind, b.device_name,
                                                                      b.device_index)


def _named(device: Environment) -> str:
    """``NVIDIA H100 80GB HBM3 (device 1, host node-a)``: a device as a message names it."""
    where = [f"{what} {x}" for what, x in (("device", device.device_index), ("host", device.host)) if x is not None]
    return f"{device.device_name} ({', '.join(where)})" if where else device.device_name


class _State:
    """What the rounds build up: each case's results per round, scored; the run in plan order."""

    def __init__(self, units: Sequence[Unit], run: RunResult, lanes: Sequence[Lane], emit: Progress,
                 on_case: Callable[[RunResult], None] | None, keys: Sequence[str] = ()) -> None:
        self.units, self.run, self.emit, self.on_case, self.keys = units, run, emit, on_case, keys
        self.before = run.cases
        self.lanes = {lane.index: lane for lane in lanes}
        self.rounds: dict[int, list[list[ImplResult]]] = {}
        self.scored: dict[int, CaseResult] = {}
        self.lost: dict[int, str] = {}  # lane -> why it was lost (LaneLost)
        self.moves: dict[int, int] = {}  # job order -> lanes it lost in its first round

    def note(self, text: str) -> None:
        """A line in the run's notes, saved with the next case."""
        self.run = replace(self.run, notes=(*self.run.notes, text))

    def asked(self, job: Job) -> list[str]:
        """The job's implementations the run asked for (``keys``: "case/implementation"), in the unit's order."""
        return [name for name in self.units[job.unit].impls if not self.keys or f"{job.case.id}/{name}" in self.keys]

    def skipped(self, job: Job, why: str) -> list[ImplResult]:
        """``skipped`` results for the job's implementations (those asked for)."""
        return [ImplResult(name, "skipped", why) for name in self.asked(job)]

    def named(self, lane: int) -> str:
        """``lane 1 (NVIDIA H100 80GB HBM3)``."""
        env = self.lanes[lane].environment
        return f"lane {lane}" + (f" ({env.device_name})" if env is not None and env.device_name else "")

    def add(self, job: Job, lanes: tuple[int, ...], results: list[ImplResult], *, measured: bool = True) -> None:
        """A finished job: merged with its earlier rounds, scored on its lane, the run re-saved. Not
        ``measured`` (skipped before any lane took it): scored on the first lane, recording no device."""
        if not results:  # nothing of it was asked for, or every point asked for had ended: still counted done
            self.emit("case_done", {"case": job.case.id, "device": lanes[0]})
            return
        per_round = self.rounds.setdefault(job.order, [])
        per_round.append(results)
        lane = self.lanes[lanes[0]]
        case = lane.score(self.units[job.unit], job.case, _merged(per_round))
        if lane.environment is not None and measured:
            case = replace(case, device=lane.environment)
        self.scored[job.order] = case
        self.run = replace(self.run, cases=(*self.before, *(self.scored[k] for k in sorted(self.scored))))
        if self.on_case is not None:
            self.on_case(self.run)
        self.emit("case_done", {"case": job.case.id, "device": lanes[0]})


class _Round:
    """One round: a thread per lane, fed jobs by the scheduler in the calling thread."""

    def __init__(self, units: Sequence[Unit], lanes: Sequence[Lane], settings: MeasureSettings, timeout_s: float,
                 keys: Sequence[str], group: GroupExecutor | None, variant: Any, state: _State,
                 first: bool = True) -> None:
        self.units, self.settings, self.timeout_s, self.keys = units, settings, timeout_s, keys
        self.group, self.variant, self.state, self.first = group, variant, state, first
        # (job, implementation) that failed in an earlier round (session.ended): no more rounds of it
        self.ended = {(order, name) for order, per_round in state.rounds.items()
                      for name in {r.name for results in per_round for r in results} if ended(per_round, name)}
        self.lanes = {lane.index: lane for lane in lanes}
        self.skips = [_skipped(u, lanes[0].device) for u in units]
        self.groups: set[Executor] = set()  # executors of jobs wider than one lane, while they run
        self.done: queue.Queue[tuple[str, Any, Any, Any]] = queue.Queue()
        self.executors: dict[int, Executor] = {}
        self.inboxes: dict[int, queue.Queue[Any]] = {}
        self.threads: list[threading.Thread] = []
        self.lock = threading.Lock()

    def emit(self, event: str, data: dict[str, Any]) -> None:
        with self.lock:  # progress callbacks are not assumed thread-safe
            self.state.emit(event, data)

    def run(self, sched: Scheduler) -> dict[int, tuple[int, ...]]:
        """Run every job; returns where each ran (job order -> lanes)."""
        placed: dict[int, tuple[int, ...]] = {}
        busy: set[int] = set()
        handed: dict[int, tuple[Job, tuple[int, ...]]] = {}  # job order -> (job, its lanes), until it reports
        try:
            for index, lost in self._start().items():  # an actor that died between rounds
                self._lose(sched, index, lost, [], placed)
            while sched.queue or busy:
                for job, lanes in sched.assign([x for x in sched.lanes if x not in busy]):
                    busy.update(lanes)
                    placed[job.order] = lanes
                    handed[job.order] = (job, lanes)
                    self.inboxes[lanes[0]].put(("job", job, lanes))
                if not busy:
                    raise RuntimeError("scheduler stalled: queued jobs but none can start")
                kind, job, lanes, payload = self._next()
                if kind == "error":
                    raise payload
                busy.difference_update(lanes)
                if job is not None:
                    handed.pop(job.order, None)
                if kind == "lost":
                    hit = [(job, payload)] if job is not None else []
                    # a job handed to the lane while it was retiring workers (and lost there): never started
                    for order, (other, its_lanes) in list(handed.items()):
                        if lanes[0] in its_lanes:
                            del handed[order]
                            busy.difference_update(its_lanes)
                            hit.append((other, _Lost(payload.error, "", [])))
                    self._lose(sched, lanes[0], payload.error, hit, placed)
                    continue
                self.state.add(job, lanes, payload)
                stale = sched.to_retire(lanes[0])
                if stale:
                    self.inboxes[lanes[0]].put(("retire", stale, None))
            self._stop()
            # retirements asked for after the last job: a lane lost there (or failing) is the run's too
            while not self.done.empty():
                kind, _, lanes, payload = self.done.get_nowait()
                if kind == "error":
                    raise payload
                if kind == "lost":
                    self._lose(sched, lanes[0], payload.error, [], placed)
        except BaseException:
            self._abort()
            raise
        return placed

    def _lose(self, sched: Scheduler, index: int, error: LaneLost, hit: list[tuple[Job, _Lost]],
              placed: dict[int, tuple[int, ...]]) -> None:
        """Lane ``index`` was lost (``hit``: the jobs it held, each with what it finished): out of service for
        the rest of the run, its work moved or kept as the module docstring says, and a note of it all."""
        state = self.state
        why = str(error)
        state.lost[index] = why
        when = "in the first round" if self.first else "in a later round"
        parts = [f"{state.named(index)} was lost {when}: {why}"]
        stranded = sched.drop(index)
        unmeasured = [j for j in stranded if j.order not in state.rounds]
        if not sched.lanes and (unmeasured or (hit and self.first)):
            raise DeviceError(f"every lane was lost ({'; '.join(state.lost.values())}): the run stops here")
        for job, lost in hit:
            placed.pop(job.order, None)
            parts.append(self._moved(sched, index, job, lost, placed))
        kept, never = [], []
        for other in stranded:
            if other.order in state.rounds:
                kept.append(other.case.id)
                self.emit("case_done", {"case": other.case.id, "device": index})
            else:
                never.append(other.case.id)
                why_not = (f"not measured: its lane ({state.named(index)}) was lost" if other.width <= len(sched.lanes)
                           else _too_few(other, sched))
                state.add(other, (index,), state.skipped(other, why_not), measured=False)
        if kept:
            parts.append(f"{', '.join(kept)} keep the rounds measured there (rounds are not merged across devices)")
        if never:
            parts.append(f"{', '.join(never)} could not be measured on the lanes left")
        state.note("; ".join(parts))

    def _moved(self, sched: Scheduler, index: int, job: Job, lost: _Lost,
               placed: dict[int, tuple[int, ...]]) -> str:
        """What becomes of the job a lost lane was measuring; the note's words for it."""
        state = self.state
        case = job.case.id
        moves = state.moves.get(job.order, 0)
        running = f" ({lost.impl} was being measured)" if lost.impl else ""
        if self.first and moves < MOVES_PER_CASE:
            if sched.lanes and job.width > len(sched.lanes):
                state.add(job, (index,), state.skipped(job, _too_few(job, sched)), measured=False)
                return f"{case}{running} could not be measured on the lanes left"
            if lost.impl:  # lost while none of its implementations ran (workers starting): no move counted
                state.moves[job.order] = moves + 1
            sched.requeue(replace(job, last=lost.impl or job.last))
            return f"{case}{running} is measured again from its start on another lane"
        if not self.first:  # pinned to the lost lane: what it finished of this round stands
            placed[job.order] = (index,)
            if lost.done:
                state.add(job, (index,), lost.done)
            else:
                self.emit("case_done", {"case": case, "device": index})
            return f"{case}{running} keeps its earlier rounds and what the lane finished of this one"
        placed[job.order] = (index,)  # a second loss: what this lane finished stands; the case moves no more
        done = {r.name for r in lost.done}
        results = list(lost.done)
        for name in self._impls(job):
            if name in done:
                continue
            if name == lost.impl:
                why = (f"its lane ({state.named(index)}) was lost while it was measured ({lost.error}), the second "
                       "lane this case lost: not measured again")
                results.append(ImplResult(name, "crashed", why))
            else:
                results.append(ImplResult(name, "skipped", f"not measured: the case lost its second lane "
                                          f"({state.named(index)}){running}"))
        state.add(job, (index,), self._in_order(job, results))
        return f"{case}{running} lost its second lane: what was measured there stands, the rest is not measured"

    def _impls(self, job: Job) -> list[str]:
        """The job's implementations to measure, in the unit's order."""
        return [n for n in self.state.asked(job) if (job.order, n) not in self.ended]

    def _in_order(self, job: Job, results: list[ImplResult]) -> list[ImplResult]:
        """Results in the unit's order of implementations (a moved job measured one of them last)."""
        where = {name: k for k, name in enumerate(self.units[job.unit].impls)}
        return sorted(results, key=lambda r: where.get(r.name, len(where)))

    def _next(self) -> tuple[str, Any, Any, Any]:
        while True:
            try:
                return self.done.get(timeout=0.5)  # a timeout keeps Ctrl-C prompt
            except queue.Empty:
                continue

    def _start(self) -> dict[int, LaneLost]:
        """A thread and fresh workers for every lane; returns the lanes lost before they started."""
        lost = {}
        for index, lane in self.lanes.items():
            try:
                self.executors[index] = lane.make_executor()
            except LaneLost as exc:
                lost[index] = exc
                continue
            self.inboxes[index] = queue.Queue()
            thread = threading.Thread(target=self._lane, args=(index,), name=f"solbench-lane-{index}", daemon=True)
            self.threads.append(thread)
            thread.start()
        return lost

    def _lane(self, index: int) -> None:
        """A lane's thread: jobs and retirements in order, until told to stop."""
        executor = self.executors[index]
        try:
            while True:
                msg = self.inboxes[index].get()
                if msg is None:
                    return
                if msg[0] == "retire":  # a failure here is the run's too: the scheduler still counts on this lane
                    try:
                        for u in msg[1]:
                            executor.retire(_keys(self.units[u], self.skips[u]))
                    except LaneLost as exc:
                        self.done.put(("lost", None, (index,), _Lost(exc, "", [])))
                        return
                    except BaseException as exc:
                        self.done.put(("error", None, (index,), exc))
                        return
                    continue
                _, job, lanes = msg
                try:
                    results = self._job(executor, job, lanes)
                    self.done.put(("done", job, lanes, results))
                except _Lost as lost:
                    self.done.put(("lost", job, lanes, lost))
                    return
                except BaseException as exc:
                    self.done.put(("error", job, lanes, exc))
                    return
        finally:
            executor.close()

    def _job(self, executor: Executor, job: Job, lanes: tuple[int, ...]) -> list[ImplResult]:
        """The job's implementations measured one after another (``job.last`` last), in the unit's order;
        _Lost, with what was finished, where the lane is lost."""
        unit, skips, lane = self.units[job.unit], self.skips[job.unit], self.lanes[lanes[0]]
        impls = self._impls(job)
        if not impls:
            return []
        impls = [n for n in impls if n != job.last] + [n for n in impls if n == job.last]
        if job.width > 1:
            assert self.group is not None  # without one, measure_sharded skipped the job before any lane took it
            executor = self.group([self.lanes[x] for x in lanes], unit)
            with self.lock:
                self.groups.add(executor)
        try:
            executor.prestart([key for key in _keys(unit, skips) if (job.order, key[1]) not in self.ended])
            task = Task(unit.spec, job.case, "", str(unit.path.parent.absolute()), lane.device, self.settings,
                        lane.l2_bytes, lane.nvml_id, workload_file=str(unit.path.absolute()))
            emit = _tagged(self.emit, lanes[0])
            done: list[ImplResult] = []
            for name in impls:
                try:
                    done.append(_one(executor, unit, task, name, skips, self.timeout_s, emit, self.variant))
                except LaneLost as exc:
                    raise _Lost(exc, name, self._in_order(job, done)) from None
            return self._in_order(job, done)
        except LaneLost as exc:  # workers for the case could not be started there
            raise _Lost(exc, "", []) from None
        finally:
            if job.width > 1:
                executor.close()
                with self.lock:
                    self.groups.discard(executor)

    def _stop(self) -> None:
        for inbox in self.inboxes.values():
            inbox.put(None)
        for thread in self.threads:
            thread.join()

    def _abort(self) -> None:
        """Ctrl-C or a failure: kill every lane's workers, then stop and join the lanes' threads."""
        with self.lock:
            running = [*self.executors.values(), *self.groups]
        for executor in running:
            abort = getattr(executor, "abort", None)
            if abort is not None:
                abort()
        for inbox in self.inboxes.values():
            inbox.put(None)
        for thread in self.threads:
            thread.join(JOIN_TIMEOUT_S)


def _too_few(job: Job, sched: Scheduler) -> str:
    return f"not measured: needs {job.width} devices at once, and {len(sched.lanes)} lanes are left"


class _Lost(Exception):
    """A lane lost while measuring a job: the LaneLost, the implementation it was measuring ("" while
    starting workers or retiring them) and the job's results it had finished."""

    def __init__(self, error: LaneLost, impl: str, done: list[ImplResult]) -> None:
        super().__init__(str(error))
        self.error, self.impl, self.done = error, impl, done


def _skipped(unit: Unit, device: str) -> dict[str, str]:
    """Implementations that need CUDA on a CPU lane: skipped without a worker. Every other
    requirement (compute capability, CuPy, nvmath) depends on the lane's own device and software,
    so its worker checks it (:func:`solbench.measure.worker.execute` skips with the same reason)."""
    if device == "cuda":
        return {}
    found = {name: next((f"needs CUDA ({need})" for need in unit.spec.implementations[name].requires
                         if need in ("cuda", "compile")), None) for name in unit.impls}
    return {name: reason for name, reason in found.items() if reason is not None}


def _tagged(emit: Progress, device: int) -> Progress:
    def tagged(event: str, data: dict[str, Any]) -> None:
        emit(event, {**data, "device": device})

    return tagged
