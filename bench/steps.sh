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
