"""A dry run (``run --dry-run``) saved and shown again: its costs and T_SOL are what it holds, and
nothing it prints may read as a measurement."""

from __future__ import annotations

import pytest

from solbench import api
from solbench.report.html import report_html
from solbench.report.markdown import run_markdown
from solbench.report.units import format_bytes, format_flops, format_seconds


def _dry():
    return api.dry_run(["workloads/attn.yaml"], api.hardware_spec("b200"), ["o_proj"], select=("tokens=2048",))


def test_markdown_of_a_dry_run_shows_its_costs_and_claims_no_timing() -> None:
    run = _dry()  # show --markdown printed empty time/SOL tables under "median of adaptive samples"
    md = run_markdown(run)
    assert "dry run" in md and "nothing was measured" in md
    assert "median of adaptive samples" not in md and "| time |" not in md and "timer `none`" not in md
    for case in run.cases:  # every case's row: FLOPs, bytes, T_SOL and bound, as the console's dry table
        row = next(line for line in md.splitlines() if line.startswith(f"| tokens=2048 hidden=4096 {case.dtype} |"))
        for cell in (format_flops(case.cost.tensor_flops), format_bytes(case.cost.fused_bytes),
                     format_seconds(case.t_sol), case.bound):
            assert f"| {cell} |" in row


def test_html_of_a_dry_run_shows_its_costs() -> None:
    run = _dry()  # report --html drew empty results tables (status, median, SOL) for a dry run
    page = report_html([run])
    for case in run.cases:
        assert f"<td>{format_seconds(case.t_sol)}</td>" in page
        assert f"<td>{format_flops(case.cost.tensor_flops)}</td>" in page
    assert "<th>median</th>" not in page


def test_a_dry_run_names_the_own_t_sol_of_an_implementation_scored_against_another_peak() -> None:
    """o_proj's fp8 implementation is scored against the FP8 peak and its 1-byte weight; a dry run printed
    only the case's bf16 T_SOL (30.5 µs on a B200 at 2048 tokens), even with -i fp8."""
    run = api.dry_run(["workloads/attn.yaml"], api.hardware_spec("b200"), ["o_proj"], ["fp8"],
                      select=("tokens=2048,bfloat16",))
    (case,) = run.cases
    assert case.t_sol == 2 * 2048 * 4096**2 / 2250e12  # the case's: bf16 tensor peak
    fp8 = 2 * 2048 * 4096**2 / 4500e12  # B200 dense FP8 4.5 PFLOP/s: 15.3 µs, compute-bound (67 MB at 8 TB/s: 8.4 µs)
    (note,) = [n for n in run.notes if "fp8" in n]
    assert f"{case.case_id} {fp8 * 1e6:.3g} µs" in note and "float8_e4m3fn peak" in note
    assert "fp8_dynamic" not in note  # -i fp8: the implementation asked about only


def test_a_dry_run_says_when_a_collectives_t_sol_has_no_link_term() -> None:
    """The H20's spec has no interconnect figure: its all-reduce T_SOL is the HBM term alone (bound
    memory, 0.52 µs at 1 MiB against the H200's 2.33 µs over NVLink), and a dry run said nothing of it
    where a measured run notes it on every result."""
    def dry(spec: str):
        return api.dry_run(["workloads/collectives.yaml"], api.hardware_spec(spec), ["allreduce"], select=("mib=1",))

    (case,) = dry("h20").cases
    assert case.bound == "memory" and case.cost.bus_bytes > 0
    assert any("no interconnect bandwidth" in n and "no link term" in n for n in dry("h20").notes)
    assert not any("link term" in n for n in dry("h200").notes)  # NVLink known: the link sets T_SOL
    assert not any("link term" in n for n in _dry().notes)  # no collective


def test_html_of_a_dry_run_has_no_empty_sample_histograms(tmp_path) -> None:
    """report --html inlined a blank 'sample histograms' figure under every workload of a dry run (and of a
    workload where nothing was timed): nothing was sampled, so no figure is drawn."""
    import pytest

    pytest.importorskip("matplotlib")
    from solbench.cli.tools import _figures

    _, page = _figures([_dry()], tmp_path, True, None, None, None, "dry")
    assert page is not None and page.count("<img") == 1  # the roofline alone
    assert "sample histograms" not in page


