"""Timers: the only code that synchronizes with a device or reads a clock around a launch.

    CpuTimer        wall clock (perf_counter_ns) around one call
    CudaColdTimer   CUDA events around one call, L2 flushed and the host queue pre-filled
    CudaCuptiTimer  the cold protocol, but the sample is CUPTI's span from the first to the last GPU
                    activity the call launched (kernels, memcpys, memsets, on any stream)
    CudaGraphTimer  CUDA events around a CUDA-graph replay of many calls of one input set (warm L2,
                    launch amortized)

Cold protocol, per sample (nvbench ``measure_cold`` in spirit)::

    gate kernel (kernels/gate.cu): one thread holds the stream until the host releases it
        (nvbench's blocking kernel); where CuPy is missing, and for ranks of a multi-GPU group
        (whose GPUs must start their windows together), a spin kernel (torch.cuda._sleep) sized
        to cover the host's launch time of the call instead, rounded up to 25 x 2^k µs (so
        processes that measure slightly different launch times still spin alike)
    zero a buffer of 2 x L2            # evicts the inputs from L2 (as nvbench does)
    --flush clean (the default): read the buffer back, so L2 holds clean lines and no write-back
        of the zeroed lines competes with the timed call for DRAM bandwidth (--flush write skips
        it, as nvbench; on an H200 that write-back landed in the timed window differently from
        process to process: o_proj at 64 tokens read 19.5 µs in some processes, 20.6 µs in others)
    start event; call; end event       # the host enqueued all of this while the GPU was held
    release the gate (the spin: nothing to do); wait for the end event; sample = end - start

``--launch graph`` (:class:`GraphLaunch`): the same protocol, but the call in the window is the
replay of a CUDA graph of one call, captured once per input set; its outputs are poisoned before
each replay, ahead of the flush, so a replay that does not write them all fails the timed-call
verification. A call that cannot be captured is launched on the stream, and the result says why.

A call that outlasts the hold on every try (``_MAX_REDO`` retries: it synchronizes with the device,
which under the gate waits for the gate's own timeout, or its host side takes longer than the gate
or the longest spin) cannot have its launch overhead kept out. Such a sample is not kept as a GPU
time with an arbitrary part of the host's time in it: the timer stops holding (``unheld``, the
result's ``hold: none``) and times the call as the GPU sees it, host gaps included, which is what
a synchronizing call costs (nvbench's ``exec_tag::sync``). On an H200 a SOL-ExecBench example that
creates and destroys a cuDNN handle in every call waited 0.5 s on the gate each try; kept after the
retries, its samples read 0.8-1.1 ms of a 2 ms call, and the parent's wall check called them forged.

Without the gate or spin, the start event fires as soon as the host reaches it and the window
includes the host's launch latency (an H200 then reads a 2 µs kernel as ~15 µs). The gate costs
the GPU only the host's own enqueue time: on an H200 the spins of an o_proj run had grown to
0.4-3.2 ms a sample (sized from the slowest launch, doubled whenever the host ran past one), more
than half of the run's sampling time.
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

Launch = Callable[[], object]  # one call of the implementation (as solbench.measure.loop names it)

_MIN_FLUSH_BYTES = 64 << 20
_SPIN_QUANTUM_US = 25.0
_PROBE_CALLS = 10
_MAX_REDO = 3
_MAX_SPIN_US = 6400.0
_GATE_TIMEOUT_US = 500_000.0  # a gate the host has not released by then lets the GPU go (a dry sample)


class CpuTimer:
    """Wall-clock time of one call on the host; a destination-passing call's outputs are poisoned
    first (``fn.poison``, outside the window), as the cold timer does."""

    name = "cpu"

    def __init__(self) -> None:
        self._launches: Sequence[Launch] = ()
        self.last_output: object = None
        self.pending_s: list[float] = []  # GPU timers only: device drain after each window
        self.stray: str | None = None  # CUPTI timer only: why the last call's work was not its own
        self._clock = time.perf_counter_ns  # bound now: later patching of time.* cannot reach it

    def prepare(self, launches: Sequence[Launch]) -> None:
        self._launches = launches

    def sample(self, index: int) -> float:
        fn = self._launches[index % len(self._launches)]
        poison = getattr(fn, "poison", None)  # else a call that skips its work leaves the last call's result
        if poison is not None:
            poison()
        clock = self._clock
        t0 = clock()
        out = fn()
        t1 = clock()
        self.last_output = out
        return (t1 - t0) * 1e-9

    def protocol(self) -> dict[str, Any]:
        return {}

    def output_index(self, index: int) -> int:
        """Which launch produced ``last_output`` after sample ``index``."""
        return index % len(self._launches)

    def release(self) -> None:
        """Let go of the task's calls and last output (and, through the calls, its inputs)."""
        self._launches = ()
        self.last_output = None


