"""Checks of solbench.kernels.w8a16 run under Triton's interpreter on the CPU by
tests/unit/test_kernels_w8a16.py (TRITON_INTERPRET=1 must be set before Triton is imported). fp16
only: the interpreter gets bf16 dots wrong. Prints "ok" per case; any failure raises (exit
non-zero)."""

import torch

from solbench.kernels import w8a16

CASES = [
    (17, 200, 512, w8a16.Config(64, 128, 2, 4, 2)),  # ragged rows, two K parts and the finishing kernel
    (5, 130, 384, w8a16.Config(32, 64, 3, 4, 2)),    # three K parts, ragged tokens
    (3, 64, 64, w8a16.Config(32, 64, 2, 4, 2)),      # K too short to split: the tile kernel finishes
]

for tokens, n, k, config in CASES:
    g = torch.Generator().manual_seed(tokens * n + k)
    x = torch.randn(tokens, k, generator=g).half()
    w8 = (torch.randn(n, k, generator=g) * 16).to(torch.float8_e4m3fn)
    scale = torch.rand(n, generator=g) * 0.01 + 0.001
    res = torch.randn(tokens, n, generator=g).half()
    want = x.double() @ (w8.double() * scale.double()[:, None]).T + res.double()
    out = torch.full_like(res, float("nan"))  # every output must be written
    got = w8a16.linear_residual(x, w8, scale, res, out, config)
    assert got is out
    assert torch.isfinite(out).all(), "an output was not written"
    err = ((out.double() - want).norm() / want.norm()).item()
    assert err < 2e-3, f"relative L2 error {err:.2e}"  # fp16 output rounding (2^-11)
    print(tokens, n, k, config, w8a16.split_for(config, k), f"{err:.1e}", "ok", flush=True)
