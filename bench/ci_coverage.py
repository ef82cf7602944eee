"""How often a point's reported 95% interval over rounds (analysis.rounds.hierarchical_ci, the
two-level bootstrap of the median of round medians) holds the true median, on synthetic rounds.

Each round: 20 log-normal samples (within-round sd 2%) around the round's own offset, drawn as
normal (sd 1%), heavy-tailed (Student t, 3 df, sd 1%) or with odd processes (sd 0.5%, and 15% of
rounds 4% slow). Seeded; prints coverage and the median half-width for R = 2..16 rounds.
Usage: python bench/ci_coverage.py [TRIALS]   (800: about 4 minutes on 2 CPUs)"""

import math
import sys

import numpy as np

from solbench.analysis.rounds import hierarchical_ci

trials = int(sys.argv[1]) if len(sys.argv) > 1 else 800
rng = np.random.default_rng(7)


def offsets(kind: str, r: int) -> np.ndarray:
    if kind == "normal":
        return rng.normal(0, 0.01, r)
    if kind == "t3":
        return 0.01 * rng.standard_t(3, r) / math.sqrt(3)
    return rng.normal(0, 0.005, r) + np.where(rng.random(r) < 0.15, 0.04, 0.0)


for kind in ("normal", "t3", "odd"):
    many = offsets(kind, 200_000)  # the population median of a round's offset
    truth = math.exp(float(np.median(many))) if kind == "odd" else 1.0
    for r in (2, 3, 4, 5, 6, 8, 12, 16):
        cover, halves = 0, []
        for trial in range(trials):
            groups = [np.exp(o + rng.normal(0, 0.02, 20)) for o in offsets(kind, r)]
            med, lo, hi = hierarchical_ci(groups, n_boot=500, seed=trial)
            cover += lo <= truth <= hi
            halves.append(math.log(hi / med))
        print(f"{kind:6s} R={r:2d}: coverage {cover / trials:6.1%}, half-width median {np.median(halves):.2%}",
              flush=True)
