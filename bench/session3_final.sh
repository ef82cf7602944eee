#!/usr/bin/env bash
# The closing H200 call of the third session: every GPU test on the final tree, the GPU forgers,
# then the suite fixes: KernelBench problems that ran out of memory or failed on TF32 convolutions,
# the fused ModelNew and its cheating twin, SOL-ExecBench's examples and samples. $OUT/f.tar.gz.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:. || exit 1
export PYTHONUNBUFFERED=1 LIMIT=${LIMIT:-540} log=$OUT/steps.log
. bench/steps.sh
R=/tmp/f && mkdir -p $R
KB=.kb/KernelBench
step gpu-tests 250 bash -c "python3 -m pytest tests/gpu -q -p no:cacheprovider -rfEs 2>&1 | tail -n 40 > $R/gpu_tests.log"
tail -n 3 $R/gpu_tests.log | tee -a $log
step forgers 40 python3 -m solbench run tests/data/hostile/hostile_gpu.yaml -w gpu_forgers --repeat 1 -o $R/forgers.json -q
echo "forgers exit $?" | tee -a $log
step kb-fixed 60 timeout -s INT 80 python3 -m solbench run $KB/level1/19_ReLU.py $KB/level1/36_RMSNorm_.py \
  $KB/level1/50_conv_standard_2D__square_input__square_kernel.py $KB/level1/87_conv_pointwise_2D.py \
  --device cuda --timer cupti -i baseline --repeat 1 -o $R/kb-fixed.json -q
P2=$KB/level2/2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide.py
step solution 45 python3 -m solbench run $P2 --device cuda --timer cupti \
  --solution bench/data/kernelbench/2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide.py \
  --solution bench/data/kernelbench/cheat_2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide.py \
  -i baseline -i solution -i cheat_2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide --repeat 1 -o $R/kb2-solution.json -q
SOLS=$(find .kb/sol -name definition.json -printf '%h\n' | sort)
step sol-examples 50 timeout -s INT 90 python3 -m solbench run $SOLS --device cuda --repeat 1 --timeout 60 -o $R/solexec.json -q
cp $log $R/ && tar -czf $OUT/f.tar.gz -C /tmp f
python3 - <<'PY'
import json, os
from collections import Counter
for name in ("forgers.json", "kb-fixed.json", "kb2-solution.json", "solexec.json"):
    path = os.path.join("/tmp/f", name)
    if not os.path.exists(path):
        print(name, "missing"); continue
    d = json.load(open(path))
    st = Counter(i["status"] for c in d["cases"] for i in c["impls"])
    print(name, "complete" if d.get("complete", True) else "INCOMPLETE", "cases", len(d["cases"]), dict(st))
    for n in d.get("notes", []):
        if n.startswith("skipped"): print("  note:", n[:150])
    for c in d["cases"]:
        for i in c["impls"]:
            if name != "forgers.json" or i["status"] != "reward_hack":
                med = (i.get("timing") or {}).get("median")
                print(f"  {c['case_id'][:44]:44s} {i['name'][:22]:22s} {i['status']:11s} "
                      f"{'' if med is None else f'{med * 1e6:10.1f} us'} {i.get('message', '')[:90]}")
PY
grep "^===" $log
