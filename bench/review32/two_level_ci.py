import sys; sys.path.insert(0,'.')
import numpy as np
from solbench.analysis.rounds import hierarchical_ci
def sim(R, sb, sw, n, reps=300, seed=0, nboot=1000):
    rng=np.random.default_rng(seed); cov=0; widths=[]
    for i in range(reps):
        groups=[np.exp(sb*rng.standard_normal()+sw*rng.standard_normal(n)) for _ in range(R)]
        est,lo,hi=hierarchical_ci(groups, n_boot=nboot, seed=i)
        cov+= lo<=1.0<=hi; widths.append(np.log(hi/lo)/2)
    return cov/reps, float(np.median(widths))
for R in (2,3,5,8):
    print(R, "sb2% sw1% n30", sim(R,0.02,0.01,30), " sb0 sw1% n30", sim(R,0.0,0.01,30), " sb0.5% sw3% n15", sim(R,0.005,0.03,15))
