"""FP8-weight decode o_proj (issue 20 item 2): the streaming GEMV against the Triton tensor-core path.

Run from the repository root on a CUDA machine with CuPy and Triton::

    PYTHONPATH=. python3 bench/fp8w_sweep.py [OUT_DIR]      # JSON to OUT_DIR/fp8w_sweep.json

Inputs as in workloads/attn.yaml's o_proj_fp8w (hidden 4096, e4m3 weight of std 16, one fp32
scale per row, bf16 or fp16 x and residual). Each variant is first checked against an fp32 torch
result (relative L2 below 1e-2, max abs error printed), then timed with solbench's cold timer
(CudaColdTimer: spin or gate, 2 x L2 flushed and read back, events around one call), two input
sets rotated, 3 warm-up calls, the median of 60 samples (bench/gemv_sweep.py's timing and guard).
The baseline is the workload's: the weight widened once to x's type, then cuBLAS mm and an add.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from bench.gemv_sweep import ROWS, _guard
from bench.gemv_sweep import _time as _time_flushed
from solbench.impls import attn
from solbench.kernels import ops, w8a16

HIDDEN = 4096
# SWEEP_TOKENS="17 32 64", SWEEP_CONFIGS="64,256,2,4,3 128,128,4,4,4" (block_n,block_k,split,warps,stages),
# SWEEP_DTYPES="bf16 fp16". In the thirtieth session (BENCHMARKS.md, issue 20) 912ad94 also timed each split
# shape with its tiles' last programs finishing (FINISHING_KERNEL=1, since reverted), and a tree with a
# w8a16.BF16_WIDEN knob ("bits": inline PTX; "via_fp16": through fp16, since the only way) timed both widenings.
TOKENS = tuple(int(t) for t in os.environ.get("SWEEP_TOKENS", "1 16 32 64").split())
# The shapes of the second and third sweeps (results/h200/issue20/session11/); the first also had
# (128,128,4,8,4), (64,128,2,4,4), (256,128,8,8,3), (32,256,1,4,4), (32,128,1,4,5), (128,128,8,4,4).
CONFIGS = tuple(w8a16.Config(*c) for c in (
    (128, 128, 4, 4, 4), (64, 128, 4, 4, 4), (64, 256, 2, 4, 3), (64, 256, 2, 4, 4), (64, 256, 2, 8, 3),
    (32, 256, 2, 4, 3), (64, 512, 2, 4, 2), (64, 128, 4, 8, 4), (128, 128, 4, 8, 3), (128, 64, 4, 4, 6),
    (128, 256, 4, 8, 3), (64, 256, 4, 4, 3), (128, 128, 2, 8, 4), (256, 64, 8, 8, 4), (64, 128, 8, 4, 4)))
if os.environ.get("SWEEP_CONFIGS"):
    CONFIGS = tuple(w8a16.Config(*(int(v) for v in c.split(","))) for c in os.environ["SWEEP_CONFIGS"].split())


def _time(name: str, launches: list[Callable[[], object]]) -> float:
    return _time_flushed(name, launches, clean=True)


def _inputs(tokens: int, dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(tokens, HIDDEN, device="cuda", generator=g).to(dtype)
    w = (torch.randn(HIDDEN, HIDDEN, device="cuda", generator=g) * 16.0).to(torch.float8_e4m3fn)
    mean = 0.5 * HIDDEN**-0.5 / 16
    s = (mean + mean * torch.randn(HIDDEN, device="cuda", generator=g)).abs().contiguous()
    r = torch.randn(tokens, HIDDEN, device="cuda", generator=g).to(dtype)
    return x, w, s, r


def _checked(name: str, call: Callable[..., torch.Tensor], sets: list[tuple[torch.Tensor, ...]]) -> list:
    launches = []
    for x, w, s, r in sets:
        ref = x.double() @ (w.double() * s.double()[:, None]).t() + r.double()
        got = call(x, w, s, r).double()
        rel = ((got - ref).norm() / ref.norm()).item()
        worst = (got - ref).abs().max().item()
        ROWS.append({"name": name, "rel_l2": rel, "max_abs": worst})
        if not (rel < 1e-2 and torch.isfinite(got).all().item()):
            print(f"  {name}: WRONG rel L2 {rel:.3e} max abs {worst:.3e}", flush=True)
            return []
        launches.append(functools.partial(call, x, w, s, r))
    print(f"  {name:48s} rel L2 {rel:.2e}, max abs {worst:.2e}", flush=True)
    return launches


def _triton(config: w8a16.Config) -> Callable[..., torch.Tensor]:
    def call(x, w, s, r):
        out = torch.empty_like(r)
        return w8a16.linear_residual(x, w, s, r, out, config)
    return call


def _stream(x, w, s, r):
    out = torch.empty_like(r)
    ops._stream(x, w, s, r, out)
    return out


def _baseline(x, w, s, r):
    return attn.o_proj_baseline(**attn.o_proj_fp8w_dequantized_setup(x, w, s, r))


def sweep(dtype: torch.dtype, configs: tuple[w8a16.Config, ...]) -> None:
    for tokens in TOKENS:
        one(tokens, dtype, configs)


def one(tokens: int, dtype: torch.dtype, configs: tuple[w8a16.Config, ...]) -> None:
    sets = [_inputs(tokens, dtype, seed + 10 * tokens) for seed in (1, 2)]
    tag = f"T={tokens} {str(dtype)[6:]}"
    print(tag, flush=True)
    widened = [attn.o_proj_fp8w_dequantized_setup(*inputs) for inputs in sets]
    _guard("baseline", lambda: _time(f"baseline (widened mm+add) {tag}",
                                     [functools.partial(attn.o_proj_baseline, **kw) for kw in widened]))
    _guard("stream", lambda: _time(f"stream gemv {tag}", _checked(f"stream {tag}", _stream, sets)))
    for c in configs:
        _guard(str(c), lambda c=c: _time(f"triton {c} {tag}", _checked(f"triton {c} {tag}", _triton(c), sets)))
    _guard("dispatch", lambda: _time(f"gemv_fp8_residual {tag}",
                                     _checked(f"gemv_fp8_residual {tag}", ops.gemv_fp8_residual, sets)))


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")
    print(torch.cuda.get_device_name(0), torch.__version__, flush=True)
    dtypes = os.environ.get("SWEEP_DTYPES", "bf16 fp16").split()
    for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        if name in dtypes:
            sweep(dtype, CONFIGS)
    out.mkdir(parents=True, exist_ok=True)
    (out / "fp8w_sweep.json").write_text(json.dumps(ROWS))
    print("\n| variant | median µs |\n|---|---|")
    for row in ROWS:
        if "median_us" in row:
            print(f"| {row['name']} | {row['median_us']:.2f} |")


if __name__ == "__main__":
    main()
