"""BERT-base encoder layer (post-LN), and two of its fusable pieces on their own.

Weights follow ``torch.nn.Linear`` / ``torch.nn.MultiheadAttention``: ``w`` is
[out_features, in_features] and ``y = x @ w.T + b``; ``w_qkv`` stacks the query, key and value
projections as ``in_proj_weight`` does ([3 * hidden, hidden]). LayerNorm eps is 1e-5 (torch's
default and ``TransformerEncoderLayer``'s; the original BERT used 1e-12).

GELU is the exact (erf) form everywhere, except where a cuBLASLt GELU epilogue is used
(``torch._addmm_activation(..., use_gelu=True)`` on CUDA): that epilogue computes the tanh
approximation, which differs from the erf form by at most 4.7e-4 pointwise (at |x| ~ 2.7), far
inside the bf16/fp16 tolerances. On the CPU ``_addmm_activation`` applies the erf form.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

LN_EPS = 1e-5


# --------------------------------------------------------------------------------------------
# bert_layer


def _split_heads(t: torch.Tensor, heads: int) -> torch.Tensor:
    """[batch, seq, hidden] -> [batch, heads, seq, head_dim] (a view)."""
    b, s, hidden = t.shape
    return t.view(b, s, heads, hidden // heads).transpose(1, 2)


def _eager_layer(x: torch.Tensor, w_qkv: torch.Tensor, b_qkv: torch.Tensor, w_o: torch.Tensor,
                 b_o: torch.Tensor, ln1_w: torch.Tensor, ln1_b: torch.Tensor, w_1: torch.Tensor,
                 b_1: torch.Tensor, w_2: torch.Tensor, b_2: torch.Tensor, ln2_w: torch.Tensor,
                 ln2_b: torch.Tensor, heads: int) -> torch.Tensor:
    """The layer as separate eager ops, attention as explicit matmul / softmax / matmul."""
    b, s, hidden = x.shape
    wq, wk, wv = w_qkv.chunk(3, dim=0)
    bq, bk, bv = b_qkv.chunk(3, dim=0)
    q = _split_heads(torch.matmul(x, wq.t()) + bq, heads)
    k = _split_heads(torch.matmul(x, wk.t()) + bk, heads)
    v = _split_heads(torch.matmul(x, wv.t()) + bv, heads)
    scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(hidden // heads))
    probs = torch.softmax(scores, dim=-1)
    context = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, hidden)
    attn = torch.matmul(context, w_o.t()) + b_o
    h1 = F.layer_norm(x + attn, (hidden,), ln1_w, ln1_b, LN_EPS)
    ffn = F.gelu(torch.matmul(h1, w_1.t()) + b_1)
    ffn = torch.matmul(ffn, w_2.t()) + b_2
    return F.layer_norm(h1 + ffn, (hidden,), ln2_w, ln2_b, LN_EPS)


def bert_layer_baseline(x: torch.Tensor, w_qkv: torch.Tensor, b_qkv: torch.Tensor,
                        w_o: torch.Tensor, b_o: torch.Tensor, ln1_w: torch.Tensor,
                        ln1_b: torch.Tensor, w_1: torch.Tensor, b_1: torch.Tensor,
                        w_2: torch.Tensor, b_2: torch.Tensor, ln2_w: torch.Tensor,
                        ln2_b: torch.Tensor, heads: int) -> torch.Tensor:
    """Nothing fused: three Q/K/V GEMMs, separate bias adds, materialized scores, GELU, add, LN."""
    return _eager_layer(x, w_qkv, b_qkv, w_o, b_o, ln1_w, ln1_b, w_1, b_1, w_2, b_2, ln2_w, ln2_b,
                        heads)


# The reference is the same eager math, run by solbench on float32 copies of the inputs; attention
# stays explicit matmuls so FlopCounterMode counts it.
bert_layer_reference = bert_layer_baseline


def _residual_layernorm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                        bias: torch.Tensor) -> torch.Tensor:
    """LayerNorm(x + residual): the fused kernel on CUDA, the same math in torch ops elsewhere."""
    if x.is_cuda and x.dtype in (torch.bfloat16, torch.float16):
        from solbench.kernels.ops import residual_layernorm_out

        return residual_layernorm_out(x, residual, weight, bias, LN_EPS)  # the sum is not stored
    # The kernel rounds the sum to the dtype, then normalizes it in fp32: so does this.
    return F.layer_norm(x + residual, (x.shape[-1],), weight, bias, LN_EPS)


def bert_layer_fused(x: torch.Tensor, w_qkv: torch.Tensor, b_qkv: torch.Tensor,
                     w_o: torch.Tensor, b_o: torch.Tensor, ln1_w: torch.Tensor,
                     ln1_b: torch.Tensor, w_1: torch.Tensor, b_1: torch.Tensor,
                     w_2: torch.Tensor, b_2: torch.Tensor, ln2_w: torch.Tensor,
                     ln2_b: torch.Tensor, heads: int) -> torch.Tensor:
    """One QKV GEMM with bias, flash attention, biases and GELU in GEMM epilogues, add+LN fused."""
    b, s, hidden = x.shape
    x2 = x.reshape(b * s, hidden)
    qkv = torch.addmm(b_qkv, x2, w_qkv.t())  # [tokens, 3 * hidden], bias in the epilogue
    q, k, v = qkv.view(b, s, 3, heads, hidden // heads).permute(2, 0, 3, 1, 4).unbind(0)
    context = F.scaled_dot_product_attention(q, k, v)  # [b, heads, s, d], scores never stored
    context = context.transpose(1, 2).reshape(b * s, hidden)
    attn = torch.addmm(b_o, context, w_o.t())
    h1 = _residual_layernorm(attn, x2, ln1_w, ln1_b)
    ffn = torch._addmm_activation(b_1, h1, w_1.t(), use_gelu=True)  # bias + GELU epilogue
    ffn = torch.addmm(b_2, ffn, w_2.t())
    return _residual_layernorm(ffn, h1, ln2_w, ln2_b).view(b, s, hidden)


def bert_layer_torch_encoder_setup(x: torch.Tensor, w_qkv: torch.Tensor, b_qkv: torch.Tensor,
                                   w_o: torch.Tensor, b_o: torch.Tensor, ln1_w: torch.Tensor,
                                   ln1_b: torch.Tensor, w_1: torch.Tensor, b_1: torch.Tensor,
                                   w_2: torch.Tensor, b_2: torch.Tensor, ln2_w: torch.Tensor,
                                   ln2_b: torch.Tensor, heads: int) -> dict[str, Any]:
    """Build an eval-mode ``nn.TransformerEncoderLayer`` holding the input weights."""
    hidden, ffn = x.shape[-1], w_1.shape[0]
    layer = torch.nn.TransformerEncoderLayer(
        hidden, heads, ffn, dropout=0.0, activation="gelu", layer_norm_eps=LN_EPS,
        batch_first=True, norm_first=False, device=x.device, dtype=x.dtype)
    with torch.no_grad():
        for param, value in [
            (layer.self_attn.in_proj_weight, w_qkv), (layer.self_attn.in_proj_bias, b_qkv),
            (layer.self_attn.out_proj.weight, w_o), (layer.self_attn.out_proj.bias, b_o),
            (layer.linear1.weight, w_1), (layer.linear1.bias, b_1),
            (layer.linear2.weight, w_2), (layer.linear2.bias, b_2),
            (layer.norm1.weight, ln1_w), (layer.norm1.bias, ln1_b),
            (layer.norm2.weight, ln2_w), (layer.norm2.bias, ln2_b),
        ]:
            param.copy_(value)
    layer.eval().requires_grad_(False)
    return {"x": x, "layer": layer}


def bert_layer_torch_encoder(x: torch.Tensor, layer: torch.nn.TransformerEncoderLayer) -> torch.Tensor:
    """PyTorch's native encoder-layer fast path (``torch._transformer_encoder_layer_fwd``)."""
    with torch.inference_mode():
        return layer(x)  # type: ignore[no-any-return]


