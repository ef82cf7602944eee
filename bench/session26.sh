#!/usr/bin/env bash
# The twenty-sixth session's H200 calls, on the default protocol (`--launch auto`: the cold timer on a GPU
# times each call as a CUDA graph's replay). Carry .whl.
# P (default none): a prefix of the parts' names and of the files they write; EXTRA: options added to every
# `run` and `ab` (bench/session25.sh: P=g EXTRA="--launch graph").
# LIMIT: the seconds this call may use. PARTS, in order while time is left (default "tests five"):
# ltests: the GPU tests of graph launch, timers, forgers, isolation and CUPTI (tests/gpu/test_graph_launch_gpu.py,
#   test_timers_gpu.py, test_forgers_gpu.py, test_isolation_gpu.py, test_cupti_gpu.py).
# five: RUNS (default 5) `run workloads/attn.yaml -w o_proj` (five-1..5), then
#   bench/between_runs.py, `solbench spread` and bench/repeat_gates.py over them (spread, the run offset the
#   gate prices, CI coverage, gate over the 20 ordered pairs).
# tests: the whole `pytest tests/gpu`.
# quick: pytest over tests/gpu/test_fp8_gpu.py, test_kernels.py, test_forgers_gpu.py, test_isolation_gpu.py,
#   test_queues_gpu.py (when too little device time is left for the whole of tests/gpu).
# tune: `solbench tune tests/data/tune_layernorm.yaml` (its table, exit code and wall time).
# main: `solbench run workloads/attn.yaml` (exit, wall time) and `compare baseline fused` over it.
# suite: the shipped suite (every workload file on one GPU), its harness table,
#   `compare baseline fused`, and every point whose call could not be captured.
# enc: bert_layer's torch_encoder (inference tensors out), one round at seq 128.
# slow: SLOWN (default 1) `ab` against a tree whose o_proj `cublas_addmm` GEMM is longer by SLOWF (default 0.10:
#   10.9%; 0.03: 3.1%; bench/slow_tree.sh), at the workload's 5% threshold.
# mem: after slow, bench/memory_peaks.py over its ab runs (each point's allocator peak against the estimate
#   that decides which workers keep their caches: issue 16, the H100's out-of-memory ab).
# gated: `run -w o_proj` once (with `--repeat BASE_REPEAT` where set), then GATED (default 2) runs of it with
#   `--gate-against` that one (the gate prices 0.2% a run by default); `solbench spread` over them from three on.
# ab: AB (default 2) `ab` runs of identical trees on o_proj.
# costs: bench/capture_costs.py (host time of the capture and replay check, and of one cold sample, by step).
# records: bench/cupti_records.py (the CUPTI records of one graph-launch check, and what reading them costs).
# calls: bench/check_calls.py twice each way (calls per CUPTI check, with the query records off and on).
# wprof: one `run -w o_proj` with every worker under cProfile (SOLBENCH_PROFILE_DIR), merged by bench/worker_profile.py
#   (wprof-summary.txt, wprof-merged.prof): where set-up, checks and the timing loop spend a worker's host time.
# fsweep: bench/fp8w_sweep.py at SWEEP_TOKENS (17 32 64) for SWEEP_CONFIGS (issue 20; 912ad94's part of the same
#   name also timed the tiles' last programs finishing, and its part fp8w ran o_proj_fp8w both ways: since reverted).
# (widen, thirtieth session call 2, on a tree with a w8a16.BF16_WIDEN knob since removed: bench/fp8w_sweep.py at 17,
#   32 and 64 tokens bf16 with the inline-PTX widening and through fp16, then `run -w o_proj_fp8w` in both trees, twice
#   each, interleaved; results/h200/issue20/session30/call2/steps.txt.)
# gsweep: bench/gemv_sweep.py (decode, bf16 and fp16) over FP8_PLANS (rows:cluster:stages), then `run -w o_proj_fp8w`
#   at 1 and 16 tokens here and in alt trees whose FP8 GEMV prefers 16-row CTAs (G16) or 32 rows in clusters of 2
#   (G32c2), GROUNDS (2) each, interleaved: the fused and floor medians.
# bsweep: bench/gemv_sweep.py over BF16_PLANS (bf16 weight, rows:cluster:stages) at 1, 16 and 64 tokens, then
#   `run -w o_proj -i fused -i floor --timer cupti` at 1 and 16 tokens here and in an alt tree whose bf16 GEMV
#   prefers 16-row CTAs two to an SM (B16), GROUNDS (2) each, interleaved: the fused and floor medians (issue 20).
# cfloor: CFLOOR_RUNS (default 2) `run -w o_proj -i fused -i floor --timer cupti` at 1 and 16 tokens, the fused
#   and floor medians and the fused implementation's floor fraction (issue 20: >= 0.9 at 16 tokens under CUPTI).
# fp8w: one `run -w o_proj_fp8w`, `compare baseline fused`, the fused and floor medians.
# passab: `run -w o_proj` here (PASS_ROUNDS 4) and in alt trees with PASSAB_ROUNDS (default "2 6") added rounds
#   a pass at most, PASSAB_RUNS (2) each, interleaved; each run's harness phases, passes and processes.
#   (bench/loop_replay.py --pass-rounds, thirty-first session, replays the loop on recorded rounds: 2 and 6
#   cost +0.75 and +3.9 s by its fit; this part measures the wall time itself.)
# ktests: tests/gpu/test_kernels.py -k "w8a16 or fp8".
# exits: bench/worker_steps.py for 7 and 14 workers, their exits with the GPU idle (BUSY=0) and with another
#   process's GEMMs running (BUSY=1): does a worker's teardown wait on other processes' work?
# sem: `run -w bert_layer -i compiled -i baseline --case seq=128`, one round, as shipped, with
#   `--compile-jobs 0` and with TORCH_WARM_POOL=0: which one prints the resource tracker's
#   leaked-semaphore warning that every suite run ends with (Inductor's compile-worker pool, not shut down?).
# semtrace: sem as shipped, every semaphore a process registers with the resource tracker traced (which process
#   leaves the ones it reports leaked, and where they were made).
# prof: one `run -w o_proj` under bench/cli_phases.py (where the command's time goes outside the harness table).
# treeab: `run -w o_proj` in this tree and in OLD (a carried folder holding another commit's solbench, workloads
#   and hardware_specs: `git archive REF solbench workloads hardware_specs | tar -x -C scratch_gpu/REF`), one
#   discarded run here first (a fresh machine's first run tunes the FP8 GEMMs), then TREEAB_RUNS (3) of each,
#   interleaved: wall time and harness phases (the same-machine A/B of a slowdown between two trees).
# five also prints each run's harness phases, with the seconds of graph capture and replay checks (capture_s),
# and the calls its CUPTI checks made again (check_extra_calls, summed over points).
source bench/device_setup.sh
touch $OUT/steps.txt
P=${P:-}
EXTRA=${EXTRA:-}
cut_note() {  # after a test part: say so where timeout cut pytest (exit 124)
  [ "$1" = 124 ] && echo "(cut by the time limit: timeout's SIGTERM may have failed the test it reached, since the" \
    "tests that run solbench inside pytest's process see it as Ctrl-C; the last F printed is then no finding)" \
    | tee -a $OUT/steps.txt
  return 0
}
fallbacks() {  # the points of run $1 launched on the stream (in some rounds, or all), and why
  python3 - "$1" <<'PY' 2>&1 | tee -a $OUT/steps.txt
import json, sys
d = json.load(open(sys.argv[1]))
ok = [(c["case_id"], i) for c in d["cases"] for i in c["impls"] if i["status"] == "ok"]
fb = [(cid, i["name"], i["protocol"]["launch"], i["protocol"].get("graph_fallback", "")) for cid, i in ok
      if i["protocol"].get("launch") in ("stream", "mixed")]
print(f"points launched on the stream in some rounds or all (not captured, or a replay that did not match): "
      f"{len(fb)} of {len(ok)} timed")
for row in fb[:20]:
    print("  ", *row)
PY
}
phases() {  # per run: harness wall, set-up side by side, set-up summed, graph capture + check summed, timing loop
  python3 - "$@" <<'PY' 2>&1 | tee -a $OUT/steps.txt
import json, sys
print("run  wall  workers  side-by-side  set-up(sum)  capture+check(sum)  timing loop  after(alone)  "
      "after(side by side)  point-rounds  checks' extra calls  passes  processes")
for path in sys.argv[1:]:
    d = json.load(open(path))
    h = d.get("harness", {})
    rounds = sum(i["protocol"].get("rounds", 0) for c in d["cases"] for i in c["impls"])
    extra = sum(int(i["protocol"].get("check_extra_calls", 0)) for c in d["cases"] for i in c["impls"])
    bad = [(c["case_id"], i["name"], i["status"], i.get("message", "")[:80]) for c in d["cases"] for i in c["impls"]
           if i["status"] not in ("ok", "skipped")]
    for row in bad[:5]:
        print("  not ok:", *row)
    print(path.rsplit("/", 1)[-1], *(f"{h.get(k, 0):.2f}" for k in ("wall_s", "workers_s", "side_s", "side_setup_s",
                                                                     "capture_s", "sample_s", "after_s",
                                                                     "side_after_s")), rounds, extra,
          int(h.get("passes", 0)), int(h.get("worker_processes", 0)))
PY
}
tree_run() {  # `run -w o_proj` in tree $1 (extra options: $3...), saved as $OUT/$2.json: its wall time and phases
  local tree=$1 name=$2 s=$(date +%s.%N)
  shift 2
  (cd "$tree" && timeout $(left) python3 -m solbench run workloads/attn.yaml -w o_proj -q "$@" -o $OUT/$name.json \
    > $OUT/$name.txt 2>&1)
  echo "$name: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s" | tee -a $OUT/steps.txt
  phases $OUT/$name.json
}
fused_floor() {  # the fused and floor medians of run $1
  python3 - "$1" <<'PY' 2>&1 | tee -a $OUT/steps.txt
import json, sys
d = json.load(open(sys.argv[1]))
for c in d["cases"]:
    for i in c["impls"]:
        if i["name"] in ("fused", "floor") and i.get("timing"):
            frac = (i.get("score") or {}).get("floor_fraction")
            print(f"  {c['case_id']:48s} {i['name']:6s} {i['timing']['median'] * 1e6:7.2f} us"
                  + (f"  floor fraction {frac:.3f}" if frac is not None and i["name"] == "fused" else ""))
PY
}
for part in ${PARTS:-tests five}; do
  [ $(left) -gt 60 ] || break
  echo "== $part ($(( $(date +%s) - T0 )) s in)" | tee -a $OUT/steps.txt
  case ${part#"$P"} in
  ltests)
    timeout $(( $(left) - 30 )) python3 -m pytest -q -p no:cacheprovider tests/gpu/test_graph_launch_gpu.py \
      tests/gpu/test_timers_gpu.py tests/gpu/test_forgers_gpu.py tests/gpu/test_isolation_gpu.py \
      tests/gpu/test_cupti_gpu.py > $OUT/${P}ltests.txt 2>&1
    rc=$?; cut_note $rc
    echo "graph-launch and timer GPU tests: exit $rc, $(tail -n 1 $OUT/${P}ltests.txt)" | tee -a $OUT/steps.txt
    grep -E "^(FAILED|ERROR)|Error" $OUT/${P}ltests.txt | head -n 20 | tee -a $OUT/steps.txt
    ;;
  quick)  # the GPU tests this session's changes touch most (new kernel tests, workers, pipes, isolation)
    timeout $(( $(left) - 20 )) python3 -m pytest -q -p no:cacheprovider tests/gpu/test_fp8_gpu.py \
      tests/gpu/test_kernels.py tests/gpu/test_forgers_gpu.py tests/gpu/test_isolation_gpu.py \
      tests/gpu/test_queues_gpu.py > $OUT/quick-tests.txt 2>&1
    rc=$?; cut_note $rc
    echo "quick GPU tests: exit $rc, $(tail -n 1 $OUT/quick-tests.txt)" | tee -a $OUT/steps.txt
    grep -E "^(FAILED|ERROR)" $OUT/quick-tests.txt | head -n 20 | tee -a $OUT/steps.txt
    ;;
  tune)  # solbench tune on the shipped LayerNorm kernel's launch shapes (trials in workers since the 51st session)
    s=$(date +%s)
    timeout $(( $(left) - 20 )) python3 -m solbench tune tests/data/tune_layernorm.yaml -o $OUT/tune.json \
      --tuned-file $OUT/tuned.json > $OUT/tune.txt 2>&1
    echo "tune tests/data/tune_layernorm.yaml: exit $?, $(( $(date +%s) - s )) s" | tee -a $OUT/steps.txt
    tail -n 25 $OUT/tune.txt | tee -a $OUT/steps.txt
    ;;
  main)  # the quick start's main job, and compare baseline fused over it
    s=$(date +%s)
    timeout $(( $(left) - 20 )) python3 -m solbench run workloads/attn.yaml -q -o $OUT/attn.json > $OUT/attn.txt 2>&1
    echo "run workloads/attn.yaml: exit $?, $(( $(date +%s) - s )) s" | tee -a $OUT/steps.txt
    python3 -m solbench compare baseline fused --run $OUT/attn.json > $OUT/attn-compare.txt 2>&1
    tail -n 4 $OUT/attn-compare.txt | tee -a $OUT/steps.txt
    ;;
  tests)
    timeout $(( $(left) - 20 )) python3 -m pytest -q -p no:cacheprovider --durations=25 tests/gpu > $OUT/gpu-tests.txt 2>&1
    rc=$?; cut_note $rc
    echo "pytest tests/gpu: exit $rc, $(tail -n 1 $OUT/gpu-tests.txt)" | tee -a $OUT/steps.txt
    grep -E "^(FAILED|ERROR)" $OUT/gpu-tests.txt | head -n 20 | tee -a $OUT/steps.txt
    ;;
  five)
    oproj_runs "${RUNS:-5}" ${P}five $EXTRA
    python3 bench/between_runs.py $OUT/${P}five-*.json 2>&1 | tee -a $OUT/steps.txt
    python3 -m solbench spread $OUT/${P}five-*.json 2>&1 | tee -a $OUT/steps.txt  # the run offset the gate prices
    python3 bench/repeat_gates.py $OUT/${P}five-*.json 2>&1 | tail -n 20 | tee -a $OUT/steps.txt
    fallbacks $OUT/${P}five-1.json
    phases $OUT/${P}five-*.json
    ;;
  suite)
    s=$(date +%s)
    timeout $(left) python3 -m solbench run workloads/*.yaml -q $EXTRA -o $OUT/${P}suite.json > $OUT/${P}suite.txt 2>&1
    echo "suite: exit $?, $(( $(date +%s) - s )) s" | tee -a $OUT/steps.txt
    python3 -m solbench show $OUT/${P}suite.json --harness > $OUT/${P}suite-harness.txt 2>&1
    python3 -m solbench compare baseline fused --run $OUT/${P}suite.json > $OUT/${P}suite-compare.txt 2>&1
    tail -n 5 $OUT/${P}suite-harness.txt | tee -a $OUT/steps.txt
    for v in FASTER SAME SLOWER INCONCLUSIVE; do echo "$v rows: $(grep -c " $v" $OUT/${P}suite-compare.txt)"; done | tee -a $OUT/steps.txt
    fallbacks $OUT/${P}suite.json
    ;;
  enc)
    timeout $(left) python3 -m solbench run workloads/bert.yaml -w bert_layer -i torch_encoder --case seq=128 -q \
      $EXTRA --repeat 1 --max-rounds 1 -o $OUT/${P}enc.json > $OUT/${P}enc.txt 2>&1
    echo "torch_encoder: exit $?" | tee -a $OUT/steps.txt
    fallbacks $OUT/${P}enc.json
    ;;
  slow)
    rm -rf /tmp/base && mkdir -p /tmp/base && cp -r solbench workloads hardware_specs /tmp/base/
    f=${SLOWF:-0.10}
    bash bench/slow_tree.sh /tmp/slow$f $f
    for n in $(seq 1 "${SLOWN:-1}"); do
      [ $(left) -gt 60 ] || break
      s=$(date +%s)
      rm -rf /tmp/slow-$n  # a warm machine keeps an earlier call's runs, and ab does not overwrite them
      (cd /tmp/slow$f && timeout $(left) python3 -m solbench ab --baseline-tree /tmp/base --current-tree . \
        workloads/attn.yaml -w o_proj -q --json $EXTRA --out-dir /tmp/slow-$n > $OUT/${P}slow$f-$n.json \
        2> $OUT/${P}slow$f-$n.txt)
      echo "ab, slow $f, $n: exit $?, $(( $(date +%s) - s )) s, $(grep -E '^gate:' $OUT/${P}slow$f-$n.txt)" \
        | tee -a $OUT/steps.txt
      python3 - $OUT/${P}slow$f-$n.json <<'PY' 2>&1 | tee -a $OUT/steps.txt
import json, sys
d = json.load(open(sys.argv[1]))
rows = [v for v in d.get("verdicts", d.get("cases", [])) if isinstance(v, dict)]
bad = [(v.get("case_id"), v.get("impl"), v.get("verdict"), v.get("ratio")) for v in rows if v.get("verdict") != "PASS"]
print(f"verdicts not PASS: {len(bad)} of {len(rows)}")
for row in bad[:14]:
    print("  ", *row)
PY
    done
    ;;
  mem)  # after slow: what each worker of its ab runs held, against the parent's estimate
    python3 bench/memory_peaks.py /tmp/slow-*/baseline.json /tmp/slow-*/current.json 2>&1 | tail -n 25 \
      | tee -a $OUT/steps.txt
    ;;
  gated)
    oproj_runs 1 ${P}base $EXTRA ${BASE_REPEAT:+--repeat $BASE_REPEAT}
    for n in $(seq 1 "${GATED:-2}"); do
      [ $(left) -gt 45 ] || break
      s=$(date +%s)
      timeout $(left) python3 -m solbench run workloads/attn.yaml -w o_proj -q $EXTRA -o $OUT/${P}gated-$n.json \
        --gate-against $OUT/${P}base-1.json > $OUT/${P}gated-$n.txt 2>&1
      echo "gated $n: exit $?, $(( $(date +%s) - s )) s, $(grep -E '^gate:' $OUT/${P}gated-$n.txt)" | tee -a $OUT/steps.txt
    done
    [ -f $OUT/${P}gated-3.json ] && python3 -m solbench spread $OUT/${P}base-1.json $OUT/${P}gated-*.json 2>&1 \
      | tee -a $OUT/steps.txt
    ;;
  costs)
    timeout $(left) python3 bench/capture_costs.py 20 2>&1 | tee -a $OUT/steps.txt
    ;;
  records)
    timeout $(left) python3 bench/cupti_records.py 2>&1 | tee -a $OUT/steps.txt
    ;;
  calls)
    for mode in "" queries-on "" queries-on; do
      timeout 60 python3 bench/check_calls.py $mode 2>&1 | tail -n 1 | tee -a $OUT/steps.txt
    done
    ;;
  wprof)
    rm -rf /tmp/wprof && mkdir -p /tmp/wprof
    s=$(date +%s)
    timeout $(left) env SOLBENCH_PROFILE_DIR=/tmp/wprof python3 -m solbench run workloads/attn.yaml -w o_proj -q $EXTRA \
      -o $OUT/${P}wprof.json > $OUT/${P}wprof.txt 2>&1
    echo "o_proj, workers profiled: exit $?, $(( $(date +%s) - s )) s, $(ls /tmp/wprof/*.prof | wc -l) worker profiles" \
      | tee -a $OUT/steps.txt
    python3 bench/worker_profile.py /tmp/wprof --top 60 --dump $OUT/${P}wprof-merged.prof > $OUT/${P}wprof-summary.txt 2>&1
    python3 -m solbench show $OUT/${P}wprof.json --harness > $OUT/${P}wprof-harness.txt 2>&1
    ;;
  fsweep)
    SWEEP_TOKENS="${SWEEP_TOKENS:-17 32 64}" SWEEP_CONFIGS="${SWEEP_CONFIGS:-64,256,2,4,3 128,256,4,8,3 32,256,2,4,3}" \
      timeout $(( $(left) - 20 )) python3 bench/fp8w_sweep.py $OUT > $OUT/${P}fsweep.txt 2>&1
    echo "fp8w sweep: exit $?" | tee -a $OUT/steps.txt
    grep -E "^\| " $OUT/${P}fsweep.txt | tee -a $OUT/steps.txt
    ;;
  gsweep)  # the FP8-weight GEMV's tiles at few tokens: launch shapes, then o_proj_fp8w with other preferences
    SWEEP=decode,decode16 PLANS=32:1:0 FP8_PLANS="${FP8_PLANS:-32:1:0,16:1:0,32:2:0,64:2:0,16:1:4,32:1:4}" \
      timeout $(( $(left) - 20 )) python3 bench/gemv_sweep.py $OUT > $OUT/${P}gsweep.txt 2>&1
    echo "gemv sweep: exit $?" | tee -a $OUT/steps.txt
    grep -E "stream_fp8|gemv_fp8 default|^tokens=" $OUT/${P}gsweep.txt | grep -v "rel err" | tee -a $OUT/steps.txt
    for alt in G16:"(16, 1), (32, 1)" G32c2:"(32, 2), (32, 1)"; do
      rm -rf alt/${alt%%:*} && mkdir -p alt/${alt%%:*} && cp -r solbench workloads hardware_specs alt/${alt%%:*}/
      sed -i "s/^PREFERENCE_FEW_W8 = PREFERENCE_FEW .*/PREFERENCE_FEW_W8 = (${alt#*:})/" alt/${alt%%:*}/solbench/kernels/gemv_plan.py
      grep "^PREFERENCE_FEW_W8" alt/${alt%%:*}/solbench/kernels/gemv_plan.py | tee -a $OUT/steps.txt
    done
    for r in $(seq 1 "${GROUNDS:-2}"); do
      for t in . alt/G16 alt/G32c2; do
        [ $(left) -gt 40 ] || break 2
        name=${P}g-$(echo "$t" | tr -c 'A-Za-z0-9\n' '_')-$r
        (cd "$t" && timeout $(left) python3 -m solbench run workloads/attn.yaml -w o_proj_fp8w -q --case tokens=1 \
          --case tokens=16 -o $OUT/$name.json > $OUT/$name.txt 2>&1)
        echo "$name: exit $?" | tee -a $OUT/steps.txt
        fused_floor $OUT/$name.json
      done
    done
    ;;
  bsweep)  # the bf16 GEMV's tiles at 1 and 16 tokens, then o_proj there and in a tree preferring 16-row CTAs
    SWEEP=decode PLANS="${BF16_PLANS:-32:1:0,32:1:4,16:1:0,16:1:4,16:1:3,32:2:0}" FP8_PLANS=16:1:4 \
      timeout $(( $(left) - 20 )) python3 bench/gemv_sweep.py $OUT > $OUT/${P}bsweep.txt 2>&1
    echo "gemv sweep: exit $?" | tee -a $OUT/steps.txt
    grep -E "^  stream |gemv_residual default|^tokens=" $OUT/${P}bsweep.txt | grep -v "rel err" | tee -a $OUT/steps.txt
    rm -rf alt/B16 && mkdir -p alt/B16 && cp -r solbench workloads hardware_specs alt/B16/
    sed -i "s/^PREFERENCE_FEW = .*/PREFERENCE_FEW = ((16, 1, 2), (32, 1), (64, 2))/" alt/B16/solbench/kernels/gemv_plan.py
    grep "^PREFERENCE_FEW = " alt/B16/solbench/kernels/gemv_plan.py | tee -a $OUT/steps.txt
    for r in $(seq 1 "${GROUNDS:-2}"); do
      for t in . alt/B16; do
        [ $(left) -gt 40 ] || break 2
        name=${P}b-$(echo "$t" | tr -c 'A-Za-z0-9\n' '_')-$r
        (cd "$t" && timeout $(left) python3 -m solbench run workloads/attn.yaml -w o_proj -i fused -i floor \
          --case tokens=1 --case tokens=16 --timer cupti -q -o $OUT/$name.json > $OUT/$name.txt 2>&1)
        echo "$name: exit $?" | tee -a $OUT/steps.txt
        fused_floor $OUT/$name.json
      done
    done
    ;;
  cfloor)  # issue 20's floor target: CFLOOR_RUNS (2) `run -w o_proj -i fused -i floor` at 1 and 16 tokens under CUPTI
    for r in $(seq 1 "${CFLOOR_RUNS:-2}"); do
      [ $(left) -gt 40 ] || break
      s=$(date +%s)
      timeout $(left) python3 -m solbench run workloads/attn.yaml -w o_proj -i fused -i floor --case tokens=1 \
        --case tokens=16 --timer cupti -q -o $OUT/${P}cfloor-$r.json > $OUT/${P}cfloor-$r.txt 2>&1
      echo "cfloor $r: exit $?, $(( $(date +%s) - s )) s" | tee -a $OUT/steps.txt
      fused_floor $OUT/${P}cfloor-$r.json
    done
    ;;
  fp8w)  # one `run -w o_proj_fp8w`, `compare baseline fused`, and the fused and floor medians
    s=$(date +%s)
    timeout $(left) python3 -m solbench run workloads/attn.yaml -w o_proj_fp8w -q -o $OUT/${P}fp8w.json \
      > $OUT/${P}fp8w.txt 2>&1
    echo "o_proj_fp8w: exit $?, $(( $(date +%s) - s )) s" | tee -a $OUT/steps.txt
    python3 -m solbench compare baseline fused --run $OUT/${P}fp8w.json > $OUT/${P}fp8w-compare.txt 2>&1
    grep -E "tokens=" $OUT/${P}fp8w-compare.txt | tee -a $OUT/steps.txt
    fused_floor $OUT/${P}fp8w.json
    ;;
  passab)  # o_proj with PASS_ROUNDS 4 (here) against 2 and 6 (alt trees), interleaved: wall, passes, processes
    for k in ${PASSAB_ROUNDS:-2 6}; do
      rm -rf alt/R$k && mkdir -p alt/R$k && cp -r solbench workloads hardware_specs alt/R$k/
      sed -i "s/^PASS_ROUNDS = 4 /PASS_ROUNDS = $k /" alt/R$k/solbench/execute/session.py
      grep "^PASS_ROUNDS" alt/R$k/solbench/execute/session.py | tee -a $OUT/steps.txt
    done
    for r in $(seq 1 "${PASSAB_RUNS:-2}"); do
      for t in . $(for k in ${PASSAB_ROUNDS:-2 6}; do echo alt/R$k; done); do
        [ $(left) -gt 45 ] || break 2
        tree_run "$t" ${P}passab-$(echo "$t" | tr -c 'A-Za-z0-9\n' '_')-$r
      done
    done
    ;;
  ktests)
    timeout $(( $(left) - 20 )) python3 -m pytest -q -p no:cacheprovider tests/gpu/test_kernels.py -k "w8a16 or fp8" \
      > $OUT/${P}ktests.txt 2>&1
    rc=$?; cut_note $rc
    echo "kernel GPU tests (w8a16, fp8): exit $rc, $(tail -n 1 $OUT/${P}ktests.txt)" | tee -a $OUT/steps.txt
    grep -E "^(FAILED|ERROR)" $OUT/${P}ktests.txt | head -n 20 | tee -a $OUT/steps.txt
    ;;
  exits)
    for busy in 0 1; do
      BUSY=$busy PYTHONPATH=$PYTHONPATH:bench timeout 150 python3 -c "import worker_steps; worker_steps.main()" 7 14 \
        2>&1 | tee -a $OUT/steps.txt
    done
    ;;
  sem)  # which process leaks the suite's 5 semaphores: bert_layer `compiled` alone, as shipped, without compiling
        # ahead (the measuring worker compiles on one thread: no compile pool), and with Inductor's warm pool off
    for how in shipped jobs0 nowarm; do
      [ $(left) -gt 60 ] || break
      s=$(date +%s)
      case $how in jobs0) opt="--compile-jobs 0"; envs="";; nowarm) opt=""; envs="TORCH_WARM_POOL=0";; *) opt=""; envs="";; esac
      env $envs timeout $(left) python3 -m solbench run workloads/bert.yaml -w bert_layer -i compiled -i baseline \
        --case seq=128 --repeat 1 --max-rounds 1 $opt -q $EXTRA -o $OUT/${P}sem-$how.json > $OUT/${P}sem-$how.txt 2>&1
      echo "sem, $how: exit $?, $(( $(date +%s) - s )) s, leaked-semaphore warnings:" \
        "$(grep -c 'leaked semaphore' $OUT/${P}sem-$how.txt)" | tee -a $OUT/steps.txt
    done
    ;;
  semtrace)  # sem as shipped, each process's semaphores traced by bench/sem_trace/sitecustomize.py; bench/sem_trace.py
    # lists those never unregistered and where they were made
    s=$(date +%s)
    mkdir -p $OUT/${P}semtrace
    SEMTRACE_DIR=$OUT/${P}semtrace PYTHONPATH=$PWD/bench/sem_trace:$PYTHONPATH timeout $(left) \
      python3 -m solbench run workloads/bert.yaml -w bert_layer -i compiled -i baseline --case seq=128 --repeat 1 \
      --max-rounds 1 $EXTRA -o $OUT/${P}semtrace.json > $OUT/${P}semtrace.txt 2>&1
    echo "semtrace: exit $?, $(( $(date +%s) - s )) s, leaked-semaphore warnings:" \
      "$(grep -c 'leaked semaphore' $OUT/${P}semtrace.txt)" | tee -a $OUT/steps.txt
    python3 bench/sem_trace.py $OUT/${P}semtrace 2>&1 | head -n 80 | tee -a $OUT/steps.txt
    ;;
  prof)
    PROF_OUT=$OUT/${P}cli.prof timeout $(left) python3 bench/cli_phases.py run workloads/attn.yaml -w o_proj -q $EXTRA \
      -o $OUT/${P}prof.json --force 2>&1 | tee -a $OUT/steps.txt
    ;;
  treeab)
    oproj_runs 1 ${P}treeab-warm $EXTRA
    for r in $(seq 1 "${TREEAB_RUNS:-3}"); do
      for t in . "$OLD"; do
        [ $(left) -gt 45 ] || break 2
        tree_run "$t" ${P}treeab-$(echo "$t" | tr -c 'A-Za-z0-9\n' '_')-$r $EXTRA
      done
    done
    ;;
  ab)
    rm -rf /tmp/base && mkdir -p /tmp/base && cp -r solbench workloads hardware_specs /tmp/base/
    for n in $(seq 1 "${AB:-2}"); do
      [ $(left) -gt 100 ] || break
      s=$(date +%s)
      rm -rf /tmp/ab-$n  # a warm machine keeps the last call's folders
      timeout $(left) python3 -m solbench ab --baseline-tree /tmp/base --current-tree . workloads/attn.yaml -w o_proj \
        -q --json $EXTRA --out-dir /tmp/ab-$n > $OUT/${P}ab-$n.json 2> $OUT/${P}ab-$n.txt
      echo "ab $n: exit $?, $(( $(date +%s) - s )) s, $(grep -E '^gate:' $OUT/${P}ab-$n.txt)" | tee -a $OUT/steps.txt
    done
    ;;
  esac
done
pack_out
