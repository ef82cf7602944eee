"""Where a task's graph capture and replay check, and a cold-timed sample's host work, spend their time.

    PYTHONPATH=. python3 bench/capture_costs.py [REPEATS]

One process, one GPU, the o_proj decode call (torch.addmm at 16 tokens, hidden 4096, bf16) over two
input sets, as a worker's task has them. Prints the median host milliseconds of each step over
REPEATS (default 20):

- the whole check as the timer runs it (GraphLaunch: warm, traced call, capture, traced replay,
  canary, one synchronize and one CUPTI read);
- its own steps, timed by wrapping them, and its ten most expensive functions under cProfile;
- its parts: CUPTI turned on and off, a synchronize and forced read of CUPTI's buffers, one capture
  with capture_begin/capture_end, one with torch.cuda.graph (which synchronizes and empties torch's
  caching allocator first), a replay, a fresh graph's first
  replay, a call on a new side stream;
- one cold-timed sample (CudaColdTimer.sample with the graph launch) and its host parts: the hold
  and flush enqueued, the window enqueued, waiting for the end event, the drain read, and one NVML
  clock probe (what the loop reads after every sample).

Nothing here is a timed result of solbench: these are host costs of the harness, on the machine as
found.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import statistics
import sys
import time
from collections.abc import Callable

import torch

from solbench.device import cupti, nvml
from solbench.device.timer import CudaColdTimer, GraphLaunch, _device_drain


def _ms(step: Callable[[], object], repeats: int, *, sync: bool = True) -> float:
    times = []
    for _ in range(repeats):
        if sync:
            torch.cuda.synchronize()
        t = time.perf_counter()
        step()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def _split(launches: list[Callable[[], object]], trace: object, repeats: int) -> list[tuple[str, float]]:
    """GraphLaunch's own steps, timed by wrapping them (mean ms per GraphLaunch), and its ten
    most expensive functions by own time under cProfile."""
    spent: dict[str, float] = {}

    def timed(label: str, fn: Callable[..., object]) -> Callable[..., object]:
        def wrapper(*args: object, **kwargs: object) -> object:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + (time.perf_counter() - t) * 1e3 / repeats
        return wrapper

    wrapped = {"  step: _capture (warm, traced call, capture, first replay), both sets": (GraphLaunch, "_capture"),
               "  step: _checked (synchronize, CUPTI read, match)": (GraphLaunch, "_checked"),
               "  step: CUPTI begin": (type(trace), "begin"),
               "  step: CUPTI end": (type(trace), "end"),
               "  step: CUPTI collect (in _checked and end)": (type(trace), "collect")}
    saved = {label: getattr(owner, name) for label, (owner, name) in wrapped.items()}
    for label, (owner, name) in wrapped.items():
        setattr(owner, name, timed(label, saved[label]))
    try:
        for _ in range(repeats):
            torch.cuda.synchronize()
            GraphLaunch(torch, launches, trace)
    finally:
        for label, (owner, name) in wrapped.items():
            setattr(owner, name, saved[label])
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(repeats):
        GraphLaunch(torch, launches, trace)
    profile.disable()
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(10)
    print(f"cProfile of {repeats} GraphLaunch, by own time:")
    print("\n".join(line for line in out.getvalue().splitlines()[6:] if line.strip()))
    return sorted(spent.items(), key=lambda kv: -kv[1])


def _captured(launch: Callable[[], object], side: torch.cuda.Stream) -> torch.cuda.CUDAGraph:
    """A graph of one call, captured on ``side`` with capture_begin/capture_end (as GraphLaunch does)."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side):
        graph.capture_begin()
        try:
            launch()
        finally:
            graph.capture_end()
    torch.cuda.current_stream().wait_stream(side)
    return graph


def main(repeats: int) -> None:
    torch.cuda.init()
    dev = "cuda"
    sets = []
    for _ in range(2):
        x = torch.randn(16, 4096, device=dev, dtype=torch.bfloat16)
        w = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16) / 64
        r = torch.randn(16, 4096, device=dev, dtype=torch.bfloat16)
        sets.append((r, x, w))
    launches = [lambda s=s: torch.addmm(*s) for s in sets]
    for fn in launches:
        fn()
    trace = cupti.tracer()
    rows: list[tuple[str, float]] = []

    rows.append(("GraphLaunch, 2 input sets (the whole check, as the timer runs it)",
                 _ms(lambda: GraphLaunch(torch, launches, trace), repeats)))
    rows += _split(launches, trace, repeats)

    def on_off() -> None:
        trace.end(trace.begin())

    rows.append(("CUPTI turned on, then off (its end reads the buffers)", _ms(on_off, repeats)))
    turned = trace.begin()

    def read() -> None:
        torch.cuda.synchronize()
        trace.collect()

    rows.append(("synchronize + forced read of CUPTI's buffers, tracing on", _ms(read, repeats)))
    trace.end(turned)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        launches[0]()

    def begin_end() -> None:
        _captured(launches[0], side)

    def context() -> None:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            launches[0]()

    rows.append(("one capture, capture_begin/capture_end", _ms(begin_end, repeats)))
    rows.append(("one capture, torch.cuda.graph (synchronizes, empties the allocator)", _ms(context, repeats)))
    graph = _captured(launches[0], side)
    rows.append(("one replay + synchronize", _ms(lambda: (graph.replay(), torch.cuda.synchronize()), repeats)))

    def first_replay() -> None:
        fresh = _captured(launches[0], side)
        torch.cuda.synchronize()
        t = time.perf_counter()
        fresh.replay()
        torch.cuda.synchronize()
        firsts.append((time.perf_counter() - t) * 1e3)

    firsts: list[float] = []
    for _ in range(repeats):
        first_replay()
    rows.append(("a fresh graph's first replay + synchronize", statistics.median(firsts)))

    def new_stream_warm() -> None:
        fresh = torch.cuda.Stream()
        fresh.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(fresh):
            launches[0]()
        torch.cuda.synchronize()

    rows.append(("a new side stream, one call on it + synchronize", _ms(new_stream_warm, repeats)))

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    timer = CudaColdTimer(torch, l2, launch="graph")
    timer.prepare(launches)
    timer.warm()
    for i in range(10):
        timer.sample(i)
    rows.append(("one cold sample, graph launch (hold, poison, flush, window, wait, drain)",
                 _ms(lambda: timer.sample(0), repeats * 5, sync=False)))
    fn = timer._launches[0]
    parts = {"hold + poison + flush enqueued": 0.0, "window enqueued + let go": 0.0, "wait for the end event": 0.0,
             "drain read": 0.0}
    n = repeats * 5
    for _ in range(n):
        t0 = time.perf_counter()
        timer._before(fn)
        t1 = time.perf_counter()
        timer._enqueue(fn)
        timer._let_go()
        t2 = time.perf_counter()
        timer._end.synchronize()
        t3 = time.perf_counter()
        _device_drain(torch)
        t4 = time.perf_counter()
        for key, dt in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            parts[key] += dt * 1e3 / n
    rows += [(f"  mean: {k}", v) for k, v in parts.items()]
    probe = nvml.clock_probe(0)
    if probe is not None:
        rows.append(("one NVML clock probe (SM, memory, power, reasons)", _ms(probe, repeats * 5, sync=False)))
    timer.release()

    print(f"host ms, median of {repeats} (samples: {repeats * 5}); {torch.cuda.get_device_name()}")
    for label, value in rows:
        print(f"{value:9.3f}  {label}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
