"""The suite summary (:mod:`solbench.analysis.suite_summary`) as a rich table, Markdown, HTML and JSON.

One row per suite and implementation: the suite's cases, how many were correct, fast_p for each p
("75% (3/4)"), the mean S over the cases with a baseline time, and the cases without one. Every
renderer returns nothing (None, [], "", []) when the run holds no suite problems.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Sequence
from typing import Any

from rich.table import Table
from rich.text import Text

from solbench.analysis.suite_summary import DEFAULT_PS, SuiteImplSummary, suite_summary
from solbench.results.model import RunResult

__all__ = ["summary_html", "summary_json", "summary_markdown", "summary_note", "summary_rows", "summary_table"]

TITLE = "suite summary"


def _header(ps: Sequence[float]) -> list[str]:
    return ["suite", "impl", "cases", "correct", *(f"fast_{p:g}" for p in sorted(set(ps))), "mean S",
            "no baseline"]


def summary_rows(run: RunResult, ps: Sequence[float] = DEFAULT_PS) -> tuple[list[str], list[list[str]]]:
    """The header and one row of text cells per suite and implementation (no rows: no suite cases)."""
    rows = [_row(s) for s in suite_summary(run, ps)]
    return _header(ps), rows


def _row(s: SuiteImplSummary) -> list[str]:
    mean_s = f"{s.mean_s:.3f} (n={s.s_cases})" if s.mean_s is not None else "—"
    return [s.suite, s.impl, str(s.cases), str(s.correct),
            *(f"{f.fraction:.0%} ({f.count}/{s.cases})" for f in s.fast), mean_s, str(s.no_baseline)]


def summary_note(ps: Sequence[float] = DEFAULT_PS) -> str:
    """One line defining the columns (printed under the table)."""
    listed = ", ".join(f"{p:g}" for p in sorted(set(ps)))
    return ("fast_p (KernelBench): the fraction of the suite's cases on which the implementation is correct and "
            f"faster than the baseline by more than p (p = {listed}); failed, missing and baseline-less cases are "
            "not fast. mean S (SOL-ExecBench): 1 / (1 + (T − T_SOL) / (T_baseline − T_SOL)) averaged over the cases "
            "with a baseline time, a failed or missing implementation scoring 0.")


def summary_table(run: RunResult, ps: Sequence[float] = DEFAULT_PS) -> Table | None:
    """The summary as a rich table; None when the run holds no suite problems."""
    header, rows = summary_rows(run, ps)
    if not rows:
        return None
    t = Table(title=Text(TITLE), title_justify="left")
    for col in header:
        t.add_column(col, justify="left" if col in ("suite", "impl") else "right")
    for row in rows:
        t.add_row(*(Text(c) for c in row))
    return t


def summary_markdown(run: RunResult, ps: Sequence[float] = DEFAULT_PS) -> list[str]:
    """Markdown lines (a heading, the table, the note); empty without suite problems."""
    header, rows = summary_rows(run, ps)
    if not rows:
        return []

    def cell(text: str) -> str:
        return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")

    align = ["---:" if i >= 2 else ":---" for i in range(len(header))]
    return [f"#### {TITLE}", "", "| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |",
            *("| " + " | ".join(cell(c) for c in r) + " |" for r in rows), "", summary_note(ps), ""]


def summary_html(run: RunResult, ps: Sequence[float] = DEFAULT_PS) -> str:
    """An HTML section (heading, table, note); "" without suite problems."""
    header, rows = summary_rows(run, ps)
    if not rows:
        return ""
    e = html.escape
    head = "".join(f'<th{" class=l" if i < 2 else ""}>{e(h)}</th>' for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(f'<td{" class=l" if i < 2 else ""}>{e(c)}</td>' for i, c in enumerate(r))
                   + "</tr>" for r in rows)
    return (f"<h3>{e(TITLE.capitalize())}</h3><table><tr>{head}</tr>{body}</table>"
            f'<p class="note">{e(summary_note(ps))}</p>')


def summary_json(run: RunResult, ps: Sequence[float] = DEFAULT_PS) -> list[dict[str, Any]]:
    """The summary as JSON-ready dicts (one per suite and implementation; [] without suite problems)."""
    return [dataclasses.asdict(s) for s in suite_summary(run, ps)]
