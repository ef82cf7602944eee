#!/usr/bin/env bash
# The kern branch's device call (issue 9 items 4, 5, 6), run from the repository root on the H200:
#   OUT=... bash results/h200/kern-session.sh      (carried wheels already on PYTHONPATH)
# Steps in priority order, each under its own time limit; logs and JSON under $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1 COLUMNS=150
log="$OUT/session.log"
step() { echo "=== $1 $(date -u +%T)" | tee -a "$log"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu,driver_version \
  --format=csv | tee -a "$log"
step resnet50
timeout 100 python3 -m solbench run workloads/resnet50_forward.yaml -i baseline -i channels_last -i fused_eager \
  -i fused -o "$OUT/resnet50_forward.json" 2>&1 | tee -a "$log" | tail -14
step resnet50-compiled
timeout 128 python3 -m solbench run workloads/resnet50_forward.yaml -i compiled -o "$OUT/resnet50_compiled.json" \
  2>&1 | tee -a "$log" | tail -8
step bert
timeout 80 python3 -m solbench run workloads/bert.yaml -w bert_layer -w bias_gelu_matmul -i baseline -i fused \
  -i fused_lt -i lt -i torch_encoder -o "$OUT/bert-lt.json" 2>&1 | tee -a "$log" | tail -30
step qkv
timeout 40 python3 -m solbench run workloads/attn.yaml -w qkv_proj -o "$OUT/attn-qkv.json" 2>&1 | tee -a "$log" | tail -14
step tests
timeout 60 python3 -m pytest -q -p no:cacheprovider -rs tests/gpu/test_kernels.py -k layernorm \
  tests/unit/test_resnet50_forward.py 2>&1 | tee "$OUT/gpu_tests.log" | tail -6
step breakdown
timeout 40 python3 bench/resnet50_breakdown.py "$OUT" 2>&1 | tee -a "$log" | tail -30
step done
