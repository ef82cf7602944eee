#!/usr/bin/env bash
# Issue 16, first H200 call: the GPU tests, and where the wall time of o_proj and bert_layer goes.
# Run from the repo root on the device with .whl carried; logs and results under $OUT.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:. || exit 1
export PYTHONUNBUFFERED=1 LIMIT=${LIMIT:-560} log=$OUT/steps.log
. bench/steps.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,power.limit --format=csv | tee $OUT/smi.txt
step gpu-tests 60 python3 -m pytest tests/gpu -q -p no:cacheprovider -rfEs 2>&1 | tail -n 40 | tee $OUT/gpu_tests.log
step oproj 120 python3 -m solbench run workloads/attn.yaml -w o_proj -o $OUT/oproj.json -q
step oproj-harness 20 python3 -m solbench show $OUT/oproj.json --harness
step bert 200 python3 -m solbench run workloads/bert.yaml -w bert_layer --repeat 1 -o $OUT/bert1.json -q
step bert-harness 20 python3 -m solbench show $OUT/bert1.json --harness
python3 - <<'PY' | tee -a $log
import json, os, statistics
for name in ("oproj.json", "bert1.json"):
    path = os.path.join(os.environ["OUT"], name)
    if not os.path.exists(path):
        continue
    d = json.load(open(path))
    per = {}
    for c in d["cases"]:
        for r in c["impls"]:
            p = r.get("protocol", {})
            for k in ("setup_s", "check_s", "sample_s", "after_s", "gpu_busy_s", "task_s"):
                if k in p:
                    per.setdefault((r["name"], k), []).append(p[k])
    print(name, {k: round(v, 1) for k, v in d["harness"].items()})
    for (impl, k), v in sorted(per.items()):
        print(f"  {impl:22s} {k:10s} sum {sum(v):7.2f} s  median {statistics.median(v)*1e3:8.1f} ms  n {len(v)}")
PY
cat $log | grep "^===" 
