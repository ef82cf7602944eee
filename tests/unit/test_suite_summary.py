"""Suite summaries: KernelBench's fast_p and the mean SOL-ExecBench S on synthetic runs of known
times, and their place in the console, Markdown, HTML and JSON outputs."""

import json

import pytest
from rich.console import Console

from solbench.analysis.suite_summary import suite_summary
from solbench.cli.common import derived, print_run
from solbench.report.html import report_html
from solbench.report.markdown import run_markdown
from solbench.report.suites import summary_table
from solbench.results import store
from tests.unit.factories import as_suite, make_run

T_SOL = 1e8 / 3.35e12  # the factory cost's memory term: 1e8 fused bytes at 3.35 TB/s (the bound)
T_BASE = 1e-3


def s_of(t: float) -> float:
    """SOL-ExecBench's S against the factory baseline, written out."""
    return 1.0 / (1.0 + (t - T_SOL) / (T_BASE - T_SOL))


def _run(suite: str = "kernelbench"):
    """Four problems with known times (seconds) and one native case, which no suite summary counts.

    p1: fast 2x, slow 0.5x, solution 4x         p2: fast 1.25x, slow INCORRECT
    p3: fast exactly 1x (not > 1), slow 1.11x   p4: baseline ERROR (no baseline time), slow INVALID
    """
    cases = {
        "p1": {"baseline": [T_BASE] * 5, "fast": [5e-4] * 5, "slow": [2e-3] * 5, "solution": [2.5e-4] * 5},
        "p2": {"baseline": [T_BASE] * 5, "fast": [8e-4] * 5, "slow": []},
        "p3": {"baseline": [T_BASE] * 5, "fast": [T_BASE] * 5, "slow": [9e-4] * 5},
        "p4": {"baseline": [], "fast": [5e-4] * 5, "slow": []},
        "native": {"baseline": [T_BASE] * 5, "fast": [1e-4] * 5},
    }
    statuses = {"p2/slow": "incorrect", "p4/baseline": "error", "p4/slow": "invalid"}
    run = make_run(cases, statuses=statuses)
    return as_suite(run, suite, case_ids=["p1", "p2", "p3", "p4"])


def test_fast_p_and_mean_s_of_known_times():
    fast, slow, solution = suite_summary(_run(), ps=(0.0, 1.0, 2.0))
    assert [s.impl for s in (fast, slow, solution)] == ["fast", "slow", "solution"]  # the baseline is not one
    assert {s.suite for s in (fast, slow, solution)} == {"kernelbench"} and fast.cases == 4  # native left out

    assert [(f.p, f.count) for f in fast.fast] == [(0.0, 3), (1.0, 2), (2.0, 0)]  # 2x is not > 2
    assert fast.fast_at(0.0).fraction == 0.75 and fast.fast_at(1.0).fraction == 0.5
    assert (fast.correct, fast.failed, fast.missing, fast.no_baseline) == (4, 0, 0, 1)
    assert fast.s_cases == 3  # p4 has no baseline time: not fast, and not in the mean S
    assert fast.mean_s == pytest.approx((s_of(5e-4) + s_of(8e-4) + 0.5) / 3)

    assert [f.count for f in slow.fast] == [2, 1, 0]  # p1 (0.5x) and p3 (1.11x) correct; only p3 faster
    assert (slow.correct, slow.failed, slow.missing) == (2, 2, 0)  # INCORRECT and INVALID both fail
    assert slow.mean_s == pytest.approx((s_of(2e-3) + 0.0 + s_of(9e-4)) / 3)  # the failure scores 0

    assert [f.count for f in solution.fast] == [1, 1, 1] and solution.fast[0].fraction == 0.25
    assert (solution.correct, solution.missing) == (1, 3)
    assert solution.mean_s == pytest.approx(s_of(2.5e-4) / 3)  # missing where a baseline time exists: 0


def test_a_run_without_suite_problems_has_no_summary_and_p_must_not_be_negative():
    native = make_run({"c": {"baseline": [T_BASE] * 5, "fast": [5e-4] * 5}})
    assert suite_summary(native) == ()
    assert summary_table(native) is None and derived(native) == {}
    assert "suite summary" not in run_markdown(native) and "Suite summary" not in report_html([native])
    with pytest.raises(ValueError, match="p >= 0"):
        suite_summary(_run(), ps=(-1.0,))


def test_no_baseline_anywhere_gives_no_mean_s_and_nothing_fast():
    run = as_suite(make_run({"q": {"baseline": [], "fast": [5e-4] * 5}}, statuses={"q/baseline": "crashed"}),
                   "sol-execbench")
    [s] = suite_summary(run)
    assert s.suite == "sol-execbench" and s.correct == 1
    assert [f.count for f in s.fast] == [0, 0] and s.mean_s is None and s.s_cases == 0


def test_console_markdown_html_show_the_summary_and_mark_traced_t_sol():
    run = _run()
    out = Console(width=200, record=True)
    print_run(out, run)
    text = out.export_text()
    assert "suite summary" in text and "fast_0" in text and "fast_1" in text and "mean S" in text
    row = next(line for line in text.splitlines() if "kernelbench" in line and " fast " in line)
    assert "75% (3/4)" in row and "50% (2/4)" in row and f"{(s_of(5e-4) + s_of(8e-4) + 0.5) / 3:.3f}" in row
    assert "‡ T_SOL from a traced cost" in text
    traced = [line for line in text.splitlines() if line.lstrip("│ ").startswith("n=1024") and "‡" in line]
    assert len(traced) == 4  # p1..p4 carry the mark on T_SOL; the native case does not

    md = run_markdown(run, (0.0, 1.0, 2.0))
    assert "#### suite summary" in md and "| fast_2 |" in md and "| kernelbench | solution |" in md
    assert "25% (1/4)" in md and "‡ T_SOL from a traced cost" in md
    page = report_html([run])
    assert "Suite summary" in page and "75% (3/4)" in page


def test_the_json_carries_the_summary_and_reads_back(tmp_path):
    run = _run()
    path = store.save(run, tmp_path / "run.json", extra=derived(run))
    data = json.loads(path.read_text())
    fast = next(s for s in data["suite_summary"] if s["impl"] == "fast")
    assert fast["fast"] == [{"p": 0.0, "count": 3, "fraction": 0.75}, {"p": 1.0, "count": 2, "fraction": 0.5}]
    assert fast["mean_s"] == pytest.approx((s_of(5e-4) + s_of(8e-4) + 0.5) / 3)
    assert store.load(path) == run  # derived, so ignored when read
    with pytest.raises(ValueError, match="replace the record"):
        store.dumps(run, {"cases": []})
