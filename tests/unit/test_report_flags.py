"""Uncertain numbers carry a mark in every run table (console, Markdown, HTML), with a legend."""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
from rich.console import Console

from solbench.report import flags
from solbench.report.console import run_notes, run_tables
from solbench.report.html import report_html
from solbench.report.markdown import run_markdown
from solbench.results.model import RunResult, Timing
from tests.unit.factories import make_env, make_run, noisy


def _render(run: RunResult) -> str:
    console = Console(width=250, record=True, file=io.StringIO())
    for table in run_tables(run):
        console.print(table)
    return console.export_text()


def _run(noise: float, stop: str = "converged", measured: bool = False, samples_median: float = 1e-3) -> RunResult:
    rng = np.random.default_rng(7)
    run = make_run({"c1": {"base": noisy(rng, 200, samples_median, noise)}})
    case = run.cases[0]
    r = case.impls[0]
    assert r.timing is not None
    r = replace(r, timing=replace(r.timing, stop_reason=stop))
    run = replace(run, cases=(replace(case, impls=(r,)),))
    return replace(run, spec=replace(run.spec, source="measured")) if measured else run


def test_time_marks_on_seeded_timings() -> None:
    t = Timing((1.0,), 1.0, 0.99, 1.01, "converged")
    assert flags.time_marks(t, 0.01) == ""
    assert flags.time_marks(replace(t, ci_low=0.9, ci_high=1.1), 0.01) == "~"
    assert flags.time_marks(replace(t, stop_reason="budget"), 0.01) == "†"
    assert flags.time_marks(replace(t, ci_low=0.5, stop_reason="converged+max_samples"), 0.01) == "~†"
    assert flags.time_marks(None, 0.01) == ""


def test_a_narrow_converged_point_carries_no_mark_and_no_legend() -> None:
    run = _run(noise=0.0005)
    assert flags.legend(run) == ""
    assert "~" not in _render(run) and "†" not in _render(run)
    assert "~" not in run_markdown(run)


def test_wide_and_budget_points_are_marked_in_every_format() -> None:
    run = _run(noise=0.5, stop="budget")
    legend = flags.legend(run)
    assert "~ the 95% CI is wider than the target" in legend and "† sampling stopped on the budget" in legend
    assert "~†" in _render(run) and legend in run_notes(run)
    md = run_markdown(run)
    assert "~†" in md and legend in md
    html = report_html([run])
    assert "~†" in html and "sampling stopped on the budget" in html


def test_sol_above_one_is_marked_only_against_measured_peaks() -> None:
    fast = 1e-5  # below the factories' T_SOL of 1e-4 s: SOL 10
    datasheet = _run(noise=0.0, samples_median=fast)
    assert "!" not in flags.legend(datasheet) and " !" not in _render(datasheet)
    measured = _run(noise=0.0, measured=True, samples_median=fast)
    assert "! above 1 (100%) against peaks measured on this host" in flags.legend(measured)
    assert "10.00 !" in _render(measured)
    assert "10.00 !" in run_markdown(measured)
    assert "10.000 !" in report_html([measured])


def test_a_time_taken_with_the_host_in_its_window_is_said_under_the_tables() -> None:
    from solbench.measure.worker import UNHELD

    run = _run(noise=0.0005)
    case = run.cases[0]
    r = case.impls[0]
    assert not any(UNHELD in note for note in run_notes(run))
    unheld = replace(r, message=UNHELD, protocol={**r.protocol, "hold": "none"})
    notes = run_notes(replace(run, cases=(replace(case, impls=(unheld,)),)))
    assert any(note.startswith(f"{case.case_id} {r.name}: OK: timed with the host in the window") for note in notes)


def test_a_point_a_graph_run_launched_on_the_stream_is_said_under_the_tables() -> None:
    run = _run(noise=0.0005)
    case = run.cases[0]
    r = case.impls[0]
    assert not any("not replayed from a graph" in note for note in run_notes(run))
    launched = replace(r, protocol={**r.protocol, "launch": "stream",
                                    "graph_fallback": "RuntimeError: operation not permitted when stream is capturing"})
    notes = run_notes(replace(run, cases=(replace(case, impls=(launched,)),)))
    assert f"{case.case_id} {r.name}: launched on the stream, not replayed from a graph (RuntimeError: operation " \
           "not permitted when stream is capturing); its time is not comparable with replayed ones" in notes


