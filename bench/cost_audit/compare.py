"""Compare solbench's cost, T_SOL and per-implementation numbers with mine.py's hand counts, for every
shipped case on the H200 and B200 specs (forty-seventh session's audit: no mismatch).

    PYTHONPATH=. python3 bench/cost_audit/compare.py [TABLE.tsv]

Every implementation is given a fake median of 2 x T_SOL (the baseline 4 x), so that SOL, MFU, MBU and
the S score can be checked against the formulas too. Exits 1 on any mismatch. With TABLE.tsv, the H200
rows (workload, case, solbench and hand FLOPs, vector FLOPs, fused bytes, match) are written there.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import mine  # noqa: E402

from solbench.config.hwspecs import get_spec  # noqa: E402
from solbench.plan.workloads import case_result, plan  # noqa: E402
from solbench.results.model import ImplResult, Timing  # noqa: E402

FILES = sorted((HERE.parents[1] / "workloads").glob("*.yaml"))
UNIT = {"bfloat16": ("bf16", "vec_bf16"), "float16": ("fp16", "vec_bf16"), "fp8": ("fp8", "vec_fp32")}


def key(workload, case_id):
    return workload, case_id.split("[", 1)[1].rstrip("]")


mine_rows = {(r[0], r[1]): r for r in mine.cases()}
sol_rows = {}
for p in plan(FILES, "cuda"):
    for case in p.cases:
        sol_rows[key(p.spec.name, case.id)] = (p, case)

print("missing in mine:", sorted(set(sol_rows) - set(mine_rows)))
print("missing in solbench:", sorted(set(mine_rows) - set(sol_rows)))

bad = 0
table = []
for gpu in ("h200", "b200"):
    spec = get_spec(gpu)
    for k, (p, case) in sorted(sol_rows.items()):
        r = mine_rows[k]
        wl, cid, dt, fl, vec, by, bus, extra = r
        # fake: every implementation ok at a median of 2 x T_SOL, the baseline at 4 x
        cr0 = case_result(p, case, spec, ())
        T = 2 * cr0.t_sol
        impls = [ImplResult(name, "ok", timing=Timing((T,), T, T, T, "converged"),
                            protocol={"part": "floor"} if p.spec.implementations[name].part == "floor" else {})
                 for name in p.spec.implementations if not p.spec.implementations[name].part]
        impls = [ImplResult(i.name, "ok", timing=Timing((4 * T,), 4 * T, 4 * T, 4 * T, "converged"))
                 if i.name == p.spec.baseline else i for i in impls]
        cr = case_result(p, case, spec, impls)
        c = cr.cost
        u, vu = UNIT[dt]
        t_m, b_m = mine.tsol(fl, vec, by, bus, gpu, u, vu)
        ok = (c.tensor_flops == fl and math.isclose(c.vector_flops, vec) and c.fused_bytes == by
              and math.isclose(c.bus_bytes, bus) and math.isclose(cr.t_sol, t_m, rel_tol=1e-12) and cr.bound == b_m)
        if gpu == "h200":
            table.append((wl, cid, c.tensor_flops, fl, c.vector_flops, vec, c.fused_bytes, by, ok))
        if not ok:
            bad += 1
            print("MISMATCH", gpu, wl, cid, (c.tensor_flops, fl), (c.vector_flops, vec), (c.fused_bytes, by),
                  (c.bus_bytes, bus), (cr.t_sol, t_m), (cr.bound, b_m))
        # per implementation: own bytes/peak (fp8), SOL/MFU/MBU/S against my formulas
        P = mine.PEAKS[gpu]
        for ir in cr.impls:
            s = ir.score
            if s is None:
                print("UNSCORED", gpu, wl, cid, ir.name, ir.status, ir.message[:120])
                bad += 1
                continue
            own_unit, own_by = extra.get(ir.name, (u, by))
            own_unit = UNIT.get(own_unit, (own_unit,))[0]
            vunit = "vec_fp32" if own_unit == "fp8" else vu
            t_own, b_own = mine.tsol(fl, vec, own_by, bus, gpu, own_unit, vunit)
            t = ir.timing.median
            tb = 4 * T
            exp = dict(t_sol=t_own, bound=b_own, fused_bytes=own_by, sol=t_own / t,
                       mfu=(fl / (t * P[own_unit]) if fl else None), mbu=own_by / (t * P["bw"]),
                       s=(1.0 if t <= t_own else (0.0 if tb <= t_own else 1 / (1 + (t - t_own) / (tb - t_own)))))
            got = dict(t_sol=s.t_sol, bound=s.bound, fused_bytes=s.fused_bytes, sol=s.sol, mfu=s.mfu, mbu=s.mbu,
                       s=s.s_score)
            for f in exp:
                a, b = got[f], exp[f]
                same = a == b if isinstance(b, str) or b is None else math.isclose(a, b, rel_tol=1e-12)
                if not same:
                    bad += 1
                    print("IMPL MISMATCH", gpu, wl, cid, ir.name, f, a, b)
            if extra.get(ir.name) and gpu == "h200" and cid.startswith("tokens=16,"):
                print("fp8 impl", gpu, wl, cid, ir.name, s.fused_bytes, own_by, s.t_sol, t_own, s.bound)
            if extra.get(ir.name) and gpu == "b200" and cid.startswith("tokens=16384,"):
                print("fp8 impl", gpu, wl, cid, ir.name, s.fused_bytes, own_by, s.t_sol, t_own, s.bound)

print("mismatches:", bad, "cases:", len(sol_rows))
if len(sys.argv) > 1:
    with open(sys.argv[1], "w") as fh:
        for row in table:
            fh.write("\t".join(map(str, row)) + "\n")
sys.exit(1 if bad or set(sol_rows) != set(mine_rows) else 0)
