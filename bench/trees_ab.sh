#!/usr/bin/env bash
# o_proj (`run workloads/attn.yaml -w o_proj`) in several trees, interleaved, to tell which change moved a
# harness phase: TREES (default ". alt/B alt/C"; each holds solbench/, workloads/, hardware_specs/),
# ROUNDS passes over them while time is left. Prints each run's command wall and its harness phases.
source bench/device_setup.sh
touch $OUT/steps.txt
here=$(pwd)
for r in $(seq 1 "${ROUNDS:-2}"); do
  for t in ${TREES:-. alt/B alt/C}; do
    [ $(left) -gt 45 ] || break 2
    name=$(echo "$t" | tr -c 'A-Za-z0-9\n' '_')-$r
    s=$(date +%s.%N)
    (cd "$t" && PYTHONPATH=/tmp/site:. timeout $(left) python3 -m solbench run workloads/attn.yaml -w o_proj -q \
      -o $OUT/$name.json > $OUT/$name.txt 2>&1)
    code=$?
    wall=$(python3 -c "import time; print(f'{time.time() - $s:.1f}')")
    python3 - "$OUT/$name.json" "$t" "$code" "$wall" <<'PY' 2>&1 | tee -a $OUT/steps.txt
import json, sys
path, tree, code, wall = sys.argv[1:]
try:
    h = json.load(open(path))["harness"]
except Exception as exc:
    print(f"{tree}: exit {code}, {wall} s, no run ({exc})")
    raise SystemExit
keys = ("wall_s", "workers_s", "reap_s", "side_s", "sample_s", "after_s", "side_after_s")
print(f"{tree:8s} exit {code} cmd {wall:>5s} s  " + "  ".join(f"{k[:-2]} {h.get(k, 0):.2f}" for k in keys))
PY
  done
done
cd "$here" && pack_out
