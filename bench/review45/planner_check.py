"""Does the gate decide at the rounds its advice names? (forty-fifth session)

    PYTHONPATH=. python3 bench/review45/planner_check.py      # about 2 minutes on one core

Thirteen points, so the gate moderates: twelve at 3 rounds a side with spreads around 2%, and one,
``t``, swept over the baseline's and the current run's rounds, each side's spread of the log round
medians (exact, by construction) and the true ratio, at a 5% threshold with no run offset. For every
sweep point that the gate leaves INCONCLUSIVE, its two pieces of advice are followed on the real gate:
``current_rounds`` (re-measure the current run alone: the current side gets that many more rounds)
and ``more_rounds`` (that many more rounds per side). Counted: advice that leaves the case still
INCONCLUSIVE (``*_undecided``: it named too few), and advice where one round fewer would already have
decided (``*_late``: it named too many).
"""

import itertools
from dataclasses import replace

import numpy as np

from solbench.analysis.gate import gate
from tests.unit.factories import make_run


def med(rounds, ratio, sd):
    """Round medians with exactly ``sd`` between them (log), around ``ratio``."""
    z = np.linspace(-1.0, 1.0, rounds)
    z = (z - z.mean()) / z.std(ddof=1)
    return 1e-3 * ratio * np.exp(sd * z)


def run(cases):
    runs = [make_run({c: {"k": [m * (1.0 + 1e-4 * j) for m in med(*s) for j in (-1, 0, 1, 2, 3)]}}, rounds=s[0])
            for c, s in cases.items()]
    return replace(runs[0], cases=tuple(r.cases[0] for r in runs))


OTHERS = 0.02 * np.exp(np.random.default_rng(0).normal(0.0, 0.3, 12))


def verdict(rb, rc, sdb, sdc, ratio):
    base = run({**{f"p{i}": (3, 1.0, s) for i, s in enumerate(OTHERS)}, "t": (rb, 1.0, sdb)})
    cur = run({**{f"p{i}": (3, 1.0 + 0.001 * (i - 6), s) for i, s in enumerate(OTHERS)}, "t": (rc, ratio, sdc)})
    return next(v for v in gate(base, cur, threshold=0.05, run_sd=0.0).verdicts if v.case_id == "t")


def main():
    bad = {"alone_undecided": [], "alone_late": [], "side_undecided": [], "side_late": []}
    n = 0
    sds = (0.005, 0.01, 0.02, 0.04, 0.06)
    for rb, rc, sdb, sdc, ratio in itertools.product((3, 6), (2, 3, 5, 9), sds, sds,
                                                     (0.99, 1.02, 1.03, 1.075, 1.09, 1.11)):
        v = verdict(rb, rc, sdb, sdc, ratio)
        if v.verdict != "INCONCLUSIVE":
            continue
        n += 1
        a = v.current_rounds
        if a is not None and a <= 40:
            if verdict(rb, rc + a, sdb, sdc, ratio).verdict == "INCONCLUSIVE":
                bad["alone_undecided"].append((rb, rc, sdb, sdc, ratio, a))
            elif a > 1 and verdict(rb, rc + a - 1, sdb, sdc, ratio).verdict != "INCONCLUSIVE":
                bad["alone_late"].append((rb, rc, sdb, sdc, ratio, a))
        k = v.more_rounds
        if k is not None and k <= 40:
            if verdict(rb + k, rc + k, sdb, sdc, ratio).verdict == "INCONCLUSIVE":
                bad["side_undecided"].append((rb, rc, sdb, sdc, ratio, k))
            elif k > 1 and verdict(rb + k - 1, rc + k - 1, sdb, sdc, ratio).verdict != "INCONCLUSIVE":
                bad["side_late"].append((rb, rc, sdb, sdc, ratio, k))
    print("inconclusive cases checked:", n)
    for key, v in bad.items():
        print(key, len(v), v[:8])


if __name__ == "__main__":
    main()
