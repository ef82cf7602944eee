"""ab's schedule (3 rounds a side, +4 a look, up to 15, K = 4) with the gate's moderation, 50 points:
45 quiet (between-round sd lognormal around 0.8%, true ratio 1.0) and 5 noisy (sd 3%) whose true ratio
is on the threshold. Noisy points' wrong verdicts, each with a 2.5% share. Compared: no moderation."""
import math, sys
import numpy as np
from solbench.analysis.sequential import t_stats, variance_prior, gate_codes, PASS, REGRESSION, UNDECIDED
TAU, P, NOISY = 0.05, 50, 5
def trial(rng, moderate):
    sd = 0.008 * np.exp(rng.normal(0, 0.3, P)); sd[:NOISY] = 0.03
    shift = np.zeros(P); shift[:NOISY] = math.log(1.05)
    base = rng.normal(0, 1, (P, 15)) * sd[:, None]; cur = shift[:, None] + rng.normal(0, 1, (P, 15)) * sd[:, None]
    rounds = np.full(P, 3); verdict = np.full(P, UNDECIDED)
    for look in range(4):
        d = np.empty(P); se = np.empty(P); df = np.empty(P)
        for i in range(P):
            r = rounds[i]; a, b, c = t_stats(base[i, :r], cur[i, :r]); d[i], se[i], df[i] = a, b, c
        if moderate:
            var = se**2 / (2.0 / rounds)
            pr = variance_prior(var, df)
            post = (pr.df * pr.var + df * var) / (pr.df + df)
            se, df = np.sqrt(post * 2.0 / rounds), df + pr.df
        v = gate_codes(d, se, df, TAU, looks=4)
        new = (verdict == UNDECIDED) & (v != UNDECIDED); verdict[new] = v[new]
        rounds = np.where(verdict == UNDECIDED, np.minimum(rounds + 4, 15), rounds)
    return verdict[:NOISY]
T = int(sys.argv[1]) if len(sys.argv) > 1 else 600
for mod in (False, True):
    rng = np.random.default_rng(21)
    v = np.concatenate([trial(rng, mod) for _ in range(T)])
    print(f"moderation {mod}: noisy point at 1.05: wrong REG {np.mean(v==REGRESSION):.2%}, wrong PASS {np.mean(v==PASS):.2%}")
