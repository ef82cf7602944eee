#!/usr/bin/env bash
# Sixteenth session, last H200 call (carry .whl and results/h200/issue16/session16/call2), on the
# final tree (tuning alone and by the harness's timer, rounds 2-3 in one pass):
#  0. the GPU tests that run with rounds (the default protocol, --repeat 2);
#  1. `run workloads/attn.yaml -w o_proj`, its harness table, and the gate against call 2's o_proj
#     (another machine start, the tree before rounds 2-3 shared a pass) both ways;
#  2. the shipped suite, every workload file on one GPU, its harness table and compare baseline fused;
#  3. `ab` on identical trees (o_proj) while time is left.
source bench/device_setup.sh
T0=$(date +%s)
LIMIT=${LIMIT:-565}  # seconds this call may run: give less when less device time is left (status)
left() { echo $(( LIMIT - ($(date +%s) - T0) )); }
B=results/h200/issue16/session16/call2/oproj.json.gz
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_timers_gpu.py tests/gpu/test_compile_ahead_gpu.py tests/gpu/test_user_kernels.py tests/gpu/test_floor_gpu.py > $OUT/gpu-tests.txt 2>&1
echo "GPU tests of runs with rounds: exit $?, $(tail -n 1 $OUT/gpu-tests.txt)" | tee $OUT/steps.txt
s=$(date +%s.%N)
timeout $(left) python3 -m solbench run workloads/attn.yaml -w o_proj -q -o $OUT/oproj.json > /dev/null 2>&1
echo "o_proj: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s" | tee -a $OUT/steps.txt
python3 -m solbench show $OUT/oproj.json --harness > $OUT/oproj-harness.txt 2>&1
python3 -m solbench gate --baseline $B --current $OUT/oproj.json > $OUT/gates.txt 2>&1
echo "gate call2 -> call3: exit $?" | tee -a $OUT/steps.txt
python3 -m solbench gate --baseline $OUT/oproj.json --current $B >> $OUT/gates.txt 2>&1
echo "gate call3 -> call2: exit $?" | tee -a $OUT/steps.txt
s=$(date +%s.%N)
timeout $(left) python3 -m solbench run workloads/*.yaml -q -o $OUT/suite.json > $OUT/suite.txt 2>&1
echo "suite: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s" | tee -a $OUT/steps.txt
python3 -m solbench show $OUT/suite.json --harness > $OUT/suite-harness.txt 2>&1
python3 -m solbench compare baseline fused --run $OUT/suite.json > $OUT/suite-compare.txt 2>&1
gzip -9 -n $OUT/suite.json; cat $OUT/suite.txt >> $OUT/suite-harness.txt && rm $OUT/suite.txt  # kept if cut later
rm -rf /tmp/base && mkdir -p /tmp/base && cp -r solbench workloads /tmp/base/
for n in 1 2 3; do
  [ $(left) -gt 95 ] || break
  s=$(date +%s.%N)
  timeout $(left) python3 -m solbench ab --baseline-tree /tmp/base workloads/attn.yaml -w o_proj -q --json > $OUT/ab-$n.json 2> $OUT/ab-$n.err
  echo "ab-$n identical trees: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s" | tee -a $OUT/steps.txt
done
gzip -9 -n $OUT/oproj.json
cat $OUT/smi.txt $OUT/gpu-tests.txt >> $OUT/steps.txt && rm $OUT/smi.txt $OUT/gpu-tests.txt  # at most 8 files back
tar czf $OUT/ab.tgz -C $OUT $(cd $OUT && ls ab-* 2>/dev/null) 2>/dev/null && rm -f $OUT/ab-*
tail -n 16 $OUT/oproj-harness.txt
tail -n 20 $OUT/suite-harness.txt
grep -c INCONCLUSIVE $OUT/suite-compare.txt
tail -n 4 $OUT/gates.txt
