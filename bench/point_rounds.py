"""One line on a saved run's rounds: points, point-rounds, and how many points stopped at each count.

    python3 bench/point_rounds.py RUN.json[.gz]
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from solbench.results.store import load


def main(path: str) -> str:
    run = load(Path(path))
    rounds = [i.timing.n_rounds for c in run.cases for i in c.impls if i.timing is not None]
    stops = Counter(rounds)
    shown = ", ".join(f"{k}:{stops[k]}" for k in sorted(stops))
    return f"{len(rounds)} points, {sum(rounds)} point-rounds (rounds:points {shown})"


if __name__ == "__main__":
    print(main(sys.argv[1]))
