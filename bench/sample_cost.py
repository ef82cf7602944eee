"""What one cold sample costs on the host and the GPU, gate against spin, with and without the NVML
clock probe the loop reads after every sample (issue 16: per-sample host work). One process, one
GPU, a 4 MB multiply and o_proj-sized addmm (16 tokens, hidden 4096, bf16); 300 samples each.

    PYTHONPATH=. python3 bench/sample_cost.py
"""

import time

import torch

from solbench.device import nvml
from solbench.device.timer import CudaColdTimer
from solbench.measure.criteria import CIWidth
from solbench.measure.loop import measure

N = 300
l2 = torch.cuda.get_device_properties(0).L2_cache_size
x = torch.randn(1 << 20, device="cuda")
a = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
r = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
probe = nvml.clock_probe(0)
for _ in range(20):
    probe()
t0 = time.perf_counter()
for _ in range(500):
    probe()
print(f"NVML clock probe: {(time.perf_counter() - t0) / 500 * 1e6:.1f} us a call")
rows = []
for name, fn in (("mul 4 MB", lambda: x.mul_(1.0001)), ("addmm 16x4096x4096", lambda: torch.addmm(r, a, w.t()))):
    for hold in ("gate", "spin"):
        for with_probe in (False, True):
            timer = CudaColdTimer(torch, l2)
            if hold == "spin":
                timer.gate = None
            t0 = time.perf_counter()
            t = measure(timer, [fn], CIWidth(0.0, N, N, 60.0), probe=probe if with_probe else None)
            wall = time.perf_counter() - t0
            p = timer.protocol()
            rows.append((name, hold, with_probe, wall / N * 1e6, t.median * 1e6, p["spin_us"], p["host_launch_us"],
                         p["samples_redone"]))
print(f"{'call':20s} {'hold':5s} {'probe':5s} {'wall/sample us':>14s} {'median us':>9s} {'spin us':>7s} "
      f"{'host us':>7s} {'redone':>6s}")
for row in rows:
    name, hold, with_probe, wall_us, median_us, spin_us, host_us, redone = row
    print(f"{name:20s} {hold:5s} {with_probe!s:5s} {wall_us:14.1f} {median_us:9.2f} {spin_us:7.1f} {host_us:7.1f} "
          f"{redone:6d}")
