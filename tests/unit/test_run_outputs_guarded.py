"""`run`'s outputs: stdout carries the JSON alone whatever implementations print, and `-o` may not
replace the baseline `--gate-against` reads."""

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from solbench.cli import main

ROOT = Path(__file__).resolve().parents[2]
FAST = ["--budget", "0.05", "--min-samples", "5", "--max-samples", "20"]


def test_json_on_stdout_stays_parseable_when_an_in_process_implementation_prints(tmp_path):
    # the implementation prints through print() and straight to descriptor 1 on every call
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "solbench", "run", "tests/data/chatty.yaml", "--device", "cpu",
                           "--in-process", "--json", "--results-dir", str(tmp_path), *FAST],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(done.stdout)  # the JSON alone
    assert [i["name"] for c in data["cases"] for i in c["impls"]] == ["baseline"]
    assert "chatty: a line from print()" in done.stderr
    assert "chatty: a line written to fd 1" in done.stderr


def test_output_that_names_the_gate_baseline_is_refused_before_measuring(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    base = tmp_path / "base.json"
    made = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "--device", "cpu", "-i", "baseline",
                                     "-o", str(base), "--results-dir", str(tmp_path / "r"), *FAST])
    assert made.exit_code == 0, made.output
    before = base.read_bytes()
    for spelled in (str(base), str(tmp_path / "." / "base.json")):
        result = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "--device", "cpu", "-i", "baseline",
                                           "--gate-against", str(base), "-o", spelled, "--force",
                                           "--results-dir", str(tmp_path / "r"), *FAST])
        assert result.exit_code == 2, result.output
        assert "the baseline --gate-against reads" in result.output
        assert len(result.output.strip().splitlines()) == 1, result.output  # one line: nothing measured or saved
        assert base.read_bytes() == before


def test_output_dash_is_refused_not_saved_as_a_file_named_dash(tmp_path, monkeypatch):
    """`-o -` saved the run as a file named "-" and left stdout empty, exit 0; `--json` prints a run."""
    monkeypatch.chdir(tmp_path)
    workload = str(ROOT / "tests" / "data" / "double.yaml")
    for extra in (["--dry-run"], ["-i", "baseline", "--results-dir", str(tmp_path / "r"), *FAST]):
        result = CliRunner().invoke(main, ["run", workload, "--device", "cpu", "-o", "-", *extra])
        assert result.exit_code == 2, result.output
        assert result.output.startswith("error: -o -: ") and "--json" in result.output
        assert result.stdout == "" and not (tmp_path / "-").exists()


def test_a_dry_runs_json_stays_parseable_when_the_users_code_prints(tmp_path):
    """A dry run runs the user's code where a cost is traced (and imports a foreign problem's module):
    what that printed landed on stdout ahead of the JSON."""
    workload = tmp_path / "chatty_traced.yaml"
    workload.write_text((ROOT / "tests/data/chatty.yaml").read_text()
                        .replace("reference: tests.unit.helpers:double\n",
                                 "reference: tests.unit.helpers:double_chatty\n    cost: traced\n"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for where in (["--gpu", "h200"], ["--device", "cpu"]):
        done = subprocess.run([sys.executable, "-m", "solbench", "run", str(workload), *where, "--dry-run", "--json"],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert json.loads(done.stdout)["cases"], done.stdout[:500]  # the JSON alone
        assert "chatty: a line from print()" in done.stderr and "chatty: a line written to fd 1" in done.stderr


def test_a_run_whose_final_save_fails_does_not_say_it_was_saved(tmp_path, monkeypatch):
    """The disk fills before the final save: the command said "saved run.json" above the error, of a
    file that holds the run's record as it was before (incomplete, its last cases in a journal)."""
    import errno

    from solbench.results import store

    def full(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.chdir(ROOT)
    out = tmp_path / "run.json"
    real = store.os.replace
    monkeypatch.setattr(store.os, "replace", lambda a, b: full() if Path(b) == out else real(a, b))
    result = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "--device", "cpu", "--in-process",
                                       "-i", "baseline", "-o", str(out), "--results-dir", str(tmp_path / "r"), *FAST])
    assert result.exit_code == 2, result.output
    assert f"saved {out}" not in result.output
    assert "No space left on device" in result.output
    assert f"the run is not saved whole: {out} holds what was written before it" in result.output
    assert store.load(out).complete is False  # what the file holds says so too


def test_o_force_never_writes_a_run_over_a_workload_or_source_file(tmp_path, monkeypatch):
    """--force replaces an earlier run at -o; -o naming the workload (or an implementation's source)
    wrote the result over it."""
    monkeypatch.chdir(ROOT)
    for name, text in (("w.yaml", (ROOT / "tests/data/double.yaml").read_text()), ("k.py", "def f(x):\n    return x\n"),
                       ("tuned.json", '{"format": "solbench-tuned/1", "entries": []}')):
        kept = tmp_path / name
        kept.write_text(text)
        for extra in ([], ["--dry-run"]):
            result = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "--device", "cpu", "-i", "baseline",
                                               "-o", str(kept), "--force", "--results-dir", str(tmp_path / "r"),
                                               *extra, *FAST])
            assert result.exit_code == 2, result.output
            assert f"-o {kept}: holds " in result.output and "never written over it" in result.output
            assert kept.read_text() == text
    earlier = tmp_path / "earlier.json"  # what --force is for: an earlier run there is replaced
    for _ in range(2):
        result = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "--device", "cpu", "-i", "baseline",
                                           "-o", str(earlier), "--force", "--results-dir", str(tmp_path / "r"), *FAST])
        assert result.exit_code == 0, result.output
