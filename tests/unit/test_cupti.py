"""The CUPTI timer's record selection, the tracer's bookkeeping (on a fake cupti module), the
missing-package error, the rounded spin and the default rounds. No GPU needed."""

import enum
import sys
from types import SimpleNamespace

import pytest

from solbench.device import cupti
from solbench.device.cupti import _READ, Activity, ApiCall, Tracer, launched_in, query_name, span_ns, stray_work
from solbench.errors import DeviceError


def _k(start, end, corr, stream=7, name="gemm"):
    return Activity("kernel", start, end, corr, stream, name)


def test_launched_in_picks_the_work_of_api_calls_inside_the_window():
    calls = [ApiCall(100, 1), ApiCall(200, 2), ApiCall(250, 3), ApiCall(400, 4)]
    work = [_k(1000, 1100, 1, name="flush"), _k(1200, 1300, 2), _k(1250, 1500, 3, stream=9), _k(1600, 1700, 4)]
    mine = launched_in(calls, work, 150, 300)
    assert [a.correlation_id for a in mine] == [2, 3]
    assert span_ns(mine) == 300  # 1200 .. 1500, across two streams


def test_launched_in_includes_the_window_edges_and_sorts_by_start():
    calls = [ApiCall(10, 5), ApiCall(20, 6)]
    work = [_k(90, 95, 6), _k(50, 60, 5)]
    assert [a.correlation_id for a in launched_in(calls, work, 10, 20)] == [5, 6]


def test_span_of_nothing_is_an_error():
    with pytest.raises(ValueError, match="no GPU activity"):
        span_ns([])


def test_stray_work_names_work_ending_after_the_marker_began():
    marker = [Activity("kernel", 2000, 2002, 9, 7, "fill")]
    honest = [_k(1000, 1990, 1)]
    assert stray_work(honest, marker) is None
    cheat = [_k(1000, 1500, 1, stream=11), _k(1500, 6000, 2, stream=11)]
    reason = stray_work(cheat, marker)
    assert reason is not None
    assert "1 of 2" in reason and "stream 11" in reason and "4.0 µs" in reason


def test_stray_work_without_marker_or_work_says_nothing():
    assert stray_work([], [_k(1, 2, 1)]) is None
    assert stray_work([_k(1, 2, 1)], []) is None


class _Kind(enum.IntEnum):
    RUNTIME = 1
    DRIVER = 2
    CONCURRENT_KERNEL = 3
    MEMCPY = 4
    MEMSET = 5
    NAME = 6


class _RuntimeCbid(enum.IntEnum):
    cudaLaunchKernel_v7000 = 211
    cudaGetDevice_v3020 = 17
    cudaStreamGetCaptureInfo_v2_ptsz_v11030 = 300
    cudaMemcpyAsync_v3020 = 41


class _DriverCbid(enum.IntEnum):
    cuLaunchKernelEx = 400
    cuDevicePrimaryCtxGetState = 401
    cuCtxGetDevice_v2 = 402


class FakeCupti:
    """Just enough of ``cupti.cupti``: kinds, callbacks, a clock and a flush that delivers."""

    ActivityKind = _Kind

    def __init__(self):
        self.runtime_api_trace_cbid, self.driver_api_trace_cbid = _RuntimeCbid, _DriverCbid
        self.enabled: set[int] = set()
        self.api_off: set[int] = set()
        self.pending: list = []
        self.clock = 0
        self.flushes = 0

    def activity_register_callbacks(self, requested, completed):
        self.requested, self.completed = requested, completed

    def activity_enable(self, kind):
        self.enabled.add(int(kind))

    def activity_disable(self, kind):
        self.enabled.discard(int(kind))

    def activity_enable_runtime_api(self, cbid, enable):
        assert {int(k) for k in _RuntimeCbid} >= {cbid} and self.enabled >= {_Kind.RUNTIME}
        (self.api_off.discard if enable else self.api_off.add)(cbid)

    def activity_enable_driver_api(self, cbid, enable):
        assert {int(k) for k in _DriverCbid} >= {cbid} and self.enabled >= {_Kind.DRIVER}
        (self.api_off.discard if enable else self.api_off.add)(cbid)

    def get_timestamp(self):
        self.clock += 10
        return self.clock

    def activity_flush_all(self, flag):
        self.flushes += 1
        records, self.pending = self.pending, []
        self.completed(records)


def _rec(kind, **fields):
    return SimpleNamespace(kind=kind, **fields)


