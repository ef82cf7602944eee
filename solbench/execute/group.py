"""Multi-rank workloads (``world_size`` > 1): one process per rank, started and watched like a worker.

A group is ``world_size`` processes forked like :class:`~solbench.measure.pool.ProcessWorker`
(from the fork server, which never touched CUDA), one per (workload, implementation), kept
across that implementation's cases. Rank r sets the implementation's ``env``, selects GPU r,
joins the group (NCCL on CUDA, gloo on the CPU; a file store in a temporary folder, so no port
is needed) and a gloo side group for barriers, then runs tasks (:mod:`solbench.measure.rank`).

Every rank gets the same task; their results are combined::

    all ranks ok                         -> rank 0's result (its timing is already the max over
                                            ranks per sample), the worst correctness of any rank
    a rank reports a fault               -> that fault, "rank r: ..."; if the other ranks do not
                                            report within GRACE_S, or by the deadline (they wait in a
                                            collective the faulty rank never joined), the group is killed
    a rank process dies                  -> crashed, with its exit code or signal and log tail
    no result from every rank in time    -> timeout; the whole group is killed

Each rank's messages are read as their bytes come, none waited for: a rank that stops halfway through
a message holds up no other rank's (a fault, progress), and is named in the timeout at the deadline
(past it, a message under way is read on while its bytes keep coming: :mod:`solbench.measure.wire`).
A fault other than incorrect or skipped replaces the group (the next task starts a fresh one).
On CUDA the workload needs ``world_size`` GPUs (ranks use GPUs 0..n-1), else it is skipped.
``--in-process`` does not apply: ranks are always processes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from multiprocessing.connection import Connection, wait
from typing import Any

from solbench.measure import pool, wire
from solbench.measure.watch import Watch
from solbench.results.model import ImplResult

GRACE_S = 2.0  # after one rank reports a fault, how long the others have to report theirs
KEEP_GROUP = frozenset({"ok", "skipped", "incorrect"})  # after these the group stays usable
Progress = pool.Progress


class _Rank(pool.ProcessWorker):
    """One rank's process and the pipe to it (the worker's fault handling and log tail)."""

    def __init__(self, rank: int, world: int, device: str, store: str, env: Mapping[str, str],
                 tree: str | None) -> None:
        ctx = pool._context()
        self._conn, child = ctx.Pipe()
        self._frames = wire.Frames(self._conn)
        fd, self.log_path = tempfile.mkstemp(prefix=f"solbench-rank{rank}-", suffix=".log")
        os.close(fd)
        self.scratch = tempfile.mkdtemp(prefix=f"solbench-rank{rank}-scratch-")
        self._proc = ctx.Process(target=_rank_main, args=(child, self.log_path, rank, world, device, store,
                                                          dict(env), tree, self.scratch, os.getcwd()),
                                 name=f"solbench-rank{rank}")
        pool.start(self._proc)
        child.close()
        self._ready = False
        self._busy = False
        self.rank = rank


class Group:
    """The rank processes of one implementation."""

    def __init__(self, world: int, device: str, env: Mapping[str, str], tree: str | None = None) -> None:
        self._dir = tempfile.mkdtemp(prefix="solbench-group-")
        store = os.path.join(self._dir, "store")
        self.ranks = [_Rank(r, world, device, store, env, tree) for r in range(world)]

    def wait_ready(self) -> None:
        for r in self.ranks:
            r.wait_ready()

    def run(self, task: Any, timeout_s: float, progress: Progress | None = None) -> tuple[ImplResult, bool]:
        """Send the task to every rank, wait for them; (combined result, fatal). Never raises for a fault.

        As for a worker, ``timeout_s`` starts once every rank is up (start-up has its own limit).
        """
        name = task.impl
        try:
            for r in self.ranks:
                if not r._ready:
                    r._wait_ready()
        except TimeoutError:  # before OSError, of which it is one
            return self._timeout(name, f"the ranks did not start within {pool.STARTUP_TIMEOUT_S:.0f} s"), True
        except (EOFError, OSError):
            return self._first_death(name), True
        try:
            for r in self.ranks:
                r._conn.send(task)
                r._busy = True
        except (EOFError, OSError, BrokenPipeError):
            return self._first_death(name), True
        return self._collect(name, task, time.monotonic() + timeout_s, timeout_s, progress)

    def _collect(self, name: str, task: Any, deadline: float, timeout_s: float,
                 progress: Progress | None) -> tuple[ImplResult, bool]:
        results: dict[int, tuple[ImplResult, bool]] = {}
        last: dict[int, str] = {}  # each rank's last progress event: where a hang happened
        watches = {r.rank: Watch.of(task) for r in self.ranks}  # each rank's streamed samples
        fault_at: float | None = None
        while len(results) < len(self.ranks):
            pending = [r for r in self.ranks if r.rank not in results]
            # each rank's bytes are read as they come, none waited for (one rank's half message holds no
            # other's); past the deadline only a message begun, while its bytes keep coming (wire.Frames)
            waits = {r.rank: r._frames.wait_s(deadline) for r in pending}
            readable = [r for r in pending if waits[r.rank] > 0]
            if not readable and fault_at is not None:  # the deadline cut its grace short: still that fault
                break
            if not readable:
                where = "; ".join(_where(r, last) for r in self.ranks)
                return self._timeout(name, f"no result from every rank within {timeout_s:g} s (set-up included); "
                                     f"the group was killed ({where})"), True
            if fault_at is not None and time.monotonic() - fault_at > GRACE_S:
                break
            for conn in wait([r._conn for r in readable], timeout=min(max(waits.values()), 0.5)):
                rank = next(r for r in readable if r._conn is conn)

                def seen(event: str, data: dict[str, Any], rank: _Rank = rank) -> None:
                    last[rank.rank] = _described(event, data)
                    if progress is not None and rank.rank == 0:
                        progress(event, data)

                try:
                    done = rank.take(watches[rank.rank], seen, None)
                except wire.Incomplete:  # not all of it here yet: what came is kept, the rest read as it comes
                    continue
                if done is not None:
                    results[rank.rank] = done
                    if done[0].status != "ok" and not _peer(done[0]):
                        fault_at = fault_at or time.monotonic()
            for r in pending:
                if r.rank not in results and not r._proc.is_alive() and not r._conn.poll(0):
                    results[r.rank] = (r._died(name), True)
                    fault_at = fault_at or time.monotonic()
        return self._combine(name, results)

    def _combine(self, name: str, results: Mapping[int, tuple[ImplResult, bool]]) -> tuple[ImplResult, bool]:
        faults = sorted(((r, res) for r, (res, _) in results.items() if res.status != "ok" and not _peer(res)),
                        key=lambda item: (item[1].status != "crashed", item[0]))  # a death explains its peers' errors
        if faults:
            rank, res = faults[0]
            tail = res.log_tail or (self.ranks[rank].log_tail() if res.status not in KEEP_GROUP else "")
            where = "" if res.status == "skipped" else f"rank {rank}: "  # a skip is about the machine
            fault = replace(res, message=where + res.message, log_tail=tail)
            complete = len(results) == len(self.ranks)
            fatal = not complete or any(f for _, f in results.values()) or res.status not in KEEP_GROUP
            return fault, fatal
        first = results[0][0]
        worst = [res.correctness for _, (res, _) in sorted(results.items()) if res.correctness is not None]
        if worst and first.correctness is not None:
            first = replace(first, correctness=max(worst, key=lambda c: (c.max_rel_l2, c.max_abs_err)))
        return first, False

    def _first_death(self, name: str) -> ImplResult:
        dead = next((r for r in self.ranks if not r._proc.is_alive()), self.ranks[0])
        res = dead._died(name)
        return replace(res, message=f"rank {dead.rank}: {res.message}")

    def _timeout(self, name: str, message: str) -> ImplResult:
        self.kill()
        tails = "\n".join(f"[rank {r.rank}] {line}" for r in self.ranks for line in r.log_tail().splitlines()[-5:])
        return ImplResult(name, "timeout", message, log_tail=tails[-pool.LOG_TAIL_CHARS:])

    def kill(self) -> None:
        for r in self.ranks:
            r.kill()

    def close(self) -> None:
        """Ask every idle rank to exit (all before waiting for any: they may leave together), then kill
        what is left; remove the logs and the store."""
        for r in self.ranks:
            if not r._busy:
                with contextlib.suppress(OSError, BrokenPipeError):
                    r._conn.send(None)
        for r in self.ranks:
            if not r._busy:
                r._proc.join(5)
        for r in self.ranks:
            r.close()  # kills a busy one (stuck in a collective a faulty peer never joined) at once
        shutil.rmtree(self._dir, ignore_errors=True)


def _where(rank: _Rank, last: Mapping[int, str]) -> str:
    """Where a rank was when its group timed out: its last progress event, and a message it left unfinished."""
    begun = rank._frames.pulled - rank._frames.taken
    unfinished = f", then {begun} bytes of a message it did not finish" if begun else ""
    return f"rank {rank.rank}: {last.get(rank.rank, 'no progress reported')}{unfinished}"


def _described(event: str, data: dict[str, Any]) -> str:
    """A rank's progress event in words: ``phase`` events name the phase, ``sample`` the count."""
    if event == "sample":
        return f"timing, {data.get('n')} samples taken"
    return str(data.get("phase", event))


