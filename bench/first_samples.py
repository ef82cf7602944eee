"""How a round's first timed samples read against its later ones, in saved runs.

For every point-round with at least 20 samples (the floor left out: it is never verified), sample k
(k = 0..11) over the median of samples 12 and on; the median of that ratio over point-rounds, for
first rounds and for later ones. A first round verifies its first four samples (a point's
verification rate starts at 4 of the first 4); later rounds verify few. Also each run's share of
points whose first round's median lies above the median of its later rounds' medians.

    python3 bench/first_samples.py RUN.json[.gz] ...
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys

K = 12


def load(path: str) -> dict:
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def rounds_of(timing: dict) -> list[list[float]]:
    by: dict[int, list[float]] = {}
    for s, k in zip(timing["samples"], timing["rounds"], strict=True):
        by.setdefault(k, []).append(s)
    return [by[k] for k in sorted(by)]


def main(paths: list[str]) -> None:
    profile: dict[str, list[list[float]]] = {"first": [[] for _ in range(K)], "later": [[] for _ in range(K)]}
    print(f"{'run':48s} points  first round slower  median offset")
    for path in paths:
        run = load(path)
        offsets = []
        for case in run["cases"]:
            for impl in case["impls"]:
                t = impl.get("timing")
                if not t or not t.get("rounds") or impl["name"] == "floor":
                    continue
                rounds = rounds_of(t)
                for k, samples in enumerate(rounds):
                    if len(samples) >= 20:
                        ref = statistics.median(samples[K:])
                        for j in range(K):
                            profile["first" if k == 0 else "later"][j].append(samples[j] / ref - 1)
                if len(rounds) >= 3:
                    medians = [statistics.median(r) for r in rounds]
                    offsets.append(medians[0] / statistics.median(medians[1:]) - 1)
        if offsets:
            slower = sum(o > 0 for o in offsets)
            print(f"{path[-48:]:48s} {len(offsets):6d}  {slower:6d} of {len(offsets):<4d}  "
                  f"{100 * statistics.median(offsets):+.2f}%")
    print("\nsample k over the median of samples 12 and on (median over point-rounds, %):")
    print("round    n    " + " ".join(f"{j:>5d}" for j in range(K)))
    for name, cols in profile.items():
        if cols[0]:
            print(f"{name:6s} {len(cols[0]):4d}  " + " ".join(f"{100 * statistics.median(c):+5.1f}" for c in cols))


if __name__ == "__main__":
    main(sys.argv[1:])
