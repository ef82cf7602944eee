"""Inputs no run can honour exit 2 with one line, before anything is measured."""

import os

import pytest
from click.testing import CliRunner

from solbench.cli import main

FAST = ["--budget", "0.05", "--min-samples", "5", "--max-samples", "30", "--device", "cpu"]
WORKLOAD = """workloads:
  - name: a
    parameters: {n: [8]}
    dtypes: [float32]
    inputs: {x: {shape: [n]}}
    outputs: {y: {shape: [n]}}
    reference: f.py:ref
    implementations: {baseline: f.py:fn}
"""
SOURCE = "ref = 5\n\ndef fn(x, n):\n    return x * 2\n\ndef good(x, n):\n    return x * 2\n"


def _one_line_exit_2(result, text):
    assert result.exit_code == 2, result.output
    assert text in result.output and "Traceback" not in result.output
    assert len([line for line in result.output.splitlines() if line.startswith("error:")]) == 1


@pytest.mark.parametrize("flags,text", [
    (["--timeout", "nan"], "--timeout must be a positive finite number"),
    (["--budget", "inf"], "--budget must be a positive finite number"),
    (["--min-samples", "50", "--max-samples", "10"], "larger than --max-samples"),
    (["--seed", str(10**30)], "--seed"),
])
def test_options_no_run_can_honour(flags, text):
    result = CliRunner().invoke(main, ["run", "tests/data/double.yaml", *FAST, *flags])
    _one_line_exit_2(result, text)


@pytest.mark.parametrize("edit,text", [
    (lambda w: w, "bound only to a literal value"),  # reference: f.py:ref where ref = 5
    (lambda w: w.replace("f.py:ref", "f.py:good").replace("x: {shape", "x-y: {shape"), "is not a Python name"),
    (lambda w: w.replace("f.py:ref", "f.py:good").replace("n: [8]", "n: [true]"), "a boolean is not a number"),
])
def test_workloads_no_run_can_honour(tmp_path, edit, text):
    (tmp_path / "f.py").write_text(SOURCE)
    (tmp_path / "w.yaml").write_text(edit(WORKLOAD))
    _one_line_exit_2(CliRunner().invoke(main, ["run", str(tmp_path / "w.yaml"), *FAST]), text)


def test_a_fifo_as_the_workload_file_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "w.yaml"
    os.mkfifo(fifo)
    _one_line_exit_2(CliRunner().invoke(main, ["run", str(fifo), *FAST]), "not a regular file")
