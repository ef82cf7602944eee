"""A self-contained HTML report: one file, styles inline, images as ``data:`` URIs, no network.

    header        devices, dates, the runs' files
    roofline      the PNG from :mod:`solbench.report.roofline`
    verdicts      a gate's or a comparison's table, when given
    per run       environment, protocol, one results table per workload, sample histograms,
                  the suite summary (fast_p, mean S) of KernelBench/SOL-ExecBench problems,
                  notes (why an implementation was not scored)

A results table can be shown in four orders (as given, by time, by SOL, by speedup), a gate's or a
comparison's in two (as given, by ratio), switched by radio buttons through CSS alone
(:mod:`solbench.report.html_views`): the report holds no script.

Returns text; the CLI writes the file.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from solbench.analysis.compare import Comparison
from solbench.analysis.gate import GateResult
from solbench.analysis.suite_summary import DEFAULT_PS
from solbench.report import dry_cells, flags, html_views
from solbench.report.collective_cells import collective_columns, is_part, part_label
from solbench.report.compare_console import unpaired
from solbench.report.console import peaks_elsewhere, run_header, run_notes
from solbench.report.markdown import ratio_note, side_cell, split_key, threshold_cell, undecided_note, verdict_counts
from solbench.report.roofline import point_labels
from solbench.report.suites import summary_html
from solbench.report.timing_cells import extra_cell, timing_columns
from solbench.report.units import (
    format_ci,
    format_p,
    format_pct,
    format_percent,
    format_ratio,
    format_seconds,
)
from solbench.results.model import CaseResult, ImplResult, RunResult

__all__ = ["ReportImages", "report_html"]

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:32px}
h3{font-size:15px;margin-top:20px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right;white-space:nowrap}
th{background:#f3f3f3}td.l,th.l{text-align:left}
tr.first td{border-top:2px solid #bbb}
.bad{color:#b00020;font-weight:600}.skip{color:#888}.note{color:#555;font-size:12px}
img{max-width:100%;border:1px solid #eee}
"""
_STATUS_CLASS = {"incorrect": "bad", "invalid": "bad", "error": "bad", "crashed": "bad", "timeout": "bad",
                 "oom": "bad", "reward_hack": "bad", "skipped": "skip"}


@dataclass(frozen=True)
class ReportImages:
    """PNG images to inline: the roofline, and sample histograms per (run index, workload)."""

    roofline: bytes | None = None
    histograms: Mapping[tuple[int, str], bytes] = field(default_factory=dict)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _img(png: bytes, alt: str) -> str:
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1,
           caption: str | None = None, first_rows: frozenset[int] = frozenset(), order: str | None = None) -> str:
    """Cells are already-escaped HTML; the first ``left`` columns are left-aligned; ``order`` names the
    row order (``data-order``) of a table shown in several orders."""
    head = "".join(f'<th{" class=l" if i < left else ""}>{_e(h)}</th>' for i, h in enumerate(header))
    body = []
    for j, row in enumerate(rows):
        cells = "".join(f'<td{" class=l" if i < left else ""}>{c}</td>' for i, c in enumerate(row))
        body.append(f'<tr{" class=first" if j in first_rows else ""}>{cells}</tr>')
    cap = f"<caption>{_e(caption)}</caption>" if caption else ""
    attr = f' data-order="{_e(order)}"' if order else ""
    return f"<table{attr}>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _kv_table(pairs: Mapping[str, object]) -> str:
    rows = [[_e(k), _e(v)] for k, v in pairs.items() if v not in (None, "", ())]
    return _table(["field", "value"], rows, left=2)


def _impl_cells(run: RunResult, c: CaseResult, r: ImplResult) -> list[str]:
    status = f'<span class="{_STATUS_CLASS.get(r.status, "")}">{_e(r.status.upper())}</span>'
    t, s = r.timing, r.score
    if t is None:
        return [status, "", "", "", _e(flags.t_sol(c)), "", "", "", _e(c.bound), "", ""]
    half = (t.ci_high - t.ci_low) / 2 / t.median if t.median else 0.0
    marks = flags.result_marks(r, run.protocol)
    cells = [status, _e(format_seconds(t.median)), _e(flags.mark(f"±{half:.1%}", marks)), _e(t.n),
             _e(flags.t_sol(c, r))]
    if s is None:  # a part or a byte floor says so where SOL would be, as the console and Markdown tables do
        return [*cells, _e(part_label(r)) if is_part(r) else "", "", "", _e(c.bound), "", ""]
    return [*cells, _e(flags.mark(f"{s.sol:.3f}", flags.over_peak(s.sol, run))),
            _e(flags.mark(format_pct(s.mfu), flags.over_peak(s.mfu, run))),
            _e(flags.mark(format_pct(s.mbu), flags.over_peak(s.mbu, run))), _e(flags.bound(c, r)),
            _e(f"{s.speedup:.2f}×" if s.speedup else ""), _e(f"{s.s_score:.3f}" if s.s_score is not None else "")]


