"""Worker processes: one long-lived process per implementation, replaced when it fails.

A worker is forked from a fork server that has imported torch but never touched CUDA (or started
with ``spawn`` where there is no fork server): never a fork of a process holding a CUDA context.
It selects its GPU, and then runs tasks (:mod:`solbench.measure.worker`) one at a time; a held
task (:class:`Held`) stops before timing until the parent lets it go. Compiled kernels, imported
modules and library handles persist across the cases of its implementation. Its stdout and
stderr go to a log file, so an implementation's prints never reach the run's own output and the
last lines can be shown when it fails.

Faults, as the parent sees them::

    the worker raises, runs out of memory, cheats    -> the status it reports
    the worker dies (signal, os._exit, sys.exit,      -> crashed, with the exit code or signal and
      a CUDA error that poisons the context)             the last lines of its log
    no result within the timeout                      -> timeout; the worker is killed (what it sent
                                                         by then is read first, nothing it sends after)

After a crash or a timeout the next task of that implementation gets a fresh worker.

On a GPU, a worker's CUDA context gets one hardware work queue where an earlier worker of the run
saw its implementation use one stream (:mod:`solbench.measure.queues`: the driver makes and tears
down such a context in half the time).
"""

from __future__ import annotations

import contextlib
import fcntl
import multiprocessing
import os
import re
import shutil
import signal
import sys
import tempfile
import termios
import threading
import time
import types
from collections.abc import Callable, Iterable
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import Any

from solbench.measure import queues as work_queues
from solbench.measure import reaper, wire
from solbench.measure.watch import Forged, Watch
from solbench.results.model import ImplResult
from solbench.text import first_few

STARTUP_TIMEOUT_S = 600.0  # importing torch and creating a CUDA context, on a loaded machine
LOG_TAIL_LINES = 20
LOG_TAIL_CHARS = 2000

Progress = Callable[[str, dict[str, Any]], None]
GO = "go"  # parent to worker: a held task may start timing (Task.wait_turn), or its checks after timing
TURN = object()  # ProcessWorker.take: the held task reached its turn
TIMED = object()  # ProcessWorker.take: the task let go has timed, and waits to run its checks after timing


# seconds a worker asked to exit gets before it is killed: a kill skips its exit's finalizers (a named
# semaphore unlinked, Inductor's compile workers shut down), so the run counts them (Pool.overstayed)
EXIT_WAIT_S = 5.0


