"""The CPU profile of an imported problem: its sizes scaled down until a case fits a CPU run.

Every integer size of at least ``SMALLEST * 2`` is halved (floored at SMALLEST), all at once, until
the traced case moves at most ``CPU_BYTES`` and does at most ``CPU_FLOPS``; small integers (kernel
sizes, strides, group counts, dims) are left alone, and halving keeps powers of two divisible. A
step whose case no longer traces (a shape constraint broken) is not taken: the last size that
traced is used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from solbench.results.model import Cost

CPU_BYTES = 8 << 20  # bytes a CPU case may move (inputs, parameters, outputs)
CPU_FLOPS = 2e8  # FLOPs (tensor + vector) a CPU case may do
SMALLEST = 16
MAX_STEPS = 24


def scaled(params: Mapping[str, Any], trace: Callable[[dict[str, Any]], Cost],
           keep: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``params`` with the sizes halved until ``trace(params)`` fits (module docstring).

    ``keep`` names parameters never scaled (e.g. an index). ``trace`` raises where a size does not
    work; the first call must succeed (the caller's original sizes).
    """
    current = dict(params)
    best = current
    for _ in range(MAX_STEPS):
        try:
            cost = trace(current)
        except Exception:
            break
        best = current
        if cost.fused_bytes <= CPU_BYTES and cost.flops <= CPU_FLOPS:
            break
        smaller = {k: max(SMALLEST, v // 2) if _size(k, v, keep) else v for k, v in current.items()}
        if smaller == current:
            break
        current = smaller
    return best


def _size(key: str, value: Any, keep: frozenset[str]) -> bool:
    return key not in keep and type(value) is int and value >= 2 * SMALLEST
