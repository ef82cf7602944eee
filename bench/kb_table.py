"""A KernelBench run as a Markdown table: per problem, eager and compiled time, compile's speedup,
SOL and MFU/MBU of each, and the status of anything not ok.

    python bench/kb_table.py RUN.json [COSTS.json]

COSTS: a dry run of the same problems (``solbench run LEVEL --dry-run --gpu h200``); its costs and
peaks score RUN's times instead of RUN's own (a run saved before a costing or pricing change, such as
the ``torch`` fp32 peak policy, read with today's).
"""

import statistics
import sys
from pathlib import Path

from solbench.analysis.sol import score, speed_of_light
from solbench.results import store


def _cell(r, costed):
    if r is None or r.timing is None:
        return "", "", ""
    s = r.score
    if costed is not None:  # scored again with the dry run's cost and peaks
        s = score(r.timing.median, costed.cost, costed.peaks, speed_of_light(costed.cost, costed.peaks), None)
    util = "" if s is None else f"{s.mfu:.2f} / {s.mbu:.2f}" if s.mfu is not None else f"– / {s.mbu:.2f}"
    return f"{r.timing.median * 1e6:,.1f} µs", "" if s is None else f"{s.sol:.2f}", util


run = store.load(Path(sys.argv[1]))
costs = {c.case_id: c for c in store.load(Path(sys.argv[2])).cases} if len(sys.argv) > 2 else {}
print("| problem | eager | SOL | MFU / MBU | compiled | SOL | MFU / MBU | compile's speedup | not ok |")
print("|---|---|---|---|---|---|---|---|---|")
for c in run.cases:
    by = {r.name: r for r in c.impls}
    base, comp = by.get("baseline"), by.get("compiled")
    speed = (f"{base.timing.median / comp.timing.median:.3f}x" if base and comp and base.timing and comp.timing
             else "")
    bad = "; ".join(f"{r.name} {r.status}: {r.message[:110]}" for r in c.impls if r.status != "ok")
    costed = costs.get(c.case_id)
    eager, compiled = " | ".join(_cell(base, costed)), " | ".join(_cell(comp, costed))
    print(f"| {c.workload.removeprefix('level1_')} | {eager} | {compiled} | {speed} | {bad} |")

# compile's speedup over the problems where both are ok: how many within 1% (the same library kernel:
# KernelBench's fast_1 counts those by noise), faster or slower by more, and the geometric mean
pairs = [(c.workload, by["baseline"].timing.median / by["compiled"].timing.median) for c in run.cases
         for by in [{r.name: r for r in c.impls}]
         if by.get("baseline") and by.get("compiled") and by["baseline"].status == by["compiled"].status == "ok"]
if pairs:
    ratios = [s for _, s in pairs]
    low, high = min(pairs, key=lambda p: p[1]), max(pairs, key=lambda p: p[1])
    faster, same, slower = (sum(s > 1.01 for s in ratios), sum(0.99 <= s <= 1.01 for s in ratios),
                            sum(s < 0.99 for s in ratios))
    print(f"\n{len(ratios)} problems with both ok: {faster} faster by more than 1%, {same} within 1%, {slower} slower "
          f"by more than 1%; geometric mean {statistics.geometric_mean(ratios):.2f}x ({low[1]:.2f}x {low[0]} to "
          f"{high[1]:.2f}x {high[0]})")
