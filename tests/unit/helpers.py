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
