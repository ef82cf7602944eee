"""H200 benchmark of solbench's fused CUDA kernels against their torch / cuBLAS counterparts.

Run from the repository root on a CUDA machine with CuPy::

    PYTHONPATH=. python3 bench/kernels_h200.py          # JSON to $OUT/kernels_h200.json if set

Protocol, per sample (cold L2): zero_ a 256 MB buffer (evicts the 60 MB L2), a
torch.cuda._sleep spin of SPIN_US so the host has enqueued the call before the GPU reaches
the start event (launch latency stays out of the window), CUDA events around one call;
the median of SAMPLES samples after a warm-up call. Bandwidth counts each input read once
and each output written once, over the median time; "% copy" divides it by a 2 GiB
device-to-device copy measured in the same run (read + write bytes).

Targets: residual_layernorm and bias_gelu >= 85 % of copy bandwidth; gemv_residual at
16 tokens <= 0.6 x torch.addmm.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from solbench.kernels import loader, ops

SAMPLES = 200
FLUSH_BYTES = 256 << 20
SPIN_US = 50.0
COPY_BYTES = 2 << 30
HIDDEN_LN = (768, 4096)
ROWS = 16384
GEMV_TOKENS = (1, 16, 64)
GEMV_DIM = 4096
GEMV_DEPTH_VARIANTS = ((16, 2), (16, 6), (1, 8))  # (tokens, k steps in flight per warp)
DTYPE = torch.bfloat16


class ColdTimer:
    """CUDA events around one call, L2 flushed and a spin kernel ahead of the start event."""

    def __init__(self) -> None:
        self.flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)
        start.record()
        torch.cuda._sleep(1_000_000)
        end.record()
        torch.cuda.synchronize()
        self.cycles_per_us = 1_000_000 / (start.elapsed_time(end) * 1e3)
        self.spin_cycles = int(SPIN_US * self.cycles_per_us)

    def times(self, fn, samples: int = SAMPLES) -> list[float]:
        """Seconds per call, one cold sample each."""
        fn()
        torch.cuda.synchronize()
        out: list[float] = []
        for first in range(0, samples, 50):
            events = []
            for _ in range(min(50, samples - first)):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                self.flush.zero_()
                torch.cuda._sleep(self.spin_cycles)
                start.record()
                fn()
                end.record()
                events.append((start, end))
            torch.cuda.synchronize()
            out += [s.elapsed_time(e) * 1e-3 for s, e in events]
        return out


def copy_bandwidth() -> float:
    """Bytes/s of a 2 GiB device-to-device copy, counting read + write (median of 10)."""
    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        dst.copy_(src)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) * 1e-3)
    del src, dst
    return 2 * COPY_BYTES / statistics.median(times)


def rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    got, ref = got.double(), ref.double()
    if not torch.isfinite(got).all():
        return float("nan")
    return ((got - ref).norm() / ref.norm()).item()


def nbytes(*tensors: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def summary(times: list[float]) -> dict:
    q = statistics.quantiles(times, n=10)
    return {"median_s": statistics.median(times), "p10_s": q[0], "p90_s": q[-1],
            "min_s": min(times), "n": len(times)}


def bench_layernorm(timer: ColdTimer, hidden: int) -> dict:
    g = torch.Generator(device="cuda").manual_seed(hidden)
    x = torch.randn(ROWS, hidden, device="cuda", generator=g).to(DTYPE)
    res = torch.randn(ROWS, hidden, device="cuda", generator=g).to(DTYPE)
    w = (1 + 0.2 * torch.randn(hidden, device="cuda", generator=g)).to(DTYPE)
    b = (0.2 * torch.randn(hidden, device="cuda", generator=g)).to(DTYPE)
    out, summed = ops.residual_layernorm(x, res, w, b)

    def torch_impl():
        s = x + res
        return F.layer_norm(s, (hidden,), w, b, 1e-5), s

    ref = F.layer_norm(summed.double(), (hidden,), w.double(), b.double(), 1e-5)
    check = {"out_rel_err": rel_err(out, ref), "summed_rel_err": rel_err(summed, x.double() + res.double()),
             "vs_torch_rel_err": rel_err(out, torch_impl()[0])}
    return {"op": "residual_layernorm", "shape": f"{ROWS}x{hidden}", "bytes": nbytes(x, res, w, b, out, summed),
            "check": check, "ours": summary(timer.times(lambda: ops.residual_layernorm(x, res, w, b))),
            "torch_name": "x + r; F.layer_norm", "torch": summary(timer.times(torch_impl)),
            "target": {"kind": "copy_fraction", "value": 0.85}}


def bench_gelu(timer: ColdTimer, hidden: int, mode: int = 0) -> dict:
    g = torch.Generator(device="cuda").manual_seed(100 + hidden)
    x = (3 * torch.randn(ROWS, hidden, device="cuda", generator=g)).to(DTYPE)
    b = torch.randn(hidden, device="cuda", generator=g).to(DTYPE)
    out = ops._bias_gelu(x, b, mode)
    ref = F.gelu((x + b).double())
    check = {"out_rel_err": rel_err(out, ref), "vs_torch_rel_err": rel_err(out, F.gelu(x + b))}
    name = "bias_gelu" if mode == 0 else "bias_gelu[libdevice erff]"
    y = torch.empty_like(x)
    return {"op": name, "shape": f"{ROWS}x{hidden}", "bytes": nbytes(x, b, out), "check": check,
            "ours": summary(timer.times(lambda: ops._bias_gelu(x, b, mode))),
            "torch_name": "F.gelu(x + b)", "torch": summary(timer.times(lambda: F.gelu(x + b))),
            "same_bytes_copy": summary(timer.times(lambda: y.copy_(x))),
            "target": {"kind": "copy_fraction", "value": 0.85} if mode == 0 else None}


def bench_gemv(timer: ColdTimer, tokens: int, depth: int | None = None) -> dict:
    g = torch.Generator(device="cuda").manual_seed(200 + tokens)
    x = torch.randn(tokens, GEMV_DIM, device="cuda", generator=g).to(DTYPE)
    w = (torch.randn(GEMV_DIM, GEMV_DIM, device="cuda", generator=g) / GEMV_DIM**0.5).to(DTYPE)
    res = torch.randn(tokens, GEMV_DIM, device="cuda", generator=g).to(DTYPE)
    options = () if depth is None else (f"-DSB_GEMV_DEPTH={depth}",)
    out = ops._gemv_residual(x, w, res, options)
    ref = x.double() @ w.double().t() + res.double()
    theirs = torch.addmm(res, x, w.t())
    check = {"out_rel_err": rel_err(out, ref), "addmm_rel_err": rel_err(theirs, ref),
             "vs_torch_rel_err": rel_err(out, theirs)}
    name = f"gemv_residual_kernel<0, {-(-tokens // 8)}>"
    kernel = loader.get_kernel("gemv_residual.cu", name, options=options, name_expressions=(name,))
    op = "gemv_residual" if depth is None else f"gemv_residual[depth={depth}]"
    return {"op": op, "shape": f"T{tokens} N{GEMV_DIM} K{GEMV_DIM}", "bytes": nbytes(x, w, res, out),
            "check": check, "num_regs": kernel.num_regs,
            "ours": summary(timer.times(lambda: ops._gemv_residual(x, w, res, options))),
            "torch_name": "torch.addmm", "torch": summary(timer.times(lambda: torch.addmm(res, x, w.t()))),
            "target": {"kind": "torch_ratio", "value": 0.6} if tokens == 16 and depth is None else None}


def nvidia_smi() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu,"
                               "clocks_throttle_reasons.active", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unavailable: {exc}"


def verdict(case: dict, copy_bw: float) -> str:
    target = case.get("target")
    if not target:
        return ""
    if target["kind"] == "copy_fraction":
        ok = case["bw"] / copy_bw >= target["value"]
        return f"{'MET' if ok else 'MISSED'} (>= {target['value']:.0%} copy)"
    ok = case["ours"]["median_s"] / case["torch"]["median_s"] <= target["value"]
    return f"{'MET' if ok else 'MISSED'} (<= {target['value']}x torch)"


def main() -> int:
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    props = torch.cuda.get_device_properties(0)
    import cupy

    env = {"device": props.name, "sms": props.multi_processor_count, "l2_bytes": props.L2_cache_size,
           "torch": torch.__version__, "cuda": torch.version.cuda, "cupy": cupy.__version__,
           "nvidia_smi_before": nvidia_smi()}
    t0 = time.time()
    timer = ColdTimer()
    copy_bw = copy_bandwidth()
    protocol = {"samples": SAMPLES, "flush_bytes": FLUSH_BYTES, "spin_us": SPIN_US,
                "cycles_per_us": timer.cycles_per_us, "statistic": "median", "l2": "cold (flushed per sample)",
                "copy_bytes": COPY_BYTES, "copy_bw_Bps": copy_bw}
    cases = []
    jobs = [lambda h=h: bench_layernorm(timer, h) for h in HIDDEN_LN]
    jobs += [lambda h=h: bench_gelu(timer, h) for h in HIDDEN_LN]
    jobs += [lambda h=h: bench_gelu(timer, h, mode=2) for h in HIDDEN_LN]
    jobs += [lambda t=t: bench_gemv(timer, t) for t in GEMV_TOKENS]
    jobs += [lambda t=t, d=d: bench_gemv(timer, t, d) for t, d in GEMV_DEPTH_VARIANTS]
    for job in jobs:
        try:
            case = job()
        except Exception as exc:  # keep the other cases
            print(f"FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
            cases.append({"op": "error", "error": f"{type(exc).__name__}: {exc}"})
            continue
        case["bw"] = case["bytes"] / case["ours"]["median_s"]
        case["torch_bw"] = case["bytes"] / case["torch"]["median_s"]
        case["verdict"] = verdict(case, copy_bw)
        cases.append(case)
        print(json.dumps(case), flush=True)
    env["nvidia_smi_after"] = nvidia_smi()
    result = {"env": env, "protocol": protocol, "cases": cases, "wall_s": time.time() - t0}
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "kernels_h200.json"), "w") as f:
            json.dump(result, f, indent=1)

    print(f"\n{env['device']}, torch {env['torch']}, cupy {env['cupy']}; cold L2, median of {SAMPLES}; "
          f"copy {copy_bw / 1e12:.2f} TB/s (2 GiB, read+write)")
    print(f"{'op':28} {'shape':18} {'ours us':>8} {'torch us':>9} {'ours GB/s':>9} {'%copy':>6} "
          f"{'torch %copy':>11} {'ours/torch':>10} {'rel err':>8}  verdict")
    for c in cases:
        if c["op"] == "error":
            print(f"{'ERROR':28} {c['error']}")
            continue
        ours, theirs = c["ours"]["median_s"], c["torch"]["median_s"]
        print(f"{c['op']:28} {c['shape']:18} {ours * 1e6:8.2f} {theirs * 1e6:9.2f} {c['bw'] / 1e9:9.0f} "
              f"{c['bw'] / copy_bw:6.1%} {c['torch_bw'] / copy_bw:11.1%} {ours / theirs:10.3f} "
              f"{c['check']['out_rel_err']:8.1e}  {c['verdict']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
