#!/usr/bin/env bash
# The two-GPU measurement of workloads/collectives.yaml: NCCL, rank r on GPU r. One device call.
# Usage (repository root, a machine with 2 or more GPUs):  bash bench/two_gpu_collectives.sh [budget_s] [tests]
# Writes $OUT/collectives.json (the run), run.log, topo.txt and table.md (busbw per size, overlap);
# with "tests", first the two-GPU tests (NCCL faults on one rank; tests/gpu/test_collectives_gpu.py).
set -uo pipefail
OUT=${OUT:-/tmp/solbench-out}; mkdir -p "$OUT"
BUDGET=${1:-1}
if ls .whl/*.whl >/dev/null 2>&1; then  # pydantic and friends, carried (the device image lacks them)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:.
else
  export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 COLUMNS=170
# NVLink multicast stays off (the lent machines require it; ranks inherit this environment, and no
# implementation in workloads/collectives.yaml sets NCCL_NVLS_ENABLE or NCCL_ALGO=NVLS)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1; head -4 "$OUT/topo.txt"  # NV<n>: NVLink; PIX/PHB/SYS: PCIe only
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,power.limit,driver_version --format=csv
python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version(), 'gpus', torch.cuda.device_count())"
if [ "${2:-}" = tests ]; then
  python3 -m pytest tests/gpu/test_collectives_gpu.py -q -p no:cacheprovider -rs 2>&1 | tee "$OUT/gpu_tests.log" | tail -8
fi
python3 -m solbench run workloads/collectives.yaml --budget "$BUDGET" --timeout 300 -o "$OUT/collectives.json" \
  > "$OUT/run.log" 2>&1
echo "solbench exit $?"
grep -E "ERROR|CRASHED|TIMEOUT|INCORRECT|REWARD_HACK|INVALID" "$OUT/run.log" | head -20
python3 bench/collectives_table.py "$OUT/collectives.json" | tee "$OUT/table.md"
