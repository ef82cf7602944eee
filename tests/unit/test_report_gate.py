import io
import json
import math
import xml.etree.ElementTree as ET
from dataclasses import replace

import numpy as np
import pytest
from rich.console import Console

from solbench.analysis.compare import compare_runs
from solbench.analysis.gate import GateResult, gate
from solbench.report.compare_console import comparison_table, gate_table
from solbench.report.compare_json import comparison_json, gate_json
from solbench.report.junit import gate_junit, refused_junit
from solbench.report.markdown import comparison_markdown, gate_markdown
from solbench.report.units import format_ci, format_p, format_percent, format_ratio, format_seconds
from tests.unit.factories import make_env, make_run, noisy

N = 30


def _gate_result(threshold: float | None = None, **kwargs) -> GateResult:
    """PASS, REGRESSION, INCONCLUSIVE (3 samples), MISSING, FASTER and BROKEN, one case each."""
    rng = np.random.default_rng(0)
    base = make_run({"ok": {"x": noisy(rng, N)}, "slow|pipe": {"x": noisy(rng, N)},
                     "tiny": {"x": noisy(rng, 3)}, "gone": {"x": noisy(rng, N)},
                     "fast": {"x": noisy(rng, N)}, "bad": {"x": noisy(rng, N)}},
                    workloads={"slow|pipe": "gemm"})
    cur = make_run({"ok": {"x": noisy(rng, N)}, "slow|pipe": {"x": noisy(rng, N, 1.3e-3)},
                    "tiny": {"x": noisy(rng, 3)}, "fast": {"x": noisy(rng, N, 0.5e-3)}, "bad": {"x": []}},
                   workloads={"slow|pipe": "gemm"}, statuses={"bad/x": "incorrect"},
                   messages={"bad/x": "max abs err 0.5 | atol 1e-5\nsee log"}, gate_thresholds={"gemm": 0.1},
                   **kwargs)
    return gate(base, cur, allow_cross_hardware=True, threshold=threshold)


def _comparison():
    rng = np.random.default_rng(1)
    a = make_run({"c1": {"x": noisy(rng, N)}, "c2": {"x": noisy(rng, N)}, "gone": {"x": noisy(rng, N)}})
    b = make_run({"c1": {"x": noisy(rng, N, 0.5e-3)}, "c2": {"x": noisy(rng, N)}, "new": {"x": noisy(rng, N)}})
    return compare_runs(a, b, label_a="main", label_b="pr")


@pytest.mark.parametrize(("x", "text"), [
    (1.234e-5, "12.3 µs"), (0.00123, "1.23 ms"), (2.5, "2.50 s"), (4.56e-7, "456 ns"),
    (0.99996e-3, "1.00 ms"), (999.4e-9, "999 ns"), (0.0, "0 s"), (None, "—"), (math.nan, "—"),
    (math.inf, "—"), (-2e-6, "-2.00 µs"),
])
def test_format_seconds(x, text):
    assert format_seconds(x) == text


def test_small_formatters():
    assert format_ratio(1.07123) == "1.071×" and format_ratio(None) == "—"
    assert format_ci(1.0212, 1.0944) == "[1.021, 1.094]" and format_ci(None, 1.0) == "—"
    assert (format_percent(0.05), format_percent(0.125)) == ("5%", "12.5%")
    assert (format_p(0.0432), format_p(3.2e-7), format_p(None)) == ("0.043", "3.2e-07", "—")


