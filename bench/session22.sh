#!/usr/bin/env bash
# Next session's H200 calls (carry .whl; LIMIT: the seconds this call may use).
# PART=tests: `pytest tests/gpu` on the tree, then one `run -w o_proj` under bench/cli_phases.py (which now
# also prints the profile's largest cumulative times in solbench's functions).
# PART=apps: which processes hold a CUDA context while `run -w o_proj` runs: nvidia-smi's compute apps
# every 0.2 s; the run's own pid is marked, and every pid that holds one through most of the run is listed
# (workers come and go). A context in the parent (or the fork server)
# would be a state that every round of one run shares and that differs between runs (BENCHMARKS.md, issue 16,
# twenty-first session: what the rounds miss). Then N (default 3) more default runs for between_runs.py (the
# sampled run left out: nvidia-smi queried every 0.2 s beside it may move its numbers).
# PART=placement: bench/placement_probe.py (N processes, default 12) in each of MODES (junk, frag,
# frag-touch, junk-expandable, timer); then EXP runs of `run -w o_proj` under expandable segments.
# PART=cupti: the card's topology, then N (default 3) runs with `--timer cupti` for between_runs.py.
source bench/device_setup.sh
touch $OUT/steps.txt
case "${PART:-tests}" in
tests)
  gpu_tests
  ;;
apps)
  python3 -m solbench run workloads/attn.yaml -w o_proj -q -o $OUT/apps-run.json > $OUT/apps-run.txt 2>&1 &
  run_pid=$!
  while kill -0 $run_pid 2>/dev/null; do
    echo "$(date +%s.%N) $(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | tr '\n' ';')" >> $OUT/apps.txt
    sleep 0.2
  done
  wait $run_pid; echo "apps run: exit $?" | tee -a $OUT/steps.txt
  python3 - "$run_pid" $OUT/apps.txt <<'PY' | tee -a $OUT/steps.txt
import collections, subprocess, sys
run_pid, path = sys.argv[1], sys.argv[2]
seen = collections.Counter()
lines = open(path).read().splitlines()
for line in lines:
    for app in line.split(" ", 1)[1].split(";"):
        if app.strip():
            seen[app.split(",")[0].strip()] += 1
print(f"{len(lines)} readings, {len(seen)} pids with a context; the run's own pid {run_pid}: "
      f"{seen.get(run_pid, 0)} readings")
print("pids seen in more than half of the readings:", [p for p, n in seen.items() if n > len(lines) / 2])
PY
  oproj_runs "${N:-3}"
  python3 bench/between_runs.py $OUT/oproj-*.json 2>&1 | tee -a $OUT/steps.txt
  ;;
cupti)
  # Is the state the rounds miss in the kernels or around them? The CUPTI timer sums the kernels' own
  # durations (no event pair, no gaps between a call's kernels); N runs of it against the event runs.
  # The card's NUMA and CPU affinity first (a worker far from the GPU would be a per-process state).
  { nvidia-smi topo -m; lscpu | grep -i -E "numa|^cpu\(s\)|model name"; } > $OUT/topo.txt 2>&1
  cat $OUT/topo.txt >> $OUT/steps.txt
  oproj_runs "${N:-3}" cupti --timer cupti
  python3 bench/between_runs.py $OUT/cupti-*.json 2>&1 | tee -a $OUT/steps.txt
  if [ "${EV:-0}" -gt 0 ]; then  # EV event-timer runs on the same card, for the comparison
    oproj_runs "$EV"
    python3 bench/between_runs.py $OUT/oproj-*.json 2>&1 | tail -n 3 | tee -a $OUT/steps.txt
  fi
  ;;
placement)
  # Is the per-process state where a process's memory lies? bench/placement_probe.py.
  for mode in ${MODES:-junk}; do  # frag, frag-touch, junk, junk-expandable, timer
    case $mode in
    *-touch) extra=--touch ;;
    *-expandable) extra="--alloc-conf expandable_segments:True" ;;
    *) extra= ;;
    esac
    echo "== $mode" | tee -a $OUT/steps.txt
    timeout $(left) python3 bench/placement_probe.py --processes "${N:-12}" --placements 7 --mode "${mode%%-*}" $extra \
      2>&1 | tee $OUT/placement-$mode.txt | tee -a $OUT/steps.txt
  done
  if [ "${EXP:-0}" -gt 0 ]; then  # EXP default runs with every process under expandable segments
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True oproj_runs "$EXP" expandable
    python3 bench/between_runs.py $OUT/expandable-*.json 2>&1 | tail -n 3 | tee -a $OUT/steps.txt
  fi
  ;;
esac
pack_out