def test_rounds_that_ran_different_kernels_are_marked_in_every_format() -> None:
    run = _run(noise=0.0005)
    case = run.cases[0]
    r = replace(case.impls[0], protocol={**case.impls[0].protocol,
                                         "kernels_by_round": '["conv~1a2b3c4d", "conv~99887766", "conv~1a2b3c4d"]'})
    mixed = replace(run, cases=(replace(case, impls=(r,)),))
    legend = flags.legend(mixed)
    assert "§ the rounds ran different kernels" in legend and "~" not in legend
    assert flags.result_marks(r, run.protocol) == "§" and flags.result_marks(case.impls[0], run.protocol) == ""
    assert "§" in _render(mixed) and "§" not in _render(run)
    assert "§" in run_markdown(mixed) and legend in run_markdown(mixed)
    assert "§" in report_html([mixed])


def test_rounds_that_launched_the_same_kernels_with_other_grids_are_marked_too() -> None:
    run = _run(noise=0.0005)
    case = run.cases[0]
    r = replace(case.impls[0], protocol={**case.impls[0].protocol,
                                         "kernel_shapes_by_round": '["#1 grid 64x4x1", "#1 grid 64x8x1"]'})
    assert flags.result_marks(r, run.protocol) == "§"
    legend = flags.legend(replace(run, cases=(replace(case, impls=(r,)),)))
    assert "§ the rounds ran different kernels" in legend and "kernel_shapes_by_round" in legend


def test_a_target_below_half_a_percent_is_not_shown_as_zero():
    from dataclasses import replace

    from solbench.report.console import run_header
    from tests.unit.factories import make_run

    run = make_run({"c": {"baseline": [1e-3] * 5}})
    run = replace(run, protocol=replace(run.protocol, target_rel_ci=0.003))
    assert "±0.3%" in run_header(run) and "±0%" not in run_header(run)


def test_an_incomplete_run_says_so_in_its_header_and_its_markdown():
    from dataclasses import replace

    from solbench.report.console import run_header
    from tests.unit.factories import make_run

    run = make_run({"c": {"baseline": [1e-3] * 5}})
    assert "INCOMPLETE" not in run_header(run) and "INCOMPLETE" not in run_markdown(run)
    stopped = replace(run, complete=False)
    assert run_header(stopped).startswith("INCOMPLETE: stopped after 1 case(s)")
    assert "**INCOMPLETE**: stopped after 1 case(s)" in run_markdown(stopped)


def test_the_markdown_of_a_cpu_run_names_only_the_versions_it_has():
    """A CPU run records no CUDA and no driver: its Markdown header said "CUDA None, driver None"."""
    cpu = replace(make_run({"c": {"t": [1e-3] * 5}}), environment=make_env(device_kind="cpu", device_name="AMD EPYC",
                                                                              spec_id="cpu", cuda=None, driver=None))
    header = run_markdown(cpu).splitlines()[2]
    assert "None" not in header and "torch 2.4.1+cu124" in header and "CUDA" not in header
    assert "CUDA 12.4, driver 550.54.15" in run_markdown(make_run({"c": {"t": [1e-3] * 5}}))


def test_the_header_of_a_cpu_run_names_the_threads_it_measured_with():
    """A CPU time depends on the torch threads it ran with (README 'CPU threads'); the run recorded them
    (protocol.threads), but neither its header nor its Markdown said how many."""
    from solbench.report.console import run_header
    from tests.unit.factories import make_run

    run = make_run({"c": {"baseline": [1e-3] * 5}})
    assert "thread" not in run_header(run) and "thread" not in run_markdown(run)  # 0: torch's default, not set
    for n, words in ((1, "1 CPU thread (torch)"), (7, "7 CPU threads (torch)")):
        cpu = replace(run, protocol=replace(run.protocol, timer="cpu", threads=n))
        assert words in run_header(cpu) and words in run_markdown(cpu)


