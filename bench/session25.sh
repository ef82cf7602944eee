#!/usr/bin/env bash
# The twenty-fifth session's H200 calls: each call as a CUDA graph's replay (`--launch graph`). Carry .whl.
# LIMIT: the seconds this call may use. PARTS, in order while time is left (default "gtests gfive"):
# gtests: the graph-launch GPU tests and the timer tests (tests/gpu/test_graph_launch_gpu.py, test_timers_gpu.py).
# gfive: RUNS (default 5) `run workloads/attn.yaml -w o_proj --launch graph` (gfive-1..5), then
#   bench/between_runs.py and bench/repeat_gates.py over them (spread, CI coverage, gate over the 20 ordered pairs).
# tests: the whole `pytest tests/gpu`.
# gsuite: the shipped suite with `--launch graph` (every workload file on one GPU), its harness table,
#   `compare baseline fused`, and every point whose call could not be captured.
# genc: bert_layer's torch_encoder (inference tensors out) with `--launch graph`, one round at seq 128.
# gslow: `ab --launch graph` against a tree whose o_proj `cublas_addmm` GEMM is 10.9% longer (bench/slow_tree.sh).
# ggated: `run -w o_proj --launch graph` once, then GATED (default 2) runs of it with `--gate-against` that one.
# gab: AB (default 2) `ab` runs of identical trees on o_proj with `--launch graph`.
source bench/device_setup.sh
touch $OUT/steps.txt
fallbacks() {  # the points of run $1 whose call could not be captured, and why
  python3 - "$1" <<'PY' 2>&1 | tee -a $OUT/steps.txt
import json, sys
d = json.load(open(sys.argv[1]))
ok = [(c["case_id"], i) for c in d["cases"] for i in c["impls"] if i["status"] == "ok"]
fb = [(cid, i["name"], i["protocol"].get("graph_fallback", "")) for cid, i in ok if i["protocol"].get("launch") == "stream"]
print(f"points launched on the stream (capture failed): {len(fb)} of {len(ok)} timed")
for row in fb[:20]:
    print("  ", *row)
PY
}
for part in ${PARTS:-gtests gfive}; do
  [ $(left) -gt 60 ] || break
  echo "== $part ($(( $(date +%s) - T0 )) s in)" | tee -a $OUT/steps.txt
  case $part in
  gtests)
    timeout $(( $(left) - 30 )) python3 -m pytest -q -p no:cacheprovider tests/gpu/test_graph_launch_gpu.py \
      tests/gpu/test_timers_gpu.py > $OUT/gtests.txt 2>&1
    echo "graph-launch and timer GPU tests: exit $?, $(tail -n 1 $OUT/gtests.txt)" | tee -a $OUT/steps.txt
    grep -E "^(FAILED|ERROR)|Error" $OUT/gtests.txt | head -n 20 | tee -a $OUT/steps.txt
    ;;
  tests)
    timeout $(( $(left) - 20 )) python3 -m pytest -q -p no:cacheprovider tests/gpu > $OUT/gpu-tests.txt 2>&1
    echo "pytest tests/gpu: exit $?, $(tail -n 1 $OUT/gpu-tests.txt)" | tee -a $OUT/steps.txt
    grep -E "^(FAILED|ERROR)" $OUT/gpu-tests.txt | head -n 20 | tee -a $OUT/steps.txt
    ;;
  gfive)
    oproj_runs "${RUNS:-5}" gfive --launch graph
    python3 bench/between_runs.py $OUT/gfive-*.json 2>&1 | tee -a $OUT/steps.txt
    python3 bench/repeat_gates.py $OUT/gfive-*.json 2>&1 | tail -n 20 | tee -a $OUT/steps.txt
    fallbacks $OUT/gfive-1.json
    ;;
  gsuite)
    s=$(date +%s)
    timeout $(left) python3 -m solbench run workloads/*.yaml -q --launch graph -o $OUT/gsuite.json > $OUT/gsuite.txt 2>&1
    echo "suite --launch graph: exit $?, $(( $(date +%s) - s )) s" | tee -a $OUT/steps.txt
    python3 -m solbench show $OUT/gsuite.json --harness > $OUT/gsuite-harness.txt 2>&1
    python3 -m solbench compare baseline fused --run $OUT/gsuite.json > $OUT/gsuite-compare.txt 2>&1
    tail -n 5 $OUT/gsuite-harness.txt | tee -a $OUT/steps.txt
    for v in FASTER SAME SLOWER INCONCLUSIVE; do echo "$v rows: $(grep -c " $v" $OUT/gsuite-compare.txt)"; done | tee -a $OUT/steps.txt
    fallbacks $OUT/gsuite.json
    ;;
  genc)
    timeout $(left) python3 -m solbench run workloads/bert.yaml -w bert_layer -i torch_encoder --case seq=128 -q \
      --launch graph --repeat 1 --max-rounds 1 -o $OUT/genc.json > $OUT/genc.txt 2>&1
    echo "torch_encoder --launch graph: exit $?" | tee -a $OUT/steps.txt
    fallbacks $OUT/genc.json
    ;;
  gslow)
    rm -rf /tmp/base && mkdir -p /tmp/base && cp -r solbench workloads hardware_specs /tmp/base/
    bash bench/slow_tree.sh /tmp/slow10 0.10
    s=$(date +%s)
    (cd /tmp/slow10 && timeout $(left) python3 -m solbench ab --baseline-tree /tmp/base --current-tree . \
      workloads/attn.yaml -w o_proj -q --json --launch graph --out-dir /tmp/gslow > $OUT/gslow.json 2> $OUT/gslow.txt)
    echo "ab --launch graph, slow10: exit $?, $(( $(date +%s) - s )) s, $(grep -E '^gate:' $OUT/gslow.txt)" | tee -a $OUT/steps.txt
    python3 - $OUT/gslow.json <<'PY' 2>&1 | tee -a $OUT/steps.txt
import json, sys
d = json.load(open(sys.argv[1]))
rows = [v for v in d.get("verdicts", d.get("cases", [])) if isinstance(v, dict)]
bad = [(v.get("case_id"), v.get("impl"), v.get("verdict"), v.get("ratio")) for v in rows if v.get("verdict") != "PASS"]
print(f"verdicts not PASS: {len(bad)} of {len(rows)}")
for row in bad[:14]:
    print("  ", *row)
PY
    ;;
  ggated)
    oproj_runs 1 gbase --launch graph
    for n in $(seq 1 "${GATED:-2}"); do
      [ $(left) -gt 45 ] || break
      s=$(date +%s)
      timeout $(left) python3 -m solbench run workloads/attn.yaml -w o_proj -q --launch graph -o $OUT/ggated-$n.json \
        --gate-against $OUT/gbase-1.json > $OUT/ggated-$n.txt 2>&1
      echo "gated --launch graph $n: exit $?, $(( $(date +%s) - s )) s, $(grep -E '^gate:' $OUT/ggated-$n.txt)" | tee -a $OUT/steps.txt
    done
    ;;
  gab)
    rm -rf /tmp/base && mkdir -p /tmp/base && cp -r solbench workloads hardware_specs /tmp/base/
    for n in $(seq 1 "${AB:-2}"); do
      [ $(left) -gt 100 ] || break
      s=$(date +%s)
      timeout $(left) python3 -m solbench ab --baseline-tree /tmp/base --current-tree . workloads/attn.yaml -w o_proj \
        -q --json --launch graph --out-dir /tmp/gab-$n > $OUT/gab-$n.json 2> $OUT/gab-$n.txt
      echo "ab --launch graph $n: exit $?, $(( $(date +%s) - s )) s, $(grep -E '^gate:' $OUT/gab-$n.txt)" | tee -a $OUT/steps.txt
    done
    ;;
  esac
done
pack_out
