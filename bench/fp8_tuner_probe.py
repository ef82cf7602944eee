"""How the cuBLASLt tuner ranks o_proj `fp8`'s candidate algorithms, alone and beside other work.

    PYTHONPATH=.:bench python3 bench/fp8_tuner_probe.py [--iterations 40] [--load-s 60]

For each (tokens, dtype) it plans `fp8` as the workload does (``o_proj_fp8_static_setup``, a fresh
choices folder), then times every algorithm the heuristic offers three ways, interleaved:
  old     the tuner before this session: the GEMM alone behind a fixed 200k-cycle spin, no check
          that the spin outlasted the host's enqueue
  new     ``cublaslt.fastest``'s way: quantize + GEMM (the call the harness times) under the
          harness's cold timer (gate, clean flush, dry samples taken again)
  loaded  ``new`` again while another process runs bf16 GEMMs on the same GPU (what tuning in a
          side-by-side set-up met)
and prints each algorithm's median (µs) and the index each way would choose (2% tie rule).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from solbench.device.timer import CudaColdTimer
from solbench.impls import attn, cublaslt

LOAD = """
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.time() + {secs}
while time.time() < end:
    for _ in range(20):
        a @ a
    torch.cuda.synchronize()
"""


def old_medians(mm, offered, iterations: int) -> list[float]:
    stream = torch.cuda.current_stream()
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size // 4, dtype=torch.int32, device="cuda")
    sink = torch.empty((), dtype=torch.int32, device="cuda")
    windows = [[] for _ in offered]
    order = list(range(len(offered)))
    import random
    for _ in range(10):
        for i in order:
            torch.cuda._sleep(200_000)
            mm.execute(algorithm=offered[i], stream=stream)
    for _ in range(iterations):
        random.shuffle(order)
        for i in order:
            torch.cuda._sleep(200_000)
            flush.zero_()
            torch.amax(flush, dim=0, out=sink)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(stream)
            mm.execute(algorithm=offered[i], stream=stream)
            e.record(stream)
            windows[i].append((s, e))
    torch.cuda.synchronize()
    return [statistics.median(s.elapsed_time(e) for s, e in w) * 1e3 for w in windows]


def new_medians(mm, offered, before, iterations: int) -> tuple[list[float], int]:
    timer = CudaColdTimer(torch, torch.cuda.get_device_properties(0).L2_cache_size)
    seconds = cublaslt.medians(mm, offered, timer, iterations, before=before)
    return [m * 1e6 for m in seconds], timer.redone


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--load-s", type=float, default=60.0)
    args = ap.parse_args()
    torch.manual_seed(0)
    load = None
    rows = []
    for phase in ("alone", "loaded"):
        if phase == "loaded":
            load = subprocess.Popen([sys.executable, "-c", LOAD.format(secs=args.load_s)])
            time.sleep(5)
        for tokens in (16, 64):
            for dtype in (torch.bfloat16, torch.float16):
                x = torch.randn(tokens, 4096, device="cuda", dtype=dtype)
                w = torch.randn(4096, 4096, device="cuda", dtype=dtype) * 0.02
                r = torch.randn(tokens, 4096, device="cuda", dtype=dtype)
                os.environ[cublaslt.CHOICES_ENV] = tempfile.mkdtemp()
                plan = attn.o_proj_fp8_static_setup(x, w, r)["plan"]
                mm = plan._mm
                offered = mm.plan(stream=torch.cuda.current_stream())
                before = lambda p=plan, x=x: p.quantize(x, p.x8, p.inv)  # noqa: E731
                new, redone = new_medians(mm, offered, before, args.iterations)
                row = {"phase": phase, "tokens": tokens, "dtype": str(dtype).split(".")[-1], "n": len(offered),
                       "new": new, "redone": redone,
                       "chosen_new": cublaslt.first_within(new)}
                if phase == "alone":
                    old = old_medians(mm, offered, args.iterations)
                    row["old"], row["chosen_old"] = old, cublaslt.first_within(old)
                rows.append(row)
                print(phase, tokens, row["dtype"], "algorithms", len(offered), "redone", redone, flush=True)
                for i in range(len(offered)):
                    print(f"  {i:2d} new {new[i]:7.2f} µs" + (f"  old {row['old'][i]:7.2f} µs" if "old" in row else ""))
    if load is not None:
        load.kill()
    alone = {(r["tokens"], r["dtype"]): r for r in rows if r["phase"] == "alone"}
    print("\nmedians measured alone (new way, µs): the fastest, and what each way's choice runs at")
    print("phase   tokens dtype     algs  fastest  chosen(new) at   chosen(old) at")
    for r in rows:
        ref = alone[(r["tokens"], r["dtype"])]["new"]
        co = r.get("chosen_old")
        old_part = f"{co:>11d} {ref[co]:7.2f}" if co is not None else ""
        print(f"{r['phase']:7s} {r['tokens']:6d} {r['dtype']:9s} {r['n']:4d} {min(ref):8.2f} "
              f"{r['chosen_new']:11d} {ref[r['chosen_new']]:7.2f}  {old_part}")

if __name__ == "__main__":
    main()
