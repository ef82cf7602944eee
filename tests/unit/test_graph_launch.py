"""``--launch graph`` (solbench.device.timer.GraphLaunch) without a GPU: what is poisoned before each
replay, and a call that cannot be captured left launched on the stream with the reason recorded."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from solbench.device import timer as timers
from solbench.device.cupti import Activity, ApiCall, replay_mismatch
from solbench.errors import ConfigError
from solbench.plan.options import RunOptions


def test_every_returned_tensor_is_poisoned_and_nothing_else() -> None:
    half = torch.ones(3, dtype=torch.float16)
    ints = torch.arange(4, dtype=torch.int32)
    flags = torch.zeros(2, dtype=torch.bool)
    every_other = torch.ones(4, 2)[:, 0]  # not contiguous
    out = {"a": half, "b": (ints,), "c": 7, "d": every_other}
    fills = timers._poisoners(torch, out)
    fills += timers._poisoners(torch, [ints, flags, torch.empty(0)])
    for fill in fills:
        fill()
    assert all(math.isnan(v) for v in half.tolist()) and all(math.isnan(v) for v in every_other.tolist())
    assert ints.tolist() == [-1] * 4  # all ones bits
    assert flags.tolist() == [True, True]


def test_one_byte_floats_get_a_nan_in_both_fp8_formats() -> None:
    for dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        t = torch.zeros(5, dtype=dtype)
        for fill in timers._poisoners(torch, t):
            fill()
        assert torch.isnan(t.float()).all(), dtype


def test_a_one_byte_float_output_that_is_not_contiguous_is_poisoned_too() -> None:
    """An FP8 output returned as a strided view got no poison at all (its bits were filled only through a
    contiguous byte view): a replay that never wrote it kept what the call left there outside the graph."""
    for dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        t = torch.zeros(4, 6, dtype=dtype)[:, ::2]
        fills = timers._poisoners(torch, t)
        for fill in fills:
            fill()
        assert fills and torch.isnan(t.float()).all(), dtype


def test_a_method_set_on_an_output_while_it_is_captured_cannot_turn_its_poison_off() -> None:
    """The fills were bound through the output's own attributes when the graph was captured: a call that
    returns, while captured, an output with ``fill_`` (or ``view``) set on the instance, and takes it off
    again before any check looks at the output, had every later poison do nothing, so a replay that
    writes nothing passed on values the call left there itself."""
    half = torch.zeros(4)
    codes = torch.zeros(4, dtype=torch.int32)
    for t in (half, codes):
        t.fill_ = lambda *args, **kwargs: None
        t.view = lambda *args, **kwargs: torch.empty(4, dtype=torch.uint8)
    fills = timers._poisoners(torch, (half, codes))
    for t in (half, codes):
        del t.fill_, t.view
    for fill in fills:
        fill()
    assert torch.isnan(half).all() and codes.tolist() == [-1] * 4


class _Trace:
    """CUPTI and CUDA graphs on the CPU: ``launch(name)`` is one kernel of that name; while a graph
    captures, it is recorded into the graph instead, and each replay runs what was recorded."""

    def __init__(self) -> None:
        self.t, self.calls, self.work = 0, [], []
        self.capturing: _Graph | None = None

    def begin(self) -> bool:
        return True

    def end(self, turned_on: bool) -> None:
        return None

    def now(self) -> int:
        self.t += 1
        return self.t

    def launch(self, name: str, ns: int = 10_000) -> None:
        if self.capturing is not None:
            self.capturing.names.append((name, ns))
            return
        t = self.now()
        self.calls.append(ApiCall(t, t))
        self.work.append(Activity("kernel", t * 100_000, t * 100_000 + ns, t, 7, name))

    def collect(self) -> tuple[list, list]:
        calls, work = self.calls, self.work
        self.calls, self.work = [], []
        return calls, work


class _Graph:
    def __init__(self, fail: bool, trace: _Trace) -> None:
        self.fail, self.trace, self.names, self.replays = fail, trace, [], 0
        self.ended = False

    def capture_begin(self) -> None:
        self.trace.capturing = self

    def capture_end(self) -> None:
        self.trace.capturing = None
        self.ended = True
        if self.fail:
            raise RuntimeError("operation not permitted when stream is capturing\nmore detail")

    def replay(self) -> None:
        self.replays += 1
        for name, ns in self.names:
            self.trace.launch(name, ns)


def _fake_torch(fail_capture: bool, trace: _Trace) -> SimpleNamespace:
    """torch's CUDA graph API on the CPU: capture runs the call (its end raises with ``fail_capture``),
    replay runs what it recorded. ``made`` lists the streams made current and the generator states set."""
    stream = SimpleNamespace(wait_stream=lambda other: None, synchronize=lambda: None)
    made: list[object] = []
    gen = SimpleNamespace(clone_state=lambda: "copy", graphsafe_set_state=made.append)
    def ones(*shape: int, device: str = "cpu") -> None:  # the harness's canary kernel
        trace.launch("fill")

    streams: list[object] = []  # the side streams made

    def new_stream() -> SimpleNamespace:
        streams.append(SimpleNamespace(wait_stream=lambda other: None))
        return streams[-1]

    cuda = SimpleNamespace(Stream=new_stream, current_stream=lambda: stream, stream=lambda s: _Null(),
                           synchronize=lambda: None, CUDAGraph=lambda: _Graph(fail_capture, trace),
                           set_stream=made.append, default_generators=(gen,), current_device=lambda: 0)
    return SimpleNamespace(cuda=cuda, ones=ones, Tensor=torch.Tensor, bool=torch.bool, uint8=torch.uint8, made=made,
                           inference_mode=torch.inference_mode, streams=streams)


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_calls_are_replayed_and_return_the_captured_outputs() -> None:
    made = []
    trace = _Trace()

    def call() -> torch.Tensor:
        trace.launch("fill")
        made.append(torch.full((2,), 3.0))
        return made[-1]

    graphed = timers.GraphLaunch(_fake_torch(False, trace), [call], trace)
    assert graphed.protocol() == {"launch": "graph", "capture_s": round(graphed.seconds, 6)}
    assert graphed.seconds >= 0
    replay = graphed.launches[0]
    assert replay() is made[-1]  # the tensor captured, written by each replay
    replay.poison()
    assert torch.isnan(made[-1]).all()


def test_an_output_made_in_inference_mode_is_poisoned_too() -> None:
    trace = _Trace()

    def call() -> torch.Tensor:
        trace.launch("ones")
        with torch.inference_mode():
            return torch.ones(3)

    replay = timers.GraphLaunch(_fake_torch(False, trace), [call], trace).launches[0]
    out = replay()
    assert out.is_inference()
    replay.poison()  # outside inference mode, out.fill_ would raise
    assert torch.isnan(out).all()


def test_a_call_that_cannot_be_captured_stays_launched_and_says_why() -> None:
    def call() -> torch.Tensor:
        return torch.ones(2)

    trace = _Trace()
    fake = _fake_torch(True, trace)
    graphed = timers.GraphLaunch(fake, [call], trace)
    assert list(graphed.launches) == [call]
    assert fake.made == [fake.cuda.current_stream(), "copy"]  # the stream made current again, the RNG not capturing
    assert graphed.protocol() == {"launch": "stream", "capture_s": round(graphed.seconds, 6),
                                  "graph_fallback": "RuntimeError: operation not permitted when stream is capturing"}


def test_every_capture_of_a_process_uses_one_side_stream_until_a_capture_fails(monkeypatch) -> None:
    """torch keeps a cuBLAS workspace per stream that ran a GEMM: a new stream per capture grew a
    worker's memory by 32 MiB a capture, task after task."""
    def call() -> torch.Tensor:
        trace.launch("fill")
        return torch.ones(2)

    monkeypatch.setattr(timers, "_SIDE_STREAMS", {})  # none kept from another test's fake torch
    trace = _Trace()
    fake = _fake_torch(False, trace)
    for _ in range(3):  # three tasks of two input sets each
        assert timers.GraphLaunch(fake, [call, call], trace).protocol()["launch"] == "graph"
    assert len(fake.streams) == 1
    fake.cuda.CUDAGraph = lambda: _Graph(True, trace)
    assert timers.GraphLaunch(fake, [call], trace).protocol()["launch"] == "stream"
    fake.cuda.CUDAGraph = lambda: _Graph(False, trace)
    timers.GraphLaunch(fake, [call], trace)
    assert len(fake.streams) == 2  # not the stream the failed capture used


