"""BERT-base layer with every bias, the GELU and both residuals in cuBLASLt GEMM epilogues.

Through nvmath-python (``pip install 'solbench[nvmath]'``), each GEMM is planned and autotuned
once in set-up (untimed), then executed per call on torch's current stream:

    QKV      D = x W_qkv^T + b_qkv                  epilogue BIAS
    O-proj   D = ctx W_o^T + b_o + x                epilogue BIAS, residual x read as C (beta = 1)
    FFN1     D = GELU(h1 W_1^T + b_1)                epilogue GELU_BIAS (tanh GELU)
    FFN2     D = f W_2^T + b_2 + h1                  epilogue BIAS, residual h1 as C

so the two LayerNorms are plain LayerNorm kernels (:func:`solbench.kernels.ops.layernorm`), each
reading one tensor and writing one. cuBLASLt adds a bias along the rows of a column-major D, so
each GEMM is posed transposed: D^T [out, tokens] = W [out, in] . x^T, with W stored as its
transpose [in, out] (made once in set-up) and D^T column-major, which is D [tokens, out]
row-major: no copies. Attention is the same SDPA call as ``bert.bert_layer_fused``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from solbench.errors import DeviceError
from solbench.impls.cublaslt import plan_tuned
from solbench.kernels.requirements import NO_NVMATH

LN_EPS = 1e-5


def _nvmath() -> Any:
    try:
        from nvmath.linalg import advanced
    except ImportError as exc:
        raise DeviceError(f"{NO_NVMATH}: {exc}") from None
    return advanced


# SDPA backends a variant may pin (``sdpa`` parameter), by name
_BACKENDS = {"flash": lambda b: b.FLASH_ATTENTION, "cudnn": lambda b: b.CUDNN_ATTENTION,
             "efficient": lambda b: b.EFFICIENT_ATTENTION}


class EpilogueGemm:
    """``x @ w.T + bias`` (+ ``c``) (GELU) as one planned, autotuned cuBLASLt call."""

    def __init__(self, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor,
                 c: torch.Tensor | None = None, gelu: bool = False, autotune: bool = True) -> None:
        adv = _nvmath()
        self.device = x.device
        stream = torch.cuda.current_stream(x.device)
        self._a = w.t().contiguous().t()  # [out, in], column-major: kept alive for the plan
        self._bias = bias.contiguous()
        self.has_c = c is not None
        extra: dict[str, Any] = {"c": c.t(), "beta": 1.0} if c is not None else {}
        self._mm = adv.Matmul(self._a, x.t(), stream=stream, **extra)
        epilog = adv.MatmulEpilog.GELU_BIAS if gelu else adv.MatmulEpilog.BIAS
        if autotune:
            plan_tuned(self._mm, stream, epilog=epilog, epilog_inputs={"bias": self._bias})
        else:
            self._mm.plan(epilog=epilog, epilog_inputs={"bias": self._bias}, stream=stream)

    def __call__(self, x: torch.Tensor, c: torch.Tensor | None = None) -> torch.Tensor:
        """Run on new operands of the planned shapes and layouts; returns D [tokens, out]."""
        self._mm.reset_operands_unchecked(b=x.t(), c=None if c is None else c.t())
        d = self._mm.execute(stream=torch.cuda.current_stream(self.device))
        return d.t()  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"EpilogueGemm(device={self.device}, c={self.has_c})"


class BertLayerLt:
    """The planned layer for one input set (the operand shapes and the weights are fixed)."""

    def __init__(self, x: torch.Tensor, w_qkv: torch.Tensor, b_qkv: torch.Tensor, w_o: torch.Tensor,
                 b_o: torch.Tensor, ln1_w: torch.Tensor, ln1_b: torch.Tensor, w_1: torch.Tensor,
                 b_1: torch.Tensor, w_2: torch.Tensor, b_2: torch.Tensor, ln2_w: torch.Tensor,
                 ln2_b: torch.Tensor, heads: int, sdpa: str | None = None) -> None:
        if not x.is_cuda:
            raise DeviceError("needs CUDA tensors (cuBLASLt)")
        b, s, hidden = x.shape
        tokens, ffn = b * s, w_1.shape[0]
        self.shape, self.heads = (b, s, hidden), heads
        x2 = x.reshape(tokens, hidden)
        gen = torch.Generator(device=x.device).manual_seed(0)

        def sample(cols: int) -> torch.Tensor:  # stand-in operands to plan and autotune with
            return torch.randn(tokens, cols, generator=gen, device=x.device).to(x.dtype)

        self.qkv = EpilogueGemm(x2, w_qkv, b_qkv)
        self.o = EpilogueGemm(sample(hidden), w_o, b_o, c=x2)
        self.ffn1 = EpilogueGemm(sample(hidden), w_1, b_1, gelu=True)
        self.ffn2 = EpilogueGemm(sample(ffn), w_2, b_2, c=sample(hidden))
        self.ln = (ln1_w, ln1_b, ln2_w, ln2_b)
        self.sdpa = sdpa

    def _attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if self.sdpa is None:  # torch's own choice of backend
            return F.scaled_dot_product_attention(q, k, v)
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(_BACKENDS[self.sdpa](SDPBackend)):
            return F.scaled_dot_product_attention(q, k, v)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """The layer on ``x`` (the tensor planned with)."""
        from solbench.kernels.ops import layernorm

        b, s, hidden = self.shape
        x2 = x.reshape(b * s, hidden)
        qkv = self.qkv(x2)
        q, k, v = qkv.view(b, s, 3, self.heads, hidden // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        ctx = self._attention(q, k, v).transpose(1, 2).reshape(b * s, hidden)
        h1 = layernorm(self.o(ctx, x2), self.ln[0], self.ln[1], LN_EPS)
        f = self.ffn1(h1)
        return layernorm(self.ffn2(f, h1), self.ln[2], self.ln[3], LN_EPS).view(b, s, hidden)

    def __repr__(self) -> str:
        return f"BertLayerLt(shape={self.shape})"


def bert_layer_lt_setup(x: torch.Tensor, w_qkv: torch.Tensor, b_qkv: torch.Tensor, w_o: torch.Tensor,
                        b_o: torch.Tensor, ln1_w: torch.Tensor, ln1_b: torch.Tensor, w_1: torch.Tensor,
                        b_1: torch.Tensor, w_2: torch.Tensor, b_2: torch.Tensor, ln2_w: torch.Tensor,
                        ln2_b: torch.Tensor, heads: int, sdpa: str | None = None) -> dict[str, Any]:
    """Plan and autotune the four GEMMs for this input set (untimed); ``sdpa`` pins a backend."""
    if sdpa is not None and sdpa not in _BACKENDS:
        raise ValueError(f"sdpa must be one of {', '.join(_BACKENDS)}, got {sdpa!r}")
    layer = BertLayerLt(x, w_qkv, b_qkv, w_o, b_o, ln1_w, ln1_b, w_1, b_1, w_2, b_2, ln2_w, ln2_b, heads,
                        sdpa)
    return {"x": x, "layer": layer}


def bert_layer_lt(x: torch.Tensor, layer: BertLayerLt, sdpa: str | None = None) -> torch.Tensor:
    """Four cuBLASLt GEMMs with bias / GELU / residual epilogues, SDPA, two LayerNorm kernels."""
    del sdpa  # chosen at set-up
    return layer(x)


def bias_gelu_matmul_lt_setup(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> dict[str, Any]:
    """Plan and autotune GELU(x @ w.T + bias) as one cuBLASLt call (untimed)."""
    return {"x": x, "gemm": EpilogueGemm(x, w, bias, gelu=True)}


def bias_gelu_matmul_lt(x: torch.Tensor, gemm: EpilogueGemm) -> torch.Tensor:
    """One autotuned cuBLASLt GEMM with the GELU_BIAS epilogue (tanh GELU)."""
    return gemm(x)
