#!/usr/bin/env bash
# One device call: GPU tests, timer cross-check, calibration and workload runs. Logs under $OUT.
# Usage (on the GPU machine, repository root):
#   bash bench/h200_session.sh [precompile] [tests] [crosscheck] [sweep] [oproj] [attn] [bert] [resnet50] [example]
#     trust checks: [isolation-tests] [hostile] [suite-worker] [suite-inproc] [suite-before]
# A PYTHONPATH set by the caller (e.g. carried wheels unpacked in /tmp/site) is kept.
set -uo pipefail
OUT=${OUT:-/tmp/solbench-out}; mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:.
else
  export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 COLUMNS=150
log="$OUT/session.log"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu,driver_version \
  --format=csv | tee -a "$log"
for step in "$@"; do
  echo "=== $step $(date -u +%T)" | tee -a "$log"
  case $step in
    precompile) python3 bench/precompile.py 14 2>&1 | tee -a "$log" | tail -3 ;;
    tests) python3 -m pytest tests/gpu -q -p no:cacheprovider -rs 2>&1 | tee "$OUT/gpu_tests.log" | tail -12 ;;
    sweep) SWEEP=floor,decode python3 bench/gemv_sweep.py "$OUT" > "$OUT/sweep.log" 2>&1; tail -40 "$OUT/sweep.log" ;;
    oproj) python3 -m solbench run workloads/attn.yaml -w o_proj -w o_proj_fp8w -o "$OUT/attn-oproj.json" 2>&1 \
             | tee -a "$log" ;;
    example) python3 -m solbench run examples/rmsnorm_residual/rmsnorm_residual.yaml -o "$OUT/example.json" 2>&1 \
               | tee -a "$log" ;;
    crosscheck) python3 bench/timer_crosscheck.py "$OUT" 2>&1 | tee -a "$log" | tail -6 ;;
    calibrate) python3 -m solbench calibrate --results-dir "$OUT/res" 2>&1 | tee -a "$log" ;;
    oproj-clean) python3 -m solbench run workloads/attn.yaml -w o_proj --flush clean -o "$OUT/attn-clean.json" 2>&1 \
                   | tee -a "$log" ;;
    oproj-graph) python3 -m solbench run workloads/attn.yaml -w o_proj --timer graph -o "$OUT/attn-graph.json" 2>&1 \
                   | tee -a "$log" ;;
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
    *) python3 -m solbench run "workloads/$step.yaml" -o "$OUT/$step.json" 2>&1 | tee -a "$log" ;;
  esac
done
echo "=== done $(date -u +%T)" | tee -a "$log"
