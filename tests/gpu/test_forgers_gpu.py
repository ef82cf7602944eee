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
    # launched on the stream: the call's Python runs inside the timing loop, where these attacks act
    result, status = _run(tmp_path, "gpu_forgers", "--launch", "stream")
    assert result.exit_code == 4, result.output
    assert not hasattr(sys, "solbench_hostile_payload_ran")
    for name, text in CAUGHT.items():
        assert status[name][0] in ("reward_hack", "incorrect"), (name, status[name])
        assert text in status[name][1], (name, status[name])
    for name in ("baseline", "honest"):
        assert status[name][0] == "ok", status[name]


def test_a_re_recorded_start_event_is_caught_by_the_parents_clock(tmp_path):
    result, status = _run(tmp_path, "gpu_slow_forgers", "--min-samples", "30", "--max-samples", "40",
                          "--launch", "stream")
    assert result.exit_code == 4, result.output
    assert status["rerecords_start_event"][0] == "reward_hack", status["rerecords_start_event"]
    assert "forged timings" in status["rerecords_start_event"][1]
    for name in ("baseline", "honest"):
        assert status[name][0] == "ok", status[name]


def test_replayed_calls_run_no_python_so_in_loop_attacks_cannot_act(tmp_path):
    """With each call a CUDA graph's replay (the default where CUPTI is), the call's Python runs only
    while it is captured, outside the timing loop: the attacks that rewrite the loop's samples from
    the call's frame, or record the start event again after the call's work, find nothing to act on,
    and their times are what their GPU work takes."""
    pytest.importorskip("cupti")
    out = tmp_path / "graph.json"
    result = CliRunner().invoke(main, ["run", HOSTILE, "-w", "gpu_forgers", "-w", "gpu_slow_forgers", "-i", "baseline",
                                       "-i", "scales_samples_in_frame", "-i", "rerecords_start_event", "--timeout",
                                       "120", "-o", str(out), "--budget", "0.5", "--repeat", "1",
                                       "--min-samples", "30", "--max-samples", "40"])
    assert result.exit_code == 0, result.output
    points = {(c.case_id.split("[")[0], r.name): r for c in store.load(out).cases for r in c.impls}
    baseline = points[("gpu_forgers", "baseline")].timing.median
    scaled = points[("gpu_forgers", "scales_samples_in_frame")]
    slept = points[("gpu_slow_forgers", "rerecords_start_event")]
    for r in (scaled, slept):
        assert r.status == "ok" and r.protocol["launch"] == "graph", (r.name, r.status, r.protocol)
    assert scaled.timing.median > baseline / 2  # not divided by FACTOR (700)
    assert slept.timing.median > 0.1  # its ~200 ms sleep is inside the window
