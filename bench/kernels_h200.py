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
DTYPE = torch.bfloat16


class ColdTimer:
    """CUDA events around one call, L2 flushed and a spin kernel ahead of the start event.

    ``clean=False`` (the protocol): zero_ a 256 MB buffer, which leaves up to an L2's worth
    of dirty lines that the timed call must write back when it evicts them. ``clean=True``
    (a second view, reported beside it): also read another 256 MB buffer, so L2 holds
    clean lines and the window carries no write-back of the flush.
    """

    def __init__(self) -> None:
        self.flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
        self.clean_src = torch.ones(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)
        start.record()
        torch.cuda._sleep(1_000_000)
        end.record()
        torch.cuda.synchronize()
        self.cycles_per_us = 1_000_000 / (start.elapsed_time(end) * 1e3)
        self.spin_cycles = int(SPIN_US * self.cycles_per_us)

    def times(self, fn, samples: int = SAMPLES, clean: bool = False) -> list[float]:
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
                if clean:
                    self.clean_src.max()
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


def measure(timer: ColdTimer, ours, theirs, extra: dict | None = None) -> dict:
    """Cold timings of ours and torch's, under the protocol flush and the clean one."""
    out = {"ours": summary(timer.times(ours)), "torch": summary(timer.times(theirs)),
           "ours_clean": summary(timer.times(ours, clean=True)),
           "torch_clean": summary(timer.times(theirs, clean=True))}
    for name, fn in (extra or {}).items():
        out[name] = summary(timer.times(fn))
    return out


NO_EF = ("-DSB_NO_EVICT_FIRST",)


def bench_layernorm(timer: ColdTimer, hidden: int, options: tuple[str, ...] = ()) -> dict:
    g = torch.Generator(device="cuda").manual_seed(hidden)
    x = torch.randn(ROWS, hidden, device="cuda", generator=g).to(DTYPE)
    res = torch.randn(ROWS, hidden, device="cuda", generator=g).to(DTYPE)
    w = (1 + 0.2 * torch.randn(hidden, device="cuda", generator=g)).to(DTYPE)
    b = (0.2 * torch.randn(hidden, device="cuda", generator=g)).to(DTYPE)
    out, summed = ops._residual_layernorm(x, res, w, b, 1e-5, options)

    def torch_impl():
        s = x + res
        return F.layer_norm(s, (hidden,), w, b, 1e-5), s

    ref = F.layer_norm(summed.double(), (hidden,), w.double(), b.double(), 1e-5)
    check = {"out_rel_err": rel_err(out, ref), "summed_rel_err": rel_err(summed, x.double() + res.double()),
             "vs_torch_rel_err": rel_err(out, torch_impl()[0])}
    op = "residual_layernorm" + ("[no evict_first]" if options else "")
    src = torch.empty(2 * ROWS * hidden, dtype=DTYPE, device="cuda")
    dst = torch.empty_like(src)
    extra = None if options else {"same_bytes_copy": lambda: dst.copy_(src)}
    return {"op": op, "shape": f"{ROWS}x{hidden}", "bytes": nbytes(x, res, w, b, out, summed), "check": check,
            "torch_name": "x + r; F.layer_norm",
            **measure(timer, lambda: ops._residual_layernorm(x, res, w, b, 1e-5, options), torch_impl, extra),
            "target": None if options else {"kind": "copy_fraction", "value": 0.85}}


def bench_gelu(timer: ColdTimer, hidden: int, mode: int = 0, options: tuple[str, ...] = ()) -> dict:
    g = torch.Generator(device="cuda").manual_seed(100 + hidden)
    x = (3 * torch.randn(ROWS, hidden, device="cuda", generator=g)).to(DTYPE)
    b = torch.randn(hidden, device="cuda", generator=g).to(DTYPE)
    out = ops._bias_gelu(x, b, mode, options)
    ref = F.gelu((x + b).double())
    check = {"out_rel_err": rel_err(out, ref), "vs_torch_rel_err": rel_err(out, F.gelu(x + b))}
    op = "bias_gelu" + ("[libdevice erff]" if mode == 2 else "") + ("[no evict_first]" if options else "")
    y = torch.empty_like(x)
    extra = {"same_bytes_copy": lambda: y.copy_(x)} if mode == 0 and not options else None
    return {"op": op, "shape": f"{ROWS}x{hidden}", "bytes": nbytes(x, b, out), "check": check,
            "torch_name": "F.gelu(x + b)",
            **measure(timer, lambda: ops._bias_gelu(x, b, mode, options), lambda: F.gelu(x + b), extra),
            "target": {"kind": "copy_fraction", "value": 0.85} if mode == 0 and not options else None}


