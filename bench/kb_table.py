"""A KernelBench run as a Markdown table: per problem, eager and compiled time, compile's speedup,
SOL and MFU/MBU of each, and the status of anything not ok.

    python bench/kb_table.py RUN.json
"""

import sys
from pathlib import Path

from solbench.results import store


def _cell(r):
    if r is None or r.timing is None:
        return "", "", ""
    s = r.score
    util = "" if s is None else f"{s.mfu:.2f} / {s.mbu:.2f}" if s.mfu is not None else f"– / {s.mbu:.2f}"
    return f"{r.timing.median * 1e6:,.1f} µs", "" if s is None else f"{s.sol:.2f}", util


run = store.load(Path(sys.argv[1]))
print("| problem | eager | SOL | MFU / MBU | compiled | SOL | MFU / MBU | compile's speedup | not ok |")
print("|---|---|---|---|---|---|---|---|---|")
for c in run.cases:
    by = {r.name: r for r in c.impls}
    base, comp = by.get("baseline"), by.get("compiled")
    speed = (f"{base.timing.median / comp.timing.median:.3f}x" if base and comp and base.timing and comp.timing
             else "")
    bad = "; ".join(f"{r.name} {r.status}: {r.message[:110]}" for r in c.impls if r.status != "ok")
    print(f"| {c.workload.removeprefix('level1_')} | {' | '.join(_cell(base))} | {' | '.join(_cell(comp))} "
          f"| {speed} | {bad} |")
