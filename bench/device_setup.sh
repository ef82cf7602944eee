# Sourced by the H200 session scripts (bench/session12_*.sh): the carried wheels (.whl/) installed
# into /tmp/site and put on PYTHONPATH with the tree, unbuffered output, and the card as found
# (name, driver, clocks, power limit, temperature) in $OUT/smi.txt. Exits if the wheels fail to install.
# Then T0 (when the call started), LIMIT (the seconds it may use: give less when less device time is
# left) and left (the seconds still left of LIMIT), for timeouts; oproj_runs N [NAME [ARGS...]]: `run
# workloads/attn.yaml -w o_proj ARGS` N times while a minute is left, each saved as NAME-k.json (default
# oproj) with its harness table and wall time.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:.
# The image's packages have no byte code and it writes none, so every process compiled torch from source
# (2.4 s a process); a pip install writes it at install time: written once here (PYC=0: not).
[ "${PYC:-1}" = 1 ] && python3 bench/byte_compile.py | tee $OUT/pyc.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv | tee $OUT/smi.txt
T0=$(date +%s)
LIMIT=${LIMIT:-560}
left() { echo $(( LIMIT - ($(date +%s) - T0) )); }
oproj_runs() {
  local n=$1 name=${2:-oproj}
  shift; shift || true
  for k in $(seq 1 "$n"); do
    [ $(left) -gt 60 ] || break
    local s=$(date +%s.%N)
    timeout $(left) python3 -m solbench run workloads/attn.yaml -w o_proj -q "$@" -o $OUT/$name-$k.json > $OUT/$name-$k.txt 2>&1
    echo "$name $k: exit $?, $(python3 -c "import time; print(f'{time.time() - $s:.1f}')") s" | tee -a $OUT/steps.txt
    python3 -m solbench show $OUT/$name-$k.json --harness > $OUT/$name-$k-harness.txt 2>&1
  done
}
# gpu_tests: `pytest tests/gpu` (gpu-tests.txt), then one `run -w o_proj` under bench/cli_phases.py (oproj-1.json).
gpu_tests() {
  timeout $(( $(left) - 90 )) python3 -m pytest -q -p no:cacheprovider tests/gpu > $OUT/gpu-tests.txt 2>&1
  echo "pytest tests/gpu: exit $?, $(( $(date +%s) - T0 )) s, $(tail -n 1 $OUT/gpu-tests.txt)" | tee -a $OUT/steps.txt
  [ $(left) -gt 70 ] && timeout $(left) python3 bench/cli_phases.py run workloads/attn.yaml -w o_proj -q \
    -o $OUT/oproj-1.json --force 2>&1 | tee -a $OUT/steps.txt
  grep -E "passed|failed|error" $OUT/gpu-tests.txt | tail -n 15
}
# pack_out: what comes back from $OUT (the device returns only a few files): steps.txt printed and kept, every
# other file in out.tgz (the JSONs gzipped inside it).
pack_out() {
  for f in $OUT/*.json; do [ -f "$f" ] && gzip -9 -n "$f"; done
  cat $OUT/steps.txt
  (cd $OUT && others=$(ls | grep -v -e '^steps.txt$' -e '^out.tgz$') && [ -n "$others" ] && tar czf out.tgz $others && rm -rf $others)
}