class CudaColdTimer:
    """CUDA events around one call, with L2 flushed and launch latency kept out of the window."""

    name = "cold"

    def __init__(self, torch: Any, l2_bytes: int | None, *, flush_factor: int = 2, clean: bool = True,
                 launch: str = "stream") -> None:
        self._torch = torch
        self.launch = launch  # "stream": the call launched; "graph": a CUDA graph's replay (GraphLaunch)
        self.graphed: GraphLaunch | None = None  # launch "graph": this task's graphs, or why it had none
        flush = max(flush_factor * (l2_bytes or 0), _MIN_FLUSH_BYTES)
        self.flush_bytes = flush
        self.clean = clean
        self._flush = torch.empty(flush // 4, dtype=torch.int32, device="cuda")
        self._sink = torch.empty((), dtype=torch.int32, device="cuda")
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)
        self._spun = torch.cuda.Event()  # completes when the gate (or spin) has let the stream go
        self._launches: Sequence[Launch] = ()
        self._cycles_per_us = sleep_rate(torch)
        self.gate = process_gate(torch)  # None: spin instead (no CuPy, or a rank)
        self.spin_us = 0.0
        self.host_us = 0.0  # the slowest launch's host time, measured in prepare
        self.redone = 0  # samples taken again because the GPU was let go before the call was enqueued
        self.unheld = False  # a call outlasted the hold on every try: timed with nothing ahead of it
        # ranks of a multi-rank group: the decision to take a sample again, made by every rank together
        # (each call may be a collective: one rank calling once more than its peers would hang them all)
        self.agree_dry: Callable[[bool], bool] | None = None
        self.last_output: object = None
        self.pending_s: list[float] = []  # per sample: host time a device-wide sync took after the window
        self.stray: str | None = None
        self._flush_us: float | None = None

    @property
    def flush_us(self) -> float:
        """Device time of one flush (zero, and read back with ``clean``), the fastest of three,
        measured on first use (after timing): the harness's GPU-busy estimate (worker.gpu_busy)."""
        if self._flush_us is None:
            self._flush_us = self._flush_time_us()
        return self._flush_us

    def _flush_time_us(self) -> float:
        best = math.inf
        for _ in range(3):
            self._start.record()
            self._flush_l2()
            self._end.record()
            self._end.synchronize()
            best = min(best, self._start.elapsed_time(self._end) * 1e3)
        return best

    def warm(self) -> None:
        """Run the pre-window work once with nothing held, and wait for it: a worker calls this before
        its turn. A kernel's module is loaded on its first launch in a process; loaded while the gate
        holds the stream, it waited for the gate's timeout: on an H200 the first sample of every
        o_proj floor worker (the only workers whose checks launch none of these kernels first) was
        taken again after 0.5 s."""
        self._flush_l2()
        for event in (self._spun, self._start, self._end):
            event.record()
        self._torch.cuda.synchronize()

    def prepare(self, launches: Sequence[Launch]) -> None:
        """Measure the host time of the slowest launch; without a gate, size the spin to twice it plus
        10 µs, rounded up."""
        self._launches = launches
        torch = self._torch
        host_us = 0.0
        for fn in launches:
            fn()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            host_us = max(host_us, (time.perf_counter() - t0) * 1e6)
            torch.cuda.synchronize()
        self.host_us = host_us
        self.spin_us = 0.0 if self.gate is not None else spin_length_us(host_us)
        self.redone = 0
        self.unheld = False
        if self.launch == "graph":
            if self.graphed is None or self.graphed.source is not launches:
                self.capture(launches)
            assert self.graphed is not None
            self._launches = self.graphed.launches

    def capture(self, launches: Sequence[Launch]) -> None:
        """With ``launch`` "graph": capture (and check) a graph of each launch now, before the task's
        turn to time, side by side with the other workers' set-up (:class:`GraphLaunch`); ``prepare``
        of the same launches then replays them. Otherwise nothing."""
        if self.launch == "graph":
            from solbench.device import cupti

            self.graphed = GraphLaunch(self._torch, launches, cupti.optional_tracer())

    def _before(self, fn: Launch | None = None) -> None:
        """Hold the stream (gate, else spin), poison a graph replay's outputs (``fn.poison``), then
        flush L2 (and read the flush buffer back with ``clean``): the pre-window work."""
        torch = self._torch
        if self.unheld:
            pass
        elif self.gate is not None:
            self.gate.hold()
        else:
            torch.cuda._sleep(int(self.spin_us * self._cycles_per_us))
        self._spun.record()
        poison = getattr(fn, "poison", None)
        if poison is not None:
            poison()
        self._flush_l2()

    def _flush_l2(self) -> None:
        """Zero the flush buffer (twice L2: evicts the inputs); with ``clean``, read it back, so that L2
        then holds clean lines and no write-back competes with the timed call."""
        self._flush.zero_()
        if self.clean:
            self._torch.amax(self._flush, dim=0, out=self._sink)

    def _let_go(self) -> bool:
        """After enqueuing a sample: whether the GPU was let go before the call was enqueued (the gate
        timed out, or the spin ended), so it may have waited on the host inside the window; then the
        gate is released. Never dry when nothing held the GPU (``unheld``)."""
        if self.unheld:
            return False
        dry = bool(self._spun.query())
        if self.gate is not None:
            self.gate.release()
        return dry

    def _ran_dry(self, dry: bool) -> bool:
        """True if the sample must be taken again (``dry``, as every rank agrees): the spin doubles (up
        to ``_MAX_SPIN_US``); the caller takes the sample again, held at most ``_MAX_REDO`` times, then
        once with nothing held.

        On an H200, rounds of decode o_proj had stretches of hundreds of samples at 2-8x the
        median (SM clock flat at 1980 MHz): a host slower for a while than the spin sized at the
        start. A longer spin never changes a clean sample, so the spin only grows.
        """
        if self.agree_dry is not None:
            dry = self.agree_dry(dry)
        if not dry:
            return False
        if self.gate is None:
            self.spin_us = min(2.0 * self.spin_us, _MAX_SPIN_US)
        self.redone += 1
        return True

    def _enqueue(self, fn: Launch) -> object:
        """The timed window around one call (the pre-window work is already enqueued)."""
        self._start.record()
        out = fn()
        self._end.record()
        return out

    def _discard(self) -> None:
        """Let a sample that is taken again finish first."""
        self._end.synchronize()

    def _enqueued(self, index: int) -> object:
        """Hold, flush and the window of call ``index``, taken again while the hold ran dry; after
        ``_MAX_REDO`` retries still dry, taken once more with nothing held (``unheld`` from then on:
        see the module docstring)."""
        fn = self._launches[index % len(self._launches)]
        for attempt in range(_MAX_REDO + 2):
            self._before(fn)
            try:
                out = self._enqueue(fn)
            finally:  # released even when the call raises
                dry = self._let_go()
            if not self._ran_dry(dry):
                return out
            self._discard()
            if attempt == _MAX_REDO:
                self.unheld = True
        raise AssertionError("unreachable: an unheld sample is never dry")

    def sample(self, index: int) -> float:
        torch = self._torch
        out = self._enqueued(index)
        self._end.synchronize()
        self.last_output = out
        self.pending_s.append(_device_drain(torch))
        return self._start.elapsed_time(self._end) * 1e-3

    def protocol(self) -> dict[str, Any]:
        hold = "none" if self.unheld else "spin" if self.gate is None else "gate"
        out = {"l2_flush_bytes": self.flush_bytes, "hold": hold,
               "spin_us": round(self.spin_us, 1), "host_launch_us": round(self.host_us, 1),
               "flush": "clean" if self.clean else "write", "samples_redone": self.redone}
        if self.graphed is not None:  # launch "graph"
            out.update(self.graphed.protocol())
        return out

    def output_index(self, index: int) -> int:
        """Which launch produced ``last_output`` after sample ``index``."""
        return index % len(self._launches)

    def release(self) -> None:
        """Let go of the task's calls and last output (and, through the calls, its inputs), and of
        its graphs."""
        self._launches = ()
        self.last_output = None
        self.graphed = None


