"""``solbench gate``, ``compare`` and ``run --gate-against`` end to end, independent of machine speed.

The gate and compare commands read runs built from synthetic samples (``tests.unit.factories``)
and saved with the store: their verdicts follow from the samples alone. ``run --gate-against``
must measure for real, so its baselines are a real CPU run (the same fingerprint) with every
sample replaced by 1 ns (any real call is a regression by orders of magnitude) or by 1000 s
(any real call passes): no verdict depends on how fast or how loaded this machine is.
"""

import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from solbench.cli import main
from solbench.results import store
from tests.unit.factories import make_env, make_run, noisy, with_samples

N = 30
CASE = "mm[n=64,float32]"


def _runs(tmp_path: Path, cur_kernel: float = 1e-3, *, noise: float = 0.01, rounds: int = 1,
          **cur_kwargs) -> tuple[str, str]:
    """Save a baseline (kernel and baseline impl at 1 ms) and a current run; return both paths."""
    rng = np.random.default_rng(0)
    wl = {CASE: "mm"}
    base = make_run({CASE: {"baseline": noisy(rng, N, 1e-3, noise), "kernel": noisy(rng, N, 1e-3, noise)}},
                    workloads=wl, rounds=rounds)
    cur = make_run({CASE: {"baseline": noisy(rng, N, 1e-3, noise), "kernel": noisy(rng, N, cur_kernel, noise)}},
                   workloads=wl, rounds=rounds, **cur_kwargs)
    return (str(store.save(base, tmp_path / "base.json")), str(store.save(cur, tmp_path / "cur.json")))


def _gate(*args: str):
    return CliRunner().invoke(main, ["gate", *args])


def _junit_cases(path: Path) -> dict[str, ET.Element]:
    return {tc.get("name"): tc for tc in ET.parse(path).getroot().iter("testcase")}


# ---- `solbench gate` on saved runs -------------------------------------------------------

def test_slower_run_is_a_regression_exit_1(tmp_path, monkeypatch):
    base, cur = _runs(tmp_path, cur_kernel=1.3e-3, rounds=3)
    junit, summary = tmp_path / "gate.xml", tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    r = _gate("--baseline", base, "--current", cur, "--junit", str(junit))
    assert r.exit_code == 1, r.output
    assert "REGRESSION" in r.output and "REGRESSION" in summary.read_text()
    cases = _junit_cases(junit)
    assert cases[f"{CASE}/kernel"].find("failure").get("type") == "REGRESSION"
    assert cases[f"{CASE}/baseline"].find("failure") is None  # same 1 ms on both sides


def test_a_regression_between_single_runs_is_not_confirmed_exit_3(tmp_path):
    """One process a side cannot tell the code from that process's offset: nothing here re-measures,
    so the slowdown is INCONCLUSIVE, and the reason says how to decide it."""
    base, cur = _runs(tmp_path, cur_kernel=1.3e-3)
    junit = tmp_path / "gate.xml"
    r = _gate("--baseline", base, "--current", cur, "--json", "--junit", str(junit))
    assert r.exit_code == 3, r.output
    v = {v["key"]: v for v in json.loads(r.stdout)["verdicts"]}[f"{CASE}/kernel"]
    assert v["verdict"] == "INCONCLUSIVE" and v["ratio"] > 1.2
    assert "--repeat 3" in v["reason"] and "not confirmed" in v["reason"]
    assert _junit_cases(junit)[f"{CASE}/kernel"].find("failure") is None
    same = {v["key"]: v for v in json.loads(r.stdout)["verdicts"]}[f"{CASE}/baseline"]
    assert same["verdict"] == "INCONCLUSIVE" and "not confirmed" in same["reason"]  # nor is a pass


def test_a_refused_gate_leaves_a_junit_error_not_an_earlier_jobs_verdicts(tmp_path):
    base, _ = _runs(tmp_path)
    junit = tmp_path / "gate.xml"
    junit.write_text("<testsuites><testsuite><testcase name='old'/></testsuite></testsuites>")
    other = store.save(make_run({"other[n=1]": {"kernel": [1e-3] * N}}), tmp_path / "other.json")
    r = _gate("--baseline", base, "--current", str(other), "--junit", str(junit))
    assert r.exit_code == 2 and "no measured case in common" in r.output
    (case,) = ET.parse(junit).getroot().iter("testcase")
    assert case.get("name") == "gate" and "no measured case in common" in case.find("error").get("message")


