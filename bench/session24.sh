#!/usr/bin/env bash
# The next session's H200 calls on the tree with one CUDA work queue per worker where one stream was
# seen (solbench/measure/queues.py). Carry .whl. LIMIT: the seconds this call may use. PARTS, in order
# while time is left (default "tests"):
# tests: `pytest tests/gpu` (the whole GPU suite on the final tree; about 400 s), then one
#   `run -w o_proj` under bench/cli_phases.py (device_setup.sh gpu_tests).
# five: RUNS (default 5) default `run workloads/attn.yaml -w o_proj` (five-1..5), then bench/between_runs.py and
#   bench/repeat_gates.py over them (spread, CI coverage, gate over the 20 ordered pairs).
# suite: the shipped suite (every workload file on one GPU), its harness table, `compare baseline fused`.
# graph: bench/placement_probe.py --mode graph --with-add in N (default 16) fresh processes: each call
#   launched, as a CUDA graph's replay, unflushed and on two streams of its own; whether the per-process
#   offset lies on the launch path or in what the flush evicts, and whether it belongs to the process
#   or to a work queue (about 200 s).
source bench/device_setup.sh
touch $OUT/steps.txt
for part in ${PARTS:-tests}; do
  [ $(left) -gt 60 ] || break
  echo "== $part ($(( $(date +%s) - T0 )) s in)" | tee -a $OUT/steps.txt
  case $part in
  tests)
    gpu_tests
    ;;
  graph)
    timeout $(( $(left) - 30 )) python3 bench/placement_probe.py --mode graph --with-add --processes "${N:-16}" \
      --placements 5 > $OUT/placement-graph.txt 2>&1
    echo "placement_probe --mode graph: exit $?" | tee -a $OUT/steps.txt
    tail -n 6 $OUT/placement-graph.txt | tee -a $OUT/steps.txt
    ;;
  five)
    oproj_runs "${RUNS:-5}" five
    python3 bench/between_runs.py $OUT/five-*.json 2>&1 | tee -a $OUT/steps.txt
    python3 bench/repeat_gates.py $OUT/five-*.json 2>&1 | tail -n 20 | tee -a $OUT/steps.txt
    ;;
  suite)
    s=$(date +%s)
    timeout $(left) python3 -m solbench run workloads/*.yaml -q -o $OUT/suite.json > $OUT/suite.txt 2>&1
    echo "suite: exit $?, $(( $(date +%s) - s )) s" | tee -a $OUT/steps.txt
    python3 -m solbench show $OUT/suite.json --harness > $OUT/suite-harness.txt 2>&1
    python3 -m solbench compare baseline fused --run $OUT/suite.json > $OUT/suite-compare.txt 2>&1
    tail -n 5 $OUT/suite-harness.txt | tee -a $OUT/steps.txt
    echo "INCONCLUSIVE rows in compare baseline fused: $(grep -c INCONCLUSIVE $OUT/suite-compare.txt)" | tee -a $OUT/steps.txt
    ;;
  esac
done
pack_out
