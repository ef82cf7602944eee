# Sourced by the one-call device scripts: steps that run only while the call's time allows.
# Needs LIMIT (seconds from T0, the script's start) and log (a file); `step NAME NEED CMD...` runs CMD
# if NEED seconds are left, under `timeout` so it never runs past LIMIT, and logs its exit and time.
T0=${T0:-$(date +%s)}
left() { echo $(( LIMIT - ($(date +%s) - T0) )); }
step() {
  local name=$1 need=$2; shift 2
  if [ "$(left)" -lt "$need" ]; then echo "=== SKIP $name: $(left) s left, needs ~$need s" | tee -a "$log"; return 99; fi
  echo "=== $name $(date -u +%T) ($(left) s left)" | tee -a "$log"
  local s; s=$(date +%s.%N)
  timeout "$(left)" "$@"; local rc=$?
  echo "=== $name exit $rc in $(python3 -c "print(round($(date +%s.%N) - $s, 1))") s" | tee -a "$log"
  return $rc
}
# The wheels carried in .whl (git-ignored; the device image lacks them) into /tmp/site, which then
# leads PYTHONPATH before the tree. Call it first: `install_wheels || exit 1`.
install_wheels() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:.
}
# What the session scripts share after `device_start || exit 1`: pipefail, unbuffered Python, LIMIT
# (575 s unless given) and log ($OUT/steps.log unless given) set, the wheels installed, $R (results
# folder), the GPU's state logged; `harness RUN` prints a run's harness table, `oproj N` runs
# o_proj into $R/oproj-N.json, $SUITE names the shipped workload files.
SUITE="workloads/attn.yaml workloads/bert.yaml workloads/resnet50.yaml workloads/resnet50_forward.yaml workloads/collectives.yaml"
device_start() {
  set -o pipefail
  export PYTHONUNBUFFERED=1 LIMIT=${LIMIT:-575} log=${log:-$OUT/steps.log}
  install_wheels || return 1
  R=/tmp/g && mkdir -p $R
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv | tee -a "$log"
}
harness() { python3 -m solbench show "$1" --harness 2>&1 | tail -n 18 | tee -a "$log"; }
oproj() { step oproj-$1 40 python3 -m solbench run workloads/attn.yaml -w o_proj -o $R/oproj-$1.json -q; harness $R/oproj-$1.json; }
