#!/usr/bin/env bash
# Fifteenth session, second H200 call: every GPU test on the final tree, then how long N workers take
# to start side by side (bench/worker_start.py), within one call. Carry .whl.
source bench/device_setup.sh
T0=$(date +%s)
timeout 430 python3 -m pytest tests/gpu -q -p no:cacheprovider -rfEs --durations=10 > $OUT/gpu-tests.txt 2>&1
echo "tests: exit $?, $(( $(date +%s) - T0 )) s" | tee $OUT/steps.txt
if [ $(( $(date +%s) - T0 )) -lt 470 ]; then
  timeout $(( 540 - ($(date +%s) - T0) )) python3 bench/worker_start.py 1 7 14 28 > $OUT/worker-start.txt 2>&1
  echo "worker start: exit $?" | tee -a $OUT/steps.txt
fi
tail -n 2 $OUT/gpu-tests.txt
cat $OUT/worker-start.txt
