"""Offline: `gate` over every ordered pair of saved runs of one tree, with the gate's rule as it is
and with the pooled t kept for sides of unequal rounds (the rule before Welch's form).

    PYTHONPATH=. python3 bench/gate_pairs_replay.py SET_DIR [SET_DIR ...]

Each SET_DIR holds five-*.json or five-*.json.gz (runs of one tree, measured one after another: the
`five` part of bench/session26.sh). Standalone `gate` (one look, nothing re-measured) at the
workloads' recorded thresholds, the default run sd (0.2%), in process. Prints, per set and in
all, the pairs that exit 3 and the REGRESSION and INCONCLUSIVE verdicts under each rule.
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
from pathlib import Path

from solbench.analysis import compare, sequential
from solbench.analysis.gate import gate
from solbench.analysis.thresholds import DEFAULT_RUN_SD
from solbench.results import store

ORIGINAL = compare.log_ratio


def pooled_only(*args, **kwargs):
    """The rule before Welch's form: without the sides' own variances, ``moderated`` pools them."""
    t = ORIGINAL(*args, **kwargs)
    return t if t is None else dataclasses.replace(t, var_a=None, var_b=None)


def replay(runs) -> dict[str, tuple[int, int, int]]:
    out = {}
    for name, rule in (("pooled", pooled_only), ("welch", ORIGINAL)):
        compare.log_ratio = rule
        exits = reg = inc = 0
        for a, b in itertools.permutations(runs, 2):
            g = gate(a, b, run_sd=DEFAULT_RUN_SD)
            exits += g.exit_code == 3
            reg += g.count("REGRESSION")
            inc += g.count("INCONCLUSIVE")
        out[name] = (exits, reg, inc)
    compare.log_ratio = ORIGINAL
    return out


def main() -> None:
    total = {"pooled": [0, 0, 0], "welch": [0, 0, 0]}
    pairs = 0
    for d in map(Path, sys.argv[1:]):
        paths = {p.name.split(".")[0]: p for p in sorted(d.iterdir(), reverse=True)  # a .json before its .json.gz
                 if p.name.startswith("five-") and p.name.split(".")[0][5:].isdigit()
                 and p.name.endswith((".json", ".json.gz"))}
        runs = [store.load(paths[k]) for k in sorted(paths)]  # store.load reads .json.gz too
        got = replay(runs)
        pairs += len(runs) * (len(runs) - 1)
        line = []
        for name, (e, r, i) in got.items():
            total[name] = [x + y for x, y in zip(total[name], (e, r, i), strict=True)]
            line.append(f"{name}: {e} pairs exit 3, {r} REGRESSION, {i} INCONCLUSIVE")
        print(f"{d} ({len(runs)} runs): " + "; ".join(line))
    for name, (e, r, i) in total.items():
        print(f"all {pairs} pairs, {name}: {e} exit 3, {r} REGRESSION, {i} INCONCLUSIVE verdicts")


if __name__ == "__main__":
    assert sequential.log_ratio is ORIGINAL
    main()
