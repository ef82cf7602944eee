#!/usr/bin/env bash
# Fourteenth session, third H200 call (issue 16): a case's workers set up and check side by side,
# then time one at a time (session.run_case). Three default o_proj runs and one `ab` on identical
# trees, each timed; the harness breakdown of the first run. Carry .whl.
source bench/device_setup.sh
R=$OUT
for n in 1 2 3; do
  s=$(date +%s.%N)
  timeout 90 python3 -m solbench run workloads/attn.yaml -w o_proj -q -o $R/oproj-$n.json > $R/oproj-$n.txt 2>&1
  echo "oproj-$n: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s" | tee -a $R/steps.txt
done
python3 -m solbench show $R/oproj-1.json --harness > $R/harness-1.txt 2>&1
rm -rf /tmp/base && mkdir -p /tmp/base && cp -r solbench workloads /tmp/base/
s=$(date +%s.%N)
timeout 150 python3 -m solbench ab --baseline-tree /tmp/base workloads/attn.yaml -w o_proj -q --json > $R/ab.json 2> $R/ab.err
echo "ab identical trees: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s" | tee -a $R/steps.txt
for n in 1 2 3; do for m in 1 2 3; do [ $n != $m ] && { python3 -m solbench gate --baseline $R/oproj-$n.json --current $R/oproj-$m.json -q > /dev/null 2>&1; echo "gate $n->$m: exit $?"; }; done; done | tee -a $R/steps.txt
grep -E "side by side|timing loop|^│ wall|GPU busy" $R/harness-1.txt
tail -n 3 $R/ab.err
