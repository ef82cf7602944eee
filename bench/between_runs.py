"""What rounds do not sample: per point, the spread of run medians over several saved runs of one tree
against what each run's own rounds predict for it.

    python3 bench/between_runs.py RUN.json[.gz] RUN.json[.gz] ...

Per gated point (byte-floor parts left out), on log times: sd_runs, the sd of the run medians;
se_in_run, the root-mean of each run's variance of its mean round median (var of its log round medians
/ its rounds); sd_extra = sqrt(max(0, sd_runs^2 - se_in_run^2)), the part of the spread between runs
that no run's rounds show; sd_round, the median over runs of the sd of one round's log median; and how
many runs' 95% CIs hold the grand median (the median of the run medians). Rows: the 12 largest sd_extra.
``solbench spread RUN...`` gives the pooled value the gate prices (``--run-sd``), from the runs' mean
log round medians.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import numpy as np

from solbench.analysis.rounds import group_by_round
from solbench.results import store

DECODE = re.compile(r"tokens=(1|16|64),")  # a decode case of o_proj and its kin (1-64 tokens)


def is_decode(case_id: str) -> bool:
    """Whether a case is a decode point (1, 16 or 64 tokens); the other bench analyses ask this too."""
    return DECODE.search(case_id) is not None


def gated_points(runs: list) -> list[tuple[tuple[str, str], list, list[np.ndarray], float, float]]:
    """Every gated point (byte-floor parts left out) that every run measured: (case id, implementation),
    its timings (one per run), each run's log round medians, the mean variance of a run's mean round
    median (within) and the variance of the log run medians (between)."""
    points: dict[tuple[str, str], list] = {}
    for run in runs:
        for case in run.cases:
            for impl in case.impls:
                if impl.status == "ok" and impl.timing is not None and not impl.protocol.get("part"):
                    points.setdefault((case.case_id, impl.name), []).append(impl.timing)
    found = []
    for key, timings in points.items():
        if len(timings) != len(runs):
            continue
        logs = [np.array([np.median(np.log(g)) for g in group_by_round(t.samples, t.rounds)]) for t in timings]
        within = float(np.mean([np.var(v, ddof=1) / v.size for v in logs]))
        between = float(np.var(np.log([t.median for t in timings]), ddof=1))
        found.append((key, timings, logs, within, between))
    return found


def main(paths: list[str]) -> None:
    runs = [store.load(Path(p)) for p in paths]
    rows = []
    for key, timings, logs, within, between in gated_points(runs):
        grand = float(np.exp(np.median(np.log([t.median for t in timings]))))
        held = sum(t.ci_low <= grand <= t.ci_high for t in timings)
        rows.append((math.sqrt(max(0.0, between - within)), math.sqrt(between), math.sqrt(within),
                     float(np.median([np.std(v, ddof=1) for v in logs])), held, key))
    rows.sort(reverse=True)
    print(f"{len(rows)} points over {len(runs)} runs")
    print("sd_extra  sd_runs  se_in_run  sd_round  CI holds  point")
    for extra, between, within, sd_round, held, (case, impl) in rows[:12]:
        print(f"{extra:7.2%}  {between:7.2%}  {within:8.2%}  {sd_round:7.2%}  {held}/{len(runs):<6}  {case} {impl}")
    extras = [r[0] for r in rows]
    print(f"sd_extra above 0.5%: {sum(e > 0.005 for e in extras)} of {len(rows)} points; "
          f"median sd_extra {float(np.median(extras)):.2%}")
    print(f"median over points: sd_runs {float(np.median([r[1] for r in rows])):.2%}, "
          f"sd_round {float(np.median([r[3] for r in rows])):.2%}; "
          f"decode points (1-64 tokens) sd_round {_decode_median(rows):.2%}")


def _decode_median(rows: list) -> float:
    """Median sd_round over the points whose case has 1, 16 or 64 tokens (nan where none has)."""
    decode = [r[3] for r in rows if is_decode(r[5][0])]
    return float(np.median(decode)) if decode else float("nan")


if __name__ == "__main__":
    main(sys.argv[1:])
