"""What the first timed samples of a point read after the GPU did something else (H200 probe).

In the sixteenth session's o_proj runs the floor at 16384 tokens, which a run times right after
``fp8_dynamic`` (a GEMM of about 800 µs, timed tens of times), read about 110 µs for its first 1-10
timed samples and 100 µs after that. This probe times, with the run's own loop and cold timer
(``measure``, 3 warm-up calls, clean flush, gate), two calls right after five kinds of what came
before, three times each:

    gemm     bf16 8192x8192x8192 GEMMs back to back for 60 ms (a heavy point timed before)
    idle     the GPU idle for 200 ms (workers setting up, the parent between cases)
    busy     the same call timed just before (a point's later samples: the steady state)
    freed    3 GiB allocated, written, and given back to the driver (``torch.cuda.empty_cache``),
             as a worker does at the end of every task, right before the next worker times
    other    the same in another process (a worker beside this one), which then waits

Calls: the floor's read kernel over o_proj 16384 tokens' bytes (302 MB read, 134 MB written) and
``torch.addmm`` at 16 tokens, hidden 4096, bf16. Prints each condition's first 12 samples (µs) and
the median of samples 20-40, and the time from the condition's end to the 1st and 12th sample.

    PYTHONPATH=.:bench python3 bench/transient_probe.py
"""

from __future__ import annotations

import functools
import statistics
import subprocess
import sys
import time

import torch

from solbench.device.timer import make_timer
from solbench.impls import floor
from solbench.measure.criteria import CIWidth
from solbench.measure.loop import measure

SAMPLES = 40
OTHER = """
import sys, time, torch
junk = torch.ones(3 << 28, dtype=torch.int32, device="cuda")
torch.cuda.synchronize()
del junk
torch.cuda.empty_cache()
print("freed", flush=True)
time.sleep(60)
"""


def heavy(ms: float) -> None:
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        torch.mm(a, a)
        torch.cuda.synchronize()


def timed(timer, launch) -> tuple[list[float], list[float]]:
    t0 = time.perf_counter()
    at: list[float] = []
    timing = measure(timer, [launch], CIWidth(0.0, SAMPLES, SAMPLES, 1e9), warmup=3,
                     on_value=lambda i, s, v: at.append((time.perf_counter() - t0) * 1e3))
    return [s * 1e6 for s in timing.samples], at


def main() -> None:
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    timer = make_timer("cuda", "cold", l2_bytes=l2, flush="clean")
    timer.warm()
    tokens, hidden = 16384, 4096
    src, dst = floor.buffers(2 * tokens * hidden * 2 + hidden * hidden * 2, tokens * hidden * 2, "cuda", 0)
    calls = {"floor 16384": functools.partial(floor.read, src=src, dst=dst)}
    x = torch.randn(16, hidden, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(hidden, hidden, device="cuda", dtype=torch.bfloat16) / 64
    r = torch.randn(16, hidden, device="cuda", dtype=torch.bfloat16)
    calls["addmm 16"] = lambda: torch.addmm(r, x, w)
    rows = []
    for name, launch in calls.items():
        for rep in range(3):
            for cond in ("gemm", "idle", "busy", "freed", "other"):
                if cond == "other":
                    other = subprocess.Popen([sys.executable, "-c", OTHER], stdout=subprocess.PIPE, text=True)
                    assert other.stdout is not None and other.stdout.readline().strip() == "freed"
                elif cond == "freed":
                    junk = torch.ones(3 << 28, dtype=torch.int32, device="cuda")
                    torch.cuda.synchronize()
                    del junk
                    torch.cuda.empty_cache()
                elif cond == "gemm":
                    heavy(60)
                elif cond == "idle":
                    torch.cuda.synchronize()
                    time.sleep(0.2)
                else:
                    timed(timer, launch)
                samples, at = timed(timer, launch)
                if cond == "other":
                    other.kill()
                    other.wait()
                rows.append((name, cond, rep, samples, at))
    print(f"{'call':12s} {'before':6s} rep  first 12 samples (µs)" + " " * 60 + "median 20-40  ms to 1st / 12th")
    for name, cond, rep, samples, at in rows:
        first = " ".join(f"{s:6.1f}" for s in samples[:12])
        print(f"{name:12s} {cond:6s} {rep}   {first}   {statistics.median(samples[20:]):7.2f}   "
              f"{at[0]:6.2f} / {at[11]:6.2f}")


if __name__ == "__main__":
    main()
