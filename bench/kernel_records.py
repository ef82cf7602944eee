"""Which kernel of a cuBLAS GEMM carries the offset a fresh process gives it? (H200 probe, issue 16)

A fresh process reads ``torch.addmm`` at o_proj's decode shapes 0.6-0.7% faster or slower than the
next one, all its GEMMs together, in two clusters about 1.5% apart (``bench/placement_probe.py``,
twenty-third session). An element-wise add and a 32 MiB reading kernel of our own, timed the same
way in the same processes, show no such offset (0.2%), and moving cuBLAS's workspace, the timer's
flush buffer or the operands inside one process does not reproduce it. So the state is in how
cuBLAS's kernels run in that process.

This probe times each call with the run's own loop and cold timer (clean flush, SAMPLES samples,
median), as the placement probe does, in P fresh processes. Then it traces TRACED calls of each
under CUPTI (kernel activity records) and prints, per process, every kernel's median duration and
every field of its record that is a plain number or string (launch configuration, registers,
shared memory, cluster shape, cache settings; not timestamps or ids). The summary names the fields
that differ between processes and, per kernel, the sd over processes of its median duration: the
kernel whose own time moves with the call's is the one that carries the state, and a field that
splits the processes as the times do is what differs.

    PYTHONPATH=. python3 bench/kernel_records.py [--processes 16]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import defaultdict
from typing import Any

import numpy as np
from placement_probe import CALLS, HIDDEN, SAMPLES  # bench/ is on the path when this runs as a script

TRACED = 20
SKIP = {"start", "end", "completed", "queued", "submitted", "correlation_id", "grid_id", "stream_id",
        "context_id", "device_id", "kind", "graph_id", "graph_node_id", "channel_id", "pad", "pad2",
        "mps_id", "priority"}


def fields(record: Any) -> dict[str, Any]:
    """The record's plain fields (numbers and strings), timestamps and ids left out."""
    out = {}
    for attr in dir(record):
        if attr.startswith("_") or attr in SKIP:
            continue
        try:
            value = getattr(record, attr)
        except Exception:
            continue
        if isinstance(value, bool | int | float | str):
            out[attr] = value
        elif hasattr(value, "value") and isinstance(value.value, int):  # an enum
            out[attr] = int(value.value)
    return out


def child(index: int) -> None:
    """One process: each call's median (µs), then its kernels' records and median durations (µs)."""
    import torch
    from cupti import cupti

    from solbench.device.timer import make_timer
    from solbench.measure.criteria import CIWidth
    from solbench.measure.loop import measure

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    timer = make_timer("cuda", "cold", l2_bytes=l2, flush="clean")
    timer.warm()
    gen = torch.Generator(device="cuda").manual_seed(index)
    operands = {}
    for name, tokens, dtype in CALLS:
        dt = getattr(torch, dtype)
        operands[name] = (torch.randn(tokens, HIDDEN, device="cuda", dtype=dt, generator=gen),
                          torch.randn(HIDDEN, HIDDEN, device="cuda", dtype=dt, generator=gen) / 64,
                          torch.randn(tokens, HIDDEN, device="cuda", dtype=dt, generator=gen))
    out: dict[str, Any] = {"medians": {}, "kernels": {}}
    for name, _, _ in CALLS:
        x, w, r = operands[name]
        timing = measure(timer, [lambda x=x, w=w, r=r: torch.addmm(r, x, w)],
                         CIWidth(0.0, SAMPLES, SAMPLES, 1e9), warmup=3)
        out["medians"][name] = float(np.median(timing.samples)) * 1e6

    records: list[Any] = []
    cupti.activity_register_callbacks(lambda: (8 << 20, 0), records.extend)
    torch.cuda.synchronize()
    cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
    timer._flush_l2()
    torch.cuda.synchronize()
    cupti.activity_flush_all(1)
    cupti.activity_disable(cupti.ActivityKind.CONCURRENT_KERNEL)
    flush_names = {str(getattr(rec, "name", "") or "") for rec in records}  # the timer's own kernels
    records.clear()
    for name, _, _ in CALLS:
        x, w, r = operands[name]
        torch.cuda.synchronize()
        cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
        for _ in range(TRACED):
            timer._flush_l2()  # each traced call cold, as a timed one is
            torch.cuda.synchronize()
            torch.addmm(r, x, w)
            torch.cuda.synchronize()
        cupti.activity_flush_all(1)
        cupti.activity_disable(cupti.ActivityKind.CONCURRENT_KERNEL)
        kernels: dict[str, dict[str, Any]] = {}
        durations: dict[str, list[float]] = defaultdict(list)
        for rec in records:
            kname = str(getattr(rec, "name", "") or "")
            if not kname or kname in flush_names:
                continue
            short = kname[:60]
            durations[short].append((int(rec.end) - int(rec.start)) / 1e3)
            kernels.setdefault(short, fields(rec))
        records.clear()
        out["kernels"][name] = {k: {"us": float(np.median(v)), "n": len(v), "fields": kernels[k]}
                                for k, v in durations.items()}
    print(json.dumps(out), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", type=int, default=16)
    parser.add_argument("--child", type=int, default=-1)
    args = parser.parse_args()
    if args.child >= 0:
        child(args.child)
        return
    runs = []
    for i in range(args.processes):
        done = subprocess.run([sys.executable, __file__, "--child", str(i)], capture_output=True, text=True)
        if done.returncode:
            print(f"process {i}: exit {done.returncode}: {done.stderr.strip()[-2000:]}", flush=True)
            continue
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        line = "; ".join(f"{name} {runs[-1]['medians'][name]:.2f} [" + ", ".join(
            f"{k[:28]} {v['us']:.2f}" for k, v in runs[-1]["kernels"][name].items()) + "]" for name, _, _ in CALLS)
        print(f"process {i}: {line}", flush=True)
    if not runs:
        return
    print(json.dumps(runs[0]["kernels"], indent=1))  # every field, once
    for name, _, _ in CALLS:
        calls = np.log([run["medians"][name] for run in runs])
        print(f"{name}: sd of the call's median over processes {np.std(calls, ddof=1):.2%}")
        for kname in runs[0]["kernels"][name]:
            us = [run["kernels"][name].get(kname, {}).get("us", np.nan) for run in runs]
            own = np.log(us)
            r = np.corrcoef(calls, own)[0, 1] if np.all(np.isfinite(own)) else float("nan")
            print(f"  {kname[:50]:50s} median {np.nanmedian(us):7.2f} µs, "
                  f"sd over processes {np.nanstd(own, ddof=1):.2%}, r with the call {r:+.2f}")
            differ = {}
            for field in runs[0]["kernels"][name][kname]["fields"]:
                values = [run["kernels"][name].get(kname, {}).get("fields", {}).get(field) for run in runs]
                if len({json.dumps(v) for v in values}) > 1:
                    differ[field] = values
            for field, values in differ.items():
                print(f"    differs: {field}: {values}")
            if not differ:
                print("    every record field the same in every process")


if __name__ == "__main__":
    main()
