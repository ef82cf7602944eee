"""Score one case: T_SOL, the INVALID rule, and every figure per implementation. Pure.

The INVALID rule: a median below the *floor* is physically impossible, so the timing (or the
implementation) is wrong, and the result is reported INVALID, never scored above 1::

    GPU:  floor = T_SOL against the highest peaks known for the device, unit by unit (the
          datasheet's, or measured ceilings where they are higher); this holds whatever peaks a
          run is scored against, measured ceilings included
    CPU:  peaks are measured on the host (and read low when other processes load it while they
          are measured), and caches beat the measured DRAM copy rate, so the floor is only a
          sanity check: max(t_compute / 10, t_vector / 10, t_memory / 100). It catches a time no
          honest code can reach (a result returned without touching the data); the checks on
          unseen inputs catch subtler cheats. It takes no rate below CPU_FLOOR_FLOPS and
          CPU_LEAST_BANDWIDTH: a measurement starved by other processes (a loaded CI machine read
          a copy rate 50 times too low) would otherwise raise the floor above honest times. The
          compute rate is one core's (an honest float32 matmul ran 112 GFLOP/s on one thread of a
          CI host whose starved measurement read 8.9: floored at 10 GFLOP/s, margin 10, it was
          INVALID). On a host truly that slow the floor is only looser
    Collectives: the link term (bus bytes / link bandwidth) is left out of the floor. Bus bytes
    follow nccl-tests' ring convention; NCCL's NVLS algorithm reduces inside an NVSwitch and moves
    fewer bytes over each GPU's link (8 H200s reach 475 GB/s busbw over a 450 GB/s link,
    nccl-tests issue #272), so the link term is a speed of light to score against, not a floor.

Traced costs (``cost.source == "traced"``: the reference run on the meta device) count what the
reference executes: dense triangular matmuls, unmasked causal attention, untouched pages of a KV
cache. They can exceed the least work an implementation must do, so no floor is applied to them;
reports mark their cases.

Parts (``protocol["part"]`` is "compute" or "comm": components of an overlapped implementation,
see :mod:`solbench.execute.group`) are neither scored nor floored: they do only part of the work.
When both parts are ok, every scored implementation of the case gets the overlap efficiency
(T_compute + T_comm - T) / min(T_compute, T_comm) (:func:`solbench.analysis.sol.overlap_efficiency`).
A byte floor (``part: floor``, :mod:`solbench.impls.floor`) is not scored either; where one is ok,
every scored implementation gets ``floor_fraction = T_floor / T`` (the fastest floor, where several).

An implementation that reads an input in another form made once in set-up (a weight quantized to FP8)
declares the narrower dtype it reads it in (``input_dtypes``) and its dtype peak (``peak_dtype``): its
T_SOL, SOL, MBU, S, floor fraction (T_floor scaled by its bytes over the case's) and INVALID floor are
its own, recorded in its ``Score`` (``t_sol``, ``bound``, ``fused_bytes``). Priced at the case's bf16
weight (33.6 MB at o_proj's one token: 7.0 us at the H200's 4.8 TB/s), an FP8 GEMV reading 16.8 MB as
fast as the byte floor did under CUPTI (6.4 us) would read INVALID, and slower ones SOL twice too high.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from solbench.analysis.sol import overlap_efficiency, score, speed_of_light
from solbench.results.model import Cost, ImplResult, Peaks

CPU_COMPUTE_MARGIN = 10.0
CPU_MEMORY_MARGIN = 100.0
CPU_LEAST_FLOPS = 1e10  # FLOP/s: a float32 torch matmul on any host solbench runs on does more, unstarved
CPU_LEAST_BANDWIDTH = 1e9  # bytes/s of a large copy, likewise
# FLOP/s the INVALID floor assumes at least: one core's float32 FMA rate (AVX-512, 2 FMA units at
# 3.5 GHz: 224 GFLOP/s), so that with CPU_COMPUTE_MARGIN a starved measurement leaves the floor at
# 1 TFLOP/s or faster, above what an honest matmul on a few cores does
CPU_FLOOR_FLOPS = 1e11


@dataclass(frozen=True)
class ImplPeaks:
    """The peaks one implementation is scored against, and the floor peaks for the INVALID rule."""

    scoring: Peaks
    floor: Peaks
    note: str = ""
    cost: Cost | None = None  # the implementation's own cost (its ``input_dtypes``), where it differs from the case's
    dtype: str = ""  # the dtype of ``scoring``, where not the case's (``peak_dtype``)


def time_floor(cost: Cost, floor: Peaks, device_kind: str) -> float:
    """The least time any honest implementation can take (see module docstring)."""
    no_link = replace(cost, bus_bytes=0.0)  # no link term: see the module docstring
    if device_kind != "cpu":
        return speed_of_light(no_link, floor).t_sol
    tensor = floor.tensor_flops  # a starved measurement must not raise the floor (see the module docstring)
    unstarved = replace(floor, tensor_flops=None if tensor is None else max(tensor, CPU_FLOOR_FLOPS),
                        vector_flops=max(floor.vector_flops, CPU_FLOOR_FLOPS),
                        bandwidth=max(floor.bandwidth, CPU_LEAST_BANDWIDTH))
    sol = speed_of_light(no_link, unstarved)
    return max(sol.t_tensor / CPU_COMPUTE_MARGIN, sol.t_vector / CPU_COMPUTE_MARGIN,
               sol.t_memory / CPU_MEMORY_MARGIN)


def score_impls(cost: Cost, impls: Sequence[ImplResult], peaks: Mapping[str, ImplPeaks], baseline: str | None,
                device_kind: str) -> tuple[ImplResult, ...]:
    """Each ok result scored (or turned INVALID); others returned as they are.

    ``peaks`` maps an implementation name to its peaks (its own dtype's for e.g. an FP8 path).
    """
    def floor_of(r: ImplResult) -> float:
        own = peaks[r.name].cost or cost
        return time_floor(own, peaks[r.name].floor, device_kind) if own.source == "analytic" else 0.0

    base = next((r for r in impls if r.name == baseline and r.status == "ok"), None)
    t_base = base.timing.median if base is not None and base.timing is not None else None
    if base is not None and t_base is not None and not base.protocol.get("part") and t_base < floor_of(base):
        t_base = None  # the baseline is INVALID (below): no speedup or S against it, as when it failed
    parts = part_times(impls)
    t_floor = floor_time(impls)
    out = []
    for r in impls:
        if r.status != "ok" or r.timing is None or r.protocol.get("part"):
            out.append(r)
            continue
        p = peaks[r.name]
        own = p.cost or cost
        t = r.timing.median
        floor = floor_of(r)
        if t < floor:
            out.append(replace(r, status="invalid", score=None, message=(
                f"median {t:.3e} s is below the least possible time {floor:.3e} s "
                f"({'sanity floor' if device_kind == 'cpu' else 'T_SOL at peak'}): the timing, "
                "the cost model or the implementation is wrong")))
            continue
        sol = speed_of_light(own, p.scoring)
        scored = score(t, own, p.scoring, sol, t_base)
        if parts is not None:
            scored = replace(scored, overlap=overlap_efficiency(t, *parts))
        if t_floor is not None and t > 0:  # the floor moved the case's bytes: scaled to this implementation's
            scale = own.fused_bytes / cost.fused_bytes if cost.fused_bytes else 1.0
            scored = replace(scored, floor_fraction=t_floor * scale / t)
        if p.dtype:  # another dtype's ceilings: where each came from, for the run's peaks line
            used = ("tensor", "vector") if p.scoring.tensor_flops else ("vector",)
            scored = replace(scored, peak_sources={f"{p.dtype} {c}": p.scoring.source_of(c) for c in used})
        note = p.note or r.message
        if not sol.link_known:
            note = "; ".join(filter(None, [note, "T_SOL has no link term: the spec has no interconnect bandwidth"]))
        out.append(replace(r, message=note, score=scored))
    return tuple(out)


def floor_time(impls: Sequence[ImplResult]) -> float | None:
    """T_floor: the fastest ok byte floor of a case (``part: floor``), its median scaled to the case's
    bytes (``protocol["floor_scale"]``, :func:`solbench.impls.floor.scale`), or None where none is."""
    found = [r.timing.median * float(r.protocol.get("floor_scale", 1.0)) for r in impls
             if r.status == "ok" and r.timing is not None and r.protocol.get("part") == "floor"]
    return min(found) if found else None


def part_times(impls: Sequence[ImplResult]) -> tuple[float, float] | None:
    """(T_compute, T_comm): the medians of the ok parts of a case, or None unless both are there."""
    found = {str(r.protocol.get("part")): r.timing.median for r in impls
             if r.status == "ok" and r.timing is not None and r.protocol.get("part")}
    if "compute" not in found or "comm" not in found:
        return None
    return found["compute"], found["comm"]