class ProcessWorker:
    """One worker process and the pipe to it."""

    _asked = False  # asked to exit (request_close); a class default for subclasses with their own __init__
    _held = False  # the running task stops at its turn (Task.wait_turn) and has not been let go yet
    _stops_after = False  # and stops again once timed (Task.wait_checks)
    _timing = False  # let go at its turn, it may say it has timed ("timed") once
    overstayed = False  # asked to exit, it was still there after EXIT_WAIT_S and was killed (close)

    def __init__(self, device: str, device_index: int | None, tree: str | None = None, threads: int = 0,
                 queues: int | None = None) -> None:
        ctx = _context()
        self._conn, child = ctx.Pipe()
        self._frames = wire.Frames(self._conn)
        fd, self.log_path = tempfile.mkstemp(prefix="solbench-worker-", suffix=".log")
        os.close(fd)
        self.scratch = tempfile.mkdtemp(prefix="solbench-scratch-")
        self._proc = ctx.Process(target=_main, args=(child, self.log_path, device, device_index, tree,
                                                     self.scratch, os.getcwd(), threads, queues),
                                 name="solbench-worker")
        start(self._proc)
        child.close()
        self._ready = False
        self._busy = False  # a task was sent and its result has not come back (e.g. Ctrl-C meanwhile)

    def run(self, task: Any, timeout_s: float, progress: Progress | None = None) -> tuple[ImplResult, bool]:
        """Send a task and wait for its result; (result, fatal). Never raises for a worker fault."""
        failed = self.send(task, timeout_s)
        if failed is not None:
            return failed
        done = self.wait(progress)
        assert done is not None  # a task that is not held never stops at its turn
        return done

    def send(self, task: Any, timeout_s: float) -> tuple[ImplResult, bool] | None:
        """Send a task (its result is then :meth:`wait`'s); None, or (result, fatal) if it could not
        be sent. The task has ``timeout_s`` to answer, and again after :meth:`go`."""
        name = task.impl
        try:
            if not self._ready:
                self._wait_ready()
            self._conn.send(task)
            self._busy = True
        except TimeoutError:  # before OSError, of which it is one
            self.kill()
            return ImplResult(name, "timeout", f"the worker did not start within {STARTUP_TIMEOUT_S:.0f} s",
                              log_tail=self.log_tail()), True
        except (EOFError, OSError, BrokenPipeError):
            return self._died(name), True
        self._timeout_s = timeout_s
        self._deadline = time.monotonic() + timeout_s
        self._watch = Watch.of(task)
        self._held = bool(getattr(task, "wait_turn", False))
        self._stops_after = self._held and bool(getattr(task, "wait_checks", False))
        self._timing = False
        return None

    def sent(self) -> int:
        """Where in the pipe what the worker has sent so far ends (the bytes read off it and those
        waiting): a message that begins before it was sent before this call."""
        try:
            waiting = fcntl.ioctl(self._conn.fileno(), termios.FIONREAD, bytes(4))
        except (OSError, ValueError):  # closed
            return self._frames.pulled
        return self._frames.pulled + int.from_bytes(waiting, sys.byteorder)

    def go(self) -> tuple[ImplResult, bool] | None:
        """A held task waiting at its turn (:meth:`wait` returned None) may start timing now, or one
        that has timed (Task.wait_checks; :meth:`wait` returned None again) its checks after timing;
        None, or (result, fatal) if the worker is gone. Its timeout starts again."""
        try:
            self._conn.send(GO)
        except (EOFError, OSError, BrokenPipeError):
            return self._died(self._watch.impl), True
        self._timing = self._held and self._stops_after
        self._held = False
        self._deadline = time.monotonic() + self._timeout_s
        return None

    def wait(self, progress: Progress | None = None) -> tuple[ImplResult, bool] | None:
        """Wait for the sent task's (result, fatal); None when a held task has reached its turn
        (set-up and checks done: it waits for :meth:`go`), or has timed (Task.wait_checks: it waits for
        :meth:`go` before its checks after timing). Never raises for a worker fault."""
        name = self._watch.impl
        late: int | None = None  # past the deadline: where what the worker had sent by then ends
        while True:
            remaining = self._deadline - time.monotonic()
            if remaining <= 0 and late is None:  # a message already here counts (held tasks are waited
                late = self.sent()  # for in turn); none sent since: a worker that keeps sending is late
            try:
                ready = self._conn.poll(min(max(remaining, 0.0), 1.0))
            except (EOFError, OSError):
                return self._died(name), True
            if late is not None and self._frames.taken >= late:
                return self._timed_out(name), True
            # past the deadline the message under way is read on, ready or not, as its bytes come (wire.Frames)
            if late is None and not ready:
                if not self._proc.is_alive() and not self._conn.poll(0):
                    return self._died(name), True
                continue
            try:
                done = self.take(self._watch, progress, self._deadline)
            except wire.Incomplete:  # it began a message and did not send the rest by its deadline (and grace)
                return self._timed_out(name), True
            if done is TURN or done is TIMED:
                return None
            if done is not None:
                return done

    def _timed_out(self, name: str) -> ImplResult:
        self.kill()
        return ImplResult(name, "timeout", f"no result within {self._timeout_s:g} s (set-up and compilation "
                          "included); the worker was killed", log_tail=self.log_tail())

    def take(self, watch: Watch, progress: Progress | None,
             deadline: float | None) -> tuple[ImplResult, bool] | object | None:
        """Read one message of the running task: None for progress and samples, ``TURN`` when a held
        task has reached its turn, ``TIMED`` when a task let go has timed and waits for its checks
        after timing, else (result, fatal). ``wire.Incomplete`` (nothing else done) where the message
        is not whole by ``deadline`` and its grace (None: is not here now, :meth:`wire.Frames.read`):
        what came of it is kept for the next call.

        Anything malformed, or a report that contradicts what the parent saw (:mod:`.watch`), is
        ``reward_hack``, and the worker is killed. Nothing the worker sends is unpickled.
        """
        name = watch.impl
        try:
            msg = wire.parse(self._frames.read(deadline))
            kind = msg["kind"]
            if kind == "progress":
                if progress is not None:
                    progress(msg["event"], msg["data"])
                return None
            if kind == "value":
                watch.value(msg["i"], msg["s"], msg["v"])
                return None
            if kind == "turn":
                if not self._held:
                    raise wire.BadMessage("a 'turn' message from a task that was not held, or twice")
                return TURN
            if kind == "timed":
                if not self._timing:
                    raise wire.BadMessage("a 'timed' message from a task that was not let go to time, or twice")
                self._timing = False
                return TIMED
            if kind != "result":
                raise wire.BadMessage(f"a {kind!r} message in the middle of a task")
            self._busy = False
            result, fatal = watch.judge(msg["result"]), msg["fatal"]
        except (EOFError, OSError):
            return self._died(name), True
        except (wire.BadMessage, Forged) as exc:
            self.kill()
            what = "sent" if isinstance(exc, wire.BadMessage) else "reported what the parent did not see:"
            return ImplResult(name, "reward_hack", f"the worker {what} {exc}; it was killed",
                              log_tail=self.log_tail()), True
        if result.status not in ("ok", "skipped", "incorrect"):
            result = _with_log(result, self.log_tail())
        return result, fatal

    def wait_ready(self) -> None:
        """Block until the worker has started (or died, or missed the start-up timeout)."""
        if not self._ready:
            with contextlib.suppress(EOFError, OSError, TimeoutError):
                self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not self._conn.poll(1.0):
            if not self._proc.is_alive():
                raise EOFError
            if time.monotonic() > deadline:
                raise TimeoutError
        try:
            msg = wire.parse(self._frames.read(deadline))
        except wire.BadMessage:
            raise EOFError from None
        except wire.Incomplete:
            raise TimeoutError from None
        if msg["kind"] != "ready":
            raise EOFError
        self._ready = True

    def _died(self, name: str) -> ImplResult:
        self._proc.join(5)
        code = self._proc.exitcode
        if code is None:
            self.kill()
            how = "stopped answering"
        elif code < 0:
            sig = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
            how = f"was killed by {sig}" + (" (out of host memory?)" if -code == signal.SIGKILL else "")
        elif self._ready:
            how = f"exited with code {code} (os._exit or sys.exit in the implementation?)"
        else:
            how = f"exited with code {code}"
        tail = self.log_tail()
        if not self._ready:  # nothing of the implementation ran yet: the harness's or the machine's fault
            last = tail.strip().splitlines()[-1:] or ["its log is empty"]
            how += f" while starting, before it ran any task: {last[0]}"
        return ImplResult(name, "crashed", f"the worker process {how}", log_tail=tail)

    def log_tail(self) -> str:
        """The last lines the worker wrote to stdout or stderr."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 64 * 1024))
                text = f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        lines = text.rstrip().splitlines()[-LOG_TAIL_LINES:]
        return "\n".join(lines)[-LOG_TAIL_CHARS:]

    def abort(self) -> None:
        """Kill the process now, from any thread (sharded runs on Ctrl-C): a ``run`` waiting on it
        in another thread then returns ``crashed``; ``close`` still cleans up."""
        with contextlib.suppress(OSError, ValueError, AttributeError):
            self._proc.kill()

    def kill(self) -> None:
        """Kill the worker and every process in its group (what an implementation forked; what left
        the group is adopted by this process and killed by :func:`sweep`)."""
        if self._proc.is_alive():
            self._proc.kill()
        self._proc.join(5)
        kill_group(self._proc.pid)
        with _MAIN_LOCK:
            _LIVE.discard(self._proc.pid or 0)
            _KILLED.add(self._proc.pid or 0)

    def request_close(self) -> None:
        """Ask an idle worker to exit, without waiting (``close`` waits): several workers then tear
        down their CUDA contexts side by side."""
        if not self._busy and not self._asked:
            with contextlib.suppress(OSError, BrokenPipeError):
                self._conn.send(None)
            self._asked = True

    def close(self) -> None:
        """Ask an idle worker to exit (kill it if it does not within a few seconds; kill a busy one at
        once); remove its log."""
        if not self._busy:
            self.request_close()
            self._proc.join(EXIT_WAIT_S)
            self.overstayed = self._proc.is_alive()
        self.kill()
        self._conn.close()
        with contextlib.suppress(OSError):
            os.unlink(self.log_path)
        shutil.rmtree(self.scratch, ignore_errors=True)


def kill_group(pid: int | None) -> None:
    """SIGKILL the process group a worker leads (it calls ``os.setsid`` first): processes an
    implementation forked and left running die with it (those that left the group: :func:`sweep`)."""
    if pid is not None:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)


def stop_fork_server() -> None:
    """Stop multiprocessing's fork server, if this process started one (the end of a run).

    Every worker holds the write end of the server's "alive" pipe, and so does anything a worker
    forked: a process an implementation left behind would keep the server, and the stdout it
    inherited from solbench, open after solbench exits (``solbench run | tee`` would wait).
    """
    from multiprocessing import forkserver

    server = forkserver._forkserver  # type: ignore[attr-defined]
    pid = getattr(server, "_forkserver_pid", None)
    if pid is None:
        return
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        server._stop()  # type: ignore[attr-defined]


_MAIN_LOCK = threading.Lock()
# pids of the workers and ranks this process started (start) and has not killed yet (ProcessWorker.kill):
# sweep spares them. Not polled: a poll from another thread would take a dying worker's exit code
_LIVE: set[int] = set()
# process groups of the workers killed since the last sweep (ProcessWorker.kill): what an implementation forked
# and left in its worker's group dies of that kill, so sweep does not count it among the processes that escaped
_KILLED: set[int] = set()


def start(proc: Any) -> None:
    """Start a worker process without re-importing the caller's ``__main__`` in it.

    ``spawn`` and ``forkserver`` children normally import the parent's main script again (as
    ``__mp_main__``) so that functions defined there can be unpickled; a plain script that calls
    ``solbench.run`` without an ``if __name__ == "__main__":`` guard would then run itself again in
    every worker. Workers only run solbench's own entry points, so while the process starts,
    ``sys.modules["__main__"]`` is a bare module: :func:`multiprocessing.spawn.get_preparation_data`
    then finds no main script or module to send. A lock keeps threads that start workers at once
    (sharded runs) from restoring it under each other.

    From the first worker on, this process is a subreaper (:mod:`solbench.measure.reaper`): what
    the worker's descendants leave behind outside its group is adopted here, for :func:`sweep`.
    """
    with _without_main():
        reaper.hold()
        proc.start()
        _LIVE.add(proc.pid)


def sweep(*, last: bool = False) -> int:
    """Kill what workers' descendants left behind in sessions of their own (``setsid()``), adopted by
    this process (:func:`solbench.measure.reaper.kill_adopted`), sparing the workers not killed yet
    (``spawn`` makes them its own children); how many it killed that had left their worker's group
    (one still in the group of a worker killed since the last sweep dies of that kill: not counted,
    nor named in the run's note as an escape). ``last``: then stop being a
    subreaper, where no worker of this process is left (a run's end). Under the lock that starts
    workers, so that none is found half-started."""
    with _MAIN_LOCK:
        killed = reaper.kill_adopted(_LIVE, _KILLED)
        _KILLED.clear()
        if last and not _LIVE:
            reaper.release()
    return killed


@contextlib.contextmanager
def _without_main() -> Any:
    """``sys.modules["__main__"]`` a bare module meanwhile (see :func:`start`), under the lock."""
    with _MAIN_LOCK:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            if main is not None:
                sys.modules["__main__"] = main


PROFILE_ENV = "SOLBENCH_PROFILE_DIR"
_PRELOAD = ["solbench.measure.forkserver_preload", "torch", "solbench.measure.worker"]
# What torch.compile imports on first use (about 2 s a process on a 2-core CPU), imported without
# initializing CUDA: preloaded for runs that compile (preload_compiler), so no compiled worker of the
# run imports it for itself.
COMPILER_PRELOAD = "solbench.measure.compiler_preload"


def preload_compiler() -> bool:
    """Have the fork server import torch.compile's machinery before it forks the first worker (a run
    with compiled implementations calls this first), without initializing CUDA there
    (:mod:`solbench.measure.compiler_preload`). False where it will not (:func:`_preload`)."""
    return _preload(COMPILER_PRELOAD)


LIBRARY_PRELOAD = "solbench.measure.library_preload"


def preload_libraries() -> bool:
    """Have the fork server of a GPU run import CuPy and nvmath-python before it forks the first worker
    (:mod:`solbench.measure.library_preload`). False where it will not (:func:`_preload`)."""
    return _preload(LIBRARY_PRELOAD)


def _preload(module: str) -> bool:
    """Add ``module`` to what the fork server imports before its first fork. Returns whether the
    workers will start with it imported: False where it is too late (this process's fork server is
    already running without it: a second run in one process, whose workers then import for
    themselves) or where ``SOLBENCH_PRELOAD=0`` turns preloading off."""
    from multiprocessing import forkserver

    if os.environ.get("SOLBENCH_PRELOAD") == "0":
        return False
    if getattr(forkserver._forkserver, "_forkserver_pid", None) is not None:  # type: ignore[attr-defined]
        return module in _PRELOAD
    if module not in _PRELOAD:
        _PRELOAD.append(module)
    return True


def start_fork_server(*, libraries: bool = False, compiler: bool = False) -> bool:
    """Start the fork server now, importing what it preloads beside this process's own work, rather
    than at the first worker (:mod:`solbench.execute.early`: before a run's process imports torch).
    ``libraries`` and ``compiler`` add :func:`preload_libraries` and :func:`preload_compiler`.
    False where there is no fork server (``spawn``) or one is running already."""
    from multiprocessing import forkserver

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return False
    if getattr(forkserver._forkserver, "_forkserver_pid", None) is not None:  # type: ignore[attr-defined]
        return False
    if libraries:
        preload_libraries()
    if compiler:
        preload_compiler()
    _context()  # the preload list set, the stop at exit registered
    with _without_main():  # no main script sent to it (see start)
        forkserver.ensure_running()
    return True


def _context() -> Any:
    """``forkserver`` with torch preloaded where available (a worker starts in tens of ms, not
    seconds), else ``spawn``. The fork server never touches CUDA, so its forks start clean."""
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" not in methods:
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(_PRELOAD))
    if not _AT_EXIT:
        import atexit

        atexit.register(stop_fork_server)  # no process of a run outlives it (see stop_fork_server)
        _AT_EXIT.append(True)
    return ctx


_AT_EXIT: list[bool] = []


def _with_log(result: ImplResult, tail: str) -> ImplResult:
    from dataclasses import replace

    return replace(result, log_tail=tail) if tail and not result.log_tail else result


def slot_key(key: tuple[str, str], slot: int) -> tuple[str, str]:
    """The worker key of an implementation's ``slot``-th round in one pass: its own process."""
    return key if slot == 0 else (key[0], f"{key[1]}#{slot + 1}")


def base_key(key: tuple[str, str]) -> tuple[str, str]:
    """The (workload, implementation) a worker key (:func:`slot_key`) belongs to."""
    return key[0], re.sub(r"#\d+$", "", key[1])


class Pool:
    """Workers keyed by (workload, implementation); started ahead of need, replaced after faults.

    With ``tree`` (``solbench ab``) every worker resolves implementations in that checkout
    (:func:`solbench.measure.worker.enter_tree`).
    """

    def __init__(self, device: str, device_index: int | None, tree: str | None = None, threads: int = 0,
                 side_by_side_bytes: int | None = None) -> None:
        self.device = device
        # the case tensors that held tasks may keep at once (solbench.execute.session.run_case); None: one at a time
        self.side_by_side_bytes = side_by_side_bytes
        self.device_index = device_index
        self.tree = tree
        self.threads = threads  # torch CPU threads of every worker (solbench.device.threads); 0: torch's
        self._workers: dict[tuple[str, str], ProcessWorker] = {}
        self.queues = work_queues.QueuePolicy() if device == "cuda" else None  # one work queue where it is safe
        self._leaving: list[ProcessWorker] = []  # retired, asked to exit, not yet waited for
        self.reap_s = 0.0  # seconds spent waiting for retired workers to exit (the run's harness table)
        self.started = 0  # worker processes started so far, replacements included (the harness table)
        self.overstayed = 0  # retired workers killed for not exiting within EXIT_WAIT_S (the harness table)
        self.escaped = 0  # processes that left a worker's group, killed by sweep (the harness table)
        self._sweep_due = True  # a worker was closed since the last sweep (the first: compiling ahead's)

    def prestart(self, keys: Iterable[tuple[str, str]]) -> None:
        """Start workers for these keys together and wait until all are ready.

        They start side by side (context creation and library warm-up overlap each other, and the
        teardown of workers retired since the last call), but never while anything is being
        measured: another process's GPU work would share the GPU with the timed calls.
        """
        started = []
        for key in keys:
            if key not in self._workers:
                queues = self.queues.queues(base_key(key)) if self.queues is not None else None
                self._workers[key] = ProcessWorker(self.device, self.device_index, self.tree, self.threads, queues)
                started.append(self._workers[key])
        self.started += len(started)
        self._reap()  # retired workers tear down while these start; gone before anything is measured
        for worker in started:
            worker.wait_ready()

    def run(self, key: tuple[str, str], task: Any, timeout_s: float,
            progress: Progress | None = None) -> ImplResult:
        self.prestart([key])
        return self._settled(key, *self._workers[key].run(task, timeout_s, progress))

    def hold_budget(self, key: tuple[str, str]) -> int | None:
        """The case bytes held tasks may keep at once (:meth:`hold`); None: one task at a time."""
        return self.side_by_side_bytes

    def hold(self, key: tuple[str, str], task: Any, timeout_s: float,
             progress: Progress | None = None) -> Held | ImplResult:
        """Send ``task`` held (``Task.wait_turn``): its worker sets up and checks, then waits at its turn
        (:class:`Held`), and once timed waits again before its checks after timing
        (``Task.wait_checks``). A result at once if it could not be sent."""
        self.prestart([key])
        worker = self._workers[key]
        failed = worker.send(replace(task, wait_turn=True, wait_checks=True), timeout_s)
        if failed is not None:
            return self._settled(key, *failed)
        return Held(self, key, worker, progress)

    def _settled(self, key: tuple[str, str], result: ImplResult, fatal: bool) -> ImplResult:
        if self.queues is not None:
            self.queues.note(base_key(key), result)
        if fatal and self._workers.get(key) is not None:
            self._workers.pop(key).close()
            self._sweep_due = True  # swept at the next task's prestart (or close)
        return result

    def retire(self, keys: Iterable[tuple[str, str]]) -> None:
        """Ask the workers of these keys to exit (their workload or round is done), without waiting:
        their teardowns overlap each other and the start of the next workers, and :meth:`prestart`
        (which every task goes through) waits for them to be gone first."""
        leaving = [w for w in (self._workers.pop(key, None) for key in list(keys)) if w is not None]
        for worker in leaving:
            worker.request_close()
        self._leaving.extend(leaving)

    def _reap(self, last: bool = False) -> None:
        """Wait for the retired workers to exit (kill any that do not within a few seconds); then,
        where any worker was closed since, kill what their implementations left outside their groups
        (:func:`sweep`), so that it slows no later worker down."""
        leaving, self._leaving = self._leaving, []
        start = time.perf_counter()
        for worker in leaving:
            worker.close()
            self.overstayed += worker.overstayed
        if leaving or self._sweep_due or last:
            self.escaped += sweep(last=last)
            self._sweep_due = False
        self.reap_s += time.perf_counter() - start

    def close(self) -> None:
        """Close every worker, and kill what they left behind (before the run's last save)."""
        self.retire(list(self._workers))
        self._reap(last=True)

    def abort(self) -> None:
        """Kill every worker at once, from any thread (the thread using the pool closes it)."""
        for worker in [*self._workers.values(), *self._leaving]:
            worker.abort()


class Held:
    """A task its worker holds at its turn: set up and checked while other workers do the same,
    timed only once the caller lets it go, when no other worker of the case is busy; then held
    again until the caller lets it run its checks after timing, side by side with the others'
    (:func:`solbench.execute.session.run_case`)::

        reach_turn()   set up and checked, waiting at its turn (or over)
        time()         timed alone, waiting before its checks after timing (or over)
        check()        its checks after timing started (call it for every task, then finish each)
        finish()       its result (whatever of the above was not done yet, done first)
    """

    def __init__(self, pool: Pool, key: tuple[str, str], worker: ProcessWorker, progress: Progress | None) -> None:
        self._pool, self._key, self._worker, self._progress = pool, key, worker, progress
        self.result: ImplResult | None = None  # once the task is over
        self._at_turn = False
        self._timed = False  # timed, waiting before its checks after timing
        self._checking = False  # let go on to its checks after timing

    def reach_turn(self) -> bool:
        """Wait until the task is at its turn (True) or over (False: ``result`` says how)."""
        if self._busy():
            self._note(self._worker.wait(self._progress) or TURN)
        return self._at_turn and self.result is None

    def busy(self) -> bool:
        """Whether the task is still setting up or checking, after reading what it already sent (not
        what it sends meanwhile: a worker that keeps sending is still busy; nor the rest of a message
        it began: one that stops halfway is still busy, and its wait times it out)."""
        sent = self._worker.sent()
        while self._busy() and self._worker._frames.taken < sent:
            try:
                self._note(self._worker.take(self._worker._watch, self._progress, None))
            except wire.Incomplete:
                break
        return self._busy()

    def _busy(self) -> bool:
        return self.result is None and not self._at_turn

    def _note(self, done: tuple[ImplResult, bool] | object | None) -> None:
        """What the worker said: its turn, its (result, fatal), or (None) progress."""
        if done is TURN:
            self._at_turn = True
        elif isinstance(done, tuple):
            self.result = self._pool._settled(self._key, *done)

    @property
    def checked_beside(self) -> bool:
        """Whether it was let go on to its checks after timing (side by side with other tasks')."""
        return self._checking

    def time(self) -> bool:
        """Let the task time at its turn and wait until it has timed: True when it then waits before
        its checks after timing (:meth:`check`), False when it is over (``result`` says how)."""
        if self._timed:  # already timed (and maybe let go on to its checks)
            return self.result is None
        if self.reach_turn():
            done = self._worker.go() or self._worker.wait(self._progress)
            if done is None:  # timed (Task.wait_checks)
                self._timed = True
                return True
            self.result = self._pool._settled(self._key, *done)
        return False

    def check(self) -> None:
        """Let a task that has timed (:meth:`time`) start its checks after timing; :meth:`finish`
        waits for them. Nothing where it is over."""
        if self._timed and not self._checking and self.result is None:
            self._checking = True
            failed = self._worker.go()
            if failed is not None:
                self.result = self._pool._settled(self._key, *failed)

    def finish(self) -> ImplResult:
        """The task's result: timed at its turn and checked after timing first, where it was not yet
        (at once if it is over)."""
        if self.time():
            self.check()
        if self.result is None and self._checking:
            done = self._worker.wait(self._progress)
            assert done is not None  # a task let go on to its checks stops nowhere again
            self.result = self._pool._settled(self._key, *done)
        assert self.result is not None
        return self.result


class InProcess:
    """The same tasks run in this process (``--in-process``): no isolation, for debugging."""

    def __init__(self) -> None:
        import torch

        from solbench.measure.worker import WorkerState

        self._state = WorkerState()
        self._threads = torch.get_num_threads()  # tasks set the run's threads; close() gives these back
        self._compromised = ""  # why nothing more can be measured here, once a task left its patches behind

    def prestart(self, keys: Iterable[tuple[str, str]]) -> None:
        pass

    def run(self, key: tuple[str, str], task: Any, timeout_s: float,
            progress: Progress | None = None) -> ImplResult:
        from solbench.measure.worker import WorkerState, execute

        def shown(event: str, data: dict[str, Any]) -> None:
            if progress is not None and event != "value":  # samples stream only to a parent process
                progress(event, data)

        if self._compromised:
            return ImplResult(task.impl, "error", self._compromised)
        result, fatal = execute(task, self._state, shown)
        if fatal:
            # no worker to throw away: what a cheat patched and did not take off again is patched for every later
            # task, whose checks would run under it (a wrong implementation passing a patched comparison)
            patched = self._state.tamper.changed()
            if patched:
                self._compromised = (f"not measured: {task.impl}, measured before it in this process, left it "
                                     f"patched ({first_few(patched, 4)}), and --in-process measures every task in "
                                     "one process: rerun without it")
            self._state = WorkerState()
        return result

    def retire(self, keys: Iterable[tuple[str, str]]) -> None:
        """A workload is done: the next one (or round) gets fresh timers and flush buffers."""
        self._state.timers.clear()

    def close(self) -> None:
        from solbench.device import threads

        threads.apply(self._threads)


def _main(conn: Connection, log_path: str, device: str, device_index: int | None,
          tree: str | None = None, scratch: str | None = None, origin: str | None = None,
          n_threads: int = 0, queues: int | None = None) -> None:
    """Entry point of a worker process. Its CPU threads are set before torch loads where it has not
    (``spawn``) and through torch otherwise (a fork server's torch is loaded already); its CUDA
    context's work queues (:mod:`solbench.measure.queues`) before CUDA starts."""
    into_log(log_path, scratch, origin)
    if device == "cuda":
        work_queues.apply(queues)
    _profiled(lambda: _work(conn, device, device_index, tree, n_threads))


def _count_devices_once(torch: Any) -> None:
    """Have ``torch.cuda.device_count()`` answer from one count, in a worker whose environment
    (``CUDA_VISIBLE_DEVICES``) is final. Before CUDA is initialized torch asks NVML afresh at every
    call, and its own lazy initialization calls it several times: 255 NVML counts, 2.2 s, in a
    51-worker o_proj run on the H200 host (``results/h200/issue16/session10/prof-summary.txt``).
    A torch without the cache is left as it is."""
    if getattr(torch.cuda, "_cached_device_count", 0) is None:
        torch.cuda._cached_device_count = int(torch._C._cuda_getDeviceCount())


def _bars_lock_this_process() -> None:
    """Give tqdm (which ``import torch`` loads, where it is installed) a lock of this process only.

    Otherwise tqdm makes a multiprocessing RLock at its first bar, and torch.fx's Interpreter makes
    a bar (disabled) for every graph it runs under torch.compile. In a worker that the fork server
    started, that lock is a named semaphore registered with the resource tracker, unlinked only by an
    exit that runs multiprocessing's finalizers: on an H200 the run's compiling workers never
    unlinked theirs, and every suite run ended with the tracker's "leaked semaphore objects"
    warning (``bench/sem_trace.py``; BENCHMARKS.md, issue 16, forty-second session). A worker's
    bars, all disabled or in its own log, need no lock shared with other processes."""
    tqdm = sys.modules.get("tqdm")
    if tqdm is not None:
        tqdm.tqdm.set_lock(threading.RLock())


def _work(conn: Connection, device: str, device_index: int | None, tree: str | None, n_threads: int) -> None:
    from solbench.device import threads

    os.environ.update(threads.env_for(n_threads))
    from solbench.measure.preload import refuse_tainted

    refuse_tainted(device)
    import torch

    _bars_lock_this_process()
    threads.apply(n_threads)

    if device == "cuda":
        _count_devices_once(torch)
        torch.cuda.set_device(device_index or 0)
        for dtype in (torch.float32, torch.bfloat16):  # context and cuBLAS handle now, not in a task
            a = torch.ones(64, 64, device="cuda", dtype=dtype)
            (a @ a).sum().item()
        from solbench.measure import guards

        guards.warm_tracer(device)  # CUPTI loaded now, not in the first checked call
        from solbench.device.timer import process_gate

        process_gate(torch)  # and the cold timer's gate (CuPy imported, its kernel loaded)
    from solbench.device import cupti
    from solbench.measure.worker import WorkerState, enter_tree, execute

    cupti.freeze()  # SOLBENCH_NO_CUPTI as the run set it, whatever an implementation sets later
    if tree is not None:
        enter_tree(tree)
    state = WorkerState()
    state.tamper.watch("pipe", conn)  # its send methods shadowed on the instance: tampering
    serve(conn, lambda task, emit: execute(task, state, emit))


def _profiled(main: Callable[[], None]) -> None:
    """``main()``, under cProfile where ``SOLBENCH_PROFILE_DIR`` is set (a harness developer's probe:
    each worker writes ``worker-<pid>.prof`` there when it leaves normally, and
    ``worker-<pid>.imports``: the modules it imported itself, which the fork server had not)."""
    folder = os.environ.get(PROFILE_ENV)
    if not folder:
        main()
        return
    import cProfile

    inherited = set(sys.modules)
    profile = cProfile.Profile()
    profile.enable()
    try:
        main()
    finally:
        profile.disable()
        os.makedirs(folder, exist_ok=True)  # a folder named but not made yet is made, not silently skipped
        profile.dump_stats(os.path.join(folder, f"worker-{os.getpid()}.prof"))
        with open(os.path.join(folder, f"worker-{os.getpid()}.imports"), "w") as f:
            f.write("".join(f"{name}\n" for name in sorted(set(sys.modules) - inherited)))


def into_log(log_path: str, scratch: str | None = None, origin: str | None = None) -> None:
    """A worker's first step: no other process of the user may ptrace it or open its memory
    (:mod:`solbench.measure.nodump`); Ctrl-C is the parent's to handle; stdout and stderr go to its
    log; it leads its own process group (the parent kills the group); it works in its own
    ``scratch`` folder, and file references that are not next to the workload resolve in ``origin``
    (the parent's working folder, absolute), not in the scratch folder."""
    from solbench.measure.nodump import forbid_attach

    forbid_attach()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        os.setsid()
    if scratch is not None:
        from solbench.workload import paths

        paths.FALLBACK_DIR = origin
        os.chdir(scratch)
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)


def serve(conn: Connection, run: Callable[[Any, Progress], tuple[ImplResult, bool]], *,
          leave_at_once: bool = False) -> None:
    """Say ready, then run tasks until told to stop (None) or the parent is gone.

    Progress events, streamed samples (the ``value`` event) and each (result, fatal) go back over
    ``conn`` as JSON messages (:mod:`solbench.measure.wire`); after a fatal result the process
    leaves at once (its state may be compromised). ``leave_at_once``: on None too, skipping the
    interpreter's teardown (a rank's NCCL teardown can wait on peers; the OS frees it all).
    """
    wire.send(conn, "ready", pid=os.getpid())
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            if leave_at_once:
                _leave()
            return

        def emit(event: str, data: dict[str, Any]) -> None:
            if event == "value":
                wire.send(conn, "value", i=data["i"], s=data["s"], v=data["v"])
            elif event == "turn":  # a held task's set-up and checks are done: wait to be let go
                wire.send(conn, "turn")
                _await_go(conn)
            elif event == "timed":  # it has timed: wait to be let go on to its checks after timing
                wire.send(conn, "timed")
                _await_go(conn)
            else:
                wire.send(conn, "progress", event=event, data=data)

        result, fatal = run(task, emit)
        wire.send_result(conn, result, fatal)
        if fatal:
            _leave()


def _await_go(conn: Connection) -> None:
    """Block until the parent lets a held task go on; leave at once if it says anything else (None:
    the run is over) or is gone."""
    try:
        word = conn.recv()
    except (EOFError, OSError):
        word = None
    if word != GO:
        _leave()


def _leave() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
