#!/usr/bin/env bash
# The closing H200 call of a session: every GPU test on the final tree, the GPU forgers beside honest
# implementations, two o_proj runs that add rounds where needed (--max-rounds 6, ±2% over rounds) and
# the gate between them, then the rest of the attention suite (no honest implementation may be flagged).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:. || exit 1
export PYTHONUNBUFFERED=1 LIMIT=${LIMIT:-575} log=$OUT/steps.log
. bench/steps.sh
R=/tmp/final && mkdir -p $R
step gpu-tests 150 bash -c "python3 -m pytest tests/gpu -q -p no:cacheprovider -rfEs 2>&1 | tail -n 60 > $R/gpu_tests.log"
tail -n 2 $R/gpu_tests.log | tee -a $log
step forgers 40 python3 -m solbench run tests/data/hostile/hostile_gpu.yaml -w gpu_forgers --repeat 1 -o $R/forgers.json -q
for n in 1 2; do
  step oproj-a$n 100 python3 -m solbench run workloads/attn.yaml -w o_proj --max-rounds 6 --rounds-target 0.02 \
    -o $R/oproj-a$n.json -q
done
[ -f $R/oproj-a2.json ] && python3 -m solbench gate --baseline $R/oproj-a1.json --current $R/oproj-a2.json 2>&1 | tail -n 4 | tee -a $log
step attn-rest 60 python3 -m solbench run workloads/attn.yaml -w qkv_proj -w o_proj_fp8w -o $R/attn-rest.json -q
python3 - <<'PY' | tee -a $log
import json, os
from collections import Counter
for name in ("forgers.json", "oproj-a1.json", "oproj-a2.json", "attn-rest.json"):
    path = os.path.join("/tmp/final", name)
    if not os.path.exists(path):
        continue
    d = json.load(open(path))
    rounds = Counter(i["timing"]["rounds"] and len(set(i["timing"]["rounds"])) or 1
                     for c in d["cases"] for i in c["impls"] if i.get("timing"))
    print(name, "wall", d.get("harness", {}).get("wall_s"), dict(Counter(i["status"] for c in d["cases"] for i in c["impls"])),
          "rounds", dict(rounds))
    for c in d["cases"]:
        for i in c["impls"]:
            if name == "forgers.json" or i["status"] != "ok":
                med = (i.get("timing") or {}).get("median")
                print(f"  {c['case_id'][:40]:40s} {i['name']:24s} {i['status']:12s} "
                      f"{'' if med is None else f'{med * 1e6:9.1f} us'} {i.get('message', '')[:90]}")
PY
cp $log $R/ && tar -czf $OUT/final.tar.gz -C /tmp final
grep "^===" $log
