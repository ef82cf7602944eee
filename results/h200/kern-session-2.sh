#!/usr/bin/env bash
# The kern branch's second device call: the space-to-depth stem and max-pool kernel (fused_stem),
# its GPU tests, the SDPA backends of the cuBLASLt BERT layer, the per-kernel breakdown.
#   OUT=... bash results/h200/kern-session-2.sh      (carried wheels already on PYTHONPATH)
set -uo pipefail
export PYTHONUNBUFFERED=1 COLUMNS=150
log="$OUT/session.log"
step() { echo "=== $1 $(date -u +%T)" | tee -a "$log"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu,driver_version \
  --format=csv | tee -a "$log"
step tests
timeout 60 python3 -m pytest -q -p no:cacheprovider -rs tests/gpu/test_kernels.py -k "maxpool or layernorm" \
  2>&1 | tee "$OUT/gpu_tests.log" | tail -4
timeout 60 python3 -m pytest -q -p no:cacheprovider -rs tests/unit/test_resnet50_forward.py \
  2>&1 | tee -a "$OUT/gpu_tests.log" | tail -4
step resnet50
timeout 80 python3 -m solbench run workloads/resnet50_forward.yaml -i baseline -i fused -i fused_stem \
  -o "$OUT/resnet50_forward-2.json" 2>&1 | tee -a "$log" | tail -10
step bert
timeout 60 python3 -m solbench run workloads/bert.yaml -w bert_layer -i fused -i fused_lt -i fused_lt_flash \
  -i fused_lt_cudnn -o "$OUT/bert-lt-2.json" 2>&1 | tee -a "$log" | tail -24
step breakdown
timeout 50 python3 bench/resnet50_breakdown.py "$OUT" 2>&1 | grep -v Warn | tee -a "$log" | tail -70
step done
