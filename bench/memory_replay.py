"""Which workloads' later rounds a card's budget lets keep their caches, counted as before (tensors
alone: ``held_bytes``) and as now (also each worker's measured peak: ``measured_held``), from a saved
run whose results record ``memory_peak_bytes``. A later pass here is rounds 2 and 3: two workers per
implementation.

    PYTHONPATH=. python3 bench/memory_replay.py RUN.json [BUDGET_GIB...]   (default: 63 and 111, 80% of
    an 80 GB H100's and of an H200's free memory)
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

from memory_peaks import counted

from solbench.execute import warm
from solbench.results import store

GIB = 1 << 30


def main(path: str, budgets: list[float]) -> None:
    run = store.load(Path(path))
    counts = counted(run)
    rows = defaultdict(list)
    for case in run.cases:
        for r in case.impls:
            if "memory_peak_bytes" in r.protocol:
                rows[case.workload].append((r.name, warm.measured_held([int(r.protocol["memory_peak_bytes"])], "cuda"),
                                            counts.get(case.case_id, 0)))
    for budget in budgets:
        print(f"budget {budget:g} GiB: workload, implementations, most counted, most measured (GiB), "
              f"later workers keep their caches: before, now")
        for workload, points in rows.items():
            workers = 2 * len({name for name, _, _ in points})
            count = max(c for _, _, c in points)
            measured = max(m for _, m, _ in points)
            print(f"  {workload:22} {workers // 2:3} {count / GIB:7.2f} {measured / GIB:7.2f}  "
                  f"{workers * count <= budget * GIB!s:5}  {workers * max(count, measured) <= budget * GIB}")


if __name__ == "__main__":
    main(sys.argv[1], [float(b) for b in sys.argv[2:]] or [63.0, 111.0])
