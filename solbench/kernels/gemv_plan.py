"""Tile and pipeline choice for gemv_stream.cu, and the shared memory each choice takes.

A plan is (rows per CTA, CTAs per cluster splitting K, pipeline stages). The preference
order below is what measured fastest on an H200 (BENCHMARKS.md, ``bench/gemv_sweep.py``);
a choice is taken only if its stages fit in the GPU's shared memory, the GPU supports
clusters (compute capability 9.0+) when it uses them, and K has a stage for every CTA.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_TOKENS", "Plan", "choose", "chunk_tokens", "shared_bytes", "stage_bytes"]

MAX_TOKENS = 64      # token slots of one launch (8 mma n-tiles)
ROW_BYTES = 512      # bytes of each weight row per stage
MAX_STAGES = 6
# (rows, cluster) in order of preference; the first that fits is taken. H200, N = K = 4096, cold
# L2 (results/h200/gemv_sweep-*.json): 32-row CTAs were fastest up to 16 tokens (16.6 us at 16
# tokens; 64 rows in clusters of 2: 16.5-16.8; 128 rows in clusters of 4: 23 us); at 64 tokens,
# where every CTA re-reads x from L2, clusters of 2 x 64 rows were (24.1 us against 28.7).
PREFERENCE_FEW = ((32, 1), (64, 2))
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


def fit(rows: int, cluster: int, tokens: int, k: int, w8: bool, smem_limit: int) -> Plan | None:
    """The deepest pipeline of this tile that fits in ``smem_limit`` bytes, or None."""
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
    cc, smem_limit = _device_limits(_index(device))
    return choose_for(tokens, n, k, w8, cc, smem_limit)


def choose_for(tokens: int, n: int, k: int, w8: bool, cc: tuple[int, int], smem_limit: int) -> Plan:
    """``choose`` for a given compute capability and shared-memory limit (pure)."""
    if not 1 <= tokens <= MAX_TOKENS:
        raise ValueError(f"gemv_stream: {tokens} tokens per launch (1 to {MAX_TOKENS})")
    order = PREFERENCE_MANY_SM90 if tokens > FEW_TOKENS else PREFERENCE_FEW
    for rows, cluster in (*order, (16, 1)):
        if cluster > 1 and cc < (9, 0):
            continue
        plan = fit(rows, cluster, tokens, k, w8, smem_limit)
        if plan is not None:
            return plan
    raise ValueError(f"gemv_stream: no tile fits {smem_limit} bytes of shared memory for {tokens} tokens")


def chunk_tokens(tokens: int, n: int, k: int, w8: bool, device: Any = None) -> int:
    """Tokens per launch: 64, or fewer where 64 tokens' stages do not fit shared memory."""
    cc, smem_limit = _device_limits(_index(device))
    return chunk_tokens_for(tokens, n, k, w8, cc, smem_limit)


def chunk_tokens_for(tokens: int, n: int, k: int, w8: bool, cc: tuple[int, int], smem_limit: int) -> int:
    """``chunk_tokens`` for a given compute capability and shared-memory limit (pure)."""
    chunk = MAX_TOKENS
    while chunk > 1:
        try:
            choose_for(min(chunk, tokens), n, k, w8, cc, smem_limit)
            return chunk
        except ValueError:
            chunk //= 2
    return 1


def _index(device: Any) -> int:
    import torch

    if device is None:
        return torch.cuda.current_device()
    index = torch.device(device).index
    return torch.cuda.current_device() if index is None else index


@functools.cache
def _device_limits(index: int) -> tuple[tuple[int, int], int]:
    """(compute capability, opt-in shared memory per block) of a CUDA device."""
    import cupy
    import torch

    cc = tuple(torch.cuda.get_device_capability(index))
    optin = int(cupy.cuda.Device(index).attributes["MaxSharedMemoryPerBlockOptin"])
    return (int(cc[0]), int(cc[1])), optin
