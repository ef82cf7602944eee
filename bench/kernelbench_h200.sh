#!/usr/bin/env bash
# KernelBench level 1 on one GPU, eager (`baseline`) and torch.compile (`compiled`), in one invocation.
#
#   bench/kernelbench_h200.sh /path/to/KernelBench [level] [extra solbench run options...]
#
# 1. Dry run on the CPU first: every problem must import and trace (costs on the meta device);
#    a problem that cannot be mapped exits 2 with one line naming its file.
# 2. Then the timed run on the GPU (cupti timer where cupti-python is installed).
# Results: results/kernelbench_level<N>.json and .md (the Markdown table for BENCHMARKS.md).
set -euo pipefail
KB=${1:?path to a KernelBench checkout}
LEVEL=${2:-1}
shift $(( $# >= 2 ? 2 : 1 ))
DIR="$KB/KernelBench/level$LEVEL"
OUT=results/kernelbench_level$LEVEL
mkdir -p results
start=$(date +%s)
python -m solbench run "$DIR" --dry-run --device cpu -o "$OUT.dry.json" --force -q
TIMER=cold
python -c "import cupti" 2>/dev/null && TIMER=cupti
python -m solbench run "$DIR" --device cuda --timer "$TIMER" -i baseline -i compiled --repeat 1 \
    --timeout 300 -o "$OUT.json" --force "$@" || rc=$?
python -m solbench show "$OUT.json" --markdown > "$OUT.md" || true
echo "wall: $(( $(date +%s) - start )) s; exit ${rc:-0}; tables: $OUT.md"
