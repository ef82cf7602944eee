"""ResNet-50 convolution + BatchNorm (inference) + ReLU, and the bare convolution as a yardstick.

Tensors are in NCHW logical shape: x [n, c, h, w], weight [k, c, r, s], BN vectors [k]; the
output is [n, k, p, q]. Implementations may return any memory format (NHWC strides are fine).
BatchNorm uses its running statistics (eval mode), eps 1e-5, so it folds into the convolution:

    scale = gamma / sqrt(var + eps);  weight' = weight * scale;  bias' = beta - mean * scale
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

BN_EPS = 1e-5


def conv_bn_relu_baseline(x: torch.Tensor, weight: torch.Tensor, bn_weight: torch.Tensor,
                          bn_bias: torch.Tensor, bn_mean: torch.Tensor, bn_var: torch.Tensor,
                          stride: int, pad: int) -> torch.Tensor:
    """Nothing fused: NCHW convolution, then a BatchNorm kernel, then a ReLU kernel."""
    y = F.conv2d(x, weight, None, stride, pad)
    y = F.batch_norm(y, bn_mean, bn_var, bn_weight, bn_bias, False, 0.0, BN_EPS)
    return F.relu(y)


# The reference is the same unfolded math, run by solbench on float32 copies of the inputs.
conv_bn_relu_reference = conv_bn_relu_baseline


def _fold(weight: torch.Tensor, bn_weight: torch.Tensor, bn_bias: torch.Tensor,
          bn_mean: torch.Tensor, bn_var: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """BN folded into the convolution's weight and bias, computed in fp32, cast back."""
    scale = bn_weight.float() / torch.sqrt(bn_var.float() + BN_EPS)
    w = weight.float() * scale.view(-1, 1, 1, 1)
    b = bn_bias.float() - bn_mean.float() * scale
    return w.to(weight.dtype), b.to(weight.dtype)


def conv_bn_relu_folded_nhwc_setup(x: torch.Tensor, weight: torch.Tensor, bn_weight: torch.Tensor,
                                   bn_bias: torch.Tensor, bn_mean: torch.Tensor,
                                   bn_var: torch.Tensor) -> dict[str, torch.Tensor]:
    """Fold BN into the weights; x and weight in channels_last (the previous layer's NHWC)."""
    w, b = _fold(weight, bn_weight, bn_bias, bn_mean, bn_var)
    return {"x": x.contiguous(memory_format=torch.channels_last),
            "weight": w.contiguous(memory_format=torch.channels_last), "bias": b}


def conv_bn_relu_fused(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                       stride: int, pad: int) -> torch.Tensor:
    """One cuDNN call: NHWC conv with bias and ReLU in its epilogue (cudnn_convolution_relu).

    On the CPU (no cuDNN) the same math runs as conv2d with bias, then an in-place ReLU.
    """
    if x.is_cuda and torch.backends.cudnn.is_available():
        return torch.cudnn_convolution_relu(x, weight, bias, (stride, stride), (pad, pad), (1, 1), 1)
    return F.relu(F.conv2d(x, weight, bias, stride, pad), inplace=True)


def conv_bn_relu_conv_only(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                           stride: int, pad: int) -> torch.Tensor:
    """The plain NHWC convolution with BN folded; torch adds the bias, then an in-place clamp."""
    return F.conv2d(x, weight, bias, stride, pad).clamp_min_(0)


def conv_bn_relu_im2col_setup(x: torch.Tensor, weight: torch.Tensor, bn_weight: torch.Tensor,
                              bn_bias: torch.Tensor, bn_mean: torch.Tensor,
                              bn_var: torch.Tensor) -> dict[str, torch.Tensor]:
    """Fold BN; the weight as a [k, c*r*s] matrix and the bias as a [k, 1] column."""
    w, b = _fold(weight, bn_weight, bn_bias, bn_mean, bn_var)
    return {"x": x, "w_mat": w.reshape(w.shape[0], -1).contiguous(), "bias": b.view(-1, 1)}


def conv_bn_relu_im2col(x: torch.Tensor, w_mat: torch.Tensor, bias: torch.Tensor,
                        r: int, s: int, stride: int, pad: int) -> torch.Tensor:
    """Explicit im2col (F.unfold) then one batched GEMM with the bias (beta = 1), then ReLU."""
    n, _, h, w = x.shape
    cols = F.unfold(x, (r, s), padding=pad, stride=stride)  # [n, c*r*s, p*q], materialized
    y = torch.baddbmm(bias, w_mat.expand(n, -1, -1), cols).relu_()  # [n, k, p*q]
    p = (h + 2 * pad - r) // stride + 1
    q = (w + 2 * pad - s) // stride + 1
    return y.view(n, -1, p, q)


# --------------------------------------------------------------------------------------------
# conv_alone: the convolution by itself, the yardstick for conv_bn_relu


def conv_reference(x: torch.Tensor, weight: torch.Tensor, stride: int, pad: int) -> torch.Tensor:
    """conv2d(x, weight), no bias."""
    return F.conv2d(x, weight, None, stride, pad)


def conv_nchw(x: torch.Tensor, weight: torch.Tensor, stride: int, pad: int) -> torch.Tensor:
    """The convolution on NCHW-contiguous tensors."""
    return F.conv2d(x, weight, None, stride, pad)


def conv_nhwc_setup(x: torch.Tensor, weight: torch.Tensor) -> dict[str, torch.Tensor]:
    """x and weight in channels_last, as the previous layer would produce them."""
    return {"x": x.contiguous(memory_format=torch.channels_last),
            "weight": weight.contiguous(memory_format=torch.channels_last)}


def conv_nhwc(x: torch.Tensor, weight: torch.Tensor, stride: int, pad: int) -> torch.Tensor:
    """The cuDNN NHWC convolution alone: one kernel (plus any cuDNN-internal helpers)."""
    return F.conv2d(x, weight, None, stride, pad)
