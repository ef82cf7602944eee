"""Roofline speed of light and the scores derived from it. Pure.

    T_SOL = max(tensor FLOPs / tensor peak[dtype],
                vector FLOPs / vector peak[dtype],
                fused bytes / memory bandwidth,                      (Williams et al., 2009)
                bus bytes / link bandwidth)                          collectives (below)
    SOL   = T_SOL / T          1.0 is the speed of light
    MFU   = tensor FLOPs / (T x tensor peak)
    MBU   = fused bytes / (T x bandwidth)
    S     = 1 / (1 + (T - T_SOL) / (T_baseline - T_SOL))           (SOL-ExecBench, 2026)

Collectives (nccl-tests' convention, doc/PERFORMANCE.md): algbw = S / T and busbw = bus bytes / T,
where bus bytes = S x 2(n-1)/n for an all-reduce over n ranks. busbw is what one GPU's link carries in
one direction, so it is compared with the per-GPU, per-direction link bandwidth (H200 SXM NVLink:
900 GB/s bidirectional = 450 GB/s per direction); T_SOL's link term is bus bytes / that bandwidth,
and SOL = T_SOL / T is then busbw / link bandwidth. With no link bandwidth known, the link term is
left out (``link_known`` False): T_SOL is then a looser lower bound.

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
    t_link: float = 0.0  # bus bytes / link bandwidth (0 without collectives)
    link_known: bool = True  # False: the case has bus bytes but the spec no link bandwidth


def speed_of_light(cost: Cost, peaks: Peaks) -> SpeedOfLight:
    """T_SOL = max of the three roofline terms."""
    tensor_peak = peaks.tensor_flops if peaks.tensor_flops else peaks.vector_flops
    t_tensor = cost.tensor_flops / tensor_peak
    t_vector = cost.vector_flops / peaks.vector_flops
    t_memory = cost.fused_bytes / peaks.bandwidth
    link_known = not cost.bus_bytes or peaks.link_bandwidth is not None
    t_link = cost.bus_bytes / peaks.link_bandwidth if cost.bus_bytes and peaks.link_bandwidth else 0.0
    terms: dict[Bound, float] = {"link": t_link} if t_link else {}  # first: a tie names the link
    terms.update({"compute": t_tensor, "vector": t_vector, "memory": t_memory})
    bound = max(terms, key=lambda k: terms[k])
    intensity = cost.flops / cost.fused_bytes if cost.fused_bytes else float("inf")
    return SpeedOfLight(terms[bound], bound, t_tensor, t_vector, t_memory, intensity, t_link, link_known)


def s_score(t: float, t_sol: float, t_baseline: float) -> float:
    """SOL-ExecBench score; 0.5 at the baseline's time, 1.0 at T_SOL. Never above 1. Where the
    baseline is at or below T_SOL (possible only against measured peaks, as on the CPU) the formula
    has no scale: 1 at or below T_SOL, else 0, as SOL-ExecBench's ``sol_score.py`` decides it."""
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
        algbw=cost.collective_bytes / t if cost.collective_bytes else None,
        busbw=cost.bus_bytes / t if cost.bus_bytes else None,
        t_sol=sol.t_sol,
        bound=sol.bound,
        fused_bytes=cost.fused_bytes,
    )


def overlap_efficiency(t: float, t_compute: float, t_comm: float) -> float:
    """(T_compute + T_comm - T) / min(T_compute, T_comm): 0 when nothing overlaps (T is the sum),
    1 when the shorter part is hidden entirely (T is the longer part); negative when T is worse
    than running the parts one after the other."""
    if min(t_compute, t_comm) <= 0:
        raise ValueError(f"part times must be positive, got {t_compute} and {t_comm}")
    return (t_compute + t_comm - t) / min(t_compute, t_comm)


def is_below_sol(t: float, t_sol: float) -> bool:
    """A time below T_SOL is physically impossible against true peaks: the result is INVALID."""
    return t < t_sol
