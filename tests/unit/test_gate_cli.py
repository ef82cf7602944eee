"""End to end on the CPU: a workload that busy-waits 2.0 ms against 2.4 ms is gated as a regression."""

import json
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from solbench.cli import main

TEMPLATE = """\
workloads:
  - name: busywait
    parameters: {{n: [16]}}
    dtypes: [float32]
    inputs: {{x: {{shape: [n]}}}}
    outputs: {{y: {{shape: [n]}}}}
    ops: [{{op: mul, numel: n, inputs: 1}}]
    reference: tests.unit.helpers:double
    implementations:
      baseline: tests.unit.helpers:spin_fast
      kernel: tests.unit.helpers:{fn}
"""
FAST = ["--device", "cpu", "--budget", "1.0", "--min-samples", "20", "-q", "-i", "kernel"]


@pytest.fixture
def env(tmp_path):
    runner = CliRunner()
    files = {}
    for name, fn in (("fast", "spin_fast"), ("slow", "spin_slow")):
        files[name] = tmp_path / f"{name}.yaml"
        files[name].write_text(TEMPLATE.format(fn=fn))
    results = tmp_path / "results"
    r = runner.invoke(main, ["run", str(files["fast"]), "--save", "base", "--results-dir", str(results), *FAST])
    assert r.exit_code == 0, r.output
    return runner, files, results


def test_slower_run_is_a_regression_exit_1(env, tmp_path):
    runner, files, results = env
    junit = tmp_path / "gate.xml"
    r = runner.invoke(main, ["run", str(files["slow"]), "--results-dir", str(results), "--gate-against", "base",
                             "--junit", str(junit), *FAST])
    assert r.exit_code == 1, r.output
    assert "REGRESSION" in r.output
    suite = ET.parse(junit).getroot()
    failed = [tc.get("name") for tc in suite.iter("testcase") if tc.find("failure") is not None]
    assert any(name.endswith("/kernel") for name in failed), failed
    assert not any(name.endswith("/baseline") for name in failed), failed  # same 2.0 ms on both sides


def test_same_run_passes_exit_0(env):
    runner, files, results = env
    r = runner.invoke(main, ["run", str(files["fast"]), "--save", "head", "--results-dir", str(results),
                             "--gate-against", "base", *FAST])
    assert r.exit_code == 0, r.output
    g = runner.invoke(main, ["gate", "--baseline", "base", "--current", "head", "--results-dir", str(results),
                             "--json"])
    assert g.exit_code == 0, g.output
    assert json.loads(g.stdout)["overall"] == "PASS"


def test_gate_command_on_saved_runs_and_step_summary(env, tmp_path, monkeypatch):
    runner, files, results = env
    r = runner.invoke(main, ["run", str(files["slow"]), "--save", "head", "--results-dir", str(results), *FAST])
    assert r.exit_code == 0, r.output
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    g = runner.invoke(main, ["gate", "--baseline", "base", "--current", "head", "--results-dir", str(results)])
    assert g.exit_code == 1, g.output
    assert "REGRESSION" in summary.read_text()


def test_compare_two_runs_and_two_impls(env):
    runner, files, results = env
    runner.invoke(main, ["run", str(files["slow"]), "--save", "head", "--results-dir", str(results), *FAST])
    c = runner.invoke(main, ["compare", "base", "head", "--impl", "kernel", "--results-dir", str(results), "--json"])
    assert c.exit_code == 0, c.output
    rows = json.loads(c.output)["rows"]
    assert len(rows) == 1 and rows[0]["verdict"] == "SLOWER"
    impls = runner.invoke(main, ["compare", "baseline", "kernel", "--results-dir", str(results), "--json"])
    assert impls.exit_code == 0, impls.output
    assert json.loads(impls.output)["rows"][0]["verdict"] == "SLOWER"


def test_gate_usage_errors_exit_2(env, tmp_path):
    runner, _files, results = env
    missing = runner.invoke(main, ["gate", "--baseline", "nope", "--current", "base", "--results-dir", str(results)])
    assert missing.exit_code == 2 and "nope" in missing.output
    bad = runner.invoke(main, ["gate", "--baseline", "base", "--current", "base", "--threshold", "fast",
                               "--results-dir", str(results)])
    assert bad.exit_code == 2 and "threshold" in bad.output