def bench_gemv(timer: ColdTimer, tokens: int, options: tuple[str, ...] = ()) -> dict:
    g = torch.Generator(device="cuda").manual_seed(200 + tokens)
    x = torch.randn(tokens, GEMV_DIM, device="cuda", generator=g).to(DTYPE)
    w = (torch.randn(GEMV_DIM, GEMV_DIM, device="cuda", generator=g) / GEMV_DIM**0.5).to(DTYPE)
    res = torch.randn(tokens, GEMV_DIM, device="cuda", generator=g).to(DTYPE)
    out = ops._gemv_residual_registers(x, w, res, options)
    ref = x.double() @ w.double().t() + res.double()
    theirs = torch.addmm(res, x, w.t())
    check = {"out_rel_err": rel_err(out, ref), "addmm_rel_err": rel_err(theirs, ref),
             "vs_torch_rel_err": rel_err(out, theirs)}
    name = f"gemv_residual_kernel<0, {-(-tokens // 8)}>"
    kernel = loader.get_kernel("gemv_residual.cu", name, options=options, name_expressions=(name,))
    op = "gemv_residual_registers" + (f"[{' '.join(o.removeprefix('-D') for o in options)}]" if options else "")
    return {"op": op, "shape": f"T{tokens} N{GEMV_DIM} K{GEMV_DIM}", "bytes": nbytes(x, w, res, out),
            "check": check, "num_regs": kernel.num_regs, "torch_name": "torch.addmm",
            **measure(timer, lambda: ops._gemv_residual_registers(x, w, res, options), lambda: torch.addmm(res, x, w.t())),
            "target": {"kind": "torch_ratio", "value": 0.6} if tokens == 16 and not options else None}


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
    jobs += [lambda t=t: bench_gemv(timer, t) for t in GEMV_TOKENS]
    # variants: what the L2 evict-first hint and the erfc fit are worth
    jobs += [lambda: bench_layernorm(timer, 768, NO_EF), lambda: bench_gelu(timer, 4096, options=NO_EF),
             lambda: bench_gelu(timer, 4096, mode=2), lambda: bench_gemv(timer, 16, NO_EF),
             lambda: bench_gemv(timer, 16, ("-DSB_GEMV_NO_ROTATE",)),
             lambda: bench_gemv(timer, 16, ("-DSB_GEMV_GROUP=4",))]
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
    print("protocol: zero_ 256 MB flush (leaves dirty lines); 'clean': + read of another 256 MB buffer")
    print(f"{'op':34} {'shape':16} {'ours us':>8} {'torch us':>8} {'GB/s':>5} {'%copy':>6} {'t%copy':>6} "
          f"{'o/t':>5} {'clean o':>7} {'clean t':>7} {'relerr':>7}  verdict")
    for c in cases:
        if c["op"] == "error":
            print(f"{'ERROR':34} {c['error']}")
            continue
        ours, theirs = c["ours"]["median_s"], c["torch"]["median_s"]
        print(f"{c['op']:34} {c['shape']:16} {ours * 1e6:8.2f} {theirs * 1e6:8.2f} {c['bw'] / 1e9:5.0f} "
              f"{c['bw'] / copy_bw:6.1%} {c['torch_bw'] / copy_bw:6.1%} {ours / theirs:5.3f} "
              f"{c['ours_clean']['median_s'] * 1e6:7.2f} {c['torch_clean']['median_s'] * 1e6:7.2f} "
              f"{c['check']['out_rel_err']:7.1e}  {c['verdict']}")
    for c in cases:
        if "same_bytes_copy" in c:
            t = c["same_bytes_copy"]["median_s"]
            print(f"same-bytes torch copy for {c['op']} {c['shape']}: {t * 1e6:.2f} us = "
                  f"{c['bytes'] / t / copy_bw:.1%} of copy; ours = {t / c['ours']['median_s']:.1%} of it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
