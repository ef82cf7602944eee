#!/usr/bin/env bash
# Tenth session, first H200 call (issue 16): where a worker's time goes, function by function
# (cProfile in every worker, SOLBENCH_PROFILE_DIR), and the wall time of `run -w o_proj` under the
# default protocol and under the adaptive-rounds setting the ninth session's simulation chose.
# STEPS (default "prof default adaptive"): also profadapt, preload (the fork-server preload GPU tests and
# where CuPy caches kernels), tests (every GPU test). Carry .whl. Writes under $OUT; prints a short table last.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:.
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv | tee $OUT/smi.txt
declare -A wall
step() {  # step NAME CMD...: wall time and exit code
  local name=$1; shift
  local s; s=$(date +%s.%N)
  "$@" > $OUT/$name.out 2>&1; local rc=$?
  wall[$name]="$(python3 -c "print(round($(date +%s.%N) - $s, 1))") s, exit $rc"
  echo "$name: ${wall[$name]}"
}
for what in ${STEPS:-prof default adaptive}; do
  case $what in
    prof) mkdir -p $OUT/prof
          step prof env SOLBENCH_PROFILE_DIR=$OUT/prof python3 -m solbench run workloads/attn.yaml -w o_proj -o $OUT/oproj-prof.json -q
          python3 bench/worker_profile.py $OUT/prof --top 60 > $OUT/prof-summary.txt 2>&1
          tar -C $OUT -czf $OUT/prof.tgz prof && rm -rf $OUT/prof ;;
    profadapt) mkdir -p $OUT/prof  # workers and the parent profiled, adaptive rounds (the parent's looks)
          step profadapt env SOLBENCH_PROFILE_DIR=$OUT/prof python3 -m cProfile -o $OUT/prof/parent.prof -m solbench run workloads/attn.yaml -w o_proj --max-rounds 8 --rounds-target 0.015 -o $OUT/oproj-profadapt.json -q
          python3 bench/worker_profile.py $OUT/prof --top 60 > $OUT/prof-summary.txt 2>&1
          python3 -c "import pstats; pstats.Stats('$OUT/prof/parent.prof').sort_stats('cumulative').print_stats(50)" > $OUT/parent-summary.txt 2>&1
          tar -C $OUT -czf $OUT/prof.tgz prof && rm -rf $OUT/prof ;;
    default) step default python3 -m solbench run workloads/attn.yaml -w o_proj -o $OUT/oproj-default.json -q ;;
    adaptive) step adaptive python3 -m solbench run workloads/attn.yaml -w o_proj --max-rounds 8 --rounds-target 0.015 -o $OUT/oproj-adaptive.json -q ;;
    three) step three python3 -m solbench run workloads/attn.yaml -w o_proj --repeat 3 -o $OUT/oproj-three.json -q ;;  # the old default
    preload) step preload python3 -m pytest tests/gpu/test_preload_gpu.py -q -p no:cacheprovider -rfEs
          { echo "HOME=$HOME CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-}"; ls -la ~/.cupy/kernel_cache 2>&1 | wc -l; } >> $OUT/smi.txt ;;
    tests) step tests python3 -m pytest tests/gpu -q -p no:cacheprovider -rfEs --durations=15 ;;
  esac
done
for f in $OUT/oproj-*.json; do python3 -m solbench show $f --harness 2>&1 | tail -n 17 > ${f%.json}.harness.txt; done
cat $OUT/*.harness.txt > $OUT/harness.txt; rm -f $OUT/*.harness.txt  # $OUT: at most 8 files come back
tail -n 5 $OUT/tests.out 2>/dev/null
echo "| step | wall |"; for k in "${!wall[@]}"; do echo "| $k | ${wall[$k]} |"; done
(cd $OUT && tar -czf results.tgz *.json *.out 2>/dev/null && rm -f *.json *.out)  # at most 8 files come back
