import bisect, math, random, sys
sys.path.insert(0,'.')
from solbench.analysis.stats import median_ci, median
from solbench.measure.criteria import CIWidth
def run(draw, truemed, reps=1500, seed=1):
    rng=random.Random(seed); cov=0; ns=[]; cov_fixed=0
    crit=CIWidth()
    for _ in range(reps):
        s=[]
        while True:
            s.append(draw(rng))
            if len(s)>=10:
                r=crit.reason(s, 0.0)
                if r: break
            if len(s)>=2000: break
        lo,hi=median_ci(s); cov+= lo<=truemed<=hi; ns.append(len(s))
        # fixed-n comparison at the same n, fresh data
        f=[draw(rng) for _ in range(len(s))]; lo,hi=median_ci(f); cov_fixed+= lo<=truemed<=hi
    ns.sort()
    return cov/reps, cov_fixed/reps, ns[len(ns)//2], ns[0], ns[-1]
# normal 3%
print("normal sd3%", run(lambda r: 1+0.03*r.gauss(0,1), 1.0))
print("normal sd1.5%", run(lambda r: 1+0.015*r.gauss(0,1), 1.0))
# mixture: 80% tight (0.3%), 20% slow shifted +5% ; true median: solve numerically
import numpy as np
rs=np.random.default_rng(0); big=np.where(rs.random(4_000_000)<0.2, 1.05+0.01*rs.standard_normal(4_000_000), 1+0.003*rs.standard_normal(4_000_000))
tm=float(np.median(big))
print("mixture true med",tm, run(lambda r: (1.05+0.01*r.gauss(0,1)) if r.random()<0.2 else (1+0.003*r.gauss(0,1)), tm))
