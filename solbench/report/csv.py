"""Runs as CSV: one row per case x implementation, SI units (seconds, FLOP, bytes). Returns text.

``timer`` and ``launch`` say how a measured row was timed (empty where nothing was): the run's
``--timer`` (``cold``, ``graph``, ``cupti``, ``cpu``; a multi-GPU rank's own where it had to differ)
and how its calls were made (``graph``: a CUDA graph's replay; ``stream``; ``mixed``: replayed in
some rounds only; empty where the run recorded none, as on the CPU). They come after ``message``,
so the columns before them keep their places.

A collective's row has the figures its table shows (``report.collective_cells``), after ``launch``:
``algbw_bytes_per_s`` and ``busbw_bytes_per_s`` (collective bytes / T and bus bytes / T, nccl-tests'
algbw and busbw) and ``overlap`` ((T_compute + T_comm - T) / min(T_compute, T_comm), where the case
has its parts measured). They are empty on every other row.

``peaks_source`` says where the case's ceilings came from ("datasheet", "measured", "estimated"), or
"mixed" where they differ (``--peaks measured``: a ceiling ``solbench calibrate`` did not measure,
as fp8's tensor peak, stays the datasheet's); ``tensor_peak_source``, ``vector_peak_source`` and
``bandwidth_source``, after ``overlap``, say each one's.

Parameters get one ``param.<name>`` column each (the union over all rows, empty where a workload
lacks one), so that a spreadsheet can filter and pivot on them.

Floats are written to ``FLOAT_DIGITS`` (15) significant digits, not as Python's shortest round-trip
form: that form of a computed value carries the rounding of its last bit (``3.2045000000000004e-06``,
``0.7999999999999999``), which 15 digits drop, while every decimal of 15 digits or fewer (each time
measured, far fewer) and every integer count below 10^15 comes back exactly. A value differs from
the JSON's by less than one part in 10^15.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from solbench.results.model import CaseResult, ImplResult, RunResult

__all__ = ["COLUMNS", "run_csv"]

FLOAT_DIGITS = 15  # significant digits of a float cell: DBL_DIG, the most every double keeps (module docstring)

COLUMNS = ("run", "device", "workload", "case_id", "dtype", "impl", "status", "median_s", "ci_low_s",
           "ci_high_s", "n_samples", "stop_reason", "t_sol_s", "bound", "sol", "mfu", "mbu",
           "achieved_flops_per_s", "achieved_bytes_per_s", "speedup", "s_score", "floor_fraction", "tensor_flops",
           "vector_flops", "fused_bytes", "unfused_bytes", "intensity_flop_per_byte", "peaks_source",
           "message", "timer", "launch", "algbw_bytes_per_s", "busbw_bytes_per_s", "overlap", "tensor_peak_source",
           "vector_peak_source", "bandwidth_source")


def _device_name(run: RunResult, case: CaseResult) -> str:
    """The GPU (or CPU) that measured the case: its own in a run over several devices, where none (no
    device took it) is empty; else the run's."""
    if case.device is not None:
        return case.device.device_name
    return "" if run.protocol.devices > 1 else run.environment.device_name


def _row(run: RunResult, case: CaseResult, r: ImplResult | None) -> dict[str, Any]:
    """One implementation's row, or (``r`` None: a dry run's case, nothing measured) the case's costs alone."""
    t, s = (r.timing, r.score) if r is not None else (None, None)
    row: dict[str, Any] = {
        "run": run.created, "device": _device_name(run, case), "workload": case.workload,
        "case_id": case.case_id, "dtype": case.dtype, "impl": r.name if r else "", "status": r.status if r else "",
        "t_sol_s": case.t_sol, "bound": case.bound, "tensor_flops": case.cost.tensor_flops,
        "vector_flops": case.cost.vector_flops, "fused_bytes": case.cost.fused_bytes,
        "unfused_bytes": case.cost.unfused_bytes, "intensity_flop_per_byte": case.intensity,
        "peaks_source": case.peaks.source, "message": r.message if r else "",
        "tensor_peak_source": case.peaks.source_of("tensor"), "vector_peak_source": case.peaks.source_of("vector"),
        "bandwidth_source": case.peaks.source_of("bandwidth"),
    }
    if t is not None:
        row.update(median_s=t.median, ci_low_s=t.ci_low, ci_high_s=t.ci_high, n_samples=t.n,
                   stop_reason=t.stop_reason, timer=r.protocol.get("timer") or run.protocol.timer,
                   launch=r.protocol.get("launch") or run.protocol.launch)
    if s is not None:
        row.update(sol=s.sol, mfu=s.mfu, mbu=s.mbu, achieved_flops_per_s=s.achieved_flops,
                   achieved_bytes_per_s=s.achieved_bandwidth, speedup=s.speedup, s_score=s.s_score,
                   floor_fraction=s.floor_fraction, algbw_bytes_per_s=s.algbw, busbw_bytes_per_s=s.busbw,
                   overlap=s.overlap)
        if s.t_sol is not None:  # its own T_SOL, bound and bytes (``peak_dtype``, ``input_dtypes``); else the case's
            row.update(t_sol_s=s.t_sol, bound=s.bound or case.bound)
        if s.fused_bytes is not None:
            row.update(fused_bytes=s.fused_bytes)
    row.update({f"param.{k}": v for k, v in case.params.items()})
    return row


def run_csv(runs: Sequence[RunResult]) -> str:
    """Every case x implementation of the runs as CSV text (header first; empty cells for None); a case
    without implementation results (a dry run's) gets one row of its costs, T_SOL and bound."""
    rows = [_row(run, c, r) for run in runs for c in run.cases for r in (c.impls or (None,))]
    params: list[str] = []
    for row in rows:
        params += [k for k in row if k.startswith("param.") and k not in params]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=[*COLUMNS, *params], lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(v) for k, v in row.items()})
    return buf.getvalue()


def _cell(value: Any) -> Any:
    """A cell: empty for None, a float to ``FLOAT_DIGITS`` significant digits, anything else as it is."""
    if value is None:
        return ""
    return format(value, f".{FLOAT_DIGITS}g") if type(value) is float else value
