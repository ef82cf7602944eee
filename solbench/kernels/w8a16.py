"""FP8-weight (e4m3, one fp32 scale per output row) linear + residual on the tensor cores, as Triton
kernels: the path ``ops.gemv_fp8_residual`` takes where the streaming GEMV stops paying (many tokens).

    out[t, n] = scale[n] * sum_k x[t, k] * w[n, k] + residual[t, n]

The streaming GEMV (gemv_stream.cu) re-reads x's slice of every stage in every CTA; with an FP8
weight a 64-token slice of x is twice the weight tile it meets, so at 64 tokens the GEMV moved more
bytes of x than of weight and ran slower than the 16-bit baseline. Here a program owns a tile of
BLOCK_N weight rows, all tokens of one BLOCK_T tile, and 1/SPLIT of K: the weight tile is widened to
x's type exactly in registers (every e4m3 value is a bf16 and an fp16 value), multiplied on the
tensor cores with fp32 accumulation, and x is read once per tile of rows, not once per 32 rows.

With SPLIT == 1 one kernel does it all. With SPLIT > 1 the programs write fp32 partial sums
[SPLIT, T, N] (no atomics: the result does not depend on scheduling), and a second kernel adds
them, applies the scale and the residual and rounds once. Triton ships with CUDA builds of torch;
without it the caller gets a DeviceError. Importing this module never needs Triton.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch

from solbench.errors import DeviceError
from solbench.kernels.loader import MAX_GRID_YZ

FINISH_BLOCK = 1024  # outputs per program of the finishing kernel
MAX_TOKEN_TILES = MAX_GRID_YZ  # token tiles of one launch (the grid's z axis)

# The widening: e4m3 -> fp16 with the hardware conversion (one instruction a pair), and for bf16 tiles
# fp16 -> bf16 after it. Both are exact: every e4m3 value (3 mantissa bits, magnitudes 2^-9 to 448) is an
# fp16 and a bf16 value. On an H200 (thirtieth session, BENCHMARKS.md issue 20) this bf16 path read
# 14.8 us at 64 tokens under graph replay where the inline-PTX widening of gemv_stream.cu (prmt, shl,
# and, fma a pair), used here before, read 16.1-16.2 us. The e4m3fn NaN byte (0x7F/0xFF) would read as
# NaN: weights are finite.


@dataclass(frozen=True)
class Config:
    """One launch shape: rows per program, k per step, K split, and Triton's warps and stages."""

    block_n: int
    block_k: int
    split: int
    warps: int = 4
    stages: int = 4

    def __str__(self) -> str:
        return f"n{self.block_n}_k{self.block_k}_s{self.split}_w{self.warps}_p{self.stages}"


# The launch shape, chosen on an H200 with N = K = 4096 by bench/fp8w_sweep.py (cold timer, median of
# 60; BENCHMARKS.md, issue 20): 64 rows per program and K split in two (128 programs) at 64 tokens read
# 18.1 us in bf16 and 15.7 us in fp16, the best of 21 shapes in bf16 and of 12 in fp16; the GEMV read 22.8.
# With the four-instruction widening (twelfth session, bf16 only, 15 shapes) it is still the best at
# 64 tokens: 17.25 us against the baseline's 17.38 (results/h200/issue20/session12/sweep-bf16.log).
# Those sweeps widened bf16 with inline PTX; the shapes were not swept again after the widening went
# through fp16 (the thirtieth session timed only this shape that way: 16.06 us at 64 tokens).
DEFAULT = Config(64, 256, 2, 4, 3)
# Where it pays (same sweep): above 16 tokens in bf16 (at 16: 14.9 against the GEMV's 14.7 us), from
# 16 tokens in fp16 (at 16: 13.4 against 14.6 us; at 1 token the GEMV's 11.5 against 12.8 us). The
# twelfth session's bf16 sweep keeps the switch: at 16 tokens this shape read 14.62 against the
# GEMV's 13.86 us (32-row tiles read 13.41, in one sweep: not yet a reason to add a shape).
MIN_TOKENS = {torch.bfloat16: 17, torch.float16: 16}


def block_t(tokens: int) -> int:
    """Token slots of one program: a power of two, at least 16 (the smallest tensor-core tile), at most 64."""
    return min(64, max(16, 1 << (max(tokens, 1) - 1).bit_length()))


