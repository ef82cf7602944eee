"""Issue 8, items 5 and 6: the CUPTI timer against the cold timer, the graph timer against
``triton.testing.do_bench_cudagraph``, and what each timer reads for work on a side stream.

Run on a GPU from the repository root (cupti-python installed):
    PYTHONPATH=. python3 bench/timer_semantics.py OUT_DIR

All methods run in this one process, interleaved in rounds (median of the round medians):
  cupti vs cold     o_proj 16 and 16384 tokens (torch.addmm, bf16, hidden 4096; two input sets
                    rotated as `solbench run` does), both with the clean flush and the same stopping rule
  event floor       both timers on one tiny kernel (a 4-byte fill): what the event window adds
  graph vs triton   o_proj 16 tokens and x.mul_ on 1M fp32: solbench's graph timer (one input set per
                    graph), the former design (two input sets rotated inside one graph), do_bench_cudagraph
  side stream       the hostile side-stream call (50 GEMMs on a stream the current one never waits for)
                    and the same work joined back: what cold events and CUPTI read
Writes OUT_DIR/semantics.json and prints a table.
"""

from __future__ import annotations

import json
import os
import statistics
import sys

import torch

from solbench.device.timer import CudaColdTimer, CudaGraphTimer, make_timer
from solbench.measure.criteria import CIWidth
from solbench.measure.loop import CheatDetected, measure

H = 4096
ROUNDS = 3


def oproj_sets(tokens: int, sets: int = 2) -> list:
    gen = torch.Generator(device="cuda").manual_seed(tokens)
    out = []
    for _ in range(sets):
        x = torch.randn(tokens, H, device="cuda", generator=gen).to(torch.bfloat16)
        w = (torch.randn(H, H, device="cuda", generator=gen) * H**-0.5).to(torch.bfloat16)
        r = torch.randn(tokens, H, device="cuda", generator=gen).to(torch.bfloat16)
        out.append(lambda x=x, w=w, r=r: torch.addmm(r, x, w.t()))
    return out


def timed(timer, launches, budget=1.0) -> float:
    return measure(timer, launches, CIWidth(0.01, 10, 500, budget)).median


def cupti_vs_cold(l2: int) -> dict:
    res = {}
    for tokens in (16, 16384):
        launches = oproj_sets(tokens)
        cold, cupti = [], []
        for _ in range(ROUNDS):
            cold.append(timed(CudaColdTimer(torch, l2, clean=True), launches))
            timer = make_timer("cuda", "cupti", l2_bytes=l2, flush="clean")
            cupti.append(timed(timer, launches))
        res[f"oproj{tokens}"] = {"cold_us": statistics.median(cold) * 1e6, "cupti_us": statistics.median(cupti) * 1e6,
                                 "cold_rounds_us": [t * 1e6 for t in cold], "cupti_rounds_us": [t * 1e6 for t in cupti],
                                 "kernels": list(timer.kernels)}
    return res


def event_floor(l2: int) -> dict:
    """What each timer reads for one tiny kernel (a 4-byte fill): the events' own window cost."""
    m = torch.zeros(1, dtype=torch.int32, device="cuda")
    cold, cupti = [], []
    for _ in range(ROUNDS):
        cold.append(timed(CudaColdTimer(torch, l2, clean=True), [m.zero_]))
        cupti.append(timed(make_timer("cuda", "cupti", l2_bytes=l2, flush="clean"), [m.zero_]))
    return {"cold_us": statistics.median(cold) * 1e6, "cupti_us": statistics.median(cupti) * 1e6}


