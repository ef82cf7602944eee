"""RMSNorm + residual add: a workload with its own CUDA kernel (see README, "Your own kernels").

``rmsnorm_residual.yaml`` points here. ``kernel_setup`` compiles ``rmsnorm_residual.cu`` once
(solbench.kernels.load: NVRTC through CuPy, cached), outside timing; ``kernel`` launches it on
torch's current stream and returns freshly allocated outputs, as every implementation must.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from solbench.kernels import load

EPS = 1e-6
MAX_HIDDEN = 8192  # 256 threads x 4 packs x 8 elements, as in the kernel


def reference(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """summed = x + residual; out = summed * rsqrt(mean(summed^2) + eps) * weight."""
    summed = x + residual
    out = summed * torch.rsqrt(summed.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight
    return out, summed


def baseline(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Eager torch: the add, then the norm's statistics in fp32, then the scaling (several kernels)."""
    summed = x + residual
    s = summed.float()
    out = (s * torch.rsqrt(s.pow(2).mean(dim=-1, keepdim=True) + EPS)).to(x.dtype) * weight
    return out, summed


def kernel_setup(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> dict[str, Any]:
    """Compile the kernel once (a relative path is looked up next to this file)."""
    return {"x": x, "residual": residual, "weight": weight,
            "kernel": load("rmsnorm_residual.cu", "rmsnorm_residual_bf16")}


def kernel(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, kernel: Any) -> tuple[torch.Tensor, ...]:
    """One pass: each row read once, both outputs written once."""
    hidden = x.shape[-1]
    if x.dtype != torch.bfloat16 or hidden % 8 or hidden > MAX_HIDDEN:
        raise ValueError(f"the example kernel takes bfloat16 rows of a multiple of 8 up to {MAX_HIDDEN} "
                         f"elements, got {x.dtype} x {hidden}")
    if not (x.is_contiguous() and residual.is_contiguous() and weight.is_contiguous()):
        raise ValueError("the example kernel needs contiguous tensors")
    out = torch.empty_like(x)
    summed = torch.empty_like(x)
    kernel(grid=x.numel() // hidden, block=256,
           args=(x, residual, weight, out, summed, np.int32(hidden), np.float32(EPS)))
    return out, summed
