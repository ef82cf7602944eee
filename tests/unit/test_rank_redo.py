"""A sample taken again (the spin ran dry) is taken again by every rank of a group, or by none.

Each call of a multi-rank implementation may be a collective: a rank that calls once more than its
peers leaves them waiting for a call that never comes. Found on two H200s, where the default NCCL
protocol hung a 1 MiB all-reduce until the group's timeout. Uses the simulated GPU of test_cupti_sim.
"""

from types import SimpleNamespace

from solbench.device.timer import CudaColdTimer
from solbench.measure.rank import GroupTimer
from tests.unit.test_cupti_sim import SimGpu, honest, sim_torch


def _cold(gpu, spin_us):
    timer = CudaColdTimer(sim_torch(gpu), 50 << 20, clean=True)
    calls = []

    def call():
        calls.append(1)
        return honest(gpu)()

    timer._launches = [call]
    timer.spin_us = spin_us
    return timer, calls


def test_a_rank_whose_spin_did_not_run_dry_redoes_when_a_peer_says_so():
    timer, calls = _cold(SimGpu(), spin_us=500.0)  # 500 µs of spin: this rank's spin never runs dry
    asked = []
    timer.agree_dry = lambda dry: asked.append(dry) or len(asked) == 1  # the peer ran dry once
    timer.sample(0)
    assert asked == [False, False]  # its own view, each time it enqueued the call
    assert len(calls) == 2 and timer.redone == 1 and timer.spin_us == 1000.0  # same as the peer


def test_a_rank_whose_spin_ran_dry_does_not_redo_alone():
    timer, calls = _cold(SimGpu(), spin_us=0.001)  # the spin ends before the call is enqueued
    timer.agree_dry = lambda dry: False  # the peers did not run dry: nobody redoes
    timer.sample(0)
    assert len(calls) == 1 and timer.redone == 0 and timer.spin_us == 0.001


def test_the_group_timer_routes_the_decision_through_the_ranks_agreement():
    seen = []

    def agree(values):
        seen.append(list(values))
        return [max(values[0], 1.0)]  # another rank said yes

    ctx = SimpleNamespace(backend="gloo", agree=agree, barrier=lambda: None)
    inner = SimpleNamespace(name="cold", prepare=lambda launches: None, agree_dry=None, gate=object())
    group = GroupTimer(inner, ctx)
    group.prepare([])
    assert inner.gate is None  # ranks spin: equal spins after the all-reduce start their windows together
    assert inner.agree_dry is not None
    assert inner.agree_dry(False) is True and seen[-1] == [0.0]
