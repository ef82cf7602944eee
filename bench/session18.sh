#!/usr/bin/env bash
# Eighteenth session, H200 calls (carry .whl; LIMIT: the seconds this call may use).
# PART=tests: `pytest tests/gpu`, one `run -w o_proj`, then `ab` on identical trees while time is left.
# PART=suite: the shipped suite (every workload file on one GPU), its harness table, `compare baseline fused`.
# PART=ab: `ab` on o_proj with AB="same same slow10 slow3 ..." in order (identical trees; the current
# tree's `cublas_addmm` K padded by 10.9% or 3.1%: bench/slow_tree.sh), then o_proj runs while time is left.
# PART=probe: N workers' start and teardown (bench/worker_steps.py, HOLD_GB each), then the suite's
# leaked-semaphore warning hunted: bert.yaml (it compiles) as is, with SOLBENCH_PRELOAD=0, with
# --compile-jobs 1; each one's last stderr lines.
source bench/device_setup.sh
repo=$(pwd)
rm -rf /tmp/base && mkdir -p /tmp/base && cp -r solbench workloads hardware_specs /tmp/base/
ab_one() {  # ab_one NAME CURRENT_TREE
  local s=$(date +%s.%N)
  (cd "$2" && timeout $(left) python3 -m solbench ab --baseline-tree /tmp/base --current-tree . workloads/attn.yaml \
    -w o_proj -q --json --out-dir /tmp/ab-$1 > $OUT/ab-$1.json 2> $OUT/ab-$1.txt)
  echo "ab-$1: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s, $(grep -E '^gate:' $OUT/ab-$1.txt)" | tee -a $OUT/steps.txt
}
case "${PART:-tests}" in
tests)
  timeout $(( $(left) - 20 )) python3 -m pytest -q -p no:cacheprovider tests/gpu > $OUT/gpu-tests.txt 2>&1
  echo "pytest tests/gpu: exit $?, $(( $(date +%s) - T0 )) s, $(tail -n 1 $OUT/gpu-tests.txt)" | tee $OUT/steps.txt
  oproj_runs 1
  for n in 1 2 3; do [ $(left) -gt 100 ] || break; ab_one same$n /tmp/base; done
  grep -E "passed|failed|error" $OUT/gpu-tests.txt | tail -n 15
  ;;
suite)
  s=$(date +%s.%N)
  timeout $(left) python3 -m solbench run workloads/*.yaml -q -o $OUT/suite.json > $OUT/suite.txt 2>&1
  echo "suite: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s" | tee $OUT/steps.txt
  python3 -m solbench show $OUT/suite.json --harness > $OUT/suite-harness.txt 2>&1
  python3 -m solbench compare baseline fused --run $OUT/suite.json > $OUT/suite-compare.txt 2>&1
  tail -n 22 $OUT/suite-harness.txt
  echo "INCONCLUSIVE rows: $(grep -c INCONCLUSIVE $OUT/suite-compare.txt)"
  if [ $(left) -gt 120 ]; then  # run --gate-against the suite's o_proj (four rounds a look for the undecided)
    s=$(date +%s.%N)
    timeout $(left) python3 -m solbench run workloads/attn.yaml -w o_proj -q -o $OUT/oproj-gated.json \
      --gate-against $OUT/suite.json > $OUT/gate-against.txt 2>&1
    echo "run -w o_proj --gate-against suite: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s, $(grep -E '^gate:' $OUT/gate-against.txt)" | tee -a $OUT/steps.txt
  fi
  gzip -9 -n $OUT/suite.json
  for n in 1 2; do [ $(left) -gt 100 ] || break; ab_one same-s$n /tmp/base; done
  ;;
ab)
  bash bench/slow_tree.sh /tmp/slow10 0.10 && bash bench/slow_tree.sh /tmp/slow3 0.03
  n=0
  for kind in ${AB:-same slow10 slow3}; do
    n=$((n + 1)); [ $(left) -gt 100 ] || break
    case $kind in same*) ab_one $n-$kind /tmp/base ;; slow10) ab_one $n-$kind /tmp/slow10 ;; slow3) ab_one $n-$kind /tmp/slow3 ;; esac
  done
  oproj_runs "${RUNS:-0}"
  ;;
probe)
  HOLD_GB=${HOLD_GB:-2} PYTHONPATH=$PYTHONPATH:bench timeout 120 python3 -c "import worker_steps; worker_steps.main()" 1 7 14 \
    > $OUT/worker-steps.txt 2>&1
  echo "worker_steps: exit $?" | tee $OUT/steps.txt
  for variant in plain preload0 jobs1; do
    [ $(left) -gt 120 ] || break
    case $variant in plain) env=""; extra="" ;; preload0) env="SOLBENCH_PRELOAD=0"; extra="" ;; jobs1) env=""; extra="--compile-jobs 1" ;; esac
    s=$(date +%s.%N)
    env $env timeout $(left) python3 -m solbench run workloads/bert.yaml -q $extra -o $OUT/bert-$variant.json \
      > $OUT/bert-$variant.txt 2>&1
    echo "bert $variant: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s, leak: $(grep -c 'leaked semaphore' $OUT/bert-$variant.txt)" | tee -a $OUT/steps.txt
    rm -f $OUT/bert-$variant.json
  done
  cat $OUT/worker-steps.txt
  ;;
esac
cat $OUT/steps.txt
(cd $OUT && tar czf texts.tgz $(ls *.txt ab-*.json 2>/dev/null | grep -v '^steps.txt$') && rm -f $(ls *.txt ab-*.json 2>/dev/null | grep -v '^steps.txt$'))
