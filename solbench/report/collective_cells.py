"""Table cells of multi-rank workloads: bandwidths of collectives, overlap efficiency, parts.

    algbw, busbw   "372 GB/s"  collective bytes / T and bus bytes / T (nccl-tests' columns), for a
                               workload with a collective op
    overlap        "0.81"      (T_compute + T_comm − T) / min(T_compute, T_comm), where the case
                               has ok parts (``part: compute`` and ``part: comm`` implementations)
    of floor       "0.93"      T_floor / T, where the case has an ok byte floor (``part: floor``)
    part_label     "part"      shown instead of SOL for a part (timed, never scored); "floor" for a floor
"""

from __future__ import annotations

from collections.abc import Sequence

from solbench.report.units import format_bytes
from solbench.results.model import CaseResult, ImplResult

__all__ = ["collective_cell", "collective_columns", "is_part", "part_label"]


def collective_columns(cases: Sequence[CaseResult]) -> tuple[str, ...]:
    """The extra columns a workload's table needs: algbw and busbw, and overlap."""
    cols: tuple[str, ...] = ()
    if any(c.cost.bus_bytes for c in cases):
        cols += ("algbw", "busbw")
    if any(r.score is not None and r.score.overlap is not None for c in cases for r in c.impls):
        cols += ("overlap",)
    if any(r.score is not None and r.score.floor_fraction is not None for c in cases for r in c.impls):
        cols += ("of floor",)
    return cols


def collective_cell(column: str, r: ImplResult) -> str:
    """The cell of one implementation in an extra column (empty where the figure does not exist)."""
    s = r.score
    if s is None:
        return ""
    if column == "algbw":
        return format_bytes(s.algbw, "/s")
    if column == "busbw":
        return format_bytes(s.busbw, "/s")
    if column == "overlap":
        return "" if s.overlap is None else f"{s.overlap:.2f}"
    if column == "of floor":
        return "" if s.floor_fraction is None else f"{s.floor_fraction:.2f}"
    raise ValueError(f"unknown column {column!r}")


def is_part(r: ImplResult) -> bool:
    """Whether a result is a part (a component timing of an overlapped implementation, or the byte floor)."""
    return bool(r.protocol.get("part")) and r.status == "ok"


def part_label(r: ImplResult) -> str:
    """What a part shows instead of SOL: "floor" for the byte floor, "part" for the others."""
    return "floor" if r.protocol.get("part") == "floor" else "part"
