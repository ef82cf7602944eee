"""End to end through gate(): 50 cases measured in 3 rounds a side; 49 quiet (between-round sd
lognormal around 0.8%), one noisy (sd 3%, like the README's fp8 decode points) whose true ratio is
on the threshold (1.05). Counts the noisy case's wrong verdicts; its share is 2.5% each."""
import sys, numpy as np
from collections import Counter
from tests.unit.factories import make_run
from solbench.analysis.gate import gate
R, N, CASES = 3, 15, 50
def side(rng, sds, shift_noisy):
    out = {}
    for c, sd in enumerate(sds):
        s = []
        for r in range(R):
            off = rng.normal(0, sd) + (np.log(shift_noisy) if c == 0 else 0.0)
            s += list(1e-3 * np.exp(off + rng.normal(0, 0.005, N)))
        out[f"c{c}"] = {"k": s}
    return make_run(out, rounds=R)
T = int(sys.argv[1]) if len(sys.argv) > 1 else 800
for shift in (1.05, 1.0/1.05, 1.03):
    rng = np.random.default_rng(7)
    cnt = Counter(); pri = []
    for t in range(T):
        sds = 0.008 * np.exp(rng.normal(0, 0.3, CASES)); sds[0] = 0.03
        g = gate(side(rng, sds, 1.0), side(rng, sds, shift), threshold=0.05)
        cnt[g.verdicts[0].verdict] += 1
    print(f"noisy case true ratio {shift:.4f}: {{{', '.join(f'{k}: {v/T:.2%}' for k, v in cnt.items())}}}")
