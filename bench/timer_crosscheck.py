"""Cross-check solbench's timers against nvbench (cuda-bench), triton's do_bench and graph replay.

Run on a GPU from the repository root:  PYTHONPATH=. python3 bench/timer_crosscheck.py [OUT_DIR]
Calls timed (all on the same tensors):
  scale     x.mul_(1.0001) on 1M fp32 in place (8 MB moved: ~2 µs of work on an H200)
  addmm16   torch.addmm(r, x, w.T), tokens 16, hidden 4096, bf16 (decode o_proj)
  addmm16k  the same at tokens 16384 (prefill o_proj)
Methods: solbench cold and graph timers (the measure loop and CI stopping rule of `solbench run`),
plain per-launch events (no flush, no spin), triton do_bench (median), CUDA-graph replay of 100
calls, and nvbench cold GPU time (blocking kernel + L2 flush per sample).
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import tempfile

import torch

from solbench.device.timer import CudaColdTimer, CudaGraphTimer
from solbench.measure.criteria import CIWidth
from solbench.measure.loop import measure


def calls() -> dict:
    torch.manual_seed(0)
    dev = "cuda"
    x1 = torch.randn(1 << 20, device=dev)
    h = 4096
    w = (torch.randn(h, h, device=dev) * h**-0.5).to(torch.bfloat16)
    a16, r16 = (torch.randn(16, h, device=dev, dtype=torch.bfloat16) for _ in range(2))
    a16k, r16k = (torch.randn(16384, h, device=dev, dtype=torch.bfloat16) for _ in range(2))
    return {
        "scale": lambda: x1.mul_(1.0001),
        "addmm16": lambda: torch.addmm(r16, a16, w.t()),
        "addmm16k": lambda: torch.addmm(r16k, a16k, w.t()),
    }


def per_launch_events(fn, n=200) -> float:
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(n):
        s.record()
        fn()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) * 1e-3)
    return statistics.median(out)


def graph_replay(fn, calls=100, replays=20) -> float:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    g.replay()
    out = []
    for _ in range(replays):
        s.record()
        g.replay()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) * 1e-3 / calls)
    return statistics.median(out)


def do_bench(fn) -> float:
    import triton.testing

    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e-3


def solbench_timer(timer, fn) -> float:
    t = measure(timer, [fn], CIWidth(0.01, 10, 2000, 0.4), warmup=3)
    return t.median


def nvbench(fns: dict) -> dict:
    try:
        import cuda.bench as bench
    except ImportError as exc:
        return {"error": f"cuda-bench not importable: {exc}"}
    for name, fn in fns.items():
        def make(fn=fn):
            def bench_fn(state):
                stream = torch.cuda.ExternalStream(state.get_stream().addressof())

                def launcher(launch):
                    with torch.cuda.stream(stream):
                        fn()

                state.exec(launcher)
            return bench_fn
        b = bench.register(make())
        b.set_name(name)
    path = os.path.join(tempfile.mkdtemp(), "nvbench.json")
    with contextlib.suppress(SystemExit):
        bench.run_all_benchmarks([sys.argv[0], "--json", path, "--quiet"])
    with open(path) as f:
        data = json.load(f)
    out = {}
    for b in data.get("benchmarks", []):
        for st in b.get("states", []):
            for s in st.get("summaries", []):
                if s.get("tag", "").startswith("nv/cold/time/gpu"):
                    vals = {d["name"]: d["value"] for d in s.get("data", [])}
                    out[f"{b['name']}:{s['tag']}"] = float(vals.get("value", "nan"))
    return out


ROUNDS = 5


def main() -> None:
    """Methods run in interleaved rounds, so clock and power drift hits all of them alike."""
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", ".")
    fns = calls()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    methods = {
        "solbench_cold": lambda fn: solbench_timer(CudaColdTimer(torch, l2), fn),
        "solbench_graph": lambda fn: solbench_timer(CudaGraphTimer(torch), fn),
        "events_per_launch": per_launch_events,
        "do_bench_median": do_bench,
        "graph_replay_100": graph_replay,
    }
    rows = {}
    for name, fn in fns.items():
        per_round = {m: [] for m in methods}
        for _ in range(ROUNDS):
            for m, f in methods.items():
                per_round[m].append(f(fn))
        rows[name] = {m: statistics.median(v) for m, v in per_round.items()}
        rows[name]["rounds"] = per_round
    nv = nvbench(fns)
    for key, value in nv.items():
        name, _, tag = key.partition(":")
        if name in rows:
            rows[name]["nvbench_" + tag.split("/")[-1]] = value
    with open(os.path.join(out_dir, "timer_crosscheck.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows, "nvbench_raw": nv}, f, indent=1)
    cols = sorted({c for r in rows.values() for c in r if c != "rounds" and "nvbench_" not in c})
    cols += ["nvbench_mean", "nvbench_median"]
    print("µs per call   " + "  ".join(f"{c:>18}" for c in cols))
    for name, r in rows.items():
        print(f"{name:<12}  " + "  ".join(f"{r.get(c, float('nan')) * 1e6:18.2f}" for c in cols))


if __name__ == "__main__":
    main()
