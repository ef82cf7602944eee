"""SOLBENCH_FRESH_FORK_SERVER=pass (an experiment, off by default): each pass of workers after the
first forks from a fork server started afresh (:class:`solbench.measure.pool.Pool`). Real worker
processes on the CPU, in a process of their own (the fork server is one per process); nothing is timed."""

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json, sys
from multiprocessing import forkserver
from pathlib import Path
from solbench import api
from solbench.measure import pool
from solbench.measure.worker import MeasureSettings, Task

(planned,) = api.plan(["tests/data/double.yaml"], "cpu")
task = Task(planned.spec, planned.cases[0], "baseline", str(Path("tests/data").absolute()), "cpu",
            MeasureSettings(timer="cpu", warmup=1, min_samples=3, max_samples=5, budget_s=0.05))
server = lambda: forkserver._forkserver._forkserver_pid
p = pool.Pool("cpu", None)
servers, statuses = [], []
for n in range(3):  # three passes: workers started with none alive, then retired
    p.prestart([("double", "baseline"), ("double", f"x{n}")])
    servers.append(server())
    p.prestart([("double", "baseline")])  # a task's own prestart within the pass: not a pass
    statuses.append(p.run(("double", "baseline"), task, timeout_s=120).status)
    p.retire([("double", "baseline"), ("double", f"x{n}")])
p.close()
print(json.dumps({"servers": servers, "statuses": statuses, "passes": p.passes, "fresh": p.fresh_servers}))
"""


@pytest.mark.parametrize("fresh", [True, False])
def test_each_pass_after_the_first_forks_from_a_fresh_server_only_when_asked(fresh, monkeypatch):
    env = {"SOLBENCH_FRESH_FORK_SERVER": "pass"} if fresh else {}
    monkeypatch.delenv("SOLBENCH_FRESH_FORK_SERVER", raising=False)
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=600,
                          env={**os.environ, **env})
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["statuses"] == ["ok"] * 3  # workers of a fresh server run tasks
    assert out["passes"] == 3
    if fresh:
        assert out["fresh"] == 2 and len(set(out["servers"])) == 3
    else:
        assert out["fresh"] == 0 and len(set(out["servers"])) == 1


def test_the_run_says_so_in_its_notes(tmp_path):
    out = tmp_path / "r.json"
    done = subprocess.run([sys.executable, "-m", "solbench", "run", "tests/data/double.yaml", "--device", "cpu",
                           "--repeat", "2", "-i", "baseline", "--budget", "0.05", "--min-samples", "5", "--max-samples", "20", "-q",
                           "-o", str(out)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "SOLBENCH_FRESH_FORK_SERVER": "pass"})
    assert done.returncode == 0, done.stderr[-2000:]
    notes = json.loads(out.read_text())["notes"]
    assert any("fork server was started afresh for each pass after the first (1 times" in n for n in notes), notes
