"""Scratch GPU check for bert.yaml / resnet50.yaml (not part of the repo)."""
import sys, time, inspect, json
import torch
from solbench.api import plan, cost_of
from solbench.analysis.sol import speed_of_light
from solbench.config.hwspecs import get_spec
from solbench.impls.registry import resolve
from solbench.measure.runner import prepare_case, run_impl, _launches
from solbench.measure.criteria import CIWidth
from solbench.device import timer as timers

dev = "cuda" if torch.cuda.is_available() else "cpu"
kind = dev
files = sys.argv[1].split(",")
only = sys.argv[2].split(",") if len(sys.argv) > 2 and sys.argv[2] else []
prof_cases = int(sys.argv[3]) if len(sys.argv) > 3 else 1
spec = get_spec("h200-sxm")
if dev == "cuda":
    timer = timers.CudaColdTimer(torch, 60 << 20)
else:
    timer = timers.CpuTimer()
crit = CIWidth(0.02, 5, 40, 0.4)

def err_stats(out, ref, atol, rtol):
    o = out.double(); r = ref.to(o.device).double()
    e = (o - r).abs()
    ratio = (e / (atol + rtol * r.abs())).max().item()
    l2 = (torch.linalg.vector_norm(o - r) / torch.linalg.vector_norm(r)).item()
    return e.max().item(), ratio, l2

for p in plan(files, kind, only):
    for ci, case in enumerate(p.cases):
        t0 = time.time()
        inp = prepare_case(p.spec, case, dev, p.path.parent, input_sets=1, seed=0)
        cost = cost_of(p, case)
        sol = speed_of_light(cost, spec.peaks_for(case.dtype))
        print(f"== {case.id} T_SOL={sol.t_sol*1e6:.1f}us bound={sol.bound} ref {time.time()-t0:.1f}s", flush=True)
        tol = p.spec.tolerances.get(case.dtype)
        atol, rtol = (tol.atol, tol.rtol) if tol else (2e-2, 2e-2)
        for name, impl in p.spec.implementations.items():
            t1 = time.time()
            r = run_impl(name, impl, p.spec, case, inp, timer, crit, device=dev, base_dir=p.path.parent, warmup=2)
            med = r.timing.median if r.timing else float('nan')
            extra = ""
            if r.status in ("ok", "incorrect"):
                try:
                    launch = _launches(impl, case, inp.sets, p.path.parent)[0]
                    out = launch()
                    outs = (out,) if isinstance(out, torch.Tensor) else tuple(out)
                    stats = [err_stats(o, rr, atol, rtol) for o, rr in zip(outs, inp.references[0])]
                    extra = " err(maxabs,ratio,l2)=" + ";".join(f"{a:.2e},{b:.3f},{c:.2e}" for a, b, c in stats)
                except Exception as exc:
                    extra = f" stats failed {exc}"
            print(f"   {name:14s} {r.status:9s} {med*1e6:10.1f}us  sol={sol.t_sol/med if med==med else 0:.3f} {r.message[:150]}{extra} ({time.time()-t1:.1f}s)", flush=True)
            if dev == "cuda" and ci < prof_cases and r.status == "ok":
                launch = _launches(impl, case, inp.sets, p.path.parent)[0]
                launch(); torch.cuda.synchronize()
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                    launch(); torch.cuda.synchronize()
                names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
                print("      kernels:", " | ".join(n[:90] for n in names))
        del inp
        if dev == "cuda":
            torch.cuda.empty_cache()