class ReplayMismatch(Exception):
    """A call's graph replays other GPU work than the call runs when launched (GraphLaunch)."""


class GraphLaunch:
    """Each call of a cold-timed task as the replay of a CUDA graph of that one call (``--launch graph``).

    Why: on an H200 the same stream-launched call read a steady offset per process and per stream,
    sd 0.8-1.0% of process means at decode GEMMs and 3% for 8 tiny launches, in two modes about 6%
    apart; the replays of a graph of the same calls read alike in every process (0.4% and 0.3%;
    BENCHMARKS.md, issue 16, twenty-fifth session). The offset lies on the launch path (how the GPU's
    front end takes a stream's launches), not in the kernels: a graph's replay reaches the GPU as one
    launch whose kernels the GPU starts from its own copy. A replay also costs the front end less per
    kernel (8 tiny kernels: 14.3 µs replayed, 18.3-19.5 launched) and a little more for one kernel
    (+0.2-0.3 µs), so graph-launched times are not stream-launched times: runs record ``launch``.

    Per launch (input set)::

        call once on a side stream (warm-up: libraries' per-stream handles and workspaces)
        call again there, traced by CUPTI              -> the GPU work the call runs launched
        capture the call on that stream (torch's global capture mode: a call that synchronizes, or
            touches the legacy stream, fails the capture)
        replay the graph once, traced                  -> the GPU work its replay runs
        the two must match (cupti.replay_mismatch): the same kernels with the same grids and blocks,
            memcpys and memsets of the same bytes, as many of each (not their durations: other
            workers share the GPU meanwhile)
    and once per task, a kernel of the harness's own (the canary) must be on record too, or nothing
    is replayed: CUPTI that records nothing would make every call match an empty replay.

    A call sees whether it is being captured, so one could put in its graph only a copy of a result
    it computed while launched: correct outputs, timed as a copy. The match above catches it, and
    every check before and after timing launches the call, so it is checked as it runs. Without
    CUPTI (cupti-python missing, ``SOLBENCH_NO_CUPTI=1``) there is no such match, so nothing is
    replayed. A call that cannot be captured, whose replay does not match, or whose graph fails its
    first replay, leaves every call of the task launched on the stream (``launch: stream`` and
    ``graph_fallback``: why).

    Work a call runs outside the capture (another stream, another thread) is not in the graph: the
    replayed outputs are therefore filled with a poison before each replay (NaN for floating point,
    all ones bits otherwise), ahead of the flush and outside the window, so a replay that leaves any
    of them unwritten fails the loop's verification of timed calls. Outputs are the tensors the call
    returns (alone, or in a tuple, list or dict); the worker's checks have already refused outputs
    that alias an input.
    """

    def __init__(self, torch: Any, launches: Sequence[Launch], trace: Any) -> None:
        """``trace``: this process's CUPTI tracer (``cupti.optional_tracer()``); None: nothing is replayed."""
        started = time.perf_counter()
        try:
            self._make(torch, launches, trace)
        finally:
            self.seconds = time.perf_counter() - started  # capture, replays and check: protocol capture_s

    def _make(self, torch: Any, launches: Sequence[Launch], trace: Any) -> None:
        self._torch = torch
        self.fallback = ""
        self.launches: Sequence[Launch] = launches
        self.source = launches  # the launches these graphs were captured from
        if trace is None:
            self.fallback = ("no CUPTI here (cupti-python, SOLBENCH_NO_CUPTI) to check that a replay runs the "
                             "call's work: launched")
            return
        stream = torch.cuda.current_stream()
        turned_on = False
        try:
            turned_on = trace.begin()
            captured = [self._capture(fn, trace) for fn in launches]
            t0 = trace.now()
            torch.ones(1, device="cuda")  # the canary: CUPTI must record this kernel of the harness's own
            replays = self._checked(captured, (t0, trace.now()), trace)
        except Exception as exc:  # any failure to capture, replay or match: launched instead
            first = (str(exc).strip().splitlines() or [""])[0]
            self.fallback = f"{type(exc).__name__}: {first}"[:300]
            self._recover(stream)
            return
        finally:
            with contextlib.suppress(Exception):
                trace.end(turned_on)
        self.launches = replays

    def _recover(self, stream: Any) -> None:
        """Undo what a failed capture leaves behind in torch: the capture stream still current (its
        exit skipped), and the CUDA generators still marked as capturing (every later random draw on
        the device would raise "Offset increment outside graph capture"): each gets a copy of its
        state, which is not capturing."""
        torch = self._torch
        torch.cuda.set_stream(stream)
        with contextlib.suppress(Exception):  # the next capture starts on a stream no failed capture touched
            drop_side_stream(torch)
        for gen in torch.cuda.default_generators:
            gen.graphsafe_set_state(gen.clone_state())
        with contextlib.suppress(Exception):  # the failure may have been an error of the device's own
            torch.cuda.synchronize()

    def _capture(self, fn: Launch, trace: Any) -> tuple[_Replay, tuple[int, int, int, int]]:
        """Warm, launch (traced), capture and replay (traced) one call; the replay and the CUPTI
        timestamps around its launched call and its replay. Nothing waits for the device in between:
        the records are read once for every launch (:meth:`_checked`)."""
        torch = self._torch
        side = side_stream(torch)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()  # warmed on the capture stream (libraries' per-stream handles and workspaces)
            t0 = trace.now()
            fn()
            t1 = trace.now()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(side):  # not torch.cuda.graph(): it waits for the device and empties the
            graph.capture_begin()    # caching allocator (cached blocks back to the driver) before each capture
            try:
                out = fn()
            finally:
                graph.capture_end()
        torch.cuda.current_stream().wait_stream(side)
        replay = _Replay(graph, out, _poisoners(torch, out), torch.inference_mode)
        t2 = trace.now()
        replay()
        t3 = trace.now()
        return replay, (t0, t1, t2, t3)

    def _checked(self, captured: Sequence[tuple[_Replay, tuple[int, int, int, int]]], canary: tuple[int, int],
                 trace: Any) -> list[_Replay]:
        """The replays, once the device is done and CUPTI's records say each ran the work its launched
        call ran (cupti.replay_mismatch); ReplayMismatch otherwise, and when CUPTI recorded none of the
        canary's work (launched between the host times ``canary``): then an empty record of a call
        would not mean that it ran no GPU work, and an empty replay would match it."""
        from solbench.device.cupti import launched_in, replay_mismatch

        self._torch.cuda.synchronize()
        calls, work = trace.collect()
        if not launched_in(calls, work, *canary):
            raise ReplayMismatch("CUPTI recorded none of the harness's own GPU work: no replay can be checked")
        for _, (t0, t1, t2, t3) in captured:
            problem = replay_mismatch(launched_in(calls, work, t0, t1), launched_in(calls, work, t2, t3))
            if problem is not None:
                raise ReplayMismatch(problem)
        return [replay for replay, _ in captured]

    def protocol(self) -> dict[str, Any]:
        spent = {"capture_s": round(self.seconds, 6)}
        if self.fallback:
            return {"launch": "stream", "graph_fallback": self.fallback, **spent}
        return {"launch": "graph", **spent}