def test_a_gate_that_crashes_leaves_a_junit_error_and_exits_internal(tmp_path, monkeypatch):
    """A bug in solbench while gating (not bad input) exits with the internal-error code, and the JUnit
    file says no verdict came: a CI report must not show an earlier job's verdicts beside a red job."""
    from solbench import exitcodes
    from solbench.cli import compare as compare_cli

    base, cur = _runs(tmp_path)
    junit = tmp_path / "gate.xml"
    junit.write_text("<testsuites><testsuite><testcase name='old'/></testsuite></testsuites>")

    def crash(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(compare_cli, "saved_gate", crash)
    r = _gate("--baseline", base, "--current", cur, "--junit", str(junit))
    assert r.exit_code == exitcodes.INTERNAL, r.output
    (case,) = ET.parse(junit).getroot().iter("testcase")
    assert "failed unexpectedly" in case.find("error").get("message")


def test_checking_where_the_junit_goes_creates_nothing_and_refuses_what_cannot_be_written(tmp_path):
    from solbench.cli.common import writable_output
    from solbench.errors import ConfigError

    for junit in (tmp_path / "gate.xml", tmp_path / "new" / "folders" / "gate.xml"):  # the write makes folders
        writable_output(str(junit), "JUnit XML")
    assert list(tmp_path.iterdir()) == []  # nothing created, no scratch file left
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(ConfigError, match="a-file is a file, not a folder"):
        writable_output(str(tmp_path / "a-file" / "gate.xml"), "JUnit XML")
    with pytest.raises(ConfigError, match="a folder, not a file"):
        writable_output(str(tmp_path), "JUnit XML")


def test_the_gate_makes_the_folders_of_its_junit(tmp_path):
    base, cur = _runs(tmp_path, rounds=3)
    junit = tmp_path / "reports" / "ci" / "gate.xml"
    r = _gate("--baseline", base, "--current", cur, "--junit", str(junit))
    assert r.exit_code == 0, r.output
    assert list(ET.parse(junit).getroot().iter("testcase"))


def test_same_samples_pass_exit_0(tmp_path):
    base, cur = _runs(tmp_path, rounds=3)
    r = _gate("--baseline", base, "--current", cur, "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["overall"] == "PASS" and data["exit_code"] == 0
    assert {v["verdict"] for v in data["verdicts"]} == {"PASS"}


def test_faster_case_is_reported_and_passes(tmp_path):
    base, cur = _runs(tmp_path, cur_kernel=0.5e-3, rounds=3)
    r = _gate("--baseline", base, "--current", cur, "--json")
    assert r.exit_code == 0, r.output
    by = {v["key"]: v["verdict"] for v in json.loads(r.stdout)["verdicts"]}
    assert by == {f"{CASE}/kernel": "FASTER", f"{CASE}/baseline": "PASS"}


def test_too_noisy_is_inconclusive_exit_3(tmp_path):
    base, cur = _runs(tmp_path, cur_kernel=1.05e-3, noise=0.3)
    r = _gate("--baseline", base, "--current", cur, "--json")
    assert r.exit_code == 3, r.output
    assert json.loads(r.stdout)["overall"] == "INCONCLUSIVE"


def test_an_undecided_row_of_single_round_runs_says_why_in_the_table(tmp_path):
    """Runs of one round give no "needs ~n more rounds" note: the row said INCONCLUSIVE with an empty note
    column (the reason was in JSON, JUnit and the line under the table only)."""
    base, cur = _runs(tmp_path, cur_kernel=1.05e-3, noise=0.3)
    r = _gate("--baseline", base, "--current", cur)
    assert r.exit_code == 3, r.output
    table = " ".join(r.output.split("INCONCLUSIVE (exit 3)")[0].replace("│", " ").split())  # the note may wrap
    assert table.count("too noisy to decide at this threshold") == 2, r.output


@pytest.mark.parametrize("status", ["incorrect", "error", "crashed", "timeout", "reward_hack"])
def test_a_case_that_became_failing_is_broken_exit_1(tmp_path, status):
    message = "output differs from the reference: max abs err 0.5 > atol 1e-05"
    base, cur = _runs(tmp_path, statuses={f"{CASE}/kernel": status}, messages={f"{CASE}/kernel": message})
    junit = tmp_path / "gate.xml"
    r = _gate("--baseline", base, "--current", cur, "--junit", str(junit))
    assert r.exit_code == 1, r.output
    assert "BROKEN" in r.output
    failure = _junit_cases(junit)[f"{CASE}/kernel"].find("failure")
    assert failure.get("type") == "BROKEN"
    msg = failure.get("message")
    assert msg.startswith(f"kernel on {CASE}: ") and status.upper() in msg and message in msg


def test_skipped_or_absent_now_is_missing_not_a_failure(tmp_path):
    base, cur = _runs(tmp_path, statuses={f"{CASE}/kernel": "skipped"}, messages={f"{CASE}/kernel": "needs CuPy"},
                      rounds=3)
    r = _gate("--baseline", base, "--current", cur, "--json")
    assert r.exit_code == 0, r.output
    kernel = next(v for v in json.loads(r.stdout)["verdicts"] if v["impl"] == "kernel")
    assert kernel["verdict"] == "MISSING" and kernel["status_cur"] == "skipped" and "needs CuPy" in kernel["reason"]
    rng = np.random.default_rng(1)
    only_baseline_impl = make_run({CASE: {"baseline": noisy(rng, N)}}, workloads={CASE: "mm"})
    gone = store.save(only_baseline_impl, tmp_path / "gone.json")
    r = _gate("--baseline", base, "--current", str(gone))
    assert r.exit_code == 0, r.output
    assert "MISSING" in r.output and "absent" in r.output


def _close_runs(tmp_path: Path, recorded: dict[str, float]) -> tuple[str, str]:
    """A true 7% slowdown with 0.2% noise: a regression at 5%, a pass at 10%."""
    wl_file = tmp_path / "mm.yaml"  # what the run recorded as its workload file, now edited
    wl_file.write_text("workloads:\n  - name: mm\n    gate_threshold: 0.5\n")
    rng = np.random.default_rng(2)
    base = make_run({CASE: {"kernel": noisy(rng, N, 1e-3, 0.002)}}, workloads={CASE: "mm"}, rounds=3)
    cur = make_run({CASE: {"kernel": noisy(rng, N, 1.07e-3, 0.002)}}, workloads={CASE: "mm"},
                   gate_thresholds=recorded, rounds=3)
    cur = replace(cur, workload_files=(str(wl_file),))
    return str(store.save(base, tmp_path / "b.json")), str(store.save(cur, tmp_path / "c.json"))


def test_threshold_from_the_runs_record_and_explicit_threshold_wins(tmp_path):
    base, cur = _close_runs(tmp_path, {"mm": 0.10})
    recorded = _gate("--baseline", base, "--current", cur, "--json")
    assert recorded.exit_code == 0, recorded.output
    v = json.loads(recorded.stdout)["verdicts"][0]
    assert (v["threshold"], v["threshold_source"]) == (0.10, "workload")
    explicit = _gate("--baseline", base, "--current", cur, "--threshold", "5%", "--json")
    assert explicit.exit_code == 1, explicit.output
    assert json.loads(explicit.stdout)["verdicts"][0]["threshold_source"] == "explicit"


def test_workload_files_on_disk_are_not_reread(tmp_path):
    # nothing recorded: the 5% default applies, not the 50% the workload file says today
    base, cur = _close_runs(tmp_path, {})
    r = _gate("--baseline", base, "--current", cur, "--json")
    assert r.exit_code == 1, r.output
    v = json.loads(r.stdout)["verdicts"][0]
    assert (v["threshold"], v["threshold_source"]) == (0.05, "default")


def test_gate_usage_errors_exit_2(tmp_path):
    base, cur = _runs(tmp_path)
    missing = _gate("--baseline", str(tmp_path / "nope.json"), "--current", cur, "--results-dir", str(tmp_path))
    assert missing.exit_code == 2 and "nope" in missing.output
    bad = _gate("--baseline", base, "--current", cur, "--threshold", "fast")
    assert bad.exit_code == 2 and "threshold" in bad.output
    other = store.save(make_run({CASE: {"kernel": [1e-3] * N}}, environment=make_env(driver="560.1")),
                       tmp_path / "other.json")
    refused = _gate("--baseline", base, "--current", str(other))
    assert refused.exit_code == 2 and "driver" in refused.output



def test_json_and_markdown_on_stdout_together_are_refused_and_markdown_file_gives_both(tmp_path):
    """Both print the whole verdict on stdout; the Markdown was silently dropped, exit as if it was printed."""
    base, cur = _runs(tmp_path)
    for command in (["gate", "--baseline", base, "--current", cur], ["compare", base, cur]):
        both = CliRunner().invoke(main, [*command, "--json", "--markdown"])
        assert both.exit_code == 2, both.output
        assert both.output.startswith("error: --json and --markdown: ") and both.output.count("\n") == 1
    md = tmp_path / "gate.md"
    r = _gate("--baseline", base, "--current", cur, "--json", "--markdown-file", str(md))
    assert json.loads(r.stdout)["kind"] == "gate" and md.read_text().startswith("### solbench gate")

# ---- `solbench compare` on saved runs ----------------------------------------------------

def test_compare_two_runs_and_two_impls(tmp_path):
    base, cur = _runs(tmp_path, cur_kernel=1.3e-3)
    runner = CliRunner()
    c = runner.invoke(main, ["compare", base, cur, "--impl", "kernel", "--json"])
    assert c.exit_code == 0, c.output
    rows = json.loads(c.stdout)["rows"]
    assert len(rows) == 1 and rows[0]["verdict"] == "SLOWER"
    impls = runner.invoke(main, ["compare", "baseline", "kernel", "--run", cur, "--json"])
    assert impls.exit_code == 0, impls.output
    assert json.loads(impls.stdout)["rows"][0]["verdict"] == "SLOWER"


def test_compare_in_a_named_run_speaks_of_that_run_only(tmp_path):
    """With --run, A and B name implementations of that run: the errors never call them result
    files (A may be a result file's name) nor ask for the --run that was given."""
    base, cur = _runs(tmp_path)
    runner = CliRunner()
    wrong = runner.invoke(main, ["compare", base, "kernel", "--run", cur])
    assert wrong.exit_code == 2, wrong.output
    assert f"'{base}' is not an implementation of --run {cur} (implementations: baseline, kernel)" in wrong.output
    empty = str(store.save(make_run({}), tmp_path / "empty.json"))
    none = runner.invoke(main, ["compare", "baseline", "kernel", "--run", empty])
    assert none.exit_code == 2 and f"--run {empty}: the run holds no case (empty)" in none.output, none.output
    assert "name one with --run" not in none.output


def test_compare_says_why_a_key_is_one_sided(tmp_path):
    base, cur = _runs(tmp_path, statuses={f"{CASE}/kernel": "incorrect"})
    c = CliRunner().invoke(main, ["compare", base, cur, "--json"])
    assert c.exit_code == 0, c.output
    data = json.loads(c.stdout)
    assert data["only_in_a"] == [f"{CASE}/kernel"] and data["other_side"] == {f"{CASE}/kernel": "incorrect"}


# ---- `solbench run --gate-against`: a real tiny run on the CPU ---------------------------

IMPL = '''\
def double(x):
    return x * 2


def boom(x):
    raise RuntimeError("boom")
'''
WORKLOAD = """\
workloads:
  - name: tiny
    parameters: {{n: [64]}}
    dtypes: [float32]
    inputs: {{x: {{shape: [n]}}}}
    outputs: {{y: {{shape: [n]}}}}
    ops: [{{op: mul, numel: n, inputs: 1}}]
    reference: impl.py:double
    baseline: kernel
    implementations:
      kernel: impl.py:double
{extra}"""
FAST = ["--device", "cpu", "--budget", "0.05", "--min-samples", "10", "--max-samples", "50", "-q"]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """Workload files and two synthetic baselines built on one real CPU run of ``kernel``."""
    d = tmp_path_factory.mktemp("live")
    (d / "impl.py").write_text(IMPL)
    (d / "clean.yaml").write_text(WORKLOAD.format(extra=""))
    (d / "broken.yaml").write_text(WORKLOAD.format(extra="      broken: impl.py:boom\n"))
    r = CliRunner().invoke(main, ["run", str(d / "clean.yaml"), "-o", str(d / "real.json"),
                                  "--results-dir", str(d / "results"), *FAST])
    assert r.exit_code == 0, r.output
    real = store.load(d / "real.json")
    assert [(c.case_id, [i.status for i in c.impls]) for c in real.cases] == [("tiny[n=64,float32]", ["ok"])]
    for name, seconds in (("impossibly_fast", 1e-9), ("very_slow", 1e3)):
        store.save(with_samples(real, lambda impl, s=seconds: [s * (1 + i * 1e-3) for i in range(N)]),
                   d / f"{name}.json")
    return d


def _run_gated(d: Path, workload: str, baseline: str, junit: Path):
    return CliRunner().invoke(main, ["run", str(d / workload), "--gate-against", str(d / f"{baseline}.json"),
                                     "--junit", str(junit), "--results-dir", str(d / "results"),
                                     "-o", str(junit.with_suffix(".json")), *FAST])


def test_run_gate_against_a_faster_baseline_is_a_regression_exit_1(live, tmp_path):
    r = _run_gated(live, "clean.yaml", "impossibly_fast", tmp_path / "gate.xml")
    assert r.exit_code == 1, r.output
    assert "REGRESSION" in r.output
    failure = _junit_cases(tmp_path / "gate.xml")["tiny[n=64,float32]/kernel"].find("failure")
    assert failure is not None and failure.get("type") == "REGRESSION"


def test_run_gate_against_with_json_prints_one_document_that_carries_the_verdict(live, tmp_path):
    # --json printed the run alone: a script saw the exit code but not which cases regressed
    for baseline, code in (("impossibly_fast", 1), ("very_slow", 0)):
        r = CliRunner().invoke(main, ["run", str(live / "clean.yaml"), "--gate-against", str(live / f"{baseline}.json"),
                                      "--json", "--results-dir", str(tmp_path / "results"), *FAST])
        assert r.exit_code == code, r.output
        doc = json.loads(r.stdout)  # one JSON document on stdout
        assert doc["cases"] and doc["gate"]["kind"] == "gate" and doc["gate"]["exit_code"] == code
        verdicts = {v["key"]: v["verdict"] for v in doc["gate"]["verdicts"]}
        assert verdicts["tiny[n=64,float32]/kernel"] == ("REGRESSION" if code else "FASTER")
    plain = CliRunner().invoke(main, ["run", str(live / "clean.yaml"), "--json", "--results-dir", str(tmp_path / "r2"),
                                      *FAST])
    assert plain.exit_code == 0 and "gate" not in json.loads(plain.stdout)


def test_run_gate_against_a_slower_baseline_passes_exit_0(live, tmp_path):
    r = _run_gated(live, "clean.yaml", "very_slow", tmp_path / "gate.xml")
    assert r.exit_code == 0, r.output
    tc = _junit_cases(tmp_path / "gate.xml")["tiny[n=64,float32]/kernel"]
    assert tc.find("failure") is None and tc.find("system-out").text.startswith("FASTER")


def test_run_gate_against_exits_4_when_an_implementation_raises_even_if_the_gate_passes(live, tmp_path):
    r = _run_gated(live, "broken.yaml", "very_slow", tmp_path / "gate.xml")
    saved = store.load(tmp_path / "gate.json")
    assert {i.name: i.status for c in saved.cases for i in c.impls} == {"kernel": "ok", "broken": "error"}
    assert _junit_cases(tmp_path / "gate.xml")["tiny[n=64,float32]/kernel"].find("failure") is None  # gate passes
    assert r.exit_code == 4, r.output


FLAKY = '''
def flaky(x):  # fails once armed: in the gate's re-measurement, never in the run itself
    if os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), "armed")):
        raise RuntimeError("boom while re-measured")
    return x * 2
'''


def test_run_gate_against_exits_4_when_an_implementation_fails_while_re_measured(live, tmp_path, monkeypatch):
    """An implementation that fails when the gate re-measures it is BROKEN there: it failed in this command
    as surely as one that failed in the run, so exit 4 (not the gate's 1), and stderr names it."""
    from solbench import api

    (tmp_path / "impl.py").write_text("import os\n\n" + IMPL + FLAKY)
    (tmp_path / "flaky.yaml").write_text(WORKLOAD.format(extra="").replace("kernel: impl.py:double",
                                                                           "kernel: impl.py:flaky"))
    gate_live = api.gate_live

    def armed(*args, **kwargs):
        (tmp_path / "armed").touch()
        return gate_live(*args, **kwargs)

    monkeypatch.setattr(api, "gate_live", armed)
    # one round a side: the REGRESSION against an impossibly fast baseline is re-measured to confirm it
    r = CliRunner().invoke(main, ["run", str(tmp_path / "flaky.yaml"), "--gate-against",
                                  str(live / "impossibly_fast.json"), "--repeat", "1", "--rerun", "1", "--json",
                                  "--results-dir", str(tmp_path / "results"), *FAST])
    doc = json.loads(r.stdout)
    assert [i["status"] for c in doc["cases"] for i in c["impls"]] == ["ok"]  # the run as measured
    assert [(v["verdict"], v["status_cur"]) for v in doc["gate"]["verdicts"]] == [("BROKEN", "error")]
    assert r.exit_code == 4 and doc["gate"]["exit_code"] == 4, r.output
    assert "tiny[n=64,float32] kernel: ERROR while re-measured: RuntimeError: boom while re-measured" in r.stderr


def test_run_gate_against_interrupted_while_re_measuring_exits_130_and_says_so_in_the_junit(live, tmp_path,
                                                                                            monkeypatch):
    """Ctrl-C (or SIGTERM, a cancelled CI job) while the undecided cases are re-measured is an interruption
    (130 or 143), not solbench failing (5, with a traceback); the JUnit file says no verdict came, never what
    an earlier job left there."""
    from solbench import api
    from solbench.errors import RunInterrupted

    def interrupted(base, cur, *args, **kwargs):  # as gate_live's re-measuring run raises it on Ctrl-C
        raise RunInterrupted(cur)

    monkeypatch.setattr(api, "gate_live", interrupted)
    junit = tmp_path / "gate.xml"
    junit.write_text("<testsuites><testsuite><testcase name='an earlier job'/></testsuite></testsuites>")
    r = _run_gated(live, "clean.yaml", "very_slow", junit)
    assert r.exit_code == 130, r.output
    assert "Traceback" not in r.output and "unexpectedly" not in r.output and "interrupted" in r.output
    assert store.load(tmp_path / "gate.json").complete  # the run itself was measured in full and saved
    error = ET.parse(junit).getroot().find("testsuite/testcase/error")
    assert error is not None and "interrupted" in error.get("message")


def test_run_gate_against_refused_says_so_in_the_junit(live, tmp_path):
    """A gate refused (a baseline from another torch major version, no such baseline, no case to measure)
    leaves the JUnit file saying so, as `gate` does, never an earlier job's verdicts. A baseline from other
    hardware or software is refused before anything is measured: the run could never be gated."""
    base = store.load(live / "very_slow.json")
    other = replace(base, environment=replace(base.environment, torch="1.13.0"))
    store.save(other, tmp_path / "other.json")
    junit = tmp_path / "gate.xml"
    junit.write_text("<testsuites><testsuite><testcase name='an earlier job'/></testsuite></testsuites>")
    r = CliRunner().invoke(main, ["run", str(live / "clean.yaml"), "--gate-against", str(tmp_path / "other.json"),
                                  "--junit", str(junit), "--results-dir", str(live / "results"),
                                  "-o", str(tmp_path / "run.json"), *FAST])
    assert r.exit_code == 2 and "torch major" in r.output, r.output
    assert not (tmp_path / "run.json").exists()  # nothing measured, nothing saved
    error = ET.parse(junit).getroot().find("testsuite/testcase/error")
    assert error is not None and "torch major" in error.get("message")
    junit.write_text("<testsuites><testsuite><testcase name='an earlier job'/></testsuite></testsuites>")
    r = _run_gated(live, "clean.yaml", "no_such_run", junit)  # refused before measuring: likewise
    assert r.exit_code == 2 and "no_such_run.json: no such result file" in r.output, r.output
    error = ET.parse(junit).getroot().find("testsuite/testcase/error")
    assert error is not None and "no such result file" in error.get("message")
    junit.write_text("<testsuites><testsuite><testcase name='an earlier job'/></testsuite></testsuites>")
    r = CliRunner().invoke(main, ["run", str(live / "clean.yaml"), "--case", "n=7", "--gate-against",
                                  str(live / "very_slow.json"), "--junit", str(junit), "--results-dir",
                                  str(live / "results"), *FAST])  # refused by the run itself: likewise
    assert r.exit_code == 2 and "no case matches 'n=7'" in r.output, r.output
    error = ET.parse(junit).getroot().find("testsuite/testcase/error")
    assert error is not None and "no case matches" in error.get("message")


def test_run_gate_against_refused_on_another_fingerprint_names_no_option_run_lacks(live, tmp_path):
    """`run` has no --allow-cross-hardware (only `gate` and `report` do): its refusal must not offer it."""
    base = store.load(live / "very_slow.json")
    store.save(replace(base, environment=replace(base.environment, torch="1.13.0")), tmp_path / "other.json")
    r = CliRunner().invoke(main, ["run", str(live / "clean.yaml"), "--gate-against", str(tmp_path / "other.json"),
                                  "--results-dir", str(live / "results"), "-o", str(tmp_path / "run.json"), *FAST])
    assert r.exit_code == 2 and "torch major: 1 (baseline) vs 2 (current)" in r.output, r.output
    assert "--allow-cross-hardware" not in r.output


def test_an_incomplete_current_run_is_refused(tmp_path):
    from dataclasses import replace

    from click.testing import CliRunner

    from solbench.cli import main
    from solbench.results import store

    out = tmp_path / "r.json"
    assert CliRunner().invoke(main, ["run", "tests/data/double.yaml", "-o", str(out), "-i", "baseline",
                                     "--budget", "0.05", "--min-samples", "5", "--max-samples", "30",
                                     "--device", "cpu"]).exit_code == 0
    cut = tmp_path / "cut.json"
    store.save(replace(store.load(out), complete=False), cut)
    result = CliRunner().invoke(main, ["gate", "--baseline", str(out), "--current", str(cut)])
    assert result.exit_code == 2 and "incomplete" in result.output and "Traceback" not in result.output
    unwritable = out / "dir" / "gate.xml"  # below a file: no folder can be made there
    result = CliRunner().invoke(main, ["gate", "--baseline", str(out), "--current", str(out), "--junit",
                                       str(unwritable)])
    assert result.exit_code == 2 and "cannot write" in result.output and "Traceback" not in result.output


def test_an_incomplete_baseline_is_gated_with_a_warning(tmp_path):
    # a baseline interrupted before its last case: what it measured is gated, and one line says the rest
    # is MISSING because the baseline stopped, not because the current run lost it
    base, cur = _runs(tmp_path)
    cut = tmp_path / "cut.json"
    store.save(replace(store.load(base), complete=False), cut)
    warning = f"warning: --baseline {cut}: the run is incomplete"
    result = CliRunner().invoke(main, ["gate", "--baseline", str(cut), "--current", cur])
    assert result.exit_code == CliRunner().invoke(main, ["gate", "--baseline", base, "--current", cur]).exit_code
    assert warning in result.output and "MISSING, not compared" in result.output
    assert "warning" not in CliRunner().invoke(main, ["gate", "--baseline", base, "--current", cur]).output
    for command in (["compare", str(cut), cur], ["compare", "--baseline", base, "--current", str(cut)]):
        result = CliRunner().invoke(main, command)
        assert result.exit_code == 0 and f"{cut}: the run is incomplete" in result.output, result.output


def test_a_run_gated_against_itself_passes_with_a_warning(tmp_path):
    # allowed (a check of the tool), but a CI job wired to the wrong file must not read a silent pass
    base, cur = _runs(tmp_path)
    copy = tmp_path / "copy.json"
    store.save(store.load(base), copy)
    for command in (["gate", "--baseline", base, "--current", str(copy)], ["compare", base, base]):
        result = CliRunner().invoke(main, command)
        assert result.exit_code == 0, result.output
        assert "the same run as" in result.output and "passes by construction" in result.output
    assert "the same run as" not in CliRunner().invoke(main, ["gate", "--baseline", base, "--current", cur]).output


def test_an_empty_or_stdout_junit_path_is_refused_before_reading_anything(tmp_path, monkeypatch):
    # --junit "$JUNIT" with the variable unset wrote no file and said nothing; "-" wrote a file named "-"
    base, cur = _runs(tmp_path)
    monkeypatch.chdir(tmp_path)
    for option, value, text in (("--junit", "", "'--junit': '' names no file or folder (an unset variable?)"),
                                ("--markdown-file", "", "'--markdown-file': '' names no file"),
                                ("--junit", "-", "-: JUnit XML is written as a file, not to stdout")):
        result = CliRunner().invoke(main, ["gate", "--baseline", base, "--current", cur, option, value])
        assert result.exit_code == 2 and text in result.output, result.output
    assert not (tmp_path / "-").exists()


def test_a_misspelled_impl_is_refused_with_the_names_the_runs_hold(tmp_path):
    base, cur = _runs(tmp_path)
    for command in (["compare", base, cur, "--impl", "kernal"],
                    ["gate", "--baseline", base, "--current", cur, "--impl", "kernal"]):
        r = CliRunner().invoke(main, command)
        assert r.exit_code == 2, r.output
        assert "--impl kernal: no such implementation" in r.output and "baseline, kernel" in r.output


def test_gate_refuses_junit_and_markdown_in_one_file(tmp_path):
    """--junit and --markdown-file naming one file: the Markdown, written second, replaced the JUnit XML (a file
    no CI could parse, after exit 0, 1 or 3); refused before anything is read, as ab and run refuse it."""
    base, cur = _runs(tmp_path, rounds=3)
    out = tmp_path / "gate.out"
    r = _gate("--baseline", base, "--current", cur, "--junit", str(out), "--markdown-file", str(out))
    assert r.exit_code == 2, r.output
    assert r.output.startswith("error: --markdown-file ") and "also written by --junit" in r.output
    assert not out.exists()


def test_require_all_fails_a_gate_whose_current_run_lacks_a_case(tmp_path):
    """By default a case absent from the current run is MISSING, listed and never a failure; with
    --require-all it fails the gate (exit 1), and the JSON keeps the gate's own code beside it."""
    rng = np.random.default_rng(7)
    c1, c2 = noisy(rng, 30, 1e-3, 0.01), noisy(rng, 30, 2e-3, 0.01)
    base = store.save(make_run({"c1": {"x": c1}, "c2": {"x": c2}}, rounds=3), tmp_path / "base.json")
    cur = store.save(make_run({"c1": {"x": c1}}, rounds=3), tmp_path / "cur.json")
    lenient = _gate("--baseline", str(base), "--current", str(cur), "--json")
    assert lenient.exit_code == 0 and json.loads(lenient.stdout)["overall"] == "PASS", lenient.output
    strict = _gate("--baseline", str(base), "--current", str(cur), "--json", "--require-all")
    doc = json.loads(strict.stdout)
    assert strict.exit_code == 1 and (doc["exit_code"], doc["gate_exit_code"]) == (1, 0)
    assert doc["required_missing"] == ["c2/x"] and json.loads(lenient.stdout)["required_missing"] == []
    assert "--require-all: 1 case(s) MISSING from the current run: c2/x" in strict.stderr


def test_require_all_passes_a_current_run_that_measures_more_than_the_baseline(tmp_path):
    """--require-all asks for every case the baseline measured; a case the current run adds (absent from
    the baseline, or failing there) is listed as MISSING but is none of them: the gate still passes."""
    rng = np.random.default_rng(7)
    c1, c2 = noisy(rng, 30, 1e-3, 0.01), noisy(rng, 30, 2e-3, 0.01)
    base = store.save(make_run({"c1": {"x": c1}, "c3": {"x": c1}}, rounds=3, statuses={"c3/x": "error"}),
                      tmp_path / "base.json")
    cur = store.save(make_run({"c1": {"x": c1}, "c2": {"x": c2}, "c3": {"x": c1}}, rounds=3), tmp_path / "cur.json")
    r = _gate("--baseline", str(base), "--current", str(cur), "--json", "--require-all")
    doc = json.loads(r.stdout)
    assert {v["key"]: v["verdict"] for v in doc["verdicts"]} == {"c1/x": "PASS", "c2/x": "MISSING", "c3/x": "MISSING"}
    assert r.exit_code == 0 and doc["exit_code"] == 0 and doc["required_missing"] == [], r.output
    assert "--require-all" not in r.stderr


def _one_case_missing(tmp_path):
    """A saved baseline of cases c1 and c2 (3 rounds each) and a current run of c1 alone."""
    rng = np.random.default_rng(7)
    c1, c2 = noisy(rng, 30, 1e-3, 0.01), noisy(rng, 30, 2e-3, 0.01)
    base = store.save(make_run({"c1": {"x": c1}, "c2": {"x": c2}}, rounds=3), tmp_path / "base.json")
    return base, store.save(make_run({"c1": {"x": c1}}, rounds=3), tmp_path / "cur.json")


def test_require_all_makes_each_missing_case_a_junit_failure(tmp_path):
    """Where --require-all fails the gate on a MISSING case, the JUnit file shows that case as a failure (not
    skipped), so that a dashboard agrees with the exit code."""
    base, cur = _one_case_missing(tmp_path)
    junit = tmp_path / "gate.xml"
    r = _gate("--baseline", str(base), "--current", str(cur), "--require-all", "--junit", str(junit))
    assert r.exit_code == 1, r.output
    suite = ET.parse(junit).getroot().find("testsuite")
    assert (suite.get("failures"), suite.get("skipped")) == ("1", "0")
    failure = _junit_cases(junit)["c2/x"].find("failure")
    assert failure is not None and failure.get("type") == "MISSING"
    lenient = _gate("--baseline", str(base), "--current", str(cur), "--junit", str(junit))
    assert lenient.exit_code == 0 and _junit_cases(junit)["c2/x"].find("skipped") is not None


def test_a_current_tree_that_fixes_the_only_case_says_what_the_baseline_held(tmp_path):
    """Nothing in common to compare is bad input (exit 2); where the baseline holds the key but failed it,
    the one line says so rather than leaving the CI owner to guess."""
    samples = [1e-3] * N
    base = store.save(make_run({"c[n=1]": {"k": samples}}, statuses={"c[n=1]/k": "error"}), tmp_path / "b.json")
    cur = store.save(make_run({"c[n=1]": {"k": samples}}), tmp_path / "c.json")
    r = _gate("--baseline", str(base), "--current", str(cur))
    assert r.exit_code == 2, r.output
    assert "no measured case in common (0 in baseline only, 1 in current only; 1 of them present on both sides " \
           "but not measured on one, e.g. c[n=1]/k: error in the baseline)" in r.output


def test_an_infinite_threshold_is_refused_by_compare_and_gate_alike(tmp_path):
    """'1e400%' reads as inf: compare took it (every row SAME, 'threshold': Infinity in its --json, not
    JSON) while the gate called it not positive; both refuse it as not a finite number."""
    base, cur = _runs(tmp_path)
    for args in (["compare", base, cur, "--json"], ["gate", "--baseline", base, "--current", cur]):
        r = CliRunner().invoke(main, [*args, "--threshold", "1e400%"])
        assert r.exit_code == 2, r.output
        assert "'1e400%' is not a finite number" in r.output


@pytest.mark.parametrize("bad", ["newer", "missing", "threshold"])
def test_a_gate_refused_for_a_run_it_cannot_read_leaves_a_junit_error_too(tmp_path, bad):
    """An unreadable run (a newer schema, a missing file) or a bad --threshold is refused (exit 2)
    like any other refusal: the JUnit file says so, not the passing verdicts an earlier job left."""
    base, cur = _runs(tmp_path)
    junit = tmp_path / "gate.xml"
    junit.write_text("<testsuites><testsuite><testcase name='old'/></testsuite></testsuites>")
    args, says = ["--current", cur], ""
    if bad == "newer":
        data = json.loads(Path(cur).read_text())
        Path(cur).write_text(json.dumps({**data, "schema_version": data["schema_version"] + 1}))
        says = "newer than this solbench reads"
    elif bad == "missing":
        args, says = ["--current", str(tmp_path / "gone.json")], "no such result file"
    else:
        args, says = [*args, "--threshold", "abc"], "cannot parse threshold"
    r = _gate("--baseline", base, *args, "--junit", str(junit))
    assert r.exit_code == 2 and says in r.output, r.output
    (case,) = ET.parse(junit).getroot().iter("testcase")
    assert case.get("name") == "gate" and says in case.find("error").get("message")


@pytest.mark.parametrize("args", [["gate", "--baseline", "", "--current", "{cur}"],
                                  ["gate", "--baseline", "{cur}", "--current", ""],
                                  ["compare", "--baseline", "", "--current", "{cur}"],
                                  ["show", ""]])
def test_an_empty_run_name_is_refused_never_read_as_the_latest_run(tmp_path, args):
    """``--baseline "$BASE"`` with BASE unset read the latest saved run, here the current run
    itself: the gate passed (exit 0). An empty name names no run: exit 2."""
    rdir = tmp_path / "results"
    cur = str(store.save_new(make_run({CASE: {"kernel": [1e-3] * N}}, rounds=3), rdir, "head"))
    r = CliRunner().invoke(main, [a.format(cur=cur) for a in args] + ["--results-dir", str(rdir)])
    assert r.exit_code == 2, r.output
    assert "'' names no run" in r.output


def test_one_run_given_twice_on_a_side_is_refused_not_counted_as_rounds(tmp_path):
    """Between single runs a 30% slowdown is INCONCLUSIVE (exit 3); the same two files given three
    times a side read as three runs a side that agree exactly and the gate called it a REGRESSION
    (exit 1). One run given twice (or a copy of it) is refused, exit 2, in gate and compare."""
    base, cur = _runs(tmp_path, cur_kernel=1.3e-3)
    assert _gate("--baseline", base, "--current", cur).exit_code == 3
    copy = tmp_path / "copy.json"
    copy.write_text(Path(cur).read_text())
    for args in (["gate", "--baseline", base, base, base, "--current", cur, cur, cur],
                 ["gate", "--baseline", base, "--current", cur, str(copy)],
                 ["compare", "--baseline", base, base, "--current", cur]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 2, r.output
        assert "the same run as" in r.output and "give separate runs" in r.output


def test_separate_runs_of_a_side_are_still_gated_over_runs(tmp_path):
    rng = np.random.default_rng(1)
    paths = {}
    for name, t in (("b1", 1e-3), ("b2", 1e-3), ("c1", 1e-3), ("c2", 1e-3)):
        paths[name] = str(store.save(make_run({CASE: {"kernel": noisy(rng, N, t, 0.01)}}, rounds=3),
                                     tmp_path / f"{name}.json"))
    r = _gate("--baseline", paths["b1"], paths["b2"], "--current", paths["c1"], paths["c2"])
    assert r.exit_code in (0, 3) and "same run" not in r.output, r.output


def test_a_run_with_a_case_twice_is_refused_naming_its_file(tmp_path):
    base, cur = _runs(tmp_path)
    data = json.loads(Path(cur).read_text())
    data["cases"].append(data["cases"][0])
    Path(cur).write_text(json.dumps(data))
    for args in (["gate", "--baseline", base, "--current", cur], ["compare", base, cur],
                 ["compare", "--baseline", base, "--current", cur]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 2, r.output
        assert f"error: {cur}: duplicate result for '{CASE}/baseline'" in r.output


def test_alpha_one_is_refused_by_its_option_range(tmp_path):
    """--alpha's range read 0<x<=1, and 1 was then refused as 'alpha and confidence must lie in
    (0, 1)': the range the option shows is the one it keeps."""
    base, cur = _runs(tmp_path)
    r = _gate("--baseline", base, "--current", cur, "--alpha", "1")
    assert r.exit_code == 2 and "Invalid value for '--alpha'" in r.output and "0<x<1" in r.output, r.output


@pytest.mark.parametrize("command", ["gate", "ab"])
def test_alpha_nan_is_refused_by_name(tmp_path, command):
    """click's open range lets NaN through (every comparison with it is false); the refusal then came
    from deeper in, without naming --alpha. It is refused as the option's own value."""
    base, cur = _runs(tmp_path)
    args = ["--baseline", base, "--current", cur] if command == "gate" else ["workloads/attn.yaml"]
    r = CliRunner().invoke(main, [command, *args, "--alpha", "nan"])
    assert r.exit_code == 2, r.output
    assert "Invalid value for '--alpha': 'nan' is not a number between 0 and 1" in r.output, r.output


@pytest.mark.parametrize("args, where", [
    (["gate", "--baseline", "--current", "B"], "--baseline needs at least one run (a result file or saved name); "
                                               "none given before --current"),
    (["gate", "--current", "B", "--baseline"], "--baseline needs at least one run (a result file or saved name); "
                                               "none given at the end"),
    (["compare", "--current", "--baseline", "B"], "--current needs at least one run"),
])
def test_a_side_with_no_run_is_named(tmp_path, args, where):
    """`gate --baseline --current b.json` (an unset CI variable): click took --current as the baseline's
    run and then called --current the missing option. The side that got no run is the one named."""
    base, _ = _runs(tmp_path)
    r = CliRunner().invoke(main, [base if a == "B" else a for a in args])
    assert r.exit_code == 2, r.output
    assert where in r.output, r.output


def test_a_dry_run_is_refused_as_one_not_as_runs_with_nothing_in_common(tmp_path):
    # a saved --dry-run timed nothing: the refusal said "no measured case in common (0 in baseline
    # only, 0 in current only)", as if the runs held different cases
    dry = tmp_path / "dry.json"
    made = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "--device", "cpu", "--dry-run", "-o", str(dry)])
    assert made.exit_code == 0, made.output
    result = CliRunner().invoke(main, ["gate", "--baseline", str(dry), "--current", str(dry)])
    assert result.exit_code == 2
    assert "dry run" in result.output and "in common" not in result.output


def test_run_gate_against_a_dry_run_is_refused_as_one_before_measuring(tmp_path):
    # gate refused a saved --dry-run as a dry run, but run --gate-against DRY refused it as 'measured on
    # different hardware or software: device: CPU (baseline) vs ... (current); torch major: unknown ...'
    dry = tmp_path / "dry.json"
    made = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "--device", "cpu", "--dry-run", "-o", str(dry)])
    assert made.exit_code == 0, made.output
    out = tmp_path / "cur.json"
    result = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "-i", "baseline", "--repeat", "1",
                                       "--gate-against", str(dry), "-o", str(out),
                                       "--results-dir", str(tmp_path / "results"), *FAST])
    assert result.exit_code == 2, result.output
    assert "dry run" in result.output and "different hardware" not in result.output
    assert not out.exists()  # refused before anything was measured


