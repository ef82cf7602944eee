"""Where a run's task time went, the first round against the later ones.

A merged result keeps its first round's protocol (set-up, checks, timing, after-timing seconds);
the run's harness record sums every round. The difference is the later rounds. Usage:
    python bench/round_phases.py RUN.json [RUN.json ...]
"""

import sys

from solbench.results import store

PHASES = ("setup_s", "check_s", "sample_s", "after_s")

for path in sys.argv[1:]:
    run = store.load(path)
    first = dict.fromkeys(PHASES, 0.0)
    points = 0
    for case in run.cases:
        for result in case.impls:
            points += 1
            for phase in PHASES:
                first[phase] += float(result.protocol.get(phase, 0) or 0)
    h = run.harness
    cells = ", ".join(f"{p[:-2]} {first[p]:.2f} / {h.get(p, 0) - first[p]:.2f} s" for p in PHASES)
    print(f"{path}: {points} points, harness wall {h.get('wall_s', 0):.1f} s, workers {h.get('workers_s', 0):.2f} s; "
          f"round 1 / later rounds: {cells}")