def test_ratios_never_print_as_the_edge_a_verdict_turns_on():
    """A PASS needs the CI below 1 + threshold: 1.0499 read "1.050" beside "+5%" (a stored H200 pair,
    issue16/session8); SLOWER needs the CI above 1: 1.0004 read "1.000"."""
    assert format_ci(0.9299, 1.049897, threshold=0.05) == "[0.9299, 1.0499]"
    assert format_ci(1.0003, 1.0006, threshold=0.05) == "[1.0003, 1.0006]"
    assert format_ratio(1.0004, threshold=0.05) == "1.0004×" and format_ratio(0.95237, threshold=0.05) == "0.95237×"
    assert format_ci(0.99, 1.05, threshold=0.05) == "[0.990, 1.050]"  # on the edge itself: as it is
    assert format_ci(0.9812, 1.0215, threshold=0.05) == "[0.981, 1.022]" and format_ratio(1.0, threshold=0.05) == "1.000×"
    g = _gate_result()
    ok = next(v for v in g.verdicts if v.verdict == "PASS")
    edge = replace(g, verdicts=(replace(ok, ratio=0.988, ci_low=0.9299, ci_high=1.049897),))
    for text in (gate_markdown(edge), _render(gate_table(edge))):
        assert "[0.9299, 1.0499]" in text and "1.050]" not in text


def test_gate_fixture_has_every_verdict():
    g = _gate_result()
    assert sorted(v.verdict for v in g.verdicts) == ["BROKEN", "FASTER", "INCONCLUSIVE", "MISSING", "PASS",
                                                      "REGRESSION"]


def test_gate_junit_parses_back_with_the_right_counts():
    g = _gate_result()
    root = ET.fromstring(gate_junit(g, suite_name="perf"))
    assert root.tag == "testsuites"
    suite = root.find("testsuite")
    assert suite.get("name") == "perf"
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped"), suite.get("errors")) == \
        ("6", "2", "2", "0")
    cases = {tc.get("name"): tc for tc in suite.findall("testcase")}
    assert set(cases) == {"ok/x", "slow|pipe/x", "tiny/x", "gone/x", "fast/x", "bad/x"}
    failure = cases["slow|pipe/x"].find("failure")
    assert failure is not None and failure.get("type") == "REGRESSION"
    assert "threshold +10% " in failure.text  # as the table's Threshold cell says it, not "+0.1"
    assert cases["slow|pipe/x"].get("classname") == "solbench.gemm"
    assert float(cases["slow|pipe/x"].get("time")) == pytest.approx(1.3e-3, rel=0.02)
    assert cases["tiny/x"].find("skipped").get("message").startswith("INCONCLUSIVE:")
    assert cases["gone/x"].find("skipped").get("message").startswith("MISSING:")
    assert list(cases["ok/x"]) == []
    broken = cases["bad/x"].find("failure")
    assert broken.get("type") == "BROKEN"
    assert broken.get("message") == "x on bad: ok in the baseline, INCORRECT in the current run: max abs err 0.5 | atol 1e-5"
    assert "status incorrect (baseline: ok)" in broken.text and "see log" in broken.text
    assert "last line of the worker" in broken.text
    assert cases["fast/x"].find("failure") is None and cases["fast/x"].find("skipped") is None
    assert cases["fast/x"].find("system-out").text.startswith("FASTER: ")
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["overall"] == "BROKEN" and props["exit_code"] == "1" and props["threshold"] == "per workload"
    explicit = ET.fromstring(gate_junit(_gate_result(threshold=0.05))).find("testsuite")
    assert {p.get("name"): p.get("value") for p in explicit.find("properties")}["threshold"] == "0.05"


def test_gate_junit_parses_when_a_message_holds_control_characters():
    """A failing implementation's message and log (``detail``) often hold ANSI colour codes, or any byte a
    kernel printed; XML 1.0 has no way to write most control characters, so the file did not parse. They are
    written as visible escapes, and the rest of the text is kept."""
    g = _gate_result()
    bad = next(v for v in g.verdicts if v.verdict == "BROKEN")
    coloured = replace(bad, reason="\x1b[31mRuntimeError: boom\x1b[0m \x07\x00",
                       detail="\x1b[33mwarning\x1b[0m\x0c\ttab\r\nnext line \ud800")
    doc = gate_junit(replace(g, verdicts=(coloured,)))
    failure = ET.fromstring(doc).find("testsuite/testcase/failure")
    assert failure.get("message") == "x on bad: \\x1b[31mRuntimeError: boom\\x1b[0m \\x07\\x00"
    assert "\\x1b[33mwarning\\x1b[0m\\x0c\ttab" in failure.text and "next line \\ud800" in failure.text
    error = ET.fromstring(refused_junit("runs refused: \x1b[1mtorch\x1b[0m")).find("testsuite/testcase/error")
    assert error.get("message") == "runs refused: \\x1b[1mtorch\\x1b[0m"


