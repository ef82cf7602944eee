"""bench/data/slow_k.py: the issue-16 slowdown made inside the GEMM itself (extra reduction depth)."""

import importlib.util
from pathlib import Path

import pytest
import torch

SLOW_K = Path(__file__).resolve().parents[2] / "bench" / "data" / "slow_k.py"


def _module():
    spec = importlib.util.spec_from_file_location("slow_k_under_test", SLOW_K)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("slowdown", "added"), [(0.03, 128), (0.10, 448), (0.0, 0)])
def test_k_grows_by_at_least_the_slowdown_in_whole_tiles(slowdown, added):
    assert _module().padded_k(4096, slowdown) - 4096 == added


def test_the_padded_call_gives_the_unpadded_result_with_more_reduction_depth():
    slow = _module()
    g = torch.Generator().manual_seed(0)
    x, w, residual = (torch.randn(16, 512, generator=g), torch.randn(512, 512, generator=g),
                      torch.randn(16, 512, generator=g))
    args = slow.setup(x, w, residual)
    assert args["x"].shape == (16, slow.padded_k(512)) and args["w"].shape == (512, slow.padded_k(512))
    assert bool((args["x"][:, 512:] == 0).all()) and float(args["w"][:, 512:].abs().sum()) > 0
    torch.testing.assert_close(slow.addmm_slow(**args), torch.addmm(residual, x, w.t()), rtol=1e-5, atol=1e-4)
