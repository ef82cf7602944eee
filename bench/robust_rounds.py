"""Offline: would a trimmed mean over rounds decide more points than the mean, on saved runs?

    python3 bench/robust_rounds.py RUN.json RUN.json ...   (several runs of the same workloads)

A point measured in rounds is judged by the gate on its log round medians (mean, t interval). One
slow process among a point's rounds (+11% in 2 of 16 rounds, issue 16, twenty-seventh session)
widens that interval a lot. This compares, on the same saved rounds, the gate's own interval
(difference of mean log round medians, pooled-variance t: solbench.analysis.sequential.t_stats),
Welch's t interval, and the 20%-trimmed mean with Yuen's interval (scipy.stats.ttest_ind(trim=0.2)),
over every ordered pair of runs and every point present in both:

- decided: the interval of the ratio lies inside [1/1.05, 1.05] (the same) or outside it; else
  undecided (the gate's CI rule at a 5% threshold, without its rank test);
- coverage: each run's one-sample 95% interval (plain t, or Yuen's trimmed) holds the grand value
  of all runs (mean, or trimmed mean, of every round of every run).

First it counts the rounds whose median lies more than 3% (and 5%) from their point's median round
(the rounds the gate and the run notes name: solbench.analysis.pooling.rounds_apart).

It reads saved runs only; nothing here changes the gate. Error rates under optional stopping are
what a change to the gate must keep (tests/unit/test_gate*.py), and this does not measure them.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gate_rounds import round_logs  # a sibling script

TAU = 0.05
TRIM = 0.2


def log_round_medians(path: str) -> dict[str, np.ndarray]:
    """point key -> its log round medians, for points with three rounds or more (gate_rounds.round_logs)."""
    return {k: v for k, v in round_logs(path).items() if v.size >= 3}


def verdict(low: float, high: float) -> str:
    lo, hi = math.exp(low), math.exp(high)
    if lo >= 1 / (1 + TAU) and hi <= 1 + TAU:
        return "same"
    if lo > 1 + TAU or hi < 1 / (1 + TAU):
        return "different"
    return "undecided"


def one_sample(x: np.ndarray, trim: float) -> tuple[float, float, float]:
    """(centre, low, high) of a 95% interval: plain t (trim 0) or Yuen's trimmed t."""
    if trim == 0:
        m, se, df = x.mean(), x.std(ddof=1) / math.sqrt(x.size), x.size - 1
    else:
        g = math.floor(trim * x.size)
        m = stats.trim_mean(x, trim)
        w = np.clip(x, np.sort(x)[g], np.sort(x)[x.size - 1 - g])  # winsorized
        h = x.size - 2 * g
        se, df = w.std(ddof=1) / ((1 - 2 * trim) * math.sqrt(x.size)), h - 1
    q = stats.t.ppf(0.975, df) * se
    return m, m - q, m + q


def main(paths: list[str]) -> None:
    runs = [log_round_medians(p) for p in paths]
    devs = np.concatenate([np.exp(x - np.median(x)) - 1 for r in runs for x in r.values()])
    print(f"{devs.size} point-rounds: {(devs > 0.03).sum()} more than 3% slow, {(devs < -0.03).sum()} more than "
          f"3% fast, {(devs > 0.05).sum()} more than 5% slow (against their point's median round)")
    keys = sorted(set.intersection(*(set(r) for r in runs)))
    from solbench.analysis.sequential import t_stats

    names = ("mean, pooled t (gate)", "mean, Welch t", "20% trimmed, Yuen")
    counts = {name: defaultdict(int) for name in names}
    for a, b in itertools.permutations(range(len(runs)), 2):
        for k in keys:
            x, y = runs[a][k], runs[b][k]
            d, se, df = (float(v) for v in t_stats(x, y))
            q = stats.t.ppf(0.975, df) * se
            counts[names[0]][verdict(d - q, d + q)] += 1
            for name, trim in ((names[1], 0.0), (names[2], TRIM)):
                ci = stats.ttest_ind(y, x, equal_var=False, trim=trim).confidence_interval(0.95)
                counts[name][verdict(ci.low, ci.high)] += 1
    pairs = len(runs) * (len(runs) - 1)
    print(f"{len(keys)} points in rounds over {len(runs)} runs; {pairs} ordered pairs, {pairs * len(keys)} verdicts")
    for name, c in counts.items():
        print(f"  {name:22s} same {c['same']:5d}  different {c['different']:4d}  undecided {c['undecided']:4d}")
    for name, trim in (("mean, plain t", 0.0), ("20% trimmed, Yuen", TRIM)):
        held = total = 0
        for k in keys:
            every = np.concatenate([r[k] for r in runs])
            grand = every.mean() if trim == 0 else stats.trim_mean(every, trim)
            for r in runs:
                _, lo, hi = one_sample(r[k], trim)
                held += lo <= grand <= hi
                total += 1
        print(f"  coverage, {name:18s} each run's 95% interval holds the grand value: {held} of {total}")


if __name__ == "__main__":
    main(sys.argv[1:])
