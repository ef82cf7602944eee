"""Worker-to-parent messages are data: parsed as JSON, checked field by field, capped; and the
parent's checks of a report against what it saw (streamed samples, counts, wall time).

The wall-time checks are driven by a fake clock: nothing here depends on how fast the machine is.
"""

import contextlib
import dataclasses
import pickle
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing import Pipe

import pytest

from solbench.measure import wire
from solbench.measure.watch import WALL_SLACK_S, Forged, Watch
from solbench.results.model import Correctness, ImplResult, Score, Timing


def _ok(samples, name="impl", **protocol):
    timing = Timing(tuple(samples), 0.0, 0.0, 0.0, "converged")
    return ImplResult(name, "ok", "", Correctness(True, 0.0, 0.0, 1e-4, 1e-4), timing, protocol=protocol)


def _roundtrip(result):
    a, b = Pipe()
    with ThreadPoolExecutor(1) as pool:  # a large message would fill the pipe before it is read
        pool.submit(wire.send_result, b, result, False)
        return wire.parse(wire.Frames(a).read(time.monotonic() + 60))


def test_a_result_travels_as_json_and_comes_back_equal():
    result = _ok([1e-3, 2e-3, float("inf")], spin_us=25.0)
    msg = _roundtrip(result)
    assert msg["result"] == result and msg["fatal"] is False


@pytest.mark.parametrize("raw", [
    pickle.dumps(("result", "x", False)),               # a pickle: never loaded
    b"\xff\xfe",                                         # not UTF-8
    b"[1, 2]",                                           # not an object
    b'{"kind": "shell"}',                                # unknown kind
    b'{"kind": "ready", "pid": "1"}',                    # wrong type
    b'{"kind": "ready", "pid": 1, "extra": 2}',          # unknown field
    b'{"kind": "value", "i": 0, "s": NaN, "v": false}',  # a JSON extension, not JSON
    b'{"kind": "progress", "event": "sample", "data": {"n": "10"}}',
    b'{"kind": "result", "result": {"name": "a", "status": "pwned"}, "fatal": false}',
    b'{"kind": "result", "result": {"name": "a", "status": "ok"}, "fatal": 0}',
    b"[" * 100000 + b"]" * 100000,                       # nesting deeper than any record
])
def test_anything_but_a_well_formed_message_is_refused(raw):
    with pytest.raises(wire.BadMessage):
        wire.parse(raw)


@pytest.mark.parametrize("header", [
    struct.pack("!i", wire.MAX_MESSAGE_BYTES + 1),
    struct.pack("!i", -1) + struct.pack("!Q", 1 << 32),  # Connection.send_bytes's framing over 2 GiB
    struct.pack("!i", -2),                                 # no length at all
])
def test_an_oversized_message_is_refused_without_reading_it_whole(header):
    a, b = Pipe()
    # only the length header is written: the parent refuses on reading it, before any body
    b._send(header)
    with pytest.raises(wire.BadMessage, match="over"):
        wire.Frames(a).read(time.monotonic() + 60)


def test_a_message_not_whole_by_the_deadline_is_incomplete_and_what_came_of_it_is_kept(monkeypatch):
    """A worker that writes a length and part of the message, then stops, held the parent's read forever."""
    monkeypatch.setattr(wire, "STALL_S", 0.01)  # past the deadline, how long the stopped message is waited for
    a, b = Pipe()
    frames = wire.Frames(a)
    turn = b'{"kind": "turn"}'
    b._send(struct.pack("!i", len(turn)) + turn[:1])
    with pytest.raises(wire.Incomplete):
        frames.read(time.monotonic())
    assert (frames.taken, frames.pulled) == (0, 5)
    b._send(turn[1:])
    assert wire.parse(frames.read(time.monotonic())) == {"kind": "turn"}
    assert frames.taken == frames.pulled == 4 + len(turn)


def test_a_pipe_closed_between_messages_is_the_end_and_inside_one_an_error():
    a, b = Pipe()
    b.close()
    with pytest.raises(EOFError):
        wire.Frames(a).read(time.monotonic() + 60)
    a, b = Pipe()
    b._send(struct.pack("!i", 100) + b"{")
    b.close()
    with pytest.raises(OSError, match="end of file during message"):
        wire.Frames(a).read(time.monotonic() + 60)