def test_tracer_sorts_records_into_api_calls_and_work():
    fake = FakeCupti()
    trace = Tracer(fake)
    assert fake.requested() == (8 << 20, 0)
    fake.pending = [
        _rec(_Kind.RUNTIME, start=5, end=6, correlation_id=1),
        _rec(_Kind.DRIVER, start=7, end=8, correlation_id=2),
        _rec(_Kind.CONCURRENT_KERNEL, start=100, end=150, correlation_id=1, stream_id=3, name="sm90_gemm"),
        _rec(_Kind.MEMSET, start=160, end=161, correlation_id=2, stream_id=3),
        _rec(_Kind.MEMCPY, start=170, end=180, correlation_id=2, stream_id=4),
        _rec(_Kind.NAME, object_kind=0),  # other kinds are ignored
    ]
    calls, work = trace.collect()
    assert calls == [ApiCall(5, 1), ApiCall(7, 2)]
    assert [(a.kind, a.name, a.stream_id) for a in work] == [("kernel", "sm90_gemm", 3), ("memset", "memset", 3),
                                                              ("memcpy", "memcpy", 4)]
    assert trace.collect() == ([], [])  # handed over once


def test_tracer_begin_end_nest():
    fake = FakeCupti()
    trace = Tracer(fake)
    outer = trace.begin()
    assert outer and fake.enabled == {1, 2, 3, 4, 5}
    inner = trace.begin()
    assert not inner
    trace.end(inner)  # the inner user did not turn it on: stays on
    assert fake.enabled == {1, 2, 3, 4, 5}
    trace.end(outer)
    assert fake.enabled == set() and not trace.enabled
    assert fake.flushes == 1  # records collected before turning off


def test_tracer_turns_off_the_records_of_state_queries_only():
    fake = FakeCupti()
    trace = Tracer(fake)
    trace.begin()
    assert fake.api_off == {17, 300, 401, 402}  # not the launches, not the memcpy


@pytest.mark.parametrize(("name", "query"), [
    ("cudaGetDevice_v3020", True), ("cudaStreamGetCaptureInfo_v2_ptsz_v11030", True), ("cuCtxGetDevice_v2", True),
    ("cuStreamIsCapturing_ptsz", True), ("cudaLaunchKernel_v7000", False), ("cuLaunchKernelEx", False),
    ("cudaMemsetAsync_v3020", False), ("cudaGetDeviceX_v1", False), ("cuGraphLaunch", False)])
def test_query_names_ignore_version_suffixes_and_nothing_else(name, query):
    assert query_name(name) is query


def test_a_cupti_without_per_api_switches_still_traces():
    fake = FakeCupti()
    del fake.runtime_api_trace_cbid, fake.driver_api_trace_cbid
    trace = Tracer(fake)
    assert trace.begin() and fake.enabled == {1, 2, 3, 4, 5} and fake.api_off == set()


def test_tracer_now_is_cuptis_clock():
    fake = FakeCupti()
    trace = Tracer(fake)
    assert trace.now() < trace.now()


def test_missing_cupti_python_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(cupti, "_TRACER", None)
    monkeypatch.setitem(sys.modules, "cupti", None)  # import fails
    with pytest.raises(DeviceError, match=r"solbench\[cupti\]"):
        cupti.tracer()
    from solbench.device.timer import make_timer

    with pytest.raises(DeviceError, match="cupti-python"):
        make_timer("cuda", "cupti")


def test_unknown_timer_names_the_known_ones():
    from solbench.device.timer import make_timer

    with pytest.raises(DeviceError, match="cold, graph, cupti"):
        make_timer("cuda", "fast")


def test_the_cpu_always_times_with_the_wall_clock():
    from solbench.device.timer import CpuTimer, make_timer

    assert isinstance(make_timer("cpu", "cupti"), CpuTimer)


def test_side_stream_check_is_off_without_cuda_or_when_asked(monkeypatch):
    from solbench.measure import guards

    assert guards.stream_tracer("cpu") is None
    monkeypatch.setenv("SOLBENCH_NO_CUPTI", "1")
    assert guards.stream_tracer("cuda") is None
    value, problem = guards.traced_call(lambda: 42, None)
    assert (value, problem) == (42, None)


@pytest.mark.parametrize(("host_us", "spin"), [(0.0, 25.0), (5.0, 25.0), (7.6, 50.0), (19.0, 50.0),
                                              (21.0, 100.0), (40.0, 100.0), (46.0, 200.0)])
def test_spin_is_rounded_up_to_25_times_a_power_of_two(host_us, spin):
    from solbench.device.timer import spin_length_us

    assert spin_length_us(host_us) == spin
    assert spin_length_us(host_us) >= 2 * host_us + 10