def test_require_all_markdown_says_the_gate_fails_as_the_exit_code_does(tmp_path):
    """--require-all failing on a MISSING case exits 1, and the console, JSON and JUnit say so; the Markdown
    (a CI's step summary) still read '### solbench gate: ✅ PASS' with no word of the failing exit."""
    base, cur = _one_case_missing(tmp_path)
    md = tmp_path / "gate.md"
    r = _gate("--baseline", str(base), "--current", str(cur), "--require-all", "--markdown-file", str(md))
    assert r.exit_code == 1, r.output
    heading = md.read_text().splitlines()[0]
    assert heading.startswith("### solbench gate: ") and "exit 1" in heading, heading
    lenient = _gate("--baseline", str(base), "--current", str(cur), "--markdown-file", str(md))
    assert lenient.exit_code == 0 and md.read_text().splitlines()[0] == "### solbench gate: ✅ PASS"


def test_require_all_does_not_call_a_case_both_runs_measured_missing_from_the_current_run(tmp_path):
    """A case measured in both runs but not comparable (one side replayed its calls from a CUDA graph,
    the other launched them on the stream) is MISSING with its reason; --require-all asks only for the
    cases the current run lacks, so it neither fails the gate on it nor reports it "MISSING from the
    current run"."""
    from tests.unit.test_gate import _launched

    rng = np.random.default_rng(4)
    base = store.save(_launched(make_run({"c": {"x": noisy(rng, 30, 1e-3, 0.01), "y": noisy(rng, 30, 1e-3, 0.01)}},
                                         rounds=3), "graph"), tmp_path / "base.json")
    cur = store.save(_launched(make_run({"c": {"x": noisy(rng, 30, 1e-3, 0.01), "y": noisy(rng, 30, 1e-3, 0.01)}},
                                        rounds=3), "graph", {"c/x": "stream"}), tmp_path / "cur.json")
    r = _gate("--baseline", str(base), "--current", str(cur), "--json", "--require-all")
    doc = json.loads(r.stdout)
    verdicts = {v["key"]: v for v in doc["verdicts"]}
    assert verdicts["c/x"]["verdict"] == "MISSING" and "launched differently" in verdicts["c/x"]["reason"]
    assert verdicts["c/y"]["verdict"] == "PASS"
    assert r.exit_code == 0 and doc["required_missing"] == [], r.output
    assert "MISSING from the current run" not in r.stderr


