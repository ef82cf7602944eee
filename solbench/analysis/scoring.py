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
          unseen inputs catch subtler cheats
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from solbench.analysis.sol import score, speed_of_light
from solbench.results.model import Cost, ImplResult, Peaks

CPU_COMPUTE_MARGIN = 10.0
CPU_MEMORY_MARGIN = 100.0


@dataclass(frozen=True)
class ImplPeaks:
    """The peaks one implementation is scored against, and the floor peaks for the INVALID rule."""

    scoring: Peaks
    floor: Peaks
    note: str = ""


def time_floor(cost: Cost, floor: Peaks, device_kind: str) -> float:
    """The least time any honest implementation can take (see module docstring)."""
    sol = speed_of_light(cost, floor)
    if device_kind == "cpu":
        return max(sol.t_tensor / CPU_COMPUTE_MARGIN, sol.t_vector / CPU_COMPUTE_MARGIN,
                   sol.t_memory / CPU_MEMORY_MARGIN)
    return sol.t_sol


def score_impls(cost: Cost, impls: Sequence[ImplResult], peaks: Mapping[str, ImplPeaks], baseline: str | None,
                device_kind: str) -> tuple[ImplResult, ...]:
    """Each ok result scored (or turned INVALID); others returned as they are.

    ``peaks`` maps an implementation name to its peaks (its own dtype's for e.g. an FP8 path).
    """
    base = next((r for r in impls if r.name == baseline and r.status == "ok"), None)
    t_base = base.timing.median if base is not None and base.timing is not None else None
    out = []
    for r in impls:
        if r.status != "ok" or r.timing is None:
            out.append(r)
            continue
        p = peaks[r.name]
        t = r.timing.median
        floor = time_floor(cost, p.floor, device_kind)
        if t < floor:
            out.append(replace(r, status="invalid", score=None, message=(
                f"median {t:.3e} s is below the least possible time {floor:.3e} s "
                f"({'sanity floor' if device_kind == 'cpu' else 'T_SOL at peak'}): the timing, "
                "the cost model or the implementation is wrong")))
            continue
        sol = speed_of_light(cost, p.scoring)
        out.append(replace(r, message=p.note or r.message, score=score(t, cost, p.scoring, sol, t_base)))
    return tuple(out)