class _Replay:
    """One captured call: calling it replays the graph and returns the captured outputs;
    ``poison`` fills them (the timer calls it before the flush), in inference mode: an output made
    in inference mode (``torch.inference_mode`` in the call) may be written there only."""

    def __init__(self, graph: Any, out: object, poisoners: Sequence[Callable[[], object]],
                 mode: Callable[[], contextlib.AbstractContextManager[object]]) -> None:
        self.graph, self.out, self._poisoners, self._mode = graph, out, poisoners, mode

    def __call__(self) -> object:
        self.graph.replay()
        return self.out

    def poison(self) -> None:
        with self._mode():
            for fill in self._poisoners:
                fill()


def _poisoners(torch: Any, out: object) -> list[Callable[[], object]]:
    """A fill for every tensor in ``out`` (a tensor, or a tuple, list or dict of them): NaN for
    floating point (all ones bits for 1-byte floats, NaN in both FP8 formats, strided or not), all
    ones bits else.

    The fills are made now, while the call's outputs are fresh from its capture, and kept for every
    replay, so they go through ``torch.Tensor``'s own methods, never the output's attributes: a
    ``fill_`` or ``view`` set on the instance while captured, and taken off again before any check
    looked at the output, turned every later poison into nothing."""
    if isinstance(out, dict):
        items = list(out.values())
    elif isinstance(out, list | tuple):
        items = list(out)
    else:
        items = [out]
    tensor = torch.Tensor
    fills: list[Callable[[], object]] = []
    for t in items:
        if not isinstance(t, tensor) or tensor.numel(t) == 0:
            continue
        size = tensor.element_size(t)
        if tensor.is_floating_point(t) and size > 1:
            fills.append(functools.partial(tensor.fill_, t, float("nan")))
        elif t.dtype == torch.bool:
            fills.append(functools.partial(tensor.fill_, t, True))
        elif size == 1 or tensor.is_contiguous(t):  # a view as bytes: same-size elements need no contiguity
            fills.append(functools.partial(tensor.fill_, tensor.view(t, torch.uint8), 255))
        elif not tensor.is_floating_point(t):
            fills.append(functools.partial(tensor.fill_, t, -1))
    return fills


