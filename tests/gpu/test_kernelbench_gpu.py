"""KernelBench solutions on a real GPU: a ModelNew that hides its work on a side stream is caught
as a native implementation is (the CUPTI side-stream check), and the honest one beside it is ok."""

import json
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from click.testing import CliRunner

from solbench.cli import main

pytestmark = pytest.mark.gpu
KB = Path(__file__).resolve().parents[1] / "data" / "kernelbench"


def test_a_side_stream_model_new_is_a_reward_hack(tmp_path):
    pytest.importorskip("cupti")
    out = tmp_path / "kb.json"
    result = CliRunner().invoke(main, [
        "run", str(KB / "level1" / "1_Square_matmul.py"),
        "--solution", str(KB / "solutions" / "1_Square_matmul_new.py"),
        "--solution", str(KB / "solutions" / "1_Square_matmul_new_side_stream.py"),
        "-i", "baseline", "-i", "new", "-i", "new_side_stream", "--device", "cuda", "--repeat", "1",
        "--budget", "0.2", "-o", str(out), "--quiet"])
    data = json.loads(out.read_text())
    status = {i["name"]: (i["status"], i["message"]) for c in data["cases"] for i in c["impls"]}
    assert status["new_side_stream"][0] == "reward_hack", status
    assert "does not wait" in status["new_side_stream"][1], status
    assert status["baseline"][0] == "ok" and status["new"][0] == "ok", status
    assert result.exit_code == 4, result.output
