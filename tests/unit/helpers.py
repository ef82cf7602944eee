"""Tiny implementations used by the unit tests' workload files."""

from typing import Any

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


def gelu_scale(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x) * 1.5


_COMPILED: dict[str, Any] = {}


def gelu_scale_compiled(x: torch.Tensor) -> torch.Tensor:
    """torch.compile of gelu_scale, compiled once per process (tests/data/compiled.yaml)."""
    if "f" not in _COMPILED:
        _COMPILED["f"] = torch.compile(gelu_scale, dynamic=False)
    return _COMPILED["f"](x)


def double_jitter(x: torch.Tensor) -> torch.Tensor:
    """2 x, off by a different relative 1e-6 at most on every call: right within float32's
    tolerance, never the same bits twice (as a kernel that adds in another order each call)."""
    return x * (2 + 2e-6 * (torch.rand_like(x) - 0.5))


def double_wrong_when_timed(x: torch.Tensor) -> torch.Tensor:
    """Right on its first three calls (the checks before timing), 1% off on every later one."""
    _CALLS[0] += 1
    return x * (2 if _CALLS[0] <= 3 else 2.02)


_CALLS = [0]


_LINGER: list = []


def double_lingering(x: torch.Tensor) -> torch.Tensor:
    """2 x, in a process that no longer exits at once when asked: a finalizer of its exit sleeps a
    minute (as Inductor's compile-worker shutdown may wait on its pool)."""
    if not _LINGER:
        import time
        from multiprocessing import util

        _LINGER.append(util.Finalize(None, time.sleep, (60,), exitpriority=100))
    return x * 2


def double_chatty(x: torch.Tensor) -> torch.Tensor:
    """2 x, printing on every call: through Python, and straight to file descriptor 1 as native code would."""
    import os

    print("chatty: a line from print()")
    os.write(1, b"chatty: a line written to fd 1\n")
    return x * 2