def test_a_junit_file_on_a_full_disk_is_one_line_and_exit_2_not_a_regression(tmp_path, monkeypatch):
    """The JUnit write failed (a full disk), then the error handler's own JUnit refusal failed the same
    way inside it: a chain of tracebacks and exit 1, which a CI reads as a regression."""
    from solbench.errors import ResultsWriteError

    base, cur = _runs(tmp_path, rounds=3)
    write = store.write_text

    def full(path: Path, text, **kwargs):  # type: ignore[no-untyped-def]
        if str(path).endswith(".xml"):
            raise ResultsWriteError(f"cannot write {path}: No space left on device")
        return write(path, text, **kwargs)

    monkeypatch.setattr(store, "write_text", full)
    for args in (["--baseline", base, "--current", cur], ["--baseline", str(tmp_path / "nothing.json"), "--current", cur]):
        r = _gate(*args, "--junit", str(tmp_path / "gate.xml"))
        assert r.exit_code == 2 and isinstance(r.exception, SystemExit), r.output
        assert "Traceback" not in r.output and r.output.count("error: ") == 1, r.output
    assert "No space left on device" in _gate("--baseline", base, "--current", cur, "--junit",
                                              str(tmp_path / "gate.xml")).output


def test_standard_output_on_a_full_disk_is_one_line_and_exit_2(tmp_path):
    """``show run.json > /dev/full`` ended in a traceback and "solbench failed unexpectedly" (exit 5):
    a full disk is the machine's state, not a bug."""
    import subprocess
    import sys

    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    base, _ = _runs(tmp_path, rounds=3)
    for args in (["show", base], ["show", base, "--json"]):
        with open("/dev/full", "w") as full:
            r = subprocess.run([sys.executable, "-m", "solbench", *args], stdout=full, stderr=subprocess.PIPE,
                               text=True, timeout=120)
        assert r.returncode == 2, r.stderr
        assert "Traceback" not in r.stderr and "error: cannot write to standard output: No space left" in r.stderr
