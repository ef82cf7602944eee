#!/usr/bin/env bash
# One device call for issue 10 (profile, tune, calibrate): everything under $OUT, packed in two archives.
# Usage (on the GPU machine, from a copy of the repository): bash results/h200/tools-session.sh WHEEL_DIR
set -uo pipefail
OUT=${OUT:-/tmp/solbench-out}; P=$OUT/p; mkdir -p "$P/prof"
W=${1:-.whl}
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$W"/pydantic-*.whl \
  "$W"/pydantic_core-*.whl "$W"/annotated_types-*.whl "$W"/typing_inspection-*.whl "$W"/typing_extensions-*.whl
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1 COLUMNS=220
log=$P/session.log
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.limit,driver_version --format=csv | tee -a "$log"
ncu --version | tee -a "$log"
ncu --query-metrics > "$P/query-metrics.txt" 2>&1
prof() { echo "=== profile $* $(date -u +%T)" >> "$log"
         timeout 150 python3 -m solbench profile "$1" -w "$2" -i "$3" --case "$4" --out-dir "$P/prof" 2>&1 | tee -a "$log"; }
prof workloads/attn.yaml o_proj fused "o_proj[tokens=16,hidden=4096,bfloat16]"
prof workloads/attn.yaml o_proj fused "o_proj[tokens=16384,hidden=4096,bfloat16]"
prof workloads/bert.yaml residual_layernorm fused "residual_layernorm[tokens=16384,hidden=4096,bfloat16]"
prof workloads/resnet50.yaml conv_bn_relu fused "conv_bn_relu[n=128,c=64,h=56,w=56,k=256,r=1,s=1,stride=1,pad=0,bfloat16]"
echo "=== tune $(date -u +%T)" >> "$log"
timeout 200 python3 -m solbench tune tests/data/tune_layernorm.yaml --budget 0.3 -o "$P/tune-layernorm.json" \
  --tuned-file "$P/tuned.json" -v 2>&1 | tee -a "$log"
prof workloads/attn.yaml o_proj baseline "o_proj[tokens=16,hidden=4096,bfloat16]"
prof workloads/bert.yaml residual_layernorm baseline "residual_layernorm[tokens=16384,hidden=4096,bfloat16]"
echo "=== calibrate $(date -u +%T)" >> "$log"
timeout 90 python3 -m solbench calibrate --seconds 0.5 --results-dir "$P/res" 2>&1 | tee -a "$log"
echo "=== done $(date -u +%T)" >> "$log"
cd "$OUT" && tar czf small.tgz --exclude='*.ncu-rep' p && tar czf reps.tgz p/prof/*.ncu-rep; rm -rf p; ls -la "$OUT"
