#!/usr/bin/env bash
# The next session's H200 calls (carry .whl; LIMIT: the seconds this call may use). PARTS: a list of
# rotate, timer, ctx, runs, tests (default "rotate timer ctx"), in that order while time is left.
# timer: bench/placement_probe.py --mode timer (N processes, default 16): the same operands, a new
#   timer (L2 flush buffer behind a held block) at each placement. If the times spread inside one
#   process as they do between processes (BENCHMARKS.md, issue 16, twenty-second session: 0.7-1.3%),
#   the flush buffer's place is the per-process state.
# rotate: the same probe, --mode rotate: one flush buffer against four taken in turn (spaced, and
#   back to back), sample by sample; if four shrink the spread between processes, a timer that
#   rotates them is the remedy.
# workspace, wspad: --mode workspace --with-add (the first operands and timer, cuBLAS's workspace moved
#   behind a held block up to 8 GiB, or up to 64 MiB for wspad; an element-wise add as a control).
# code: --mode code (a new copy of a 32 MiB reading kernel, through CuPy, behind a padding module up to
#   64 MiB at each placement; the addmm calls beside it).
# records: bench/kernel_records.py (N processes): each GEMM kernel's CUPTI record and own duration per
#   process. eager: --mode timer --placements 3 --with-add under CUDA_MODULE_LOADING=EAGER (every
#   kernel's code loaded when the context starts, before any tensor), N processes.
# conn1: RUNS (default 2) default `run -w o_proj` with CUDA_DEVICE_MAX_CONNECTIONS=1 in the run's
#   environment (its workers inherit it): the wall time and the medians against `runs`' runs.
# quick: pytest tests/gpu/test_queues_gpu.py tests/gpu/test_cupti_gpu.py, then RUNS (default 2) default
#   `run -w o_proj` (the work-queue policy on: one queue from an implementation's second round).
# ctx: where a worker's 0.18 s of serialized start and exit goes, under driver settings that shrink
#   what a context allocates: bench/worker_steps.py with 14 workers side by side, by default and with
#   CUDA_DEVICE_MAX_CONNECTIONS=4 and =1 (hardware work queues a context creates; fewer would
#   serialize a multi-stream implementation's streams, so only a measured gain would justify it).
# runs: RUNS (default 3) default `run -w o_proj`, then bench/between_runs.py over them.
# tests: `pytest tests/gpu` and one `run -w o_proj` under bench/cli_phases.py.
source bench/device_setup.sh
touch $OUT/steps.txt
for part in ${PARTS:-rotate timer ctx}; do
  [ $(left) -gt 60 ] || break
  echo "== $part ($(( $(date +%s) - T0 )) s in)" | tee -a $OUT/steps.txt
  case $part in
  timer|rotate)
    timeout $(left) python3 bench/placement_probe.py --processes "${N:-16}" --placements $([ $part = rotate ] && echo 9 || echo 7) --mode $part \
      2>&1 | tee $OUT/placement-$part.txt | tee -a $OUT/steps.txt
    ;;
  workspace|wspad)
    timeout $(left) python3 bench/placement_probe.py --processes "${N:-16}" --placements 7 --mode workspace --with-add \
      --pad $([ $part = wspad ] && echo 0.0625 || echo 8) 2>&1 | tee $OUT/placement-$part.txt | tee -a $OUT/steps.txt
    ;;
  code)
    timeout $(left) python3 bench/placement_probe.py --processes "${N:-16}" --placements 7 --mode code --pad 0.0625 \
      2>&1 | tee $OUT/placement-$part.txt | tee -a $OUT/steps.txt
    ;;
  records)
    timeout $(left) python3 bench/kernel_records.py --processes "${N:-16}" 2>&1 | tee $OUT/records.txt | tee -a $OUT/steps.txt
    ;;
  eager)
    timeout $(left) python3 bench/placement_probe.py --processes "${NE:-8}" --placements 3 --mode timer --with-add \
      --env CUDA_MODULE_LOADING=EAGER 2>&1 | tee $OUT/placement-$part.txt | tee -a $OUT/steps.txt
    ;;
  ctx)
    for conn in "" 4 1; do
      echo "-- CUDA_DEVICE_MAX_CONNECTIONS=${conn:-unset}" | tee -a $OUT/steps.txt
      if [ -n "$conn" ]; then export CUDA_DEVICE_MAX_CONNECTIONS=$conn; else unset CUDA_DEVICE_MAX_CONNECTIONS; fi
      PYTHONPATH=/tmp/site:.:bench timeout $(left) python3 -c "import worker_steps; worker_steps.main()" 14 14 \
        2>&1 | tee -a $OUT/steps.txt
    done
    unset CUDA_DEVICE_MAX_CONNECTIONS
    ;;
  conn1)
    CUDA_DEVICE_MAX_CONNECTIONS=1 oproj_runs "${RUNS:-2}" conn1
    ;;
  quick)
    timeout $(( $(left) - 60 )) python3 -m pytest -q -p no:cacheprovider tests/gpu/test_queues_gpu.py \
      tests/gpu/test_cupti_gpu.py > $OUT/gpu-tests-quick.txt 2>&1
    echo "pytest (queues, cupti): exit $?, $(tail -n 1 $OUT/gpu-tests-quick.txt)" | tee -a $OUT/steps.txt
    oproj_runs "${RUNS:-2}" queues
    ;;
  runs)
    oproj_runs "${RUNS:-3}"
    python3 bench/between_runs.py $OUT/oproj-*.json 2>&1 | tee -a $OUT/steps.txt
    ;;
  tests)
    gpu_tests
    ;;
  esac
done
pack_out
