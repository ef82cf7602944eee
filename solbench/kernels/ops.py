"""Fused CUDA kernels as functions on torch tensors (bf16 or fp16, contiguous, one GPU).

    residual_layernorm(x, residual, weight, bias, eps) -> (out, summed)
        summed = x + residual (rounded to x.dtype), out = LayerNorm(summed) * weight + bias
    residual_layernorm_out(x, residual, weight, bias, eps) -> out   (the sum is not stored)
    layernorm(x, weight, bias, eps) -> LayerNorm(x) * weight + bias
    bias_gelu(x, bias, approximate="none" | "tanh") -> GELU(x + bias)
    maxpool2d_nhwc(x, kernel_size, stride, padding) -> F.max_pool2d(x, ...) of a channels_last x
    gemv_residual(x, weight, residual) -> x @ weight.T + residual     (decode o_proj, few tokens)
    gemv_fp8_residual(x, weight_fp8, scale, residual)
        -> x @ (weight_fp8 * scale[:, None]).T + residual   (FP8 e4m3 weight, per-row fp32 scale)

Outputs are new tensors (torch.empty); nothing is copied on the way in. Inputs must be
contiguous; a 16-byte-misaligned tensor, or a last dimension that is not a multiple of 8,
takes a correct scalar path instead of the 16-byte vector path. Kernels run on PyTorch's
current stream. Each call raises ValueError with the reason when an argument is unusable,
and solbench.errors.DeviceError when CuPy is missing.
"""

from __future__ import annotations

import functools
import importlib.util

import numpy as np
import torch

from solbench.kernels import gemv_plan, w8a16
from solbench.kernels.loader import MAX_GRID_YZ, device_cc, get_kernel, launch, ptr

__all__ = ["bias_gelu", "gemv_fp8_residual", "gemv_residual", "layernorm", "maxpool2d_nhwc",
           "residual_layernorm", "residual_layernorm_out"]

