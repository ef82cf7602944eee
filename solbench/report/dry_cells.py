"""A dry run's table (nothing timed): each case's FLOPs, bytes, intensity, T_SOL and bound, the same
cells in the console, Markdown and HTML reports."""

from __future__ import annotations

from solbench.report import flags
from solbench.report.units import format_bytes, format_flops, format_number
from solbench.results.model import CaseResult

__all__ = ["ALIGN", "COLUMNS", "cells"]

COLUMNS = ("case", "tensor FLOP", "vector FLOP", "fused bytes", "unfused bytes", "FLOP/B", "T_SOL", "bound")
ALIGN = "lrrrrrrl"  # case and bound left, numbers right


def cells(c: CaseResult) -> list[str]:
    """One case's row, as text."""
    return [" ".join(f"{k}={v}" for k, v in c.params.items()) + f" {c.dtype}",
            format_flops(c.cost.tensor_flops), format_flops(c.cost.vector_flops), format_bytes(c.cost.fused_bytes),
            format_bytes(c.cost.unfused_bytes), format_number(c.intensity), flags.t_sol(c), c.bound]
