"""An option that names a run, given as an empty word (an unset CI variable), is refused: never read
as not given, which skipped what the option asks for and exited as if it had passed."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from solbench.cli import main

FAST = ["--budget", "0.02", "--min-samples", "3", "--max-samples", "10", "-q"]
DOUBLE = "tests/data/double.yaml"


@pytest.mark.parametrize("name", ["", " "])
def test_run_gate_against_an_empty_name_is_refused_before_measuring(tmp_path: Path, name: str) -> None:
    """``run --gate-against "$BASE"`` with BASE unset measured, gated nothing and exited 0."""
    rdir = tmp_path / "results"
    r = CliRunner().invoke(main, ["run", DOUBLE, "--device", "cpu", "-i", "baseline", "--gate-against", name,
                                  "--results-dir", str(rdir), *FAST])
    assert r.exit_code == 2, r.output
    assert "--gate-against" in r.output and "names no run" in r.output
    assert not list(rdir.rglob("*.json"))  # nothing measured


@pytest.mark.parametrize("option", ["--gate-against", "--compare-to"])
def test_report_with_an_empty_base_is_refused(tmp_path: Path, option: str) -> None:
    src = Path("results/h200/issue8-ab-same-baseline.json")
    out = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["report", str(src), "--html", str(out), option, "",
                                  "--results-dir", str(tmp_path / "results")])
    assert r.exit_code == 2, r.output
    assert f"{option}: '' names no run" in r.output
    assert not out.exists()


@pytest.mark.parametrize("option", ["-w", "-i"])
def test_an_empty_workload_or_implementation_name_is_refused_by_name(option: str) -> None:
    """``-w "$W"`` with W unset said "no workload named  in ..." (two spaces, nothing quoted)."""
    r = CliRunner().invoke(main, ["run", DOUBLE, "--device", "cpu", option, "", "--dry-run"])
    assert r.exit_code == 2, r.output
    assert f"{option}: '' names nothing (an unset variable?)" in r.output
