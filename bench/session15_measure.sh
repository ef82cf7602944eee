#!/usr/bin/env bash
# Issue 16's remaining H200 readings, after bench/session14_final.sh (GPU tests) in the next session.
# PART=ab: four more `ab` on identical trees (with session 14's two: five of five at most 90 s?).
# PART=suite: the shipped suite, every workload file on one GPU, timed, with its harness table.
# Carry .whl. Each part fits one 600 s call.
source bench/device_setup.sh
T0=$(date +%s)
left() { echo $(( 565 - ($(date +%s) - T0) )); }
case "${PART:-ab}" in
  ab)
    rm -rf /tmp/base && mkdir -p /tmp/base && cp -r solbench workloads /tmp/base/
    for n in 1 2 3 4; do
      [ $(left) -gt 100 ] || break
      s=$(date +%s.%N)
      timeout $(left) python3 -m solbench ab --baseline-tree /tmp/base workloads/attn.yaml -w o_proj -q --json > $OUT/ab-$n.json 2> $OUT/ab-$n.err
      echo "ab-$n identical trees: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s" | tee -a $OUT/steps.txt
    done ;;
  suite)
    s=$(date +%s.%N)
    timeout $(left) python3 -m solbench run workloads/*.yaml -q -o $OUT/suite.json > $OUT/suite.txt 2>&1
    echo "suite: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s" | tee -a $OUT/steps.txt
    python3 -m solbench show $OUT/suite.json --harness > $OUT/suite-harness.txt 2>&1
    python3 -m solbench compare baseline fused --run $OUT/suite.json > $OUT/suite-compare.txt 2>&1
    tail -n 20 $OUT/suite-harness.txt ;;
esac
