"""Decode GEMV launches for Nsight Compute: one profiled call of each variant at 16 tokens.

    ncu --clock-control none --profile-from-start off --section SpeedOfLight \
        --section MemoryWorkloadAnalysis --section Occupancy python3 bench/gemv_ncu.py
"""

from __future__ import annotations

import torch

from solbench.impls import attn
from solbench.kernels import gemv_plan, ops

H = 4096


def main() -> None:
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(16, H, device="cuda", generator=g).bfloat16()
    w = (torch.randn(H, H, device="cuda", generator=g) * H**-0.5).bfloat16()
    r = torch.randn(16, H, device="cuda", generator=g).bfloat16()
    scale = (w.float().abs().amax(dim=1) / 448.0).clamp_min(1e-12)
    w8 = (w.float() / scale[:, None]).to(torch.float8_e4m3fn)
    limit = gemv_plan._device_limits(0)[1]

    def stream(rows, cl, fp8=False):
        plan = gemv_plan.fit(rows, cl, 16, H, fp8, limit)
        out = torch.empty(16, H, dtype=x.dtype, device="cuda")
        ops._stream(x, w8 if fp8 else w, scale if fp8 else None, r, out, plan=plan)

    calls = [lambda: attn.o_proj_cublas_fused(x, w, r), lambda: ops._gemv_residual_registers(x, w, r),
             lambda: stream(32, 1), lambda: stream(128, 4), lambda: stream(64, 2),
             lambda: stream(32, 1, True), lambda: stream(128, 4, True)]
    for c in calls:  # warm: compile, load, cuBLAS heuristics
        c()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for c in calls:
        c()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main()