def test_gate_junit_records_fingerprint_differences():
    g = _gate_result(environment=make_env(driver="560.1"))
    suite = ET.fromstring(gate_junit(g)).find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["fingerprint_diff_0"].startswith("driver:")


def test_gate_markdown():
    md = gate_markdown(_gate_result())
    lines = md.splitlines()
    assert lines[0] == "### solbench gate: 💥 BROKEN"
    assert "1 broken, 1 regression, 0 still-broken, 1 inconclusive, 1 missing, 1 faster, 1 pass" in md
    assert "each workload's recorded gate_threshold, else 5%" in md
    table = [ln for ln in lines if ln.startswith("| ")]
    assert len(table) == 2 + 6  # header, separator, one row per case
    assert table[2].startswith("| bad | x | 1.00 ms | INCORRECT |") and "💥 BROKEN" in table[2]
    assert table[3].startswith("| slow\\|pipe | x |") and "❌ REGRESSION" in table[3]
    assert "+10% (workload)" in table[3] and "+5% |" in table[2]
    assert next(ln for ln in table if ln.startswith("| gone |")).startswith("| gone | x | 1.00 ms | absent |")
    assert "🚀 FASTER" in table[-2] and table[-1].startswith("| ok | x |")  # FASTER, then PASS rows last
    assert all(ln.count(" | ") == 8 for ln in table)  # escaped pipes do not add columns
    bullets = [ln for ln in lines if ln.startswith("- ")]
    assert len(bullets) == 5 and "too few samples" in md
    assert "- `bad/x`: BROKEN: ok in the baseline, INCORRECT in the current run: max abs err 0.5 \\| atol" in md
    assert "Compared across" not in md
    assert "threshold 5% (explicit, every case)" in gate_markdown(_gate_result(threshold=0.05))


def test_gate_markdown_says_what_broken_means_as_the_gate_decides_it():
    """A case failing now is BROKEN whether or not it was ok in the baseline; the Markdown (the CI step
    summary) defined it as 'ok in the baseline, failing now', so a BROKEN case there read as a working
    baseline broken by the change."""
    rng = np.random.default_rng(2)
    base = make_run({"ok": {"x": noisy(rng, N)}, "bad": {"x": []}}, statuses={"bad/x": "error"})
    cur = make_run({"ok": {"x": noisy(rng, N)}, "bad": {"x": []}}, statuses={"bad/x": "error"})
    g = gate(base, cur)
    assert g.overall == "STILL-BROKEN"
    md = gate_markdown(g)
    assert "ERROR in the current run (ERROR in the baseline too: not broken by this change" in md
    assert "Broken = ok in the baseline" not in md and "still-broken = failing now and in the baseline" in md


def test_gate_markdown_warns_on_cross_hardware():
    md = gate_markdown(_gate_result(environment=make_env(driver="560.1")))
    assert "Compared across different hardware" in md and "driver: 550.54.15" in md


def test_comparison_markdown():
    md = comparison_markdown(_comparison())
    assert md.startswith("### solbench compare: pr vs main\n")
    table = [ln for ln in md.splitlines() if ln.startswith("| ")]
    assert table[0] == "| Case | Impl | main | pr | pr/main | CI | SOL main | SOL pr | p | Verdict |"
    assert len(table) == 4 and "FASTER" in table[2] and "SAME" in table[3]
    assert "**Only in main** (1): `gone/x` (pr: absent)" in md and "**Only in pr** (1): `new/x` (main: absent)" in md
    assert "**Geomean speedup of pr over main: 1.4" in md  # sqrt(2 * 1) ~ 1.41


