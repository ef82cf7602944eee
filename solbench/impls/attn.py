"""Attention-block projections: o_proj (matmul + residual) and the QKV projection.

Weights follow ``torch.nn.Linear``: ``w`` is [out_features, in_features], ``y = x @ w.T``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

# Largest token count where the decode GEMV kernel beats cuBLAS on an H200 (BENCHMARKS.md); above
# it the fused path is one cuBLASLt GEMM with the residual as C (nvmath-python), or addmm without it.
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


def o_proj_cublaslt_setup(x: torch.Tensor, w: torch.Tensor, residual: torch.Tensor) -> dict[str, Any]:
    """Plan the cuBLASLt call once for these tensors (nvmath-python)."""
    from solbench.impls.cublaslt import AddmmPlan

    return {"plan": AddmmPlan(x, w, residual)}


def o_proj_cublaslt(plan: Any) -> torch.Tensor:
    """One cuBLASLt GEMM reading the residual as C and writing a separate D."""
    return plan()  # type: ignore[no-any-return]


def o_proj_fused_setup(x: torch.Tensor, w: torch.Tensor, residual: torch.Tensor) -> dict[str, Any]:
    """Above the decode sizes on CUDA, plan the one-kernel cuBLASLt path if nvmath-python is here."""
    plan = None
    if x.is_cuda and x.shape[0] > DECODE_MAX_TOKENS:
        from solbench.impls import cublaslt

        if cublaslt.available():
            plan = cublaslt.AddmmPlan(x, w, residual)
    return {"x": x, "w": w, "residual": residual, "plan": plan}


def o_proj_fused(x: torch.Tensor, w: torch.Tensor, residual: torch.Tensor, plan: Any = None) -> torch.Tensor:
    """Best one-kernel path: the GEMV kernel for decode, cuBLASLt with C != D above (addmm without
    nvmath-python, or on the CPU)."""
    if x.is_cuda and x.shape[0] <= DECODE_MAX_TOKENS:
        from solbench.kernels.ops import gemv_residual

        return gemv_residual(x, w, residual)
    if plan is not None:
        return plan()  # type: ignore[no-any-return]
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


def o_proj_fp8_static_setup(x: torch.Tensor, w: torch.Tensor, residual: torch.Tensor) -> dict[str, Any]:
    """The FP8 weight (per-tensor scale, once), a static activation scale calibrated here (amax of
    this input set / 448, as FP8 inference calibrates its activation scales offline), and the plan
    of one FP8 cuBLASLt GEMM with the residual as C. FP8 GEMMs need M % 16 == 0: below that (one
    token) the FP8 weight goes through the weight-only FP8 GEMV kernel instead (x stays 16-bit)."""
    base = o_proj_fp8_setup(x, w, residual)
    w8, w_scale = base["w_fp8"], base["w_scale"].reshape(1)
    if x.shape[0] % 16:
        return {"x": x, "residual": residual, "gemv": (w8, w_scale.expand(w8.shape[0]).contiguous())}
    from solbench.impls.cublaslt import Fp8AddmmPlan

    x_scale = (x.abs().amax().float() / FP8_MAX).clamp_min(1e-12).reshape(1)
    return {"x": x, "residual": residual, "plan": Fp8AddmmPlan(x, w8, w_scale, residual, x_scale)}


def o_proj_fp8_static(x: torch.Tensor, residual: torch.Tensor, plan: Any = None,
                      gemv: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """FP8 o_proj: one-pass quantization of x and one FP8 cuBLASLt GEMM with the residual in its
    epilogue (two kernels); at fewer than 16 tokens the FP8-weight GEMV (one kernel)."""
    if gemv is not None:
        from solbench.kernels.ops import gemv_fp8_residual

        return gemv_fp8_residual(x, gemv[0], gemv[1], residual)
    return plan(x)  # type: ignore[no-any-return]


# --------------------------------------------------------------------------------------------
# o_proj_fp8w: decode o_proj with an FP8 (e4m3) weight and one fp32 scale per output row


def o_proj_fp8w_reference(x: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor,
                          residual: torch.Tensor) -> torch.Tensor:
    """out = x @ (w * w_scale[:, None]).T + residual (w upcast from FP8 by solbench)."""
    return x @ (w * w_scale[:, None]).t() + residual


def o_proj_fp8w_dequantized_setup(x: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor,
                                  residual: torch.Tensor) -> dict[str, torch.Tensor]:
    """The same weights widened once to x's dtype: what a 16-bit model would hold."""
    wide = (w.float() * w_scale.float()[:, None]).to(x.dtype)
    return {"x": x, "w": wide, "residual": residual}


def o_proj_fp8w_fused(x: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor,
                      residual: torch.Tensor) -> torch.Tensor:
    """One kernel streaming the FP8 weight (half the bytes), widened exactly on chip."""
    from solbench.kernels.ops import gemv_fp8_residual

    return gemv_fp8_residual(x, w, w_scale, residual)


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


def qkv_fused_lt_setup(x: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor,
                       wv: torch.Tensor) -> dict[str, Any]:
    """Concatenate the weights and plan + autotune the one cuBLASLt GEMM (nvmath-python)."""
    from solbench.impls.cublaslt import MatmulPlan

    w_qkv = torch.cat([wq, wk, wv], dim=0).contiguous()
    return {"x": x, "plan": MatmulPlan(x, w_qkv), "q_out": wq.shape[0], "kv_out": wk.shape[0]}


def qkv_fused_lt(x: torch.Tensor, plan: Callable[[], torch.Tensor], q_out: int,
                 kv_out: int) -> tuple[torch.Tensor, ...]:
    """One autotuned cuBLASLt GEMM against the concatenated weight (planned for this x), split."""
    del x  # the plan holds it
    return tuple(plan().split([q_out, kv_out, kv_out], dim=1))
