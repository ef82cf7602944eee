#!/usr/bin/env bash
# Sixteenth session, first H200 call (carry .whl):
#  1. where a CUDA worker's start goes, step by step (bench/worker_steps.py, N = 1, 7, 14);
#  2. how the cuBLASLt tuner ranks o_proj fp8's algorithms: the old way, the new way, the new way
#     beside a loaded GPU (bench/fp8_tuner_probe.py);
#  3. `run workloads/attn.yaml -w o_proj` on this tree (tuning now waits for the device to itself),
#     with its harness table.
source bench/device_setup.sh
T0=$(date +%s)
left() { echo $(( 565 - ($(date +%s) - T0) )); }
PYTHONPATH=/tmp/site:.:bench timeout 90 python3 bench/worker_steps.py 1 7 14 > $OUT/worker-steps.txt 2>&1
echo "worker steps: exit $?, $(( $(date +%s) - T0 )) s" | tee $OUT/steps.txt
PYTHONPATH=/tmp/site:.:bench timeout 150 python3 bench/fp8_tuner_probe.py --iterations 30 --load-s 60 > $OUT/tuner-probe.txt 2>&1
echo "tuner probe: exit $?, $(( $(date +%s) - T0 )) s" | tee -a $OUT/steps.txt
s=$(date +%s.%N)
timeout $(left) python3 -m solbench run workloads/attn.yaml -w o_proj -q -o $OUT/oproj.json > $OUT/oproj.txt 2>&1
echo "o_proj: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s" | tee -a $OUT/steps.txt
python3 -m solbench show $OUT/oproj.json --harness > $OUT/oproj-harness.txt 2>&1
gzip -9 -n $OUT/oproj.json
#  4. the same run with every worker under cProfile: what the timing loop's host time is
mkdir -p /tmp/prof
timeout $(left) env SOLBENCH_PROFILE_DIR=/tmp/prof python3 -m solbench run workloads/attn.yaml -w o_proj -q -o /tmp/prof-run.json > /dev/null 2>&1
echo "o_proj profiled: exit $?, $(( $(date +%s) - T0 )) s" | tee -a $OUT/steps.txt
python3 bench/worker_profile.py /tmp/prof --top 45 --dump /tmp/merged.prof > $OUT/prof-summary.txt 2>&1
python3 - > $OUT/prof-loop.txt 2>&1 <<'PY'
import pstats
s = pstats.Stats("/tmp/merged.prof")
s.sort_stats("cumulative")
for f in ("_timed", "_loop", "_sample", "sample", "_enqueued", "prepare", "_verify", "_checked_and_timed", "set_up"):
    s.print_callees(f)
PY
tar czf $OUT/prof.tgz $OUT/prof-summary.txt $OUT/prof-loop.txt 2>/dev/null && rm -f $OUT/prof-summary.txt $OUT/prof-loop.txt
cat $OUT/worker-steps.txt
tail -n 8 $OUT/tuner-probe.txt
tail -n 18 $OUT/oproj-harness.txt
