"""Options either act or are refused: no option is silently ignored; commands name what they read."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from solbench.cli import main
from solbench.results import store

FAST = ["--budget", "0.02", "--min-samples", "3", "--max-samples", "10", "-q"]
DOUBLE = "tests/data/double.yaml"


def _one_line_exit_2(result) -> str:  # type: ignore[no-untyped-def]
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


@pytest.mark.parametrize(("args", "says"), [
    (["--timer", "graph"], "--timer graph needs a CUDA GPU"),
    (["--timer", "cupti"], "--timer cupti needs a CUDA GPU"),
    (["--flush", "write"], "--flush write flushes a GPU's L2"),
])
def test_gpu_timing_options_are_refused_on_the_cpu(args: list[str], says: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", DOUBLE, "--device", "cpu", *args, "--results-dir", str(tmp_path), *FAST])
    assert says in _one_line_exit_2(result)
    assert not list(tmp_path.rglob("*.json"))


def test_junit_without_a_gate_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", DOUBLE, "--device", "cpu", "--junit", str(tmp_path / "j.xml"), *FAST])
    assert "--gate-against" in _one_line_exit_2(result)
    assert not (tmp_path / "j.xml").exists()


def test_output_and_save_both_act(tmp_path: Path) -> None:
    out, results = tmp_path / "run.json", tmp_path / "results"
    result = CliRunner().invoke(main, ["run", DOUBLE, "--device", "cpu", "-i", "baseline", "-o", str(out),
                                       "--save", "head", "--results-dir", str(results), *FAST])
    assert result.exit_code == 0, result.output
    named = list(results.rglob("*_head.json"))
    assert len(named) == 1 and out.is_file()
    assert store.load(named[0]).cases == store.load(out).cases


def test_dry_run_output_and_save_both_act(tmp_path: Path) -> None:
    out, results = tmp_path / "dry.json", tmp_path / "results"
    result = CliRunner().invoke(main, ["run", "workloads/attn.yaml", "--gpu", "h200", "--dry-run", "-o", str(out),
                                       "--save", "what_if", "--results-dir", str(results)])
    assert result.exit_code == 0, result.output
    assert out.is_file() and len(list(results.rglob("*_what_if.json"))) == 1
