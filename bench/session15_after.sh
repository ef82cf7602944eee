#!/usr/bin/env bash
# Fifteenth session, third H200 call (right after bench/session15_tests.sh): the shipped suite timed
# with side by side in every workload and added rounds in passes, its harness table and `compare`;
# then o_proj on the last stop's tree (.before/, carried) and on this one, alternated; then `ab` on
# identical trees as time allows. Carry .whl and .before.
source bench/device_setup.sh
T0=$(date +%s)
[ -d .before ] || tar xzf .before.tgz
left() { echo $(( 515 - ($(date +%s) - T0) )); }
s=$(date +%s.%N)
timeout 290 python3 -m solbench run workloads/*.yaml -q -o $OUT/suite.json > $OUT/suite.txt 2>&1
echo "suite: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s" | tee $OUT/steps.txt
python3 -m solbench show $OUT/suite.json --harness > $OUT/suite-harness.txt 2>&1
python3 -m solbench compare baseline fused --run $OUT/suite.json > $OUT/suite-compare.txt 2>&1
for tree in before after; do
  [ $(left) -gt 70 ] || break
  if [ $tree = before ]; then path=/tmp/site:.before; else path=/tmp/site:.; fi
  s=$(date +%s.%N)
  PYTHONPATH=$path timeout $(left) python3 -m solbench run workloads/attn.yaml -w o_proj -q -o $OUT/oproj-$tree.json > /dev/null 2>&1
  echo "oproj $tree: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s" | tee -a $OUT/steps.txt
done
rm -rf /tmp/base && mkdir -p /tmp/base && cp -r solbench workloads /tmp/base/
if [ $(left) -gt 95 ]; then
  s=$(date +%s.%N)
  timeout $(left) python3 -m solbench ab --baseline-tree /tmp/base workloads/attn.yaml -w o_proj -q --json > $OUT/ab.json 2> $OUT/ab.err
  echo "ab identical trees: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s" | tee -a $OUT/steps.txt
fi
(cd $OUT && tar czf runs.tgz suite.json suite.txt oproj-*.json ab.json ab.err 2>/dev/null && rm -f suite.json suite.txt oproj-*.json ab.json ab.err)
tail -n 20 $OUT/suite-harness.txt