def test_a_long_message_is_cut_and_says_so():
    msg = _roundtrip(ImplResult("impl", "error", "x" * 5_000_000))
    text = msg["result"].message
    assert len(text) < wire.MAX_TEXT_CHARS + 100 and text.endswith("characters truncated)")


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _watched(samples, gaps, verified=None, max_samples=100):
    clock = _Clock()
    watch = Watch("impl", 1, max_samples, clock=clock)
    for i, (s, gap) in enumerate(zip(samples, gaps, strict=True)):
        clock.now += gap
        watch.value(i, s, bool(verified and verified[i]))
    return watch


def test_the_result_must_hold_exactly_the_streamed_samples():
    watch = _watched([1e-3] * 5, [2e-3] * 5)
    assert watch.judge(_ok([1e-3] * 5)).timing.median == 1e-3  # recomputed by the parent
    with pytest.raises(Forged, match="rewritten"):
        watch.judge(_ok([1e-3] * 4 + [1e-6]))


@pytest.mark.parametrize("result,text", [
    (_ok([1e-3] * 5, name="other"), "not for"),
    (dataclasses.replace(_ok([1e-3] * 5), score=Score(1, None, 1, 1, 1, None, None)), "score"),
    (dataclasses.replace(_ok([1e-3] * 5), status="incorrect"), "timing with status"),
    (ImplResult("impl", "ok"), "without a timing"),
    (dataclasses.replace(_ok([1e-3] * 5), correctness=None), "without a correctness"),
])
def test_impossible_shapes_are_forged(result, text):
    with pytest.raises(Forged, match=text):
        _watched([1e-3] * 5, [2e-3] * 5).judge(result)


def test_impossible_streams_are_forged():
    watch = _watched([1e-3] * 3, [1e-3] * 3, max_samples=3)
    with pytest.raises(Forged, match="max_samples"):
        watch.value(3, 1e-3, False)
    with pytest.raises(Forged, match="out of order"):
        _watched([1e-3], [1e-3]).value(5, 1e-3, False)
    with pytest.raises(Forged, match="not a possible time"):
        _watched([], []).value(0, -1.0, False)


def test_samples_claiming_far_less_than_the_watched_time_are_forged():
    # 50 calls watched taking 0.1 s each, reported at 0.1 ms: 1000x less
    watch = _watched([1e-4] * 50, [0.1] * 50)
    assert "forged timings" in watch.wall_problem({})


def test_a_slow_host_launch_behind_the_gate_is_not_taken_for_a_forgery():
    # 20 µs calls whose launch takes the host 25 ms (thousands of kernels): each sample watched taking 30 ms
    watch = _watched([2e-5] * 300, [3e-2] * 300, max_samples=300)
    assert watch.wall_problem({"spin_us": 0.0}) is not None  # unexplained, without the launch time
    assert watch.wall_problem({"spin_us": 0.0, "host_launch_us": 25_000.0}) is None
    slower = _watched([2e-5] * 300, [0.2] * 300, max_samples=300)  # 0.2 s a sample: beyond what a launch explains
    assert slower.wall_problem({"host_launch_us": 1e9}) is not None  # the claim is bounded (6.4 ms)


def test_the_harness_work_between_samples_never_counts_against_an_honest_run():
    # tiny calls (1 µs) with the harness's work between them ten times the call, on a machine
    # three times oversubscribed: W/R is 33, far above WALL_FACTOR, and still honest
    assert _watched([1e-6] * 200, [3.3e-5] * 200, max_samples=200).wall_problem({}) is None
    # a cold-timer spin of 6.4 ms per sample around 10 µs calls
    assert _watched([1e-5] * 100, [6.5e-3] * 100).wall_problem({"spin_us": 6400.0, "l2_flush_bytes": 1}) is None


WIDENED = {"graph_calls": 1000, "spin_us": 6400.0, "host_launch_us": 6400.0, "l2_flush_bytes": 1}


def _task(timer, device):
    from types import SimpleNamespace

    return SimpleNamespace(impl="impl", device=device,
                           settings=SimpleNamespace(min_samples=1, max_samples=100, timer=timer))


