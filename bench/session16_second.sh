#!/usr/bin/env bash
# Sixteenth session, second H200 call (carry .whl), on the tree with the tuner's changes:
#  1. where a CUDA worker's start goes, step by step (bench/worker_steps.py, N = 1, 7, 14);
#  2. `run workloads/attn.yaml -w o_proj`, with its harness table;
#  3. every GPU test.
source bench/device_setup.sh
nvidia-smi -q | grep -i -E "persistence mode|compute mode" >> $OUT/smi.txt
T0=$(date +%s)
left() { echo $(( 565 - ($(date +%s) - T0) )); }
PYTHONPATH=/tmp/site:.:bench timeout 90 python3 -c "import worker_steps; worker_steps.main()" 1 7 14 > $OUT/worker-steps.txt 2>&1
echo "worker steps: exit $?, $(( $(date +%s) - T0 )) s" | tee $OUT/steps.txt
s=$(date +%s.%N)
timeout $(left) python3 -m solbench run workloads/attn.yaml -w o_proj -q -o $OUT/oproj.json > $OUT/oproj.txt 2>&1
echo "o_proj: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s" | tee -a $OUT/steps.txt
python3 -m solbench show $OUT/oproj.json --harness > $OUT/oproj-harness.txt 2>&1
gzip -9 -n $OUT/oproj.json
timeout $(left) python3 -m pytest tests/gpu -q -p no:cacheprovider -rfEs --durations=10 > $OUT/gpu-tests.txt 2>&1
echo "tests: exit $?, $(( $(date +%s) - T0 )) s" | tee -a $OUT/steps.txt
cat $OUT/smi.txt $OUT/worker-steps.txt
tail -n 16 $OUT/oproj-harness.txt
tail -n 3 $OUT/gpu-tests.txt