def test_the_markdown_says_the_rounds_a_run_added_as_its_header_does():
    """A run of one round that added rounds to some points (adaptive, or `ab`'s rounds for the gate)
    read "1 rounds, each with fresh workers" in its Markdown, with nothing of the rounds added, where the
    console header said "1 round, up to 16 where ..."."""
    from solbench.report.console import run_header

    run = make_run({"c": {"baseline": [1e-3] * 5}})
    r = run.cases[0].impls[0]
    assert r.timing is not None
    deep = replace(r, timing=replace(r.timing, samples=(1e-3, 1.01e-3, 0.99e-3, 1e-3), rounds=(0, 1, 2, 3)))
    run = replace(run, cases=(replace(run.cases[0], impls=(deep,)),),
                  protocol=replace(run.protocol, rounds=1, max_rounds=16, rounds_target=0.02))
    markdown = run_markdown(run)
    assert "1 rounds" not in markdown and "1 rounds" not in run_header(run)
    assert "1 round, up to 16 where" in markdown and "1 round, up to 16 where" in run_header(run)


def test_the_header_of_a_cupti_run_says_how_cupti_times():
    """The header read "timer cupti (cupti)": the timer's one line had no words for CUPTI."""
    from solbench.report.console import run_header

    run = make_run({"c": {"baseline": [1e-3] * 5}})
    header = run_header(replace(run, protocol=replace(run.protocol, timer="cupti")))
    assert "cupti (cupti)" not in header and "timer cupti (CUPTI activity records" in header


def test_the_header_of_an_in_process_run_in_rounds_names_no_workers():
    """`run --in-process` measures every round in the one process (README: no worker processes), yet its
    header and its Markdown read "3 rounds (fresh workers each; ...)"."""
    from solbench.report.console import run_header

    run = make_run({"c": {"baseline": [1e-3] * 5}})
    r = run.cases[0].impls[0]
    assert r.timing is not None
    rounds = replace(r, timing=replace(r.timing, samples=(1e-3, 1.01e-3, 0.99e-3), rounds=(0, 1, 2)))
    run = replace(run, cases=(replace(run.cases[0], impls=(rounds,)),), protocol=replace(run.protocol, rounds=3))
    assert "fresh workers" in run_header(run) and "fresh workers" in run_markdown(run)  # worker mode, as before
    inproc = replace(run, protocol=replace(run.protocol, isolation="in-process"))
    for text in (run_header(inproc), run_markdown(inproc)):
        assert "fresh workers" not in text and "3 rounds" in text and "in this process" in text


def test_run_tables_show_each_implementations_s_score() -> None:
    """S (SOL-ExecBench's score) is a per-case figure of the README's table; the terminal and Markdown run
    tables left it out (JSON, CSV and HTML had it)."""

    rng = np.random.default_rng(3)
    run = make_run({"c1": {"baseline": noisy(rng, 30, 2e-3, 0.01), "fused": noisy(rng, 30, 1e-3, 0.01)}})
    case = run.cases[0]
    scored = tuple(replace(r, score=replace(r.score, speedup=s, s_score=v))
                   for r, s, v in zip(case.impls, (1.0, 2.0), (0.5, 0.6789), strict=True))
    run = replace(run, cases=(replace(case, impls=scored),))
    text = _render(run)
    header = next(line for line in text.splitlines() if "speedup" in line)
    assert header.split("speedup")[1].split()[1] == "S"
    fused = next(line for line in text.splitlines() if " fused " in line)
    assert fused.split("2.00x")[1].split()[1] == "0.68"
    md = run_markdown(run).splitlines()
    md_header = next(line for line in md if "| speedup |" in line)
    md_fused = next(line for line in md if "| fused |" in line)
    cells = [c.strip() for c in md_fused.strip("|").split("|")]
    assert [c.strip() for c in md_header.strip("|").split("|")].index("S") == cells.index("0.68")


def test_markdown_run_lists_why_an_implementation_was_not_scored_and_the_runs_notes() -> None:
    """The Markdown of a run (a CI job summary) kept the legend but dropped the lines the terminal prints
    under the tables: why an implementation failed, and the run's notes (peaks, detection)."""
    rng = np.random.default_rng(4)
    run = make_run({"c1": {"baseline": noisy(rng, 30, 2e-3, 0.01), "broken": noisy(rng, 30, 1e-3, 0.01)}},
                   statuses={"c1/broken": "incorrect"}, messages={"c1/broken": "max abs err 0.5 > atol 1e-05"})
    run = replace(run, notes=("peaks: datasheet; the SM clock could not be read",))
    md = run_markdown(run)
    assert "- c1 broken: INCORRECT: max abs err 0.5 > atol 1e-05" in md
    assert "- peaks: datasheet; the SM clock could not be read" in md