class CudaCuptiTimer(CudaColdTimer):
    """The cold protocol (spin, L2 flush), sampled by CUPTI: first start to last end of the GPU work
    the call launched, on any stream (:mod:`solbench.device.cupti`).

    Per sample::

        spin; flush                          # as the cold timer
        opener on the current stream         # begins once the spin and flush are done
        t0; call; t1                         # host timestamps on CUPTI's clock
        marker on the current stream         # begins once that stream has passed the call
        synchronize; records of work launched between t0 and t1 -> span
        work that ended after the marker began, or began before the opener -> ``stray`` (the loop
        reports it as a cheat: work on a stream not ordered with the current one)

    Collection stays on from ``prepare`` (so the spin is sized with CUPTI's per-call host cost).
    """

    name = "cupti"

    def __init__(self, torch: Any, l2_bytes: int | None, trace: Any, *, clean: bool = True) -> None:
        super().__init__(torch, l2_bytes, clean=clean)
        self._trace = trace
        self._mark = torch.zeros(1, dtype=torch.int32, device="cuda")
        self._opener = torch.zeros(1, dtype=torch.int32, device="cuda")
        self.kernels: tuple[str, ...] = ()  # names of the GPU work of the last sample, in start order
        self.activities = 0  # how many GPU activities the last sample's call launched
        self._turned_on = False  # whether prepare turned collection on (finish turns it off)
        # host timestamps of the last sample: before the opener, before and after the call, after the marker
        self._window = (0, 0, 0, 0)

    def prepare(self, launches: Sequence[Launch]) -> None:
        """Turn CUPTI collection on, then size the spin (with collection's host cost included)."""
        self._turned_on = self._trace.begin() or self._turned_on
        super().prepare(launches)
        self._trace.collect()  # the set-up calls' records: not samples

    def finish(self) -> None:
        """Turn CUPTI collection off again (the loop calls this when sampling ends)."""
        self._trace.end(self._turned_on)
        self._turned_on = False

    @contextlib.contextmanager
    def untraced(self) -> Iterator[None]:
        """Collection off for the harness's own work between samples (the loop verifies a timed
        call's output inside it), then on again; left as it is if this timer did not turn it on.

        Every launch while collection is on is a record handed to Python, and a tolerance check of a
        2 G-element output launches over a thousand kernels and host reads. On the H200, KernelBench
        level 1's elementwise problems spent 11-20 s in the timing loop for 10 samples of 3-12 ms
        (about 7 of them verified), while the two same checks after timing, collection off, took
        0.3 s with their inputs and references drawn.
        """
        if not self._turned_on:
            yield
            return
        self._trace.end(True)
        self._turned_on = False
        try:
            yield
        finally:
            self._turned_on = self._trace.begin() or self._turned_on

    def _enqueue(self, fn: Launch) -> object:
        """The opener (launched from ``opened``), the call between host timestamps t0 and t1, then the
        marker (launched by t2): work of the call that begins before the opener, or ends after the
        marker, was not ordered with the current stream (``cupti.judged``)."""
        trace = self._trace
        opened = trace.now()
        self._opener.zero_()
        t0 = trace.now()
        out = fn()
        t1 = trace.now()
        self._mark.zero_()
        self._window = (opened, t0, t1, trace.now())
        return out

    def _discard(self) -> None:
        self._torch.cuda.synchronize()
        self._trace.collect()

    def sample(self, index: int) -> float:
        from solbench.device.cupti import judged, span_ns

        torch, trace = self._torch, self._trace
        out = self._enqueued(index)
        opened, t0, t1, t2 = self._window
        torch.cuda.synchronize()
        self.last_output = out
        calls, work = trace.collect()
        mine, stray = judged(calls, work, t0, t1, t2, opened=(opened, t0 - 1))
        self.activities = len(mine)
        self.kernels = tuple(a.name for a in mine)
        if not mine:
            self.stray = "it launched no GPU work while timed (a result computed earlier or elsewhere)"
            return 0.0
        self.stray = stray
        return span_ns(mine) * 1e-9

    def protocol(self) -> dict[str, Any]:
        names = sorted(set(self.kernels))
        return {**super().protocol(), "gpu_activities": self.activities,
                "kernels": "; ".join(n[:80] for n in names[:6])}