def test_a_side_stream_is_never_handed_to_another_torch_that_took_a_gone_ones_id(monkeypatch) -> None:
    """Kept by ``id(torch)`` alone, a fake torch made after another was freed (CPython hands the same
    id to the next object of its size) got the gone one's stream instead of one of its own."""
    monkeypatch.setattr(timers, "_SIDE_STREAMS", {})
    for _ in range(20):
        fake = _fake_torch(False, _Trace())
        assert timers.side_stream(fake) is fake.streams[0]  # its own, made on first use
        assert timers.side_stream(fake) is fake.streams[0] and len(fake.streams) == 1  # and kept
        del fake  # its id free for the next one


def test_a_graph_launch_needs_the_cold_timer() -> None:
    with pytest.raises(ConfigError, match="--launch graph is a way of the cold timer's"):
        RunOptions(timer="graph", launch="graph")
    with pytest.raises(ConfigError, match="--launch must be"):
        RunOptions(launch="kernel")
    assert RunOptions(launch="graph").launch == "graph"


def test_rounds_launched_differently_merge_into_a_point_marked_mixed() -> None:
    from dataclasses import replace

    from solbench.analysis.compare import point_launch
    from solbench.analysis.pooling import merge_rounds
    from tests.unit.factories import make_impl

    why = "RuntimeError: operation not permitted when stream is capturing"
    graph = replace(make_impl("x", [1e-3] * 5), protocol={"launch": "graph"})
    stream = replace(make_impl("x", [1e-3] * 5), protocol={"launch": "stream", "graph_fallback": why})
    assert point_launch(merge_rounds([graph, graph])) == "graph"
    merged = merge_rounds([graph, stream, graph]).protocol
    assert merged["launch"] == "mixed" and merged["graph_fallback"] == why
    assert merged["launch_by_round"] == '["graph", "stream", "graph"]'
    assert point_launch(make_impl("x", [1e-3] * 5)) == "stream"  # before --launch, and the CPU


