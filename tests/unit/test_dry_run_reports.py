"""A dry run (``run --dry-run``) saved and shown again: its costs and T_SOL are what it holds, and
nothing it prints may read as a measurement."""

from __future__ import annotations

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
