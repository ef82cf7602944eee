"""Offline simulation: the gate's moderated t over many points when the two sides have unequal
rounds, with the pooled form for unequal rounds (the rule before) and Welch's form (the rule now).

    PYTHONPATH=. python3 bench/review44/welch_moderated.py [TRIALS]

`run --gate-against` schedule: the baseline fixed at 3 rounds, the current at 3, 7 and 11 (K = 3
looks, each at alpha / 3 and 1 - 0.05 / 3), a point leaving at its first verdict. 50 points a
trial, each point's between-round sd drawn lognormal around 0.8% (p90 ~1.8%, the H200's o_proj),
within-round noise 2% over 10-20 samples; the priors are fitted over the 50 points at each look
(``compare.moderate``'s rule, through ``sequential.variance_prior``, ``side_priors`` and ``moderated``). Every point
has the same true ratio. Cases: both sides spread alike; the baseline's rounds spread twice the
current's; the current's twice the baseline's.
"""

from __future__ import annotations

import dataclasses
import math
import sys

import numpy as np
from rounds_noise import medians  # beside this script

from solbench.analysis.sequential import (
    PASS,
    REGRESSION,
    UNDECIDED,
    gate_codes,
    log_ratio,
    moderated,
    side_priors,
    variance_prior,
)

TAU, POINTS, FIRST, RERUN, STEP = 0.05, 50, 3, 8, 4
ORIGINAL = log_ratio


def pooled(*args, **kwargs):
    """The rule before Welch's form: without the sides' own variances, ``moderated`` pools them."""
    t = ORIGINAL(*args, **kwargs)
    return t if t is None else dataclasses.replace(t, var_a=None, var_b=None)


def trial(rng, shift, base_scale, cur_scale, welch):
    sd = np.exp(rng.normal(math.log(0.008), 0.6, POINTS))
    base = medians(rng, FIRST, 1.0, sd * base_scale)
    cur = medians(rng, FIRST + RERUN, shift, sd * cur_scale)
    at = [*range(FIRST, FIRST + RERUN, STEP), FIRST + RERUN]
    verdict = np.full(POINTS, UNDECIDED)
    for r in at:
        rule = log_ratio if welch else pooled
        ts = [rule([np.exp(base[i, k:k + 1]) for k in range(FIRST)],
                   [np.exp(cur[i, k:k + 1]) for k in range(r)]) for i in range(POINTS)]
        prior = variance_prior([t.sd_round ** 2 for t in ts], [t.spread_df for t in ts])
        sides = side_priors(ts)
        ts = [moderated(t, prior, sides) for t in ts]
        d, se, df = (np.array([getattr(t, f) for t in ts]) for f in ("d", "se", "df"))
        v = gate_codes(d, se, df, TAU, looks=len(at))
        new = (verdict == UNDECIDED) & (v != UNDECIDED)
        verdict[new] = v[new]
    return verdict


def main() -> None:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    print(f"{trials} trials x {POINTS} points; wrong verdicts at a true 1.05 are each allowed 2.5%")
    for base_scale, cur_scale in ((1, 1), (2, 1), (1, 2)):
        for shift in (1.0, 1.05, 1.10):
            row = []
            for welch in (False, True):
                rng = np.random.default_rng(7)
                v = np.concatenate([trial(rng, shift, base_scale, cur_scale, welch) for _ in range(trials)])
                row.append(f"{'welch' if welch else 'pooled'}: REGRESSION {np.mean(v == REGRESSION):6.2%} "
                           f"PASS {np.mean(v == PASS):6.2%} undecided {np.mean(v == UNDECIDED):6.2%}")
            print(f"spread base x{base_scale} cur x{cur_scale}, true {shift:.2f} | " + " | ".join(row))


if __name__ == "__main__":
    main()
