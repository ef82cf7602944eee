"""x -> FP8 (e4m3) in one pass with a given scale, as a Triton kernel: read x once, write x8 once.

``quantize(x, out, inv_scale)`` writes ``clamp(x * inv_scale, ±448)`` cast to ``float8_e4m3fn``
into ``out`` (same shape, contiguous); ``inv_scale`` is a one-element float32 tensor on the device
(read by the kernel: no host sync). Eager torch needs two kernels for this (the scaled copy, then
the cast), which at 16384 x 4096 tokens cost the FP8 o_proj more than half of its GEMM's time on
an H200 (bench/fp8_probe.py). Triton ships with CUDA builds of torch; without it the caller gets
a DeviceError (the implementation is skipped). Importing this module never needs Triton.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from solbench.errors import DeviceError

BLOCK = 4096  # elements per program


def quantize(x: torch.Tensor, out: torch.Tensor, inv_scale: torch.Tensor) -> torch.Tensor:
    """``out = fp8(clamp(x * inv_scale, -448, 448))`` in one kernel on x's current stream; returns out."""
    if not (x.is_contiguous() and out.is_contiguous() and out.dtype == torch.float8_e4m3fn
            and out.shape == x.shape and inv_scale.numel() == 1 and inv_scale.dtype == torch.float32):
        raise ValueError("quantize: x and out contiguous and of one shape, out float8_e4m3fn, inv_scale one float32")
    kernel, cdiv = _kernel()
    n = x.numel()
    kernel[(cdiv(n, BLOCK),)](x, out, inv_scale, n, BLOCK=BLOCK)
    return out


@functools.cache
def _kernel() -> tuple[Any, Any]:
    try:
        import triton
        import triton.language as tl
    except ImportError as exc:
        raise DeviceError(f"needs Triton for the one-pass FP8 quantization (pip install triton): {exc}") from None

    @triton.jit
    def quantize_kernel(x_ptr, y_ptr, inv_ptr, n, BLOCK: tl.constexpr):
        # int64 offsets: program_id is int32, so a tensor of 2**31 elements or more wrapped around
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = tl.clamp(x * tl.load(inv_ptr), -448.0, 448.0)  # largest finite e4m3 (a global is not visible here)
        tl.store(y_ptr + offs, y.to(tl.float8e4nv), mask=mask)

    return quantize_kernel, triton.cdiv
