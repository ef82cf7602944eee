#!/usr/bin/env bash
# Seventeenth session, first H200 call (carry .whl; LIMIT: the seconds this call may use):
#  1. what a point's first samples read after a heavy GEMM, after idle, in the steady state
#     (bench/transient_probe.py);
#  2. the GPU tests of the timers, the floor and the checks inside the timing loop, on this tree
#     (a verified sample is now followed by a discarded call; CudaColdTimer._flush_l2);
#  3. `run workloads/attn.yaml -w o_proj` twice, each with its harness table, and how the rounds'
#     first samples read (bench/first_samples.py).
source bench/device_setup.sh
PYTHONPATH=/tmp/site:.:bench timeout 60 python3 bench/transient_probe.py > $OUT/transient.txt 2>&1
echo "transient probe: exit $?, $(( $(date +%s) - T0 )) s" | tee $OUT/steps.txt
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_timers_gpu.py tests/gpu/test_floor_gpu.py \
  tests/gpu/test_cupti_gpu.py tests/gpu/test_forgers_gpu.py > $OUT/gpu-tests.txt 2>&1
echo "gpu tests: exit $?, $(( $(date +%s) - T0 )) s, $(tail -n 1 $OUT/gpu-tests.txt)" | tee -a $OUT/steps.txt
oproj_runs 2
python3 bench/first_samples.py $OUT/oproj-*.json > $OUT/first-samples.txt 2>&1
python3 -m solbench gate --baseline $OUT/oproj-1.json --current $OUT/oproj-2.json > $OUT/gate.txt 2>&1; echo "gate 2 vs 1: exit $?" | tee -a $OUT/steps.txt
gzip -9 -n $OUT/oproj-*.json
cat $OUT/transient.txt
tail -n 3 $OUT/gpu-tests.txt
cat $OUT/first-samples.txt
tail -n 18 $OUT/oproj-1-harness.txt
tail -n 18 $OUT/oproj-2-harness.txt
cat $OUT/steps.txt
(cd $OUT && tar czf texts.tgz $(ls *.txt | grep -v '^steps.txt$') && rm -f $(ls *.txt | grep -v '^steps.txt$'))
