"""The shipped residual + LayerNorm CUDA kernel with its launch shape as tunable parameters.

``solbench.kernels.ops.residual_layernorm`` picks the shape with a heuristic
(``_layernorm_config``: threads per row from the row length, 128 threads per block); here
``tpr`` (threads per row, a multiple of 32) and ``rows`` (rows per block) are keyword
arguments, so that ``solbench tune`` can search them (tests/data/tune_layernorm.yaml).
Without them the call is exactly the shipped one.
"""

from __future__ import annotations

import numpy as np
import torch

LN_EPS = 1e-5


def residual_layernorm_tunable(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                               bias: torch.Tensor, tpr: int | None = None,
                               rows: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(LayerNorm(x + residual) * weight + bias, x + residual), launched with ``tpr`` x ``rows`` threads."""
    from solbench.kernels import ops
    from solbench.kernels.loader import launch, ptr

    if tpr is None and rows is None:
        return ops.residual_layernorm(x, residual, weight, bias, LN_EPS)
    hidden = x.shape[-1]
    if hidden % 8 or not ops._aligned(x, residual, weight, bias) or not x.is_contiguous():
        raise ValueError("the tunable launch takes the 16-byte vector path only (hidden % 8 == 0, aligned)")
    heuristic_tpr, _, heuristic_rows = ops._layernorm_config(hidden, 8)
    tpr, rows = tpr or heuristic_tpr, rows or heuristic_rows
    vpt = ops._pow2_ceil(ops._cdiv(hidden // 8, tpr))
    if tpr % 32 or vpt > 8 or tpr * rows > (512 if vpt > 4 else 1024):
        raise ValueError(f"launch shape tpr={tpr}, rows={rows} does not fit the kernel (hidden {hidden})")
    dtype = ops._check("residual_layernorm", x=x, residual=residual, weight=weight, bias=bias)
    out = torch.empty_like(x)
    summed = torch.empty_like(x)
    n = x.numel() // hidden
    kernel = ops._get("residual_layernorm.cu", f"residual_layernorm_kernel<{ops._KIND[dtype]}, 8, {vpt}>")
    launch(kernel, (ops._cdiv(n, rows),), (tpr * rows,),
           (ptr(x), ptr(residual), ptr(weight), ptr(bias), ptr(out), ptr(summed), np.int32(n),
            np.int32(hidden), np.int32(tpr), np.float32(LN_EPS)), device=x.device)
    return out, summed
