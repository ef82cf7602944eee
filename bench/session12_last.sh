#!/usr/bin/env bash
# Twelfth session, last H200 call: the bf16 launch-shape sweep of the FP8-weight tiles after the
# four-instruction widening (bench/fp8w_sweep.py, bf16 only), then `ab` on identical trees (a copy of
# this tree as the baseline) over o_proj: exit code and wall time. Carry .whl.
source bench/device_setup.sh
timeout 200 python3 -c "
import torch
from bench import fp8w_sweep as f
print(torch.cuda.get_device_name(0), torch.__version__, flush=True)
f.sweep(torch.bfloat16, f.CONFIGS)
print('| variant | median us |')
for row in f.ROWS:
    if 'median_us' in row:
        print(f\"| {row['name']} | {row['median_us']:.2f} |\")
" > $OUT/sweep-bf16.log 2>&1; echo "sweep: exit $?"
mkdir -p /tmp/base && tar --exclude=./.whl --exclude=./.before --exclude=./results -cf - . | tar -xf - -C /tmp/base
s=$(date +%s)
timeout 330 python3 -m solbench ab --baseline-tree /tmp/base workloads/attn.yaml -w o_proj -q --out-dir /tmp/ab > $OUT/ab.txt 2>&1
echo "ab identical trees o_proj: exit $?, $(( $(date +%s) - s )) s" | tee -a $OUT/ab.txt
grep -E "T=64|T=16|T=32" $OUT/sweep-bf16.log | grep -v "rel L2" | head -60
tail -n 15 $OUT/ab.txt
