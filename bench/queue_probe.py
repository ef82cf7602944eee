"""Is a work queue's offset where its process ran? Chains of tiny launches timed per stream and CPU.

The twenty-fifth session's graph probe (``bench/placement_probe.py --mode graph``) found the
per-process offset of multi-kernel calls on the launch path: a CUDA graph's replay of the same call
reads alike in every process, and two streams of one process differ as much as two processes do.
A call of 8 tiny launches read either about 18.35 or about 19.45 µs per stream, nothing between.
Two modes like that suggest two places: the host memory the driver gives a work queue's command
buffers, which the GPU reads across PCIe, may lie on either NUMA node.

Each child process here times, on the default stream and on ``--streams`` streams of its own, a
call of 8 tiny in-place adds (``chain 8``) and ``torch.addmm`` at 16 tokens, hidden 4096, bf16
(solbench's cold timer: gate, clean flush, CUDA events; 100 samples), and says which CPU and NUMA
node it ran on when it made its streams. Groups of processes: unpinned; pinned to each NUMA node's
CPUs for their whole life; made on the first node and timed from the last (``moved``); and, with
``CUDA_DEVICE_MAX_CONNECTIONS=1``, unpinned (one work queue: do the streams then read alike?).

    PYTHONPATH=. python3 bench/queue_probe.py [--processes 6] [--streams 3]

Measured on the H200 (results/h200/issue16/session25/call2): the machine has one NUMA node, so the
guess does not apply there; pinned or not, and with one hardware queue, the streams of a process
still differ, and the stream timed first reads lower in every process (BENCHMARKS.md, issue 16,
twenty-fifth session).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys

import numpy as np

SAMPLES = 100
HIDDEN = 4096


def nodes() -> dict[int, list[int]]:
    """NUMA node -> its CPUs that this process may use."""
    allowed = os.sched_getaffinity(0)
    out: dict[int, list[int]] = {}
    for path in sorted(glob.glob("/sys/devices/system/node/node[0-9]*")):
        node = int(path.rsplit("node", 1)[1])
        cpus = []
        for part in open(f"{path}/cpulist").read().strip().split(","):
            if part:
                lo, _, hi = part.partition("-")
                cpus += range(int(lo), int(hi or lo) + 1)
        cpus = [c for c in cpus if c in allowed]
        if cpus:
            out[node] = cpus
    return out or {0: sorted(allowed)}


def where() -> tuple[int, int]:
    """(CPU, NUMA node) this thread runs on now."""
    cpu = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[36])
    node = next((n for n, cpus in nodes().items() if cpu in cpus), -1)
    return cpu, node


def child(streams: int, first: str, then: str) -> None:
    if first:
        os.sched_setaffinity(0, [int(c) for c in first.split(",")])
    import torch

    from solbench.device.timer import make_timer
    from solbench.measure.criteria import CIWidth
    from solbench.measure.loop import measure

    timer = make_timer("cuda", "cold", l2_bytes=torch.cuda.get_device_properties(0).L2_cache_size, flush="clean")
    timer.warm()
    made = where()
    queues = [None] + [torch.cuda.Stream() for _ in range(streams)]
    gen = torch.Generator(device="cuda").manual_seed(os.getpid())
    small = torch.randn(1 << 16, device="cuda", generator=gen)
    x = torch.randn(16, HIDDEN, device="cuda", dtype=torch.bfloat16, generator=gen)
    w = torch.randn(HIDDEN, HIDDEN, device="cuda", dtype=torch.bfloat16, generator=gen) / 64
    r = torch.randn(16, HIDDEN, device="cuda", dtype=torch.bfloat16, generator=gen)
    calls = {"chain 8": lambda: [small.add_(1e-3) for _ in range(8)], "addmm 16 bf16": lambda: torch.addmm(r, x, w)}
    if then:
        os.sched_setaffinity(0, [int(c) for c in then.split(",")])
    timed = where()
    out: dict[str, list[float]] = {}
    for name, call in calls.items():
        for stream in queues:
            with torch.cuda.stream(stream) if stream is not None else torch.cuda.stream(torch.cuda.current_stream()):
                timing = measure(timer, [call], CIWidth(0.0, SAMPLES, SAMPLES, 1e9), warmup=3)
            out.setdefault(name, []).append(float(np.median(timing.samples)) * 1e6)
    print(json.dumps({"made": made, "timed": timed, "out": out}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--streams", type=int, default=3)
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--first", default="")
    parser.add_argument("--then", default="")
    args = parser.parse_args()
    if args.child:
        child(args.streams, args.first, args.then)
        return
    numa = nodes()
    print("NUMA nodes (usable CPUs):", {n: f"{c[0]}-{c[-1]} ({len(c)})" for n, c in numa.items()})
    for path in glob.glob("/sys/bus/pci/devices/*/numa_node"):
        dev = os.path.dirname(path)
        if open(f"{dev}/vendor").read().strip() == "0x10de" and open(f"{dev}/class").read().startswith("0x03"):
            print(f"GPU {os.path.basename(dev)}: numa_node {open(path).read().strip()}, local_cpulist "
                  f"{open(f'{dev}/local_cpulist').read().strip()}")
    first, last = min(numa), max(numa)
    cpus = {n: ",".join(map(str, c)) for n, c in numa.items()}
    groups = [("unpinned", "", "", {})]
    groups += [(f"node {n}", cpus[n], "", {}) for n in numa]
    if first != last:
        groups.append((f"moved {first}->{last}", cpus[first], cpus[last], {}))
    groups.append(("one queue", "", "", {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}))
    rows = []
    for label, a, b, env in groups:
        for i in range(args.processes):
            argv = [sys.executable, __file__, "--child", "--streams", str(args.streams), "--first", a, "--then", b]
            done = subprocess.run(argv, capture_output=True, text=True, check=True, env={**os.environ, **env})
            rec = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append((label, rec))
            print(f"{label:14s} {i}: made on cpu {rec['made'][0]} node {rec['made'][1]}, timed on node "
                  f"{rec['timed'][1]}; " + "; ".join(f"{k} " + " ".join(f"{v:.2f}" for v in vs)
                                                    for k, vs in rec["out"].items()), flush=True)
    print()
    print(f"{'group':14s} {'call':14s} {'median µs':>9s} {'sd streams in proc':>18s} {'sd proc means':>13s} "
          f"{'range (µs)':>14s}")
    for label, *_ in groups:
        recs = [rec for g, rec in rows if g == label]
        for name in recs[0]["out"]:
            logs = np.log(np.array([rec["out"][name] for rec in recs]))
            within = float(np.sqrt(np.mean(np.var(logs, axis=1, ddof=1)))) if logs.shape[1] > 1 else 0.0
            between = float(np.std(logs.mean(axis=1), ddof=1)) if len(recs) > 1 else 0.0
            vals = np.exp(logs)
            print(f"{label:14s} {name:14s} {np.median(vals):9.2f} {within:17.2%} {between:13.2%} "
                  f"{vals.min():6.2f}-{vals.max():6.2f}")


if __name__ == "__main__":
    main()