_COMPILED: dict[str, Callable[..., torch.Tensor]] = {}


def bert_layer_compiled(x: torch.Tensor, w_qkv: torch.Tensor, b_qkv: torch.Tensor,
                        w_o: torch.Tensor, b_o: torch.Tensor, ln1_w: torch.Tensor,
                        ln1_b: torch.Tensor, w_1: torch.Tensor, b_1: torch.Tensor,
                        w_2: torch.Tensor, b_2: torch.Tensor, ln2_w: torch.Tensor,
                        ln2_b: torch.Tensor, heads: int) -> torch.Tensor:
    """``torch.compile`` of the baseline: Inductor fuses the pointwise ops into its kernels."""
    if "layer" not in _COMPILED:  # compiled once per process; new shapes re-specialize it
        _COMPILED["layer"] = torch.compile(_eager_layer, dynamic=False)
    return _COMPILED["layer"](x, w_qkv, b_qkv, w_o, b_o, ln1_w, ln1_b, w_1, b_1, w_2, b_2,
                              ln2_w, ln2_b, heads)


# --------------------------------------------------------------------------------------------
# residual_layernorm


def residual_layernorm_reference(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                                 bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """summed = x + residual; out = LayerNorm(summed) * weight + bias."""
    summed = x + residual
    return F.layer_norm(summed, (x.shape[-1],), weight, bias, LN_EPS), summed


def residual_layernorm_baseline(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                                bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Two kernels: the add writes the sum, LayerNorm reads it back."""
    summed = x + residual
    return F.layer_norm(summed, (x.shape[-1],), weight, bias, LN_EPS), summed


def residual_layernorm_fused(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                             bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One CuPy kernel: each row read once, normalized in registers, both outputs written once."""
    from solbench.kernels.ops import residual_layernorm

    out, summed = residual_layernorm(x, residual, weight, bias, LN_EPS)
    return out, summed


# --------------------------------------------------------------------------------------------
# bias_gelu_matmul


def bias_gelu_matmul_reference(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """out = GELU(x @ w.T + bias), exact (erf) GELU."""
    return F.gelu(x @ w.t() + bias)


def bias_gelu_matmul_baseline(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Three kernels: GEMM, bias add, GELU; the [tokens, ffn] activation makes two round trips."""
    return F.gelu(torch.mm(x, w.t()) + bias)


def bias_gelu_matmul_fused(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """One GEMM with bias and GELU in the epilogue (cuBLASLt GELU_BIAS; tanh form on CUDA)."""
    return torch._addmm_activation(bias, x, w.t(), use_gelu=True)


def bias_gelu_matmul_kernel(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """GEMM, then one CuPy kernel for bias + GELU (erf): one round trip of the activation."""
    from solbench.kernels.ops import bias_gelu

    return bias_gelu(torch.mm(x, w.t()), bias)
