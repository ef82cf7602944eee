"""Tiny implementations used by the unit tests' workload files."""

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
