#!/usr/bin/env bash
# Issue 16 on the H200: five separate o_proj runs (default protocol), one with --max-rounds 8, and
# `ab` on two identical trees. Gates between the runs are computed afterwards on any machine:
#   solbench gate --baseline oproj-1.json --current oproj-2.json ...
# Everything lands in $OUT/issue16.tar.gz (and the step log in $OUT/steps.log).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:. || exit 1
export PYTHONUNBUFFERED=1 LIMIT=${LIMIT:-570} log=$OUT/steps.log
. bench/steps.sh
R=/tmp/issue16 && mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,power.limit --format=csv > $R/smi.txt
for n in 1 2 3 4 5; do
  step oproj-$n 60 python3 -m solbench run workloads/attn.yaml -w o_proj -o $R/oproj-$n.json -q
done
step oproj-adaptive 120 python3 -m solbench run workloads/attn.yaml -w o_proj --max-rounds 8 -o $R/oproj-adaptive.json -q
mkdir -p $R/ab && rm -rf /tmp/base && mkdir -p /tmp/base && cp -r solbench workloads /tmp/base/
step ab-same 200 python3 -m solbench ab --baseline-tree /tmp/base workloads/attn.yaml -w o_proj -q \
  --out-dir $R/ab --junit $R/ab/junit.xml --json > $R/ab-verdicts.json
echo "ab exit code: $?" | tee -a $log
cp $log $R/ && tar -czf $OUT/issue16.tar.gz -C /tmp issue16
grep "^===\|exit code" $log
