#!/usr/bin/env bash
# Next session's H200 calls (carry .whl; LIMIT: the seconds this call may use).
# PART=tests: `pytest tests/gpu` on the tree, then one `run -w o_proj` under bench/cli_phases.py (where the
# command's wall time goes outside the run's harness table).
# PART=fresh (ran once, on d942e26; the knob was then removed, BENCHMARKS.md twenty-first session): `run -w o_proj`
# alternately with the default and with SOLBENCH_FRESH_FORK_SERVER=pass, N each
# (default 3) while time is left; then bench/between_runs.py over each kind's runs (does the spread between
# runs that the rounds do not show move into the rounds when every pass forks from a fresh server?).
# PART=target: `run -w o_proj --target $TARGET` (default 0.005) N times (default 3), then bench/between_runs.py
# and the spread of the run medians (what a tighter interval costs in wall time, and what it buys in spread).
source bench/device_setup.sh
touch $OUT/steps.txt
stamp() { python3 -c "import time; print(f'{time.time() - $1:.1f}')"; }
case "${PART:-tests}" in
tests)
  gpu_tests
  ;;
fresh)
  for k in $(seq 1 "${N:-3}"); do
    for kind in default fresh; do
      [ $(left) -gt 65 ] || break 2
      s=$(date +%s.%N)
      if [ $kind = fresh ]; then export SOLBENCH_FRESH_FORK_SERVER=pass; else unset SOLBENCH_FRESH_FORK_SERVER; fi
      timeout $(left) python3 -m solbench run workloads/attn.yaml -w o_proj -q -o $OUT/$kind-$k.json > $OUT/$kind-$k.txt 2>&1
      echo "$kind-$k: exit $?, $(stamp $s) s, $(python3 bench/point_rounds.py $OUT/$kind-$k.json)" | tee -a $OUT/steps.txt
    done
  done
  unset SOLBENCH_FRESH_FORK_SERVER
  for kind in default fresh; do
    python3 bench/between_runs.py $OUT/$kind-*.json 2>&1 | tee -a $OUT/steps.txt
  done
  ;;
target)
  for k in $(seq 1 "${N:-3}"); do
    [ $(left) -gt 100 ] || break
    s=$(date +%s.%N)
    timeout $(left) python3 -m solbench run workloads/attn.yaml -w o_proj -q --target "${TARGET:-0.005}" \
      -o $OUT/target-$k.json > $OUT/target-$k.txt 2>&1
    echo "target-$k: exit $?, $(stamp $s) s, $(python3 bench/point_rounds.py $OUT/target-$k.json)" | tee -a $OUT/steps.txt
  done
  python3 bench/between_runs.py $OUT/target-*.json 2>&1 | tee -a $OUT/steps.txt
  ;;
esac
pack_out
