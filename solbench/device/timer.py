"""Timers: the only code that synchronizes with a device or reads a clock around a launch.

    CpuTimer        wall clock (perf_counter_ns) around one call
    CudaColdTimer   CUDA events around one call, L2 flushed and the host queue pre-filled
    CudaGraphTimer  CUDA events around a CUDA-graph replay of many calls (warm L2, no launch gaps)

Cold protocol, per sample (nvbench ``measure_cold`` in spirit)::

    spin kernel (torch.cuda._sleep) sized to cover the host's launch time of the call
    zero a buffer of 2 x L2            # evicts the inputs from L2 (as nvbench does)
    [--flush clean: read the buffer back, so L2 holds clean lines and no write-back of the
     zeroed lines competes with the timed call for DRAM bandwidth]
    start event; call; end event       # the host enqueued all of this while the GPU span
    wait for the end event; sample = end - start

Without the spin, the start event fires as soon as the host reaches it and the window includes
the host's launch latency (an H200 then reads a 2 µs kernel as ~15 µs).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from solbench.measure.loop import Launch

_MIN_FLUSH_BYTES = 64 << 20


class CpuTimer:
    """Wall-clock time of one call on the host."""

    name = "cpu"

    def __init__(self) -> None:
        self._launches: Sequence[Launch] = ()
        self.last_output: object = None
        self.pending_s: list[float] = []  # GPU timers only: device drain after each window
        self._clock = time.perf_counter_ns  # bound now: later patching of time.* cannot reach it

    def prepare(self, launches: Sequence[Launch]) -> None:
        self._launches = launches

    def sample(self, index: int) -> float:
        fn = self._launches[index % len(self._launches)]
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


class CudaColdTimer:
    """CUDA events around one call, with L2 flushed and launch latency kept out of the window."""

    name = "cold"

    def __init__(self, torch: Any, l2_bytes: int | None, *, flush_factor: int = 2, clean: bool = False) -> None:
        self._torch = torch
        flush = max(flush_factor * (l2_bytes or 0), _MIN_FLUSH_BYTES)
        self.flush_bytes = flush
        self.clean = clean
        self._flush = torch.empty(flush // 4, dtype=torch.int32, device="cuda")
        self._sink = torch.empty((), dtype=torch.int32, device="cuda")
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)
        self._launches: Sequence[Launch] = ()
        self._cycles_per_us = _sleep_rate(torch)
        self.spin_us = 0.0
        self.last_output: object = None
        self.pending_s: list[float] = []  # per sample: host time a device-wide sync took after the window

    def prepare(self, launches: Sequence[Launch]) -> None:
        """Size the spin to twice the host time of the slowest launch, at least 20 µs."""
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
        self.spin_us = max(20.0, 2.0 * host_us + 10.0)

    def sample(self, index: int) -> float:
        torch = self._torch
        fn = self._launches[index % len(self._launches)]
        torch.cuda._sleep(int(self.spin_us * self._cycles_per_us))
        self._flush.zero_()
        if self.clean:  # read it back: L2 then holds clean lines, no write-back inside the window
            torch.amax(self._flush, dim=0, out=self._sink)
        self._start.record()
        out = fn()
        self._end.record()
        self._end.synchronize()
        self.last_output = out
        self.pending_s.append(_device_drain(torch))
        return self._start.elapsed_time(self._end) * 1e-3

    def protocol(self) -> dict[str, Any]:
        return {"l2_flush_bytes": self.flush_bytes, "spin_us": round(self.spin_us, 1),
                "flush": "clean" if self.clean else "write"}

    def output_index(self, index: int) -> int:
        """Which launch produced ``last_output`` after sample ``index``."""
        return index % len(self._launches)


class CudaGraphTimer:
    """Replay of a CUDA graph holding ``calls`` back-to-back calls; sample = replay time / calls."""

    name = "graph"

    def __init__(self, torch: Any, *, target_replay_s: float = 1e-3, max_calls: int = 200) -> None:
        self._torch = torch
        self._target = target_replay_s
        self._max_calls = max_calls
        self._graph: Any = None
        self.calls = 0
        self.last_output: object = None
        self.last_index = 0
        self.pending_s: list[float] = []
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    def prepare(self, launches: Sequence[Launch]) -> None:
        """Warm on a side stream, estimate one call's time, capture enough calls to fill ~1 ms."""
        torch = self._torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for fn in launches:
                fn()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        self._start.record()
        for fn in launches:
            fn()
        self._end.record()
        self._end.synchronize()
        per_call = self._start.elapsed_time(self._end) * 1e-3 / len(launches)
        calls = math.ceil(self._target / max(per_call, 1e-7))
        self.calls = max(len(launches), min(self._max_calls, calls))
        self._graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self._graph):
            for i in range(self.calls):
                out = launches[i % len(launches)]()
        torch.cuda.synchronize()
        # After each replay the last captured call's outputs hold its fresh results.
        self.last_output = out
        self.last_index = (self.calls - 1) % len(launches)

    def sample(self, index: int) -> float:
        self._start.record()
        self._graph.replay()
        self._end.record()
        self._end.synchronize()
        self.pending_s.append(_device_drain(self._torch))
        return self._start.elapsed_time(self._end) * 1e-3 / self.calls

    def protocol(self) -> dict[str, Any]:
        return {"graph_calls": self.calls}

    def output_index(self, index: int) -> int:
        """Which launch produced ``last_output`` (the graph's last captured call)."""
        return self.last_index


def make_timer(device_kind: str, name: str, *, l2_bytes: int | None = None, flush: str = "write") -> Any:
    """The timer for a device kind: "cpu" always times with the wall clock; on CUDA "cold" or "graph"."""
    if device_kind == "cpu":
        return CpuTimer()
    import torch

    if name == "graph":
        return CudaGraphTimer(torch)
    if name == "cold":
        return CudaColdTimer(torch, l2_bytes, clean=flush == "clean")
    from solbench.errors import DeviceError

    raise DeviceError(f"unknown timer {name!r} (cold, graph)")


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


def _sleep_rate(torch: Any) -> float:
    """Cycles per microsecond for sizing ``torch.cuda._sleep``: the maximum SM clock in MHz.

    At any lower clock the spin lasts longer, never shorter, than asked: the safe side.
    """
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    khz = getattr(props, "clock_rate", 0) or 2_000_000
    return khz / 1e3
