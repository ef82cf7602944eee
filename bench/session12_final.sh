#!/usr/bin/env bash
# Twelfth session, closing H200 call (issues 16, 20): the FP8-weight decode workload on the eleventh
# session's tree (.before/) and on this tree (the four-instruction e4m3 -> bf16/fp16 widening), each
# with `compare baseline fused`; then every GPU test on this tree. Carry .whl and .before.
# Writes under $OUT (at most 8 files come back); prints a short table last.
source bench/device_setup.sh
table=""
fp8w() {  # fp8w(label, dir)
    local s=$(date +%s)
    (cd "$2" && PYTHONPATH=/tmp/site:. timeout 150 python3 -m solbench run workloads/attn.yaml -w o_proj_fp8w -q -o /tmp/$1.json > /tmp/$1.out 2>&1)
    local rc=$?
    table="${table}o_proj_fp8w $1: exit $rc, $(( $(date +%s) - s )) s\n"
    echo "== $1 (exit $rc)" >> $OUT/fp8w-compare.txt
    (cd "$2" && PYTHONPATH=/tmp/site:. python3 -m solbench compare baseline fused --run /tmp/$1.json 2>&1 | tail -n 14) >> $OUT/fp8w-compare.txt
    (cd "$2" && PYTHONPATH=/tmp/site:. python3 -m solbench show /tmp/$1.json 2>&1) >> $OUT/fp8w-show.txt
}
fp8w after .; fp8w before .before
s=$(date +%s)
timeout 420 python3 -m pytest tests/gpu -q -p no:cacheprovider -rfEs --durations=10 > $OUT/gpu-tests.txt 2>&1
echo "tests: exit $?, $(( $(date +%s) - s )) s"
tail -n 4 $OUT/gpu-tests.txt
grep -E "^== |tok|FASTER|SLOWER|SAME|INCONCL" $OUT/fp8w-compare.txt | head -40
printf "$table"
