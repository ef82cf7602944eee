"""Why the gate made the CUPTI-traced check ~170 ms slower a task (sixth session, BENCHMARKS.md):
the host time of each step of a traced call, with the gate and with the spin, CUPTI toggled on and
off around every call as guards.traced_call does. Prints one row per step and hold.

    PYTHONPATH=/tmp/site:. python3 bench/gate_cupti_probe.py
"""

import time

import torch

from solbench.device import cupti
from solbench.device.timer import HostGate, sleep_rate

trace = cupti.tracer()
gate = HostGate.make(torch, sleep_rate(torch))
assert gate is not None
x = torch.randn(1 << 20, device="cuda")
marker = torch.empty(1, dtype=torch.int32, device="cuda")
for hold in ("gate", "spin", "gate"):
    steps: dict[str, list[float]] = {}
    for _ in range(20):
        t = time.perf_counter()
        marks: list[tuple[str, float]] = []
        mark = lambda name, marks=marks: marks.append((name, time.perf_counter()))  # noqa: E731

        turned_on = trace.begin()
        mark("begin")
        if hold == "gate":
            gate.hold()
        else:
            torch.cuda._sleep(2_000_000)
        mark("hold")
        x.mul_(1.0001)
        marker.zero_()
        mark("call+marker")
        if hold == "gate":
            gate.release()
        torch.cuda.synchronize()
        mark("release+sync")
        trace.collect()
        mark("collect")
        trace.end(turned_on)
        mark("end")
        last = t
        for name, at in marks:
            steps.setdefault(name, []).append((at - last) * 1e3)
            last = at
    print(hold, "  ".join(f"{k} {sorted(v)[len(v) // 2]:.2f} ms (max {max(v):.2f})" for k, v in steps.items()),
          flush=True)
