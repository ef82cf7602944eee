"""The whole ResNet-50 (v1.5) inference forward, written out without torchvision.

The network's weights come from one flat input tensor ``params`` (standard normal values), so a
workload declares two inputs (images ``x`` [n, 3, img, img] and ``params`` [PARAM_COUNT]) and
the reference, run in fp32, sees exactly the numbers an implementation sees. :func:`unpack` maps
the flat buffer to layers in :func:`conv_layout` order: each convolution's weight [k, c, r, r]
(He-scaled), then its BatchNorm's weight, bias, running mean and running variance [k] each; the
classifier's weight [1000, 2048] and bias [1000] last. Bottleneck blocks put the stride on the
3x3 convolution (v1.5, as torchvision); the first block of each stage has a 1x1 projection
shortcut. Output: logits [n, 1000].

Implementations (the fused ones in :mod:`solbench.impls.resnet50_fused`):
    baseline       eager NCHW: conv, batch_norm, relu as separate kernels
    channels_last  the same eager ops on channels_last tensors
    compiled       torch.compile (Inductor, default mode) of the baseline's forward
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

BN_EPS = 1e-5
CLASSES = 1000
FEATURES = 2048
# (width, blocks, stride of the first block) per stage; output channels are 4 x width
STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))
EXPANSION = 4


@dataclass(frozen=True)
class ConvSpec:
    """One convolution (square filter) followed by BatchNorm."""

    name: str
    c: int
    k: int
    r: int
    stride: int
    pad: int


def conv_layout() -> tuple[ConvSpec, ...]:
    """Every convolution in forward order: the stem, then per block a, b, c (and the shortcut)."""
    convs = [ConvSpec("stem", 3, 64, 7, 2, 3)]
    c = 64
    for i, (width, blocks, stride) in enumerate(STAGES):
        for j in range(blocks):
            s = stride if j == 0 else 1
            convs += [ConvSpec(f"s{i}b{j}.a", c, width, 1, 1, 0),
                      ConvSpec(f"s{i}b{j}.b", width, width, 3, s, 1),
                      ConvSpec(f"s{i}b{j}.c", width, EXPANSION * width, 1, 1, 0)]
            if j == 0:
                convs.append(ConvSpec(f"s{i}b{j}.down", c, EXPANSION * width, 1, s, 0))
            c = EXPANSION * width
    return tuple(convs)


def param_count() -> int:
    """Elements of the flat ``params`` input: conv weights, 4 BN vectors each, the classifier."""
    convs = sum(v.k * v.c * v.r * v.r + 4 * v.k for v in conv_layout())
    return convs + CLASSES * FEATURES + CLASSES


PARAM_COUNT = param_count()


@dataclass(frozen=True)
class ConvBN:
    """A convolution's weight and its BatchNorm's (inference) parameters."""

    spec: ConvSpec
    weight: torch.Tensor
    bn_weight: torch.Tensor
    bn_bias: torch.Tensor
    bn_mean: torch.Tensor
    bn_var: torch.Tensor


@dataclass(frozen=True)
class Net:
    """The unpacked network: convolutions by name, the classifier's weight [1000, 2048] and bias."""

    convs: dict[str, ConvBN]
    fc_weight: torch.Tensor
    fc_bias: torch.Tensor


def unpack(params: torch.Tensor, dtype: torch.dtype | None = None) -> Net:
    """The network a flat standard-normal ``params`` buffer describes; math in fp32, cast to dtype.

    Weights are scaled by sqrt(2 / fan_in) (He); BN weight 1 + 0.1 z (0.3 (1 + 0.1 z) on each
    block's last BN, so the residual stream grows slowly), BN bias and running mean 0.1 z,
    running variance 1 + 0.25 |z|; classifier weight z / sqrt(2048), bias 0.1 z.
    """
    if params.numel() != PARAM_COUNT:
        raise ValueError(f"params has {params.numel()} elements; ResNet-50 needs {PARAM_COUNT}")
    dtype = dtype or params.dtype
    flat = params.reshape(-1).float()
    offset = 0

    def take(count: int) -> torch.Tensor:
        nonlocal offset
        out = flat[offset:offset + count]
        offset += count
        return out

    convs = {}
    for v in conv_layout():
        w = take(v.k * v.c * v.r * v.r).view(v.k, v.c, v.r, v.r) * math.sqrt(2.0 / (v.c * v.r * v.r))
        gain = 0.3 if v.name.endswith(".c") else 1.0
        g, b, m, var = (take(v.k) for _ in range(4))
        convs[v.name] = ConvBN(v, w.to(dtype), (gain * (1 + 0.1 * g)).to(dtype), (0.1 * b).to(dtype),
                               (0.1 * m).to(dtype), (1 + 0.25 * var.abs()).to(dtype))
    fc_w = take(CLASSES * FEATURES).view(CLASSES, FEATURES) / math.sqrt(FEATURES)
    fc_b = 0.1 * take(CLASSES)
    return Net(convs, fc_w.to(dtype), fc_b.to(dtype))


