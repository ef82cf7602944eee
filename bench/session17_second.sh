#!/usr/bin/env bash
# Seventeenth session, second H200 call (carry .whl; LIMIT: the seconds this call may use):
#  1. bench/transient_probe.py: a point's first samples after a heavy GEMM, after idle, in the steady
#     state, and right after 3 GiB were given back to the driver in this process or another;
#  2. `run workloads/attn.yaml -w o_proj` five times on this tree (a task now gives back the last
#     task's cached memory as it starts), each with its harness table; how the rounds' first samples
#     read (bench/first_samples.py); the gates between the runs are computed afterwards;
#  3. `ab` on identical trees (o_proj) while time is left.
source bench/device_setup.sh
PYTHONPATH=/tmp/site:.:bench timeout 90 python3 bench/transient_probe.py > $OUT/transient.txt 2>&1
echo "transient probe: exit $?, $(( $(date +%s) - T0 )) s" | tee $OUT/steps.txt
oproj_runs 5
python3 bench/first_samples.py $OUT/oproj-*.json > $OUT/first-samples.txt 2>&1
rm -rf /tmp/base && mkdir -p /tmp/base && cp -r solbench workloads /tmp/base/
for n in 1 2; do
  [ $(left) -gt 95 ] || break
  s=$(date +%s.%N)
  timeout $(left) python3 -m solbench ab --baseline-tree /tmp/base workloads/attn.yaml -w o_proj -q --json > $OUT/ab-$n.json 2> $OUT/ab-$n.txt
  echo "ab-$n identical trees: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s" | tee -a $OUT/steps.txt
done
gzip -9 -n $OUT/oproj-*.json
cat $OUT/transient.txt
cat $OUT/first-samples.txt
for k in 1 2 3 4 5; do grep -E "start and retire|side by side \(wall\)|timing loop|^│ wall" $OUT/oproj-$k-harness.txt; done
cat $OUT/steps.txt
(cd $OUT && tar czf texts.tgz $(ls *.txt ab-*.json 2>/dev/null | grep -v '^steps.txt$') && rm -f $(ls *.txt ab-*.json 2>/dev/null | grep -v '^steps.txt$'))