def test_auto_is_a_graph_replay_for_the_cold_timer_on_a_gpu_with_cupti_only(monkeypatch) -> None:
    from solbench.device import cupti
    from solbench.measure.worker import MeasureSettings

    monkeypatch.setattr(cupti, "available", lambda: True)
    assert RunOptions().launch == "auto"
    assert MeasureSettings.of(RunOptions(), "cuda").launch == "graph"
    assert MeasureSettings.of(RunOptions(), "cpu").launch == "stream"
    assert MeasureSettings.of(RunOptions(timer="cupti"), "cuda").launch == "stream"
    assert MeasureSettings.of(RunOptions(launch="stream"), "cuda").launch == "stream"
    assert timers.resolved_launch("graph", "cold", "cuda") == "graph"
    monkeypatch.setenv("SOLBENCH_NO_CUPTI", "1")  # no replay can be checked against the launched call
    assert MeasureSettings.of(RunOptions(), "cuda").launch == "stream"
    assert timers.resolved_launch("auto", "cold", "cuda", traced=True) == "graph"


def test_a_call_that_captures_other_work_than_it_launches_stays_launched() -> None:
    """The capture-aware cache: launched, the call computes; captured, it records only a copy of the
    result it computed last. Its replays would be right and fast: the graph is not used."""
    trace = _Trace()
    kept = {}

    def call() -> torch.Tensor:
        if trace.capturing is not None:
            trace.launch("copy", 1_000)
            return kept["out"]
        trace.launch("gemm", 15_000)
        trace.launch("add", 2_000)
        kept["out"] = torch.ones(2)
        return kept["out"]

    graphed = timers.GraphLaunch(_fake_torch(False, trace), [call], trace)
    assert list(graphed.launches) == [call]
    why = graphed.protocol()["graph_fallback"]
    assert why.startswith("ReplayMismatch: the replay ran other GPU work than the launched call")
    assert "not replayed: add, gemm" in why and "only in the replay: copy" in why


def test_without_cupti_nothing_is_replayed() -> None:
    def call() -> torch.Tensor:
        return torch.ones(2)

    graphed = timers.GraphLaunch(_fake_torch(False, _Trace()), [call], None)
    assert list(graphed.launches) == [call]
    assert graphed.protocol()["launch"] == "stream" and "no CUPTI" in graphed.protocol()["graph_fallback"]


def _work(*kernels: tuple[str, int], shape: str = "grid 132x1x1 block 128x1x1") -> list[Activity]:
    return [Activity("kernel", 1000 * i, 1000 * i + ns, i, 7, name, shape) for i, (name, ns) in enumerate(kernels)]


def test_a_replay_matches_the_launched_call_kernel_by_kernel() -> None:
    launched = _work(("gemm", 14_000), ("splitk_reduce", 2_000), ("add", 1_500))
    assert replay_mismatch(launched, _work(("add", 1_400), ("gemm", 13_500), ("splitk_reduce", 2_100))) is None
    assert "not replayed: gemm" in replay_mismatch(launched, _work(("splitk_reduce", 2_000), ("add", 1_500)))
    twice = replay_mismatch(launched, [*launched, *_work(("add", 1_500))])
    assert "only in the replay: add" in twice and "(4 activities against 3;" in twice
    # durations are not judged: other workers share the GPU while graphs are captured
    assert replay_mismatch(launched, _work(("gemm", 900), ("splitk_reduce", 500), ("add", 500))) is None


