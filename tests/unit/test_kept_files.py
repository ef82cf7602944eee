"""A second round of hostile use: what a user keeps (tuned files, a run saved beside an interrupted
one, workload files) survives every command, malformed side files are one-line errors, and a
command's exit code and output say what happened. Each was a finding of a review: data lost, a
traceback (exit 5), or exit 0 for a failure."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from solbench.cli import main
from solbench.results import store
from tests.unit.factories import make_run, noisy

DATA = Path(__file__).resolve().parents[1] / "data"
TUNE = ["--device", "cpu", "--budget", "0.02", "--min-samples", "3", "--max-samples", "10", "--confirm-rounds", "1",
        "--margin", "1e9"]


def _invoke(*argv: str, **env: str):
    return CliRunner(env=env or None).invoke(main, list(argv))


def _tune_dir(tmp_path: Path, text: str | None = None) -> Path:
    shutil.copy(DATA / "tunable.py", tmp_path / "tunable.py")
    path = tmp_path / "t.yaml"
    path.write_text(text if text is not None else (DATA / "tune_cpu.yaml").read_text())
    return path


def _run_file(path: Path, scale: float = 1.0) -> Path:
    rng = np.random.default_rng(1)
    return store.save(make_run({"c": {"x": noisy(rng, 30, 1e-3 * scale, 0.01)}}, rounds=3), path)


def test_tune_never_writes_its_log_over_the_tuned_file_nor_replaces_another_devices(tmp_path):
    wl = _tune_dir(tmp_path)
    rdir = tmp_path / "r"
    first = _invoke("tune", str(wl), "-i", "chunked", "--results-dir", str(rdir), *TUNE)
    assert first.exit_code == 0, first.output
    tuned = rdir / "cpu" / "tuned.json"
    kept = tuned.read_text()
    onto = _invoke("tune", str(wl), "-i", "chunked", "--results-dir", str(rdir), "-o", str(tuned), *TUNE)
    assert onto.exit_code == 2 and "holds tuned configurations" in onto.output and tuned.read_text() == kept
    other = tmp_path / "h200_tuned.json"
    other.write_text(json.dumps({"format": "solbench-tuned/1", "spec_id": "h200", "device_name": "H200",
                                 "entries": [{"workload": "w", "impl": "i", "case_id": "c", "params": {"b": 1}}]}))
    theirs = other.read_text()
    mixed = _invoke("tune", str(wl), "-i", "chunked", "--tuned-file", str(other), "--results-dir", str(rdir), *TUNE)
    assert mixed.exit_code == 2 and "tuned on h200" in mixed.output and other.read_text() == theirs


def test_a_malformed_tuned_or_calibration_file_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff\xfe")
    run = _invoke("run", "tests/data/double.yaml", "-i", "baseline", "--tuned", str(bad), "--results-dir",
                  str(tmp_path / "r"))
    assert run.exit_code == 2 and "not UTF-8" in run.output, run.output
    saved = _run_file(tmp_path / "a.json")
    for text in ("[1, 2]", json.dumps({"schema_version": 2, "created": "x", "spec_id": "x", "device_name": "x",
                                        "device_uuid": None, "bandwidth": 0.0, "tensor_peaks": {},
                                        "vector_peaks": {}, "burst_peaks": {}, "protocol": "p"})):
        cal = tmp_path / "cal.json"
        cal.write_text(text)
        r = _invoke("report", str(saved), "--csv", str(tmp_path / "r.csv"), "--calibration", str(cal))
        assert r.exit_code == 2 and "add --png FILE or --html FILE" in r.output  # the CSV draws no roofline
        pytest.importorskip("matplotlib")
        r = _invoke("report", str(saved), "--png", str(tmp_path / "r.png"), "--calibration", str(cal))
        assert r.exit_code == 2 and str(cal) in r.output and "Traceback" not in r.output, r.output


def test_a_run_saved_beside_an_interrupted_one_is_never_removed(tmp_path):
    out = _run_file(tmp_path / "c.json")
    beside = tmp_path / "c.json.partial.json"
    beside.write_text("an interrupted run's record")
    r = _invoke("run", "tests/data/double.yaml", "-i", "baseline", "-o", str(out), "--force", "--budget", "0.05")
    assert r.exit_code == 2 and "c.json.partial.json exists" in r.output
    assert beside.read_text() == "an interrupted run's record" and store.load(out).cases


def test_tune_exits_4_when_the_implementation_is_wrong_in_every_configuration(tmp_path):
    text = (DATA / "tune_cpu.yaml").read_text().replace(
        "params: {chunk: 16}\n        tune:\n          space: {chunk: [16, 24]}",
        "params: {chunk: 24}\n        tune:\n          space: {chunk: [24, 48]}")
    assert "space: {chunk: [24, 48]}" in text
    r = _invoke("tune", str(_tune_dir(tmp_path, text)), "-i", "no_tail", "--results-dir", str(tmp_path / "r"), *TUNE)
    assert r.exit_code == 4 and "failed: chunked_add" in r.output, r.output


def test_show_refuses_two_views_at_once(tmp_path):
    saved = _run_file(tmp_path / "a.json")
    r = _invoke("show", str(saved), "--json", "--harness")
    assert r.exit_code == 2 and "give one" in r.output and not r.stdout.lstrip().startswith("where")


def test_spread_refuses_a_point_given_twice_even_where_the_runs_differ_elsewhere(tmp_path):
    rng = np.random.default_rng(3)
    shared = noisy(rng, 30, 1e-3, 0.01)
    runs = [make_run({"c1": {"x": shared}, "c2": {"x": noisy(rng, 30, 2e-3, 0.01)}}, rounds=3) for _ in range(2)]
    runs.append(make_run({"c1": {"x": noisy(rng, 30, 1e-3, 0.01)}, "c2": {"x": noisy(rng, 30, 2e-3, 0.01)}}, rounds=3))
    paths = [str(store.save(r, tmp_path / f"r{i}.json")) for i, r in enumerate(runs)]
    r = _invoke("spread", *paths)
    assert r.exit_code == 2 and "c1/x holds the same samples as in" in r.output, r.output


def test_a_case_measured_twice_is_refused_before_measuring(tmp_path):
    text = (DATA / "double.yaml").read_text().replace("parameters: {n: [64, 256]}", "cases: [{n: 64}, {n: 256}]")
    wl = tmp_path / "w.yaml"
    wl.write_text(text)
    r = _invoke("run", str(wl), "-i", "baseline", "--set", "n=64", "--results-dir", str(tmp_path / "r"))
    assert r.exit_code == 2 and "measured twice" in r.output and "--set" in r.output, r.output
    assert f"{wl}:" in r.output and ": workloads.0.cases: case " in r.output  # the file's line and field


def test_a_case_measured_twice_names_the_line_of_its_parameters(tmp_path):
    """mode: [1, "1"] (a parameter no expression reads) gives one case id twice: the error named the file
    only, not the line or field."""
    wl = tmp_path / "w.yaml"
    wl.write_text((DATA / "double.yaml").read_text().replace("parameters: {n: [64, 256]}",
                                                            'parameters: {n: [64], mode: [1, "1"]}'))
    r = _invoke("run", str(wl), "-i", "baseline", "--results-dir", str(tmp_path / "r"))
    line = 1 + wl.read_text().splitlines().index(next(x for x in wl.read_text().splitlines() if "parameters:" in x))
    assert r.exit_code == 2 and f"{wl}:{line}: workloads.0.parameters: case " in r.output, r.output
    assert "would be measured twice" in r.output


def test_ab_with_one_round_a_side_decides_nothing_about_time(tmp_path):
    """One process a side cannot tell the code from that process's offset: as `gate` of single-round
    runs, every timed point is INCONCLUSIVE (exit 3), never a REGRESSION of identical code."""
    r = _invoke("ab", "--baseline-tree", ".", "--current-tree", ".", "tests/data/double.yaml", "-i", "baseline",
                "--rounds", "1", "--max-rounds", "1", "--budget", "0.05", "--out-dir", str(tmp_path / "out"), "--json")
    doc = json.loads(r.stdout)
    assert r.exit_code == 3 and {v["verdict"] for v in doc["verdicts"]} == {"INCONCLUSIVE"}, r.output


def test_outputs_never_go_over_workload_or_tuned_files_and_unwritable_ones_fail_first(tmp_path):
    saved = _run_file(tmp_path / "a.json")
    wl = tmp_path / "mine.yaml"
    wl.write_text((DATA / "double.yaml").read_text())
    kept = wl.read_text()
    r = _invoke("gate", "--baseline", str(saved), "--current", str(saved), "--junit", str(wl))
    assert r.exit_code == 2 and "a workload or source file" in r.output and wl.read_text() == kept
    missing = str(wl / "such" / "gate.xml")  # below a file: no folder can be made there
    run = _invoke("run", "tests/data/double.yaml", "-i", "baseline", "--gate-against", str(saved), "--junit", missing,
                  "--results-dir", str(tmp_path / "r"))
    assert run.exit_code == 2 and "cannot write" in run.output and not (tmp_path / "r").exists(), run.output


def test_a_step_summary_that_cannot_be_written_is_a_warning_not_a_crash(tmp_path):
    a, b = _run_file(tmp_path / "a.json"), _run_file(tmp_path / "b.json")
    r = _invoke("gate", "--baseline", str(a), "--current", str(b), GITHUB_STEP_SUMMARY=str(tmp_path / "no" / "s.md"))
    assert r.exit_code in (0, 3) and "warning: $GITHUB_STEP_SUMMARY" in r.output, r.output


def test_files_are_written_with_the_usual_permissions(tmp_path):
    """As open() makes a file under this process's umask (0644 under the usual 022), not mkstemp's 0600."""
    mask = os.umask(0o022)
    os.umask(mask)
    path = _run_file(tmp_path / "a.json")
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask


def test_a_saved_run_is_named_as_such_wherever_a_workload_file_goes_and_a_tune_space_value_comes_once(tmp_path):
    saved = _run_file(tmp_path / "a.json")
    for argv in (["list", str(saved)], ["run", str(saved)], ["tune", str(saved), "--device", "cpu"]):
        r = _invoke(*argv)
        assert r.exit_code == 2 and "a saved run, not a workload file" in r.output, (argv, r.output)
    twice = (DATA / "tune_cpu.yaml").read_text().replace("space: {chunk: [16, 24, 64, 128]}", "space: {chunk: [16, 16]}")
    r = _invoke("tune", str(_tune_dir(tmp_path, twice)), "--device", "cpu")
    assert r.exit_code == 2 and "16 is given twice" in r.output and "t.yaml:" in r.output, r.output


def test_an_output_that_is_a_device_or_pipe_is_refused_and_left_as_it_is(tmp_path):
    """``report --csv /dev/null`` (or ``/dev/stdout``) renamed a file over the device node as root, and
    printed nothing to stdout, with exit 0: refused first, exit 2, the pipe still a pipe."""
    import stat

    saved = _run_file(tmp_path / "a.json")
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    r = _invoke("report", str(saved), "--csv", str(pipe))
    assert r.exit_code == 2 and "not a regular file" in r.output, r.output
    assert stat.S_ISFIFO(pipe.lstat().st_mode)


def test_a_standard_stream_is_refused_as_an_output(tmp_path):
    """`gate --junit /dev/stdout` with stdout sent to a file: the atomic write would rename the XML over
    the link /dev/stdout itself. Refused before anything is read (exit 2); the link stays."""
    out = tmp_path / "stdout.txt"
    out.write_text("kept")
    link = tmp_path / "stdout"
    link.symlink_to(f"/proc/self/fd/{os.open(out, os.O_WRONLY)}")
    r = CliRunner().invoke(main, ["gate", "--baseline", "a", "--current", "b", "--junit", str(link)])
    assert r.exit_code == 2, r.output
    assert "a standard stream or open file descriptor, not a file; JUnit XML is written as a file" in r.output
    assert link.is_symlink() and out.read_text() == "kept"


@pytest.mark.parametrize("record", ["calibration", "spread"])
def test_a_report_never_goes_over_a_calibration_or_spread_record(tmp_path, record):
    """``report --csv cal.json`` (or --html, --png, gate --junit) replaced what `solbench calibrate` measured on a
    GPU, or what `solbench spread --save` measured, with exit 0: refused like a saved run or tuned file."""
    saved = _run_file(tmp_path / "a.json")
    if record == "calibration":
        src = Path("results/h200/calibration/h200-sxm/gpu-b63c0fcc-7aab-eb90-c123-35f1cbacbe2d.json")
        kept = src.read_text()
    else:
        kept = json.dumps({"created": "2026-01-01T00:00:00+00:00", "spec_id": "h200-sxm", "device_name": "NVIDIA H200",
                           "run_sd": 0.01, "median_point": 0.01, "points": 10, "runs": ["a", "b"],
                           "schema_version": 1}, indent=1)
    target = tmp_path / f"{record}.json"
    target.write_text(kept)
    for argv in (["report", str(saved), "--csv", str(target)],
                 ["gate", "--baseline", str(saved), "--current", str(saved), "--junit", str(target)]):
        r = _invoke(*argv)
        assert r.exit_code == 2 and f"holds a {record}" in r.output, (argv, r.output)
        assert target.read_text() == kept


@pytest.mark.parametrize("name", ["verdict.json", "verdict.json.gz"])
def test_a_verdict_a_command_printed_as_json_is_never_written_over(tmp_path, name):
    """`report --csv` named a gate verdict kept as results/.../slow0.10-1.json.gz (`ab --json`, gzipped) and
    replaced it: only .json files were looked into, and a verdict was not among the records kept."""
    import gzip

    saved = _run_file(tmp_path / "a.json")
    other = _run_file(tmp_path / "b.json", scale=1.1)
    printed = _invoke("compare", str(saved), str(other), "--json")
    assert printed.exit_code in (0, 1), printed.output
    for kind, text in (("comparison", printed.stdout),
                       ("gate verdict", json.dumps({"kind": "gate", "version": 1, "overall": "PASS"}))):
        verdict = tmp_path / name
        verdict.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
        kept = verdict.read_bytes()
        for option in ("--csv", "--html"):
            r = _invoke("report", str(saved), option, str(verdict))
            assert r.exit_code == 2 and f"holds a {kind}" in r.output, r.output
            assert verdict.read_bytes() == kept


# a tuning log (`solbench tune`'s JSON) and a profile record (`solbench profile`'s), as kept in results/h200
_TUNE_LOG = {"format": "solbench-tune/1", "created": "2026-11-30T18:00:00+00:00",
             "environment": {"device_kind": "cuda", "device_name": "NVIDIA H200", "spec_id": "h200-sxm"},
             "workload_files": ["workloads/norms.yaml"], "options": {}, "cases": []}
_PROFILE = {"format": "solbench-profile/1", "created": "2026-11-30T18:30:07+00:00", "device_name": "NVIDIA H200",
            "workload": "o_proj", "impl": "fused", "case_id": "o_proj[tokens=16,hidden=4096,bfloat16]", "t_sol": 7.07e-06}


@pytest.mark.parametrize(("record", "said"), [(_TUNE_LOG, "a tuning log (solbench tune)"),
                                              (_PROFILE, "a profile (solbench profile)")])
def test_a_tuning_log_or_profile_is_named_and_never_written_over(tmp_path, record, said):
    """`report --csv` named a tuning log or a profile record kept under results/ and replaced it (exit 0), and
    `show`, `gate` and `report` given one called it 'not a solbench result (no schema_version)'."""
    saved = _run_file(tmp_path / "a.json")
    target = tmp_path / "kept.json"
    target.write_text(json.dumps(record, indent=1))
    kept = target.read_text()
    r = _invoke("report", str(saved), "--csv", str(target))
    assert r.exit_code == 2 and f"holds {said}; not writing" in r.output, r.output
    assert target.read_text() == kept
    for argv in (["show", str(target)], ["gate", "--baseline", str(target), "--current", str(saved)]):
        r = _invoke(*argv)
        assert r.exit_code == 2 and f"{target}: {said}, not a run" in r.output, (argv, r.output)


def test_tune_still_replaces_the_tuning_log_it_is_given(tmp_path):
    """`tune -o FILE` replaces FILE where it exists (its help says so): a tuning log there is the one to replace,
    though `report` and the rest keep off it."""
    wl = _tune_dir(tmp_path)
    log = tmp_path / "tune.json"
    log.write_text(json.dumps(_TUNE_LOG))
    again = _invoke("tune", str(wl), "-i", "chunked", "--results-dir", str(tmp_path / "r"), "-o", str(log), *TUNE)
    assert again.exit_code == 0, again.output
    assert json.loads(log.read_text())["cases"], "the log was not replaced"
