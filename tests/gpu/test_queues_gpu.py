"""One work queue per worker context where CUPTI saw one stream (solbench.measure.queues), on a real GPU.

Structural checks only (which worker got which setting, what is recorded), no timing thresholds.
"""

import json
import os
import subprocess
import sys

import pytest
import torch  # noqa: F401  (the conftest skips this module without CUDA)

pytestmark = pytest.mark.gpu


def _run(tmp_path, env_extra):
    pytest.importorskip("cupti")
    out = tmp_path / "run.json"
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_DEVICE_MAX_CONNECTIONS", "SOLBENCH_WORK_QUEUES")}
    env.update(env_extra)
    done = subprocess.run([sys.executable, "-m", "solbench", "run", "tests/data/hostile/hostile_gpu.yaml",
                           "-w", "gpu_streams", "--repeat", "3", "--max-rounds", "3", "--budget", "0.2",
                           "-o", str(out), "--quiet"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(out.read_text())
    impls = [i for c in data["cases"] for i in c["impls"] if i["protocol"].get("part") is None]
    return {i["name"]: i for i in impls}


def test_a_one_stream_implementation_gets_one_queue_after_its_first_round(tmp_path):
    impls = _run(tmp_path, {})
    base, side = impls["baseline"], impls["joined_side_stream"]
    assert base["status"] == "ok" and side["status"] == "ok", (base["message"], side["message"])
    assert base["protocol"]["streams"] == 1
    assert side["protocol"]["streams"] == 2  # CUPTI saw the product on the side stream
    # round 1 with the driver's queues; rounds 2 and 3 in workers started after round 1's result
    assert "work_queues" not in base["protocol"]  # the merged protocol is round 1's
    assert base["protocol"]["one_queue_rounds"] == 2
    assert "one_queue_rounds" not in side["protocol"]  # several streams: the driver's default, every round
    assert len(set(base["timing"]["rounds"])) == 3


def test_work_queues_driver_leaves_every_worker_at_the_default(tmp_path):
    impls = _run(tmp_path, {"SOLBENCH_WORK_QUEUES": "driver"})
    assert impls["baseline"]["status"] == "ok"
    assert "one_queue_rounds" not in impls["baseline"]["protocol"]
    assert impls["baseline"]["protocol"]["streams"] == 1
