"""Five separate runs of the same workload: spread of the run medians, CI coverage of the grand
median, and `solbench gate` over every ordered pair. Usage: python bench/repeat_gates.py RUN.json..."""

import itertools
import statistics
import subprocess
import sys

from loop_replay import spread

from solbench.results import store

paths = sys.argv[1:]
runs = [store.load(p) for p in paths]
spreads, covered, total = spread(runs)
spreads.sort()
print(f"{len(spreads)} points over {len(runs)} runs: spread of run medians (max/min - 1) "
      f"median {statistics.median(spreads):.2%}, max {max(spreads):.2%}; "
      f"within 1%: {sum(s <= 0.01 for s in spreads)}; within 2%: {sum(s <= 0.02 for s in spreads)}")
print(f"each run's 95% CI holds the {len(runs)}-run grand median: {covered} of {total} ({covered / total:.1%})")
codes, inconclusive, regressions = [], 0, 0
for a, b in itertools.permutations(paths, 2):
    out = subprocess.run([sys.executable, "-m", "solbench", "gate", "--baseline", a, "--current", b, "--json"],
                         capture_output=True, text=True)
    codes.append(out.returncode)
    import json

    data = json.loads(out.stdout) if out.stdout.strip().startswith("{") else {"verdicts": []}
    inconclusive += sum(v["verdict"] == "INCONCLUSIVE" for v in data["verdicts"])
    regressions += sum(v["verdict"] == "REGRESSION" for v in data["verdicts"])
print(f"gate over {len(codes)} ordered pairs: exit codes {dict(sorted((c, codes.count(c)) for c in set(codes)))}; "
      f"{regressions} REGRESSION and {inconclusive} INCONCLUSIVE verdicts in all")
