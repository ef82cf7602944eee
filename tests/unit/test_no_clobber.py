"""Nothing a user saved is lost to an output option, and options that would be ignored are refused.

A report, JUnit or Markdown file is never written over a saved run (``report --csv run.json`` reads
the latest run and used to write its CSV over run.json); ``import`` does not replace workload files
that may have been edited; ``run`` refuses gate options without ``--gate-against`` and settings it
would not follow. All of it is refused before anything is measured or written (exit 2, one line).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from solbench.cli import main
from solbench.results import store
from tests.unit.factories import make_run, noisy

DATA = Path(__file__).resolve().parents[1] / "data"
SOFTMAX = DATA / "kernelbench" / "level1" / "23_Softmax.py"


def _run_file(path: Path) -> Path:
    rng = np.random.default_rng(0)
    return store.save(make_run({"c": {"x": noisy(rng, 30, 1e-3, 0.01)}}, rounds=3), path)


@pytest.mark.parametrize("argv", [
    ["report", "--csv", "RUN"],
    ["report", "OTHER", "--html", "RUN"],
    ["report", "OTHER", "--png", "RUN"],
    ["gate", "--baseline", "OTHER", "--current", "OTHER", "--junit", "RUN"],
    ["gate", "--baseline", "OTHER", "--current", "OTHER", "--markdown-file", "RUN"],
    ["ab", "--baseline-tree", ".", "tests/data/double.yaml", "--junit", "RUN"],
    ["tune", "tests/data/tune_cpu.yaml", "--device", "cpu", "-o", "RUN"],
    ["run", "tests/data/double.yaml", "--gate-against", "OTHER", "--junit", "RUN"],
])
def test_no_output_option_writes_over_a_saved_run(tmp_path, argv):
    run = _run_file(tmp_path / "run.json")
    other = _run_file(tmp_path / "other.json")
    before = run.read_bytes()
    argv = [str(run) if a == "RUN" else str(other) if a == "OTHER" else a for a in argv]
    result = CliRunner().invoke(main, [*argv, "--results-dir", str(tmp_path / "results")])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines()[-1].endswith("give it as an argument)")  # one line, and last
    assert result.output.count("holds a saved run") == 1
    assert run.read_bytes() == before


def test_a_report_still_replaces_a_file_that_is_not_a_run(tmp_path):
    other = _run_file(tmp_path / "other.json")
    old_csv = tmp_path / "r.csv"
    old_csv.write_text("yesterday's CSV\n")
    result = CliRunner().invoke(main, ["report", str(other), "--csv", str(old_csv)])
    assert result.exit_code == 0, result.output
    assert old_csv.read_text().startswith("case") or "yesterday" not in old_csv.read_text()


@pytest.mark.parametrize(("extra", "said"), [
    (["--threshold", "5%"], "--threshold sets the gate of --gate-against"),
    (["--rerun", "3"], "--rerun sets the gate of --gate-against"),
    (["--repeat", "3", "--max-rounds", "2"], "must be at least --repeat"),
    (["--threads", "100000"], "more threads than CPUs"),
    (["--compile-cache", "/proc/solbench-cannot-make-this"], "--compile-cache"),
])
def test_run_refuses_options_it_would_not_follow(tmp_path, extra, said):
    result = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "-i", "baseline", "--budget", "0.05",
                                       "--results-dir", str(tmp_path), *extra])
    assert result.exit_code == 2 and said in result.output, result.output
    assert not any(tmp_path.rglob("*.json"))  # nothing measured, nothing saved


def test_run_refuses_more_threads_than_the_cores_it_may_run_on(tmp_path, monkeypatch):
    """A container (or taskset) limited to one core of an 8-CPU host: --threads 2 measured two threads
    on one core (contention), since the check compared with os.cpu_count(), the host's CPUs."""
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0}, raising=False)
    result = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "-i", "baseline", "--budget", "0.05",
                                       "--results-dir", str(tmp_path), "--threads", "2"])
    assert result.exit_code == 2 and "more threads than CPUs" in result.output, result.output
    assert "may run on 1 CPU" in result.output
    assert not any(tmp_path.rglob("*.json"))


def test_import_keeps_edited_workload_files_unless_forced(tmp_path):
    first = CliRunner().invoke(main, ["import", str(SOFTMAX), "--out", str(tmp_path)])
    assert first.exit_code == 0, first.output
    [written] = tmp_path.glob("*.yaml")
    written.write_text(written.read_text() + "# my edit\n")
    again = CliRunner().invoke(main, ["import", str(SOFTMAX), "--out", str(tmp_path)])
    assert again.exit_code == 2 and "exists" in again.output and "--force" in again.output
    assert written.read_text().endswith("# my edit\n")
    forced = CliRunner().invoke(main, ["import", str(SOFTMAX), "--out", str(tmp_path), "--force"])
    assert forced.exit_code == 0 and not written.read_text().endswith("# my edit\n")


def test_import_that_cannot_write_is_one_line_exit_2_and_leaves_no_temporary_file(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    under = CliRunner().invoke(main, ["import", str(SOFTMAX), "--out", str(tmp_path / "file" / "sub")])
    assert under.exit_code == 2 and "Traceback" not in under.output, under.output  # was NotADirectoryError, exit 5
    assert under.output.startswith(f"error: --out {tmp_path / 'file' / 'sub'}: cannot write workload files there")
    out = tmp_path / "out"
    (out / "level1_23_Softmax.yaml").mkdir(parents=True)  # the file to replace is a folder: the rename fails
    forced = CliRunner().invoke(main, ["import", str(SOFTMAX), "--out", str(out), "--force"])
    assert forced.exit_code == 2 and len(forced.output.strip().splitlines()) == 1, forced.output
    assert [p.name for p in out.iterdir()] == ["level1_23_Softmax.yaml"]  # no .tmp left beside it


def test_import_checks_its_out_folder_before_loading_a_problem(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    stray = tmp_path / "model_new.py"  # a solution that joins no problem: found only once the problems load
    stray.write_text("class ModelNew: pass\n")
    out = tmp_path / "file" / "sub"
    result = CliRunner().invoke(main, ["import", str(SOFTMAX), "--out", str(out), "--solution", str(stray)])
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: --out {out}: cannot write workload files there: "
                                    f"{tmp_path / 'file'} is a file, not a folder"), result.output
    assert (tmp_path / "file").read_text() == "not a folder"


def test_ab_refuses_a_baseline_tree_without_the_workload_file(tmp_path):
    (tmp_path / "base").mkdir()
    result = CliRunner().invoke(main, ["ab", "--baseline-tree", str(tmp_path / "base"), "tests/data/double.yaml",
                                       "--out-dir", str(tmp_path / "out")])
    assert result.exit_code == 2 and "exists in --baseline-tree" in result.output, result.output
    assert not any((tmp_path / "out").rglob("*.json"))  # nothing measured, nothing saved