class CudaGraphTimer:
    """Replay of a CUDA graph holding ``calls`` back-to-back calls of ONE input set (the first);
    sample = replay time / calls. Warm L2 and launch cost amortized, as
    ``triton.testing.do_bench_cudagraph``; the result records ``graph_input_sets: 1``.

    Measured on an H200 (o_proj, 16 tokens: a 33.5 MB weight per input set, 60 MB of L2): two
    input sets rotated inside one graph read 16.3 µs (each set evicts the other: neither warm nor
    cold); one graph per set, replayed in turn, 12.5 µs; one graph of one set 11.5 µs, where
    ``do_bench_cudagraph`` reads 11.7 µs. The calls inside a graph are the same kernels on the
    same addresses whatever the input set, so the other sets add nothing but L2 misses here; they
    are still drawn, and checked for correctness before timing.
    """

    name = "graph"

    def __init__(self, torch: Any, *, target_replay_s: float = 2e-3, max_calls: int = 1000) -> None:
        self._torch = torch
        self._target = target_replay_s
        self._max_calls = max_calls
        self._graph: Any = None
        self.calls = 0
        self.last_output: object = None
        self.pending_s: list[float] = []
        self.stray: str | None = None
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    def prepare(self, launches: Sequence[Launch]) -> None:
        """Warm on a side stream, time one call in a probe graph, capture the graph of the first set.

        The probe is a graph of ``_PROBE_CALLS`` calls (timing plain launches would include the
        host's launch latency and size the graph far too small: 9 calls of o_proj at 16 tokens,
        where the replay's own start-up cost then added ~4%, 17% to a 2.4 µs kernel). Calls per
        graph: enough to fill ``target_replay_s``, at most ``max_calls``.
        """
        torch = self._torch
        fn = launches[0]
        side = side_stream(torch)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        per_call = self._probe(fn)
        self.calls = max(1, min(self._max_calls, math.ceil(self._target / max(per_call, 1e-7))))
        self._graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self._graph):
            for _ in range(self.calls):
                out = fn()
        torch.cuda.synchronize()
        self.last_output = out  # after each replay: the last captured call's fresh results

    def _probe(self, fn: Launch) -> float:
        """Seconds per call in a replayed graph of ``_PROBE_CALLS`` calls (the graph is dropped)."""
        torch = self._torch
        probe = torch.cuda.CUDAGraph()
        with torch.cuda.graph(probe):
            for _ in range(_PROBE_CALLS):
                fn()
        probe.replay()
        self._start.record()
        probe.replay()
        self._end.record()
        self._end.synchronize()
        seconds = self._start.elapsed_time(self._end) * 1e-3 / _PROBE_CALLS
        del probe
        return seconds

    def sample(self, index: int) -> float:
        self._start.record()
        self._graph.replay()
        self._end.record()
        self._end.synchronize()
        self.pending_s.append(_device_drain(self._torch))
        return self._start.elapsed_time(self._end) * 1e-3 / self.calls

    def protocol(self) -> dict[str, Any]:
        return {"graph_calls": self.calls, "graph_input_sets": 1}

    def output_index(self, index: int) -> int:
        """Which launch produced ``last_output``: always the first input set's."""
        return 0

    def release(self) -> None:
        """Let go of the captured graph (its memory pool holds the calls' outputs) and last output."""
        self._graph = None
        self.last_output = None


