#!/usr/bin/env bash
# Eleventh session, last H200 call (issues 19, 20): every GPU test on the final tree, then the FP8-weight
# decode workload under the default protocol and `compare baseline fused` on it. Carry .whl.
# Writes under $OUT (at most 8 files come back); prints a short table last.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:.
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv | tee $OUT/smi.txt
git log --oneline -1 >> $OUT/smi.txt 2>/dev/null
s=$(date +%s)
python3 -m pytest tests/gpu -q -p no:cacheprovider -rfEs --durations=10 > $OUT/tests.out 2>&1; echo "tests: exit $?, $(( $(date +%s) - s )) s"
s=$(date +%s)
python3 -m solbench run workloads/attn.yaml -w o_proj_fp8w -o $OUT/fp8w.json -q > $OUT/fp8w.out 2>&1; echo "run o_proj_fp8w: exit $?, $(( $(date +%s) - s )) s"
python3 -m solbench show $OUT/fp8w.json > $OUT/fp8w-show.txt 2>&1
python3 -m solbench compare baseline fused --run $OUT/fp8w.json > $OUT/fp8w-compare.txt 2>&1
tail -n 3 $OUT/tests.out
cat $OUT/fp8w-compare.txt | tail -n 20
