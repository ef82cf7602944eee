"""o_proj (torch.addmm) with an injected slowdown, for the gate and ``solbench ab`` experiments
of issue 8 (bench/repeat_session.sh). Not a shipped workload.

The wrapper adds GPU time after the GEMM: a spin kernel of ``SLOWDOWN`` times the call's own
cold time, calibrated once per input set in set-up (events around the call after a 2 x L2 flush,
median of 15). At the maximum SM clock the spin lasts exactly that long; at a lower clock longer.
``SLOWDOWN = 0.0`` is the same call with no spin (the baseline tree of the ``ab`` experiment).
"""

from __future__ import annotations

import statistics
from typing import Any

import torch

SLOWDOWN = 0.10


def _cold_seconds(fn: Any, reps: int = 15) -> float:
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    flush = torch.empty(max(2 * l2, 64 << 20) // 4, dtype=torch.int32, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        torch.cuda._sleep(200_000)  # ~100 us: the launches below queue up behind it
        flush.zero_()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return statistics.median(times)


def setup(x: torch.Tensor, w: torch.Tensor, residual: torch.Tensor) -> dict[str, Any]:
    """The inputs, and the spin length (cycles) that adds ``SLOWDOWN`` of the call's cold time."""
    args: dict[str, Any] = {"x": x, "w": w, "residual": residual, "spin_cycles": 0}
    if x.is_cuda and SLOWDOWN > 0:
        seconds = _cold_seconds(lambda: torch.addmm(residual, x, w.t()))
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        khz = getattr(props, "clock_rate", 0) or 1_980_000
        args["spin_cycles"] = int(SLOWDOWN * seconds * khz * 1e3)
    return args


def addmm_slow(x: torch.Tensor, w: torch.Tensor, residual: torch.Tensor, spin_cycles: int = 0) -> torch.Tensor:
    """torch.addmm, then ``spin_cycles`` of spin on the same stream (inside the timed window)."""
    out = torch.addmm(residual, x, w.t())
    if spin_cycles:
        torch.cuda._sleep(spin_cycles)
    return out