TIMERS = ("cold", "graph", "cupti")


def make_timer(device_kind: str, name: str, *, l2_bytes: int | None = None, flush: str = "clean",
               launch: str = "stream") -> Any:
    """The timer for a device kind: "cpu" always times with the wall clock; on CUDA "cold", "graph"
    or "cupti" (DeviceError, saying how to install it, where cupti-python is missing). ``launch``:
    how the cold timer makes the call in its window ("stream", or "graph": :class:`GraphLaunch`)."""
    if device_kind == "cpu":
        return CpuTimer()
    from solbench.errors import DeviceError

    if name not in TIMERS:
        raise DeviceError(f"unknown timer {name!r} ({', '.join(TIMERS)})")
    if name == "cupti":
        from solbench.device.cupti import tracer

        trace = tracer()  # before torch: a missing package is the error, not a CUDA one
    import torch

    if name == "graph":
        return CudaGraphTimer(torch)
    if name == "cupti":
        return CudaCuptiTimer(torch, l2_bytes, trace, clean=flush == "clean")
    return CudaColdTimer(torch, l2_bytes, clean=flush == "clean", launch=launch)



def resolved_launch(launch: str, timer: str, device_kind: str, traced: bool | None = None) -> str:
    """How calls are made for ``--launch`` ("auto", "stream" or "graph"): "auto" is "graph" for the
    cold timer on CUDA where CUPTI can check each replay against the launched call (``traced``; None:
    cupti-python importable and not turned off, :func:`solbench.device.cupti.wanted`), and "stream"
    for every other timer, on the CPU, and without CUPTI (:class:`GraphLaunch`)."""
    if launch != "auto":
        return launch
    if device_kind != "cuda" or timer != "cold":
        return "stream"
    if traced is None:
        from solbench.device import cupti

        traced = cupti.wanted()
    return "graph" if traced else "stream"


def spin_length_us(host_us: float) -> float:
    """The spin before each cold sample: twice the host's launch time plus 10 µs, at least 20 µs,
    rounded up to 25 x 2^k µs so that small differences in the measured launch time between
    processes do not change the spin (and with it the clock state the call starts in)."""
    need = max(20.0, 2.0 * host_us + 10.0)
    return _SPIN_QUANTUM_US * 2.0 ** max(0, math.ceil(math.log2(need / _SPIN_QUANTUM_US)))


def _device_drain(torch: Any) -> float:
    """Seconds a device-wide synchronization takes right after the timed window ended.

    On an idle GPU this is the cost of the call (microseconds); work the call left running on a
    stream it did not join to the current one makes it longer. Recorded (median, in the result's
    protocol) as a diagnostic, not judged: on an H200 honest cuBLAS calls read a median of 36-42 µs
    in some processes, so host timing cannot tell a cheat from noise (a CUPTI timer can).
    """
    t0 = time.perf_counter()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


