"""Each decode case's `fused` and `floor` medians and the fraction floor / fused (issue 20), from a run.

    PYTHONPATH=. python3 bench/floor_fractions.py results/h200/issue16/session49/call2/attn.json.gz

The `floor` implementation reads the case's bytes with a plain read kernel under the same timer; a fused
implementation at 1.0 of its floor moves its bytes as fast as a copy-like kernel does in one cold sample.
"""

from __future__ import annotations

import sys

from solbench.results import store


def main(path: str, workloads: tuple[str, ...] = ("o_proj", "o_proj_fp8w"),
         tokens: tuple[int, ...] = (1, 16, 64)) -> None:
    run = store.load(path)
    print(f"{run.environment.device_name}: {path}")
    print(f"{'case':48} {'baseline':>9} {'fused':>9} {'floor':>9} {'floor/fused':>11}")
    for case in run.cases:
        if case.workload not in workloads or int(case.params.get("tokens", -1)) not in tokens:
            continue
        t = {r.name: r.timing.median * 1e6 for r in case.impls if r.timing is not None and r.status == "ok"}
        if "fused" in t and "floor" in t:
            print(f"{case.case_id:48} {t.get('baseline', float('nan')):9.2f} {t['fused']:9.2f} {t['floor']:9.2f} "
                  f"{t['floor'] / t['fused']:11.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
