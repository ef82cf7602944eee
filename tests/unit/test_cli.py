"""The CLI through click's test runner, on the CPU device."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from solbench.cli import main
from solbench.results import store

FAST = ["--budget", "0.05", "--min-samples", "5", "--max-samples", "20"]


@pytest.fixture
def runner():
    return CliRunner()


def test_run_attn_on_cpu_end_to_end(runner, tmp_path):
    out = tmp_path / "attn.json"
    result = runner.invoke(main, ["run", "workloads/attn.yaml", "--device", "cpu", "-o", str(out), *FAST])
    assert result.exit_code == 0, result.output
    assert "o_proj" in result.output and "qkv_proj" in result.output
    run = store.load(out)
    assert run.environment.device_kind == "cpu"
    assert run.protocol.timer == "cpu"
    by_impl = {(c.case_id, r.name): r for c in run.cases for r in c.impls}
    assert by_impl[("o_proj[tokens=16,hidden=512,float32]", "baseline")].status == "ok"
    assert by_impl[("o_proj[tokens=16,hidden=512,float32]", "fp8")].status == "skipped"
    fused = by_impl[("o_proj[tokens=256,hidden=512,float32]", "fused")]
    assert fused.status == "ok" and fused.correctness.passed
    assert fused.timing.n >= 5 and fused.score.speedup is not None
    assert fused.score.sol > 0


def test_run_json_to_stdout_is_the_result(runner, tmp_path):
    result = runner.invoke(main, ["run", "tests/data/double.yaml", "--device", "cpu", "--json", "-i", "baseline",
                                  "--results-dir", str(tmp_path / "results"), *FAST])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)  # stdout holds the JSON alone
    assert data["schema_version"] == 2
    assert {i["name"] for c in data["cases"] for i in c["impls"]} == {"baseline"}
    (saved,) = (tmp_path / "results").rglob("*.json")
    assert f"saved {saved.relative_to(tmp_path)}" in result.stderr or f"saved {saved}" in result.stderr


@pytest.mark.parametrize("quiet", [["--json"], ["-q"]])
def test_json_or_quiet_still_say_on_stderr_what_failed_and_where_it_was_saved(runner, tmp_path, quiet):
    out = tmp_path / "d.json"
    result = runner.invoke(main, ["run", "tests/data/double.yaml", "--device", "cpu", "-o", str(out), *quiet, *FAST])
    assert result.exit_code == 4
    assert "double[n=64,float32] wrong: INCORRECT: " in result.stderr
    assert f"saved {out}" in result.stderr
    if quiet == ["-q"]:
        assert result.stdout == ""
    else:
        assert json.loads(result.stdout)["cases"]


@pytest.mark.parametrize("quiet", [["--json"], ["-q"]])
def test_json_or_quiet_still_say_on_stderr_what_was_skipped(runner, tmp_path, quiet):
    """-q and --json hid the SKIPPED implementations (printed only under the tables): a CPU run whose
    CUDA-only implementations measured nothing exited 0 with no word of them."""
    out = tmp_path / "d.json"
    result = runner.invoke(main, ["run", "tests/data/double.yaml", "--device", "cpu", "-i", "on_gpu", "-o", str(out),
                                  *quiet, *FAST])
    assert result.exit_code == 0, result.output  # skipped is not a failure
    assert "on_gpu: SKIPPED (not a failure) on 2 case(s): needs CUDA (cuda)" in result.stderr
    assert "baseline" not in result.stderr


@pytest.mark.parametrize("quiet", [[], ["-q"]])
def test_a_run_whose_every_implementation_was_skipped_says_nothing_was_measured(runner, tmp_path, quiet):
    """A run of a GPU-only workload on the CPU exits 0 (skipped is not a failure, as documented), and
    said no more than each implementation's SKIPPED: a CI log read like a run that measured."""
    wl = tmp_path / "gpu_only.yaml"
    wl.write_text("workloads:\n  - name: gelu_scale\n    parameters: {n: [64]}\n    dtypes: [float32]\n"
                  "    inputs: {x: {shape: [n, 16]}}\n    outputs: {y: {shape: [n, 16]}}\n"
                  "    reference: tests.unit.helpers:gelu_scale\n"
                  "    implementations: {baseline: {fn: tests.unit.helpers:gelu_scale, requires: [cuda]}}\n")
    result = runner.invoke(main, ["run", str(wl), "--device", "cpu", "--repeat", "1", "-o", str(tmp_path / "r.json"),
                                  *quiet, *FAST])
    assert result.exit_code == 0, result.output  # skipped is not a failure
    assert "nothing was measured: every implementation of the 1 case(s) was skipped" in result.stderr


