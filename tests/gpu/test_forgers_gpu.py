"""Attacks on the harness on a GPU, beside honest implementations that must stay ok (the GPU
counterpart of tests/unit/test_forgers.py; the implementations are in tests/data/hostile/forgers.py)."""

import sys

import pytest
from click.testing import CliRunner

from solbench.cli import main
from solbench.results import store

pytestmark = pytest.mark.gpu
HOSTILE = "tests/data/hostile/hostile_gpu.yaml"

CAUGHT = {
    "sends_pickle": "sent not a JSON message",
    "patches_timer_sample": "CudaColdTimer.sample",
    "shadows_gpu_timer_sample": "instance timer cold.sample",
    "patches_event_timer": "torch.cuda.Event.elapsed_time",
    "rebinds_worker_measure": "solbench.measure.worker.measure",
    "rebinds_tensors_module": "solbench.measure.worker.tensors",
    "loose_tolerance": "solbench.measure.worker.tolerance_for",
    "scales_samples_in_frame": "streamed as they were taken",
    "rewrites_sent_samples": "Connection.send_bytes",
    "predicts_rng": "work skipped on some calls",
    "returns_lazy_mapping": "outputs must exist when the call returns",
    "returns_generator": "outputs must exist when the call returns",
}


def _run(tmp_path, workload, *flags):
    out = tmp_path / f"{workload}.json"
    result = CliRunner().invoke(main, ["run", HOSTILE, "-w", workload, "--timeout", "120", "-o", str(out),
                                       "--budget", "0.5", "--repeat", "1", *flags])
    run = store.load(out)
    return result, {r.name: (r.status, r.message) for c in run.cases for r in c.impls}


def test_gpu_attacks_on_the_harness_are_caught_and_honest_ones_are_ok(tmp_path):
    result, status = _run(tmp_path, "gpu_forgers")
    assert result.exit_code == 4, result.output
    assert not hasattr(sys, "solbench_hostile_payload_ran")
    for name, text in CAUGHT.items():
        assert status[name][0] in ("reward_hack", "incorrect"), (name, status[name])
        assert text in status[name][1], (name, status[name])
    for name in ("baseline", "honest"):
        assert status[name][0] == "ok", status[name]


def test_a_re_recorded_start_event_is_caught_by_the_parents_clock(tmp_path):
    result, status = _run(tmp_path, "gpu_slow_forgers", "--min-samples", "30", "--max-samples", "40")
    assert result.exit_code == 4, result.output
    assert status["rerecords_start_event"][0] == "reward_hack", status["rerecords_start_event"]
    assert "forged timings" in status["rerecords_start_event"][1]
    for name in ("baseline", "honest"):
        assert status[name][0] == "ok", status[name]