def test_a_worker_cannot_widen_the_wall_bound_with_knobs_its_timer_does_not_have():
    """The bound scaled the claim by the protocol's ``graph_calls`` and added its spin, launch and flush
    times, all as the worker reported them: a result saying its timer replays 1000 calls a sample (keys
    a worker can slip into its protocol) let samples 1000x too small pass. The parent knows the task's
    timer: calls per sample only for the graph timer, spin, launch and flush only for the cold and
    CUPTI timers on a GPU."""
    def watched(timer, device):
        watch = Watch.of(_task(timer, device))
        for i in range(50):  # samples of 50 µs, each watched taking 0.3 s
            watch.clock = lambda i=i: 0.3 * (i + 1)
            watch.value(i, 5e-5, False)
        return watch

    assert watched("cpu", "cpu").wall_problem(WIDENED) is not None
    assert watched("cold", "cuda").wall_problem(WIDENED) is not None  # the spin, launch and flush count, not 1000 calls
    assert watched("graph", "cuda").wall_problem(WIDENED) is None  # a graph of 1000 calls: 50 ms a replay
    honest = Watch.of(_task("cold", "cuda"))
    for i in range(100):  # 10 µs calls behind a 6.4 ms spin: as before
        honest.clock = lambda i=i: 6.5e-3 * (i + 1)
        honest.value(i, 1e-5, False)
    assert honest.wall_problem({"spin_us": 6400.0, "l2_flush_bytes": 1}) is None


def _part_task(part):
    from types import SimpleNamespace

    impl = SimpleNamespace(part=part)
    return SimpleNamespace(impl="impl", device="cpu", spec=SimpleNamespace(implementations={"impl": impl}),
                           settings=SimpleNamespace(min_samples=1, max_samples=100, timer="cpu"))


@pytest.mark.parametrize("claimed", ["compute", "comm", "floor"])
def test_a_result_cannot_say_it_is_a_part_its_workload_does_not_declare(claimed):
    """A part (``protocol["part"]``) is timed but never scored: the parent skipped the INVALID check for
    it (time below T_SOL) and took it as ok without a correctness check. The key was the worker's word,
    and a worker can put any key in its protocol: an implementation whose time is impossible said it
    was a part, and was ok (exit 0) instead of invalid (exit 4). The parent knows which implementations
    its workload declares as parts."""
    watch = Watch.of(_part_task(None))
    for i in range(5):
        watch.value(i, 1e-3, False)
    with pytest.raises(Forged, match="part"):
        watch.judge(_ok([1e-3] * 5, part=claimed))
    assert watch.judge(_ok([1e-3] * 5)).status == "ok"


def test_a_declared_part_is_taken_as_one():
    watch = Watch.of(_part_task("floor"))
    for i in range(5):
        watch.value(i, 1e-3, False)
    floor = dataclasses.replace(_ok([1e-3] * 5, part="floor"), correctness=None)
    assert watch.judge(floor).protocol["part"] == "floor"
    with pytest.raises(Forged, match="part"):
        watch.judge(dataclasses.replace(floor, protocol={}))  # ok without correctness, and no part
    with pytest.raises(Forged, match="part"):
        watch.judge(_ok([1e-3] * 5, part="compute"))


def test_gaps_after_a_verified_sample_are_not_counted():
    # every sample verified (a check can take far longer than the call): nothing to judge
    assert _watched([1e-4] * 50, [0.1] * 50, verified=[True] * 50).wall_problem({}) is None


def test_one_late_wakeup_of_the_parent_is_absorbed():
    gaps = [1e-3] * 20
    gaps[-1] += WALL_SLACK_S * 0.9  # the parent read the last sample late
    assert _watched([1e-3] * 20, gaps).wall_problem({}) is None


def test_a_deadline_weeks_away_still_reads_the_message():
    """``--timeout`` takes any finite number of seconds; a deadline more than about 24.8 days away (2**31 ms)
    was handed to poll whole, which refused it (OverflowError: timeout is too large) and crashed the run."""
    a, b = Pipe()
    wire.send(b, "turn")
    assert wire.parse(wire.Frames(a).read(time.monotonic() + 1e7)) == {"kind": "turn"}


