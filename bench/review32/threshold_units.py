import numpy as np
from tests.unit.factories import make_run
from solbench.analysis.gate import gate
from solbench.workload.schema import WorkloadSpec
print("gate_threshold field:", WorkloadSpec.model_fields["gate_threshold"])
rng = np.random.default_rng(0)
base = make_run({"c": {"k": list(1e-3*rng.lognormal(0, .01, 90))}}, rounds=3, gate_thresholds={"demo": 5})
cur = make_run({"c": {"k": list(2e-3*rng.lognormal(0, .01, 90))}}, rounds=3, gate_thresholds={"demo": 5})
v = gate(base, cur).verdicts[0]
print(v.verdict, v.threshold, v.threshold_source, round(v.ratio, 3), v.reason)
