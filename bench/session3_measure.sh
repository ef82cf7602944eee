#!/usr/bin/env bash
# Issue 16 after the session's changes (moderated t, cheaper side-stream check, fast detection):
# two default o_proj runs and the gates between them, run --gate-against, ab on identical trees,
# ab with a 10% and a 3% slowdown (bench/data/ab.yaml). Results in $OUT/m.tar.gz, a table last.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:. || exit 1
export PYTHONUNBUFFERED=1 LIMIT=${LIMIT:-570} log=$OUT/steps.log
. bench/steps.sh
R=/tmp/m && mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,power.limit --format=csv > $R/smi.txt
for n in a b; do
  step oproj-$n 70 bash -c "/usr/bin/time -f 'command wall %e s' python3 -m solbench run workloads/attn.yaml -w o_proj -o $R/oproj-$n.json -q 2>&1 | tail -n 2"
done
python3 -m solbench show $R/oproj-a.json --harness 2>&1 | tail -n 16 | tee $R/harness-a.txt
for p in "a b" "b a"; do set -- $p
  python3 -m solbench gate --baseline $R/oproj-$1.json --current $R/oproj-$2.json > $R/gate-$1$2.txt 2>&1
  echo "gate $1->$2 exit $?: $(grep -c INCONCLUSIVE $R/gate-$1$2.txt) inconclusive lines" | tee -a $log
done
step gate-against 90 bash -c "/usr/bin/time -f 'command wall %e s' python3 -m solbench run workloads/attn.yaml -w o_proj --gate-against $R/oproj-a.json --rerun 3 -o $R/oproj-c.json -q > $R/gate-against.txt 2>&1; echo \"run --gate-against exit \$?\"; tail -n 3 $R/gate-against.txt"
rm -rf /tmp/base && mkdir -p /tmp/base && cp -r solbench workloads /tmp/base/
step ab-same 160 bash -c "/usr/bin/time -f 'command wall %e s' python3 -m solbench ab --baseline-tree /tmp/base workloads/attn.yaml -w o_proj -q --out-dir $R/ab --json > $R/ab-verdicts.json 2> $R/ab.err; echo \"ab identical exit \$?\"; tail -n 1 $R/ab.err"
mkdir -p /tmp/ab/base /tmp/ab/s10 /tmp/ab/s3
for t in base s10 s3; do cp bench/data/ab.yaml bench/data/slow.py /tmp/ab/$t/; done
sed -i 's/^SLOWDOWN = .*/SLOWDOWN = 0.0/' /tmp/ab/base/slow.py
sed -i 's/^SLOWDOWN = .*/SLOWDOWN = 0.03/' /tmp/ab/s3/slow.py
for t in s10 s3; do
  step ab-$t 60 bash -c "/usr/bin/time -f 'command wall %e s' python3 -m solbench ab --baseline-tree /tmp/ab/base --current-tree /tmp/ab/$t ab.yaml --threshold 5% -q --out-dir $R/ab-$t --json > $R/ab-$t.json 2> $R/ab-$t.err; echo \"ab $t exit \$?\"; tail -n 1 $R/ab-$t.err"
done
cp $log $R/ && tar -czf $OUT/m.tar.gz -C /tmp m
grep -v "^=== [a-z0-9-]* [0-9]" $log
