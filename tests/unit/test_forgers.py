"""Attacks on the harness itself, end to end on the CPU (tests/data/hostile/forgers.py).

Each implementation computes the right answer and attacks the worker boundary: it sends the parent
a pickle that runs code when loaded, patches or re-points what the worker times and checks with,
rewrites the samples, or returns outputs that are computed after the timed window. Each must be
caught, and the honest implementations in the same run must stay ok. Nothing here is timed: the
one wall-time case sleeps 0.2 s per call and claims microseconds (see solbench.measure.watch).
"""

import subprocess
import sys

import pytest
from click.testing import CliRunner

from solbench.cli import main
from solbench.results import store

HOSTILE = "tests/data/hostile/hostile.yaml"
FAST = ["--budget", "0.05", "--min-samples", "5", "--max-samples", "30", "--device", "cpu"]

CAUGHT = {
    "sends_pickle": ("reward_hack", "sent not a JSON message"),
    "patches_timer_sample": ("reward_hack", "solbench.device.timer.CpuTimer.sample"),
    "patches_timer_clock": ("reward_hack", "instance timer cpu._clock"),
    "rebinds_worker_measure": ("reward_hack", "solbench.measure.worker.measure"),
    "rebinds_tensors_module": ("reward_hack", "solbench.measure.worker.tensors"),
    "loose_tolerance": ("reward_hack", "solbench.measure.worker.tolerance_for"),
    # how many were streamed is --max-samples only where the loop got there within --budget: not said
    "scales_samples_in_frame": ("reward_hack", "streamed as they were taken (rewritten after the fact)"),
    "rewrites_sent_samples": ("reward_hack", "multiprocessing.connection.Connection.send_bytes"),
    "predicts_rng": ("reward_hack", "work skipped on some calls"),
    "returns_lazy_mapping": ("incorrect", "outputs must exist when the call returns"),
    "returns_generator": ("incorrect", "outputs must exist when the call returns"),
}


def _statuses(run):
    return {r.name: (r.status, r.message) for c in run.cases for r in c.impls}


@pytest.fixture(scope="module")
def forgers_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("forgers") / "forgers.json"
    result = CliRunner().invoke(main, ["run", HOSTILE, "-w", "forgers", "--timeout", "120", "-o", str(out), *FAST])
    return result, store.load(out)


@pytest.mark.parametrize("name", sorted(CAUGHT))
def test_every_attack_on_the_harness_is_caught(forgers_run, name):
    result, run = forgers_run
    assert result.exit_code == 4, result.output
    status, message = _statuses(run)[name]
    want_status, want_text = CAUGHT[name]
    assert status == want_status, message
    assert want_text in message, message


def test_a_pickle_from_a_worker_never_runs_in_the_parent(forgers_run):
    # the payload would set this flag in whatever process unpickled it; the parent is this process
    assert not hasattr(sys, "solbench_hostile_payload_ran")
    status, message = _statuses(forgers_run[1])["sends_pickle"]
    assert status == "reward_hack" and "killed" in message


def test_honest_implementations_beside_the_attacks_are_ok(forgers_run):
    status = _statuses(forgers_run[1])
    assert status["baseline"][0] == "ok" and status["honest"][0] == "ok"
    assert forgers_run[1].complete


def test_samples_claiming_a_fraction_of_the_watched_time_are_caught(tmp_path):
    out = tmp_path / "slow.json"
    result = CliRunner().invoke(main, ["run", HOSTILE, "-w", "slow_forgers", "--timeout", "300", "-o", str(out),
                                       "--budget", "0.05", "--min-samples", "30", "--max-samples", "40",
                                       "--device", "cpu"])
    assert result.exit_code == 4, result.output
    status = _statuses(store.load(out))
    assert status["rewrites_window_start"][0] == "reward_hack"
    assert "forged timings" in status["rewrites_window_start"][1]
    # and with a protocol that claims 1000 graph-replayed calls a sample: the parent knows the timer
    widening = status["rewrites_window_start_widening_the_bound"]
    assert widening[0] == "reward_hack" and "forged timings" in widening[1], widening
    assert status["baseline"][0] == "ok" and status["honest"][0] == "ok"


def test_a_forger_that_rigs_the_loops_draws_is_still_verified_at_random(tmp_path):
    """shadows_rng_draw sets ``random`` on the loop's generator instance, so that no timed call after
    the first four is verified, and skips the work on all of them but the last. The loop draws through
    its generator's class, taken before any call it makes: the rigged instance is never asked, and one
    of the 25 calls skipped is verified (all of them escape with probability 4e-5)."""
    out = tmp_path / "rng.json"
    result = CliRunner().invoke(main, ["run", HOSTILE, "-w", "rng_forgers", "--timeout", "120", "-o", str(out),
                                       "--budget", "60", "--min-samples", "30", "--max-samples", "30",
                                       "--repeat", "1", "--device", "cpu"])
    assert result.exit_code == 4, result.output
    status = _statuses(store.load(out))
    assert status["shadows_rng_draw"][0] == "reward_hack", status["shadows_rng_draw"]
    assert "work skipped on some calls" in status["shadows_rng_draw"][1]
    assert status["baseline"][0] == "ok" and status["honest"][0] == "ok"


@pytest.mark.parametrize("workload, impl, timeout", [("flooders", "floods_its_pipe", 3),
                                                     ("stallers", "sends_half_a_message", 2)])
def test_a_worker_that_abuses_its_pipe_still_times_out_and_the_run_goes_on(tmp_path, workload, impl, timeout):
    # floods_its_pipe sends progress messages without end from its first call: the parent read every
    # one, deadline or not, and waited for it forever (its own wait, or asking whether it was still
    # busy once hangs, beside it, timed out); what it sends past its deadline no longer counts.
    # sends_half_a_message writes a length header and one byte of its message, then sleeps: the parent
    # read a message whole once its first bytes were there, with no deadline, and waited forever.
    out = tmp_path / f"{workload}.json"
    proc = subprocess.run([sys.executable, "-m", "solbench", "run", HOSTILE, "-w", workload, "--timeout", str(timeout),
                           "--repeat", "1", "-o", str(out), "-q", "--results-dir", str(tmp_path / "r"), *FAST],
                          capture_output=True, text=True, timeout=300)  # a hang, not slowness, is what this catches
    assert proc.returncode == 4, proc.stderr[-2000:]
    status = _statuses(store.load(out))
    assert status[impl][0] == "timeout", status[impl]
    assert f"no result within {timeout} s" in status[impl][1]
    assert status["hangs"][0] == "timeout"
    assert status["baseline"][0] == "ok" and status["honest"][0] == "ok"
