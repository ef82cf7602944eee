"""Implementations that say whether a module was imported before they were (tests/unit/test_preload.py:
torch.compile's machinery; tests/gpu/test_preload_gpu.py: nvmath-python). The worker imports this
module at its first task, so what it finds in sys.modules then is what the fork server preloaded."""

import sys

import torch

PRELOADED = {name: name in sys.modules for name in ("torch._dynamo", "nvmath")}


def _double(x: torch.Tensor, module: str) -> torch.Tensor:
    if not PRELOADED[module]:
        raise RuntimeError(f"{module} was not imported before the task")
    return 2 * x


def double(x: torch.Tensor) -> torch.Tensor:
    return _double(x, "torch._dynamo")


def double_nvmath(x: torch.Tensor) -> torch.Tensor:
    return _double(x, "nvmath")
