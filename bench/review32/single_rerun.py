"""run --gate-against between single-round runs: re-measurements pooled into the current's one
round (K = 1 + rerun = 9). The baseline's own process offset is never re-measured."""
import sys, numpy as np
from collections import Counter
from tests.unit.factories import make_run
from solbench.analysis.gate import gate_with_rerun
SD_PROC = float(sys.argv[2]) if len(sys.argv) > 2 else 0.015
def one(rng, shift, n=50):
    return make_run({"c": {"k": list(1e-3 * shift * np.exp(rng.normal(0, SD_PROC) + rng.normal(0, 0.02, n)))}})
T = int(sys.argv[1]) if len(sys.argv) > 1 else 200
for shift in (1.0, 1.03, 1.05, 1.06, 1.10):
    rng = np.random.default_rng(int(shift * 1000) + 1)
    cnt = Counter()
    for t in range(T):
        base, cur = one(rng, 1.0), one(rng, shift)
        g = gate_with_rerun(base, cur, lambda keys, n: one(rng, shift), 8, step=1, threshold=0.05, seed=t)
        cnt[g.verdicts[0].verdict] += 1
    print(f"proc sd {SD_PROC} true ratio {shift}: " + ", ".join(f"{k} {v/T:.1%}" for k, v in sorted(cnt.items())))