def _peer(result: ImplResult) -> bool:
    from solbench.measure.rank import PEER_FAILED

    return result.status == "skipped" and result.message == PEER_FAILED


class GroupExecutor:
    """Tasks of multi-rank workloads through rank groups; every other task through ``inner``.

    ``ranks`` maps a workload name to its world_size. Implements the session's Executor protocol.
    """

    def __init__(self, inner: Any, ranks: Mapping[str, int], device: str) -> None:
        self.inner = inner
        self.ranks = dict(ranks)
        self.device = device
        self.tree: str | None = getattr(inner, "tree", None)
        self._groups: dict[tuple[str, str], Group] = {}
        self._envs: dict[tuple[str, str], Mapping[str, str]] = {}

    def _mine(self, key: tuple[str, str]) -> bool:
        return key[0] in self.ranks

    def prestart(self, keys: Iterable[tuple[str, str]]) -> None:
        """The inner executor's workers; groups start at their first task (their env comes with it)."""
        self.inner.prestart([k for k in keys if not self._mine(k)])

    def run(self, key: tuple[str, str], task: Any, timeout_s: float,
            progress: Progress | None = None) -> ImplResult:
        if not self._mine(key):
            return self.inner.run(key, task, timeout_s, progress)  # type: ignore[no-any-return]
        world = self.ranks[key[0]]
        missing = missing_gpus(self.device, world)
        if missing is not None:
            return ImplResult(task.impl, "skipped", missing)
        env = dict(task.spec.implementations[task.impl].env)
        if key in self._groups and self._envs[key] != env:
            self._groups.pop(key).close()
        if key not in self._groups:
            self._groups[key] = Group(world, self.device, env, self.tree)
            self._envs[key] = env
        result, fatal = self._groups[key].run(task, timeout_s, progress)
        if fatal:
            self._groups.pop(key).close()
        return result

    @property
    def reap_s(self) -> float | None:
        """The inner executor's wait for its retired workers to exit (the harness table), if it counts it."""
        return getattr(self.inner, "reap_s", None)

    @property
    def started(self) -> int | None:
        """The worker processes the inner executor started (the harness table), if it counts them."""
        return getattr(self.inner, "started", None)

    @property
    def escaped(self) -> int | None:
        """The processes that left a worker's or a rank's group, killed by the inner executor's sweep
        (``Pool.escaped``: it sweeps after the groups are closed too), if it counts them."""
        return getattr(self.inner, "escaped", None)

    def hold_budget(self, key: tuple[str, str]) -> int | None:
        """The inner executor's, for a one-process workload's task; None (run whole) for a rank group's."""
        budget = getattr(self.inner, "hold_budget", None)
        return None if self._mine(key) or budget is None else budget(key)  # type: ignore[no-any-return]

    def hold(self, key: tuple[str, str], task: Any, timeout_s: float, progress: Progress | None = None) -> Any:
        """A one-process workload's task held by the inner executor (:meth:`hold_budget` says when)."""
        assert not self._mine(key), "a rank group's task is never held"
        return self.inner.hold(key, task, timeout_s, progress)

    def retire(self, keys: Iterable[tuple[str, str]]) -> None:
        keys = list(keys)
        for key in keys:
            group = self._groups.pop(key, None)
            if group is not None:
                group.close()
        self.inner.retire([k for k in keys if not self._mine(k)])

    def close(self) -> None:
        for group in self._groups.values():
            group.close()
        self._groups.clear()
        self.inner.close()


