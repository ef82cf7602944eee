#!/usr/bin/env bash
# Issue 11 on two H200s in ONE device call: the collectives (NCCL, 2 ranks), the shipped suite on one
# GPU vs both, then GPU tests while time is left. Each step runs only if LIMIT leaves it enough time.
# Usage (GPU machine with 2 GPUs, repository root, carried .whl): LIMIT=540 bash bench/x2_session.sh
set -uo pipefail
OUT=${OUT:-/tmp/solbench-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1 COLUMNS=170
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # multicast stays off
LIMIT=${LIMIT:-540}; log="$OUT/session.log"
source bench/steps.sh
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,power.limit,temperature.gpu,driver_version --format=csv \
  | tee -a "$log"
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1; head -3 "$OUT/topo.txt" | tee -a "$log"
python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version(), 'gpus', torch.cuda.device_count())" \
  | tee -a "$log"
step collectives 120 bash -c "python3 -m solbench run workloads/collectives.yaml --repeat 1 --budget 0.5 --timeout 120 \
  -o $OUT/collectives.json > $OUT/collectives.log 2>&1; echo solbench exit \$?"
[ -f "$OUT/collectives.json" ] && python3 bench/collectives_table.py "$OUT/collectives.json" > "$OUT/collectives.md" 2>&1
step scale 200 bash -c "python3 bench/scale_devices.py --out $OUT/scale --no-tsol --repeat 1 > $OUT/scale.md 2> $OUT/scale.err"
(cd "$OUT" && tar czf scale.tar.gz scale 2>/dev/null && rm -rf scale)
step gpu-tests 40 bash -c "python3 -m pytest tests/gpu -q -p no:cacheprovider -rs --deselect tests/gpu/test_timers_gpu.py::test_calibrate_measures_plausible_ceilings \
  > $OUT/gpu_tests.log 2>&1; tail -5 $OUT/gpu_tests.log"
echo "=== done $(date -u +%T)" | tee -a "$log"
cat "$OUT/collectives.md" "$OUT/scale.md" 2>/dev/null | tail -60
