#!/usr/bin/env bash
# Issue 19 on the H200 (one device call): KernelBench level 1 (a user's checkout, carried as the
# ignored folder .kb/), eager for every problem and torch.compile for the first ones, the CUPTI
# cross-check, a fused ModelNew and a cheating one, and SOL-ExecBench's examples and samples.
# Results in $OUT/s.tar.gz, a summary table last.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:. || exit 1
export PYTHONUNBUFFERED=1 LIMIT=${LIMIT:-500} log=$OUT/steps.log
. bench/steps.sh
R=/tmp/s && mkdir -p $R
KB=.kb/KernelBench
L1=$(ls $KB/level1/*.py | sort -t/ -k4 -n)
FIRST=$(for f in $L1; do echo $f; done | sort -V | head -n ${COMPILED_N:-12})
step kb1-eager 200 timeout -s INT 210 python3 -m solbench run $KB/level1 --device cuda --timer cupti -i baseline --repeat 1 \
  --timeout 120 -o $R/kb1-eager.json -q
step kb1-compiled 120 timeout -s INT 130 python3 -m solbench run $FIRST --device cuda --timer cupti -i baseline -i compiled --repeat 1 \
  --timeout 120 -o $R/kb1-compiled.json -q
step crosscheck 60 timeout 70 python3 bench/kernelbench_cupti_crosscheck.py $KB/level1 -n 10 --out $R/crosscheck.json
P2=$KB/level2/2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide.py
step solution 60 python3 -m solbench run $P2 --device cuda --solution bench/data/kernelbench/2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide.py \
  --solution bench/data/kernelbench/cheat_2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide.py --repeat 1 -o $R/kb2-solution.json -q
SOLS=$(find .kb/sol -name definition.json -printf '%h\n' | sort)
step sol-examples 60 timeout -s INT 80 python3 -m solbench run $SOLS --device cuda --repeat 1 --timeout 120 -o $R/solexec.json -q
cp $log $R/ && tar -czf $OUT/s.tar.gz -C /tmp s
python3 - <<'PY'
import json, os
from collections import Counter
for name in ("kb1-eager.json", "kb1-compiled.json", "kb2-solution.json", "solexec.json"):
    path = os.path.join("/tmp/s", name)
    if not os.path.exists(path):
        print(name, "missing"); continue
    d = json.load(open(path))
    st = Counter(i["status"] for c in d["cases"] for i in c["impls"])
    print(name, "complete" if d.get("complete", True) else "INCOMPLETE", "cases", len(d["cases"]), dict(st),
          "wall", d.get("harness", {}).get("wall_s"))
    for c in d["cases"]:
        for i in c["impls"]:
            if i["status"] != "ok" or name == "kb2-solution.json":
                med = (i.get("timing") or {}).get("median")
                print(f"  {c['case_id'][:48]:48s} {i['name']:14s} {i['status']:11s} "
                      f"{'' if med is None else f'{med * 1e6:10.1f} us'} {i.get('message', '')[:100]}")
PY
grep "^===" $log