def test_default_rounds_are_three_on_a_gpu_and_on_the_cpu():
    from solbench.api import RunOptions, rounds_for

    assert rounds_for(RunOptions(), "cuda") == 3
    assert rounds_for(RunOptions(), "cpu") == 3  # a gate against the run can price a process's offset
    assert rounds_for(RunOptions(repeat=5), "cpu") == 5
    assert RunOptions().flush == "clean"


class StrayTimer:
    """A timer whose sample ``bad`` reports stray work."""

    name = "fake"

    def __init__(self, bad):
        self.bad = bad
        self.pending_s = []
        self.stray = None
        self.last_output = None

    def prepare(self, launches):
        pass

    def sample(self, index):
        self.stray = "work on a side stream" if index == self.bad else None
        return 1e-3

    def protocol(self):
        return {}

    def output_index(self, index):
        return 0


@pytest.mark.parametrize("bad", [0, 5])  # a warm-up sample, a measured one
def test_loop_reports_stray_work_as_a_cheat(bad):
    from solbench.measure.criteria import CIWidth
    from solbench.measure.loop import CheatDetected, measure

    with pytest.raises(CheatDetected, match="side stream"):
        measure(StrayTimer(bad), [lambda: None], CIWidth(0.01, 10, 10, 1e9), warmup=2)


def test_loop_without_stray_work_measures():
    from solbench.measure.criteria import CIWidth
    from solbench.measure.loop import measure

    t = measure(StrayTimer(-1), [lambda: None], CIWidth(0.01, 10, 10, 1e9), warmup=2)
    assert t.n == 10


def test_stray_work_tolerates_timestamps_within_a_microsecond():
    marker = [Activity("kernel", 2000, 2002, 9, 7, "fill")]
    assert stray_work([_k(1000, 2000 + cupti.LATE_NS, 1)], marker) is None
    assert stray_work([_k(1000, 2001 + cupti.LATE_NS, 1)], marker) is not None


class _Record:
    """A cupti-python record as the package builds one: properties over a one-row numpy recarray
    (``_data``, fields in the C struct's camelCase), each property read counted."""

    reads = 0

    def __init__(self, kind, start, end, corr, stream, grid=(4, 1, 1), lie=0):
        import numpy as np

        dtype = [("kind", "<u4"), ("start", "<u8"), ("end", "<u8"), ("correlationId", "<u4"), ("streamId", "<u4"),
                 ("gridX", "<i4"), ("gridY", "<i4"), ("gridZ", "<i4"), ("name", "<u8")]
        row = (kind, start, end, corr, stream, *grid, 1234)
        self._data = np.array([row], dtype=dtype).view(np.recarray)
        self._lie = lie  # the properties read this much more than the row (a row the tracer must not trust)

    def _get(self, field, extra=0):
        type(self).reads += 1
        return int(getattr(self._data, field)[0]) + extra

    kind = property(lambda self: self._get("kind"))
    start = property(lambda self: self._get("start", self._lie))
    end = property(lambda self: self._get("end", self._lie))
    correlation_id = property(lambda self: self._get("correlationId"))
    stream_id = property(lambda self: self._get("streamId"))
    grid_x = property(lambda self: self._get("gridX"))
    grid_y = property(lambda self: self._get("gridY"))
    grid_z = property(lambda self: self._get("gridZ"))
    name = property(lambda self: "sm90_gemm")


def test_tracer_reads_a_validated_row_at_once_and_the_properties_otherwise():
    fake = FakeCupti()
    trace = Tracer(fake)
    fake.pending = [_Record(_Kind.CONCURRENT_KERNEL, 100 + i, 150 + i, i, 3, grid=(i + 1, 2, 1)) for i in range(5)]
    _Record.reads = 0
    _, work = trace.collect()
    assert [(a.start, a.end, a.correlation_id, a.stream_id, a.name) for a in work] == [
        (100 + i, 150 + i, i, 3, "sm90_gemm") for i in range(5)]
    assert [a.shape for a in work] == [f"grid {i + 1}x2x1" for i in range(5)]
    first = _Record.reads
    assert 0 < first <= 2 * len(_READ)  # the first record of its type: each field checked against its property
    fake.pending = [_Record(_Kind.CONCURRENT_KERNEL, 1, 2, 9, 3) for _ in range(5)]
    _Record.reads = 0
    trace.collect()
    assert _Record.reads == 0  # later records of that type: read from the row

    liar = Tracer(FakeCupti())
    liar._cupti.pending = [_Record(_Kind.CONCURRENT_KERNEL, 100, 150, 1, 3, lie=7)]
    _, work = liar.collect()
    assert (work[0].start, work[0].end) == (107, 157)  # the row disagreed with the properties: they are read


