#!/usr/bin/env bash
# The sixth session's H200 calls (issue 16). Carry .whl. Results under $OUT (8 files at most).
#   bash bench/session6_gpu.sh T   the per-sample cost (gate vs spin, NVML probe); the gate under CUPTI;
#                                  every GPU test;
#                                  o_proj runs 1 and 2; ab on identical trees
#   bash bench/session6_gpu.sh B   o_proj runs 3, 4 and 5; then the shipped suite until the call's
#                                  time runs out (SIGINT: the harness table of what ran)
#   LIMIT=270 bash bench/session6_gpu.sh F   the GPU tests of checks and timers; o_proj runs 3 and 4
# Gates between the five o_proj runs: python3 bench/repeat_gates.py oproj-{1,2,3,4,5}.json (any machine).
PART=${1:-T}
. bench/steps.sh
device_start || exit 1
if [ "$PART" = T ]; then
  step sample-cost 40 bash -c "python3 bench/sample_cost.py > $R/sample_cost.log 2>&1"
  tail -n 12 $R/sample_cost.log | tee -a $log
  step gate-cupti 30 bash -c "python3 bench/gate_cupti_probe.py > $R/gate_cupti.log 2>&1"
  tail -n 4 $R/gate_cupti.log | tee -a $log
  step gpu-tests 320 bash -c "python3 -m pytest tests/gpu -q -p no:cacheprovider -rfEs --durations=15 > $R/gpu_tests.log 2>&1"
  tail -n 25 $R/gpu_tests.log | tee -a $log
  oproj 1
  oproj 2
  rm -rf /tmp/base && mkdir -p /tmp/base && cp -r solbench workloads /tmp/base/
  step ab-same 100 bash -c "python3 -m solbench ab --baseline-tree /tmp/base workloads/attn.yaml -w o_proj -q --json > $R/ab-same.json 2> $R/ab-same.out"
  echo "=== ab-same exit $?" | tee -a $log
  tail -n 3 $R/ab-same.out | tee -a $log
  python3 -c "import json; d=json.load(open('$R/ab-same.json')); print('ab-same', d['overall'], d['counts'])" 2>&1 | tail -n 1 | tee -a $log
fi
if [ "$PART" = B ]; then
  oproj 3; oproj 4; oproj 5
  step suite 60 timeout -s INT $(( $(left) - 15 )) python3 -m solbench run $SUITE -o $R/suite.json -q
  echo "=== suite exit $?" | tee -a $log
  harness $R/suite.json
fi
if [ "$PART" = T ] || [ "$PART" = B ]; then rm -f $R/ab-same.out; cp $R/* $OUT/ 2>/dev/null; ls -la $OUT; fi
# F: after the check's gate was taken out again: the GPU tests of the checks and timers, two o_proj runs
if [ "$PART" = F ]; then
  step gpu-tests 120 bash -c "python3 -m pytest tests/gpu/test_cupti_gpu.py tests/gpu/test_isolation_gpu.py tests/gpu/test_forgers_gpu.py tests/gpu/test_timers_gpu.py tests/gpu/test_user_kernels.py -q -p no:cacheprovider -rfEs > $R/gpu_tests-F.log 2>&1"
  tail -n 4 $R/gpu_tests-F.log | tee -a $log
  oproj 3; oproj 4
  cp $R/* $OUT/ 2>/dev/null; ls -la $OUT
fi
