"""A reader that closes standard output early (``solbench show run.json | head``): the command exits
PIPE_CLOSED (141, as a shell reports a process SIGPIPE ended), never 1, which a CI reads as a regression,
and prints no traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from solbench import exitcodes
from solbench.results import store
from tests.unit.factories import make_run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("extra", [[], ["--json"]])  # rich's table, and click.echo of the JSON
def test_a_reader_that_closes_the_pipe_early_gets_exit_141(tmp_path, extra):
    run = make_run({f"w[n={i},float32]": {"a": [1e-3, 1.1e-3, 0.9e-3]} for i in range(50)})
    path = store.save(run, tmp_path / "run.json")
    env = {**os.environ, "PYTHONPATH": ROOT, "COLUMNS": "200"}
    with (tmp_path / "stderr.txt").open("wb") as err_file, \
            subprocess.Popen([sys.executable, "-m", "solbench", "show", str(path), *extra], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=err_file, env=env) as proc:
        proc.stdout.close()  # the reader goes away before the command has written anything
        code = proc.wait(timeout=300)
    err = (tmp_path / "stderr.txt").read_text()
    assert code == exitcodes.PIPE_CLOSED, err
    assert "Traceback" not in err, err
