#!/usr/bin/env bash
# Seventeenth session, last H200 calls (carry .whl; LIMIT: the seconds this call may use), on the
# final tree. PART=tests (default): `pytest tests/gpu`, then `ab` on identical trees (o_proj: rounds
# 2-3 in one pass, then four rounds a look for the undecided points, up to 15) while time is left.
# PART=suite: the shipped suite, every workload file on one GPU, its harness table and
# `compare baseline fused`.
source bench/device_setup.sh
if [ "${PART:-tests}" = tests ]; then
  timeout $(( $(left) - 20 )) python3 -m pytest -q -p no:cacheprovider tests/gpu > $OUT/gpu-tests.txt 2>&1
  echo "pytest tests/gpu: exit $?, $(( $(date +%s) - T0 )) s, $(tail -n 1 $OUT/gpu-tests.txt)" | tee $OUT/steps.txt
  rm -rf /tmp/base && mkdir -p /tmp/base && cp -r solbench workloads /tmp/base/
  for n in 1 2 3; do
    [ $(left) -gt 100 ] || break
    s=$(date +%s.%N)
    timeout $(left) python3 -m solbench ab --baseline-tree /tmp/base workloads/attn.yaml -w o_proj -q --json \
      --out-dir /tmp/ab-$n > $OUT/ab-$n.json 2> $OUT/ab-$n.txt
    echo "ab-$n identical trees: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s" | tee -a $OUT/steps.txt
  done
  tail -n 15 $OUT/gpu-tests.txt
  for n in 1 2 3; do [ -f $OUT/ab-$n.txt ] && grep -E "^gate:|undecided" $OUT/ab-$n.txt; done
else
  s=$(date +%s.%N)
  timeout $(left) python3 -m solbench run workloads/*.yaml -q -o $OUT/suite.json > $OUT/suite.txt 2>&1
  echo "suite: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s" | tee $OUT/steps.txt
  python3 -m solbench show $OUT/suite.json --harness > $OUT/suite-harness.txt 2>&1
  python3 -m solbench compare baseline fused --run $OUT/suite.json > $OUT/suite-compare.txt 2>&1
  gzip -9 -n $OUT/suite.json
  tail -n 22 $OUT/suite-harness.txt
  grep -c INCONCLUSIVE $OUT/suite-compare.txt
fi
cat $OUT/steps.txt
(cd $OUT && tar czf texts.tgz $(ls *.txt ab-*.json 2>/dev/null | grep -v '^steps.txt$') && rm -f $(ls *.txt ab-*.json 2>/dev/null | grep -v '^steps.txt$'))