def test_nothing_measured_claims_no_exit_0_where_the_gate_against_exits_otherwise(runner, tmp_path):
    """``run --gate-against`` whose every implementation was skipped said on stderr '(... not a
    failure: exit 0)', then the gate refused the run (nothing in common) and the command exited 2."""
    text = ("workloads:\n  - name: gelu_scale\n    parameters: {n: [64]}\n    dtypes: [float32]\n"
            "    inputs: {x: {shape: [n, 16]}}\n    outputs: {y: {shape: [n, 16]}}\n"
            "    reference: tests.unit.helpers:gelu_scale\n"
            "    implementations: {baseline: {fn: tests.unit.helpers:gelu_scale%s}}\n")
    wl = tmp_path / "w.yaml"
    wl.write_text(text % "")
    common = ["--device", "cpu", "--repeat", "1", "-q", "--results-dir", str(tmp_path / "r"), *FAST]
    made = runner.invoke(main, ["run", str(wl), "-o", str(tmp_path / "base.json"), *common])
    assert made.exit_code == 0, made.output
    wl.write_text(text % ", requires: [cuda]")  # the current run: every implementation skipped on the CPU
    result = runner.invoke(main, ["run", str(wl), "-o", str(tmp_path / "cur.json"), "--gate-against",
                                  str(tmp_path / "base.json"), *common])
    assert result.exit_code == 2, result.output  # the gate has nothing to decide: refused
    assert "nothing was measured: every implementation of the 1 case(s) was skipped" in result.stderr
    assert "exit 0" not in result.stderr


def test_incorrect_and_unwritten_outputs_are_caught(runner, tmp_path):
    out = tmp_path / "d.json"
    result = runner.invoke(main, ["run", "tests/data/double.yaml", "--device", "cpu", "-o", str(out), *FAST])
    assert result.exit_code == 4  # an implementation was INCORRECT
    run = store.load(out)
    status = {(c.case_id, r.name): (r.status, r.message) for c in run.cases for r in c.impls}
    assert status[("double[n=64,float32]", "wrong")][0] == "incorrect"
    assert status[("double[n=64,float32]", "unwritten")][0] == "incorrect"
    assert "NaN" in status[("double[n=64,float32]", "unwritten")][1]
    assert status[("double[n=64,float32]", "on_gpu")] == ("skipped", "needs CUDA (cuda)")
    wrong = next(r for c in run.cases for r in c.impls if r.name == "wrong")
    assert wrong.timing is None  # incorrect implementations are not timed


