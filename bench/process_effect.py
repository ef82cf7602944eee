"""Offline: does a worker process run all of its points slow or fast together, or each point apart?

    python3 bench/process_effect.py RUN.json RUN.json ...

In each of a run's first three rounds one worker process times every case of an implementation
(solbench.execute.session: one pass a round, a worker per implementation and slot). So round r of
the points (case, implementation) of one implementation share a process. For each run and
implementation with two or more such points, the log round medians of rounds 1-3, each point
centred on its own mean, are split into:

- the round's effect on every implementation of that run (a pass: the time, the GPU's state);
- an implementation's process, beyond its round (that process ran all its points slow or fast);
- each point's own round-to-round scatter (a round median's sampling error, and state a process
  has for one point and not another).

Prints the sums of squares pooled over runs, the square root of each part's mean square, the F
ratios of process against point and of round against process, and how the rounds that
read more than 3% from their point's mean fall: with their process's other points moving the same
way (by more than 1.5%), or alone. It reads saved runs only.
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gate_rounds import round_logs  # a sibling script

ROUNDS = 3  # the rounds every point has, one pass each: their processes are shared across cases
FAR, ALONG = 0.03, 0.015


def process_tables(path: str) -> dict[str, np.ndarray]:
    """implementation -> cases x ROUNDS log round medians (cases with ROUNDS rounds or more;
    gate_rounds.round_logs)."""
    rows: dict[str, list[np.ndarray]] = defaultdict(list)
    for key, logs in round_logs(path).items():
        if logs.size >= ROUNDS:
            rows[key.rsplit("/", 1)[1]].append(logs[:ROUNDS])
    return {name: np.vstack(v) for name, v in rows.items() if len(v) >= 2}


def main(paths: list[str]) -> None:
    ss = dict.fromkeys(("pass", "process", "point"), 0.0)
    df = dict.fromkeys(("pass", "process", "point"), 0)
    far_along = far_alone = processes = 0
    for path in paths:
        effects, weights = [], []
        for table in process_tables(path).values():
            d = table - table.mean(axis=1, keepdims=True)  # each point centred on its own mean
            effect = d.mean(axis=0)  # the round effect its process shows on every point
            ss["point"] += float(((d - effect) ** 2).sum())
            df["point"] += (d.shape[0] - 1) * (ROUNDS - 1)
            effects.append(effect)
            weights.append(d.shape[0])
            processes += 1
            for i, k in zip(*np.nonzero(np.abs(d) > math.log1p(FAR)), strict=True):
                others = np.delete(d[:, k], i)
                moved = (np.sign(others) == np.sign(d[i, k])) & (np.abs(others) > math.log1p(ALONG))
                far_along, far_alone = (far_along + 1, far_alone) if moved.any() else (far_along, far_alone + 1)
        if len(effects) < 2:
            continue
        e, w = np.vstack(effects), np.asarray(weights, float)[:, None]
        shared = (w * e).sum(axis=0) / w.sum()  # the pass: every implementation's process in that round
        ss["pass"] += float(w.sum() * (shared ** 2).sum())
        df["pass"] += ROUNDS - 1
        ss["process"] += float((w * (e - shared) ** 2).sum())
        df["process"] += (e.shape[0] - 1) * (ROUNDS - 1)
    if not df["process"]:
        print("no run with two implementations of two or more points of three rounds")
        return
    ms = {k: ss[k] / df[k] for k in ss}
    print(f"{len(paths)} runs, {processes} (run, implementation) worker processes per round, rounds 1-{ROUNDS}; "
          "each point's log round medians centred on its mean")
    print("part                                                   SS        df  sqrt(mean square)")
    labels = {"pass": "the round, shared by every implementation (time, GPU)",
              "process": "an implementation's process, beyond its round",
              "point": "each point's own (sampling, per-point state)"}
    for k, label in labels.items():
        print(f"{label:54} {ss[k]:.3e} {df[k]:5d}  {math.sqrt(ms[k]):.2%}")
    points = df["point"] / (ROUNDS - 1) + processes  # the points of all processes
    c = points / processes  # points per process, on average
    sd_process = math.sqrt(max(ms["process"] - ms["point"], 0.0) / c)
    print(f"as variance components: a process moves each of its {c:.1f} points (on average) by sd ~{sd_process:.2%}; "
          f"a point's own round-to-round sd ~{math.sqrt(ms['point']):.2%}")
    for a, b in (("process", "point"), ("pass", "process")):
        f = ms[a] / ms[b]
        print(f"F {a} / {b} = {f:.2f}, p = {float(stats.f.sf(f, df[a], df[b])):.2g}")
    print(f"rounds more than {FAR:.0%} from their point's mean: {far_along} with another point of the same process "
          f"moving the same way by more than {ALONG:.1%}, {far_alone} alone")


if __name__ == "__main__":
    main(sys.argv[1:])
