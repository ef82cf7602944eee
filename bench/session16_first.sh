#!/usr/bin/env bash
# Next session's first H200 call: where a CUDA worker's start goes, step by step (bench/worker_steps.py,
# N = 1, 7, 14), then every GPU test on the final tree (the fifteenth session's last GPU-facing change,
# kernel names with digests, came after its GPU test run). Carry .whl.
source bench/device_setup.sh
T0=$(date +%s)
PYTHONPATH=/tmp/site:.:bench timeout 90 python3 bench/worker_steps.py 1 7 14 > $OUT/worker-steps.txt 2>&1
echo "worker steps: exit $?, $(( $(date +%s) - T0 )) s" | tee $OUT/steps.txt
timeout $(( 565 - ($(date +%s) - T0) )) python3 -m pytest tests/gpu -q -p no:cacheprovider -rfEs --durations=10 > $OUT/gpu-tests.txt 2>&1
echo "tests: exit $?, $(( $(date +%s) - T0 )) s" | tee -a $OUT/steps.txt
cat $OUT/worker-steps.txt
tail -n 2 $OUT/gpu-tests.txt
