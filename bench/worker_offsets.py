"""Does a worker process carry one offset for every case it times? (CPU, over saved runs; issue 16)

In a run's first two passes, an implementation's round 1 of every case runs in one worker, its
round 2 in a second and its round 3 in a third (``execute.session.measure_units``: worker slot s of
a pass times every case of the implementation that needs a round there). So for rounds 1-3 the
round label names the process. Per point with at least three rounds, take the deviations of its
first three log round medians from their mean. Then, over pairs of cases:

    same worker    two cases of one implementation, same round: the same process timed both
    same pass      two cases of different implementations, same round: other processes, same time

(pairs from two workloads are left out: their workers are others, in other passes).

and print the correlation of the paired deviations for each kind (all points, and the decode points,
1-64 tokens). A process-wide offset (the flush buffer's place, the page tables: anything a process
fixes at its start for every call it times) makes the first correlation positive and larger than
the second; an offset per allocation of the operands, or per point, leaves it at the second's level.

    PYTHONPATH=. python3 bench/worker_offsets.py RUN.json[.gz] ...

Over runs of several workloads (the shipped suite) it also prints both correlations per workload;
then the same-worker correlation of each implementation.
"""

from __future__ import annotations

import itertools
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from between_runs import is_decode  # bench/ is on the path when this runs as a script

from solbench.analysis.rounds import group_by_round
from solbench.results import store


def deviations(run) -> dict[tuple[str, str], np.ndarray]:
    """(case id, implementation) -> the first three log round medians less their mean."""
    out = {}
    for case in run.cases:
        for impl in case.impls:
            t = impl.timing
            if impl.status != "ok" or t is None or impl.protocol.get("part") or not t.rounds:
                continue
            groups = group_by_round(t.samples, t.rounds)
            if len(groups) < 3:
                continue
            m = np.array([np.median(np.log(g)) for g in groups[:3]])
            out[(case.case_id, impl.name)] = m - m.mean()
    return out


def _workload(case_id: str) -> str:
    """The workload's name: the case id up to its parameters (``o_proj[tokens=1,...]`` -> ``o_proj``)."""
    return case_id.split("[", 1)[0]


def correlation(pairs: list[tuple[float, float]]) -> tuple[float, int]:
    if len(pairs) < 3:
        return float("nan"), len(pairs)
    a = np.array(pairs)
    return float(np.corrcoef(a[:, 0], a[:, 1])[0, 1]), len(pairs)


def main(paths: list[str]) -> None:
    kinds: dict[str, list[tuple[float, float]]] = defaultdict(list)
    by_workload: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    by_impl: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for path in paths:
        dev = deviations(store.load(Path(path)))
        for (ka, da), (kb, db) in itertools.combinations(dev.items(), 2):
            workload = _workload(ka[0])
            if workload != _workload(kb[0]):
                continue  # another workload: timed in another pass
            if ka[1] == kb[1]:  # one implementation, two cases (the keys differ)
                kind = "same worker"
                by_impl[f"{workload} {ka[1]}"].extend(zip(da, db, strict=True))
            elif ka[0] != kb[0]:
                kind = "same pass"
            else:
                continue  # one case, two implementations: other processes, timed back to back
            pairs = list(zip(da, db, strict=True))
            kinds[kind].extend(pairs)
            by_workload[(workload, kind)].extend(pairs)
            if is_decode(ka[0]) and is_decode(kb[0]):
                kinds[kind + ", decode"].extend(pairs)
    print(f"{len(paths)} runs; correlation of the deviations of the first three round medians, paired by round")
    for kind in ("same worker", "same pass", "same worker, decode", "same pass, decode"):
        r, n = correlation(kinds[kind])
        print(f"  {kind:22s} r = {r:+.3f}  ({n} paired deviations)")
    if len({w for w, _ in by_workload}) > 1:
        print("by workload: same worker / same pass")
        for workload in sorted({w for w, _ in by_workload}):
            (r1, n1), (r2, n2) = (correlation(by_workload[(workload, k)]) for k in ("same worker", "same pass"))
            print(f"  {workload:22s} r = {r1:+.3f} ({n1}) / {r2:+.3f} ({n2})")
    print("same worker, by implementation")
    for name in sorted(by_impl):
        r, n = correlation(by_impl[name])
        print(f"  {name:32s} r = {r:+.3f}  ({n} paired deviations)")


if __name__ == "__main__":
    main(sys.argv[1:])
