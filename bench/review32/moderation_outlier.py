"""Per-point error of the moderated t for a point whose spread is much larger than the others'."""
import math, sys
import numpy as np
from solbench.analysis.sequential import t_stats, variance_prior, gate_codes, PASS, REGRESSION, FASTER
TAU = 0.05
def run(trials, noisy_sd, shift_noisy, n_noisy=1, points=50, base_sd=0.008, logsd=0.3, R=3, seed=0):
    rng = np.random.default_rng(seed)
    codes_own = []; codes_mod = []; d0s=[]
    for i in range(trials):
        sd = base_sd * np.exp(rng.normal(0, logsd, size=points))
        sd[:n_noisy] = noisy_sd
        shift = np.ones(points); shift[:n_noisy] = shift_noisy
        base = rng.normal(0, 1, size=(points, R)) * sd[:, None]
        cur = np.log(shift)[:, None] + rng.normal(0, 1, size=(points, R)) * sd[:, None]
        d, se, df = t_stats(base, cur)
        var = (se / math.sqrt(2.0 / R)) ** 2
        prior = variance_prior(var, df)
        post = (prior.df * prior.var + df * var) / (prior.df + df)
        cm = gate_codes(d, np.sqrt(post * 2.0 / R), df + prior.df, TAU)
        co = gate_codes(d, se, df, TAU)
        codes_mod.append(cm[:n_noisy]); codes_own.append(co[:n_noisy]); d0s.append(prior.df)
    cm = np.concatenate(codes_mod); co = np.concatenate(codes_own)
    return dict(d0_median=float(np.median(d0s)),
                mod_PASS=float(np.mean(cm == PASS)), mod_REG=float(np.mean(cm == REGRESSION)),
                own_PASS=float(np.mean(co == PASS)), own_REG=float(np.mean(co == REGRESSION)))
for noisy_sd in (0.02, 0.03, 0.04):
    for shift in (1.0, 1.05, 1.10):
        print(f"noisy sd {noisy_sd:.3f} true ratio {shift}:", run(1500, noisy_sd, shift, seed=int(noisy_sd*1000)+int(shift*100)))
print("5 noisy of 50 at sd 3%, ratio 1.05:", run(600, 0.03, 1.05, n_noisy=5, seed=9))
print("their uneven model (logsd .67), 1 point at sd 3%, ratio 1.05:", run(1500, 0.03, 1.05, logsd=0.67, seed=10))
