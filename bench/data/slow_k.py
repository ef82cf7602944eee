"""o_proj (torch.addmm) made slower inside its own GEMM, for the ``solbench ab`` experiments of issue 16
(bench/data/ab_k.yaml). Not a shipped workload.

bench/data/slow.py adds a spin kernel after the call: at 16 tokens the extra launch alone costs about
1.3 us of a 15 us call, so a "3%" slowdown there is really about 11%. Here the slowdown is extra
reduction depth in the same cuBLAS call: K grows by ``SLOWDOWN`` (rounded up to a multiple of 64), the
extra columns of x are zeros and those of the weight random, so the result is exact and the call reads
(decode) and multiplies (prefill) that much more, with no extra launch. :func:`padded_k` gives what is
really added: at K = 4096, 0.03 adds 128 (3.1%) and 0.10 adds 448 (10.9%).
``SLOWDOWN = 0.0`` is plain torch.addmm on the unpadded tensors (the baseline tree).
"""

from __future__ import annotations

from typing import Any

import torch

SLOWDOWN = 0.03
ALIGN = 64


def padded_k(k: int, slowdown: float = SLOWDOWN) -> int:
    """K with ``slowdown`` of it added, rounded up to a multiple of ``ALIGN`` (0: K unchanged)."""
    if slowdown <= 0:
        return k
    return k + -(-round(slowdown * k) // ALIGN) * ALIGN


def setup(x: torch.Tensor, w: torch.Tensor, residual: torch.Tensor) -> dict[str, Any]:
    """x and w widened along K once (untimed): zeros in x's new columns, random values in w's."""
    k = x.shape[1]
    kp = padded_k(k)
    if kp == k:
        return {"x": x, "w": w, "residual": residual}
    xp = torch.zeros(x.shape[0], kp, dtype=x.dtype, device=x.device)
    xp[:, :k] = x
    wp = torch.randn(w.shape[0], kp, dtype=w.dtype, device=w.device) * (k ** -0.5)
    wp[:, :k] = w
    return {"x": xp, "w": wp, "residual": residual}


def addmm_slow(x: torch.Tensor, w: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """torch.addmm: one cuBLAS call, over the padded K where setup padded it."""
    return torch.addmm(residual, x, w.t())
