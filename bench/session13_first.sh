#!/usr/bin/env bash
# Thirteenth session, first H200 call (issues 16, 20): every GPU test on this tree (the twelfth
# session's final tree was never GPU-tested), then one default o_proj run with worker profiles
# (where a traced check call's 20 ms and a tolerance compare's 4 ms go). Carry .whl.
# Writes under $OUT (at most 8 files come back); prints a short table last.
source bench/device_setup.sh
s=$(date +%s)
timeout 430 python3 -m pytest tests/gpu -q -p no:cacheprovider -rfEs --durations=10 > $OUT/gpu-tests.txt 2>&1
echo "tests: exit $?, $(( $(date +%s) - s )) s"
mkdir -p /tmp/prof
s=$(date +%s)
SOLBENCH_PROFILE_DIR=/tmp/prof timeout 120 python3 -m solbench run workloads/attn.yaml -w o_proj -q -o /tmp/prof.json > /tmp/prof.out 2>&1
echo "o_proj profiled: exit $?, $(( $(date +%s) - s )) s"
python3 bench/worker_profile.py /tmp/prof --top 80 > $OUT/prof-summary.txt 2>&1
python3 -m solbench show /tmp/prof.json --harness > $OUT/harness.txt 2>&1
tail -n 4 $OUT/gpu-tests.txt
grep -E "start and retire|correctness checks|timing loop|set-up and comp|GPU busy|^│ wall" $OUT/harness.txt | head -20
