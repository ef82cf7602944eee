"""How long a run's merging of rounds takes, replayed on any machine: each point of a saved run is
split back into its rounds (by the round labels) and merged after every round, as the run loop
does (``pooling.merge_rounds``).

    PYTHONPATH=. python3 bench/replay_merges.py results/h200/issue16/session14/call3/oproj-1.json
"""
import sys
import time
from dataclasses import replace

from solbench.analysis.pooling import merge_rounds
from solbench.results import store

PER_SAMPLE = ("sm_clock_mhz", "mem_clock_mhz", "power_w", "throttle_reasons")


def rounds_of(r):
    t = r.timing
    out = []
    for label in sorted(set(t.rounds)):
        idx = [i for i, x in enumerate(t.rounds) if x == label]
        cols = {k: tuple(getattr(t, k)[i] for i in idx) for k in PER_SAMPLE if getattr(t, k)}
        out.append(replace(r, timing=replace(t, samples=tuple(t.samples[i] for i in idx), rounds=(), **cols)))
    return out


def main() -> None:
    run = store.load(sys.argv[1])
    points = [rounds_of(r) for c in run.cases for r in c.impls if r.timing is not None and r.timing.rounds]
    start, n = time.perf_counter(), 0
    for per in points:
        for k in range(2, len(per) + 1):
            merge_rounds(per[:k])
            n += 1
    print(f"{n} merges of {len(points)} points: {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()
