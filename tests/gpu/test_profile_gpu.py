"""``solbench profile`` under a real Nsight Compute: a healthy implementation's kernels are summarised, and
an implementation that ends its own process inside the profiled call is the implementation's failure
(exit 4), not ncu's (exit 2). tests/unit/test_profile_errors.py plays ncu's words with a stand-in; this
runs the real one (its version prints and exits as the stand-in assumes)."""

import json
import shutil

import pytest
from click.testing import CliRunner

from solbench.cli import main

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(shutil.which("ncu") is None, reason="needs ncu on the PATH")]
FAULTS = "tests/data/hostile/hostile_gpu.yaml"


def _profile(tmp_path, impl):
    return CliRunner().invoke(main, ["profile", FAULTS, "-w", "gpu_faults", "-i", impl,
                                     "--out-dir", str(tmp_path), "--json"])


def test_a_healthy_implementation_is_profiled_and_summarised(tmp_path):
    result = _profile(tmp_path, "baseline")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    kernels = data["summary"]["kernels"]
    weight_bytes = 4096 * 4096 * 2  # the bf16 weight every call reads from memory (L2 holds a quarter of it)
    assert kernels and sum(k["dram_bytes"] or 0 for k in kernels) >= 0.9 * weight_bytes, kernels
    assert list(tmp_path.glob("*.ncu-rep")) and list(tmp_path.glob("*.json"))


@pytest.mark.parametrize("impl", ["segfault", "exits_zero"])
def test_an_implementation_that_ends_its_process_under_ncu_exits_4(tmp_path, impl):
    result = _profile(tmp_path, impl)
    assert result.exit_code == 4, result.output
    assert impl in result.output
    assert not list(tmp_path.glob("*.json"))  # no summary of a call that never finished
