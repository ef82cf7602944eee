#!/usr/bin/env bash
# Twentieth session, H200 calls (carry .whl; LIMIT: the seconds this call may use).
# PART=tests: `pytest tests/gpu` on the tree, then `run -w o_proj` for each of RUNS (default "new"), in turn
# while time is left: new (this tree, default protocol), own8 (this tree, --rounds-spread own --max-rounds 8,
# the protocol before the case-pooled rounds), old (the solbench/ copied into $OLD, default protocol).
# PART=suite: the shipped suite (every workload file on one GPU), its harness table, `compare baseline fused`.
source bench/device_setup.sh
stamp() { python3 -c "import time; print(f'{time.time() - $1:.1f}')"; }
oproj_in() {  # oproj_in NAME TREE [ARGS...]: one `run -w o_proj` with TREE's solbench, its harness table
  # (-P: not the working folder first on sys.path, so that TREE's solbench is the one imported)
  local s=$(date +%s.%N) name=$1 tree=$2; shift 2
  PYTHONPATH=/tmp/site:$tree timeout $(left) python3 -P -m solbench run workloads/attn.yaml -w o_proj -q \
    -o $OUT/$name.json "$@" > $OUT/$name.txt 2>&1
  echo "$name: exit $?, $(stamp $s) s, $(python3 bench/point_rounds.py $OUT/$name.json)" | tee -a $OUT/steps.txt
  python3 -m solbench show $OUT/$name.json --harness > $OUT/$name-harness.txt 2>&1
}
touch $OUT/steps.txt
case "${PART:-tests}" in
tests)
  timeout $(( $(left) - 100 )) python3 -m pytest -q -p no:cacheprovider tests/gpu > $OUT/gpu-tests.txt 2>&1
  echo "pytest tests/gpu: exit $?, $(( $(date +%s) - T0 )) s, $(tail -n 1 $OUT/gpu-tests.txt)" | tee -a $OUT/steps.txt
  n=0
  for kind in ${RUNS:-new}; do
    n=$((n + 1)); [ $(left) -gt 55 ] || break
    case $kind in new) oproj_in new-$n . ;; own8) oproj_in own8-$n . --rounds-spread own --max-rounds 8 ;;
      old) oproj_in old-$n "$OLD" ;; esac
  done
  grep -E "passed|failed|error" $OUT/gpu-tests.txt | tail -n 15
  for f in $OUT/*-harness.txt; do echo "== $f"; grep -E "start and retire|waiting for retired|set-up and checks, workers|timing loop|^│ wall" $f; done
  ;;
suite)
  s=$(date +%s.%N)
  timeout $(left) python3 -m solbench run workloads/*.yaml -q -o $OUT/suite.json > $OUT/suite.txt 2>&1
  echo "suite: exit $?, $(stamp $s) s" | tee -a $OUT/steps.txt
  python3 -m solbench show $OUT/suite.json --harness > $OUT/suite-harness.txt 2>&1
  python3 -m solbench compare baseline fused --run $OUT/suite.json > $OUT/suite-compare.txt 2>&1
  tail -n 22 $OUT/suite-harness.txt
  echo "INCONCLUSIVE rows: $(grep -c INCONCLUSIVE $OUT/suite-compare.txt)"
  echo "leaked semaphore warnings: $(grep -c 'leaked semaphore' $OUT/suite.txt)"
  gzip -9 -n $OUT/suite.json
  ;;
esac
for f in $OUT/*.json; do [ -f "$f" ] && gzip -9 -n "$f"; done
cat $OUT/steps.txt
(cd $OUT && tar czf texts.tgz $(ls *.txt 2>/dev/null | grep -v '^steps.txt$') && rm -f $(ls *.txt 2>/dev/null | grep -v '^steps.txt$'))
