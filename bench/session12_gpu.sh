#!/usr/bin/env bash
# Twelfth session, first H200 call (issue 16): o_proj's wall time before (the tree in .before/, the
# eleventh session's last commit) and after this session's harness cuts, alternated twice; one more
# run of the new tree with worker profiles (what each worker still spends, which modules it imports
# itself); the GPU tests of the changed code. Carry .whl and .before. Prints a short table last.
source bench/device_setup.sh
table=""
one() {  # one(label, dir): one default o_proj run in dir, wall time and the harness lines
    local s=$(date +%s.%N)
    (cd "$2" && PYTHONPATH=/tmp/site:. python3 -m solbench run workloads/attn.yaml -w o_proj -q -o /tmp/$1.json > /tmp/$1.out 2>&1)
    local rc=$? e=$(date +%s.%N)
    local wall=$(python3 -c "print(f'{$e-$s:.1f}')")
    table="$table$1 exit $rc wall ${wall} s\n"
    echo "== $1 (exit $rc, wall $wall s)" >> $OUT/harness.txt
    (cd "$2" && PYTHONPATH=/tmp/site:. python3 -m solbench show /tmp/$1.json --harness 2>&1 | tail -n 25) >> $OUT/harness.txt
}
one before1 .before; one after1 .; one before2 .before; one after2 .
mkdir -p /tmp/prof
SOLBENCH_PROFILE_DIR=/tmp/prof python3 -m solbench run workloads/attn.yaml -w o_proj -q -o /tmp/prof.json > /tmp/prof.out 2>&1
python3 bench/worker_profile.py /tmp/prof --top 60 > $OUT/prof-summary.txt 2>&1
cat /tmp/prof/*.imports | sort | uniq -c | sort -rn > $OUT/imports.txt
s=$(date +%s)
python3 -m pytest tests/gpu/test_preload_gpu.py tests/gpu/test_kernels.py -q -p no:cacheprovider -rfEs -k "preload or w8a16 or fp8" > $OUT/tests.out 2>&1
echo "tests: exit $?, $(( $(date +%s) - s )) s"; tail -n 3 $OUT/tests.out
head -n 40 $OUT/imports.txt
grep -E "^== |start and retire|correctness checks|timing loop|set-up and comp|GPU busy|^│ wall" $OUT/harness.txt | head -60
printf "$table"
