#!/usr/bin/env bash
# Fourteenth session, last H200 call: every GPU test on the final tree, then (as time allows within
# one 600 s call) one more `ab` on identical trees and o_proj runs, each timed. Carry .whl.
source bench/device_setup.sh
T0=$(date +%s)
left() { echo $(( 565 - ($(date +%s) - T0) )); }
timeout 420 python3 -m pytest tests/gpu -q -p no:cacheprovider -rfEs --durations=10 > $OUT/gpu-tests.txt 2>&1
echo "tests: exit $?, $(( $(date +%s) - T0 )) s" | tee $OUT/steps.txt
rm -rf /tmp/base && mkdir -p /tmp/base && cp -r solbench workloads /tmp/base/
if [ $(left) -gt 95 ]; then
  s=$(date +%s.%N)
  timeout $(left) python3 -m solbench ab --baseline-tree /tmp/base workloads/attn.yaml -w o_proj -q --json > $OUT/ab.json 2> $OUT/ab.err
  echo "ab identical trees: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s" | tee -a $OUT/steps.txt
fi
n=4
while [ $(left) -gt 60 ]; do
  s=$(date +%s.%N)
  timeout $(left) python3 -m solbench run workloads/attn.yaml -w o_proj -q -o $OUT/oproj-$n.json > /dev/null 2>&1
  echo "oproj-$n: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s" | tee -a $OUT/steps.txt
  n=$((n + 1))
done
tail -n 2 $OUT/gpu-tests.txt