def _two_impls(measured: bool) -> RunResult:
    rng = np.random.default_rng(3)  # the factories' T_SOL is 1e-4 s: "slow" has SOL 0.5, "fast" SOL 10
    run = make_run({"c1": {"slow": noisy(rng, 60, 2e-4, 0.001), "fast": noisy(rng, 60, 1e-5, 0.001)}})
    return replace(run, spec=replace(run.spec, source="measured")) if measured else run


def test_compare_marks_a_sol_above_one_against_measured_peaks_in_every_format() -> None:
    from solbench.analysis.compare import compare_impls
    from solbench.report.compare_console import comparison_table
    from solbench.report.compare_json import comparison_json
    from solbench.report.markdown import comparison_markdown

    def text(c) -> str:
        console = Console(width=250, record=True, file=io.StringIO())
        console.print(comparison_table(c))
        return console.export_text()

    measured = compare_impls(_two_impls(True), "slow", "fast")
    legend = "! above 1 (100%) against peaks measured on this host"
    assert measured.rows[0].sol_b is not None and measured.rows[0].sol_b > 1
    assert "0.50 → 10.00 !" in text(measured) and legend in text(measured)
    md = comparison_markdown(measured)
    assert "| 10.00 ! |" in md and legend in md and "| 0.50 |" in md
    assert comparison_json(measured)["measured_peaks"] == [measured.measured_peaks[0]] * 2 != [""] * 2
    datasheet = compare_impls(_two_impls(False), "slow", "fast")
    assert "10.00 !" not in text(datasheet) and legend not in text(datasheet)
    assert "10.00 !" not in comparison_markdown(datasheet) and comparison_json(datasheet)["measured_peaks"] == ["", ""]


def test_a_ci_over_added_rounds_is_marked_against_the_rounds_target_not_one_rounds() -> None:
    run = _run(noise=0.0005)
    p = replace(run.protocol, target_rel_ci=0.01, rounds=3, max_rounds=16, rounds_target=0.02)
    case = run.cases[0]
    r = case.impls[0]
    assert r.timing is not None

    def at(half: float, rounds: tuple[int, ...]) -> RunResult:
        t = replace(r.timing, ci_low=1.0 - half, ci_high=1.0 + half, median=1.0, samples=(1.0,) * len(rounds),
                    rounds=rounds)
        return replace(run, protocol=p, cases=(replace(case, impls=(replace(r, timing=t),)),))

    three = (0, 0, 1, 1, 2, 2)
    met = at(0.015, three)  # ±1.5% over rounds: within the ±2% the added rounds aimed at
    assert flags.ci_target(met.cases[0].impls[0].timing, p) == 0.02
    assert flags.result_marks(met.cases[0].impls[0], p) == "" and "~" not in flags.legend(met)
    wide = at(0.03, three)
    assert flags.result_marks(wide.cases[0].impls[0], p) == "~"
    assert "~ the 95% CI over rounds is wider than the rounds target ±2%" in flags.legend(wide)
    one = at(0.015, (0,) * 6)  # one round: its own sampling target, ±1%
    assert flags.result_marks(one.cases[0].impls[0], p) == "~"
    assert "~ the 95% CI is wider than the target ±1%" in flags.legend(one)
    no_added = replace(met, protocol=replace(p, max_rounds=0, rounds_target=0.0))  # --repeat 3, none added
    assert flags.result_marks(no_added.cases[0].impls[0], no_added.protocol) == "~"


def test_an_invalid_result_shows_its_measured_time_in_every_format() -> None:
    """An INVALID result (faster than the least possible time) keeps its timing, which is what makes it
    INVALID; Markdown printed it as a failure with no time, where the console, HTML and CSV show it."""
    from solbench.report.units import format_seconds

    run = make_run({"c": {"fast": noisy(np.random.default_rng(2), 30, 1e-5, 0.01)}})
    (case,) = run.cases
    (r,) = case.impls
    run = replace(run, cases=(replace(case, impls=(replace(r, status="invalid", score=None),)),))
    shown = format_seconds(r.timing.median)
    row = next(line for line in run_markdown(run).splitlines() if "| fast |" in line)
    assert f"| fast | {shown} |" in row and "| INVALID |" in row
    assert shown in report_html([run])
