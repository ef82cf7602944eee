"""``solbench report`` end to end: a CPU run, then CSV, HTML and PNG (roofline against the CPU's
measured peaks)."""

import csv
import io
import json

import pytest
from click.testing import CliRunner

from solbench.cli import main
from solbench.results import store
from tests.unit.test_report_html import Page, assert_self_contained

FAST = ["--budget", "0.05", "--min-samples", "5", "--max-samples", "20"]


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("run") / "attn.json"
    result = CliRunner().invoke(main, ["run", "workloads/attn.yaml", "--device", "cpu", "-o", str(path), "-q", *FAST])
    assert result.exit_code == 0, result.output
    return path


def test_report_writes_csv_html_and_png_from_a_cpu_run(cpu_run, tmp_path):
    pytest.importorskip("matplotlib")
    html, png, table = tmp_path / "r.html", tmp_path / "r.png", tmp_path / "r.csv"
    result = CliRunner().invoke(main, ["report", str(cpu_run), "--html", str(html), "--png", str(png),
                                       "--csv", str(table)])
    assert result.exit_code == 0, result.output
    run = store.load(cpu_run)
    rows = list(csv.DictReader(io.StringIO(table.read_text())))
    assert len(rows) == sum(len(c.impls) for c in run.cases)
    assert {r["peaks_source"] for r in rows} == {"measured"}  # the CPU is scored against measured peaks
    assert png.read_bytes().startswith(b"\x89PNG")
    text = html.read_text()
    page = Page(text)
    assert_self_contained(page, text)
    workloads = {c.workload for c in run.cases}
    assert len(page.images) == 1 + len(workloads)  # roofline + a histogram per workload
    shown = [o for o in page.orders if o in (None, "given")]  # environment, protocol, a table per workload
    assert len(shown) == 2 + len(workloads)
    assert len(page.tables) == 2 + 4 * len(workloads)  # each workload's table also by time, by SOL, by speedup


def test_report_without_outputs_prints_csv(cpu_run):
    result = CliRunner().invoke(main, ["report", str(cpu_run)])
    assert result.exit_code == 0
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert rows and rows[0]["device"] and rows[0]["workload"] == "o_proj"


def test_report_with_a_gate_against_itself(cpu_run, tmp_path):
    pytest.importorskip("matplotlib")
    html = tmp_path / "g.html"
    result = CliRunner().invoke(main, ["report", str(cpu_run), "--html", str(html), "--gate-against", str(cpu_run)])
    assert result.exit_code == 0, result.output
    page = Page(html.read_text())
    assert any(h.startswith("Gate: ") for h in page.headings)
    verdicts = next(t for t in page.tables if t[0][:3] == ["case", "impl", "verdict"])
    measured = sum(1 for c in store.load(cpu_run).cases for r in c.impls
                   if r.status == "ok" and r.protocol.get("part") != "floor")  # the floor is never gated
    assert len(verdicts) - 1 == measured and {row[2] for row in verdicts[1:]} <= {"PASS", "INCONCLUSIVE"}


def test_report_errors_are_one_line_exit_2(cpu_run, tmp_path):
    runner = CliRunner()
    missing = runner.invoke(main, ["report", str(tmp_path / "nope.json"), "--csv", "-"])
    assert missing.exit_code == 2 and "no such result file" in missing.output
    assert len(missing.output.strip().splitlines()) == 1
    two = runner.invoke(main, ["report", str(cpu_run), str(cpu_run), "--html", str(tmp_path / "x.html"),
                               "--compare-to", str(cpu_run)])
    assert two.exit_code == 2 and "single RUN" in two.output
    bad = tmp_path / "cal.json"
    bad.write_text(json.dumps({"spec_id": "x"}))
    cal = runner.invoke(main, ["report", str(cpu_run), "--png", str(tmp_path / "p.png"), "--calibration", str(bad)])
    assert cal.exit_code == 2 and "not a solbench calibration" in cal.output



@pytest.mark.parametrize("other", ["--png", "--html"])
def test_report_refuses_two_outputs_to_stdout(tmp_path, other):
    """`--csv - --png -` kept one file per path: the PNG replaced the CSV on stdout, exit 0, the CSV lost."""
    result = CliRunner().invoke(main, ["report", "--results-dir", str(tmp_path), "--csv", "-", other, "-"])
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and len(result.output.splitlines()) == 1
    assert "-: also written by" in result.output and other in result.output and "--csv" in result.output