def test_dry_run_what_if_b200(runner):
    result = runner.invoke(main, ["run", "workloads/attn.yaml", "--gpu", "b200", "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)  # stdout holds the JSON alone; stderr the notes (fp8's own T_SOL)
    assert data["spec"]["id"] == "b200"
    case = next(c for c in data["cases"] if c["case_id"] == "o_proj[tokens=16384,hidden=4096,bfloat16]")
    assert case["cost"]["tensor_flops"] == 2 * 16384 * 4096**2
    assert case["t_sol"] == pytest.approx(2 * 16384 * 4096**2 / 2250e12)
    assert case["bound"] == "compute"
    table = runner.invoke(main, ["run", "workloads/attn.yaml", "--gpu", "b200", "--dry-run"])
    assert table.exit_code == 0 and "T_SOL" in table.output and "dry run" in table.output


def test_a_dry_run_refuses_measured_peaks_it_would_not_use(runner):
    result = runner.invoke(main, ["run", "workloads/attn.yaml", "--gpu", "b200", "--dry-run", "--peaks", "measured"])
    assert result.exit_code == 2 and "--peaks measured" in result.output


def test_gpu_without_dry_run_is_a_usage_error(runner):
    result = runner.invoke(main, ["run", "workloads/attn.yaml", "--gpu", "b200"])
    assert result.exit_code == 2 and "--dry-run" in result.output


def test_an_empty_gpu_without_dry_run_is_a_usage_error(runner, tmp_path):
    out = tmp_path / "run.json"  # --gpu "" (an unset variable) measured this machine, exit 0
    result = runner.invoke(main, ["run", "tests/data/double.yaml", "--gpu", "", "-o", str(out),
                                  "--results-dir", str(tmp_path), *FAST])
    assert result.exit_code == 2 and "--dry-run" in result.output
    assert not out.exists()


def test_a_what_if_on_the_cpu_spec_says_to_run_on_the_cpu(runner):
    result = runner.invoke(main, ["run", "tests/data/double.yaml", "--gpu", "cpu", "--dry-run"])
    assert result.exit_code == 2 and "--device cpu" in result.output and "detect()" not in result.output


@pytest.mark.parametrize("args,message", [
    (["run", "nope.yaml", "--device", "cpu"], "nope.yaml: no such file"),
    (["run", "workloads/attn.yaml", "--gpu", "z9000", "--dry-run"], "z9000"),
    (["run", "workloads/attn.yaml", "--device", "cpu", "-w", "nothing"], "no workload named nothing"),
    (["run", "workloads/attn.yaml", "--device", "cpu", "-w", "o_prj"], "o_prj (did you mean 'o_proj'?)"),
    (["run", "workloads/attn.yaml", "--device", "cpu", "-w", "o_proj", "-i", "fusd"],
     "no implementation named fusd (did you mean 'fused'?)"),
])
def test_bad_input_is_one_line_exit_2(runner, args, message):
    result = runner.invoke(main, args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_bad_workload_field_names_file_line_field(runner, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(Path("tests/data/double.yaml").read_text().replace("dtypes: [float32]", "dtypes: [float31]"))
    result = runner.invoke(main, ["run", str(bad), "--device", "cpu"])
    assert result.exit_code == 2
    assert f"{bad}:5: workloads.0.dtypes.0:" in result.output


def test_unknown_implementation_module_is_a_config_error(runner, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(Path("tests/data/double.yaml").read_text().replace(
        "wrong: tests.unit.helpers:double_wrong", "wrong: tests.unit.helpers:no_such_fn"))
    result = runner.invoke(main, ["run", str(bad), "--device", "cpu", *FAST])
    assert result.exit_code == 2
    assert "workloads.0.implementations.wrong.fn" in result.output and "no_such_fn" in result.output


def test_schema_list_info(runner):
    schema = runner.invoke(main, ["schema"])
    assert schema.exit_code == 0 and json.loads(schema.output)["title"] == "solbench workload file"
    listing = runner.invoke(main, ["list"])
    assert listing.exit_code == 0 and "o_proj" in listing.output and "h200-sxm" in listing.output
    info = runner.invoke(main, ["info", "--json"])
    assert info.exit_code == 0 and json.loads(info.output)["device_kind"] == "cpu"


def test_show_renders_a_saved_run_as_tables_and_markdown(runner, tmp_path):
    out = tmp_path / "d.json"
    runner.invoke(main, ["run", "tests/data/double.yaml", "--device", "cpu", "-o", str(out), "-i", "baseline", *FAST])
    table = runner.invoke(main, ["show", str(out)], env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "double" in table.output and "baseline" in table.output
    md = runner.invoke(main, ["show", str(out), "--markdown"])
    assert md.exit_code == 0
    lines = md.stdout.splitlines()  # stderr says which file was read
    assert lines[0].startswith("### solbench run:")
    rows = [line for line in lines if line.startswith("| n=")]
    assert len(rows) == 2 and all("| baseline |" in r for r in rows)


@pytest.mark.parametrize("workload_file", sorted(Path("workloads").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_workload_runs_end_to_end_on_cpu(runner, tmp_path, workload_file):
    out = tmp_path / "run.json"
    result = runner.invoke(main, ["run", str(workload_file), "--device", "cpu", "-o", str(out), "--budget", "0.02",
                                  "--min-samples", "3", "--max-samples", "5", "-q"])
    assert result.exit_code == 0, result.output
    run = store.load(out)
    statuses = [r for c in run.cases for r in c.impls]
    assert statuses and all(r.status in ("ok", "skipped") for r in statuses)
    assert any(r.status == "ok" for r in statuses)
    for r in statuses:
        if r.status == "skipped":
            assert r.message.startswith("needs "), r.message  # a clear reason, not a failure
        elif r.protocol.get("part"):  # a part of a multi-rank workload: timed, never checked
            assert r.correctness is None and r.score is None and r.timing is not None
        else:
            assert r.correctness is not None and r.correctness.passed


def test_a_bug_in_solbench_exits_5_never_1(runner, monkeypatch):
    """1 is a regression of the code under test: an unexpected exception of solbench's own is not."""
    from solbench import api, exitcodes

    def broken():
        raise AttributeError("'Implementation' object has no attribute 'bytes'")

    monkeypatch.setattr(api, "device_summary", broken)
    result = runner.invoke(main, ["info"])
    assert result.exit_code == exitcodes.INTERNAL == 5
    assert "solbench failed unexpectedly" in result.output and "AttributeError" in result.output
    assert exitcodes.worst(exitcodes.REGRESSION, exitcodes.INTERNAL) == exitcodes.INTERNAL


def test_what_detection_was_unsure_of_is_printed_under_the_tables(runner, tmp_path, monkeypatch):
    from solbench.plan import prepare

    monkeypatch.setattr(prepare, "device_notes", lambda info: ("device: no spec file matches 'X'",))
    result = runner.invoke(main, ["run", "tests/data/double.yaml", "--device", "cpu", "-i", "baseline",
                                  "-o", str(tmp_path / "r.json"), *FAST])
    assert result.exit_code == 0, result.output
    assert "device: no spec file matches 'X'" in result.stdout
    assert "device: no spec file matches 'X'" in store.load(tmp_path / "r.json").notes
    shown = runner.invoke(main, ["show", str(tmp_path / "r.json")])
    assert "device: no spec file matches 'X'" in shown.stdout  # show prints them too
    quiet = runner.invoke(main, ["run", "tests/data/double.yaml", "--device", "cpu", "-i", "baseline", "--json",
                                 "-o", str(tmp_path / "q.json"), *FAST])
    assert "device: no spec file matches 'X'" in quiet.stderr and json.loads(quiet.stdout)["notes"]
