"""``bench/loop_replay.py``: the run loop replayed on an H200 run's own rounds starts the passes and
worker processes that run recorded (``RunResult.harness``), so its counts for other settings are the
loop's own, not a model's."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from solbench.execute import session

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "results/h200/issue16/session30/call6"


def _replay_module():
    spec = importlib.util.spec_from_file_location("loop_replay", ROOT / "bench/loop_replay.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["loop_replay"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["five-1.json.gz", "five-2.json.gz"])
def test_the_loop_on_a_runs_own_rounds_starts_what_that_run_started(name):
    lr = _replay_module()
    run = lr.load(str(RUNS / name))
    own = lr.rounds_of(run)
    before = session.PASS_ROUNDS, session._skipped
    count = lr.replay(run, own, {}, np.random.default_rng(0), session.PASS_ROUNDS)
    assert (session.PASS_ROUNDS, session._skipped) == before  # the loop's settings are put back
    assert count.matched and count.beyond == 0  # it asked for the rounds the run measured, no more
    assert count.point_rounds == sum(len(v) for v in own.values())
    assert (count.passes, count.processes) == (run.harness["passes"], run.harness["worker_processes"])


def test_fewer_rounds_a_pass_take_more_passes_on_the_same_rounds():
    lr = _replay_module()
    run = lr.load(str(RUNS / "five-1.json.gz"))
    own = lr.rounds_of(run)
    others = lr.rounds_of(lr.load(str(RUNS / "five-3.json.gz")))
    one = lr.replay(run, own, others, np.random.default_rng(0), 1)
    assert one.passes > run.harness["passes"]  # one added round a point a pass: a pass for each
    assert one.processes <= sum(len(v) for v in own.values())  # never more processes than point-rounds


def test_a_replayed_run_reports_what_the_run_recorded_and_a_looser_rule_fewer_rounds():
    lr = _replay_module()
    run = lr.load(str(RUNS / "five-3.json.gz"))
    own = lr.rounds_of(run)
    same = lr.replay(run, own, {}, np.random.default_rng(0), session.PASS_ROUNDS)
    looser = lr.replay(run, own, {}, np.random.default_rng(0), session.PASS_ROUNDS,
                       max_rounds=run.protocol.max_rounds, target=2 * run.protocol.rounds_target)
    timed = 0
    for recorded, replayed, loose in zip(run.cases, same.run.cases, looser.run.cases, strict=True):
        for a, b, c in zip(recorded.impls, replayed.impls, loose.impls, strict=True):
            if a.timing is None:
                continue
            timed += 1
            assert (b.timing.median, b.timing.ci_low, b.timing.ci_high) == (a.timing.median, a.timing.ci_low,
                                                                           a.timing.ci_high)
            assert c.timing.n_rounds <= a.timing.n_rounds  # never more rounds than the tighter rule's
    assert timed == 70
    assert looser.beyond == 0 and looser.point_rounds < same.point_rounds and looser.processes < same.processes