_RESULTS_HEADER = ["case", "impl", "status", "median", "±CI", "n", "T_SOL", "SOL", "MFU", "MBU", "bound", "speedup",
                   "S"]


def _median(r: ImplResult) -> float | None:
    return r.timing.median if r.timing is not None else None


def _sol(r: ImplResult) -> float | None:
    return -r.score.sol if r.score is not None else None


def _speedup(r: ImplResult) -> float | None:
    return -r.score.speedup if r.score is not None and r.score.speedup else None


# (key, label, caption, sort key: smaller first, None last; None: the order as given)
_ORDERS: tuple[tuple[str, str, str, Callable[[ImplResult], float | None] | None], ...] = (
    ("given", "as given", "as given: cases in the workload's order, implementations in the file's order", None),
    ("time", "by time", "by median time, fastest first", _median),
    ("sol", "by SOL", "by SOL, highest first", _sol),
    ("speedup", "by speedup", "by speedup over the baseline, highest first", _speedup),
)


def _params(c: CaseResult) -> str:
    return " ".join(f"{k}={v}" for k, v in c.params.items()) + f" {c.dtype}"


def _results_table(run: RunResult, cases: Sequence[CaseResult], group: str) -> str:
    """One table per order of :data:`_ORDERS`, switched by :func:`html_views.views`; the first keeps the
    order of the run (rows grouped by case). Sorts are stable; rows without the key come last, as given."""
    pairs = [(c, r) for c in cases for r in c.impls]
    # rounds, SM MHz, algbw, busbw, overlap, of floor: as the console and Markdown tables
    cols = (*timing_columns(run), *collective_columns(cases))

    def cells(c: CaseResult, r: ImplResult) -> list[str]:
        return [*_impl_cells(run, c, r), *(_e(extra_cell(col, r)) for col in cols)]

    rendered = []
    for key, label, caption, sort_key in _ORDERS:
        if sort_key is None:
            rows = [[_e(_params(c)) if r is c.impls[0] else "", _e(r.name), *cells(c, r)] for c, r in pairs]
            firsts = frozenset(j for j, (c, r) in enumerate(pairs) if r is c.impls[0])
        else:
            keyed = [(sort_key(r), j) for j, (_, r) in enumerate(pairs)]
            ranked = sorted(keyed, key=lambda kj: (kj[0] is None, kj[0] or 0.0, kj[1]))
            rows = [[_e(_params(pairs[j][0])), _e(pairs[j][1].name), *cells(*pairs[j])] for _, j in ranked]
            firsts = frozenset()
        rendered.append((key, label, _table([*_RESULTS_HEADER, *cols], rows, left=3, caption=f"order: {caption}",
                                            first_rows=firsts, order=key)))
    return html_views.views(group, rendered if len(pairs) > 1 else rendered[:1])


def _dry_table(cases: Sequence[CaseResult]) -> str:
    """A dry run's cases (nothing timed): FLOPs, bytes, T_SOL and bound, as the console's dry table."""
    rows = [[_e(cell) for cell in dry_cells.cells(c)] for c in cases]
    return _table(list(dry_cells.COLUMNS), rows, caption="dry run: nothing was measured")


def _by_ratio(group: str, header: Sequence[str], rows: Sequence[list[str]], ratios: Sequence[float | None],
              left: int, slower: str) -> str:
    """A verdict table as given, and again by ratio, the largest slowdown first (no ratio: last, as given)."""
    ranked = sorted(range(len(rows)), key=lambda j: (ratios[j] is None, -(ratios[j] or 0.0), j))
    views = [("given", "as given", _table(header, rows, left, "order: as given", order="given")),
             ("ratio", "by ratio", _table(header, [rows[j] for j in ranked], left,
                                          f"order: by ratio, {slower} first", order="ratio"))]
    return html_views.views(group, views if len(rows) > 1 else views[:1])


def _gate_section(g: GateResult) -> str:
    rows = [[_e(v.case_id), _e(v.impl), _e(v.verdict), _e(side_cell(v.median_base, v.status_base)),
             _e(side_cell(v.median_cur, v.status_cur)),
             _e(format_ratio(v.ratio, threshold=v.threshold)),
             _e(format_ci(v.ci_low, v.ci_high, threshold=v.threshold)),
             _e(threshold_cell(v)),
             _e(format_p(v.p_adjusted)), _e(v.reason)] for v in g.verdicts]
    table = _by_ratio("gate", ["case", "impl", "verdict", "baseline", "current", "ratio", "95% CI", "threshold",
                               "p (adj.)", "reason"], rows, [v.ratio for v in g.verdicts], 3,
                      "the largest slowdown of current against baseline")
    notes = ([f"Compared across different hardware or software (allowed): {'; '.join(g.fingerprint_diffs)}"]
             if g.fingerprint_diffs else []) + [n for n in (g.cards, g.load, undecided_note(g)) if n]
    return f"<h2>Gate: {_e(g.overall)}</h2>" + "".join(f'<p class="note">{_e(n)}</p>' for n in notes) + table


