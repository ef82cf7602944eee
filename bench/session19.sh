#!/usr/bin/env bash
# Nineteenth session, H200 calls (carry .whl; LIMIT: the seconds this call may use).
# PART=tests: `pytest tests/gpu` on the tree, one `run -w o_proj` (its harness table, with the wait for
# retired workers), then N workers' start and teardown (bench/worker_steps.py, HOLD_GB 0 and 2).
# PART=ab: `ab` on o_proj with AB="same slow10 slow3 spin10 ..." in order (bench/slow_tree.sh: K padded by
# 10.9% or 3.1%, or spin10: a spin of 10% of the call after it, bench/data/slow.py), then RUNS o_proj runs.
# PART=gated: `run -w o_proj` once, then GATED runs of `run -w o_proj --gate-against` that first run.
source bench/device_setup.sh
rm -rf /tmp/base && mkdir -p /tmp/base && cp -r solbench workloads hardware_specs /tmp/base/
stamp() { python3 -c "import time; print(f'{time.time() - $1:.1f}')"; }
ab_one() {  # ab_one NAME CURRENT_TREE
  local s=$(date +%s.%N)
  (cd "$2" && timeout $(left) python3 -m solbench ab --baseline-tree /tmp/base --current-tree . workloads/attn.yaml \
    -w o_proj -q --json --out-dir /tmp/ab-$1 > $OUT/ab-$1.json 2> $OUT/ab-$1.txt)
  echo "ab-$1: exit $?, $(stamp $s) s, $(grep -E '^gate:' $OUT/ab-$1.txt)" | tee -a $OUT/steps.txt
}
steps_probe() {  # worker start and teardown, HOLD_GB=$1
  HOLD_GB=$1 PYTHONPATH=$PYTHONPATH:bench timeout 120 python3 -c "import worker_steps; worker_steps.main()" 1 7 14 \
    > $OUT/worker-steps-$1.txt 2>&1
  echo "worker_steps HOLD_GB=$1: exit $?" | tee -a $OUT/steps.txt
}
touch $OUT/steps.txt
case "${PART:-tests}" in
tests)
  timeout $(( $(left) - 130 )) python3 -m pytest -q -p no:cacheprovider tests/gpu > $OUT/gpu-tests.txt 2>&1
  echo "pytest tests/gpu: exit $?, $(( $(date +%s) - T0 )) s, $(tail -n 1 $OUT/gpu-tests.txt)" | tee -a $OUT/steps.txt
  oproj_runs 1
  [ $(left) -gt 40 ] && steps_probe 2
  [ $(left) -gt 30 ] && steps_probe 0
  grep -E "passed|failed|error" $OUT/gpu-tests.txt | tail -n 15
  tail -n 22 $OUT/oproj-1-harness.txt
  cat $OUT/worker-steps-*.txt
  ;;
ab)
  bash bench/slow_tree.sh /tmp/slow10 0.10 && bash bench/slow_tree.sh /tmp/slow3 0.03 && bash bench/slow_tree.sh /tmp/spin10 0.10 spin
  n=0
  for kind in ${AB:-same slow10 slow3}; do
    n=$((n + 1)); [ $(left) -gt 100 ] || break
    case $kind in same*) ab_one $n-$kind /tmp/base ;; slow10) ab_one $n-$kind /tmp/slow10 ;; slow3) ab_one $n-$kind /tmp/slow3 ;; spin10) ab_one $n-$kind /tmp/spin10 ;; esac
  done
  oproj_runs "${RUNS:-0}"
  ;;
gated)
  oproj_runs 1
  for n in $(seq 1 "${GATED:-4}"); do
    [ $(left) -gt 75 ] || break
    s=$(date +%s.%N)
    timeout $(left) python3 -m solbench run workloads/attn.yaml -w o_proj -q -o $OUT/gated-$n.json \
      --gate-against $OUT/oproj-1.json > $OUT/gated-$n.txt 2>&1
    echo "gated $n: exit $?, $(stamp $s) s, $(grep -E '^gate:' $OUT/gated-$n.txt)" | tee -a $OUT/steps.txt
  done
  ;;
esac
cat $OUT/steps.txt
(cd $OUT && tar czf texts.tgz $(ls *.txt ab-*.json 2>/dev/null | grep -v '^steps.txt$') && rm -f $(ls *.txt ab-*.json 2>/dev/null | grep -v '^steps.txt$'))