def blocks() -> list[tuple[str, bool]]:
    """Bottleneck blocks in order: (name prefix, has a projection shortcut)."""
    return [(f"s{i}b{j}", j == 0) for i, (_, n, _) in enumerate(STAGES) for j in range(n)]


def _conv_bn(x: torch.Tensor, layer: ConvBN, relu: bool) -> torch.Tensor:
    v = layer.spec
    y = F.conv2d(x, layer.weight, None, v.stride, v.pad)
    y = F.batch_norm(y, layer.bn_mean, layer.bn_var, layer.bn_weight, layer.bn_bias, False, 0.0, BN_EPS)
    return F.relu(y) if relu else y


def forward(x: torch.Tensor, net: Net) -> torch.Tensor:
    """The eager forward: every convolution, BatchNorm, ReLU and add its own op."""
    y = F.max_pool2d(_conv_bn(x, net.convs["stem"], True), 3, 2, 1)
    for name, down in blocks():
        t = _conv_bn(y, net.convs[f"{name}.a"], True)
        t = _conv_bn(t, net.convs[f"{name}.b"], True)
        t = _conv_bn(t, net.convs[f"{name}.c"], False)
        shortcut = _conv_bn(y, net.convs[f"{name}.down"], False) if down else y
        y = F.relu(t + shortcut)
    return F.linear(y.mean((2, 3)), net.fc_weight, net.fc_bias)


def resnet50_reference(x: torch.Tensor, params: torch.Tensor) -> torch.Tensor:
    """Unpack the weights and run the eager forward (solbench runs it on fp32 copies)."""
    return forward(x, unpack(params))


def resnet50_setup(x: torch.Tensor, params: torch.Tensor) -> dict[str, Any]:
    """Unpack the weights once (untimed); x stays NCHW."""
    return {"x": x, "net": unpack(params, x.dtype)}


def resnet50_baseline(x: torch.Tensor, net: Net) -> torch.Tensor:
    """Eager NCHW: 53 convolutions, 53 BatchNorms, 49 ReLUs, 16 adds, pools, the classifier."""
    return forward(x, net)


def _to_channels_last(net: Net) -> Net:
    convs = {k: ConvBN(v.spec, v.weight.contiguous(memory_format=torch.channels_last), v.bn_weight,
                       v.bn_bias, v.bn_mean, v.bn_var) for k, v in net.convs.items()}
    return Net(convs, net.fc_weight, net.fc_bias)


def resnet50_channels_last_setup(x: torch.Tensor, params: torch.Tensor) -> dict[str, Any]:
    """Unpack the weights once, in channels_last (NHWC) memory format."""
    return {"x": x, "net": _to_channels_last(unpack(params, x.dtype))}


def resnet50_channels_last(x: torch.Tensor, net: Net) -> torch.Tensor:
    """The same eager ops on NHWC tensors (x converted inside the call): no cuDNN transposes."""
    return forward(x.contiguous(memory_format=torch.channels_last), net)


_COMPILED: dict[str, Callable[..., torch.Tensor]] = {}


def resnet50_compiled(x: torch.Tensor, net: Net) -> torch.Tensor:
    """``torch.compile`` (Inductor, default mode) of the eager NCHW forward, compiled once per process."""
    if "forward" not in _COMPILED:
        _COMPILED["forward"] = torch.compile(forward, dynamic=False)
    return _COMPILED["forward"](x, net)
