"""Tile and pipeline choice for gemv_stream.cu, and the shared memory each choice takes.

A plan is (rows per CTA, CTAs per cluster splitting K, pipeline stages). The preference
order below is what measured fastest on an H200 (BENCHMARKS.md, ``bench/gemv_sweep.py``);
a choice is taken only if its stages fit in the GPU's shared memory, the GPU supports
clusters (compute capability 9.0+) when it uses them, and K has a stage for every CTA. A
preference may also ask for room for several CTAs on one SM: its stages are then cut to what
that many CTAs' shared memory leaves each.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_TOKENS", "Plan", "choose", "chunk_tokens", "shared_bytes", "stage_bytes"]

MAX_TOKENS = 64      # token slots of one launch (8 mma n-tiles)
ROW_BYTES = 512      # bytes of each weight row per stage
MAX_STAGES = 6
RESERVED_SMEM = 1024  # shared memory the driver keeps per CTA (compute capability 8.0 and 9.0)
# (rows, cluster[, CTAs per SM]) in order of preference; the first that fits is taken. H200, N = K =
# 4096, cold L2 (results/h200/gemv_sweep-*.json): 32-row CTAs were fastest up to 16 tokens (16.6 us
# at 16 tokens; 64 rows in clusters of 2: 16.5-16.8; 128 rows in clusters of 4: 23 us); at 64
# tokens, where every CTA re-reads x from L2, clusters of 2 x 64 rows were (24.1 us against 28.7).
PREFERENCE_FEW = ((32, 1), (64, 2))
# An FP8 weight up to 16 tokens: 16-row CTAs (256 of them at N = 4096) with stages cut so that two
# fit on an SM. H200, bf16, cold timer (results/h200/issue20/session30/call3/): 16 tokens 13.57 us
# against 14.40 for 32 rows and 6 stages (16 rows with 6 stages, one CTA an SM: 16.99); 1 token
# 11.76 against 11.98; o_proj_fp8w under graph replay, 1 token: 10.82-10.85 us against 10.98-11.06.
PREFERENCE_FEW_W8 = ((16, 1, 2), (32, 1), (64, 2))
PREFERENCE_MANY_SM90 = ((64, 2), (32, 1))
FEW_TOKENS = 16


@dataclass(frozen=True)
class Plan:
    """One launch shape of gemv_stream.cu."""

    rows: int     # weight rows per CTA (a multiple of 16)
    cluster: int  # CTAs per thread-block cluster, splitting K (1: no cluster)
    stages: int   # shared-memory pipeline stages (>= 2)


def k_per_stage(w8: bool) -> int:
    """K elements of one stage: 512 bytes of a weight row."""
    return ROW_BYTES if w8 else ROW_BYTES // 2


def stage_bytes(rows: int, tokens: int, w8: bool) -> int:
    """Shared memory of one stage: the weight tile plus the matching slice of x."""
    return rows * ROW_BYTES + tokens * 2 * k_per_stage(w8)


def reduction_bytes(rows: int, tokens: int) -> int:
    """The cross-warp partial sums: [warps along k][token slots][rows + 4] floats."""
    warps_k = 8 // min(8, rows // 16)
    return warps_k * 8 * (-(-tokens // 8)) * (rows + 4) * 4


def shared_bytes(plan: Plan, tokens: int, w8: bool) -> int:
    """Dynamic shared memory of a launch: 128 bytes (zero row) + stages or reduction buffer."""
    return 128 + max(plan.stages * stage_bytes(plan.rows, tokens, w8), reduction_bytes(plan.rows, tokens))


def fit(rows: int, cluster: int, tokens: int, k: int, w8: bool, smem_limit: int, per_sm: int = 1,
        sm_smem: int | None = None) -> Plan | None:
    """The deepest pipeline of this tile that fits in ``smem_limit`` bytes, or None. With ``per_sm``
    above 1, also in the share of ``per_sm`` CTAs of an SM's shared memory (``sm_smem``; by default
    the per-block limit plus the driver's reserve, as on compute capability 8.0 and 9.0)."""
    if per_sm > 1:
        sm = sm_smem if sm_smem is not None else smem_limit + RESERVED_SMEM
        smem_limit = min(smem_limit, sm // per_sm - RESERVED_SMEM)
    kstages = -(-k // k_per_stage(w8))
    if kstages < cluster:
        return None
    per_cta = -(-kstages // cluster)
    stages = min(MAX_STAGES, (smem_limit - 128) // stage_bytes(rows, tokens, w8), per_cta + 1)
    if stages < 2:
        return None
    plan = Plan(rows, cluster, stages)
    return plan if shared_bytes(plan, tokens, w8) <= smem_limit else None


def choose(tokens: int, n: int, k: int, w8: bool, device: Any = None) -> Plan:
    """The preferred plan that fits this device, for a launch of ``tokens`` (<= 64) tokens."""
    cc, smem_limit, sm_smem = _device_limits(_index(device))
    return choose_for(tokens, n, k, w8, cc, smem_limit, sm_smem)


def choose_for(tokens: int, n: int, k: int, w8: bool, cc: tuple[int, int], smem_limit: int,
               sm_smem: int | None = None) -> Plan:
    """``choose`` for a given compute capability, per-block shared-memory limit and shared memory per
    SM (None: the limit plus the driver's reserve) (pure)."""
    _check_sizes(n, k)
    if not 1 <= tokens <= MAX_TOKENS:
        raise ValueError(f"gemv_stream: {tokens} tokens per launch (1 to {MAX_TOKENS})")
    order = PREFERENCE_MANY_SM90 if tokens > FEW_TOKENS else PREFERENCE_FEW_W8 if w8 else PREFERENCE_FEW
    for rows, cluster, *per_sm in (*order, (16, 1)):
        if cluster > 1 and cc < (9, 0):
            continue
        plan = fit(rows, cluster, tokens, k, w8, smem_limit, per_sm[0] if per_sm else 1, sm_smem)
        if plan is not None:
            return plan
    raise ValueError(f"gemv_stream: no tile fits {smem_limit} bytes of shared memory for {tokens} tokens")


def chunk_tokens(tokens: int, n: int, k: int, w8: bool, device: Any = None) -> int:
    """Tokens per launch: 64, or fewer where 64 tokens' stages do not fit shared memory."""
    cc, smem_limit, sm_smem = _device_limits(_index(device))
    return chunk_tokens_for(tokens, n, k, w8, cc, smem_limit, sm_smem)


def chunk_tokens_for(tokens: int, n: int, k: int, w8: bool, cc: tuple[int, int], smem_limit: int,
                     sm_smem: int | None = None) -> int:
    """``chunk_tokens`` for a given compute capability and shared-memory limits (pure)."""
    _check_sizes(n, k)
    chunk = MAX_TOKENS
    while chunk > 1:
        try:
            choose_for(min(chunk, tokens), n, k, w8, cc, smem_limit, sm_smem)
            return chunk
        except ValueError:
            chunk //= 2
    return 1


def _check_sizes(n: int, k: int) -> None:
    """A plan needs a weight row and a stage of K: an empty one is named, not taken for a shared-memory
    shortfall (no tile fits K=0)."""
    if k < 1:
        raise ValueError(f"gemv_stream: K={k} (the reduction length of x [T, K] and weight [N, K]) must be at least 1")
    if n < 1:
        raise ValueError(f"gemv_stream: N={n} (the rows of weight [N, K]) must be at least 1")


def _index(device: Any) -> int:
    import torch

    if device is None:
        return torch.cuda.current_device()
    index = torch.device(device).index
    return torch.cuda.current_device() if index is None else index


@functools.cache
def _device_limits(index: int) -> tuple[tuple[int, int], int, int]:
    """(compute capability, opt-in shared memory per block, shared memory per SM) of a CUDA device."""
    import torch

    from solbench.kernels.loader import import_cupy

    cupy = import_cupy()  # a DeviceError where CuPy is missing: the kernel's caller is skipped, not failed
    cc = tuple(torch.cuda.get_device_capability(index))
    attributes = cupy.cuda.Device(index).attributes
    optin = int(attributes["MaxSharedMemoryPerBlockOptin"])
    return (int(cc[0]), int(cc[1])), optin, int(attributes["MaxSharedMemoryPerMultiprocessor"])