def graph_one_graph_two_sets(launches, calls: int) -> float:
    """The former graph timer: both input sets rotated inside one graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for fn in launches:
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(calls):
            launches[i % len(launches)]()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    g.replay()
    out = []
    for _ in range(20):
        s.record()
        g.replay()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) * 1e-3 / calls)
    return statistics.median(out)


def graph_vs_triton() -> dict:
    import triton.testing

    x1 = torch.randn(1 << 20, device="cuda")
    calls = {"oproj16": oproj_sets(16), "scale1M": [lambda: x1.mul_(1.0001)]}
    res = {}
    for name, launches in calls.items():
        ours, ours_two, old, trit = [], [], [], []
        for _ in range(ROUNDS):
            one = CudaGraphTimer(torch)
            ours.append(timed(one, launches[:1]))
            two = CudaGraphTimer(torch)
            ours_two.append(timed(two, launches))
            old.append(graph_one_graph_two_sets(launches, two.calls) if len(launches) > 1 else float("nan"))
            trit.append(triton.testing.do_bench_cudagraph(launches[0], rep=20, return_mode="median") * 1e-3)
        res[name] = {"graph_us": statistics.median(ours) * 1e6, "graph_two_sets_us": statistics.median(ours_two) * 1e6,
                     "old_one_graph_two_sets_us": statistics.median(old) * 1e6,
                     "do_bench_cudagraph_us": statistics.median(trit) * 1e6, "protocol": two.protocol()}
    return res


def side_stream(l2: int) -> dict:
    gen = torch.Generator(device="cuda").manual_seed(64)
    x = torch.randn(64, H, device="cuda", generator=gen).to(torch.bfloat16)
    w = (torch.randn(H, H, device="cuda", generator=gen) * H**-0.5).to(torch.bfloat16)
    r = torch.randn(64, H, device="cuda", generator=gen).to(torch.bfloat16)
    side = torch.cuda.Stream()

    def unjoined():  # tests/data/hostile/cheats.py:side_stream
        out = torch.empty_like(r)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(50):
                torch.addmm(r, x, w.t(), out=out)
        return out

    def joined():
        out = torch.empty_like(r)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(50):
                torch.addmm(r, x, w.t(), out=out)
        torch.cuda.current_stream().wait_stream(side)
        return out

    res = {}
    for name, fn in (("joined", joined), ("unjoined", unjoined)):
        cold = timed(CudaColdTimer(torch, l2, clean=True), [fn], budget=0.5)
        timer = make_timer("cuda", "cupti", l2_bytes=l2, flush="clean")
        timer.prepare([fn])
        spans = []
        for i in range(15):
            spans.append(timer.sample(i))
        stray = timer.stray
        timer.finish()
        try:
            timed(make_timer("cuda", "cupti", l2_bytes=l2, flush="clean"), [fn], budget=0.5)
            caught = None
        except CheatDetected as exc:
            caught = str(exc)
        res[name] = {"cold_events_us": cold * 1e6, "cupti_span_us": statistics.median(spans) * 1e6,
                     "activities": timer.activities, "stray": stray, "measure_raises": caught}
    one = timed(CudaColdTimer(torch, l2, clean=True), [lambda: torch.addmm(r, x, w.t())], budget=0.5)
    res["one_addmm_cold_us"] = one * 1e6
    return res


def main() -> None:
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out_dir, exist_ok=True)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    res = {}
    for part, fn in (("cupti_vs_cold", lambda: cupti_vs_cold(l2)), ("event_floor", lambda: event_floor(l2)),
                     ("graph_vs_triton", graph_vs_triton),
                     ("side_stream", lambda: side_stream(l2))):
        try:
            res[part] = fn()
        except Exception as exc:  # one part failing must not lose the others
            res[part] = {"error": f"{type(exc).__name__}: {exc}"}
        print(part, json.dumps(res[part])[:600], flush=True)
    with open(os.path.join(out_dir, "semantics.json"), "w") as f:
        json.dump(res, f, indent=1)
    print_table(res)


def print_table(res: dict) -> None:
    cc = res.get("cupti_vs_cold", {})
    for k, v in cc.items():
        if isinstance(v, dict):
            print(f"cupti vs cold {k}: cold {v['cold_us']:.2f} us, cupti {v['cupti_us']:.2f} us, "
                  f"ratio {v['cupti_us'] / v['cold_us']:.3f}")
    ef = res.get("event_floor", {})
    if "cold_us" in ef:
        print(f"one 4-byte fill: cold {ef['cold_us']:.2f} us, cupti {ef['cupti_us']:.2f} us")
    for k, v in res.get("graph_vs_triton", {}).items():
        if isinstance(v, dict):
            print(f"graph {k}: solbench graph {v['graph_us']:.2f} us (2 sets, 2 graphs {v['graph_two_sets_us']:.2f};"
                  f" old 1 graph 2 sets {v['old_one_graph_two_sets_us']:.2f}), do_bench_cudagraph "
                  f"{v['do_bench_cudagraph_us']:.2f} us, ratio {v['graph_us'] / v['do_bench_cudagraph_us']:.3f}")
    ss = res.get("side_stream", {})
    for k in ("joined", "unjoined"):
        if k in ss:
            v = ss[k]
            print(f"side stream {k}: cold events {v['cold_events_us']:.1f} us, cupti span "
                  f"{v['cupti_span_us']:.1f} us ({v['activities']} activities), stray: {bool(v['stray'])}, "
                  f"measure raises: {bool(v['measure_raises'])}")


if __name__ == "__main__":
    main()
