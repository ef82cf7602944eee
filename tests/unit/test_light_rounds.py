"""Rounds after the first check lighter: one checked call, no unseen input sets after timing.

The first round of an invocation runs every check; later rounds (``Task.checks == "light"``), in
processes just as fresh, make one checked call (the first input set) and keep the verified timed
samples and the after-timing input check. Driven in this process on the CPU; nothing is timed.
"""

import json
from dataclasses import replace
from pathlib import Path
from unittest import mock

import pytest

from solbench import api
from solbench.analysis.pooling import merge_rounds
from solbench.execute import session
from solbench.measure import worker
from solbench.measure.worker import MeasureSettings, Task, WorkerState, execute
from solbench.results import store
from solbench.results.model import ImplResult, Timing
from tests.unit.factories import RoundCounter, kept_as_given, make_run

DOUBLE = "tests/data/double.yaml"
HOSTILE = "tests/data/hostile/hostile.yaml"
SETTINGS = MeasureSettings(timer="cpu", warmup=1, min_samples=3, max_samples=6, budget_s=0.05)


def _task(path: str, workload: str, impl: str, checks: str) -> Task:
    (planned,) = [p for p in api.plan([path], "cpu") if p.spec.name == workload]
    return Task(planned.spec, planned.cases[0], impl, str(Path(path).parent.absolute()), "cpu", SETTINGS,
                checks=checks)


def _checked_calls(task: Task) -> tuple[ImplResult, int]:
    """The result, and how many untimed (checked) calls the worker made."""
    calls = []
    original = worker._Checker._call

    def counted(self, launch):
        calls.append(1)
        return original(self, launch)

    with mock.patch.object(worker._Checker, "_call", counted):
        result, fatal = execute(task, WorkerState())
    assert fatal == (result.status == "reward_hack")  # a process that cheated gets no other task
    return result, len(calls)


def test_the_first_round_checks_every_input_set_a_repeat_and_two_unseen_sets():
    result, calls = _checked_calls(_task(DOUBLE, "double", "baseline", "full"))
    assert result.status == "ok", result.message
    assert calls == 3 + 2  # sets 0, 1, 0 again; then the two unseen sets after timing
    assert "checks" not in result.protocol


def test_a_later_round_makes_one_checked_call_and_says_so():
    result, calls = _checked_calls(_task(DOUBLE, "double", "baseline", "light"))
    assert result.status == "ok", result.message
    assert calls == 1
    assert result.protocol["checks"] == "light"
    assert result.timing is not None and result.timing.n >= SETTINGS.min_samples


@pytest.mark.parametrize("impl,status", [("wrong", "incorrect"), ("unwritten", "incorrect")])
def test_a_later_round_still_fails_a_wrong_implementation(impl, status):
    result, _ = _checked_calls(_task(DOUBLE, "double", impl, "light"))
    assert result.status == status


@pytest.mark.parametrize("impl", ["returns_input", "mutates_input", "cached_by_nothing"])
def test_a_later_round_still_catches_cheats_its_checks_can_see(impl):
    # returns_input and mutates_input: the checked call; cached_by_nothing: the timed calls
    # alternate two input sets, and every verified sample of the second set is wrong
    task = _task(HOSTILE, "cheats", impl, "light")
    task = replace(task, settings=replace(SETTINGS, min_samples=20, max_samples=20))
    result, _ = _checked_calls(task)
    assert result.status == "reward_hack", (result.status, result.message)


class _Recorder(RoundCounter):
    """Round r of every task returns samples of (r + 1) ms; ``skip_first``: round 0 says skipped."""

    def __init__(self, skip_first=False):
        super().__init__()
        self.checks = []
        self.keys = []
        self.seen = []
        self.skip_first = skip_first

    def run(self, key, task, timeout_s, progress=None):
        self.keys.append(key)
        self.checks.append((self.round, task.checks))
        self.seen.append((self.round, task.seen))
        if self.skip_first and self.round == 0:
            return ImplResult(task.impl, "skipped", "not this time")
        value = (self.round + 1) * 1e-3
        return ImplResult(task.impl, "ok", timing=Timing((value,) * 6, value, value, value, "converged"),
                          protocol={"checks": "light"} if task.checks == "light" else {})


def test_the_run_loop_checks_fully_in_the_first_round_only():
    planned = api.plan([DOUBLE], "cpu", impls=("baseline",))
    units = [session.Unit(p.spec, p.path, p.cases, ("baseline",)) for p in planned]
    ex = _Recorder()
    run = session.measure_units(units, make_run({}), ex, device="cpu", settings=MeasureSettings(), timeout_s=1.0,
                                l2_bytes=None, score=kept_as_given, emit=lambda e, d: None, repeat=3)
    # rounds 2 and 3 go out in the second pass together, each in a worker of its own: both light, both
    # knowing the first round's 6 samples (the verification rate runs on from there)
    assert ex.checks == [(0, "full")] * 2 + [(1, "light")] * 4
    assert ex.seen == [(0, 0)] * 2 + [(1, 6)] * 4
    assert ex.keys[2:] == [("double", "baseline"), ("double", "baseline#2")] * 2  # per case: rounds 2, 3
    merged = run.cases[0].impls[0]
    assert merged.protocol["light_rounds"] == 2 and "checks" not in merged.protocol


