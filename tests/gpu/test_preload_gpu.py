"""A GPU run's fork server imports CuPy and nvmath-python once, ahead of its workers, without
initializing CUDA there (solbench.measure.library_preload). Each check runs in a fresh interpreter."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu

IMPORTS = """
import os, sys
import torch
from solbench.measure import preload
assert not preload.driver_initialized(), "torch's import initialized the driver"
import solbench.measure.library_preload
assert "cupy" in sys.modules, "cupy not imported"
assert not preload.driver_initialized(), "a library's import initialized the driver"
assert preload.TAINTED not in os.environ
torch.cuda.init()
assert preload.driver_initialized(), "the check did not see torch initialize the driver"
print("nvmath" in sys.modules)
"""

RUN = """
import sys
from pathlib import Path
from solbench import api
from solbench.measure import pool
from solbench.measure.worker import MeasureSettings, Task
if sys.argv[1] == "preload":
    assert pool.preload_libraries()
(planned,) = api.plan(["tests/data/preload/nvmath_check.yaml"], "cuda")
settings = MeasureSettings(timer="cold", warmup=1, min_samples=3, max_samples=5, budget_s=0.05)
task = Task(planned.spec, planned.cases[0], "baseline", str(Path("tests/data/preload").absolute()), "cuda", settings)
p = pool.Pool("cuda", 0)
result = p.run(("preload_gpu", "baseline"), task, 300)
p.close()
print(result.status, result.message)
"""


def _last_line(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_the_gpu_libraries_import_without_initializing_the_driver():
    nvmath = _last_line(IMPORTS)
    assert nvmath in ("True", "False")  # nvmath-python is optional


def test_a_gpu_runs_workers_start_with_the_libraries_imported():
    pytest.importorskip("nvmath")
    assert _last_line(RUN, "preload").startswith("ok")
    line = _last_line(RUN, "plain")
    assert line.startswith("error") and "nvmath was not imported before the task" in line
