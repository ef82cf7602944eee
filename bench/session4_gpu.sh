#!/usr/bin/env bash
# The first H200 call of the next session (written in the fourth session, which had no device): every GPU
# test on the current tree (compile ahead, the byte floor and the exact-fp32 restore are new and untested
# on a GPU), the floor on o_proj decode, KernelBench level 1 with compiled implementations and compiling
# ahead, and ab with the in-kernel slowdown (bench/data/slow_k.py). Carry .whl and .kb. $OUT/g.tar.gz.
# Two calls of under 10 minutes each: `bash bench/session4_gpu.sh 1` (GPU tests, the floor, the FP8 probe,
# ab: issues 16 and 20), `bash bench/session4_gpu.sh 2` (KernelBench: issue 19), and if device time is
# left `bash bench/session4_gpu.sh 3` (every SOL-ExecBench example and sample: issue 19).
set -o pipefail
PART=${1:-1}
export PYTHONUNBUFFERED=1 LIMIT=${LIMIT:-570} log=$OUT/steps.log
. bench/steps.sh
install_wheels || exit 1
R=/tmp/g && mkdir -p $R
if [ "$PART" = 1 ]; then
step gpu-tests 250 bash -c "python3 -m pytest tests/gpu -q -p no:cacheprovider -rfEs 2>&1 | tail -n 40 > $R/gpu_tests.log"
tail -n 3 $R/gpu_tests.log | tee -a $log
# the floor: o_proj and o_proj_fp8w decode, cupti and cold timers (issue 20 item 3)
step floor-cupti 60 python3 -m solbench run workloads/attn.yaml -w o_proj -w o_proj_fp8w --case 'tokens=16' \
  --case 'tokens=1' --case 'tokens=64' --timer cupti --repeat 1 -o $R/floor-cupti.json -q
# FP8 o_proj recipes (issue 20 item 1): which one beats bf16, before one is shipped
step fp8-probe 60 python3 bench/fp8_probe.py $R
# ab on identical trees, then with a 3% and a 10% in-kernel slowdown (issue 16)
mkdir -p /tmp/ab/base /tmp/ab/same /tmp/ab/s3 /tmp/ab/s10
for t in base same s3 s10; do cp bench/data/ab_k.yaml bench/data/slow_k.py /tmp/ab/$t/; done
sed -i 's/^SLOWDOWN = .*/SLOWDOWN = 0.0/' /tmp/ab/base/slow_k.py /tmp/ab/same/slow_k.py
sed -i 's/^SLOWDOWN = .*/SLOWDOWN = 0.10/' /tmp/ab/s10/slow_k.py
step ab-same 60 python3 -m solbench ab --baseline-tree /tmp/ab/base --current-tree /tmp/ab/same ab_k.yaml \
  --threshold 5% --json > $R/ab-same.json
step ab-s3 60 python3 -m solbench ab --baseline-tree /tmp/ab/base --current-tree /tmp/ab/s3 ab_k.yaml \
  --threshold 5% --json > $R/ab-s3.json
step ab-s10 60 python3 -m solbench ab --baseline-tree /tmp/ab/base --current-tree /tmp/ab/s10 ab_k.yaml \
  --threshold 5% --json > $R/ab-s10.json
elif [ "$PART" = check ]; then
# after part 1: the floor on its own CUDA kernel, the two GPU tests that met the floor, the FP8 probe fixed
step floor-tests 150 bash -c "python3 -m pytest -q -p no:cacheprovider -rfEs tests/gpu/test_floor_gpu.py \
  tests/gpu/test_compile_ahead_gpu.py tests/gpu/test_cupti_gpu.py::test_run_with_the_cupti_timer_records_it \
  tests/gpu/test_timers_gpu.py::test_run_attn_end_to_end_on_gpu 2>&1 | tail -n 30 > $R/floor_tests.log"
tail -n 3 $R/floor_tests.log | tee -a $log
step floor-cupti 60 python3 -m solbench run workloads/attn.yaml -w o_proj -w o_proj_fp8w --case 'tokens=16' \
  --case 'tokens=1' --case 'tokens=64' --timer cupti --repeat 1 -o $R/floor-cupti.json -q
