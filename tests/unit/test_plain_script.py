"""The Python API works from a plain script with no ``if __name__ == "__main__":`` guard.

``spawn`` and ``forkserver`` children import the parent's main script again unless told not to;
a script that calls ``solbench.run`` at top level would then run itself in every worker, and
every implementation would read ``crashed``. Workers must start without importing it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = '''
import solbench
print("BODY RAN", flush=True)
run = solbench.run(["workloads/attn.yaml"],
                   solbench.RunOptions(workloads=("o_proj",), impls=("fused",), budget_s=0.05, min_samples=3),
                   device="cpu")
for case in run.cases:
    for r in case.impls:
        print("STATUS", case.case_id, r.name, r.status, flush=True)
'''


def test_run_from_a_script_without_a_main_guard(tmp_path: Path) -> None:
    (tmp_path / "workloads").symlink_to(ROOT / "workloads", target_is_directory=True)
    script = tmp_path / "plain.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("BODY RAN") == 1
    statuses = [line.split()[-1] for line in proc.stdout.splitlines() if line.startswith("STATUS")]
    assert statuses and set(statuses) == {"ok"}, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
