"""Does the gate decide at the rounds its note names? 13 points (moderated), target point 't'
with exact log-round-median sds; current rounds alone (current_rounds) and per side (more_rounds)."""
import itertools
from dataclasses import replace
import numpy as np
from solbench.analysis.gate import gate
from tests.unit.factories import make_run

def med(rounds, ratio, sd):
    z = np.linspace(-1.0, 1.0, rounds); z = (z - z.mean()) / z.std(ddof=1)
    return 1e-3 * ratio * np.exp(sd * z)

def run(cases):
    runs = [make_run({c: {"k": [m * (1.0 + 1e-4 * j) for m in med(*s) for j in (-1, 0, 1, 2, 3)]}}, rounds=s[0])
            for c, s in cases.items()]
    return replace(runs[0], cases=tuple(r.cases[0] for r in runs))

others = 0.02 * np.exp(np.random.default_rng(0).normal(0.0, 0.3, 12))
def verdict(rb, rc, sdb, sdc, ratio):
    base = run({**{f"p{i}": (3, 1.0, s) for i, s in enumerate(others)}, "t": (rb, 1.0, sdb)})
    cur = run({**{f"p{i}": (3, 1.0 + 0.001 * (i - 6), s) for i, s in enumerate(others)}, "t": (rc, ratio, sdc)})
    return next(v for v in gate(base, cur, threshold=0.05, run_sd=0.0).verdicts if v.case_id == "t")

bad = {"alone_undecided": [], "alone_late": [], "side_undecided": [], "side_late": []}
n = 0
for rb, rc, sdb, sdc, ratio in itertools.product((3, 6), (2, 3, 5, 9), (0.005, 0.01, 0.02, 0.04, 0.06), (0.005, 0.01, 0.02, 0.04, 0.06), (0.99, 1.02, 1.03, 1.075, 1.09, 1.11)):
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