def with_groups(executor: Any, units: Sequence[Any], device: str) -> Any:
    """``executor``, wrapped to run multi-rank workloads in rank groups when ``units`` has any."""
    ranks = {u.spec.name: u.spec.world_size for u in units if getattr(u.spec, "world_size", 1) > 1}
    return GroupExecutor(executor, ranks, device) if ranks else executor


def missing_gpus(device: str, world: int) -> str | None:
    """Why this machine cannot run ``world`` CUDA ranks (one GPU each), or None."""
    if device != "cuda":
        return None
    import torch

    have = torch.cuda.device_count()
    return None if have >= world else f"needs {world} GPUs (one per rank), this machine has {have}"


def _rank_main(conn: Connection, log_path: str, rank: int, world: int, device: str, store_path: str,
               env: dict[str, str], tree: str | None, scratch: str | None = None, origin: str | None = None) -> None:
    """Entry point of a rank process."""
    pool.into_log(log_path, scratch, origin)
    os.environ.update(env)  # before the process group (NCCL reads its variables when it starts)
    import datetime

    import torch
    import torch.distributed as dist

    from solbench.measure.rank import RankContext, execute_rank
    from solbench.measure.worker import WorkerState, enter_tree

    kwargs: dict[str, Any] = {}
    if device == "cuda":
        torch.cuda.set_device(rank)
        kwargs["device_id"] = torch.device("cuda", rank)
    else:  # ranks share the host's cores: no rank's threads should outnumber its share
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    backend = "nccl" if device == "cuda" else "gloo"
    store = dist.FileStore(store_path, world)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(hours=1), **kwargs)
    control = dist.new_group(backend="gloo")
    if tree is not None:
        enter_tree(tree)
    ctx = RankContext(rank, world, backend, device, control)
    from solbench.device import cupti

    cupti.freeze()  # SOLBENCH_NO_CUPTI as the run set it, whatever an implementation sets later
    state = WorkerState()
    state.tamper.watch("pipe", conn)
    pool.serve(conn, lambda task, emit: execute_rank(task, state, ctx, emit), leave_at_once=True)
