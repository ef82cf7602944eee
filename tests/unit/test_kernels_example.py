"""The examples/ workload with its own .cu kernel runs end to end on the CPU (kernel skipped)."""

from __future__ import annotations

from pathlib import Path

import torch
from click.testing import CliRunner

from solbench.cli import main
from solbench.results import store

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rmsnorm_residual"


def test_example_runs_with_the_kernel_skipped_for_want_of_cuda(tmp_path):
    out = tmp_path / "run.json"
    result = CliRunner().invoke(main, ["run", str(EXAMPLE / "rmsnorm_residual.yaml"), "--device", "cpu",
                                       "-o", str(out), "--budget", "0.02", "--min-samples", "3",
                                       "--max-samples", "5", "-q"])
    assert result.exit_code == 0, result.output
    impls = {r.name: r for c in store.load(out).cases for r in c.impls}
    assert impls["baseline"].status == "ok" and impls["baseline"].correctness.passed
    assert impls["kernel"].status == "skipped" and impls["kernel"].message == "needs CUDA (cuda)"


def test_example_reference_is_rmsnorm_of_the_sum():
    import importlib.util

    spec = importlib.util.spec_from_file_location("rmsnorm_example", EXAMPLE / "rmsnorm_residual.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    g = torch.Generator().manual_seed(0)
    x, r = torch.randn(5, 64, generator=g), torch.randn(5, 64, generator=g)
    w = torch.randn(64, generator=g)
    out, summed = module.reference(x, r, w)
    expected = torch.nn.functional.rms_norm(x + r, (64,), w, eps=module.EPS)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(summed, x + r)
    base_out, base_sum = module.baseline(x, r, w)
    torch.testing.assert_close(base_out, expected)
    torch.testing.assert_close(base_sum, summed)
