"""Decode o_proj on one GPU: every GEMV variant against cuBLAS, cuBLASLt (nvmath) and the read floor.

Run from the repository root on a CUDA machine with CuPy (nvmath-python optional)::

    PYTHONPATH=. python3 bench/gemv_sweep.py [OUT_DIR]      # JSON to OUT_DIR/gemv_sweep.json

Each variant is first checked against an fp32 torch result on fresh random data, then timed
with solbench's own cold timer (CudaColdTimer: spin, 2 x L2 zeroed, events around one call;
``flush=clean`` also reads the buffer back), two input sets rotated, 3 warm-up calls, the
median of SAMPLES samples. The read floor streams the same number of weight bytes through
solbench's byte-floor kernel (solbench/kernels/floor.cu, ``move_floor``, with nothing to write)
under the same timer.
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from solbench.device.timer import CudaColdTimer
from solbench.impls import attn
from solbench.kernels import gemv_plan, load, ops

SAMPLES = 60
HIDDEN = 4096
TOKENS = (1, 16, 64)
PREFILL = (2048, 16384)
STREAM_PLANS = tuple((int(a), int(b), int(c)) for a, b, c in (p.split(":") for p in os.environ.get(
    "PLANS", "32:1:0,32:1:4,64:1:0,64:2:0,64:2:3,128:4:0,128:4:2,128:2:0,32:2:0").split(",")))
FP8_PLANS = tuple((int(a), int(b), int(c)) for a, b, c in (p.split(":") for p in os.environ.get(
    "FP8_PLANS", "32:1:0,64:2:0,128:4:0,64:1:0,128:2:0").split(",")))
ROWS: list[dict] = []


def _time(name: str, launches: list[Callable[[], object]], clean: bool = False) -> float:
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    timer = CudaColdTimer(torch, l2, clean=clean)
    timer.prepare(launches)
    for i in range(3):
        timer.sample(i)
    samples = [timer.sample(i) for i in range(SAMPLES)]
    med = statistics.median(samples) * 1e6
    ROWS.append({"name": name, "flush": "clean" if clean else "write", "median_us": med,
                 "samples_us": [s * 1e6 for s in samples]})
    print(f"  {name:58s} {'clean' if clean else 'write':5s} {med:8.2f} us", flush=True)
    return med


def _inputs(tokens: int, dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(tokens, HIDDEN, device="cuda", generator=g).to(dtype)
    w = (torch.randn(HIDDEN, HIDDEN, device="cuda", generator=g) * HIDDEN**-0.5).to(dtype)
    r = torch.randn(tokens, HIDDEN, device="cuda", generator=g).to(dtype)
    return x, w, r


def _fp8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scale = (w.float().abs().amax(dim=1) / 448.0).clamp_min(1e-12)
    return (w.float() / scale[:, None]).to(torch.float8_e4m3fn), scale.contiguous()


def _check(name: str, got: torch.Tensor, ref: torch.Tensor, tol: float) -> bool:
    err = ((got.float() - ref).norm() / ref.norm()).item()
    ok = bool(torch.isfinite(got).all().item()) and err < tol
    ROWS.append({"name": name, "check_rel_err": err, "ok": ok})
    if not ok:
        print(f"  {name}: WRONG rel err {err:.3e}", flush=True)
    return ok


def _guard(label: str, fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception as exc:  # one broken variant must not end the sweep
        ROWS.append({"name": label, "error": f"{type(exc).__name__}: {exc}"})
        print(f"  {label}: ERROR {type(exc).__name__}: {str(exc)[:400]}", flush=True)
        traceback.print_exc(limit=3)


def stream_variant(tokens: int, dtype: torch.dtype, sets, rows: int, cl: int, stages: int, w8: bool) -> None:
    k = HIDDEN
    fit = gemv_plan.fit(rows, cl, tokens, k, w8, gemv_plan._device_limits(0)[1])
    if fit is None:
        return
    plan = fit if stages == 0 else gemv_plan.Plan(rows, cl, stages)
    label = f"stream{'_fp8' if w8 else ''} T={tokens} rows={rows} cl={cl} st={plan.stages} {str(dtype)[6:]}"

    def call(x, w, s, r):
        out = torch.empty((x.shape[0], w.shape[0]), dtype=x.dtype, device="cuda")
        ops._stream(x, w, s, r, out, plan=plan)
        return out

    launches = []
    for x, w, r, w8t, sc in sets:
        args = (x, w8t, sc, r) if w8 else (x, w, None, r)
        ref = (x.float() @ (w8t.float() * sc[:, None]).t() + r.float()) if w8 else (x.float() @ w.float().t() + r.float())
        if not _check(label, call(*args), ref, 2e-2):
            return
        launches.append(functools.partial(call, *args))
    _time(label, launches)


def decode(dtype: torch.dtype) -> None:
    for tokens in TOKENS:
        sets = []
        for seed in (1, 2):
            x, w, r = _inputs(tokens, dtype, seed + 10 * tokens)
            w8t, sc = _fp8(w)
            sets.append((x, w, r, w8t, sc))
        print(f"tokens={tokens} {dtype}", flush=True)
        _guard("baseline", lambda: _time(f"baseline mm+add T={tokens}", [functools.partial(attn.o_proj_baseline, x, w, r) for x, w, r, *_ in sets]))
        _guard("addmm", lambda: _time(f"cublas addmm T={tokens}", [functools.partial(attn.o_proj_cublas_fused, x, w, r) for x, w, r, *_ in sets]))
        _guard("addmm clean", lambda: _time(f"cublas addmm T={tokens}", [functools.partial(attn.o_proj_cublas_fused, x, w, r) for x, w, r, *_ in sets], clean=True))
        _guard("nvmath", lambda: nvmath_variant(tokens, sets))
        _guard("registers", lambda: _time(f"register gemv (old) T={tokens}", [functools.partial(ops._gemv_residual_registers, x, w, r) for x, w, r, *_ in sets]))
        for rows, cl, st in STREAM_PLANS:
            _guard(f"stream {rows} {cl} {st}", lambda rows=rows, cl=cl, st=st: stream_variant(tokens, dtype, sets, rows, cl, st, False))
        _guard("default", lambda: _time(f"gemv_residual default T={tokens}", [functools.partial(ops.gemv_residual, x, w, r) for x, w, r, *_ in sets]))
        _guard("default clean", lambda: _time(f"gemv_residual default T={tokens}", [functools.partial(ops.gemv_residual, x, w, r) for x, w, r, *_ in sets], clean=True))
        for rows, cl, st in FP8_PLANS:
            _guard(f"fp8 {rows} {cl} {st}", lambda rows=rows, cl=cl, st=st: stream_variant(tokens, dtype, sets, rows, cl, st, True))
        _guard("fp8 default", lambda: _time(f"gemv_fp8 default T={tokens}", [functools.partial(ops.gemv_fp8_residual, x, w8t, sc, r) for x, w, r, w8t, sc in sets]))
        _guard("fp8 default clean", lambda: _time(f"gemv_fp8 default T={tokens}", [functools.partial(ops.gemv_fp8_residual, x, w8t, sc, r) for x, w, r, w8t, sc in sets], clean=True))


def nvmath_variant(tokens: int, sets) -> None:
    from solbench.impls.cublaslt import AddmmPlan

    plans = [AddmmPlan(x, w, r) for x, w, r, *_ in sets]
    a, b = plans[0](), plans[0]()
    assert a.data_ptr() != b.data_ptr(), "nvmath returned the same storage twice"
    x, w, r, *_ = sets[0]
    if _check(f"nvmath T={tokens}", a, x.float() @ w.float().t() + r.float(), 2e-2):
        _time(f"nvmath cublaslt T={tokens}", plans)
        host = []
        for _ in range(20):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            plans[0]()
            host.append((time.perf_counter() - t0) * 1e6)
        ROWS.append({"name": f"nvmath host us T={tokens}", "median_us": statistics.median(host)})
        print(f"  nvmath host time per call T={tokens}: {statistics.median(host):.1f} us", flush=True)


def prefill(dtype: torch.dtype) -> None:
    for tokens in PREFILL:
        sets = [_inputs(tokens, dtype, s) for s in (3, 4)]
        print(f"tokens={tokens} {dtype}", flush=True)
        _guard("baseline", lambda: _time(f"baseline mm+add T={tokens}", [functools.partial(attn.o_proj_baseline, *s) for s in sets]))
        _guard("addmm", lambda: _time(f"cublas addmm T={tokens}", [functools.partial(attn.o_proj_cublas_fused, *s) for s in sets]))
        _guard("nvmath", lambda: nvmath_variant(tokens, [(*s, None, None) for s in sets]))


def read_floor() -> None:
    import solbench.kernels

    kernel = load(Path(solbench.kernels.__file__).with_name("floor.cu"), "move_floor")
    sink = torch.zeros(132 * 8, dtype=torch.int32, device="cuda")
    for mb, label in ((HIDDEN * HIDDEN * 2, "bf16 weight"), (HIDDEN * HIDDEN, "fp8 weight")):
        bufs = [torch.randint(0, 1 << 30, (mb // 4,), dtype=torch.int32, device="cuda") for _ in range(2)]
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        for blocks_per_sm in (2, 4):
            launches = [functools.partial(kernel, grid=sms * blocks_per_sm, block=512,
                                          args=(b, np.int64(mb // 16), b, np.int64(0), sink)) for b in bufs]
            _guard("floor", lambda launches=launches, bps=blocks_per_sm: _time(
                f"read floor {mb / 1e6:.1f} MB ({label}) {bps} blk/SM", launches))
            _guard("floor", lambda launches=launches, bps=blocks_per_sm: _time(
                f"read floor {mb / 1e6:.1f} MB ({label}) {bps} blk/SM", launches, clean=True))


def main() -> None:
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "."))
    torch.backends.cuda.matmul.allow_tf32 = False
    print(torch.cuda.get_device_name(0), torch.__version__, flush=True)
    steps = os.environ.get("SWEEP", "floor,decode,prefill").split(",")
    if "floor" in steps:
        _guard("read floor", read_floor)
    if "decode" in steps:
        decode(torch.bfloat16)
    if "decode16" in steps:
        decode(torch.float16)
    if "prefill" in steps:
        prefill(torch.bfloat16)
        prefill(torch.float16)
    (out_dir / "gemv_sweep.json").write_text(json.dumps(ROWS, indent=1))
    print("\nsummary (median us, cold timer):")
    for row in ROWS:
        if "median_us" in row and "samples_us" in row:
            print(f"{row['name']:60s} {row['flush']:5s} {row['median_us']:8.2f}")
        elif "error" in row or row.get("ok") is False:
            print(f"{row['name']:60s} FAILED {row.get('error', row.get('check_rel_err'))}"[:200])


if __name__ == "__main__":
    main()