def split_for(config: Config, k: int) -> int:
    """The K split that applies to this K: ``config.split``, fewer where K has not enough BLOCK_K steps."""
    steps = -(-k // config.block_k)
    return max(1, min(config.split, steps))


def linear_residual(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, residual: torch.Tensor,
                    out: torch.Tensor, config: Config = DEFAULT) -> torch.Tensor:
    """``out = x @ (weight * scale[:, None]).T + residual`` on x's current stream; returns ``out``.

    ``x`` [T, K] and ``residual``/``out`` [T, N] contiguous bf16 or fp16; ``weight`` [N, K]
    contiguous ``float8_e4m3fn``; ``scale`` [N] contiguous float32 (all checked by the caller,
    ``ops.gemv_fp8_residual``)."""
    partial_kernel, finish_kernel, cdiv = _kernels()
    tokens, k = x.shape
    n = weight.shape[0]
    if cdiv(tokens, block_t(tokens)) > MAX_TOKEN_TILES:  # token tiles are the grid's z axis: more run in slices
        step = MAX_TOKEN_TILES * block_t(tokens)
        for t0 in range(0, tokens, step):
            t1 = min(tokens, t0 + step)
            linear_residual(x[t0:t1], weight, scale, residual[t0:t1], out[t0:t1], config)
        return out
    bt = block_t(tokens)
    split = split_for(config, k)
    k_per = cdiv(cdiv(k, split), config.block_k) * config.block_k  # K of one split, whole BLOCK_K steps
    split = cdiv(k, k_per)
    grid = (cdiv(n, config.block_n), split, cdiv(tokens, bt))
    finish = split == 1  # one K part: the tile kernel finishes the rows itself
    part = out if finish else torch.empty((split, tokens, n), dtype=torch.float32, device=x.device)
    partial_kernel[grid](x, weight, scale, residual, out, part, tokens, n, k, k_per,
                         BLOCK_T=bt, BLOCK_N=config.block_n, BLOCK_K=config.block_k, FINISH=finish,
                         num_warps=config.warps, num_stages=config.stages)
    if finish:
        return out
    finish_kernel[(cdiv(tokens * n, FINISH_BLOCK),)](part, scale, residual, out, tokens * n, n,
                                                    SPLIT=split, BLOCK=FINISH_BLOCK,
                                                    WIDE=tokens * n + FINISH_BLOCK >= 2**31)
    return out


@functools.cache
def _kernels() -> tuple[Any, Any, Any]:
    try:
        import triton
        import triton.language as tl
    except ImportError as exc:
        raise DeviceError(f"needs Triton for the FP8-weight tensor-core path (pip install triton): {exc}") from None

    @triton.jit
    def partial_kernel(x_ptr, w_ptr, scale_ptr, res_ptr, out_ptr, part_ptr, T, N, K, K_PER,
                       BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       FINISH: tl.constexpr):
        pid_n = tl.program_id(0)
        pid_k = tl.program_id(1)
        pid_t = tl.program_id(2)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        rt = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
        rk = tl.arange(0, BLOCK_K)
        k_begin = pid_k * K_PER
        n_ok = rn < N
        t_ok = rt < T
        w_rows = w_ptr + rn.to(tl.int64)[:, None] * K
        x_cols = x_ptr + rt.to(tl.int64)[None, :] * K
        acc = tl.zeros((BLOCK_N, BLOCK_T), dtype=tl.float32)
        for k0 in range(k_begin, k_begin + K_PER, BLOCK_K):
            ks = k0 + rk
            k_ok = ks < K
            w = tl.load(w_rows + ks[None, :], mask=n_ok[:, None] & k_ok[None, :], other=0.0,
                        eviction_policy="evict_first")  # the weight is read once
            xt = tl.load(x_cols + ks[:, None], mask=k_ok[:, None] & t_ok[None, :], other=0.0)
            wide = w.to(tl.float16)  # e4m3 -> fp16: one hardware conversion a pair, exact
            if xt.dtype == tl.bfloat16:
                wide = wide.to(tl.bfloat16)  # exact: an e4m3 value in fp16 is a bf16 value
            acc = tl.dot(wide, xt, acc)  # exact widening: every e4m3 value is a bf16 and an fp16 value
        offs = rt.to(tl.int64)[None, :] * N + rn[:, None]
        ok = n_ok[:, None] & t_ok[None, :]
        if FINISH:
            s = tl.load(scale_ptr + rn, mask=n_ok, other=0.0)
            r = tl.load(res_ptr + offs, mask=ok, other=0.0)
            y = acc * s[:, None] + r.to(tl.float32)
            tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=ok)
        else:
            tl.store(part_ptr + pid_k.to(tl.int64) * T * N + offs, acc, mask=ok)

    @triton.jit
    def finish_kernel(part_ptr, scale_ptr, res_ptr, out_ptr, TN, N, SPLIT: tl.constexpr, BLOCK: tl.constexpr,
                      WIDE: tl.constexpr):
        # WIDE (T * N of 2**31 or more): int64 offsets, as program_id is int32 and would wrap around; else
        # int32, whose offs % N is a few instructions where int64's is a long division on every element
        pid = tl.program_id(0)
        if WIDE:
            pid = pid.to(tl.int64)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        ok = offs < TN
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        parts = part_ptr + offs
        for _ in tl.static_range(SPLIT):
            acc += tl.load(parts, mask=ok, other=0.0)
            parts += TN
        s = tl.load(scale_ptr + offs % N, mask=ok, other=0.0)
        r = tl.load(res_ptr + offs, mask=ok, other=0.0).to(tl.float32)
        tl.store(out_ptr + offs, (acc * s + r).to(out_ptr.dtype.element_ty), mask=ok)

    return partial_kernel, finish_kernel, triton.cdiv
