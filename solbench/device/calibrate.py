"""Measured ceilings: the bandwidth of a large device-to-device copy and sustained GEMM rates.

Datasheet peaks are upper bounds no code reaches; measured ceilings tell what this device, at its
clocks and power limit, actually delivers. Protocol (CUDA events, random normal inputs, never zeros):

    copy   1 GiB -> 1 GiB, 20 copies timed one by one; bandwidth = 2 GiB / median time
    GEMM   n x n x n (default 8192) per unit; batches of 5 GEMMs timed for ``seconds`` after a
           0.25 s warm-up; ceiling = median batch rate (sustained), burst = best batch
"""

from __future__ import annotations

import datetime as dt
import statistics
import time
from typing import Any

from solbench.results.model import Calibration

_GIB = 1 << 30


def calibrate(torch: Any, *, spec_id: str, device_name: str, device_uuid: str | None,
              seconds: float = 1.0, n: int = 8192, sm_clock: Any = None, driver: str | None = None) -> Calibration:
    """Measure copy bandwidth and per-dtype GEMM ceilings on the current CUDA device (``driver``: the
    NVIDIA driver's version, recorded with them)."""
    bandwidth = copy_bandwidth(torch)
    sustained: dict[str, float] = {}
    burst: dict[str, float] = {}
    for unit in ("bf16", "fp16", "tf32", "fp32", "fp8"):
        rates = gemm_rates(torch, unit, n=n, seconds=seconds)
        if rates:
            sustained[unit] = statistics.median(rates)
            burst[unit] = max(rates)
    vector = {"fp32": sustained.pop("fp32")} if "fp32" in sustained else {}
    return Calibration(
        created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), spec_id=spec_id,
        device_name=device_name, device_uuid=device_uuid, bandwidth=bandwidth, tensor_peaks=sustained,
        vector_peaks=vector, burst_peaks=burst,
        protocol=f"copy 1 GiB->1 GiB x20 (median); GEMM {n}^3 random normal, batches of 5 for {seconds:g} s "
                 "after 0.25 s warm-up, median batch rate; CUDA events",
        sm_clock_mhz=sm_clock() if sm_clock else None, driver=driver)


def copy_bandwidth(torch: Any, nbytes: int = _GIB, repeats: int = 20) -> float:
    """Bytes read plus bytes written per second of a device-to-device copy (median of repeats)."""
    src = torch.randn(nbytes // 4, device="cuda")
    dst = torch.empty_like(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    dst.copy_(src)
    times = []
    for _ in range(repeats):
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return 2 * nbytes / statistics.median(times)


def gemm_rates(torch: Any, unit: str, *, n: int, seconds: float, batch: int = 5) -> list[float]:
    """FLOP/s of each batch of ``batch`` n^3 GEMMs over ``seconds``; [] if the unit is unsupported."""
    fn = _gemm(torch, unit, n)
    if fn is None:
        return []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    flops = 2.0 * n**3 * batch
    rates: list[float] = []
    warm_until = time.monotonic() + 0.25
    stop = warm_until + seconds
    while time.monotonic() < stop:
        start.record()
        for _ in range(batch):
            fn()
        end.record()
        end.synchronize()
        if time.monotonic() >= warm_until:
            rates.append(flops / (start.elapsed_time(end) * 1e-3))
    return rates


def _gemm(torch: Any, unit: str, n: int) -> Any:
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(n, n, device="cuda", generator=gen)
    b = torch.randn(n, n, device="cuda", generator=gen)
    if unit in ("bf16", "fp16"):
        dtype = torch.bfloat16 if unit == "bf16" else torch.float16
        a, b = a.to(dtype), b.to(dtype)
        return lambda: torch.mm(a, b)
    if unit in ("tf32", "fp32"):
        def run() -> Any:
            saved = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = unit == "tf32"
            try:
                return torch.mm(a, b)
            finally:
                torch.backends.cuda.matmul.allow_tf32 = saved
        return run
    if unit == "fp8" and torch.cuda.get_device_capability() >= (8, 9):
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t().contiguous().t()
        one = torch.ones((), device="cuda")
        return lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    return None
