"""The hand-written ResNet-50: its layout, its weights, its fused (folded) forward, its cost ops.

The workload file's FLOPs are held against FlopCounterMode by test_workload_costs, and every
CPU-runnable implementation against the reference by test_workload_impls_cpu; these tests pin
what those cannot see: the architecture itself and the pieces of the fused path.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import yaml

from solbench.analysis.cost import op_cost
from solbench.impls import resnet50 as net50
from solbench.impls import resnet50_fused as fused50

WORKLOAD = Path(__file__).resolve().parents[2] / "workloads" / "resnet50_forward.yaml"


def test_the_architecture_is_resnet50():
    convs = net50.conv_layout()
    assert len(convs) == 53  # stem + 16 blocks x 3 + 4 projection shortcuts
    assert sum(1 for v in convs if v.r == 3) == 16 and sum(1 for v in convs if v.name.endswith("down")) == 4
    trainable = sum(v.k * v.c * v.r * v.r + 2 * v.k for v in convs) + 2048 * 1000 + 1000
    assert trainable == 25_557_032  # torchvision's resnet50: sum(p.numel() for p in parameters())
    assert trainable + 2 * sum(v.k for v in convs) == net50.PARAM_COUNT  # + BN running statistics
    strided = [v.name for v in convs if v.stride == 2]
    assert strided == ["stem", "s1b0.b", "s1b0.down", "s2b0.b", "s2b0.down", "s3b0.b", "s3b0.down"]


def test_the_workload_declares_the_flat_parameter_count():
    spec = yaml.safe_load(WORKLOAD.read_text())["workloads"][0]
    assert spec["inputs"]["params"]["shape"] == [net50.PARAM_COUNT]
    convs = [op for op in spec["ops"] if op["op"] == "conv2d"]
    layout = net50.conv_layout()
    assert [(op["c"], op["k"], op["r"], op["stride"], op["pad"]) for op in convs] == \
        [(v.c, v.k, v.r, v.stride, v.pad) for v in layout]


def test_unpack_rejects_a_wrong_size():
    with pytest.raises(ValueError, match="needs 25610152"):
        net50.unpack(torch.zeros(10))


def test_unpacked_variances_are_positive_and_layers_take_the_whole_buffer():
    params = torch.randn(net50.PARAM_COUNT, generator=torch.Generator().manual_seed(1))
    net = net50.unpack(params)
    assert all(bool((layer.bn_var > 0).all()) for layer in net.convs.values())
    assert net.fc_bias.shape == (1000,) and net.fc_weight.shape == (1000, 2048)
    assert float(net.fc_bias[-1]) == pytest.approx(0.1 * float(params[-1]))  # last element used last


def _small_input(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(2, 3, 32, 32, generator=gen), torch.randn(net50.PARAM_COUNT, generator=gen)


def test_folding_matches_conv_then_batchnorm():
    _, params = _small_input()
    layer = net50.unpack(params).convs["s0b0.b"]
    t = torch.randn(2, layer.spec.c, 8, 8)
    expected = F.batch_norm(F.conv2d(t, layer.weight, None, 1, 1), layer.bn_mean, layer.bn_var,
                            layer.bn_weight, layer.bn_bias, False, 0.0, net50.BN_EPS)
    f = fused50.fold(layer, torch.float32)
    assert f.weight.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(F.conv2d(t, f.weight, f.bias, 1, 1), expected, rtol=1e-4, atol=1e-4)


def test_fused_forward_equals_the_eager_forward_and_differs_without_the_shortcut():
    x, params = _small_input()
    expected = net50.resnet50_reference(x, params)
    net = fused50.fold_net(params, torch.float32)
    torch.testing.assert_close(fused50.fused_forward(x, net), expected, rtol=1e-3, atol=1e-3)
    a, b, c, _ = net.blocks[1]
    broken = fused50.FoldedNet(net.stem, (net.blocks[0], (a, b, c, a), *net.blocks[2:]), net.fc_weight,
                               net.fc_bias)
    with pytest.raises(RuntimeError):  # a shortcut of the wrong width cannot be added
        fused50.fused_forward(x, broken)
    assert not torch.allclose(net50.forward(x * 2, net50.unpack(params)), expected, atol=1e-2)


def test_a_graph_forward_being_captured_runs_the_forward_instead_of_replaying(monkeypatch):
    """CUDA refuses a graph's replay inside another capture: while captured, ``GraphForward`` runs the
    folded forward (into the caller's graph) and copies it out; otherwise it replays. The CUDA-only
    parts (streams, the graph) are stood in for on the CPU; tests/gpu/test_graph_launch_gpu.py runs it whole."""
    x, params = _small_input()
    net = fused50.fold_net(params, torch.float32)
    replays = []

    class Graph:
        def replay(self):
            replays.append(1)

    forward = object.__new__(fused50.GraphForward)
    forward.x, forward.net, forward.graph, forward.logits = x, net, Graph(), torch.full((2, 1000), 7.0)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    captured = forward()
    torch.testing.assert_close(captured, net50.resnet50_reference(x, params), rtol=1e-3, atol=1e-3)
    assert not replays
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    launched = forward()
    assert replays == [1] and bool((launched == 7.0).all()) and launched.data_ptr() != forward.logits.data_ptr()


@pytest.mark.parametrize("size", [32, 33, 224])
def test_space_to_depth_stem_is_the_same_convolution(size: int):
    _, params = _small_input()
    stem = fused50.fold(net50.unpack(params).convs["stem"], torch.float32)
    x = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(size))
    expected = F.conv2d(x, stem.weight, stem.bias, 2, 3)
    s2d = fused50.s2d_stem(stem)
    xs = fused50.space_to_depth(x)
    assert xs.shape[1] == 16 and xs.is_contiguous(memory_format=torch.channels_last)
    assert tuple(s2d.weight.shape) == (64, 16, 4, 4) and float(s2d.weight[:, 12:].abs().sum()) == 0
    got = F.conv2d(xs, s2d.weight, s2d.bias, s2d.stride, s2d.pad)
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    shifted = F.conv2d(torch.roll(xs, 1, dims=1), s2d.weight, s2d.bias)  # channel order matters
    assert not torch.allclose(shifted, expected, atol=1e-2)


def test_fast_stem_network_equals_the_eager_forward():
    x, params = _small_input()
    net = fused50.fold_net(params, torch.float32, fast_stem=True)
    assert net.fast_stem and net.stem.weight.shape[1] == fused50.S2D_CHANNELS
    torch.testing.assert_close(fused50.fused_forward(x, net), net50.resnet50_reference(x, params),
                               rtol=1e-3, atol=1e-3)


def test_pool2d_cost():
    op = {"op": "pool2d", "n": 2, "c": 64, "h": 112, "w": 112, "r": 3, "s": 3, "stride": 2, "pad": 1}
    cost = op_cost(op, {}, "bfloat16")
    assert cost.tensor_flops == 0
    assert cost.vector_flops == 9 * 2 * 64 * 56 * 56
    assert cost.bytes == 2 * (2 * 64 * 112 * 112 + 2 * 64 * 56 * 56)
    assert tuple(F.max_pool2d(torch.zeros(2, 64, 112, 112), 3, 2, 1).shape) == (2, 64, 56, 56)
    mean = op_cost({"op": "pool2d", "n": 2, "c": 8, "h": 7, "w": 7, "r": 7, "s": 7}, {}, "float32")
    assert mean.vector_flops == 2 * 8 * 49 and mean.bytes == 4 * (2 * 8 * 49 + 2 * 8)
    with pytest.raises(ValueError, match="window is larger"):
        op_cost({"op": "pool2d", "n": 1, "c": 1, "h": 2, "w": 2, "r": 3, "s": 3}, {}, "float32")


def test_matches_torchvision_when_installed():
    models = pytest.importorskip("torchvision.models")
    x, params = _small_input()
    net = net50.unpack(params)
    model = models.resnet50().eval()
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    # torchvision's module order is a, b, c, then the shortcut (downsample) in each first block
    with torch.no_grad():
        for conv, bn, v in zip(convs, bns, net50.conv_layout(), strict=True):
            layer = net.convs[v.name]
            conv.weight.copy_(layer.weight)
            bn.weight.copy_(layer.bn_weight)
            bn.bias.copy_(layer.bn_bias)
            bn.running_mean.copy_(layer.bn_mean)
            bn.running_var.copy_(layer.bn_var)
        model.fc.weight.copy_(net.fc_weight)
        model.fc.bias.copy_(net.fc_bias)
        torch.testing.assert_close(model(x), net50.forward(x, net), rtol=1e-4, atol=1e-4)