def test_a_point_that_did_not_pass_every_check_is_checked_in_full_again():
    # an implementation that skips (or fails) its first round must not get by on light checks later
    planned = api.plan([DOUBLE], "cpu", impls=("baseline",))
    units = [session.Unit(p.spec, p.path, p.cases, ("baseline",)) for p in planned]
    ex = _Recorder(skip_first=True)
    session.measure_units(units, make_run({}), ex, device="cpu", settings=MeasureSettings(), timeout_s=1.0,
                          l2_bytes=None, score=kept_as_given, emit=lambda e, d: None, repeat=3)
    assert ex.checks == [(0, "full")] * 2 + [(1, "full")] * 4
    assert ex.seen == [(0, 0)] * 2 + [(1, 0)] * 4  # a skipped round timed nothing


def test_merging_counts_the_light_rounds():
    t = Timing((1e-3,) * 4, 1e-3, 1e-3, 1e-3, "converged")
    full = ImplResult("a", "ok", timing=t)
    light = ImplResult("a", "ok", timing=t, protocol={"checks": "light"})
    assert merge_rounds([full, light, light]).protocol["light_rounds"] == 2
    assert "light_rounds" not in merge_rounds([full, full]).protocol


def test_merging_keeps_each_rounds_kernels_where_a_process_chose_others(tmp_path):
    """A library that picks another kernel in some processes (a cause of rounds that differ) shows in
    the merged record, round by round; rounds that all ran the same kernels add nothing."""
    t = Timing((1e-3,) * 4, 1e-3, 1e-3, 1e-3, "converged")
    a = ImplResult("conv", "ok", timing=t, protocol={"kernels": "implicit_gemm~1a2b3c4d"})
    b = ImplResult("conv", "ok", timing=t, protocol={"kernels": "implicit_gemm~99887766"})
    merged = merge_rounds([a, b, a])
    assert json.loads(merged.protocol["kernels_by_round"]) == ["implicit_gemm~1a2b3c4d", "implicit_gemm~99887766",
                                                               "implicit_gemm~1a2b3c4d"]
    run = make_run({"c": {"conv": [1e-3] * 6}})
    run = replace(run, cases=(replace(run.cases[0], impls=(merged,)),))
    assert store.load(store.save(run, tmp_path / "run.json")).cases[0].impls[0].protocol == merged.protocol
    assert "kernels_by_round" not in merge_rounds([a, a, a]).protocol


def test_kernel_shapes_number_each_kernel_and_rounds_that_launched_other_grids_are_kept():
    """The same kernels launched with another grid in one process (another split-K factor, say): the
    worker's record numbers each shape by its kernel, and the merged point keeps every round's."""
    from solbench.measure.worker import kernel_shapes

    names = ["gemm", "reduce", "gemm", "gemm"]
    shapes = ["grid 64x4x1 block 128x1x1", "grid 16x1x1 block 256x1x1", "grid 64x4x1 block 128x1x1",
              "grid 64x8x1 block 128x1x1"]
    assert kernel_shapes(names, shapes) == ("#1 grid 64x4x1 block 128x1x1 | #2 grid 16x1x1 block 256x1x1 | "
                                            "#1 grid 64x8x1 block 128x1x1")
    assert kernel_shapes(names, ["", "", "", ""]) == ""  # CUPTI gave no shapes
    assert kernel_shapes(names, shapes[:2]) == ""  # not one shape per kernel: nothing to align
    t = Timing((1e-3,) * 4, 1e-3, 1e-3, 1e-3, "converged")
    a = ImplResult("gemm", "ok", timing=t, protocol={"kernels": "gemm", "kernel_shapes": "#1 grid 64x4x1"})
    b = ImplResult("gemm", "ok", timing=t, protocol={"kernels": "gemm", "kernel_shapes": "#1 grid 64x8x1"})
    merged = merge_rounds([a, b, a]).protocol
    assert json.loads(merged["kernel_shapes_by_round"]) == ["#1 grid 64x4x1", "#1 grid 64x8x1", "#1 grid 64x4x1"]
    assert "kernels_by_round" not in merged  # the names were the same every round
    assert "kernel_shapes_by_round" not in merge_rounds([a, a]).protocol


def test_a_merged_points_phase_seconds_are_summed_over_its_rounds_as_its_task_seconds_are():
    t = Timing((1e-3,) * 4, 1e-3, 1e-3, 1e-3, "converged")
    rounds = [ImplResult("a", "ok", timing=t, protocol={"task_s": 1.0, "setup_s": 0.5, "check_s": 0.25,
                                                         "sample_s": 0.125, "capture_s": 0.0625}),
              ImplResult("a", "ok", timing=t, protocol={"task_s": 2.0, "setup_s": 1.5, "check_s": 0.125,
                                                         "sample_s": 0.25})]
    p = merge_rounds(rounds).protocol
    assert (p["task_s"], p["setup_s"], p["check_s"], p["sample_s"], p["capture_s"]) == (3.0, 2.0, 0.375, 0.375,
                                                                                        0.0625)
    assert "after_s" not in p  # no round recorded it
