"""``--launch graph`` (solbench.device.timer.GraphLaunch) without a GPU: what is poisoned before each
replay, and a call that cannot be captured left launched on the stream with the reason recorded."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from solbench.device import timer as timers
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


class _Graph:
    def __init__(self, fail: bool) -> None:
        self.fail, self.replays = fail, 0

    def replay(self) -> None:
        self.replays += 1


def _fake_torch(fail_capture: bool) -> SimpleNamespace:
    """torch's CUDA graph API on the CPU: capture runs the call (or raises), replay counts."""

    class Capture:
        def __init__(self, graph: _Graph, stream: object = None) -> None:
            self.graph = graph

        def __enter__(self) -> None:
            if self.graph.fail:
                raise RuntimeError("operation not permitted when stream is capturing\nmore detail")

        def __exit__(self, *exc: object) -> None:
            return None

    stream = SimpleNamespace(wait_stream=lambda other: None, synchronize=lambda: None)
    made: list[object] = []
    gen = SimpleNamespace(clone_state=lambda: "copy", graphsafe_set_state=made.append)
    cuda = SimpleNamespace(Stream=lambda: stream, current_stream=lambda: stream, stream=lambda s: _Null(),
                           synchronize=lambda: None, CUDAGraph=lambda: _Graph(fail_capture), graph=Capture,
                           set_stream=made.append, default_generators=(gen,))
    return SimpleNamespace(cuda=cuda, Tensor=torch.Tensor, bool=torch.bool, uint8=torch.uint8, made=made,
                           inference_mode=torch.inference_mode)


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_calls_are_replayed_and_return_the_captured_outputs() -> None:
    made = []

    def call() -> torch.Tensor:
        made.append(torch.full((2,), 3.0))
        return made[-1]

    graphed = timers.GraphLaunch(_fake_torch(False), [call])
    assert graphed.protocol() == {"launch": "graph"}
    replay = graphed.launches[0]
    assert replay() is made[-1]  # the tensor captured, written by each replay
    replay.poison()
    assert torch.isnan(made[-1]).all()


def test_an_output_made_in_inference_mode_is_poisoned_too() -> None:
    def call() -> torch.Tensor:
        with torch.inference_mode():
            return torch.ones(3)

    replay = timers.GraphLaunch(_fake_torch(False), [call]).launches[0]
    out = replay()
    assert out.is_inference()
    replay.poison()  # outside inference mode, out.fill_ would raise
    assert torch.isnan(out).all()


def test_a_call_that_cannot_be_captured_stays_launched_and_says_why() -> None:
    def call() -> torch.Tensor:
        return torch.ones(2)

    fake = _fake_torch(True)
    graphed = timers.GraphLaunch(fake, [call])
    assert list(graphed.launches) == [call]
    assert fake.made == [fake.cuda.current_stream(), "copy"]  # the stream made current again, the RNG not capturing
    assert graphed.protocol() == {"launch": "stream",
                                  "graph_fallback": "RuntimeError: operation not permitted when stream is capturing"}


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


def test_auto_is_a_graph_replay_for_the_cold_timer_on_a_gpu_only() -> None:
    from solbench.measure.worker import MeasureSettings

    assert RunOptions().launch == "auto"
    assert MeasureSettings.of(RunOptions(), "cuda").launch == "graph"
    assert MeasureSettings.of(RunOptions(), "cpu").launch == "stream"
    assert MeasureSettings.of(RunOptions(timer="cupti"), "cuda").launch == "stream"
    assert MeasureSettings.of(RunOptions(launch="stream"), "cuda").launch == "stream"
    assert timers.resolved_launch("graph", "cold", "cuda") == "graph"
