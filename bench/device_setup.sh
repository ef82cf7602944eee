# Sourced by the H200 session scripts (bench/session12_*.sh): the carried wheels (.whl/) installed
# into /tmp/site and put on PYTHONPATH with the tree, unbuffered output, and the card as found
# (name, driver, clocks, power limit, temperature) in $OUT/smi.txt. Exits if the wheels fail to install.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:.
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv | tee $OUT/smi.txt
