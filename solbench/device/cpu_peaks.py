"""Measured CPU ceilings: float32 matmul FLOP/s and memory copy bandwidth, with torch.

A CPU has no datasheet peak solbench could trust, so the CPU spec is scored against what torch
achieves on this host, measured once per process:

    vector_fp32_flops = max over n in (512, 768, 1024) of best(2 n^3 / t(torch.mm))
    bandwidth         = best(2 x bytes / t(dst.copy_(src)))     read + write, 128 MiB tensors

Measured with the run's torch threads (:mod:`solbench.device.threads`), so that SOL compares
an implementation with what the same threads achieve. ``seconds`` is the timed budget; allocating
the tensors and one warm-up call per kernel come on top.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

from solbench.device import threads

_MATMUL_SIZES = (512, 768, 1024)  # compute-bound, and short enough for several calls per size
_COPY_BYTES = 128 * 2**20  # per tensor: larger than the last-level cache of most CPUs
_MIN_REPS = 3


def _best_rate(fn: Callable[[], object], work: float, budget_s: float) -> float:
    """Best ``work / seconds`` over repeated calls of ``fn`` within a time budget (after one warm-up)."""
    fn()
    best = 0.0
    deadline = time.perf_counter() + budget_s
    reps = 0
    while reps < _MIN_REPS or time.perf_counter() < deadline:
        start = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - start
        if elapsed > 0:
            best = max(best, work / elapsed)
        reps += 1
    return best


@functools.cache
def _measure(seconds: float, n_threads: int) -> tuple[float, float]:
    import torch

    before = torch.get_num_threads()
    threads.apply(n_threads)
    try:
        return _rates(seconds)
    finally:
        threads.apply(before)


def _rates(seconds: float) -> tuple[float, float]:
    import torch

    per_size = seconds / 2 / len(_MATMUL_SIZES)
    flops = 0.0
    for n in _MATMUL_SIZES:
        a, b = torch.randn(n, n), torch.randn(n, n)
        out = torch.empty(n, n)
        flops = max(flops, _best_rate(functools.partial(torch.mm, a, b, out=out), 2.0 * n**3, per_size))
    src = torch.ones(_COPY_BYTES // 4, dtype=torch.float32)
    dst = torch.empty_like(src)
    bandwidth = _best_rate(lambda: dst.copy_(src), 2.0 * _COPY_BYTES, seconds / 2)
    return flops, bandwidth


def measure_cpu_peaks(seconds: float = 0.5, threads: int = 0) -> dict[str, float]:
    """Measured {"vector_fp32_flops": FLOP/s, "bandwidth": bytes/s} with ``threads`` torch threads
    (0: as torch is set); cached per process, budget and threads."""
    flops, bandwidth = _measure(float(seconds), int(threads))
    return {"vector_fp32_flops": flops, "bandwidth": bandwidth}
