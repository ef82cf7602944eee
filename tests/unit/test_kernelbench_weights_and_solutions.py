"""KernelBench problems (our own file, written in KernelBench's format, in tmp_path).

A problem's weights count in its traced bytes once, however the model was built: a weight read only
through a view (nn.Linear reads ``weight.t()``) is still a parameter read, and building the model
(its initialisers) is not part of the traced call. A size another constant was derived from stays,
and the CPU profile halves the others. Two solutions of one problem are both kept."""

from pathlib import Path

import pytest

from solbench.suites import kb_runtime, load
from solbench.suites.trace import probe
from solbench.workload.cases import build_case

PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.gemm(x))


batch_size = 8
in_features = 2048
out_features = 2048


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
'''
FULL = {"batch_size": 8, "in_features": 2048, "out_features": 2048}


@pytest.fixture
def problem(tmp_path: Path) -> Path:
    path = tmp_path / "level2" / "7_Gemm_ReLU_weights.py"
    path.parent.mkdir()
    path.write_text(PROBLEM)
    return path


def _bytes(params: dict[str, int]) -> int:
    b, i, o = params["batch_size"], params["in_features"], params["out_features"]
    return 4 * (b * i + o * i + o + b * o)  # x, weight, bias, out


@pytest.mark.parametrize("cached", [True, False])
def test_a_linear_weight_counts_once_whether_or_not_the_model_is_cached(problem, cached):
    [(spec, _)] = load(problem)
    if not cached:
        kb_runtime._MODELS.clear()
    _, cost = probe(spec, build_case(spec, FULL, "float32"), None)
    assert cost.fused_bytes == _bytes(FULL)
    assert cost.unfused_bytes < 2 * cost.fused_bytes  # no initialiser (uniform_ of the weight) traced


def test_the_cpu_profile_scales_a_problem_whose_weight_alone_is_too_big(problem):
    # 16 MiB of weight, 67 MFLOP: over the CPU's byte limit only if the weight is counted
    [(spec, _)] = load(problem)
    small = {k: v[0] for k, v in spec.profiles["cpu"].parameters.items()}
    assert small["in_features"] < FULL["in_features"]
    _, cost = probe(spec, build_case(spec, small, "float32"), None)
    assert cost.fused_bytes == _bytes(small) <= 8 << 20


SOLUTION = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.gemm(x))
'''


def test_two_solutions_not_named_new_are_both_kept_and_a_file_given_twice_once(problem):
    fused, cheat = problem.parent / "fused.py", problem.parent / "cheat_fused.py"
    fused.write_text(SOLUTION)
    cheat.write_text(SOLUTION)
    [(spec, _)] = load(problem, [fused, cheat, fused])
    impls = spec.implementations
    assert set(impls) == {"baseline", "compiled", "solution", "cheat_fused"}
    assert impls["solution"].params["solution"] == str(fused.resolve())
    assert impls["cheat_fused"].params["solution"] == str(cheat.resolve())


DERIVED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.bias


batch_size = 64
in_channels = 64
out_channels = 64
height = width = 128
kernel_size = 3
bias_shape = (out_channels, 1, 1)


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
'''


def test_the_cpu_profile_keeps_a_size_another_constant_was_derived_from_and_halves_the_rest(tmp_path):
    path = tmp_path / "1_Conv2d_ReLU_BiasAdd.py"
    path.write_text(DERIVED)
    [(spec, _)] = load(path)
    small = {k: v[0] for k, v in spec.profiles["cpu"].parameters.items()}
    assert small["out_channels"] == 64  # bias_shape keeps the file's (64, 1, 1)
    assert small["batch_size"] < 64 and small["height"] < 128 and small["in_channels"] < 64
    _, cost = probe(spec, build_case(spec, small, "float32"), None)
    assert cost.fused_bytes <= 8 << 20 and cost.flops <= 2e8