def _render(table) -> str:
    console = Console(width=160, file=io.StringIO(), color_system=None)
    console.print(table)
    return console.file.getvalue()


def test_console_tables_render():
    text = _render(comparison_table(_comparison()))
    assert "FASTER" in text and "only in main (pr: absent)" in text and "only in pr (main: absent)" in text
    assert "geomean" in text
    g = _gate_result()
    t = gate_table(g)
    assert t.row_count == 6 and len(t.columns) == 9
    text = _render(t)
    assert text.index("BROKEN") < text.index("REGRESSION") < text.index("FASTER") < text.index("PASS")
    assert "BROKEN (exit 1)" in text and "INCORRECT in the current run" in text
    # ab exits 4 where an implementation of the current tree failed: the caption says so, and the gate's own
    assert "BROKEN (exit 4; the gate's own: 1)" in _render(gate_table(g, exit_code=4))


def test_json_helpers_are_json_ready():
    c = comparison_json(_comparison())
    round_trip = json.loads(json.dumps(c, allow_nan=False))
    assert round_trip["kind"] == "comparison" and len(round_trip["rows"]) == 2
    assert round_trip["only_in_a"] == ["gone/x"] and round_trip["counts"]["FASTER"] == 1
    assert round_trip["rows"][0]["median_b"] == pytest.approx(0.5e-3, rel=0.02)  # seconds
    g = json.loads(json.dumps(gate_json(_gate_result()), allow_nan=False))
    assert (g["overall"], g["exit_code"], g["threshold"]) == ("BROKEN", 1, None)
    assert g["counts"] == {"BROKEN": 1, "REGRESSION": 1, "STILL-BROKEN": 0, "INCONCLUSIVE": 1, "MISSING": 1,
                           "FASTER": 1, "PASS": 1}
    missing = next(v for v in g["verdicts"] if v["verdict"] == "MISSING")
    assert missing["ratio"] is None and missing["status_cur"] is None
    broken = next(v for v in g["verdicts"] if v["verdict"] == "BROKEN")
    assert (broken["status_base"], broken["status_cur"], broken["impl"]) == ("ok", "incorrect", "x")


def test_gate_and_compare_name_the_device_the_runs_were_measured_on():
    """The run table's header names its device; a gate's or a comparison's table, Markdown and JSON did
    not, so a CI log or a pasted table did not say which GPU its times came from."""
    h100 = "NVIDIA H100 80GB HBM3 (h100-sxm)"
    g, c = _gate_result(), _comparison()
    assert g.device == c.device == h100
    for text in (_render(gate_table(g)), _render(comparison_table(c))):
        assert f" on {h100}" in text.splitlines()[0]
    assert f"Measured on {h100}." in gate_markdown(g) and f"Measured on {h100}." in comparison_markdown(c)
    assert gate_json(g)["device"] == comparison_json(c)["device"] == h100
    # allowed across hardware, each side's
    other = _gate_result(environment=make_env(device_name="NVIDIA H200", spec_id="h200-sxm"))
    assert other.device == f"{h100}, NVIDIA H200 (h200-sxm)"


@pytest.mark.parametrize("module", ["markdown", "junit", "compare_console", "compare_json", "units"])
def test_reporters_do_no_io(module):
    import importlib
    import inspect

    source = inspect.getsource(importlib.import_module(f"solbench.report.{module}"))
    assert "print(" not in source and "open(" not in source


def test_case_ids_with_brackets_render_literally():
    import io

    from rich.console import Console

    from solbench.analysis.compare import compare_runs
    from solbench.report.compare_console import comparison_table
    from tests.unit.factories import make_run

    run = make_run({"o_proj[tokens=16,bfloat16]": {"fused": [1e-3] * 10}})
    buf = io.StringIO()
    Console(file=buf, width=200).print(comparison_table(compare_runs(run, run)))
    assert "o_proj[tokens=16,bfloat16]" in buf.getvalue() and "impl fused" in buf.getvalue()