def test_a_row_check_that_meets_a_raising_property_trusts_no_row():
    """The check runs inside CUPTI's buffer callback: it must not raise there."""
    class Raising(_Record):
        stream_id = property(lambda self: (_ for _ in ()).throw(RuntimeError("not for this kind")))

    assert cupti._row_names(Raising(_Kind.MEMSET, 10, 20, 4, 3)) is None
    assert cupti._row_names(_Record(_Kind.MEMSET, 10, 20, 4, 3))[:4] == ("kind", "start", "end", "correlation_id")


def test_early_work_names_work_that_began_before_the_opener():
    from solbench.device.cupti import early_work

    opener = [Activity("kernel", 5000, 5002, 8, 7, "fill")]
    assert early_work([_k(5010, 9000, 1)], opener) is None  # ordered after the current stream
    assert early_work([_k(4500, 9000, 1, stream=11)], opener) is None  # within LATE_NS: clock skew
    reason = early_work([_k(1000, 2000, 1, stream=11), _k(6000, 7000, 2)], opener)
    assert reason is not None
    assert "1 of 2" in reason and "stream 11" in reason and "4.0 µs before" in reason
    assert early_work([], opener) is None and early_work([_k(1, 2, 1)], []) is None


def test_judged_joins_late_and_early_work_and_checks_early_only_with_an_opener():
    from solbench.device.cupti import judged

    calls = [ApiCall(10, 1), ApiCall(20, 2), ApiCall(30, 3)]  # opener, the call, the marker
    work = [Activity("kernel", 5000, 5002, 1, 7, "opener"), _k(1000, 2000, 2, stream=11),
            Activity("kernel", 9000, 9002, 3, 7, "marker")]
    mine, problem = judged(calls, work, 15, 25, 35)
    assert [a.correlation_id for a in mine] == [2] and problem is None  # ended before the marker: not late
    mine, problem = judged(calls, work, 15, 25, 35, opened=(5, 14))
    assert problem is not None and "before the current stream reached the call" in problem


def test_the_cupti_switch_is_read_once_where_a_worker_freezes_it(monkeypatch):
    """SOLBENCH_NO_CUPTI=1 was read at every use: an implementation that set it in its own worker (at
    import or in set-up) turned off the CUPTI checks made after it (the side-stream check of its
    checked calls, the match of a graph's replay against the launched call). A worker fixes the
    switch before it runs any implementation; flipping the frozen answer afterwards is tampering."""
    from solbench.device import cupti
    from solbench.measure import guards

    monkeypatch.setattr(cupti, "_FROZEN", None)
    monkeypatch.setattr(cupti, "available", lambda: True)
    monkeypatch.setattr(cupti, "tracer", lambda: "tracer")  # a stand-in for this process's tracer
    monkeypatch.delenv("SOLBENCH_NO_CUPTI", raising=False)
    assert cupti.freeze() is True
    guard = guards.TamperGuard()
    monkeypatch.setenv("SOLBENCH_NO_CUPTI", "1")  # what the implementation does
    assert cupti.wanted() and guards.stream_tracer("cuda") == "tracer"
    assert guard.tampered() is None
    cupti._FROZEN = False  # the frozen answer rebound: the harness's own state replaced
    assert "solbench.device.cupti._FROZEN" in (guard.tampered() or "")


def test_the_switch_left_unfrozen_follows_the_environment(monkeypatch):
    from solbench.device import cupti

    monkeypatch.setattr(cupti, "_FROZEN", None)
    monkeypatch.setattr(cupti, "available", lambda: True)
    monkeypatch.delenv("SOLBENCH_NO_CUPTI", raising=False)
    assert cupti.wanted()
    monkeypatch.setenv("SOLBENCH_NO_CUPTI", "1")
    assert not cupti.wanted()


def test_a_worker_freezes_the_cupti_switch_before_its_first_task(monkeypatch):
    from solbench.device import cupti
    from solbench.measure import pool

    monkeypatch.setattr(cupti, "_FROZEN", None)

    class Pipe:  # says ready, then the parent is gone: the worker returns before any task
        def send_bytes(self, data):
            self.ready = data

        def recv(self):
            raise EOFError

    pipe = Pipe()
    pool._work(pipe, "cpu", None, None, 0)
    assert b'"ready"' in pipe.ready
    assert cupti._FROZEN is not None