_KIND = {torch.bfloat16: 0, torch.float16: 1}
_VEC = 8  # 16-bit elements per 16-byte access
_GELU_MODES = {"none": 0, "tanh": 1}
_GELU_BLOCK, _GELU_UNROLL = 256, 4  # must match bias_gelu.cu
_GEMV_ROWS, _GEMV_MAX_TOKENS = 32, 64  # must match gemv_residual.cu
_INT32_MAX = 2**31 - 1


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _pow2_ceil(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def _check(op: str, **tensors: torch.Tensor) -> torch.dtype:
    """Common checks: torch tensors on one CUDA device, one 16-bit dtype, contiguous."""
    device = dtype = None
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.device.type != "cuda":
            raise ValueError(f"{op}: {name} is on {t.device}; the kernel needs CUDA tensors")
        if t.dtype not in _KIND:
            raise ValueError(f"{op}: {name} has dtype {t.dtype}; supported: bfloat16, float16")
        if device is not None and t.device != device:
            raise ValueError(f"{op}: {name} is on {t.device}, other inputs on {device}")
        if dtype is not None and t.dtype != dtype:
            raise ValueError(f"{op}: {name} has dtype {t.dtype}, other inputs {dtype}")
        if not t.is_contiguous():
            raise ValueError(f"{op}: {name} (shape {tuple(t.shape)}, strides {t.stride()}) "
                             "is not contiguous; pass .contiguous()")
        device, dtype = t.device, t.dtype
    assert dtype is not None
    return dtype


@functools.cache
def _has_triton() -> bool:
    """Triton importable here (it ships with CUDA builds of torch); without it the GEMV serves every size."""
    return importlib.util.find_spec("triton") is not None


def _fp8_tiles(tokens: int, dtype: torch.dtype, device: torch.device) -> bool:
    """Whether gemv_fp8_residual takes Triton's tensor-core tiles (w8a16) rather than the streaming GEMV:
    enough tokens, Triton, and a GPU of compute capability 8.9+ (Triton has no e4m3 type before it and
    refuses to compile the tiles; the GEMV needs 8.0)."""
    return tokens >= w8a16.MIN_TOKENS[dtype] and _has_triton() and device_cc(device) >= (8, 9)


def _aligned(*tensors: torch.Tensor) -> bool:
    return all(t.data_ptr() % 16 == 0 for t in tensors)


def _get(source: str, name: str, options: tuple[str, ...] = ()):
    return get_kernel(source, name, options=options, name_expressions=(name,))


# ----------------------------------------------------------------- residual + LayerNorm

def _layernorm_config(hidden: int, vec: int) -> tuple[int, int, int]:
    """(threads per row, packs per thread, rows per block) for one row held in registers."""
    nvec = hidden // vec
    target = 4 if vec == _VEC else 8
    tpr = max(32, min(1024, _cdiv(_cdiv(nvec, target), 32) * 32))
    vpt = _pow2_ceil(_cdiv(nvec, tpr))
    if vpt * vec > 32 or (vec == 1 and vpt > 8):  # kernels built for <= 512 threads
        tpr = min(tpr, 512)
        vpt = _pow2_ceil(_cdiv(nvec, tpr))
    if vpt > (8 if vec == _VEC else 16):
        limit = 32768 if vec == _VEC else 8192
        raise ValueError(f"residual_layernorm: hidden size {hidden} is too large for one row in "
                         f"registers (at most {limit} on this path)")
    return tpr, vpt, max(1, 128 // tpr)


def residual_layernorm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                       bias: torch.Tensor, eps: float = 1e-5) -> tuple[torch.Tensor, torch.Tensor]:
    """LayerNorm over the last dimension of ``x + residual``, in one pass over memory.

    Returns ``(out, summed)``: ``summed = x + residual`` rounded to ``x.dtype`` (the new
    residual stream) and ``out = layer_norm(summed) * weight + bias``, both shaped like
    ``x``. Statistics in fp32 (two-pass mean and variance over registers).
    """
    return _residual_layernorm(x, residual, weight, bias, eps)


def residual_layernorm_out(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                           bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """``residual_layernorm(...)[0]`` without storing the sum: reads two tensors, writes one."""
    return _residual_layernorm(x, residual, weight, bias, eps, mode=2)[0]


def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm over the last dimension of ``x`` (e.g. after a GEMM that added the residual)."""
    return _residual_layernorm(x, x, weight, bias, eps, mode=1)[0]


def _residual_layernorm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                        bias: torch.Tensor, eps: float = 1e-5,
                        options: tuple[str, ...] = (), mode: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """residual_layernorm with extra compiler options (benchmark variants) and the kernel's MODE:
    0 stores out and summed, 2 only out, 1 is a plain LayerNorm of x (summed is then ``out``)."""
    dtype = _check("residual_layernorm", x=x, residual=residual, weight=weight, bias=bias)
    if x.dim() == 0 or x.shape[-1] == 0:
        raise ValueError(f"residual_layernorm: x must have a non-empty last dimension, got "
                         f"shape {tuple(x.shape)}")
    hidden = x.shape[-1]
    if residual.shape != x.shape:
        raise ValueError(f"residual_layernorm: residual shape {tuple(residual.shape)} != x shape "
                         f"{tuple(x.shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t.shape != (hidden,):
            raise ValueError(f"residual_layernorm: {name} shape {tuple(t.shape)}, expected "
                             f"({hidden},)")
    out = torch.empty(x.shape, dtype=dtype, device=x.device)
    summed = torch.empty(x.shape, dtype=dtype, device=x.device) if mode == 0 else out
    rows = x.numel() // hidden
    if rows == 0:
        return out, summed
    if rows > _INT32_MAX:
        raise ValueError(f"residual_layernorm: {rows} rows exceed the int32 range")
    vec = _VEC if hidden % _VEC == 0 and _aligned(x, residual, weight, bias, out, summed) else 1
    tpr, vpt, rpb = _layernorm_config(hidden, vec)
    name = f"residual_layernorm_kernel<{_KIND[dtype]}, {vec}, {vpt}>" if mode == 0 else \
        f"residual_layernorm_kernel<{_KIND[dtype]}, {vec}, {vpt}, {mode}>"
    kernel = _get("residual_layernorm.cu", name, options)
    launch(kernel, (_cdiv(rows, rpb),), (tpr * rpb,),
           (ptr(x), ptr(residual), ptr(weight), ptr(bias), ptr(out), ptr(summed),
            np.int32(rows), np.int32(hidden), np.int32(tpr), np.float32(eps)),
           device=x.device)
    return out, summed


# ----------------------------------------------------------------- bias + GELU

def _bias_gelu(x: torch.Tensor, bias: torch.Tensor, mode: int,
               options: tuple[str, ...] = ()) -> torch.Tensor:
    """bias_gelu with the kernel's MODE (0 erf, 1 tanh, 2 libdevice erff) and compiler options."""
    dtype = _check("bias_gelu", x=x, bias=bias)
    if x.dim() == 0 or x.shape[-1] == 0:
        raise ValueError(f"bias_gelu: x must have a non-empty last dimension, got shape "
                         f"{tuple(x.shape)}")
    hidden = x.shape[-1]
    if bias.shape != (hidden,):
        raise ValueError(f"bias_gelu: bias shape {tuple(bias.shape)}, expected ({hidden},)")
    out = torch.empty(x.shape, dtype=dtype, device=x.device)
    if x.numel() == 0:
        return out
    vec = _VEC if hidden % _VEC == 0 and _aligned(x, bias, out) else 1
    npacks = x.numel() // vec
    if npacks > _INT32_MAX:
        raise ValueError(f"bias_gelu: {x.numel()} elements exceed this kernel's 32-bit indexing")
    kernel = _get("bias_gelu.cu", f"bias_gelu_kernel<{_KIND[dtype]}, {vec}, {mode}>", options)
    per_row = hidden // vec
    launch(kernel, (_cdiv(npacks, _GELU_BLOCK * _GELU_UNROLL),), (_GELU_BLOCK,),
           (ptr(x), ptr(bias), ptr(out), np.uint32(npacks), np.uint32(per_row),
            np.uint32(_GELU_BLOCK % per_row)),
           device=x.device)
    return out


def bias_gelu(x: torch.Tensor, bias: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """``torch.nn.functional.gelu(x + bias, approximate=...)`` in one pass, shaped like ``x``.

    ``x + bias`` is rounded to ``x.dtype`` first, as in eager torch; GELU is computed in
    fp32 (erf through a 1.2e-7-accurate erfc fit, see bias_gelu.cu) and rounded once.
    """
    if approximate not in _GELU_MODES:
        raise ValueError(f"bias_gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _bias_gelu(x, bias, _GELU_MODES[approximate])


# ----------------------------------------------------------------- max pooling (NHWC)

_POOL_BLOCK = 256  # must match maxpool_nhwc.cu's launch bounds


def maxpool2d_nhwc(x: torch.Tensor, kernel_size: int, stride: int, padding: int = 0) -> torch.Tensor:
    """``F.max_pool2d(x, kernel_size, stride, padding)`` of a channels_last ``[n, c, h, w]`` tensor.

    Square windows; the output is channels_last too. One pass: each output pixel's window is
    read (neighbouring windows overlap in cache) and the output written once.
    """
    if not isinstance(x, torch.Tensor) or x.device.type != "cuda" or x.dtype not in _KIND:
        raise ValueError("maxpool2d_nhwc: x must be a bfloat16 or float16 CUDA tensor")
    if x.dim() != 4 or not x.is_contiguous(memory_format=torch.channels_last):
        raise ValueError(f"maxpool2d_nhwc: x must be 4-D and channels_last, got shape {tuple(x.shape)}, "
                         f"strides {x.stride()}")
    if kernel_size < 1 or stride < 1 or not 0 <= padding <= kernel_size // 2:
        raise ValueError(f"maxpool2d_nhwc: kernel_size {kernel_size}, stride {stride}, padding {padding}: "
                         "need kernel_size, stride >= 1 and 0 <= padding <= kernel_size // 2")
    n, c, h, w = x.shape
    p = (h + 2 * padding - kernel_size) // stride + 1
    q = (w + 2 * padding - kernel_size) // stride + 1
    if p < 1 or q < 1:
        raise ValueError(f"maxpool2d_nhwc: a {kernel_size}x{kernel_size} window does not fit {h}x{w}")
    out = torch.empty((n, c, p, q), dtype=x.dtype, device=x.device, memory_format=torch.channels_last)
    if out.numel() == 0:
        return out
    vec = _VEC if c % _VEC == 0 and _aligned(x, out) else 1
    packs = out.numel() // vec
    kernel = _get("maxpool_nhwc.cu", f"maxpool_nhwc_kernel<{_KIND[x.dtype]}, {vec}>")
    launch(kernel, (_cdiv(packs, _POOL_BLOCK),), (_POOL_BLOCK,),
           (ptr(x), ptr(out), np.int64(packs), np.int32(h), np.int32(w), np.int32(c), np.int32(p),
            np.int32(q), np.int32(kernel_size), np.int32(kernel_size), np.int32(stride), np.int32(padding)),
           device=x.device)
    return out


# ----------------------------------------------------------------- GEMV + residual

def gemv_residual(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """``x @ weight.T + residual`` for a few tokens, streaming ``weight`` once.

    ``x`` is ``[T, K]``, ``weight`` ``[N, K]`` (torch.nn.Linear layout), ``residual``
    ``[T, N]``; fp32 accumulation on the tensor cores, one rounding at the end. Built for
    T <= 64 (decode); larger T runs in chunks of 64 tokens, re-reading the weight for each.
    ``K % 8 != 0`` or 16-byte-misaligned ``x``/``weight`` take a slow scalar kernel.
    """
    dtype, tokens, n, k = _gemv_check("gemv_residual", x, weight, residual)
    out = torch.empty((tokens, n), dtype=dtype, device=x.device)
    if tokens == 0 or n == 0:
        return out
    if k == 0:  # an empty sum: x @ weight.T is zero (as torch.addmm), no tile of K to stream
        return out.copy_(residual)
    if k % _VEC == 0 and _aligned(x, weight):
        _stream(x, weight, None, residual, out)
    else:
        _gemv_scalar(x, weight, residual, out)
    return out


def gemv_fp8_residual(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor,
                      residual: torch.Tensor) -> torch.Tensor:
    """``x @ (weight * scale[:, None]).T + residual`` with an FP8 (e4m3) weight: half the bytes.

    ``weight`` is ``[N, K]`` ``torch.float8_e4m3fn`` with one float32 ``scale`` per row
    (weight-only quantization); ``x`` and ``residual`` bf16 or fp16. The weight is widened to
    x's type exactly inside the kernel, products accumulate in fp32, the scale and residual
    are applied once per output. Few tokens stream the weight through gemv_stream.cu; from
    ``w8a16.MIN_TOKENS`` on, Triton's tensor-core tiles (:mod:`solbench.kernels.w8a16`) read x
    once per 64 rows instead of once per 32 (on compute capability 8.9+, where Triton has the e4m3
    type; before it the GEMV serves every size). ``K % 16 != 0`` or misaligned tensors take a slow
    torch path.
    """
    if not isinstance(weight, torch.Tensor) or weight.dtype != torch.float8_e4m3fn:
        raise ValueError("gemv_fp8_residual: weight must be a torch.float8_e4m3fn tensor")
    dtype = _check("gemv_fp8_residual", x=x, residual=residual)
    if not (isinstance(scale, torch.Tensor) and scale.dtype == torch.float32 and scale.is_contiguous()):
        raise ValueError("gemv_fp8_residual: scale must be a contiguous float32 tensor")
    if weight.device != x.device or scale.device != x.device or not weight.is_contiguous():
        raise ValueError("gemv_fp8_residual: weight and scale must be contiguous, on x's device")
    _, tokens, n, k = _gemv_check("gemv_fp8_residual", x, weight, residual, weight_checked=True)
    if scale.shape != (n,):
        raise ValueError(f"gemv_fp8_residual: scale shape {tuple(scale.shape)}, expected ({n},)")
    out = torch.empty((tokens, n), dtype=dtype, device=x.device)
    if tokens == 0 or n == 0:
        return out
    if k == 0:  # an empty sum: x @ weight.T is zero (as torch.addmm), no tile of K to stream
        return out.copy_(residual)
    if k % 16 == 0 and _aligned(x, weight):
        if _fp8_tiles(tokens, dtype, x.device):
            w8a16.linear_residual(x, weight, scale, residual, out)  # many tokens: tensor-core tiles
        else:
            _stream(x, weight, scale, residual, out)
    else:  # correct, not fast: widen the weight in fp32
        wide = weight.float() * scale[:, None]
        out.copy_(torch.addmm(residual.float(), x.float(), wide.t()))
    return out


def _gemv_check(op: str, x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor,
                weight_checked: bool = False) -> tuple[torch.dtype, int, int, int]:
    """Shapes of a GEMV + residual call: (dtype, T, N, K); dtypes and devices checked."""
    dtype = _check(op, x=x, residual=residual) if weight_checked else \
        _check(op, x=x, weight=weight, residual=residual)
    if x.dim() != 2 or weight.dim() != 2 or residual.dim() != 2:
        raise ValueError(f"{op}: expected 2-D x [T, K], weight [N, K], residual [T, N]; "
                         f"got {tuple(x.shape)}, {tuple(weight.shape)}, {tuple(residual.shape)}")
    tokens, k = x.shape
    n = weight.shape[0]
    if weight.shape[1] != k:
        raise ValueError(f"{op}: weight shape {tuple(weight.shape)} does not match "
                         f"x shape {tuple(x.shape)} (need weight [N, {k}])")
    if residual.shape != (tokens, n):
        raise ValueError(f"{op}: residual shape {tuple(residual.shape)}, expected ({tokens}, {n})")
    if max(n, k) > _INT32_MAX // 2:
        raise ValueError(f"{op}: N={n}, K={k} exceed the kernel's int32 sizes")
    return dtype, tokens, n, k


def _stream(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor | None,
            residual: torch.Tensor, out: torch.Tensor, plan: gemv_plan.Plan | None = None,
            options: tuple[str, ...] = ()) -> None:
    """gemv_stream.cu over chunks of at most 64 tokens; ``plan`` overrides the tile choice."""
    tokens, k = x.shape
    n = weight.shape[0]
    w8 = scale is not None
    dev = x.device
    chunk = gemv_plan.MAX_TOKENS if plan else gemv_plan.chunk_tokens(tokens, n, k, w8, dev)
    for t0 in range(0, tokens, chunk):
        t1 = min(tokens, t0 + chunk)
        p = plan or gemv_plan.choose(t1 - t0, n, k, w8, dev)
        nt = _cdiv(t1 - t0, 8)
        kind = _KIND[x.dtype]
        if p.cluster > 1:
            name = f"gemv_stream_cluster_kernel<{kind}, {int(w8)}, {p.rows}, {nt}, {p.cluster}>"
        else:
            name = f"gemv_stream_kernel<{kind}, {int(w8)}, {p.rows}, {nt}>"
        kernel = get_kernel("gemv_stream.cu", name, options=options, name_expressions=(name,),
                            min_cc=(9, 0) if p.cluster > 1 else None)
        smem = gemv_plan.shared_bytes(p, t1 - t0, w8)
        args = (ptr(x[t0:t1]), ptr(weight), np.uint64(0 if scale is None else scale.data_ptr()), ptr(residual[t0:t1]),
                ptr(out[t0:t1]), np.int32(t1 - t0), np.int32(n), np.int32(k), np.int32(p.stages))
        launch(kernel, (_cdiv(n, p.rows) * p.cluster,), (256,), args, smem, device=dev)


def _gemv_scalar(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor, out: torch.Tensor) -> None:
    """The scalar fallback (any K, any alignment): one warp per (token, output). Tokens are the grid's
    y axis, which CUDA caps at 65535 blocks: more tokens run in launches of at most that many."""
    tokens, k = x.shape
    n = weight.shape[0]
    kernel = _get("gemv_residual.cu", f"gemv_residual_scalar_kernel<{_KIND[x.dtype]}>")
    for t0 in range(0, tokens, MAX_GRID_YZ):
        t1 = min(tokens, t0 + MAX_GRID_YZ)
        launch(kernel, (_cdiv(n, 8), t1 - t0), (256,),
               (ptr(x[t0:t1]), ptr(weight), ptr(residual[t0:t1]), ptr(out[t0:t1]), np.int32(t1 - t0),
                np.int32(n), np.int32(k)),
               device=x.device)


def _gemv_residual_registers(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor,
                             options: tuple[str, ...] = ()) -> torch.Tensor:
    """The earlier register-pipelined GEMV kernel (gemv_residual.cu), kept for benchmarks."""
    dtype, tokens, n, k = _gemv_check("gemv_residual", x, weight, residual)
    out = torch.empty((tokens, n), dtype=dtype, device=x.device)
    for t0 in range(0, tokens, _GEMV_MAX_TOKENS):
        t1 = min(tokens, t0 + _GEMV_MAX_TOKENS)
        name = f"gemv_residual_kernel<{_KIND[dtype]}, {_cdiv(t1 - t0, 8)}>"
        kernel = _get("gemv_residual.cu", name, options)
        launch(kernel, (_cdiv(n, _GEMV_ROWS),), (256,),
               (ptr(x[t0:t1]), ptr(weight), ptr(residual[t0:t1]), ptr(out[t0:t1]),
                np.int32(t1 - t0), np.int32(n), np.int32(k)), device=x.device)
    return out
