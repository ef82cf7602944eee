#!/usr/bin/env bash
# Fifteenth session, first H200 call: the test that failed on 5b6dc58 (a healthy implementation timed
# out beside a hung one; fixed by the re-run alone), then the shipped suite, every workload file on one
# GPU, timed, with its harness table and `compare baseline fused` inside the run. Carry .whl.
source bench/device_setup.sh
T0=$(date +%s)
left() { echo $(( 570 - ($(date +%s) - T0) )); }
timeout 150 python3 -m pytest tests/gpu/test_isolation_gpu.py -q -p no:cacheprovider -rfEs > $OUT/isolation-tests.txt 2>&1
echo "isolation tests: exit $?, $(( $(date +%s) - T0 )) s" | tee $OUT/steps.txt
s=$(date +%s.%N)
timeout $(( $(left) - 15 )) python3 -m solbench run workloads/*.yaml -q -o $OUT/suite.json > $OUT/suite.txt 2>&1
echo "suite: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s" | tee -a $OUT/steps.txt
python3 -m solbench show $OUT/suite.json --harness > $OUT/suite-harness.txt 2>&1
python3 -m solbench compare baseline fused --run $OUT/suite.json > $OUT/suite-compare.txt 2>&1
tail -n 3 $OUT/isolation-tests.txt
tail -n 22 $OUT/suite-harness.txt