def test_graph_launch_on_a_gpu_without_cupti_is_refused_before_measuring(monkeypatch) -> None:
    from solbench.device import cupti
    from solbench.device import detect as detection
    from solbench.errors import DeviceError
    from solbench.plan import device

    monkeypatch.setattr(detection, "detect", lambda name, cpu_threads=0: SimpleNamespace(kind="cuda"))
    monkeypatch.setattr(cupti, "available", lambda: False)
    with pytest.raises(DeviceError, match=r"--launch graph checks each replay .* or use --launch stream"):
        device.detect("cuda", RunOptions(launch="graph"))
    from solbench.measure.worker import MeasureSettings

    assert MeasureSettings.of(RunOptions(), "cuda").launch == "stream"  # auto on the same GPU: launched, no error


def test_a_capture_that_raises_still_ends_and_the_call_stays_launched() -> None:
    """A call that raises while captured: the capture is ended (the stream is not left capturing) and
    the call is launched on the stream, with the call's own error as the reason."""
    trace = _Trace()
    graphs = []
    fake = _fake_torch(False, trace)
    make = fake.cuda.CUDAGraph
    fake.cuda.CUDAGraph = lambda: graphs.append(make()) or graphs[-1]

    def call() -> torch.Tensor:
        trace.launch("gemm")
        if trace.capturing is not None:
            raise ValueError("cannot capture this\nat all")
        return torch.ones(2)

    graphed = timers.GraphLaunch(fake, [call], trace)
    assert list(graphed.launches) == [call] and graphs[0].ended and trace.capturing is None
    assert graphed.protocol()["graph_fallback"] == "ValueError: cannot capture this"


def test_the_same_kernels_launched_over_other_shapes_are_other_work() -> None:
    """A graph that replays the call's kernels over a smaller grid (less of the work) is not the call."""
    launched = _work(("gemm", 14_000), ("add", 1_500), shape="grid 128x1x1 block 256x1x1 smem 1024")
    smaller = _work(("gemm", 1_000), ("add", 200), shape="grid 1x1x1 block 256x1x1 smem 1024")
    why = replay_mismatch(launched, smaller)
    assert why is not None
    assert "not replayed: add (grid 128x1x1 block 256x1x1 smem 1024)" in why
    assert "only in the replay: add (grid 1x1x1 block 256x1x1 smem 1024)" in why
    assert replay_mismatch(launched, list(reversed(launched))) is None


def test_a_call_with_no_gpu_work_is_replayed_where_cupti_records_the_canary() -> None:
    """An empty call matches its empty replay (the poisoned outputs then catch it in the loop), but
    only where CUPTI is seen recording: a tracer that drops every record leaves every call launched."""
    assert replay_mismatch([], []) is None
    assert "only in the replay: gemm" in replay_mismatch([], _work(("gemm", 1_000)))

    def cached() -> torch.Tensor:
        return torch.ones(2)

    trace = _Trace()
    assert timers.GraphLaunch(_fake_torch(False, trace), [cached], trace).protocol()["launch"] == "graph"

    class Deaf(_Trace):
        def collect(self) -> tuple[list, list]:
            super().collect()
            return [], []

    deaf = Deaf()
    protocol = timers.GraphLaunch(_fake_torch(False, deaf), [cached], deaf).protocol()
    assert protocol["launch"] == "stream"
    assert protocol["graph_fallback"] == ("ReplayMismatch: CUPTI recorded none of the harness's own GPU work: "
                                          "no replay can be checked")


def test_cupti_records_give_each_kernel_its_launch_shape_and_each_copy_its_bytes() -> None:
    from solbench.device.cupti import shape_of

    kernel = SimpleNamespace(grid_x=132, grid_y=2, grid_z=1, block_x=384, block_y=1, block_z=1,
                             cluster_x=2, cluster_y=1, cluster_z=1, dynamic_shared_memory=232448)
    assert shape_of("kernel", kernel) == "grid 132x2x1 block 384x1x1 cluster 2x1x1 smem 232448"
    older = SimpleNamespace(grid_x=4, grid_y=1, grid_z=1, block_x=32, block_y=1, block_z=1)  # no cluster, smem
    assert shape_of("kernel", older) == "grid 4x1x1 block 32x1x1"
    assert shape_of("memcpy", SimpleNamespace(bytes=4096)) == "bytes 4096"
    assert shape_of("memset", SimpleNamespace()) == ""