def test_the_reports_gate_gives_the_verdicts_of_solbench_gate(tmp_path):
    """The HTML gate section is `solbench gate`'s own result: single-round runs unconfirmed (a 30%
    slowdown between two processes is INCONCLUSIVE there, so here too), the run offset priced alike."""
    pytest.importorskip("matplotlib")
    import numpy as np

    from tests.unit.factories import make_run, noisy

    rng = np.random.default_rng(5)
    base = store.save(make_run({"c[n=1]": {"x": noisy(rng, 30)}, "d[n=1]": {"x": noisy(rng, 30)}}), tmp_path / "b.json")
    cur = store.save(make_run({"c[n=1]": {"x": noisy(rng, 30, 1.3e-3)}, "d[n=1]": {"x": noisy(rng, 30)}}),
                     tmp_path / "c.json")
    gate = CliRunner().invoke(main, ["gate", "--baseline", str(base), "--current", str(cur), "--json",
                                     "--results-dir", str(tmp_path)])
    by_gate = {(v["case_id"], v["impl"]): v["verdict"] for v in json.loads(gate.stdout)["verdicts"]}
    html = tmp_path / "g.html"
    result = CliRunner().invoke(main, ["report", str(cur), "--html", str(html), "--gate-against", str(base),
                                       "--results-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    table = next(t for t in Page(html.read_text()).tables if t[0][:3] == ["case", "impl", "verdict"])
    by_report = {(row[0], row[1]): row[2] for row in table[1:]}
    assert by_gate[("c[n=1]", "x")] == "INCONCLUSIVE"  # not REGRESSION between single runs
    assert by_report == by_gate


def test_report_refuses_gate_options_without_a_gate(cpu_run, tmp_path):
    for args, says in ((["--allow-cross-hardware"], "--allow-cross-hardware sets the gate"),
                       (["--run-sd", "1%"], "--run-sd prices the gate or comparison")):
        result = CliRunner().invoke(main, ["report", str(cpu_run), "--csv", str(tmp_path / "r.csv"), *args])
        assert result.exit_code == 2 and says in result.output, result.output
        assert not (tmp_path / "r.csv").exists()


@pytest.mark.parametrize("option", ["--gate-against", "--compare-to"])
def test_report_warns_of_a_run_gated_or_compared_with_itself(cpu_run, tmp_path, option):
    """gate and compare warn that a run compared with itself passes by construction (a CI job wired to the
    wrong file); report --gate-against and --compare-to gave the same verdicts without a word."""
    pytest.importorskip("matplotlib")
    result = CliRunner().invoke(main, ["report", str(cpu_run), "--html", str(tmp_path / "r.html"),
                                       option, str(cpu_run)])
    assert result.exit_code == 0, result.output
    assert f"warning: {cpu_run} is the same run as {cpu_run}" in result.stderr


@pytest.mark.parametrize("option", ["--gate-against", "--compare-to"])
def test_report_warns_of_an_incomplete_run_on_the_other_side(cpu_run, tmp_path, option):
    """gate and compare warn that an incomplete baseline's missing cases read as MISSING, not compared;
    report --gate-against and --compare-to did not."""
    import dataclasses

    pytest.importorskip("matplotlib")
    base = store.save(dataclasses.replace(store.load(cpu_run), complete=False), tmp_path / "base.json")
    result = CliRunner().invoke(main, ["report", str(cpu_run), "--html", str(tmp_path / "r.html"), option, str(base)])
    assert result.exit_code == 0, result.output
    assert f"warning: {option} {base}: the run is incomplete" in result.stderr


def test_the_saved_calibration_is_drawn_only_over_runs_of_its_device(tmp_path):
    """Without --calibration the roofline drew the first run's saved ceilings over every run's points,
    another GPU model's too: what --calibration FILE refuses, for that reason."""
    from solbench.cli.tools import _calibration
    from solbench.results.model import Calibration
    from tests.unit.factories import make_env, make_run

    h200 = make_env(device_name="NVIDIA H200", spec_id="h200-sxm", device_uuid="GPU-1234")
    cal = Calibration(created="2026-11-30T00:00:00+00:00", spec_id="h200-sxm", device_name="NVIDIA H200",
                      device_uuid="GPU-1234", bandwidth=4.08e12, tensor_peaks={"bf16": 680e12},
                      vector_peaks={"fp32": 50e12}, burst_peaks={}, protocol="test")
    store.save_calibration(cal, tmp_path)
    on_h200 = make_run({"c": {"baseline": [1e-3] * 5}}, environment=h200)
    on_h100 = make_run({"c": {"baseline": [2e-3] * 5}})
    assert _calibration(None, [on_h200], tmp_path) == cal
    assert _calibration(None, [on_h200, on_h100], tmp_path) is None


def test_report_refuses_a_comparison_that_compares_nothing(tmp_path):
    """compare exits 2 where no case was measured on both sides; report --compare-to wrote a comparison
    section of nothing compared (geomean —) and exited 0."""
    pytest.importorskip("matplotlib")
    from tests.unit.factories import make_run

    base = store.save(make_run({"c[n=1]": {"x": [1e-3, 1.1e-3, 1.2e-3] * 5}}), tmp_path / "base.json")
    cur = store.save(make_run({"d[n=1]": {"x": [1e-3, 1.1e-3, 1.2e-3] * 5}}), tmp_path / "cur.json")
    html = tmp_path / "r.html"
    result = CliRunner().invoke(main, ["report", str(cur), "--html", str(html), "--compare-to", str(base),
                                       "--results-dir", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert f"--compare-to {base}: nothing compared: no case was measured on both sides" in result.stderr
    assert not html.exists()


def test_the_reports_comparison_names_the_run_as_it_was_given(tmp_path):
    """`report head --compare-to nightly` headed its section "Comparison: run vs nightly" (its ratio
    "run/nightly"), where `solbench compare nightly head`, whose verdicts it gives, says "head vs nightly"."""
    pytest.importorskip("matplotlib")
    from tests.unit.factories import make_run

    samples = [1e-3, 1.1e-3, 1.2e-3] * 5
    base = store.save(make_run({"c[n=1]": {"x": samples}}), tmp_path / "base.json")
    cur = store.save(make_run({"c[n=1]": {"x": samples}}), tmp_path / "cur.json")
    html = tmp_path / "r.html"
    result = CliRunner().invoke(main, ["report", str(cur), "--html", str(html), "--compare-to", str(base),
                                       "--results-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    headings = Page(html.read_text()).headings
    assert f"Comparison: {cur} vs {base}" in headings, headings
