"""An empty or blank word where a command takes a path or a saved name (a CI variable left unset) is
refused with exit 2, never read as the current folder, as no name, or as the tree being changed."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from solbench.cli import main
from solbench.errors import ConfigError
from solbench.plan.workloads import plan
from solbench.results import store

ROOT = Path(__file__).resolve().parents[2]
DOUBLE = str(ROOT / "tests/data/double.yaml")


@pytest.mark.parametrize("args", [
    ["run", ""],  # every workload file in the current folder
    ["run", DOUBLE, "-o", ""],  # saved under results/ instead
    ["run", DOUBLE, "--results-dir", " "],  # saved in the current folder
    ["ab", "--baseline-tree", "", DOUBLE],  # the current tree against itself: PASS, exit 0
    ["ab", "--baseline-tree", str(ROOT), DOUBLE, "--out-dir", ""],
    ["list", ""],
    ["tune", ""],
])
def test_an_empty_path_is_refused_before_anything_runs(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.yaml").write_text((ROOT / "tests/data/double.yaml").read_text())  # what "" would have read
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert "names no file or folder (an unset variable?)" in result.output
    assert not (tmp_path / "results").exists() and list(tmp_path.iterdir()) == [tmp_path / "w.yaml"]


@pytest.mark.parametrize("name, text", [
    ("", "names no run (an unset variable?)"),
    (" ", "names no run (an unset variable?)"),
    ("Nightly", "(e.g. 'nightly')"),  # saved as nightly: a gate between Nightly and nightly read one run twice
    ("a/b", "(e.g. 'a-b')"),
])
def test_a_saved_name_that_is_not_its_own_file_name_is_refused(name, text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["run", DOUBLE, "--device", "cpu", "--save", name,
                                       "--results-dir", str(tmp_path / "r")])
    assert result.exit_code == 2 and text in result.output, result.output
    assert not (tmp_path / "r").exists()
    assert store.slug("nightly-2.x_1") == "nightly-2.x_1"  # what the rule accepts is kept as given


def test_the_api_refuses_an_empty_workload_path_too():
    with pytest.raises(ConfigError, match="names no workload file or folder"):
        plan([""], "cpu")
