"""SOL-ExecBench C++/CUDA solutions built on a real GPU: a .cu kernel with the torch binding is
built once at set-up, checked against the reference and timed like any implementation."""

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from pathlib import Path

from click.testing import CliRunner

from solbench.cli import main
from solbench.results import store

pytestmark = pytest.mark.gpu
DATA = Path(__file__).resolve().parents[1] / "data"


def test_a_cuda_solution_is_built_and_measured(tmp_path):
    out = tmp_path / "cuda.json"
    result = CliRunner().invoke(main, [
        "run", str(DATA / "solexec" / "rmsnorm"), "--solution", str(DATA / "solexec_solutions" / "rmsnorm_cuda.json"),
        "-i", "baseline", "-i", "rmsnorm_cuda", "--device", "cuda", "--repeat", "1", "--budget", "0.1",
        "-o", str(out)])
    assert result.exit_code == 0, result.output
    impls = {(c.params["wl"], r.name): r for c in store.load(out).cases for r in c.impls}
    for wl in (0, 1):
        r = impls[wl, "rmsnorm_cuda"]
        assert r.status == "ok", (r.message, r.log_tail)
        assert r.correctness.passed and r.timing.median > 0 and r.score is not None
