"""A verified timed call whose outputs hold the same bits as the checked call's on the same (unchanged)
inputs passes as that call did, without comparing with the reference again; any other output is
compared as before. Driven in this process on the CPU; nothing is timed."""

from pathlib import Path
from unittest import mock

import torch

from solbench import api
from solbench.measure import guards, tensors, worker
from solbench.measure.worker import MeasureSettings, Task, WorkerState, execute
from tests.unit import helpers

SAME = "tests/data/same_bits.yaml"
SETTINGS = MeasureSettings(timer="cpu", warmup=1, min_samples=8, max_samples=12, budget_s=0.05)


def _run(impl: str):
    (planned,) = api.plan([SAME], "cpu")
    task = Task(planned.spec, planned.cases[0], impl, str(Path(SAME).parent.absolute()), "cpu", SETTINGS)
    compared = []
    original = tensors.compare

    def counted(*args, **kwargs):
        compared.append(1)
        return original(*args, **kwargs)

    verified = []
    verify = worker._Checker.verify_timed

    def counted_verify(self, *args):
        verified.append(1)
        return verify(self, *args)

    with mock.patch.object(tensors, "compare", counted), \
            mock.patch.object(worker._Checker, "verify_timed", counted_verify):
        result, _ = execute(task, WorkerState())
    return result, len(compared), len(verified)


def test_timed_calls_with_the_checked_bits_are_not_compared_again():
    result, compared, verified = _run("baseline")
    assert result.status == "ok", result.message
    assert verified >= 1  # the last sample at least
    assert compared == 3 + 2  # the checks before timing (sets 0, 1, 0) and the two unseen sets after


def test_timed_calls_with_other_bits_are_compared_with_the_reference():
    result, compared, verified = _run("jitter")
    assert result.status == "ok", result.message
    assert compared == 3 + 2 + verified


def test_a_timed_call_that_goes_wrong_is_still_caught():
    helpers._CALLS[0] = 0
    result, _, _ = _run("wrong_when_timed")
    assert result.status == "reward_hack" and "work skipped on some calls" in result.message


def test_bits_equal_reads_every_pair_at_once():
    x = torch.randn(16)
    flipped = x.clone()
    flipped.view(torch.int32)[5] ^= 1
    nan = torch.full((4,), float("nan"))
    pairs = [(x, x.clone()), (x, flipped), (x, x[:8]), (x, x.double()), (nan, nan.clone()),
             (torch.empty(0), torch.empty(0)), (x.view(4, 4).t(), x.view(4, 4).t().clone())]
    assert guards.bits_equal(pairs) == [True, False, False, False, True, True, True]
    assert guards.bits_equal([]) == []
