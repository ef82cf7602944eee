#!/usr/bin/env bash
# The closing H200 call of a session: every GPU test on the final tree, the GPU forgers beside honest
# implementations, and the attention suite (no honest implementation may be flagged).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:. || exit 1
export PYTHONUNBUFFERED=1 LIMIT=${LIMIT:-570} log=$OUT/steps.log
. bench/steps.sh
git log -1 --format='tree at %h %s' 2>/dev/null | tee -a $log
step gpu-tests 120 python3 -m pytest tests/gpu -q -p no:cacheprovider -rfEs 2>&1 | tail -n 60 > $OUT/gpu_tests.log
tail -n 3 $OUT/gpu_tests.log | tee -a $log
step forgers 60 python3 -m solbench run tests/data/hostile/hostile_gpu.yaml -w gpu_forgers --repeat 1 -o $OUT/forgers.json -q
step attn 100 python3 -m solbench run workloads/attn.yaml -o $OUT/attn.json -q
python3 - <<'PY' | tee -a $log
import json, os
from collections import Counter
for name in ("forgers.json", "attn.json"):
    path = os.path.join(os.environ["OUT"], name)
    if not os.path.exists(path):
        continue
    d = json.load(open(path))
    print(name, "wall", d.get("harness", {}).get("wall_s"), Counter(i["status"] for c in d["cases"] for i in c["impls"]))
    for c in d["cases"]:
        for i in c["impls"]:
            if name == "forgers.json" or i["status"] != "ok":
                med = (i.get("timing") or {}).get("median")
                print(f"  {c['case_id'][:40]:40s} {i['name']:24s} {i['status']:12s} "
                      f"{'' if med is None else f'{med * 1e6:9.1f} us'} {i.get('message', '')[:90]}")
PY
grep "^===" $log