class HostGate:
    """The gate kernel (``kernels/gate.cu``) and its flag, a word of pinned host memory that the GPU
    reads through unified addressing: :meth:`hold` enqueues the kernel on the current stream, which
    then waits until :meth:`release` (or ``_GATE_TIMEOUT_US`` at the top SM clock: longer at any
    lower one)."""

    def __init__(self, torch: Any, cycles_per_us: float) -> None:
        import numpy as np

        from solbench.kernels.loader import get_kernel, launch

        self._flag = torch.zeros(1, dtype=torch.int32, pin_memory=True)
        self._host = self._flag.numpy()  # the same word, written from the host
        self._kernel = get_kernel("gate.cu", "hold_until_released")
        self._launch = launch
        self._args = (np.uint64(self._flag.data_ptr()), np.int64(gate_cycles(cycles_per_us=cycles_per_us)))

    @classmethod
    def make(cls, torch: Any, cycles_per_us: float) -> HostGate | None:
        """A gate, or None where the kernel cannot be built here (no CuPy, no NVRTC): the timer spins."""
        try:
            return cls(torch, cycles_per_us)
        except Exception:  # CuPy missing or broken: the spin holds the stream instead, and the result says so
            return None

    def hold(self) -> None:
        self._host[0] = 0  # the last kernel has ended: every sample waits for its end event first
        self._launch(self._kernel, (1,), (1,), self._args)

    def release(self) -> None:
        self._host[0] = 1


def _device_key(torch: Any) -> tuple[int, int]:
    """The key of this process's per-device caches: (id(torch), its current device)."""
    return id(torch), torch.cuda.current_device()


def _per_device(cache: dict[tuple[int, int], tuple[Any, Any]], torch: Any, make: Callable[[], Any]) -> Any:
    """``make()`` for this process and its current device, made once and kept in ``cache``, keyed by
    :func:`_device_key` with the torch kept beside the value: while the entry stands its id cannot
    pass to another object (a fake torch in a test) that would be handed this one's value."""
    key = _device_key(torch)
    if key not in cache:
        cache[key] = (torch, make())
    return cache[key][1]


_GATES: dict[tuple[int, int], tuple[Any, HostGate | None]] = {}


def process_gate(torch: Any) -> HostGate | None:
    """This process's gate on the current device, or None where it cannot be built; made on first
    use (a worker makes it at start, side by side with the other workers' starts) and kept for every
    timer the process makes."""
    gate: HostGate | None = _per_device(_GATES, torch, lambda: HostGate.make(torch, sleep_rate(torch)))
    return gate


_SIDE_STREAMS: dict[tuple[int, int], tuple[Any, Any]] = {}


def side_stream(torch: Any) -> Any:
    """This process's stream for warming and capturing calls on the current device: made on first use
    and kept, as ``torch.cuda.graph`` keeps its default capture stream.

    torch keeps a cuBLAS workspace for each (handle, stream) that ran a GEMM, in the caching allocator,
    and ``empty_cache`` does not free it. With a new stream for each capture, a worker's allocator peak
    grew by 64 MiB a task (two input sets, 32 MiB each) on an H100 and an H200 (o_proj; BENCHMARKS.md,
    issue 16, thirty-eighth session): memory the parent's count of a worker has to cover."""
    return _per_device(_SIDE_STREAMS, torch, torch.cuda.Stream)


def drop_side_stream(torch: Any) -> None:
    """Forget this device's side stream (after a failed capture): the next use makes a new one."""
    _SIDE_STREAMS.pop(_device_key(torch), None)


def gate_cycles(torch: Any = None, *, cycles_per_us: float | None = None) -> int:
    """How many cycles the gate holds a stream before it lets the GPU go unreleased (``_GATE_TIMEOUT_US``
    at ``cycles_per_us``, by default :func:`sleep_rate`): the longest hold of a cold-timed sample,
    which the side-stream check's longest spin matches (:func:`solbench.measure.guards.traced_call`)."""
    rate = sleep_rate(torch) if cycles_per_us is None else cycles_per_us
    return int(_GATE_TIMEOUT_US * rate)


def sleep_rate(torch: Any) -> float:
    """Cycles per microsecond for sizing ``torch.cuda._sleep``: the maximum SM clock in MHz.

    At any lower clock the spin lasts longer, never shorter, than asked: the safe side.
    """
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    khz = getattr(props, "clock_rate", 0) or 2_000_000
    return khz / 1e3
