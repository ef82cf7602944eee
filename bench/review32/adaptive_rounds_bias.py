"""The run loop's added rounds stop a point when its own spread looks small (allocation.rounds_needed:
3 rounds, then up to 4 more a pass while the t interval is wider than +-2%, cap 16). A saved run is a
baseline; the gate then tests over the same rounds. Does stopping on a small spread bias the gate?
Model: log round medians iid N(mu, sigma^2) (sigma: between-round sd incl. the median's sampling
error). Gate: pooled t, K = 1 (standalone gate on two stored runs), ratio exactly at 1 + tau."""
import math, sys
import numpy as np
from solbench.analysis.allocation import rounds_for_half_width
from solbench.analysis.sequential import t_stats, gate_codes, PASS, REGRESSION, UNDECIDED
TAU, TARGET, CAP = 0.05, 0.02, 16
def adaptive_side(rng, sigma, mu, points=1):
    """Rounds of a case's `points` points (same sigma) under the 'case' rule when points > 1, else 'own'."""
    x = [list(mu + rng.normal(0, sigma, 3)) for _ in range(points)]
    while True:
        s2 = [float(np.var(v, ddof=1)) for v in x]
        own = [max(len(v), min(CAP, rounds_for_half_width(s, TARGET, cap=CAP))) for v, s in zip(x, s2)]
        if points > 1:
            df = sum(len(v) - 1 for v in x); pooled = sum(s * (len(v) - 1) for v, s in zip(x, s2)) / df
            need = [max(o, len(v), rounds_for_half_width(pooled, TARGET, min_rounds=len(v), cap=CAP,
                                                        other_df=df - (len(v) - 1))) for o, v in zip(own, x)]
        else:
            need = own
        more = False
        for v, n in zip(x, need):
            if len(v) < n and len(v) < CAP:
                v += list(mu + rng.normal(0, sigma, min(4, n - len(v), CAP - len(v)))); more = True
        if not more:
            return [np.array(v) for v in x]
def sim(sigma, shift, trials, points=1, seed=0, fixed=None):
    rng = np.random.default_rng(seed)
    codes = []; rounds = []
    for _ in range(trials):
        if fixed:
            a = [mu for mu in [rng.normal(0, sigma, fixed)]]; b = [math.log(shift) + rng.normal(0, sigma, fixed)]
        else:
            a = adaptive_side(rng, sigma, 0.0, points); b = adaptive_side(rng, sigma, math.log(shift), points)
        d, se, df = t_stats(a[0], b[0])
        codes.append(int(gate_codes(np.array(d), np.array(se), np.array(df), TAU))); rounds.append((a[0].size, b[0].size))
    c = np.array(codes); r = np.array(rounds)
    return f"wrong REG {np.mean(c==REGRESSION):.2%}  PASS {np.mean(c==PASS):.2%}  UND {np.mean(c==UNDECIDED):.2%}  median rounds {np.median(r):.0f} share at 3: {np.mean(r==3):.0%}"
T = int(sys.argv[1]) if len(sys.argv) > 1 else 1500
for sigma in (0.008, 0.012, 0.02):
    print(f"sigma {sigma}: fixed 3v3  ", sim(sigma, 1.05, T, seed=1, fixed=3))
    print(f"sigma {sigma}: adaptive own ", sim(sigma, 1.05, T, seed=2))
    print(f"sigma {sigma}: adaptive case(3 impls)", sim(sigma, 1.05, T, points=3, seed=3))
