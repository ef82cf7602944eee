"""run --gate-against schedule (baseline fixed at 3 rounds, current 3 -> 7 -> 11, K = 3) with the
two sides' between-round spreads unequal: pooled t vs a Welch t."""
import math
import numpy as np
from solbench.analysis.sequential import t_stats, gate_codes, PASS, REGRESSION, UNDECIDED
from solbench.analysis.gate import looks_for
from solbench.analysis.tdist import t_ppf
TAU=0.05; SD_SAMPLE=0.02
def rm(rng, trials, rounds, shift, sd_round):
    n = rng.integers(10, 21, size=(trials, rounds))
    noise = rng.normal(0.0, SD_SAMPLE, size=(trials, rounds, 20))
    noise = np.where(np.arange(20) < n[..., None], noise, np.nan)
    return math.log(shift) + rng.normal(0.0, sd_round, size=(trials, rounds)) + np.nanmedian(noise, axis=-1)
def welch(la, lb):
    ra, rb = la.shape[-1], lb.shape[-1]
    va = la.var(axis=-1, ddof=1) if ra > 1 else None
    vb = lb.var(axis=-1, ddof=1)
    se2 = va/ra + vb/rb
    df = se2**2 / ((va/ra)**2/(ra-1) + (vb/rb)**2/(rb-1))
    return lb.mean(-1)-la.mean(-1), np.sqrt(se2), df
def sim(shift, sd_base, sd_cur, first=3, rerun=8, step=4, trials=4000, seed=0, rule=t_stats):
    rng = np.random.default_rng(seed)
    cap = first + rerun
    base = rm(rng, trials, first, 1.0, sd_base); cur = rm(rng, trials, cap, shift, sd_cur)
    K = looks_for(0, rerun, step); at = [*range(first, cap, step), cap]
    assert len(at) == K
    v = np.full(trials, UNDECIDED)
    for r in at:
        d, se, df = rule(base, cur[:, :r])
        c = gate_codes(d, se, df, TAU, looks=K)
        new = (v == UNDECIDED) & (c != UNDECIDED); v[new] = c[new]
    return f"REG {np.mean(v==REGRESSION):.3%} PASS {np.mean(v==PASS):.3%} UND {np.mean(v==UNDECIDED):.3%}"
for sb, sc in [(0.015, 0.015), (0.03, 0.015), (0.03, 0.0075), (0.015, 0.03)]:
    for shift in (1.0, 1.05, 1.10):
        print(f"sd base {sb} cur {sc} ratio {shift}: pooled {sim(shift, sb, sc, seed=1)} | welch {sim(shift, sb, sc, seed=1, rule=welch)}")
