#!/usr/bin/env bash
# First H200 call of a session: GPU tests on the tree, o_proj (default protocol) with its harness
# breakdown, a cProfile of one in-process o_proj round (where a task's host time goes), attach test.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:. || exit 1
export PYTHONUNBUFFERED=1 LIMIT=${LIMIT:-560} log=$OUT/steps.log
. bench/steps.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,power.limit --format=csv | tee $OUT/smi.txt
step gpu-tests 200 bash -c "python3 -m pytest tests/gpu -q -p no:cacheprovider -rfEs 2>&1 | tail -n 40 > $OUT/gpu_tests.log"
tail -n 3 $OUT/gpu_tests.log | tee -a $log
step oproj 80 bash -c "/usr/bin/time -f 'command wall %e s' python3 -m solbench run workloads/attn.yaml -w o_proj -o $OUT/oproj.json -q 2>&1 | tail -n 3"
step oproj-harness 20 python3 -m solbench show $OUT/oproj.json --harness
step profile 60 python3 -m cProfile -o $OUT/oproj1.prof -m solbench run workloads/attn.yaml -w o_proj --in-process --repeat 1 -o /tmp/p.json -q
[ -f $OUT/oproj1.prof ] && python3 - <<'PY' > $OUT/profile.txt
import pstats, os
p = pstats.Stats(os.path.join(os.environ["OUT"], "oproj1.prof"))
p.sort_stats("cumulative").print_stats(70)
p.sort_stats("tottime").print_stats(40)
PY
step attach 60 python3 -m solbench run tests/data/hostile/attach.yaml --device cuda -q -o $OUT/attach.json
echo "attach exit $?" | tee -a $log
grep "^===" $log
