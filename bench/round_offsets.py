"""Is a run's first round systematically off? Usage: python bench/round_offsets.py RUN.json...

Per run: over its points with three rounds or more, log(round-1 median / geometric mean of the
round-2 and round-3 medians) (median, mean, share above 0), and the median SM clock per round
(NVML, read after every sample). A first round slower or faster than the rest would be harness
state (a cold GPU, clocks ramping) rather than per-process state that rounds sample.
"""

import json
import sys

import numpy as np

for path in sys.argv[1:]:
    with open(path) as f:
        run = json.load(f)
    offsets, clocks = [], [[], [], []]
    for case in run["cases"]:
        for impl in case["impls"]:
            t = impl.get("timing")
            if not t or not t.get("rounds"):
                continue
            s, r = np.asarray(t["samples"]), np.asarray(t["rounds"])
            ks = sorted(set(r.tolist()))[:3]
            if len(ks) < 3:
                continue
            m = [np.median(s[r == k]) for k in ks]
            offsets.append(100 * np.log(m[0] / np.sqrt(m[1] * m[2])))
            if t.get("sm_clock_mhz"):
                sm = np.array([np.nan if x is None else x for x in t["sm_clock_mhz"]], float)
                for j, k in enumerate(ks):
                    clocks[j].append(np.nanmedian(sm[r == k]))
    if offsets:
        d = np.asarray(offsets)
        sm = [int(np.nanmedian(c)) if c else None for c in clocks]
        print(f"{path}: {d.size} points; round 1 vs rounds 2-3: median {np.median(d):+.2f}%, mean {d.mean():+.2f}%, "
              f"above 0: {(d > 0).mean():.0%}; SM MHz by round {sm}")
