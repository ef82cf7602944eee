"""A path whose name is longer than the file system allows (``OSError: File name too long`` from
``Path.is_file`` and the like) is bad input: one line naming it, exit 2, never a traceback and exit 5."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from solbench.cli import main

RUN = "results/h200/issue8-ab-same-baseline.json"


@pytest.mark.parametrize("args", [
    ["run", "{long}.yaml", "--gpu", "b200", "--dry-run"],
    ["run", "tests/data/double.yaml", "--gpu", "b200", "--dry-run", "-o", "{long}.json"],
    ["show", "{long}.json"],
    ["report", RUN, "--csv", "{long}.csv"],
    ["compare", RUN, "{long}.json"],
    ["list", "{long}"],
], ids=["run", "run-o", "show", "report-csv", "compare", "list"])
def test_a_name_too_long_is_one_line_exit_2(tmp_path: Path, args: list[str]) -> None:
    long = str(tmp_path / ("a" * 300))
    r = CliRunner().invoke(main, [a.format(long=long) for a in args])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    lines = [line for line in r.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "file name too long" in lines[0], r.output
    assert "a" * 200 in lines[0]  # names the path
