"""Faults and cheats, end to end on the CPU: each becomes a status, the run goes on, exit code 4.

The implementations are in tests/data/hostile/. Nothing here depends on how fast the machine is:
the faults never finish or die, the cheats are caught by checks that do not time anything.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from solbench.cli import main
from solbench.results import store

HOSTILE = "tests/data/hostile/hostile.yaml"
FAST = ["--budget", "0.05", "--min-samples", "5", "--max-samples", "30", "--device", "cpu"]


def _statuses(run):
    return {r.name: (r.status, r.message) for c in run.cases for r in c.impls}


@pytest.fixture(scope="module")
def faults_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("faults") / "faults.json"
    # the timeout starts once the worker is up: 3 s is ample for the honest ones, and bounds "hangs"
    result = CliRunner().invoke(main, ["run", HOSTILE, "-w", "faults", "--timeout", "3", "-o", str(out), "--repeat", "1",
                                       *FAST])
    return result, store.load(out)


def test_faults_become_statuses_and_the_run_goes_on(faults_run):
    result, run = faults_run
    assert result.exit_code == 4, result.output
    status = _statuses(run)
    assert status["raises"][0] == "error" and "this implementation is broken" in status["raises"][1]
    assert status["hangs"][0] == "timeout"
    assert status["exits_zero"] == ("crashed", "the implementation called sys.exit(0)")
    assert status["os_exit"][0] == "crashed" and "code 1" in status["os_exit"][1]
    assert status["segfault"][0] == "crashed" and "SIGSEGV" in status["segfault"][1]
    assert status["huge_allocation"][0] == "oom"
    # healthy implementations before and after the faulty ones are measured
    for name in ("baseline", "honest"):
        assert status[name][0] == "ok", status[name]
    honest = next(r for c in run.cases for r in c.impls if r.name == "honest")
    assert honest.timing.n >= 5 and honest.score.speedup is not None
    assert run.complete and run.protocol.isolation == "worker"


def test_a_fault_keeps_the_workers_last_output_lines(faults_run):
    _, run = faults_run
    raises = next(r for c in run.cases for r in c.impls if r.name == "raises")
    assert raises.message.endswith("(at faults.py:11)")


RAISED = {
    "keyboard_interrupt": ("error", "KeyboardInterrupt (at faults.py:62)"),
    "generator_exit": ("error", "GeneratorExit (at faults.py:66)"),
    "unprintable": ("error", "Unprintable: (its message could not be read: str() raised ValueError) (at faults.py:75)"),
}


@pytest.mark.parametrize("mode", [[], ["--in-process"]], ids=["worker", "in-process"])
def test_an_implementation_raising_what_is_no_exception_or_cannot_be_printed_is_an_error(tmp_path, mode):
    # in-process a KeyboardInterrupt is the user's Ctrl-C as far as solbench can tell: it stops the run
    raised = {name: RAISED[name] for name in RAISED if not mode or name != "keyboard_interrupt"}
    out = tmp_path / "raisers.json"
    picked = [arg for name in ("baseline", *raised, "honest") for arg in ("-i", name)]
    result = CliRunner().invoke(main, ["run", HOSTILE, "-w", "raisers", *picked, "-o", str(out), "--repeat", "1",
                                       *mode, *FAST])
    assert result.exit_code == 4, result.output
    status = _statuses(store.load(out))
    assert {name: status[name] for name in raised} == raised
    assert status["baseline"][0] == status["honest"][0] == "ok"


CAUGHT = {
    "cached_by_nothing": ("reward_hack", "earlier call's output"),
    "cached_by_pointer": ("reward_hack", "earlier call's output"),
    "cached_by_contents": ("reward_hack", "earlier call's output"),
    "cached_copy_by_pointer": ("reward_hack", "new values in x, residual (the tensors it was timed on"),
    "returns_input": ("reward_hack", "shares storage with input 'residual'"),
    "returns_view_of_input": ("reward_hack", "shares storage with input 'residual'"),
    "returns_subclass": ("reward_hack", "not a plain torch.Tensor"),
    "returns_meta": ("reward_hack", "meta tensor"),
    "mutates_input": ("reward_hack", "input 'x' was modified in place"),
    # tensor methods set on the instance, which the checks would call: the copy the output is judged
    # on, the input bit check
    "lazy_detach": ("reward_hack", "output 'out' has torch.Tensor attribute(s) shadowed on the instance (detach)"),
    "mutates_input_hidden": ("reward_hack", "input 'x' has torch.Tensor attribute(s) shadowed on the instance (view)"),
    "partial_output": ("incorrect", "input set 0: out:"),  # NaN-poisoned or stale: never right
    "low_precision": ("incorrect", "outside atol"),
    "honest_first_calls_only": ("reward_hack", "work skipped on some calls"),
    # right on the inputs it was timed on, 0.1% off on unseen ones: a numerical difference, not a cache
    "drifts_on_unseen_inputs": ("incorrect", "a numerical difference, not a stale result"),
    "patches_comparison": ("reward_hack", "solbench.measure.tensors.compare"),
    "patches_clock": ("reward_hack", "time.perf_counter_ns"),
    # the new values are written without moving the tensors' version counters
    "cached_by_version": ("reward_hack", "new values in x, residual (the tensors it was timed on; set-up not run again"),
    # a requirement raised once its calls had run is no skip (which would exit 0)
    "skipped_when_unseen": ("error", "needs an sm_100 GPU (raised after a call of it had run here"),
    # what the comparison calls, beyond the names it was written with: each returns zeros
    "patches_stack": ("reward_hack", "torch.stack"),
    "patches_tensor_operator": ("reward_hack", "torch.Tensor.__rmul__"),
    "patches_builtin": ("reward_hack", "builtins.int"),
    "shadows_builtin_in_module": ("reward_hack", "solbench.measure.tensors.int"),
}


@pytest.fixture(scope="module")
def cheats_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("cheats") / "cheats.json"
    result = CliRunner().invoke(main, ["run", HOSTILE, "-w", "cheats", "--timeout", "60", "-o", str(out), *FAST])
    return result, store.load(out)


@pytest.mark.parametrize("name", sorted(CAUGHT))
def test_every_cheat_is_caught(cheats_run, name):
    result, run = cheats_run
    assert result.exit_code == 4
    status, message = _statuses(run)[name]
    want_status, want_text = CAUGHT[name]
    assert status == want_status, message
    assert want_text in message


def test_work_left_in_a_thread_is_caught(cheats_run):
    # The thread writes the output 0.2 s after the call returned: the outputs change after the call,
    # or (should a check look later still) read NaN; either way it is not ok.
    status, message = _statuses(cheats_run[1])["work_in_thread"]
    assert status in ("reward_hack", "incorrect"), message


def test_a_thread_left_behind_that_touches_nothing_is_ok(cheats_run):
    # One thread per call, none ever ends: checked on its effects, it is right and measured. Each
    # check waits once for all of them, not for each in turn (which outran the 60 s timeout here).
    status, message = _statuses(cheats_run[1])["leaves_a_thread"]
    assert status == "ok", message


def test_honest_implementations_beside_cheats_are_ok(cheats_run):
    status = _statuses(cheats_run[1])
    assert status["baseline"][0] == "ok" and status["honest"][0] == "ok"


def test_a_mutating_implementation_cannot_break_the_next_one(cheats_run):
    # mutates_input runs before honest; each worker draws its own inputs
    assert _statuses(cheats_run[1])["honest"][0] == "ok"


def test_a_lone_surrogate_in_an_error_message_is_written_escaped(tmp_path):
    # an implementation's exception text reaches the terminal, the JSON, Markdown and JUnit: a lone
    # surrogate cannot be written as UTF-8 and crashed run (exit 5) and a gate of its result
    (tmp_path / "impl.py").write_text("def ref(x):\n    return x * 2\n\n"
                                      "def bad(x):\n    raise RuntimeError('boom \\ud800 \\x1b[2J\\rok')\n")
    wl = tmp_path / "wl.yaml"
    wl.write_text("workloads:\n  - name: tiny\n    parameters: {n: [64]}\n    dtypes: [float32]\n"
                  "    inputs: {x: {shape: [n]}}\n    outputs: {y: {shape: [n]}}\n"
                  "    reference: impl.py:ref\n    implementations: {baseline: impl.py:ref, bad: impl.py:bad}\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONIOENCODING"}
    out = tmp_path / "r.json"
    result = subprocess.run([sys.executable, "-m", "solbench", "run", str(wl), "-o", str(out), "--repeat", "1",
                             *FAST, "--results-dir", str(tmp_path / "results")],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 4, result.stderr[-2000:]  # an implementation failed, not solbench
    assert "boom \\ud800" in result.stdout + result.stderr
    status, message = _statuses(store.load(out))["bad"]
    assert status == "error" and "boom \\ud800 \\x1b[2J" in message  # no clearing the screen either
    assert "\x1b" not in result.stdout + result.stderr
    md = tmp_path / "gate.md"
    gated = subprocess.run([sys.executable, "-m", "solbench", "gate", "--baseline", str(out), "--current", str(out),
                            "--markdown-file", str(md)], capture_output=True, text=True, timeout=300, env=env)
    assert gated.returncode == 1, gated.stderr[-2000:]  # BROKEN, reported
    assert "\\ud800" in md.read_text(encoding="utf-8")


def test_implementation_output_never_reaches_the_json_on_stdout(tmp_path):
    src = tmp_path / "noisy.py"
    src.write_text("def fn(x):\n    print('hello from the implementation')\n    return x * 2\n\n"
                   "def ref(x):\n    return x * 2\n")
    wl = tmp_path / "noisy.yaml"
    wl.write_text("workloads:\n  - name: noisy\n    parameters: {n: [64]}\n    dtypes: [float32]\n"
                  "    inputs: {x: {shape: [n]}}\n    outputs: {y: {shape: [n]}}\n"
                  "    reference: noisy.py:ref\n    implementations: {baseline: noisy.py:fn}\n")
    result = subprocess.run([sys.executable, "-m", "solbench", "run", str(wl), "--json", *FAST,
                             "--results-dir", str(tmp_path / "results")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["cases"][0]["impls"][0]["status"] == "ok"


def _default_sigint():
    # A background job of a non-interactive shell starts with SIGINT ignored, and Python then keeps
    # ignoring it: give the child the default, as a terminal's foreground process has.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _slow_run(tmp_path, sizes, options=("--timeout", "600"), **popen):
    """Start `solbench run` on a workload whose first case is quick and whose others never return;
    return (process, result file) once the first case is saved."""
    src = tmp_path / "slow.py"
    src.write_text("def ref(x, n):\n    return x * 2\n\n"
                   "def fn(x, n):\n    if n > 64:\n        while True:\n            pass\n    return x * 2\n")
    wl = tmp_path / "slow.yaml"
    wl.write_text(f"workloads:\n  - name: slow\n    parameters: {{n: {list(sizes)}}}\n    dtypes: [float32]\n"
                  "    inputs: {x: {shape: [n]}}\n    outputs: {y: {shape: [n]}}\n"
                  "    reference: slow.py:ref\n    implementations: {baseline: slow.py:fn}\n")
    out = tmp_path / "slow.json"
    proc = subprocess.Popen([sys.executable, "-m", "solbench", "run", str(wl), "-o", str(out), "-q",
                             *options, *FAST], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **popen)
    deadline = time.monotonic() + 900
    while not out.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)  # waits for the first case to be saved; asserts nothing about speed
    if not out.exists():
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"no result file: {err}")
    return proc, out


def _stop(proc, sig):
    """Send ``sig`` and wait for the run to end; its stderr."""
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=900)  # a hang, not slowness, is what this would catch
    finally:
        proc.kill()
        proc.communicate()
    return err


@pytest.mark.parametrize("options", [("--timeout", "600"), ("--in-process",)], ids=["worker", "in-process"])
def test_ctrl_c_saves_what_was_measured_and_exits_130(tmp_path, options):
    # in-process the Ctrl-C lands in the implementation's own call: still the user's, it stops the run
    proc, out = _slow_run(tmp_path, (64, 128), options, preexec_fn=_default_sigint)
    err = _stop(proc, signal.SIGINT)
    assert proc.returncode == 130, err
    run = store.load(out)
    assert not run.complete
    assert [c.case_id for c in run.cases] == ["slow[n=64,float32]"]
    assert "interrupted" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_results_dir_is_refused_before_measuring(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    result = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "--results-dir", str(ro / "r"), *FAST])
    assert result.exit_code == 2 and "cannot write" in result.output


def test_results_path_that_is_a_file_is_refused_before_measuring(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "--results-dir", str(blocker / "r"),
                                       *FAST])
    assert result.exit_code == 2 and "cannot write" in result.output
    assert "Traceback" not in result.output


def test_existing_output_is_not_overwritten_without_force(tmp_path):
    out = tmp_path / "exists.json"
    out.write_text("{}")
    result = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "-o", str(out), *FAST])
    assert result.exit_code == 2 and "--force" in result.output
    assert out.read_text() == "{}"


@pytest.mark.parametrize("flag,name", [("-i", "no_such_impl"), ("-w", "no_such_workload")])
def test_selecting_nothing_that_exists_is_an_error(flag, name):
    result = CliRunner().invoke(main, ["run", "tests/data/double.yaml", flag, name, *FAST])
    assert result.exit_code == 2
    assert name in result.output and "there are:" in result.output


def test_in_process_mode_runs_the_same_checks(tmp_path):
    out = tmp_path / "inproc.json"
    result = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "--in-process", "-o", str(out), *FAST])
    assert result.exit_code == 4  # double.yaml has a wrong implementation
    run = store.load(out)
    assert run.protocol.isolation == "in-process"
    assert _statuses(run)["wrong"][0] == "incorrect" and _statuses(run)["baseline"][0] == "ok"


def test_sigterm_saves_what_was_measured_marked_incomplete_and_exits_143(tmp_path):
    proc, out = _slow_run(tmp_path, (64, 128, 256))
    assert not store.load(out).complete  # a save before the last one never says complete
    err = _stop(proc, signal.SIGTERM)
    assert proc.returncode == 143, err
    run = store.load(out)
    assert not run.complete
    assert [c.case_id for c in run.cases] == ["slow[n=64,float32]"]
    assert "interrupted" in err and "Traceback" not in err


def test_a_finished_run_says_complete_and_every_save_before_it_does_not(tmp_path):
    from solbench.cli.common import Saver

    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "-o", str(out), "-i", "baseline", *FAST])
    assert result.exit_code == 0, result.output
    run = store.load(out)
    assert run.complete
    saver = Saver(tmp_path / "p.json", tmp_path, None, force=False)
    saver.save(run)
    assert not store.load(tmp_path / "p.json").complete
    saver.save(run, final=True)
    assert store.load(tmp_path / "p.json").complete


def test_ctrl_c_during_start_up_is_one_line_and_130(monkeypatch):
    from solbench import api

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "run", interrupted)
    result = CliRunner().invoke(main, ["run", "tests/data/double.yaml", *FAST])
    assert result.exit_code == 130, result.output
    assert "Aborted" not in result.output and "interrupted" in result.output


def test_a_process_an_implementation_forks_does_not_outlive_the_run(tmp_path):
    src = tmp_path / "forks.py"
    src.write_text("import os, time\n\ndef ref(x, n):\n    return x * 2\n\n"
                   "def fn(x, n):\n    if os.fork() == 0:\n        time.sleep(3600)\n        os._exit(0)\n"
                   "    return x * 2\n")
    wl = tmp_path / "forks.yaml"
    wl.write_text("workloads:\n  - name: forks\n    parameters: {n: [64]}\n    dtypes: [float32]\n"
                  "    inputs: {x: {shape: [n]}}\n    outputs: {y: {shape: [n]}}\n"
                  "    reference: forks.py:ref\n    implementations: {baseline: forks.py:fn}\n")
    # solbench's stdout is a pipe: communicate() returns only once every process holding it has exited
    proc = subprocess.Popen([sys.executable, "-m", "solbench", "run", str(wl), "-q", "--results-dir",
                             str(tmp_path / "r"), *FAST], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=900)  # a hang (the children sleep an hour), not slowness
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "outside its worker's process group" not in err  # they stayed in it: killed with it, no escape


def test_an_implementation_deleting_files_in_its_folder_cannot_break_the_next(tmp_path, monkeypatch):
    (tmp_path / "impls").mkdir()
    (tmp_path / "impls" / "f.py").write_text(
        "import os\n\ndef ref(x, n):\n    return x * 2\n\n"
        "def wipes(x, n):\n    for name in os.listdir('.'):\n        if os.path.isfile(name):\n"
        "            os.remove(name)\n    return x * 2\n\ndef honest(x, n):\n    return x * 2\n")
    (tmp_path / "w.yaml").write_text(
        "workloads:\n  - name: wipe\n    parameters: {n: [64]}\n    dtypes: [float32]\n"
        "    inputs: {x: {shape: [n]}}\n    outputs: {y: {shape: [n]}}\n    reference: impls/f.py:ref\n"
        "    implementations: {baseline: impls/f.py:wipes, honest: impls/f.py:honest}\n")
    (tmp_path / "keep.txt").write_text("mine")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out" / "r.json"
    result = CliRunner().invoke(main, ["run", "w.yaml", "-o", str(out), *FAST])
    assert result.exit_code == 0, result.output
    assert {r.name: r.status for c in store.load(out).cases for r in c.impls} == {"baseline": "ok", "honest": "ok"}
    assert (tmp_path / "keep.txt").read_text() == "mine" and (tmp_path / "w.yaml").exists()


def test_a_process_that_cheated_measures_no_other_case(tmp_path):
    """A reward_hack retires its worker: the implementation's next case starts in a fresh process, which holds
    nothing the cheat kept (here: that it has cheated already, and may now look honest)."""
    out = tmp_path / "run.json"
    result = CliRunner().invoke(main, ["run", HOSTILE, "-w", "cheat_once", "-o", str(out), "--repeat", "1", *FAST])
    assert result.exit_code == 4, result.output
    run = store.load(out)
    assert len(run.cases) == 2
    for case in run.cases:
        status = {i.name: i.status for i in case.impls}
        assert status == {"baseline": "ok", "cheats_in_its_first_case": "reward_hack"}, (case.case_id, status)