def _trickled(conn, raw, piece, pause_s, stop=None):
    """A thread writing ``raw`` to ``conn``'s pipe ``piece`` bytes at a time, ``pause_s`` apart (a worker
    the host schedules in bursts, or one that trickles on purpose), until done or ``stop`` is set."""
    def write():
        with contextlib.suppress(OSError):  # the reading end closed
            for at in range(0, len(raw), piece):
                if stop is not None and stop.is_set():
                    return
                time.sleep(pause_s)
                conn._send(raw[at:at + piece])
    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_a_large_message_under_way_at_the_deadline_is_read_to_its_end(monkeypatch):
    """A 4 MiB result whose first bytes came by the deadline, the rest coming steadily after it (the pipe,
    a socket pair, holds about 200 KiB: the worker writes the rest only as the parent reads), was
    Incomplete, a timeout, at the first moment no bytes were waiting; it is read on as long as they keep coming."""
    monkeypatch.setattr(wire, "STALL_S", 60.0)  # generous: the outcome, not the machine's speed, is tested
    monkeypatch.setattr(wire, "FINISH_S", 600.0)
    body = wire.result_text(ImplResult("impl", "error", "x" * (4 << 20))).encode()
    raw = struct.pack("!i", len(body)) + body
    a, b = Pipe()
    piece = 32 << 10
    b._send(raw[:piece])  # under way by the deadline
    writer = _trickled(b, raw[piece:], piece, 0.002)
    try:
        msg = wire.parse(wire.Frames(a).read(time.monotonic()))
    finally:
        a.close()
        writer.join()
    assert msg["result"].status == "error" and msg["result"].message.endswith("characters truncated)")


def test_a_message_read_from_before_the_deadline_gets_the_grace_too(monkeypatch):
    """The read that waited for the rest until the deadline gave up there, though its grace had just begun."""
    monkeypatch.setattr(wire, "STALL_S", 60.0)
    a, b = Pipe()
    turn = b'{"kind": "turn"}'
    b._send(struct.pack("!i", len(turn)) + turn[:1])
    deadline = time.monotonic() + 0.5
    writer = threading.Thread(target=lambda: (time.sleep(1.0), b._send(turn[1:])), daemon=True)  # after it
    writer.start()
    try:
        assert wire.parse(wire.Frames(a).read(deadline)) == {"kind": "turn"}
    finally:
        writer.join()


def test_a_message_trickled_past_the_deadline_is_incomplete_once_its_grace_is_over(monkeypatch):
    """Bytes that keep coming do not hold the parent for ever: a worker that announces 1 MiB and sends
    a byte at a time gets ``FINISH_S`` past the deadline, not the 10 000 s it would take."""
    monkeypatch.setattr(wire, "STALL_S", 60.0)
    monkeypatch.setattr(wire, "FINISH_S", 0.5)
    a, b = Pipe()
    b._send(struct.pack("!i", 1 << 20) + b"{")
    stop = threading.Event()
    writer = _trickled(b, b" " * (1 << 20), 1, 0.01, stop)
    frames = wire.Frames(a)
    try:
        with pytest.raises(wire.Incomplete):
            frames.read(time.monotonic())
    finally:
        stop.set()
        writer.join()
    assert 5 <= frames.pulled < 4 + (1 << 20) and frames.taken == 0


def test_a_result_of_the_most_samples_a_run_allows_fits_one_message():
    """An honest result over MAX_MESSAGE_BYTES reads as a forged one (reward_hack): the most samples a run
    may take, each with full-precision floats and every NVML reading, must fit; one sample more is refused
    as an option, before anything runs."""
    import random

    from solbench.errors import ConfigError
    from solbench.plan.options import MAX_SAMPLES, RunOptions

    rng = random.Random(1)
    n = MAX_SAMPLES
    timing = Timing(tuple(rng.uniform(1e-6, 1.0) for _ in range(n)), 0.5, 0.4, 0.6, "max_samples",
                    rounds=(0,) * n, sm_clock_mhz=(1980,) * n, mem_clock_mhz=(2619,) * n,
                    power_w=tuple(rng.uniform(100, 700) for _ in range(n)), throttle_reasons=(2**40,) * n)
    result = ImplResult("impl", "ok", "", Correctness(True, 0.0, 0.0, 1e-4, 1e-4), timing)
    text = wire.result_text(result).encode()
    assert len(text) < wire.MAX_MESSAGE_BYTES
    assert wire.parse(text)["result"].timing.n == n
    with pytest.raises(ConfigError, match="--max-samples"):
        RunOptions(max_samples=MAX_SAMPLES + 1)
