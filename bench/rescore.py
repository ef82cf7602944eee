"""Score saved runs again with today's workload files and spec: which rows' figures change.

    PYTHONPATH=. python3 bench/rescore.py RUN.json[.gz] ...

Each saved case is re-scored by ``solbench.plan.workloads.case_result`` (its implementations' saved
timings, the run's spec by id, its workload file as it is now); a row is printed where T_SOL, SOL, MBU,
MFU or the status moved by more than 0.1%. Times are never touched: only what the cost model and the
spec say about them (e.g. an FP8 row's bytes, ``input_dtypes``).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from solbench.config.hwspecs import get_spec
from solbench.plan.workloads import case_result, plan
from solbench.results import store


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+")
    args = ap.parse_args()
    print("run  case  impl  status  T_SOL old -> new  SOL old -> new  MBU old -> new  MFU old -> new")
    for path in args.runs:
        run = store.load(Path(path))
        spec = get_spec(run.spec.id)
        planned = {}
        for f in run.workload_files:
            for p in plan([f], "cuda"):
                planned[p.spec.name] = p
        for c in run.cases:
            p = planned.get(c.workload)
            case = next((k for k in p.cases if k.id == c.case_id), None) if p else None
            if case is None:
                continue
            impls = [r for r in c.impls if r.name in p.spec.implementations]
            new = {r.name: r for r in case_result(p, case, spec, impls).impls}
            for r in impls:
                a, b = r.score, new[r.name].score
                if a is None and b is None:
                    continue
                old_t = c.t_sol
                new_t = b.t_sol if b is not None and b.t_sol is not None else c.t_sol

                def moved(x, y):
                    return (x is None) != (y is None) or (x is not None and not math.isclose(x, y, rel_tol=1e-3))

                if (r.status != new[r.name].status or moved(old_t, new_t) or a is None or b is None
                        or moved(a.sol, b.sol) or moved(a.mbu, b.mbu) or moved(a.mfu, b.mfu)):
                    def f3(x):
                        return "-" if x is None else f"{x:.3g}"

                    print(f"{path}  {c.case_id}  {r.name}  {r.status}->{new[r.name].status}  "
                          f"{old_t * 1e6:.2f} -> {new_t * 1e6:.2f} us  "
                          f"{f3(a and a.sol)} -> {f3(b and b.sol)}  {f3(a and a.mbu)} -> {f3(b and b.mbu)}  "
                          f"{f3(a and a.mfu)} -> {f3(b and b.mfu)}")


if __name__ == "__main__":
    main()
