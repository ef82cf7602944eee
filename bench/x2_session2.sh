#!/usr/bin/env bash
# Second two-H200 call: one GPU vs both (the suite), then why the default NCCL protocol stalled in the
# first call (bench/nccl_diag.py), then the collectives with NCCL_PROTO=Simple while time is left.
set -uo pipefail
OUT=${OUT:-/tmp/solbench-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1 COLUMNS=170
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # multicast stays off
LIMIT=${LIMIT:-270}; log="$OUT/session.log"
source bench/steps.sh
nvidia-smi --query-gpu=index,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee -a "$log"
step scale 120 bash -c "python3 bench/scale_devices.py --out $OUT/scale --no-tsol --one-run --repeat 1 > $OUT/scale.md 2> $OUT/scale.err"
(cd "$OUT" && tar czf scale.tar.gz scale 2>/dev/null && rm -rf scale)
for mode in plain spin flush cupti; do
  step "diag-$mode" 25 timeout 20 python3 bench/nccl_diag.py $mode 2>&1 | grep -v Warning | tail -3 | tee -a "$log"
done
step collectives-simple 40 bash -c "NCCL_PROTO=Simple python3 -m solbench run workloads/collectives.yaml -i baseline -i rs_ag \
  -i sequential -i overlapped -i compute -i comm --repeat 1 --budget 0.3 --timeout 30 -o $OUT/collectives.json \
  > $OUT/collectives.log 2>&1; echo solbench exit \$?"
[ -f "$OUT/collectives.json" ] && python3 bench/collectives_table.py "$OUT/collectives.json" > "$OUT/collectives.md" 2>&1
echo "=== done $(date -u +%T)" | tee -a "$log"
cat "$OUT/scale.md" "$OUT/collectives.md" 2>/dev/null | tail -50
