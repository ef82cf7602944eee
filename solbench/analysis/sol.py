"""Roofline speed of light and the scores derived from it. Pure.

    T_SOL = max(tensor FLOPs / tensor peak[dtype],
                vector FLOPs / vector peak[dtype],
                fused bytes / memory bandwidth)                      (Williams et al., 2009)
    SOL   = T_SOL / T          1.0 is the speed of light
    MFU   = tensor FLOPs / (T x tensor peak)
    MBU   = fused bytes / (T x bandwidth)
    S     = 1 / (1 + (T - T_SOL) / (T_baseline - T_SOL))           (SOL-ExecBench, 2026)

When a dtype has no tensor peak (e.g. float32 matmuls on CUDA cores), the tensor FLOPs are
scored against the vector peak, which the caller's Peaks already reflects.
"""

from __future__ import annotations

from dataclasses import dataclass

from solbench.results.model import Bound, Cost, Peaks, Score


@dataclass(frozen=True)
class SpeedOfLight:
    """T_SOL of one case and which ceiling sets it."""

    t_sol: float
    bound: Bound
    t_tensor: float
    t_vector: float
    t_memory: float
    intensity: float  # FLOP per fused byte


def speed_of_light(cost: Cost, peaks: Peaks) -> SpeedOfLight:
    """T_SOL = max of the three roofline terms."""
    tensor_peak = peaks.tensor_flops if peaks.tensor_flops else peaks.vector_flops
    t_tensor = cost.tensor_flops / tensor_peak
    t_vector = cost.vector_flops / peaks.vector_flops
    t_memory = cost.fused_bytes / peaks.bandwidth
    terms: dict[Bound, float] = {"compute": t_tensor, "vector": t_vector, "memory": t_memory}
    bound = max(terms, key=lambda k: terms[k])
    intensity = cost.flops / cost.fused_bytes if cost.fused_bytes else float("inf")
    return SpeedOfLight(terms[bound], bound, t_tensor, t_vector, t_memory, intensity)


def s_score(t: float, t_sol: float, t_baseline: float) -> float:
    """SOL-ExecBench score; 0.5 at the baseline's time, 1.0 at T_SOL. Never above 1."""
    if t <= t_sol:
        return 1.0
    if t_baseline <= t_sol:
        return 0.0
    return 1.0 / (1.0 + (t - t_sol) / (t_baseline - t_sol))


def score(t: float, cost: Cost, peaks: Peaks, sol: SpeedOfLight,
          t_baseline: float | None) -> Score:
    """Every figure of one implementation measured at median time ``t`` seconds."""
    if t <= 0:
        raise ValueError(f"time must be positive, got {t}")
    tensor_peak = peaks.tensor_flops if peaks.tensor_flops else peaks.vector_flops
    return Score(
        sol=sol.t_sol / t,
        mfu=cost.tensor_flops / (t * tensor_peak) if cost.tensor_flops else None,
        mbu=cost.fused_bytes / (t * peaks.bandwidth),
        achieved_flops=cost.flops / t,
        achieved_bandwidth=cost.fused_bytes / t,
        speedup=t_baseline / t if t_baseline else None,
        s_score=s_score(t, sol.t_sol, t_baseline) if t_baseline else None,
    )


def is_below_sol(t: float, t_sol: float) -> bool:
    """A time below T_SOL is physically impossible against true peaks: the result is INVALID."""
    return t < t_sol
