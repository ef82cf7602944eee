#!/usr/bin/env bash
# Fourteenth session, second H200 call (issues 16, 20): residual + LayerNorm with its byte floor
# (default protocol), then a profiled default o_proj run whose merged worker profile comes back
# whole (pstats: who calls what inside a traced check call). Carry .whl.
source bench/device_setup.sh
s=$(date +%s)
timeout 200 python3 -m solbench run workloads/bert.yaml -w residual_layernorm -q -o $OUT/ln-floor.json > $OUT/ln-floor.txt 2>&1
echo "residual_layernorm: exit $?, $(( $(date +%s) - s )) s"
python3 -m solbench show $OUT/ln-floor.json >> $OUT/ln-floor.txt 2>&1
mkdir -p /tmp/prof
s=$(date +%s)
SOLBENCH_PROFILE_DIR=/tmp/prof timeout 150 python3 -m solbench run workloads/attn.yaml -w o_proj -q -o /tmp/prof.json > /tmp/prof.out 2>&1
echo "o_proj profiled: exit $?, $(( $(date +%s) - s )) s"
python3 bench/worker_profile.py /tmp/prof --top 60 --dump $OUT/oproj-workers.pstats > $OUT/prof-summary.txt 2>&1
python3 -m solbench show /tmp/prof.json --harness > $OUT/harness.txt 2>&1
grep -E "floor|fused|baseline" $OUT/ln-floor.txt | head -20
grep -E "correctness checks|timing loop|^│ wall" $OUT/harness.txt
