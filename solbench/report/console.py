"""Rich renderables for a run: one table per workload. Never prints."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.table import Table
from rich.text import Text

from solbench.analysis.gate import ROUNDS_A_LOOK
from solbench.analysis.pooling import rounds_apart
from solbench.report import dry_cells, flags
from solbench.report.collective_cells import collective_columns, is_part, part_label
from solbench.report.timing_cells import extra_cell, timing_columns
from solbench.report.units import format_pct, format_seconds
from solbench.results.model import CaseResult, ImplResult, RunResult

_STATUS_STYLE = {"incorrect": "bold red", "invalid": "bold magenta", "error": "red", "skipped": "dim"}


def run_tables(run: RunResult) -> list[Table]:
    """One table per workload, in run order."""
    by_workload: dict[str, list[CaseResult]] = {}
    for case in run.cases:
        by_workload.setdefault(case.workload, []).append(case)
    dry = run.protocol.timer == "none"
    extra = timing_columns(run)
    return [_dry_table(name, cases) if dry else _table(run, name, cases, extra + collective_columns(cases))
            for name, cases in by_workload.items()]


def _params(case: CaseResult) -> str:
    return " ".join(f"{k}={v}" for k, v in case.params.items()) + f" {case.dtype}"


def _table(run: RunResult, workload: str, cases: Iterable[CaseResult], extra: tuple[str, ...] = ()) -> Table:
    """One workload; ``extra`` adds "rounds" (count and spread) and "SM MHz" (range, ⚠throttled)."""
    t = Table(title=Text(workload), title_justify="left", show_lines=False)
    for col in ("case", "impl", "time (95% CI)", "T_SOL", "SOL", "MFU", "MBU", "bound", "speedup", "S", *extra):
        t.add_column(col, justify="left" if col in ("case", "impl", "bound") else "right")
    for case in cases:
        first = True
        for r in case.impls:
            t.add_row(Text(_params(case)) if first else "", Text(r.name), *_cells(run, case, r),
                      *(extra_cell(c, r) for c in extra))
            first = False
        if first:
            t.add_row(Text(_params(case)), "-", "", flags.t_sol(case), "", "", "", case.bound, "", "",
                      *("" for _ in extra))
        t.add_section()
    return t


def _cells(run: RunResult, case: CaseResult, r: ImplResult) -> list[str | Text]:
    if r.status not in ("ok", "invalid") or r.timing is None:
        label = Text(r.status.upper(), style=_STATUS_STYLE.get(r.status, ""))
        return [label, flags.t_sol(case), "", "", "", case.bound, "", ""]
    tm = r.timing
    half = (tm.ci_high - tm.ci_low) / 2
    spread = f"±{half / tm.median * 100:.1f}%" if tm.median > 0 else "(zero time)"
    time = flags.mark(f"{format_seconds(tm.median)} {spread}", flags.result_marks(r, run.protocol))
    if is_part(r):
        return [time, flags.t_sol(case), Text(part_label(r), style="dim"), "", "", case.bound, "", ""]
    if r.status == "invalid" or r.score is None:
        return [time, flags.t_sol(case), Text("INVALID", style=_STATUS_STYLE["invalid"]),
                "", "", case.bound, "", ""]
    s = r.score
    speed = f"{s.speedup:.2f}x" if s.speedup is not None else ""
    return [time, flags.t_sol(case, r), flags.mark(f"{s.sol:.2f}", flags.over_peak(s.sol, run)),
            flags.mark(format_pct(s.mfu), flags.over_peak(s.mfu, run)),
            flags.mark(format_pct(s.mbu), flags.over_peak(s.mbu, run)), flags.bound(case, r), speed,
            f"{s.s_score:.2f}" if s.s_score is not None else ""]


def _dry_table(workload: str, cases: Iterable[CaseResult]) -> Table:
    t = Table(title=Text(f"{workload} (dry run)"), title_justify="left")
    for col, align in zip(dry_cells.COLUMNS, dry_cells.ALIGN, strict=True):
        t.add_column(col, justify="left" if align == "l" else "right")
    for c in cases:
        first, *rest = dry_cells.cells(c)
        t.add_row(Text(first), *rest)
    return t


def rounds_phrase(p: Any) -> str:
    """The rounds of a run's protocol in words: "3 rounds", "1 round, up to 16 where ..." (the rounds
    added to the points that asked for them)."""
    pooled = " on a point's own spread or its case's" if p.rounds_spread == "case" else ""
    where = (f"the gate against the other tree was undecided ({ROUNDS_A_LOOK} more a look)"
             if p.rounds_rule == "gate" else f"wider than ±{p.rounds_target * 100:.3g}% over rounds{pooled}")
    more = f", up to {p.max_rounds} where {where}" if p.max_rounds > p.rounds else ""
    return f"{p.rounds} round{'s' if p.rounds != 1 else ''}{more}"


def run_header(run: RunResult) -> str:
    """One line saying what was measured, where and how."""
    env, p = run.environment, run.protocol
    other = peaks_elsewhere(run)
    parts = [f"{env.device_name} ({run.spec.id}, peaks: {run.spec.source}{f'; {other}' if other else ''})"]
    if p.timer != "none":
        how = {"cold": "CUDA events, L2 flushed, launch latency hidden",
               "graph": "CUDA-graph replay, warm L2", "cpu": "wall clock",
               "cupti": "CUPTI activity records, first start to last end of the call's GPU work, L2 flushed",
               }.get(p.timer, p.timer)
        parts.append(f"timer {p.timer} ({how}); median, stop at 95% CI ±{p.target_rel_ci * 100:.3g}% "
                     f"or {p.budget_s:g} s, >= {p.min_samples} samples")
    if p.threads:  # 0: torch's default (a GPU run without --threads)
        parts.append(threads(p.threads))
    if p.flush == "clean":
        parts.append("flush clean")
    if p.launch == "graph":
        parts.append("each call a CUDA graph's replay")
    if p.rounds > 1 or p.max_rounds > p.rounds:
        where = "all in this process, --in-process" if p.isolation == "in-process" else "fresh workers each"
        parts.append(f"{rounds_phrase(p)} ({where}; median and CI over rounds)")
    if env.sm_clock_end_mhz:
        parts.append(f"SM clock at end {env.sm_clock_end_mhz} MHz (max {env.max_sm_clock_mhz})")
    if env.clocks_locked is not None:
        parts.append("clocks locked" if env.clocks_locked else "clocks not locked")
    if not run.complete:  # interrupted, cancelled or killed before its last save
        parts.insert(0, f"INCOMPLETE: stopped after {len(run.cases)} case(s) (interrupted or cancelled); gate refuses "
                        "it as the current run")
    return " · ".join(parts)


def peaks_elsewhere(run: RunResult) -> str:
    """The ceilings the run's cases and implementations (an FP8 row at the FP8 peak: ``Score.peak_sources``)
    used that came from elsewhere than the run's peaks (``--peaks measured``: one calibrate did not measure
    stayed the datasheet's), ``"datasheet for float8_e4m3fn tensor, bfloat16 vector"``; empty where none did
    (every run saved before each ceiling had its source)."""
    other: dict[str, list[str]] = {}
    for c in run.cases:
        used = ("tensor", "vector", "bandwidth") if c.peaks.tensor_flops else ("vector", "bandwidth")
        found = [(c.peaks.source_of(ceiling), "bandwidth" if ceiling == "bandwidth" else f"{c.dtype} {ceiling}")
                 for ceiling in used]
        found += [(source, what) for r in c.impls if r.score is not None  # an FP8 row at the FP8 peak
                  for what, source in r.score.peak_sources.items()]
        for source, what in found:
            if source != run.spec.source and what not in other.setdefault(source, []):
                other[source].append(what)
    return "; ".join(f"{source} for {', '.join(what)}" for source, what in other.items() if what)


def threads(n: int) -> str:
    """The torch CPU threads a run measured with (``protocol.threads``), in words."""
    return f"{n} CPU thread{'s' if n != 1 else ''} (torch)"


def _beside(r: ImplResult) -> str:
    """What a point met beside other workers before it ran again alone, and in how many rounds."""
    rounds = r.protocol.get("beside_fault_rounds")
    more = f" (in {rounds} rounds)" if isinstance(rounds, int) and rounds > 1 else ""
    return f"{r.protocol['beside_fault']}{more}"


def run_notes(run: RunResult) -> list[str]:
    """The legend of the tables' marks (:mod:`solbench.report.flags`), then one line per
    implementation that was not scored, saying why, and one per time taken with the host in its
    window (``hold: none``, :mod:`solbench.device.timer`), and one per point of a ``--launch graph``
    run whose call was launched on the stream instead (not captured, or its replay did not run the
    launched call's work), with the reason, and one per point whose rounds include one more than
    ``APART`` (3%) from the others (:func:`solbench.analysis.pooling.rounds_apart`), and one per point
    that ran out of memory, met a device fault or timed out beside other workers and was measured
    again alone (``protocol.beside_fault``, :func:`solbench.execute.session.run_case`) (printed under
    the tables)."""
    key = flags.legend(run)
    notes = [f"{c.case_id} {r.name}: {r.status.upper()}: {r.message}" for c in run.cases for r in c.impls
             if r.message and (r.status != "ok" or r.protocol.get("hold") == "none")]
    notes += [f"{c.case_id} {r.name}: launched on the stream"
              f"{' in some rounds' if r.protocol.get('launch') == 'mixed' else ''}, not replayed from a graph "
              f"({r.protocol['graph_fallback']}); its time is not comparable "
              "with replayed ones"
              for c in run.cases for r in c.impls if r.status == "ok" and r.protocol.get("graph_fallback")]
    notes += [f"{c.case_id} {r.name}: rounds far from the median of its rounds ({apart}): a process that ran "
              "slow or fast; the interval carries it" for c in run.cases for r in c.impls
              if r.status == "ok" and (apart := rounds_apart(r))]
    notes += [f"{c.case_id} {r.name}: {_beside(r)} beside the case's other workers, then measured again alone: "
              "that result stands" for c in run.cases for r in c.impls if r.protocol.get("beside_fault")]
    return ([key] if key else []) + notes
