"""``--launch graph`` on a real GPU: replays timed and verified; work left out of the graph caught;
a call that cannot be captured launched on the stream, with the reason (skipped without CUDA)."""

import json

import pytest
import torch
from click.testing import CliRunner

pytestmark = pytest.mark.gpu
pytest.importorskip("cupti")  # a replay is used only where CUPTI checks it against the launched call


@pytest.fixture(scope="module")
def l2():
    return torch.cuda.get_device_properties(0).L2_cache_size


def _measure(l2, call, reference):
    from solbench.device.timer import CudaColdTimer
    from solbench.measure.criteria import CIWidth
    from solbench.measure.loop import measure

    def verify(index, out, seconds):
        return None if torch.allclose(out.float(), reference, rtol=1e-2, atol=1e-2) else "wrong output"

    timer = CudaColdTimer(torch, l2, launch="graph")
    timing = measure(timer, [call], CIWidth(0.01, 20, 40, 1.0), verify=verify)
    return timer, timing


def test_a_graph_replay_is_timed_and_its_outputs_verified(l2):
    x = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) / 64
    r = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
    reference = torch.addmm(r.float(), x.float(), w.float())
    timer, timing = _measure(l2, lambda: torch.addmm(r, x, w), reference)
    assert timer.protocol()["launch"] == "graph"
    # 33.5 MB of weight: at most ~4.8 TB/s, so never below 7 µs; a replay is one launch, not 10 µs of host
    assert 7e-6 < timing.median < 40e-6


def test_an_output_made_in_inference_mode_is_replayed_and_verified(l2):
    x = torch.randn(1 << 16, device="cuda")
    reference = x * 5

    def inference():  # as torch's own encoder layers: an inference tensor out
        with torch.inference_mode():
            return x * 5

    timer, timing = _measure(l2, inference, reference)
    assert timer.protocol()["launch"] == "graph" and timing.median > 0


def test_work_a_replay_skips_is_caught_by_the_poisoned_outputs(l2):
    from solbench.measure.loop import CheatDetected

    x = torch.randn(1 << 16, device="cuda")
    reference = x * 2
    kept = {}

    def cached():  # computes once, then returns the same tensor with no GPU work: an empty graph
        if "out" not in kept:
            kept["out"] = x * 2
        return kept["out"]

    cached()
    with pytest.raises(CheatDetected, match="wrong output"):
        _measure(l2, cached, reference)


def test_a_call_that_captures_only_a_copy_of_its_result_is_launched(l2):
    x = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) / 64
    reference = (x.float() @ w.float())
    kept = {}

    def capture_aware():  # launched, it computes; captured, it records a copy of its last result
        if torch.cuda.is_current_stream_capturing():
            return kept["out"].clone()
        kept["out"] = x @ w
        return kept["out"]

    timer, timing = _measure(l2, capture_aware, reference)
    protocol = timer.protocol()
    assert protocol["launch"] == "stream", protocol
    assert protocol["graph_fallback"].startswith("ReplayMismatch: the replay ran other GPU work than the launched")
    assert timing.median > 7e-6  # launched: the GEMM's 33.5 MB of weight, read every call


def test_a_capture_of_the_same_kernels_over_less_work_is_launched():
    """The same kernel in the graph as launched, over a slice of the work: same names, another grid."""
    from solbench.device import cupti
    from solbench.device.timer import GraphLaunch

    x = torch.randn(1 << 22, device="cuda")
    out = torch.empty_like(x)

    def shrinks_under_capture():
        part = 1024 if torch.cuda.is_current_stream_capturing() else x.numel()
        torch.mul(x[:part], 2, out=out[:part])
        return out

    protocol = GraphLaunch(torch, [shrinks_under_capture], cupti.tracer()).protocol()
    assert protocol["launch"] == "stream", protocol
    assert "ReplayMismatch" in protocol["graph_fallback"] and "grid " in protocol["graph_fallback"], protocol
    honest = GraphLaunch(torch, [lambda: torch.mul(x, 2, out=out)], cupti.tracer()).protocol()
    assert honest["launch"] == "graph", honest


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "known hole, not fixed: GraphLaunch traces the launched call it compares the replay with on its own "
    "capture stream, so a call that copies a result it kept whenever the current stream is not the default "
    "one (where the checked calls ran, and compute) runs the same copy launched and replayed; anchoring the "
    "replay to a checked call, or to a replay on new values at the same addresses, is a design question"))