step fp8-probe 60 bash -c "python3 bench/fp8_probe.py $R > $R/fp8_probe.txt 2>&1"
grep -v "^  \|^Traceback\|^    " $R/fp8_probe.txt | tee -a $log
elif [ "$PART" = fp8 ]; then
# the shipped FP8 o_proj (static scales, Triton quantization, FP8 cuBLASLt), its GPU tests, and o_proj in full
step fp8-tests 120 bash -c "python3 -m pytest -q -p no:cacheprovider -rfEs tests/gpu/test_fp8_gpu.py \
  tests/gpu/test_floor_gpu.py tests/gpu/test_timers_gpu.py::test_run_attn_end_to_end_on_gpu 2>&1 | tail -n 30 \
  > $R/fp8_tests.log"
tail -n 3 $R/fp8_tests.log | tee -a $log
step oproj 150 python3 -m solbench run workloads/attn.yaml -w o_proj -w o_proj_fp8w -o $R/oproj.json -q
step compare 20 bash -c "python3 -m solbench compare baseline fp8 --run $R/oproj.json > $R/compare-fp8.txt 2>&1; \
  python3 -m solbench compare fused fp8 --run $R/oproj.json > $R/compare-fused-fp8.txt 2>&1; \
  python3 -m solbench compare baseline fused --run $R/oproj.json > $R/compare-fused.txt 2>&1; cat $R/compare-*.txt"
elif [ "$PART" = final ]; then
# the closing call: every GPU test on the final tree, then as much of KernelBench level 1 with compiled
# implementations (compiling ahead) as the call has left, cut short by SIGINT (the journal keeps it)
step gpu-tests 330 bash -c "python3 -m pytest tests/gpu -q -p no:cacheprovider -rfEs 2>&1 | tail -n 40 > $R/gpu_tests.log"
tail -n 3 $R/gpu_tests.log | tee -a $log
step kb1-compiled 120 timeout -s INT $(( $(left) - 25 )) python3 -m solbench run .kb/KernelBench/level1 \
  --device cuda --repeat 1 -o $R/kb1-compiled.json -q
elif [ "$PART" = 2 ]; then
# KernelBench level 1, eager and compiled, compiling ahead in 8 processes (issue 19)
step kb1-compiled 480 timeout -s INT 470 python3 -m solbench run .kb/KernelBench/level1 --device cuda \
  --repeat 1 -o $R/kb1-compiled.json -q
# level 3, the two problems that import einops (carried as a wheel in .whl since the fourth session)
step kb3-einops 60 python3 -m solbench run .kb/KernelBench/level3/48_*.py .kb/KernelBench/level3/49_*.py \
  --device cuda -i baseline --repeat 1 -o $R/kb3-einops.json -q
else
# every SOL-ExecBench problem under examples/ and the samples, baseline and compiled, compiling ahead
SOLS=$(find .kb/sol -name definition.json -printf '%h\n' | sort)
step sol-all 540 timeout -s INT 530 python3 -m solbench run $SOLS --device cuda --repeat 1 --timeout 120 \
  -o $R/solexec.json -q
fi
cp $log $R/ && tar -czf $OUT/g.tar.gz -C /tmp g
python3 - <<'PY'
import os
from collections import Counter
from solbench.results import store  # replays the journal of a run cut short
for name in ("floor-cupti.json", "oproj.json", "kb1-compiled.json", "kb3-einops.json", "solexec.json"):
    path = os.path.join("/tmp/g", name)
    if not os.path.exists(path):
        print(name, "missing"); continue
    run = store.load(path)
    st = Counter(i.status for c in run.cases for i in c.impls)
    print(name, "complete" if run.complete else "INCOMPLETE", "cases", len(run.cases), dict(st), "harness", run.harness)
    if name.startswith(("floor", "oproj")):
        for c in run.cases:
            for i in c.impls:
                median = i.timing.median * 1e6 if i.timing else 0.0
                fraction = i.score.floor_fraction if i.score else None
                print(f"  {c.case_id[:44]:44} {i.name:14} {i.status:8} {median:9.2f} us floor={fraction}")
    elif name.startswith("kb1"):
        comp = [i for c in run.cases for i in c.impls if i.name == "compiled"]
        print("  compiled: hits", sum(int(i.protocol.get("compile_cache_hits", 0)) for i in comp),
              "misses", sum(int(i.protocol.get("compile_cache_misses", 0)) for i in comp),
              "protocol", run.protocol.compile_cache, run.protocol.compile_ahead)
PY
