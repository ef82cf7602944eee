#!/usr/bin/env bash
# The fifth session's H200 calls (issue 16). Carry .whl. Results under $OUT (8 files at most).
#   bash bench/session5_gpu.sh before   the shipped suite on the tree as the session found it (cut by SIGINT
#                                       when the call's time runs out), with its harness table
#   bash bench/session5_gpu.sh A        every GPU test; o_proj runs 1 and 2; ab on identical trees
#   bash bench/session5_gpu.sh B        the shipped suite; o_proj runs 3, 4 and 5
#   bash bench/session5_gpu.sh kb       KernelBench level 1, baseline and compiled, one round (carry .kb too)
# Gates between the five o_proj runs: python3 bench/repeat_gates.py oproj-{1,2,3,4,5}.json (any machine).
PART=${1:-A}
. bench/steps.sh
device_start || exit 1
if [ "$PART" = A ]; then
  step gpu-tests 320 bash -c "python3 -m pytest tests/gpu -q -p no:cacheprovider -rfEs --durations=15 2>&1 | tail -n 60 > $R/gpu_tests.log"
  tail -n 4 $R/gpu_tests.log | tee -a $log
  oproj 1
  oproj 2
  rm -rf /tmp/base && mkdir -p /tmp/base && cp -r solbench workloads /tmp/base/
  step ab-same 150 python3 -m solbench ab --baseline-tree /tmp/base workloads/attn.yaml -w o_proj -q --json > $R/ab-same.json
  echo "=== ab-same exit $?" | tee -a $log
  python3 -c "import json,sys; d=json.load(open('$R/ab-same.json')); print({k: d[k] for k in d if not isinstance(d[k], (list, dict))})" 2>&1 | tail -n 3 | tee -a $log
fi
if [ "$PART" = before ] || [ "$PART" = B ]; then
  reserve=20; [ "$PART" = B ] && reserve=135  # B: time for three o_proj runs after the suite
  step suite 120 timeout -s INT $(( $(left) - reserve )) python3 -m solbench run $SUITE -o $R/suite.json -q
  echo "=== suite exit $?" | tee -a $log
  harness $R/suite.json
  python3 - $R/suite.json <<'PY' | tee -a $log
import sys, collections
from solbench.results import store
r = store.load(sys.argv[1])
per, n = collections.defaultdict(float), collections.Counter()
for c in r.cases:
    for i in c.impls:
        per[c.workload] += i.protocol.get("task_s", 0) or 0
        n[i.status] += 1
print("complete", r.complete, "cases", len(r.cases), dict(n), "task_s by workload", {k: round(v, 1) for k, v in per.items()})
PY
  if [ "$PART" = B ]; then oproj 3; oproj 4; oproj 5; fi
fi
if [ "$PART" = kb ]; then
  step kb1 120 timeout -s INT $(( $(left) - 20 )) python3 -m solbench run .kb/KernelBench/level1 --device cuda \
    --repeat 1 -o $R/kb1.json -q
  echo "=== kb1 exit $?" | tee -a $log
  harness $R/kb1.json
fi
cp $R/* $OUT/ 2>/dev/null; ls -la $OUT  # a run cut short keeps its cases in RUN.json.journal: copied too
