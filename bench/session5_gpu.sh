#!/usr/bin/env bash
# The fifth session's H200 calls (issue 16). Carry .whl. Results under $OUT (8 files at most).
#   bash bench/session5_gpu.sh before   o_proj default, then the shipped suite (cut by SIGINT when the call's
#                                       time runs out; the journal keeps it), each with its harness table
#   bash bench/session5_gpu.sh after    the same on a changed tree, five o_proj runs, ab on identical trees
#   bash bench/session5_gpu.sh final    every GPU test
set -o pipefail
PART=${1:-before}
export PYTHONUNBUFFERED=1 LIMIT=${LIMIT:-570} log=$OUT/steps.log
. bench/steps.sh
install_wheels || exit 1
R=/tmp/g && mkdir -p $R
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv | tee -a $log
SUITE="workloads/attn.yaml workloads/bert.yaml workloads/resnet50.yaml workloads/resnet50_forward.yaml workloads/collectives.yaml"
timed() {  # timed NAME CMD...: the command's wall time in the log
  local name=$1; shift; local s; s=$(date +%s.%N); "$@"; local rc=$?
  echo "=== $name wall $(python3 -c "print(round($(date +%s.%N) - $s, 1))") s exit $rc" | tee -a "$log"; return $rc
}
harness() { python3 -m solbench show "$1" --harness 2>&1 | tail -n 22 | tee -a $log; }
if [ "$PART" = before ] || [ "$PART" = after ]; then
step oproj 60 timed oproj python3 -m solbench run workloads/attn.yaml -w o_proj -o $R/oproj.json -q
harness $R/oproj.json
step suite 120 timeout -s INT $(( $(left) - 20 )) python3 -m solbench run $SUITE -o $R/suite.json -q
echo "=== suite exit $?" | tee -a $log
harness $R/suite.json
python3 - $R/suite.json <<'PY' | tee -a $log
import sys, collections
from solbench.results import store
r = store.load(sys.argv[1])
per = collections.defaultdict(float)
for c in r.cases:
    for i in c.impls:
        per[c.workload if hasattr(c, "workload") else c.case_id.split("/")[0]] += i.protocol.get("task_s", 0) or 0
print("complete", r.complete, "cases", len(r.cases), "task_s by workload", {k: round(v, 1) for k, v in per.items()})
PY
fi
if [ "$PART" = final ]; then
step gpu-tests 330 bash -c "python3 -m pytest tests/gpu -q -p no:cacheprovider -rfEs 2>&1 | tail -n 40 > $R/gpu_tests.log"
tail -n 3 $R/gpu_tests.log | tee -a $log
fi
cp $R/*.json $R/*.log $OUT/ 2>/dev/null; ls -la $OUT