def test_a_dry_runs_intensity_has_three_significant_figures() -> None:
    """FLOP/B was printed to one decimal: 0.125 as "0.1" and anything under 0.05 as "0.0" (a copy or
    a reduction read as zero FLOP per byte)."""
    import dataclasses

    from solbench.report.dry_cells import COLUMNS, cells

    case = _dry().cases[0]
    at = COLUMNS.index("FLOP/B")
    shown = {x: cells(dataclasses.replace(case, intensity=x))[at]
             for x in (0.125, 0.0123456, 0.0004, 0.09996, 12.345, 4096.0, 0.0)}
    assert shown == {0.125: "0.125", 0.0123456: "0.0123", 0.0004: "0.000400", 0.09996: "0.100", 12.345: "12.3",
                     4096.0: "4096", 0.0: "0"}


def test_a_dry_runs_own_t_sol_note_prints_its_time_as_the_tables_do() -> None:
    """The note chose the unit before rounding to three significant figures: an own T_SOL of 999.8 µs
    read "1e+03 µs" (and 1234 s "1.23e+03 s") where every table prints "1.00 ms"."""
    run = api.dry_run(["workloads/attn.yaml"], api.hardware_spec("b200"), ["o_proj"], ["fp8"],
                      select=("bfloat16",), overrides={"tokens": [134080]})
    (case,) = run.cases
    fp8 = 2 * 134080 * 4096**2 / 4500e12  # compute-bound at the FP8 peak: 999.8 µs
    assert 999.5e-6 < fp8 < 1e-3
    (note,) = [n for n in run.notes if "fp8" in n]
    assert f"{case.case_id} {format_seconds(fp8)} (compute)" in note
    assert "e+" not in note


def test_csv_of_a_dry_run_has_a_row_per_case_with_its_costs() -> None:
    """report --csv of a dry run wrote the header only: its cases hold no implementation result, and the CSV
    had a row per case x implementation; each case now has a row of its costs, T_SOL and bound."""
    import csv
    import io

    from solbench.report.csv import run_csv

    run = _dry()
    rows = list(csv.DictReader(io.StringIO(run_csv([run]))))
    assert [r["case_id"] for r in rows] == [c.case_id for c in run.cases] and rows
    for row, case in zip(rows, run.cases, strict=True):
        assert float(row["t_sol_s"]) == pytest.approx(case.t_sol, rel=1e-14) and row["bound"] == case.bound
        assert float(row["fused_bytes"]) == case.cost.fused_bytes and row["impl"] == "" and row["median_s"] == ""


def test_a_dtype_the_card_has_no_tensor_unit_for_says_which_peak_it_is_scored_against() -> None:
    """bf16 on a T4 (no bf16 tensor unit): the matrix FLOPs were priced at the vector peak and the tables said
    only "compute"; the fp8 note said "the float8_e4m3fn peak" on cards that have none."""
    t4 = api.hardware_spec("t4")
    run = api.dry_run(["workloads/attn.yaml"], t4, ["o_proj"], select=("tokens=64",))
    (note,) = [n for n in run.notes if "tensor unit:" in n]
    bf16 = [c for c in run.cases if c.dtype == "bfloat16"]
    assert note.startswith(f"peaks: {t4.name} has no bfloat16 tensor unit: the matrix FLOPs of {len(bf16)} ")
    assert bf16[0].peaks.tensor_flops is None and bf16[0].bound == "compute"  # what the note explains
    assert bf16[0].t_sol == pytest.approx(bf16[0].cost.tensor_flops / bf16[0].peaks.vector_flops)
    fp8 = [n for n in run.notes if "o_proj fp8 is scored" in n]
    assert fp8 and "no float8_e4m3fn tensor unit here" in fp8[0] and "the float8_e4m3fn peak" not in fp8[0]
    h200 = api.dry_run(["workloads/attn.yaml"], api.hardware_spec("h200"), ["o_proj"], select=("tokens=64",))
    assert not [n for n in h200.notes if "tensor unit" in n]
    assert "the float8_e4m3fn peak" in next(n for n in h200.notes if "o_proj fp8 is scored" in n)
