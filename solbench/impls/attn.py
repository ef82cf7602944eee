"""Attention-block projections: o_proj (matmul + residual) and the QKV projection.

Weights follow ``torch.nn.Linear``: ``w`` is [out_features, in_features], ``y = x @ w.T``.
"""

from __future__ import annotations

import torch

# Decode sizes where the fused GEMV kernel beats cuBLAS addmm on an H200 (BENCHMARKS.md: ahead at
# 1 and 16 tokens, behind at 64, where x re-reads from L2 and the tensor-core work grow).
DECODE_MAX_TOKENS = 16


def o_proj_reference(x: torch.Tensor, w: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """out = x @ w.T + residual, in the reference dtype."""
    return x @ w.t() + residual


def o_proj_baseline(x: torch.Tensor, w: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """Two kernels: the matmul writes its result, the add reads it back."""
    return torch.mm(x, w.t()) + residual


def o_proj_cublas_fused(x: torch.Tensor, w: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """One GEMM that accumulates the residual (addmm, beta = 1): no intermediate round trip."""
    return torch.addmm(residual, x, w.t())


def o_proj_fused(x: torch.Tensor, w: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """Best fused path: the GEMV kernel for decode on CUDA, cuBLAS addmm otherwise."""
    if x.is_cuda and x.shape[0] <= DECODE_MAX_TOKENS:
        from solbench.kernels.ops import gemv_residual

        return gemv_residual(x, w, residual)
    return torch.addmm(residual, x, w.t())


FP8_MAX = 448.0  # largest finite float8_e4m3fn


def o_proj_fp8_setup(x: torch.Tensor, w: torch.Tensor, residual: torch.Tensor) -> dict[str, torch.Tensor]:
    """Quantize the (constant) weight to FP8 once, per-tensor scale; activations stay dynamic."""
    w_scale = (w.abs().amax().float() / FP8_MAX).clamp_min(1e-12)
    w_fp8 = (w.float() / w_scale).to(torch.float8_e4m3fn)
    return {"x": x, "w_fp8": w_fp8, "w_scale": w_scale.reshape(()), "residual": residual}


def o_proj_fp8(x: torch.Tensor, w_fp8: torch.Tensor, w_scale: torch.Tensor,
               residual: torch.Tensor) -> torch.Tensor:
    """Quantize x per tensor (timed: it is dynamic), FP8 GEMM via _scaled_mm, add the residual."""
    amax = torch.linalg.vector_norm(x, ord=float("inf"), dtype=torch.float32)  # one read of x
    x_scale = (amax / FP8_MAX).clamp_min(1e-12)
    x_fp8 = (x / x_scale).to(torch.float8_e4m3fn)
    y = torch._scaled_mm(x_fp8, w_fp8.t(), scale_a=x_scale, scale_b=w_scale, out_dtype=x.dtype)
    return y.add_(residual)


def qkv_reference(x: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor,
                  wv: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """q, k, v = x @ wq.T, x @ wk.T, x @ wv.T."""
    return x @ wq.t(), x @ wk.t(), x @ wv.t()


def qkv_baseline(x: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor,
                 wv: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Three projections: x is read three times, three GEMM launches."""
    return torch.mm(x, wq.t()), torch.mm(x, wk.t()), torch.mm(x, wv.t())


def qkv_fused_setup(x: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor,
                    wv: torch.Tensor) -> dict[str, torch.Tensor]:
    """Concatenate the (constant) weights once: [q_out + 2 kv_out, hidden]."""
    return {"x": x, "w_qkv": torch.cat([wq, wk, wv], dim=0).contiguous(),
            "q_out": wq.shape[0], "kv_out": wk.shape[0]}  # type: ignore[dict-item]


def qkv_fused(x: torch.Tensor, w_qkv: torch.Tensor, q_out: int, kv_out: int) -> tuple[torch.Tensor, ...]:
    """One GEMM against the concatenated weight, split into q, k, v views afterwards."""
    y = torch.mm(x, w_qkv.t())
    return tuple(y.split([q_out, kv_out, kv_out], dim=1))
