"""Standalone `gate` between two single runs (what cli/compare.py does: unconfirmed(gate(...))).
Each run is one process with its own offset (sd 1.5%, the H200 between-round figure used by the
project's own simulations) and 50 samples of within-process noise sd 2%. A REGRESSION is demoted
to INCONCLUSIVE (one process a side cannot tell the code from the offset), and so are PASS and FASTER."""
import sys, numpy as np
from collections import Counter
from tests.unit.factories import make_run
from solbench.analysis.gate import gate, unconfirmed
def one(rng, shift, n=50, sd_proc=0.015):
    return make_run({"c": {"k": list(1e-3 * shift * np.exp(rng.normal(0, sd_proc) + rng.normal(0, 0.02, n)))}})
T = int(sys.argv[1]) if len(sys.argv) > 1 else 600
for shift in (1.0, 1.05, 1.06, 1.08, 1.10):
    rng = np.random.default_rng(int(shift * 1000))
    cnt = Counter()
    for t in range(T):
        g = unconfirmed(gate(one(rng, 1.0), one(rng, shift), threshold=0.05, seed=t),
                        verdicts=("REGRESSION", "PASS", "FASTER"))  # as cli/compare.py
        cnt[g.verdicts[0].verdict] += 1
    print(f"true ratio {shift}: " + ", ".join(f"{k} {v/T:.1%}" for k, v in sorted(cnt.items())))