def _compare_section(c: Comparison) -> str:
    apart = unpaired(c)  # measured on one side only, or not comparable: no ratio, listed last
    by_impl = any(split_key(k)[1] for k in [*(r.key for r in c.rows), *apart])  # two runs: case and impl apart

    def key(k: str) -> list[str]:
        return [_e(x) for x in (split_key(k) if by_impl else (k,))]

    rows = [[*key(r.key), _e(r.verdict), _e(format_seconds(r.median_a)), _e(format_seconds(r.median_b)),
             _e(format_ratio(r.ratio, threshold=c.threshold)),
             _e(format_ci(r.ci_low, r.ci_high, threshold=c.threshold)), _e(format_p(r.p_value))]
            for r in c.rows]
    rows += [[*key(k), _e(why), "", "", "", "", ""] for k, why in apart.items()]
    ratios = [r.ratio for r in c.rows] + [None] * len(apart)
    table = _by_ratio("compare", ["case", *(["impl"] if by_impl else []), "verdict", c.label_a, c.label_b,
                                  f"{c.label_b}/{c.label_a}", "95% CI", "p"], rows, ratios,
                      3 if by_impl else 2, f"the largest slowdown of {c.label_b} against {c.label_a}")
    counts = verdict_counts(c)
    geo = (f"geomean speedup of {c.label_b} over {c.label_a}: {format_ratio(c.geomean_speedup)}{c.geomean_over()} "
           f"({counts}); SAME within ±{format_percent(c.threshold)}, alpha {c.alpha:g} (BH)")
    how = ratio_note(c) if c.rows else ""  # as the console and Markdown say it: what a row's ratio is of
    return (f"<h2>Comparison: {_e(c.label_b)} vs {_e(c.label_a)}</h2>{table}<p>{_e(geo)}</p>"
            + (f'<p class="note">{_e(how)}</p>' if how else ""))


def _run_section(k: int, run: RunResult, images: ReportImages, label: str,
                 fast_ps: Sequence[float] = DEFAULT_PS) -> str:
    other = peaks_elsewhere(run)
    peaks = f"{run.spec.id} ({run.spec.source}{f'; {other}' if other else ''})"
    parts = [f"<h2>Run {k + 1}: {_e(label)}</h2>", f'<p class="note">{_e(run_header(run))}</p>',
             "<h3>Environment</h3>", _kv_table(asdict(run.environment)),
             "<h3>Protocol</h3>", _kv_table({**asdict(run.protocol), "peaks": peaks})]
    by_workload: dict[str, list[CaseResult]] = {}
    for c in run.cases:
        by_workload.setdefault(c.workload, []).append(c)
    for j, (workload, cases) in enumerate(by_workload.items()):
        table = _dry_table(cases) if run.protocol.timer == "none" else _results_table(run, cases, f"r{k}w{j}")
        parts += [f"<h3>{_e(workload)}</h3>", table]
        png = images.histograms.get((k, workload))
        if png:
            parts.append(_img(png, f"sample histograms: {workload}"))
    summary = summary_html(run, fast_ps)
    if summary:
        parts.append(summary)
    notes = run_notes(run) + list(run.notes)
    if notes:
        parts.append("<h3>Notes</h3><ul>" + "".join(f'<li class="note">{_e(n)}</li>' for n in notes) + "</ul>")
    return "\n".join(parts)


def report_html(runs: Sequence[RunResult], images: ReportImages = ReportImages(), *,
                labels: Sequence[str] = (), comparison: Comparison | None = None,
                gate: GateResult | None = None, title: str = "solbench report",
                fast_ps: Sequence[float] = DEFAULT_PS) -> str:
    """The whole report as one HTML document (no external references); runs of suite problems get a
    suite summary (fast_p at ``fast_ps``, mean S)."""
    labels = list(labels) + [r.created for r in runs[len(labels):]]
    devices = sorted({r.environment.device_name for r in runs})
    body = [f"<h1>{_e(title)}</h1>",
            f'<p class="note">{_e(", ".join(devices))} · {len(runs)} run(s) · '
            f'{sum(len(r.cases) for r in runs)} case(s)</p>']
    if images.roofline:
        numbered = point_labels(runs)
        body += ["<h2>Roofline</h2>", _img(images.roofline, "roofline"),
                 '<p class="note">One point per case × implementation: analytic FLOPs / median time against '
                 "analytic FLOP per fused byte; arrows go from the baseline to the fused (else the fastest) "
                 "implementation of the same run; dashed roofs are ceilings measured by solbench calibrate. "
                 "Each point carries the number of its case:</p>",
                 '<ol class="note">' + "".join(f"<li>{_e(case)}</li>" for case in numbered) + "</ol>"]
    if gate is not None:
        body.append(_gate_section(gate))
    if comparison is not None:
        body.append(_compare_section(comparison))
    body += [_run_section(k, run, images, labels[k], fast_ps) for k, run in enumerate(runs)]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{_STYLE}{html_views.VIEWS_CSS}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")
