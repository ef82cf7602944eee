"""Where a `solbench` command's wall time goes outside the run's own harness table: interpreter start,
imports, the early fork-server start, the run, saving and rendering, and exit.

    python3 bench/cli_phases.py run workloads/attn.yaml -w o_proj -q -o /tmp/oproj.json --force

Runs the command in a child process under cProfile (this process only times it from outside), then prints
the seconds of each top-level step of the command's function, the run's harness wall from the saved JSON
(where -o is given), and what is left: the interpreter's start and exit around the profiled call.
With PROF_OUT set, the profile is also copied there.
"""

from __future__ import annotations

import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEPS = {  # (file suffix, function) -> label; each is called from the command's own function
    ("solbench/api.py", "__getattr__"): "imports on first use of solbench.api (torch, the run's modules)",
    ("solbench/execute/early.py", "start_for_run"): "the early fork-server start (reads the workload files)",
    ("solbench/execute/run.py", "run"): "the run (its harness wall, plus end clocks)",
    ("solbench/cli/common.py", "save"): "saving the result",
    ("solbench/cli/common.py", "finish"): "rendering",
}


def main(argv: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        prof = Path(tmp) / "cli.prof"
        start = time.perf_counter()
        code = subprocess.call([sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "solbench", *argv])
        wall = time.perf_counter() - start
        stats = pstats.Stats(str(prof))
        if os.environ.get("PROF_OUT"):  # keep the profile (e.g. $OUT/cli.prof) to read it later
            shutil.copy(prof, os.environ["PROF_OUT"])
    total = stats.total_tt
    rows: dict[str, float] = {}
    for (path, _line, func), (_cc, _nc, _tt, cum, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        for (suffix, name), label in STEPS.items():
            if path.endswith(suffix) and func == name:
                rows[label] = rows.get(label, 0.0) + cum
    print(f"command exit {code}, wall {wall:.2f} s; profiled {total:.2f} s (profiling adds to both)")
    for label, seconds in rows.items():
        print(f"  {seconds:7.2f} s  {label}")
    print(f"  {total - sum(rows.values()):7.2f} s  the rest of the profiled command (click, other imports)")
    print(f"  {wall - total:7.2f} s  interpreter start and exit (outside the profile)")
    print("  the profile's largest cumulative times in solbench's own functions (a step above that matched nothing "
          "shows here):")
    ours = [(cum, f"{path.split('solbench/', 1)[-1]}:{func}")
            for (path, _line, func), (_cc, _nc, _tt, cum, _callers) in stats.stats.items()  # type: ignore[attr-defined]
            if "/solbench/" in path or path.startswith("solbench/")]
    for cum, name in sorted(ours, reverse=True)[:12]:
        print(f"  {cum:9.2f} s  {name}")
    if "-o" in argv:
        out = json.loads(Path(argv[argv.index("-o") + 1]).read_text())
        print(f"  harness wall of the saved run: {out['harness'].get('wall_s', float('nan')):.2f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
