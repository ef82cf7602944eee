"""Offline simulation: Welch's form over moderated sides of unequal rounds, each side moderated
toward one prior fitted on the points' pooled variances (the rule before) or toward a prior fitted
on that side's own variances (``sequential.side_priors``, the rule now).

    PYTHONPATH=. python3 bench/review44/side_priors.py [TRIALS] [POINTS]

A baseline of 3 rounds; the current at 11 (one look, K = 1: ``gate`` of saved runs) or at 3, 7 and
11 (``run --gate-against``'s schedule, K = 3), a point leaving at its first verdict. POINTS (50) a
trial, each point's between-round sd 0.8% (alike at every point) or lognormal around it (log-sd
0.6, the H200's o_proj), within-round noise 2% over 10-20 samples; the sides spread alike, or one
side twice the other at every point. Each look fits the priors over the 50 points and decides with
``gate_codes``; the moderation is vectorized here and checked against ``moderated`` on the first
trial of each case. Prints the wrong verdicts at a true 1.05 (2.5% each allowed), PASS at 1.00 and
REGRESSION at 1.10.
"""

from __future__ import annotations

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

TAU = 0.05
POINTS = int(sys.argv[2]) if len(sys.argv) > 2 else 50


def rule(la, lb, own):
    """(d, se, df) of every point, as ``compare.moderate`` decides them (``own``: each side its prior)."""
    ra, rb = la.shape[1], lb.shape[1]
    va, vb = la.var(1, ddof=1), lb.var(1, ddof=1)
    d = lb.mean(1) - la.mean(1)
    sp = ((ra - 1) * va + (rb - 1) * vb) / (ra + rb - 2)
    prior = variance_prior(list(sp), [ra + rb - 2.0] * POINTS)
    assert prior is not None
    if ra == rb:
        post = (prior.df * prior.var + (ra + rb - 2) * sp) / (prior.df + ra + rb - 2)
        return d, np.sqrt(post * (1 / ra + 1 / rb)), np.full(POINTS, prior.df + ra + rb - 2)
    pa = pb = prior
    if own:
        pa = variance_prior(list(va), [ra - 1.0] * POINTS) or prior
        pb = variance_prior(list(vb), [rb - 1.0] * POINTS) or prior
    wa = (pa.df * pa.var + (ra - 1) * va) / (pa.df + ra - 1)
    wb = (pb.df * pb.var + (rb - 1) * vb) / (pb.df + rb - 1)
    ua, ub = wa / ra, wb / rb
    return d, np.sqrt(ua + ub), (ua + ub) ** 2 / (ua ** 2 / (ra - 1 + pa.df) + ub ** 2 / (rb - 1 + pb.df))


def check(la, lb, own, got):
    """The vectorized rule against ``log_ratio`` + ``moderated`` (+ ``side_priors``), point by point."""
    ts = [log_ratio([np.exp(x) * np.ones(3) for x in a], [np.exp(x) * np.ones(3) for x in b])
          for a, b in zip(la, lb, strict=True)]
    prior = variance_prior([t.sd_round ** 2 for t in ts], [t.spread_df for t in ts])
    ms = [moderated(t, prior, side_priors(ts) if own else None) for t in ts]
    ref = tuple(np.array([getattr(m, f) for m in ms]) for f in ("d", "se", "df"))
    same = all(np.allclose(x, y, rtol=1e-9, atol=1e-12) for x, y in zip(ref, got, strict=True))
    assert same, "the vectorized rule drifted from moderated()"


def trial(rng, shift, scales, logsd, own, schedule, first):
    sd = 0.008 * np.exp(rng.normal(0.0, logsd, POINTS))
    base = medians(rng, 3, 1.0, sd * scales[0])
    cur = medians(rng, schedule[-1], shift, sd * scales[1])
    verdict = np.full(POINTS, UNDECIDED)
    for r in schedule:
        got = rule(base, cur[:, :r], own)
        if first:
            check(base, cur[:, :r], own, got)
        codes = gate_codes(*got, TAU, looks=len(schedule))
        new = (verdict == UNDECIDED) & (codes != UNDECIDED)
        verdict[new] = codes[new]
    return verdict


def main() -> None:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    print(f"{trials} trials x {POINTS} points, baseline 3 rounds; wrong verdicts at 1.05 each allowed 2.5%")
    for schedule in ((11,), (3, 7, 11)):
        for logsd in (0.0, 0.6):
            for scales in ((1, 1), (2, 1), (1, 2)):
                row = []
                for own in (False, True):
                    v = {}
                    for shift in (1.0, 1.05, 1.10):
                        rng = np.random.default_rng(5)
                        v[shift] = np.concatenate([trial(rng, shift, scales, logsd, own, schedule, k == 0)
                                                   for k in range(trials)])
                    name = "own" if own else "pooled"
                    row.append(f"{name} prior: wrong REGRESSION {np.mean(v[1.05] == REGRESSION):5.2%}"
                               f" PASS {np.mean(v[1.05] == PASS):5.2%}, A/A PASS {np.mean(v[1.0] == PASS):6.2%},"
                               f" 10% caught {np.mean(v[1.10] == REGRESSION):6.2%}")
                print(f"current at {schedule}, point sd log-sd {logsd}, spread base x{scales[0]} cur x{scales[1]} | "
                      + " | ".join(row), flush=True)


if __name__ == "__main__":
    main()
