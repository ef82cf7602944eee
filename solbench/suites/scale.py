"""The CPU profile of an imported problem: its sizes scaled down until a case fits a CPU run.

Every integer size of at least ``SMALLEST * 2`` is halved (floored at SMALLEST), all at once, until
the traced case moves at most ``CPU_BYTES`` and does at most ``CPU_FLOPS``; small integers (kernel
sizes, strides, group counts, dims) are left alone, and halving keeps powers of two divisible. A
step whose case no longer traces (a shape constraint broken) is not taken: the sizes that break it
when halved alone (one another constant was derived from, e.g. ``bias_shape = (out_channels, 1,
1)``) are kept from then on and the others halved; if none breaks it alone, the last size that
traced is used.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
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
    kept = set(keep)
    try:
        cost = trace(current)
    except Exception:
        return current
    for _ in range(MAX_STEPS):
        if cost.fused_bytes <= CPU_BYTES and cost.flops <= CPU_FLOPS:
            break
        smaller = {k: max(SMALLEST, v // 2) if _size(k, v, kept) else v for k, v in current.items()}
        if smaller == current:
            break
        try:
            cost, current = trace(smaller), smaller
        except Exception:
            # a size that another constant was derived from (``bias_shape = (out_channels, 1, 1)`` keeps
            # the file's value) cannot change alone: keep those, halve the others
            broken = {k for k in smaller if smaller[k] != current[k] and not _traces(trace, {**current, k: smaller[k]})}
            if not broken:
                break  # only the sizes together fail: stop at the last size that traced
            kept |= broken
    return current


def _traces(trace: Callable[[dict[str, Any]], Cost], params: dict[str, Any]) -> bool:
    try:
        trace(params)
    except Exception:
        return False
    return True


def _size(key: str, value: Any, keep: Collection[str]) -> bool:
    return key not in keep and type(value) is int and value >= 2 * SMALLEST
