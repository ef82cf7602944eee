"""Options either act or are refused: no option is silently ignored; commands name what they read."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from solbench.cli import main
from solbench.results import store

FAST = ["--budget", "0.02", "--min-samples", "3", "--max-samples", "10", "-q"]
DOUBLE = "tests/data/double.yaml"


def _one_line_exit_2(result) -> str:  # type: ignore[no-untyped-def]
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


@pytest.mark.parametrize(("args", "says"), [
    (["--timer", "graph"], "--timer graph needs a CUDA GPU"),
    (["--timer", "cupti"], "--timer cupti needs a CUDA GPU"),
    (["--flush", "write"], "--flush write flushes a GPU's L2"),
    (["--launch", "graph"], "--launch graph replays CUDA graphs"),
    (["--timer", "cupti", "--launch", "graph"], "--launch graph is a way of the cold timer's"),
])
def test_gpu_timing_options_are_refused_on_the_cpu(args: list[str], says: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", DOUBLE, "--device", "cpu", *args, "--results-dir", str(tmp_path), *FAST])
    assert says in _one_line_exit_2(result)
    assert not list(tmp_path.rglob("*.json"))


def test_junit_without_a_gate_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", DOUBLE, "--device", "cpu", "--junit", str(tmp_path / "j.xml"), *FAST])
    assert "--gate-against" in _one_line_exit_2(result)
    assert not (tmp_path / "j.xml").exists()


def test_output_and_save_both_act(tmp_path: Path) -> None:
    out, results = tmp_path / "run.json", tmp_path / "results"
    result = CliRunner().invoke(main, ["run", DOUBLE, "--device", "cpu", "-i", "baseline", "-o", str(out),
                                       "--save", "head", "--results-dir", str(results), *FAST])
    assert result.exit_code == 0, result.output
    named = list(results.rglob("*_head.json"))
    assert len(named) == 1 and out.is_file()
    assert store.load(named[0]).cases == store.load(out).cases


def test_dry_run_output_and_save_both_act(tmp_path: Path) -> None:
    out, results = tmp_path / "dry.json", tmp_path / "results"
    result = CliRunner().invoke(main, ["run", "workloads/attn.yaml", "--gpu", "h200", "--dry-run", "-o", str(out),
                                       "--save", "what_if", "--results-dir", str(results)])
    assert result.exit_code == 0, result.output
    assert out.is_file() and len(list(results.rglob("*_what_if.json"))) == 1


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    """A results folder holding one run saved as ``nightly`` (a stored H200 run)."""
    folder = tmp_path / "results" / "h200"
    folder.mkdir(parents=True)
    src = Path("results/h200/issue8-ab-same-baseline.json")
    (folder / "20260101T000000-000000-aaaa_nightly.json").write_text(src.read_text())
    return tmp_path / "results"


def test_show_compare_and_gate_name_the_files_they_read(saved: Path) -> None:
    path = next(saved.rglob("*_nightly.json"))
    show = CliRunner().invoke(main, ["show", "--results-dir", str(saved), "--markdown"])
    assert show.exit_code == 0 and f"read run: {path}" in show.stderr and "read run" not in show.stdout
    cmp = CliRunner().invoke(main, ["compare", "nightly", str(path), "--results-dir", str(saved)])
    assert cmp.exit_code == 0, cmp.output
    assert f"read A (nightly): {path}" in cmp.stderr and f"read B ({path}): {path}" in cmp.stderr
    gate = CliRunner().invoke(main, ["gate", "--baseline", "nightly", "--current", str(path), "--results-dir",
                                     str(saved), "--threshold", "5%"])
    assert f"read baseline: {path}" in gate.stderr and f"read current: {path}" in gate.stderr


def test_a_run_compared_with_itself_is_same_or_pass_everywhere(saved: Path) -> None:
    path = str(next(saved.rglob("*_nightly.json")))
    cmp = CliRunner().invoke(main, ["compare", path, path, "--json"])
    assert cmp.exit_code == 0
    import json

    rows = json.loads(cmp.stdout)["rows"]
    assert rows and {r["verdict"] for r in rows} == {"SAME"}
    gate = CliRunner().invoke(main, ["gate", "--baseline", path, "--current", path, "--json"])
    assert gate.exit_code == 0 and {v["verdict"] for v in json.loads(gate.stdout)["verdicts"]} == {"PASS"}


def test_compare_names_the_run_that_is_missing(saved: Path) -> None:
    result = CliRunner().invoke(main, ["compare", "nightly", "head", "--results-dir", str(saved)])
    assert _one_line_exit_2(result).startswith("error: head: no such result file or saved run")
    result = CliRunner().invoke(main, ["compare", "head", "nightly", "--results-dir", str(saved)])
    assert _one_line_exit_2(result).startswith("error: head: no such result file or saved run")


def test_report_without_matplotlib_writes_nothing(saved: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    csv, html = tmp_path / "out" / "r.csv", tmp_path / "out" / "r.html"
    result = CliRunner().invoke(main, ["report", "nightly", "--csv", str(csv), "--html", str(html),
                                       "--results-dir", str(saved)])
    line = _one_line_exit_2(result)
    assert "pip install 'solbench[plot]'" in line and "nothing was written" in line
    assert not csv.exists() and not html.exists()


def test_report_gate_sections_need_html(saved: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["report", "nightly", "--csv", str(tmp_path / "r.csv"), "--gate-against",
                                       "nightly", "--results-dir", str(saved)])
    assert "add --html FILE" in _one_line_exit_2(result)
    assert not (tmp_path / "r.csv").exists()


def test_the_progress_bar_shows_an_eta(monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.progress import TimeRemainingColumn

    from solbench.cli.common import ProgressBar

    monkeypatch.setenv("SOLBENCH_PROGRESS", "1")
    bar = ProgressBar(quiet=False)
    with bar as progress:
        progress("start", {"cases": 4})
        progress("case_done", {"case": "c"})
        assert bar._bar is not None
        assert any(isinstance(c, TimeRemainingColumn) for c in bar._bar.columns)
        assert bar._bar.tasks[0].completed == 1 and bar._bar.tasks[0].total == 4


def test_gate_against_a_run_launched_another_way_is_refused_before_measuring(tmp_path: Path) -> None:
    import json

    first = tmp_path / "first.json"
    result = CliRunner().invoke(main, ["run", DOUBLE, "--device", "cpu", "-i", "baseline", "-o", str(first), *FAST])
    assert result.exit_code == 0, result.output
    graphed = tmp_path / "graphed.json"
    data = json.loads(first.read_text())
    data["protocol"]["launch"] = "graph"  # as a GPU run with --launch graph records it
    graphed.write_text(json.dumps(data))
    out = tmp_path / "second.json"
    result = CliRunner().invoke(main, ["run", DOUBLE, "--device", "cpu", "-i", "baseline", "--gate-against", str(graphed),
                                       "-o", str(out), *FAST])
    line = _one_line_exit_2(result)
    assert f"--gate-against {graphed} was timed with --launch graph" in line
    assert not out.exists()  # refused before anything was measured


def test_a_ci_log_gets_a_plain_line_a_case(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from solbench.cli.common import ProgressBar

    monkeypatch.delenv("SOLBENCH_PROGRESS", raising=False)  # stderr here is no terminal
    with ProgressBar(quiet=False) as progress:
        progress("start", {"cases": 2})
        progress("case_done", {"case": "o_proj[tokens=16]"})
        progress("more", {"cases": 1, "rounds": 4, "points": 3, "of": 16})
        progress("case_done", {"case": "o_proj[tokens=64]", "rounds": 2})
    err = capsys.readouterr().err
    assert "solbench: [1/2] o_proj[tokens=16]" in err
    assert "solbench: 4 more round(s) for 3 point(s)" in err
    assert "solbench: [3/3] o_proj[tokens=64]" in err and "\x1b" not in err  # no control codes in a log
    with ProgressBar(quiet=True) as progress:
        progress("start", {"cases": 1})
        progress("case_done", {"case": "c"})
    assert capsys.readouterr().err == ""


def test_compare_of_runs_with_no_case_in_common_lists_them_and_exits_2() -> None:
    a, b = "results/h200/resnet50_forward-2.json", "results/h200/issue8-ab-same-baseline.json"
    result = CliRunner().invoke(main, ["compare", a, b, "--json"])
    assert result.exit_code == 2, result.output
    import json

    shown = json.loads(result.stdout)  # the one-sided keys are still printed for a script to read
    assert shown["rows"] == [] and len(shown["only_in_a"]) == 3 and len(shown["only_in_b"]) == 2
    assert "nothing compared: no case was measured on both sides (3 measured in" in result.stderr


@pytest.mark.parametrize(("args", "says"), [
    (["--timer", "cupti", "--tuned", "pyproject.toml"], "--timer, --tuned: a dry run measures nothing"),
    (["--gate-against", "nightly"], "--gate-against: a dry run measures nothing"),
    (["--repeat", "3", "--seed", "1"], "--seed, --repeat: a dry run measures nothing"),
    (["--device", "cpu"], "--gpu prices the cases on a named spec; --device on a detected one"),
])
def test_a_dry_run_refuses_what_it_would_ignore(args: list[str], says: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", DOUBLE, "--dry-run", "--gpu", "h200", *args, "-o",
                                       str(tmp_path / "dry.json")])
    assert says in _one_line_exit_2(result)
    assert not (tmp_path / "dry.json").exists()


def test_a_dry_run_without_gpu_prices_the_device_it_names(tmp_path: Path) -> None:
    out = tmp_path / "dry.json"
    result = CliRunner().invoke(main, ["run", DOUBLE, "--dry-run", "--device", "cpu", "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    assert store.load(out).environment.device_kind == "cpu"


@pytest.mark.parametrize("outputs", [["--html", "r.out", "--png", "r.out"], ["--csv", "r.out", "--png", "./r.out"]])
def test_report_refuses_two_outputs_in_one_file(outputs: list[str], saved: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the second written replaced the first, and the command said it wrote both
    result = CliRunner().invoke(main, ["report", "nightly", *outputs, "--results-dir", str(saved)])
    assert "give each its own file" in _one_line_exit_2(result)
    assert not (tmp_path / "r.out").exists()


@pytest.mark.parametrize(("args", "says"), [
    (["--csv", "r.csv", "--calibration", "nope.json"], "--calibration draws measured ceilings on the roofline"),
    (["--png", "r.png", "--title", "nightly"], "--title: used only by the HTML report"),
    (["--csv", "r.csv", "--fast-p", "2", "--title", "t"], "--title, --fast-p: used only by the HTML report"),
])
def test_report_refuses_options_its_outputs_do_not_use(args: list[str], says: str, saved: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["report", "nightly", *args, "--results-dir", str(saved)])
    assert says in _one_line_exit_2(result)
    assert not list(tmp_path.glob("r.*"))



def test_report_refuses_another_devices_calibration(saved: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    import json

    theirs = json.loads(next(Path("results/h200/calibration").rglob("*.json")).read_text())
    theirs.update(spec_id="b200", device_name="NVIDIA B200")  # the run is an H200's: B200 ceilings would be drawn
    cal = tmp_path / "b200.json"
    cal.write_text(json.dumps(theirs))
    png = tmp_path / "r.png"
    result = CliRunner().invoke(main, ["report", "nightly", "--png", str(png), "--calibration", str(cal),
                                       "--results-dir", str(saved)])
    assert result.exit_code == 2 and "measured on b200 (NVIDIA B200), a run on h200" in result.output, result.output
    assert not png.exists()
    same = CliRunner().invoke(main, ["report", "nightly", "--png", str(png), "--calibration",
                                     str(next(Path("results/h200/calibration").rglob("*.json"))),
                                     "--results-dir", str(saved)])
    assert same.exit_code == 0, same.output


@pytest.mark.parametrize(("args", "says"), [
    (["show", "nightly", "--fast-p", "nan"], "--fast-p nan: p must be a finite number"),
    (["show", "nightly", "--fast-p", "inf", "--json"], "--fast-p inf: p must be a finite number"),
    (["report", "nightly", "--html", "r.html", "--fast-p", "1", "--fast-p", "nan"], "--fast-p nan: p must be"),
    (["show", "nightly", "--fast-p", "2"], "--fast-p: the run holds no KernelBench or SOL-ExecBench problem"),
    (["report", "nightly", "--html", "r.html", "--fast-p", "2"], "--fast-p: the run holds no KernelBench"),
    (["show", "nightly", "--harness", "--fast-p", "1"], "--harness shows no suite summary"),
])
def test_fast_p_is_refused_where_it_cannot_act(args: list[str], says: str, saved: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # NaN was shown as a fast_nan column (and "NaN" in the JSON); a p given for a run
    result = CliRunner().invoke(main, [*args, "--results-dir", str(saved)])  # of no suite problem was ignored
    assert says in result.output and result.exit_code == 2, result.output
    assert "Traceback" not in result.output and not (tmp_path / "r.html").exists()


def test_show_of_a_folder_says_it_is_a_folder(saved: Path) -> None:
    result = CliRunner().invoke(main, ["show", str(saved)])  # was "no such result file or saved run in results"
    assert _one_line_exit_2(result).startswith(f"error: {saved}: a folder, not a result file")


def test_show_of_a_pipe_says_it_is_a_pipe(tmp_path: Path) -> None:
    import os

    pipe = tmp_path / "pipe"  # as /dev/stdin is under `cat run.json | solbench show /dev/stdin`
    os.mkfifo(pipe)
    result = CliRunner().invoke(main, ["show", str(pipe)])  # was "no such result file or saved run in results"
    assert _one_line_exit_2(result).startswith(f"error: {pipe}: not a regular file (a pipe or device)")


def test_the_latest_run_says_which_newer_files_it_passed_over(saved: Path) -> None:
    import os

    path = next(saved.rglob("*_nightly.json"))
    cut = path.with_name("20260102T000000-000000-bbbb_cut.json")
    cut.write_text(path.read_text()[:500])  # a run cut short: not JSON
    log = path.with_name("20260102T000000-000000-cccc_tune.json")
    log.write_text('{"kind": "tune"}')  # other solbench JSON: passed silently
    for p in (cut, log):
        os.utime(p, (path.stat().st_mtime + 60, path.stat().st_mtime + 60))
    result = CliRunner().invoke(main, ["show", "--results-dir", str(saved), "--json"])
    assert result.exit_code == 0, result.output
    assert f"warning: passed over {cut}, newer but not readable JSON" in result.stderr
    assert str(log) not in result.stderr and f"read run: {path}" in result.stderr


def test_list_of_a_folder_with_no_workload_file_is_an_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["list", str(tmp_path)])
    assert f"{tmp_path}: a folder with no workload file (.yaml, .yml)" in _one_line_exit_2(result)


def test_list_of_a_folder_reads_yml_workload_files_too(tmp_path: Path) -> None:
    (tmp_path / "double.yml").write_text(Path("tests/data/double.yaml").read_text())
    result = CliRunner().invoke(main, ["list", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "double.yml" in result.output


def test_report_refuses_a_run_given_twice_and_names_incomplete_and_dry_runs(tmp_path):
    """report a.json a.json wrote every row twice; the CSV of an incomplete run, or of a dry run
    (no rows), said nothing of it, though the table and the HTML do."""
    from dataclasses import replace

    from solbench.results import store
    from tests.unit.factories import make_run

    run = make_run({"c": {"baseline": [1e-3] * 10}})
    store.save(run, tmp_path / "a.json")
    store.save(replace(run, complete=False, created="2026-01-01T00:00:00"), tmp_path / "inc.json")
    store.save(replace(run, created="2026-01-02T00:00:00", protocol=replace(run.protocol, timer="none")),
               tmp_path / "dry.json")
    a = str(tmp_path / "a.json")
    r = CliRunner().invoke(main, ["report", a, a])
    assert r.exit_code == 2 and f"{a}: the same run as {a} (given before it); give each run once" in r.output, r.output
    r = CliRunner().invoke(main, ["report", str(tmp_path / "inc.json"), str(tmp_path / "dry.json")])
    assert r.exit_code == 0, r.output
    assert "inc.json: an incomplete run (interrupted, or killed before its last save)" in r.output
    assert "dry.json: a dry run, nothing measured: the CSV has no rows for it" in r.output


@pytest.mark.parametrize(("args", "says"), [
    (["--timeout", "5"], "--timeout:"),
    (["--compile-jobs", "2"], "--compile-jobs:"),
    (["--compile-cache", "cache"], "--compile-cache:"),
])
def test_in_process_refuses_the_options_of_worker_processes(args: list[str], says: str, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["run", str(Path(__file__).parents[2] / DOUBLE), "--device", "cpu",
                                       "--in-process", *args, "--results-dir", str(tmp_path), *FAST])
    line = _one_line_exit_2(result)
    assert says in line and "--in-process" in line
    assert not list(tmp_path.rglob("*.json")) and not (tmp_path / "cache").exists()


def test_schedule_from_without_several_devices_is_refused(tmp_path: Path) -> None:
    times = tmp_path / "times.json"
    times.write_text("{}")
    result = CliRunner().invoke(main, ["run", DOUBLE, "--device", "cpu", "--schedule-from", str(times),
                                       "--results-dir", str(tmp_path), *FAST])
    assert "--schedule-from" in _one_line_exit_2(result) and "--devices" in result.output
    assert not (tmp_path / "cpu").exists()


@pytest.mark.parametrize(("args", "says"), [
    (["--rounds-target", "0.05"], "--rounds-target:"),
    (["--rounds-spread", "own"], "--rounds-spread own:"),
    (["--repeat", "2", "--max-rounds", "0", "--rounds-target", "0.05"], "--rounds-target:"),
])
def test_round_options_are_refused_where_no_round_is_added(args: list[str], says: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", DOUBLE, "--device", "cpu", *args, "--results-dir", str(tmp_path), *FAST])
    assert says in _one_line_exit_2(result)
    assert not list(tmp_path.rglob("*.json"))


def test_junit_over_the_run_output_is_refused_before_measuring(tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    base.write_text("{}")
    same = tmp_path / "out.json"
    result = CliRunner().invoke(main, ["run", DOUBLE, "--device", "cpu", "--gate-against", str(base), "-o", str(same),
                                       "--junit", str(same), "--results-dir", str(tmp_path), *FAST])
    assert "--junit" in _one_line_exit_2(result) and "-o" in result.output
    assert not same.exists()


def test_list_reads_kernelbench_problems_in_place_as_run_does() -> None:
    """`run KernelBench/level1` takes a folder of problems; `list` of the same folder was an error."""
    folder = Path("tests/data/kernelbench/level1")
    problems = sorted(p.stem for p in folder.glob("*.py"))
    result = CliRunner().invoke(main, ["list", str(folder)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert problems and all(f"level1_{stem}" in result.output for stem in problems)
