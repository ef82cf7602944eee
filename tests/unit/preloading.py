"""The first case of a workload's ``baseline``, run through a worker pool in a fresh interpreter,
whose fork server starts with the preload list it is given; shared by tests/unit/test_preload.py
(torch.compile's preload, on the CPU) and tests/gpu/test_preload_gpu.py (CuPy and nvmath-python)."""

import subprocess
import sys

SCRIPT = """
import sys
from pathlib import Path
from solbench import api
from solbench.measure import pool
from solbench.measure.worker import MeasureSettings, Task
mode, path, device = sys.argv[1:4]
if mode != "plain":
    assert {"compiler": pool.preload_compiler, "libraries": pool.preload_libraries}[mode]()
(planned,) = api.plan([path], device)
settings = MeasureSettings(timer="cpu" if device == "cpu" else "cold", warmup=1, min_samples=3, max_samples=5,
                           budget_s=0.05)
task = Task(planned.spec, planned.cases[0], "baseline", str(Path(path).parent.absolute()), device, settings)
p = pool.Pool(device, 0 if device == "cuda" else None)
result = p.run((planned.spec.name, "baseline"), task, 300)
p.close()
print(result.status, result.message)
"""


def first_task(mode: str, path: str, device: str) -> str:
    """``status message`` of the task; ``mode``: "compiler", "libraries" (what the fork server
    preloads first) or "plain"."""
    return last_line(SCRIPT, mode, path, device)


def last_line(script: str, *args: str) -> str:
    """The last line ``python -c script args...`` printed; it must exit 0."""
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]
