#!/usr/bin/env bash
# One device call for the trust checks: GPU tests, the hostile workloads, and the isolation
# overhead on the whole shipped suite (worker, in-process, worker again). Logs under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/solbench-out}; mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:.
else
  export PYTHONPATH=.
fi
export PYTHONUNBUFFERED=1 COLUMNS=160
log="$OUT/trust.log"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu,driver_version \
  --format=csv | tee -a "$log"
for step in "$@"; do
  echo "=== $step $(date -u +%T)" | tee -a "$log"
  case $step in
    tests) python3 -m pytest tests/gpu -q -p no:cacheprovider -rs -x 2>&1 | tee "$OUT/gpu_tests.log" | tail -15 ;;
    hostile)
      python3 -m solbench run tests/data/hostile/hostile_gpu.yaml -w gpu_faults --timeout 30 -o "$OUT/hostile.json" \
        2>&1 | tee -a "$log" | tail -30; echo "exit ${PIPESTATUS[0]}" | tee -a "$log"
      python3 -m solbench run tests/data/hostile/hostile_gpu.yaml -w gpu_faults -i honest -i after \
        -o "$OUT/healthy.json" 2>&1 | tee -a "$log" | tail -8 ;;
    suite-before)  # the code before worker isolation (a checkout under scratch_gpu/old), in-process
      start=$(date +%s.%N)
      (cd scratch_gpu/old && PYTHONPATH=/tmp/site:. python3 -m solbench run workloads/attn.yaml workloads/bert.yaml \
        workloads/resnet50.yaml -q -o "$OUT/$step.json" > "$OUT/$step.txt" 2>&1); rc=$?
      end=$(date +%s.%N)
      echo "$step wall $(python3 -c "print(round($end - $start, 1))") s exit $rc" | tee -a "$log" ;;
    isolation-tests) python3 -m pytest tests/gpu/test_isolation_gpu.py -q -p no:cacheprovider -rs 2>&1 \
      | tee "$OUT/isolation_tests.log" | tail -5 ;;
    suite-worker|suite-worker2|suite-inproc)
      flag=""; [ "$step" = suite-inproc ] && flag="--in-process"
      start=$(date +%s.%N)
      python3 -m solbench run workloads/attn.yaml workloads/bert.yaml workloads/resnet50.yaml -q $flag \
        -o "$OUT/$step.json" > "$OUT/$step.txt" 2>&1; rc=$?
      end=$(date +%s.%N)
      echo "$step wall $(python3 -c "print(round($end - $start, 1))") s exit $rc" | tee -a "$log" ;;
  esac
done
echo "=== done $(date -u +%T)" | tee -a "$log"
