"""Which kernels do the o_proj implementations launch? (torch.profiler, one call each, H200)

Run on a GPU: PYTHONPATH=. python3 bench/addmm_kernels.py
"""

from __future__ import annotations

import functools

import torch
from torch.profiler import ProfilerActivity, profile

from solbench.impls import attn


def kernels(fn) -> list[tuple[str, float]]:
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [(e.name[:90], e.device_time) for e in prof.events() if e.device_type.name == "CUDA"]


def main() -> None:
    h = 4096
    for tokens in (16, 2048, 16384):
        x = torch.randn(tokens, h, device="cuda", dtype=torch.bfloat16)
        w = (torch.randn(h, h, device="cuda") * h**-0.5).bfloat16()
        r = torch.randn(tokens, h, device="cuda", dtype=torch.bfloat16)
        for name, fn in (("baseline", attn.o_proj_baseline), ("addmm", attn.o_proj_cublas_fused)):
            print(f"tokens={tokens} {name}:")
            for k, us in kernels(functools.partial(fn, x, w, r)):
                print(f"    {us:9.1f} us  {k}")


if __name__ == "__main__":
    main()
