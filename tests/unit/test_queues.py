"""One work queue for a worker's CUDA context only where CUPTI saw its implementation use one stream
(:mod:`solbench.measure.queues`). The policy and its wiring into the pool; nothing starts CUDA."""

import os

from solbench.analysis.pooling import merge_rounds
from solbench.measure import pool, queues
from solbench.measure.queues import QueuePolicy
from solbench.results.model import ImplResult, Timing

T = Timing((1e-3,) * 4, 1e-3, 1e-3, 1e-3, "converged")


def _seen(streams, status="ok", check="cupti", **more):
    return ImplResult("a", status, timing=T if status == "ok" else None,
                      protocol={"stream_check": check, "streams": streams, **more})


def test_one_queue_only_after_cupti_saw_one_stream():
    policy = QueuePolicy({})
    key = ("o_proj", "fused")
    assert policy.queues(key) is None  # nothing seen yet: the first round keeps the driver's default
    policy.note(key, _seen(1))
    assert policy.queues(key) == 1
    assert pool.base_key(pool.slot_key(key, 2)) == key  # the pool asks for every worker of a pass by it
    assert policy.queues(("o_proj", "baseline")) is None  # another implementation
    assert policy.queues(("bert", "fused")) is None  # the same name in another workload


def test_several_streams_turn_it_off_for_good():
    policy = QueuePolicy({})
    key = ("w", "multi")
    policy.note(key, _seen(1))
    policy.note(key, _seen(2))
    assert policy.queues(key) is None
    policy.note(key, _seen(1))  # one stream again later: it may use several again
    assert policy.queues(key) is None


def test_results_that_say_nothing_of_streams_leave_the_default():
    policy = QueuePolicy({})
    policy.note(("w", "settle"), _seen(1, check="settle"))  # no CUPTI: the streams are not known
    policy.note(("w", "failed"), _seen(1, status="incorrect"))
    policy.note(("w", "bare"), ImplResult("bare", "ok", timing=T))
    assert [policy.queues(("w", n)) for n in ("settle", "failed", "bare")] == [None, None, None]


def test_the_switch_and_a_users_setting_turn_it_off():
    for environ in ({queues.SWITCH_ENV: "driver"}, {queues.ENV: "8"}, {queues.ENV: "1"}):
        policy = QueuePolicy(environ)
        policy.note(("w", "a"), _seen(1))
        assert policy.queues(("w", "a")) is None, environ
    assert QueuePolicy({queues.SWITCH_ENV: "one"}).enabled  # only "driver" turns it off


def test_apply_sets_the_drivers_variable(monkeypatch):
    monkeypatch.delenv(queues.ENV, raising=False)
    queues.apply(None)
    assert queues.ENV not in os.environ
    queues.apply(1)
    assert os.environ[queues.ENV] == "1"


class _FakeWorker:
    overstayed = False  # it exits when asked (pool.ProcessWorker.close)

    def __init__(self, device, device_index, tree=None, threads=0, queues=None):
        self.queues = queues

    def wait_ready(self):
        pass

    def request_close(self):
        pass

    def close(self):
        pass


def test_the_pool_starts_later_workers_with_one_queue(monkeypatch):
    monkeypatch.delenv(queues.ENV, raising=False)
    monkeypatch.delenv(queues.SWITCH_ENV, raising=False)
    monkeypatch.setattr(pool, "ProcessWorker", _FakeWorker)
    p = pool.Pool("cuda", 0)
    p.prestart([("w", "one"), ("w", "two")])
    assert [p._workers[k].queues for k in (("w", "one"), ("w", "two"))] == [None, None]
    p._settled(("w", "one"), _seen(1), False)
    p._settled(("w", "two"), _seen(2), False)
    p.retire([("w", "one"), ("w", "two")])
    p.prestart([("w", "one"), ("w", "one#2"), ("w", "two"), ("w", "two#2")])
    assert [p._workers[k].queues for k in (("w", "one"), ("w", "one#2"), ("w", "two"), ("w", "two#2"))] \
        == [1, 1, None, None]
    assert pool.Pool("cpu", None).queues is None  # no CUDA context, nothing to set


def test_merging_counts_the_one_queue_rounds_and_keeps_the_most_streams():
    first = _seen(1)
    later = _seen(1, work_queues="1")
    merged = merge_rounds([first, later, later]).protocol
    assert merged["one_queue_rounds"] == 2 and merged["streams"] == 1
    merged = merge_rounds([first, _seen(2, work_queues="1")]).protocol
    assert merged["streams"] == 2 and merged["one_queue_rounds"] == 1
    assert "one_queue_rounds" not in merge_rounds([first, first]).protocol


def test_a_streams_record_that_is_no_count_says_nothing_and_never_raises():
    """A worker's result is checked field by field on receipt, but protocol values may be any number or
    text: a result (forged by an implementation that found its pipe) saying streams "2" raised a
    TypeError in the parent, ending the run, where the wire turns whatever else a worker sends into
    that worker's own status."""
    policy = QueuePolicy({})
    for streams in ("2", 1.0, True, float("nan")):
        policy.note(("w", "a"), _seen(streams))
    assert policy.queues(("w", "a")) is None
