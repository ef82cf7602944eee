#!/usr/bin/env bash
# The whole ResNet-50 at batch 256 (workloads/resnet50_forward.yaml), default protocol, on an 80 GB card:
# the thirty-ninth session's suite ran its rounds 2 and 3 out of memory on an H100, twelve workers set up
# side by side at 2.9 GiB counted each. Prints each implementation's status, its allocator peak and how
# its rounds went side by side. Carry .whl; LIMIT: the seconds this call may use.
PYC=0 source bench/device_setup.sh
s=$(date +%s)
timeout $(( $(left) - 5 )) python3 -m solbench run workloads/resnet50_forward.yaml -q -o $OUT/r50.json > $OUT/r50.txt 2>&1
echo "resnet50_forward: exit $?, $(( $(date +%s) - s )) s" | tee -a $OUT/steps.txt
python3 - $OUT/r50.json <<'PY' 2>&1 | tee -a $OUT/steps.txt
import json, sys
d = json.load(open(sys.argv[1]))
for c in d["cases"]:
    for i in c["impls"]:
        p = i["protocol"]
        print(f"{i['name']:14} {i['status']:8} peak {p.get('memory_peak_bytes', 0) / 2**30:6.2f} GiB  "
              f"rounds {p.get('rounds')}  side_by_side {p.get('side_by_side')}  {i.get('message', '')[:90]}")
PY
tail -n 4 $OUT/r50.txt
