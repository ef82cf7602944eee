"""Is the state that differs between processes where the operands sit in memory? (H200 probe, issue 16)

A point's rounds differ by more than their samples explain: each round is a fresh process, and a
process reads a call 1-3% faster or slower than the next one, although the kernels (CUPTI names),
the clocks and the host are the same, and the CUPTI timer (kernel durations only) shows the same
round spread as the events (twenty-second session). What a fresh process changes for the kernels
themselves is where its memory lies: the operands, cuBLAS's workspace, the loaded code.

This probe times ``torch.addmm`` (the o_proj baseline's call) in P fresh processes, one after
another. Each process times it at M placements: placement 0 as allocated; each later one after
everything is given back to the driver (the tensors, ``empty_cache``, cuBLAS's workspaces) and
a junk allocation of a random size up to 24 GiB is held, so the new operands and workspace land on
other memory. Every placement is timed with the run's own loop and cold timer (clean flush, 3
warm-up calls, SAMPLES samples, median). The last placement re-times placement 0's tensors, kept
aside, to show drift inside the process.

``--mode frag`` asks what about a placement matters: its odd placements allocate 60 blocks of random
sizes (up to 512 MiB) and give every other one back to the driver before the operands are allocated
(the card's free memory full of holes, as workers that come and go leave it); its even placements
give everything back first. It prints the median time of each kind and of the first allocation.
``--touch`` also times each call behind a read of one element in every 64 KiB of its weight (after
the flush, inside the window): if that read makes the placements alike, what differs between them
is the cost of reaching the weight's pages (address translation), not of reading its bytes.
``--alloc-conf expandable_segments:True`` runs the processes under that PyTorch allocator setting
(memory mapped in 2 MiB pieces, wherever the driver finds them).
``--mode timer`` keeps the first operands and, at each later placement, makes a new timer (a new L2
flush buffer, allocated behind a held block of random size up to 8 GiB): if that spreads the times
as much as a new process does, the flush buffer's place is the per-process state.
``--mode rotate`` tests the remedy directly: the first operands only, timed with the process's one
flush buffer, with four buffers taken in turn sample by sample (each of the three extra ones behind
a held block of its own: other memory), and with four allocated back to back (what a timer would
simply allocate); use 9 placements (one, spaced, one, adjacent, ...). It prints the sd over processes
of each kind's mean: if four buffers in turn shrink the spread between processes (by up to half),
the flush buffer's place is the state and a timer that rotates its flush buffers samples it inside
one process.
``--mode workspace`` keeps the first operands and the timer and, at each later placement, gives
cuBLAS's workspaces back (``torch._C._cuda_clearCublasWorkspaces``, ``empty_cache``) and holds a
block of random size up to ``--pad`` (default 8 GiB), so the next call allocates its workspace on
other memory: the split-K GEMMs of the decode points write and read their partial sums there, and
the workspace is the one allocation every call shares. ``--with-add`` also times an element-wise add
of two 4096 x 4096 bf16 tensors (no cuBLAS, no workspace) in every placement: a control.
``--mode code`` asks whether where a kernel's code is loaded sets it: each placement loads, through
CuPy, a padding module (a ``__device__`` array of random size up to ``--pad``) and then a new copy
of a kernel that reads 32 MiB (its own module: the same code at a new address), and times that
copy (``read 32 MiB``) with the addmm calls beside it (their code does not move: a control).
``--mode graph`` asks whether the state lies in how the calls reach the GPU: the first operands only,
each call timed at every placement as launched (its kernels launched one by one from the host) and
as the replay of a CUDA graph of the same call (captured once per process: one launch, the graph's
kernels started by the GPU from its own copy). The add of ``--with-add`` is timed both ways too (one
kernel: a control), and so are calls of 1 and of 8 tiny in-place adds (``chain 1``, ``chain 8``: 64 Ki
floats, a few µs of launches and little else). If the graph replays read alike in every process
while the launched calls keep their offset, and the chain of 8 shows more of it than the chain of 1,
the state is on the launch path (the host's command buffers and what the GPU's front end does with
them), not in the kernels; the table gives both spreads and their correlation. Each launched call is
also timed on two streams of its own (`` s1``, `` s2``: other work queues of the context where the
driver gives it several): if the streams of one process differ as much as processes do, the state
belongs to the queue, and one process could sample several. And with no flush between samples
(`` warm``): if the offset goes away then, it is a cost of what the flush evicts (the kernels' code
and parameters, address translations), which a process lays out its own way.

It prints, per call, the sd of log medians between placements inside a process (pooled over
processes) and between the process means; if moving the operands inside one process spreads the
times as much as a new process does, placement is the state, and a round would not need a process.

    PYTHONPATH=. python3 bench/placement_probe.py [--processes 8] [--placements 6]
        [--mode junk|frag|timer|rotate|workspace|code|graph]
        [--touch] [--alloc-conf C] [--pad GIB] [--with-add] [--env NAME=VALUE]
    PYTHONPATH=. python3 bench/placement_probe.py --from SAVED.txt --mode MODE   # a saved output again
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import subprocess
import sys
from collections.abc import Callable

import numpy as np

SAMPLES = 100
FLUSHES = 4  # flush buffers in turn (--mode rotate)
CALLS = (("addmm 64 fp16", 64, "float16"), ("addmm 16 bf16", 16, "bfloat16"), ("addmm 1 bf16", 1, "bfloat16"))
HIDDEN = 4096
ADD = "add 4096^2 bf16"
READ = "read 32 MiB"
GRAPH = " graph"  # --mode graph: the call as a CUDA graph's replay
CHAINS = (1, 8)  # --mode graph: calls of n tiny kernels launched one after another
WARM = " warm"  # --mode graph: launched with no flush between samples (L2 and translations left warm)
SIDE_STREAMS = 2  # --mode graph: each launched call also timed on these streams of its own (" s1", " s2")
READ_MODULE = r"""
extern "C" __global__ void read%d(const float4* __restrict__ a, float* total, long long n) {
  float s = 0.f;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    float4 v = a[i];
    s += v.x + v.y + v.z + v.w;
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(total, s);
}
"""
PAD_MODULE = r"""
__device__ char pad%d[%d];
extern "C" __global__ void touch%d(long long n) { if (n > 1) pad%d[n - 1] = 1; }
"""


def child(index: int, placements: int, device: str, mode: str, touch: bool, pad: int, with_add: bool) -> None:
    """One process: every call at every placement; prints one JSON line {call: [median µs, ...]}."""
    import torch

    from solbench.device.timer import make_timer
    from solbench.measure.criteria import CIWidth
    from solbench.measure.loop import measure

    l2 = torch.cuda.get_device_properties(0).L2_cache_size if device == "cuda" else None
    timer = make_timer(device, "cold", l2_bytes=l2, flush="clean")
    if device == "cuda":
        timer.warm()
    rng = np.random.default_rng(1000 + index)
    gen = torch.Generator(device=device).manual_seed(index)
    hidden = HIDDEN if device == "cuda" else 256

    def operands(tokens: int, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        x = torch.randn(tokens, hidden, device=device, dtype=dtype, generator=gen)
        w = torch.randn(hidden, hidden, device=device, dtype=dtype, generator=gen) / 64
        r = torch.randn(tokens, hidden, device=device, dtype=dtype, generator=gen)
        return x, w, r

    def timed(name: str, x: torch.Tensor, w: torch.Tensor, r: torch.Tensor) -> None:
        """The call's median (µs) into out[name]; with ``--touch``, also the call preceded by a read of
        one element in every 64 KiB of the weight (out[name + " +touch"]: that read's own time included)."""
        kinds = {name: lambda: torch.addmm(r, x, w)}
        if touch:
            kinds[name + " +touch"] = lambda: (w.view(-1)[::32768].sum(), torch.addmm(r, x, w))[1]
        for key, launch in kinds.items():
            timing = measure(timer, [launch], CIWidth(0.0, SAMPLES, SAMPLES, 1e9), warmup=3)
            out.setdefault(key, []).append(float(np.median(timing.samples)) * 1e6)

    def release() -> None:
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch._C._cuda_clearCublasWorkspaces()

    out: dict[str, list[float]] = {}
    first = {name: operands(tokens, getattr(torch, dtype)) for name, tokens, dtype in CALLS}
    for name, _, _ in CALLS:
        timed(name, *first[name])
    if with_add:
        a, b = (torch.randn(hidden, hidden, device=device, dtype=torch.bfloat16, generator=gen) for _ in range(2))

        def add() -> None:
            timing = measure(timer, [lambda: a + b], CIWidth(0.0, SAMPLES, SAMPLES, 1e9), warmup=3)
            out.setdefault(ADD, []).append(float(np.median(timing.samples)) * 1e6)
        add()
    held: list[torch.Tensor] = []
    top = 24 << 30 if device == "cuda" else 1 << 24
    if mode == "rotate":  # the first operands; one flush buffer, or FLUSHES in turn (see the docstring)
        spaced = []
        for _ in range(FLUSHES - 1):  # each behind a held block of its own: other memory
            held.append(torch.empty(int(rng.integers(1 << 20, 2 << 30)), dtype=torch.uint8, device=device))
            spaced.append(torch.empty_like(timer._flush) if device == "cuda" else None)
        adjacent = [torch.empty_like(timer._flush) if device == "cuda" else None for _ in range(FLUSHES - 1)]
        one = getattr(timer, "_flush", None)
        flush_l2 = getattr(timer, "_flush_l2", None)
        turn = itertools.count()

        def rotating(buffers: list) -> Callable[[], None]:
            def flush() -> None:
                timer._flush = ([one, *buffers])[next(turn) % FLUSHES]
                flush_l2()
            return flush

        kinds = {1: (f" x{FLUSHES} spaced", rotating(spaced)), 3: (f" x{FLUSHES} adjacent", rotating(adjacent))}
        for j in range(1, placements - 1):
            suffix, flush = kinds.get(j % 4, ("", flush_l2))
            if device == "cuda":
                timer._flush_l2, timer._flush = flush, one
            for name, _, _ in CALLS:
                timed(name + suffix, *first[name])
        if device == "cuda":
            timer._flush_l2, timer._flush = flush_l2, one
        for name, _, _ in CALLS:
            timed(name, *first[name])
        print(json.dumps(out), flush=True)
        return
    if mode == "code":  # a new copy of a reading kernel at each placement (see the docstring)
        import cupy

        data = torch.randn(8 << 20, device=device, dtype=torch.float32, generator=gen)
        total = cupy.zeros(1, dtype=cupy.float32)
        src = cupy.from_dlpack(data)
        modules = []
        for j in range(placements):
            size = int(rng.integers(1 << 20, max(pad, 2 << 20))) if j else 0
            if size:
                modules.append(cupy.RawModule(code=PAD_MODULE % (j, size, j, j)))
                modules[-1].get_function(f"touch{j}")((1,), (1,), (cupy.int64(size),))
            modules.append(cupy.RawModule(code=READ_MODULE % j))
            read = modules[-1].get_function(f"read{j}")
            def launch(read=read) -> None:
                read((132 * 8,), (256,), (src, total, cupy.int64(data.numel() // 4)))
            timing = measure(timer, [launch], CIWidth(0.0, SAMPLES, SAMPLES, 1e9), warmup=3)
            out.setdefault(READ, []).append(float(np.median(timing.samples)) * 1e6)
            if j:
                for name, _, _ in CALLS:
                    timed(name, *first[name])
        print(json.dumps(out), flush=True)
        return
    if mode == "graph":  # each call launched and as a CUDA graph's replay, in turn (see the docstring)
        calls = {name: (lambda x=x, w=w, r=r: torch.addmm(r, x, w)) for name, (x, w, r) in first.items()}
        if with_add:
            calls[ADD] = lambda: a + b
        small = torch.randn(1 << 16, device=device, generator=gen)
        for n in CHAINS:  # n launches of a tiny in-place add: the launch path alone, n times
            calls[f"chain {n}"] = lambda n=n: [small.add_(1e-3) for _ in range(n)]
        graphs = {name: replay(call) for name, call in calls.items()} if device == "cuda" else calls
        streams = [torch.cuda.Stream() if device == "cuda" else None for _ in range(SIDE_STREAMS)]
        flush = getattr(timer, "_flush_l2", None)  # the CPU timer has none: there " warm" is as launched
        for _ in range(1, placements):
            for name, call in calls.items():
                kinds = [(name, call, None), (name + GRAPH, graphs[name], None), (name + WARM, call, None)]
                kinds += [(f"{name} s{k + 1}", call, stream) for k, stream in enumerate(streams)]
                for key, launch, stream in kinds:
                    if key.endswith(WARM) and flush is not None:
                        timer._flush_l2 = lambda: None  # nothing evicted between samples
                    try:
                        with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                            timing = measure(timer, [launch], CIWidth(0.0, SAMPLES, SAMPLES, 1e9), warmup=3)
                    finally:
                        if flush is not None:
                            timer._flush_l2 = flush
                    out.setdefault(key, []).append(float(np.median(timing.samples)) * 1e6)
        print(json.dumps(out), flush=True)
        return
    if mode == "workspace":  # the first operands and timer; cuBLAS's workspace moved (see the docstring)
        for _ in range(1, placements - 1):
            release()
            held = [torch.empty(int(rng.integers(1 << 20, pad)), dtype=torch.uint8, device=device)]
            for name, _, _ in CALLS:
                timed(name, *first[name])
            if with_add:
                add()
        del held
        release()
        for name, _, _ in CALLS:  # placement 0's calls, the workspace now allocated last
            timed(name, *first[name])
        if with_add:
            add()
        print(json.dumps(out), flush=True)
        return
    for j in range(1, placements - 1):
        held = []
        if mode == "timer":  # the same operands; a new timer (flush buffer) behind a held block
            timer = None
            if device == "cuda":
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
            held.append(torch.empty(int(rng.integers(1 << 20, top // 3)), dtype=torch.uint8, device=device))
            timer = make_timer(device, "cold", l2_bytes=l2, flush="clean")
            if device == "cuda":
                timer.warm()
            for name, _, _ in CALLS:
                timed(name, *first[name])
            if with_add:
                add()
            continue
        release()
        if mode == "junk":  # one junk block of a random size, then the operands
            held.append(torch.empty(int(rng.integers(1 << 20, top)), dtype=torch.uint8, device=device))
        elif mode == "frag" and j % 2 == 1:  # odd placements: the driver's free memory left full of holes
            chunks = [torch.empty(int(rng.integers(top // 12288, top // 48)), dtype=torch.uint8, device=device)
                      for _ in range(60)]
            held = chunks[1::2]
            del chunks
            release()
        # frag, even placements: everything given back first (the memory as a fresh process finds it)
        for name, tokens, dtype in CALLS:
            timed(name, *operands(tokens, getattr(torch, dtype)))
    del held
    for name, _, _ in CALLS:  # placement 0 again: drift inside the process
        timed(name, *first[name])
    if with_add and mode == "timer":
        add()
    print(json.dumps(out), flush=True)


def replay(call: Callable[[], object]) -> Callable[[], None]:
    """The replay of a CUDA graph of ``call`` (warmed up on a side stream, then captured once)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    torch.cuda.synchronize()
    return graph.replay


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--placements", type=int, default=6)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--mode", choices=("junk", "frag", "timer", "rotate", "workspace", "code", "graph"),
                        default="junk")
    parser.add_argument("--pad", type=float, default=8.0, 
                        help="--mode workspace, code: the largest held block or padding (GiB)")
    parser.add_argument("--with-add", action="store_true", help="also time an element-wise add (a control)")
    parser.add_argument("--touch", action="store_true")
    parser.add_argument("--alloc-conf", default="", help="PYTORCH_CUDA_ALLOC_CONF for the processes")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the processes (repeatable)")
    parser.add_argument("--from", dest="saved", default="",
                        help="summarize the 'process N:' lines of a saved output (medians as printed: 2 decimals)")
    parser.add_argument("--child", type=int, default=-1)
    args = parser.parse_args()
    if args.child >= 0:
        child(args.child, args.placements, args.device, args.mode, args.touch, int(args.pad * (1 << 30)),
              args.with_add)
        return
    if args.saved:
        summarize(saved_runs(args.saved), args.mode)
        return
    runs = []
    for i in range(args.processes):
        argv = [sys.executable, __file__, "--child", str(i), "--placements", str(args.placements),
                "--device", args.device, "--mode", args.mode, "--pad", str(args.pad)] + ["--touch"] * args.touch \
            + ["--with-add"] * args.with_add
        env = {**os.environ, **dict(kv.split("=", 1) for kv in args.env)}
        if args.alloc_conf:
            env["PYTORCH_CUDA_ALLOC_CONF"] = args.alloc_conf
        done = subprocess.run(argv, capture_output=True, text=True, check=True, env=env)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"process {i}: " + "; ".join(f"{k} " + " ".join(f"{v:.2f}" for v in vs) for k, vs in runs[-1].items()),
              flush=True)
    summarize(runs, args.mode)


def saved_runs(path: str) -> list[dict[str, list[float]]]:
    """The per-process medians of a saved output: its lines "process N: NAME V V ...; NAME V ..."
    (a process printed twice, as a log and its copy, is read once)."""
    runs: dict[str, dict[str, list[float]]] = {}
    for line in open(path).read().splitlines():
        if not line.startswith("process "):
            continue
        index, rest = line[len("process "):].split(": ", 1)
        medians = {}
        for part in rest.split("; "):
            words = part.split()
            k = len(words)
            while k and words[k - 1].replace(".", "", 1).isdigit():
                k -= 1
            medians[" ".join(words[:k])] = [float(v) for v in words[k:]]
        runs.setdefault(index, medians)
    return list(runs.values())


def summarize(runs: list[dict[str, list[float]]], mode: str) -> None:
    """The mode's table, then the spread of the first placement (the same allocations in every process)."""
    first_placement(runs)
    if mode == "rotate":
        kinds = ("", f" x{FLUSHES} spaced", f" x{FLUSHES} adjacent")
        print(f"{'call':22s} {'sd of process means: one buffer':>32s} {f'{FLUSHES} spaced':>10s} "
              f"{f'{FLUSHES} adjacent':>11s}   {'sd re-timing, one':>18s}   medians (µs)")
        for name, _, _ in CALLS:
            logs = [np.log(np.array([run[name + k] for run in runs])) for k in kinds]
            sds = [np.std(v.mean(axis=1), ddof=1) for v in logs]
            again = float(np.sqrt(np.mean(np.var(logs[0], axis=1, ddof=1))))
            print(f"{name:22s} {sds[0]:32.2%} {sds[1]:10.2%} {sds[2]:11.2%}   {again:18.2%}   "
                  + " / ".join(f"{np.exp(np.median(v)):.2f}" for v in logs))
        return
    if mode == "graph":
        # The launched calls also have the first placement's value, taken before the graph loop; every
        # table reads the loop's values only (the last as many as the call's graph replays have).
        def loop(run: dict[str, list[float]], name: str, key: str) -> list[float]:
            return run[key][-len(run[name + GRAPH]):]

        names = [k for k in runs[0] if not k.endswith((GRAPH, WARM)) and " s" not in k]
        for other in (GRAPH, WARM):
            if not all(name + other in runs[0] for name in names):
                continue
            print(f"{'call':22s} {'sd process means: launched':>27s} {other.strip():>13s} {'r':>6s} "
                  f"{'sd in a process: launched':>26s} {other.strip():>6s}   medians (µs)")
            for name in names:
                logs = [np.log(np.array([loop(run, name, k) for run in runs])) for k in (name, name + other)]
                means = [v.mean(axis=1) for v in logs]
                inside = [float(np.sqrt(np.mean(np.var(v, axis=1, ddof=1)))) for v in logs]
                r = float(np.corrcoef(means[0], means[1])[0, 1])
                print(f"{name:22s} {np.std(means[0], ddof=1):27.2%} {np.std(means[1], ddof=1):13.2%} {r:6.2f} "
                      f"{inside[0]:26.2%} {inside[1]:6.2%}   "
                      + " / ".join(f"{np.exp(np.median(v)):.2f}" for v in logs))
        keys = [f" s{k + 1}" for k in range(SIDE_STREAMS)]
        if all(name + keys[0] in runs[0] for name in names):
            print(f"{'call':22s} {'sd of stream means in a process':>32s} {'sd of process means, all streams':>33s}")
            for name in names:  # [process, stream]: each stream's mean log median
                means = np.array([[np.log(loop(run, name, name + k)).mean() for k in ("", *keys)] for run in runs])
                inside = float(np.sqrt(np.mean(np.var(means, axis=1, ddof=1))))
                print(f"{name:22s} {inside:32.2%} {np.std(means.mean(axis=1), ddof=1):33.2%}")
        return
    if mode == "frag":
        print(f"{'call':22s} {'median, holes':>14s} {'median, no holes':>17s} {'first allocation':>17s}")
        for name in runs[0]:
            t = np.array([run[name] for run in runs])
            print(f"{name:22s} {np.median(t[:, 1:-1:2]):14.2f} {np.median(t[:, 2:-1:2]):17.2f} "
                  f"{np.median(t[:, 0]):17.2f}")
        return
    print(f"{'call':22s} {'sd placements (in a process)':>29s} {'sd process means':>17s} "
          f"{'the same, placement alone':>26s} {'sd re-time of 0':>16s}")
    for name in runs[0]:
        logs = np.log(np.array([run[name] for run in runs]))  # [process, placement]
        moved = logs[:, :-1]  # placements 0..M-2 (the last is placement 0 again)
        within = float(np.sqrt(np.mean(np.var(moved, axis=1, ddof=1))))
        between = float(np.std(moved.mean(axis=1), ddof=1))
        again = float(np.sqrt(np.mean((logs[:, -1] - logs[:, 0]) ** 2) / 2))
        alone = within / np.sqrt(moved.shape[1])  # what the means would spread by if placement were all
        print(f"{name:22s} {within:29.2%} {between:17.2%} {alone:26.2%} {again:16.2%}")


def first_placement(runs: list[dict[str, list[float]]]) -> None:
    """Per call: the sd over processes of the first placement's log median (the same allocations, in
    the same order, in every process), of the same tensors re-timed last, and the first's range."""
    print(f"{'call':22s} {'sd first placement over processes':>34s} {'sd re-timed last':>17s}   range first (µs)")
    for name in runs[0]:
        t = np.array([run[name] for run in runs])
        first, last = np.log(t[:, 0]), np.log(t[:, -1])
        print(f"{name:22s} {np.std(first, ddof=1):34.2%} {np.std(last, ddof=1):17.2%}   "
              f"{t[:, 0].min():.2f}-{t[:, 0].max():.2f}")


if __name__ == "__main__":
    main()
