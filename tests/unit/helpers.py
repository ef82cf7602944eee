"""Tiny implementations used by the unit tests' workload files."""

import time

import torch


def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def double_wrong(x: torch.Tensor) -> torch.Tensor:
    return x * 2.01


def double_unwritten(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    out[: x.shape[0] // 2] = x[: x.shape[0] // 2] * 2
    out[x.shape[0] // 2 :] = float("nan")  # what an unwritten CUDA allocation would hold
    return out


def spin(x: torch.Tensor, wait_ms: float) -> torch.Tensor:
    """Busy-wait ``wait_ms`` milliseconds, then double: a CPU kernel of known duration."""
    end = time.perf_counter() + wait_ms * 1e-3
    while time.perf_counter() < end:
        pass
    return x * 2


def spin_fast(x: torch.Tensor) -> torch.Tensor:
    return spin(x, 2.0)


def spin_slow(x: torch.Tensor) -> torch.Tensor:
    return spin(x, 2.4)