def test_a_call_that_copies_its_result_off_the_default_stream_is_not_replayed():
    from solbench.device import cupti
    from solbench.device.timer import GraphLaunch

    x = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) / 64
    kept = {}

    def off_the_default_stream():  # where the checks call it, it computes; elsewhere, a copy of the last result
        if torch.cuda.current_stream() != torch.cuda.default_stream() and "out" in kept:
            return kept["out"].clone()
        kept["out"] = x @ w
        return kept["out"]

    off_the_default_stream()  # a checked call, on the default stream
    protocol = GraphLaunch(torch, [off_the_default_stream], cupti.tracer()).protocol()
    assert protocol["launch"] == "stream", protocol


def test_a_call_that_cannot_be_captured_is_launched_and_says_why(l2):
    x = torch.randn(1 << 16, device="cuda")
    reference = x * 3

    def synchronizing():
        out = x * 3
        torch.cuda.synchronize()  # not allowed while a stream captures
        return out

    stream = torch.cuda.current_stream()
    timer, timing = _measure(l2, synchronizing, reference)
    protocol = timer.protocol()
    assert protocol["launch"] == "stream" and protocol["graph_fallback"]
    assert timing.median > 0
    # nothing of the failed capture is left behind: the same stream, random draws on the device
    assert torch.cuda.current_stream() == stream
    assert torch.randn(4, device="cuda").isfinite().all()


def test_run_with_graph_launch_records_it_per_point(tmp_path):
    from solbench.cli import main

    out = tmp_path / "run.json"
    result = CliRunner().invoke(main, ["run", "workloads/attn.yaml", "-w", "o_proj", "--case", "tokens=16",
                                       "--launch", "graph", "--repeat", "1", "--max-rounds", "1",
                                       "--budget", "0.3", "-o", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["protocol"]["launch"] == "graph"
    timed = [i for c in data["cases"] for i in c["impls"] if i["status"] == "ok"]
    assert timed and all(i["protocol"]["launch"] in ("graph", "stream") for i in timed)
    assert all(i["protocol"].get("graph_fallback") for i in timed if i["protocol"]["launch"] == "stream")


@pytest.mark.parametrize("setup", ["resnet50_fused_setup", "resnet50_fused_stem_setup"])
def test_a_call_that_replays_its_own_graph_is_captured_whole(setup):
    """ResNet-50's ``fused`` replays a graph of its own, which cannot be replayed inside another
    capture: while captured it runs the forward into solbench's graph, the same kernels its own
    graph holds, so the point is replayed (and comparable with the graph-launched baseline)."""
    from solbench.device import cupti
    from solbench.device.timer import GraphLaunch
    from solbench.impls import resnet50 as net50
    from solbench.impls import resnet50_fused as fused50

    gen = torch.Generator(device="cuda").manual_seed(3)
    x = torch.randn(4, 3, 64, 64, device="cuda", generator=gen).to(torch.bfloat16)
    params = torch.randn(net50.PARAM_COUNT, device="cuda", generator=gen)
    kwargs = getattr(fused50, setup)(x, params)
    reference = net50.resnet50_reference(x.float(), params).float()

    def call():
        return fused50.resnet50_fused(**kwargs)

    launch = GraphLaunch(torch, [call], cupti.tracer())
    protocol = launch.protocol()
    assert protocol["launch"] == "graph", protocol
    got = call().float()
    err = float((got - reference).norm() / reference.norm())
    assert err < 2e-2, err  # the workload's bf16 rel_l2 tolerance
