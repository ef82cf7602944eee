"""The CUPTI timer, the CUPTI side-stream check and the graph timer's input sets on a real GPU.

Structural checks only (which work is seen, what is reported), no timing thresholds.
"""

import json

import pytest
import torch
from click.testing import CliRunner

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def l2():
    return torch.cuda.get_device_properties(0).L2_cache_size


@pytest.fixture(scope="module")
def gemm():
    h = 1024
    x = torch.randn(64, h, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(h, h, device="cuda", dtype=torch.bfloat16)
    return x, w


def _cupti_timer(l2):
    pytest.importorskip("cupti")
    from solbench.device.timer import make_timer

    return make_timer("cuda", "cupti", l2_bytes=l2)


def test_cupti_timer_sees_the_one_kernel_of_a_call(l2):
    from solbench.measure.criteria import CIWidth
    from solbench.measure.loop import measure

    x = torch.randn(1 << 20, device="cuda")
    timer = _cupti_timer(l2)
    t = measure(timer, [lambda: x.mul_(1.0001)], CIWidth(0.01, 10, 200, 1.0))
    assert timer.activities == 1 and timer.stray is None
    assert t.median > 0
    assert timer.protocol()["gpu_activities"] == 1
    assert timer.protocol()["flush"] == "clean"


def test_cupti_timer_covers_every_stream_and_flags_unjoined_work(l2, gemm):
    x, w = gemm
    side = torch.cuda.Stream()

    def unjoined():
        out = torch.empty(x.shape[0], w.shape[0], device="cuda", dtype=x.dtype)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(20):
                torch.mm(x, w.t(), out=out)
        return out

    def joined():
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            out = torch.mm(x, w.t())
        torch.cuda.current_stream().wait_stream(side)
        return out

    timer = _cupti_timer(l2)
    timer.prepare([joined, unjoined])
    timer.sample(0)
    assert timer.activities >= 1 and timer.stray is None  # work on a side stream, joined: fine
    timer.sample(1)
    timer.finish()  # prepare turned collection on; measure() would turn it off here
    assert timer.activities >= 20  # all 20 GEMMs of the side stream are in the span
    assert timer.stray is not None and "does not wait" in timer.stray


def test_traced_call_catches_an_unjoined_side_stream(gemm):
    pytest.importorskip("cupti")
    from solbench.measure import guards

    x, w = gemm
    side = torch.cuda.Stream()
    trace = guards.stream_tracer("cuda")
    assert trace is not None
    if trace.enabled:  # the process's one tracer, left on by an earlier timer that never finished
        trace.end(True)

    def unjoined():
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(50):
                out = torch.mm(x, w.t())
        return out

    value, problem = guards.traced_call(lambda: torch.mm(x, w.t()), trace)
    assert problem is None and value.shape == (64, 1024)
    _, problem = guards.traced_call(unjoined, trace)
    assert problem is not None
    assert not trace.enabled  # turned off again


def test_graph_timer_replays_one_input_set():
    from solbench.device.timer import CudaGraphTimer

    a = torch.full((1024,), 1.0, device="cuda")
    b = torch.full((1024,), 2.0, device="cuda")
    timer = CudaGraphTimer(torch)
    timer.prepare([lambda: a * 3, lambda: b * 3])
    assert timer.protocol()["graph_input_sets"] == 1 and timer.calls > 10  # sized from a probe graph
    for i in range(3):
        timer.sample(i)
        assert timer.output_index(i) == 0
        assert float(timer.last_output[0]) == 3.0


def test_run_with_the_cupti_timer_records_it(tmp_path):
    pytest.importorskip("cupti")
    from solbench.cli import main

    out = tmp_path / "run.json"
    result = CliRunner().invoke(main, ["run", "workloads/attn.yaml", "-w", "o_proj", "-i", "cublas_addmm",
                                       "--timer", "cupti", "--repeat", "1", "--budget", "0.3", "-o", str(out),
                                       "--quiet"])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["protocol"]["timer"] == "cupti"
    for case in data["cases"]:
        for impl in case["impls"]:
            assert impl["status"] == "ok", impl
            assert impl["protocol"]["gpu_activities"] >= 1
            if impl["protocol"].get("part") != "floor":  # the byte floor is timed, never checked
                assert impl["protocol"]["stream_check"] == "cupti"


def test_side_stream_cheat_is_a_reward_hack_with_cupti(tmp_path):
    pytest.importorskip("cupti")
    from solbench.cli import main

    for timer in ("cold", "cupti"):
        out = tmp_path / f"{timer}.json"
        result = CliRunner().invoke(main, ["run", "tests/data/hostile/hostile_gpu.yaml", "-w", "gpu_cheats",
                                           "-i", "side_stream", "--timer", timer, "--repeat", "1",
                                           "--budget", "0.3", "-o", str(out), "--quiet"])
        data = json.loads(out.read_text())
        status = {i["name"]: (i["status"], i["message"]) for c in data["cases"] for i in c["impls"]}
        assert status["side_stream"][0] == "reward_hack", (timer, status)
        assert "does not wait" in status["side_stream"][1], status
        assert status["baseline"][0] == "ok", status
        assert result.exit_code == 4
