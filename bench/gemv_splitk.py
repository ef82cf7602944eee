"""Decode o_proj GEMV variants against cuBLAS addmm, cold L2, interleaved rounds.

Run on a GPU: PYTHONPATH=. python3 bench/gemv_splitk.py
Variants: split-K factor S (1 = single pass) x register budget (SB_GEMV_MIN_BLOCKS: blocks per SM).
Timing: solbench's cold timer (2 x L2 flushed, host queue pre-filled, CUDA events), median of the
measure loop (95% CI of the median within 1%, or 0.3 s), 3 interleaved rounds, median of rounds.
"""

from __future__ import annotations

import functools
import statistics

import torch

from solbench.device.timer import CudaColdTimer
from solbench.kernels import ops
from solbench.measure.criteria import CIWidth
from solbench.measure.loop import measure

H = 4096
VARIANTS = [(1, ()), (2, ()), (4, ()), (2, ("-DSB_GEMV_MIN_BLOCKS=2",)), (4, ("-DSB_GEMV_MIN_BLOCKS=2",)),
            (8, ("-DSB_GEMV_MIN_BLOCKS=2",)), (4, ("-DSB_GEMV_MIN_BLOCKS=2", "-DSB_GEMV_DEPTH=2"))]


def main() -> None:
    timer = CudaColdTimer(torch, torch.cuda.get_device_properties(0).L2_cache_size)
    crit = CIWidth(0.01, 10, 2000, 0.3)
    print(f"{'T':>3} {'variant':<34} {'us':>8} {'addmm us':>9} {'ratio':>6} {'rel err':>8}")
    for tokens in (1, 16, 64):
        g = torch.Generator(device="cuda").manual_seed(tokens)
        x = torch.randn(tokens, H, device="cuda", generator=g).bfloat16()
        w = (torch.randn(H, H, device="cuda", generator=g) * H**-0.5).bfloat16()
        r = torch.randn(tokens, H, device="cuda", generator=g).bfloat16()
        ref = x.double() @ w.double().t() + r.double()
        for split, opts in VARIANTS:
            out = ops._gemv_residual(x, w, r, opts, ksplit=split)
            err = float((out.double() - ref).norm() / ref.norm())
            ours = functools.partial(ops._gemv_residual, x, w, r, opts, ksplit=split)
            cublas = functools.partial(torch.addmm, r, x, w.t())
            mine, theirs = [], []
            for _ in range(3):
                mine.append(measure(timer, [ours], crit).median)
                theirs.append(measure(timer, [cublas], crit).median)
            m, t = statistics.median(mine), statistics.median(theirs)
            name = f"S={split} " + " ".join(o.removeprefix("-DSB_GEMV_") for o in opts)
            print(f"{tokens:>3} {name:<34} {m * 1e6:8.2f} {t * 1e6:9.2f} {m / t:6.2f} {err:8.1e}")


if __name__ == "__main__":
    main()
