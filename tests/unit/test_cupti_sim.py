"""The CUPTI timer and the CUPTI side-stream check wired to a simulated GPU (no GPU needed).

A tiny simulator stands in for torch and CUPTI: every launch is an API record at the host's
clock, and GPU work on a stream starts when the stream (and what it waits for) is free. The host
is made slower at launching than the GPU at running short kernels, as on the H200 where the
side-stream check without a spin saw nothing: these tests keep the order spin -> call -> marker.
"""

from types import SimpleNamespace

import pytest

from solbench.device.cupti import Activity, ApiCall

CURRENT, SIDE = 7, 9
HOST_STEP = 2000  # ns of host time per API call
CLOCK_KHZ = 2_000_000  # the spin's cycles per ms: 2 cycles per ns


class SimGpu:
    """Host clock, per-stream GPU cursors, and the records CUPTI would deliver."""

    def __init__(self):
        self.host = 0
        self.corr = 0
        self.free = {CURRENT: 0, SIDE: 0}
        self.calls: list[ApiCall] = []
        self.work: list[Activity] = []
        self.enabled = False
        self.order: list[str] = []

    def launch(self, name, duration, stream=CURRENT, after=None, shape=""):
        self.host += HOST_STEP
        self.corr += 1
        start = max(self.host, self.free[stream], after if after is not None else 0)
        end = start + duration
        self.free[stream] = end
        self.order.append(name)
        if self.enabled:
            self.calls.append(ApiCall(self.host, self.corr))
            self.work.append(Activity("kernel", start, end, self.corr, stream, name, shape))
        return end

    # the Tracer interface
    def begin(self):
        if self.enabled:
            return False
        self.enabled = True
        return True

    def end(self, turned_on):
        if turned_on:
            self.enabled = False

    def now(self):
        self.host += 1
        return self.host

    def collect(self):
        calls, work = self.calls, self.work
        self.calls, self.work = [], []
        return calls, work


class SimEvent:
    """Completes when the current stream reaches it; times in ns of the GPU's clock."""

    def __init__(self, gpu):
        self.gpu, self.t = gpu, None

    def record(self):
        self.gpu.host += HOST_STEP // 4
        self.t = self.gpu.free[CURRENT]

    def query(self):
        return self.gpu.host >= self.t

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return (other.t - self.t) * 1e-6  # ms


class SimTensor:
    def __init__(self, gpu, name="tensor"):
        self.gpu, self.name = gpu, name

    def zero_(self):
        self.gpu.launch(f"fill:{self.name}", 50)
        return self


def sim_torch(gpu):
    cuda = SimpleNamespace(
        _sleep=lambda cycles: gpu.launch("spin", cycles * 1e6 // CLOCK_KHZ),
        synchronize=lambda: gpu.order.append("sync"),
        get_device_properties=lambda i: SimpleNamespace(clock_rate=CLOCK_KHZ),
        current_device=lambda: 0,
        Event=lambda enable_timing=False: SimEvent(gpu),
    )
    return SimpleNamespace(cuda=cuda, int32="int32",
                           empty=lambda *a, **k: SimTensor(gpu, "buffer"),
                           zeros=lambda *a, **k: SimTensor(gpu, "marker"),
                           amax=lambda x, dim, out: gpu.launch("amax", 100))


def honest(gpu):
    def call():
        gpu.launch("gemm", 5000)
        return "out"
    return call


def unjoined(gpu, kernels=10, duration=1500):
    """Short kernels on a side stream that waits for the current stream, never joined back."""
    def call():
        after = gpu.free[CURRENT]
        for _ in range(kernels):
            gpu.launch("side-gemm", duration, stream=SIDE, after=after)
        return "out"
    return call


def _timer(gpu):
    from solbench.device.timer import CudaCuptiTimer

    timer = CudaCuptiTimer(sim_torch(gpu), 50 << 20, gpu, clean=True)
    timer.spin_us = 500.0  # prepare would size it
    return timer


def test_cupti_timer_spans_the_calls_work_only():
    gpu = SimGpu()
    timer = _timer(gpu)
    timer._launches = [honest(gpu)]
    gpu.begin()
    seconds = timer.sample(0)
    assert seconds == pytest.approx(5000e-9)  # the GEMM, not the spin, flush or marker
    assert timer.activities == 1 and timer.kernels == ("gemm",) and timer.stray is None
    # spin, flush, then the opener (a marker the call's own work must not begin before), then the call
    assert gpu.order[:5] == ["spin", "fill:buffer", "amax", "fill:marker", "gemm"]


def test_cupti_timer_times_unjoined_side_stream_work_and_reports_it():
    gpu = SimGpu()
    timer = _timer(gpu)
    timer._launches = [unjoined(gpu)]
    gpu.begin()
    seconds = timer.sample(0)
    assert timer.activities == 10
    assert seconds == pytest.approx(10 * 1500e-9)  # all ten kernels back to back on the side stream
    assert timer.stray is not None and "stream 9" in timer.stray


def test_cupti_timer_reports_a_call_without_gpu_work():
    gpu = SimGpu()
    timer = _timer(gpu)
    timer._launches = [lambda: "cached"]
    gpu.begin()
    assert timer.sample(0) == 0.0
    assert timer.stray is not None and "no GPU work" in timer.stray


def test_side_stream_check_spins_first_so_fast_side_work_is_seen(monkeypatch):
    from solbench.measure import guards

    gpu = SimGpu()
    monkeypatch.setattr(guards, "torch", sim_torch(gpu))
    value, problem = guards.traced_call(honest(gpu), gpu)
    assert value == "out" and problem is None
    assert not gpu.enabled  # turned off again
    # each side kernel (1.5 µs) is shorter than launching it (2 µs): without the spin before
    # the call, all of it would be over before the marker ran
    value, problem = guards.traced_call(unjoined(gpu), gpu)
    assert problem is not None and "does not wait" in problem
    assert gpu.order.index("spin") < gpu.order.index("side-gemm")


def test_side_stream_check_redoes_the_call_behind_a_longer_spin_when_the_host_outlasts_it(monkeypatch):
    """As on the H200: 827 API calls took 1.35 ms to enqueue against a 1 ms spin, so the side work ran
    before the marker. The check sees that its spin ended first and calls again behind a longer spin."""
    from solbench.measure import guards

    gpu = SimGpu()
    monkeypatch.setattr(guards, "torch", sim_torch(gpu))
    spin_ns = guards._CHECK_SPIN_CYCLES * 1e6 // CLOCK_KHZ
    kernels = int(1.35 * spin_ns / HOST_STEP)  # enqueuing them outlasts the first spin
    value, problem = guards.traced_call(unjoined(gpu, kernels=kernels, duration=1500), gpu)
    assert value == "out"
    assert problem is not None and "does not wait" in problem
    assert gpu.order.count("spin") == 2  # the first, blind, try and one with a 4x spin
    gpu.order.clear()
    value, problem = guards.traced_call(honest(gpu), gpu)
    assert problem is None and gpu.order.count("spin") == 1  # a quick call is checked once


def test_side_stream_check_gives_up_quietly_when_cupti_records_nothing(monkeypatch):
    from solbench.measure import guards

    gpu = SimGpu()
    monkeypatch.setattr(guards, "torch", sim_torch(gpu))
    gpu.collect = lambda: ([], [])  # a trace that never delivers
    value, problem = guards.traced_call(unjoined(gpu), gpu)
    assert value == "out" and problem is None
    assert not gpu.enabled


def many_kernels(gpu, kernels=20, duration=300):
    """A call of many short kernels on the current stream: 40 µs to launch, 6 µs to run."""
    def call():
        for _ in range(kernels):
            gpu.launch("small", duration)
        return "out"
    return call


def test_cold_timer_takes_a_sample_again_with_a_longer_spin_when_the_host_fell_behind():
    from solbench.device.timer import CudaColdTimer

    gpu = SimGpu()
    timer = CudaColdTimer(sim_torch(gpu), 50 << 20, clean=True)
    timer._launches = [many_kernels(gpu)]
    timer.spin_us = 25.0  # shorter than the 40 µs the host takes to enqueue the call
    seconds = timer.sample(0)
    assert timer.redone == 1 and timer.spin_us == 50.0
    assert seconds == pytest.approx(20 * 300e-9)  # the kernels back to back: no host gap inside
    assert timer.protocol()["samples_redone"] == 1


def test_cold_timer_with_a_long_enough_spin_takes_each_sample_once():
    from solbench.device.timer import CudaColdTimer

    gpu = SimGpu()
    timer = CudaColdTimer(sim_torch(gpu), 50 << 20, clean=True)
    timer._launches = [many_kernels(gpu)]
    timer.spin_us = 100.0
    assert timer.sample(0) == pytest.approx(20 * 300e-9)
    assert timer.redone == 0 and timer.spin_us == 100.0


def test_cold_timer_stops_holding_after_a_few_tries():
    from solbench.device import timer as timers

    gpu = SimGpu()
    timer = timers.CudaColdTimer(sim_torch(gpu), 50 << 20, clean=True)
    timer._launches = [many_kernels(gpu, kernels=2000)]  # 4 ms to enqueue: longer than 25 µs x 2^4
    timer.spin_us = 25.0
    seconds = timer.sample(0)
    assert timer.redone == timers._MAX_REDO + 1 and timer.spin_us == 25.0 * 2 ** (timers._MAX_REDO + 1)
    assert timer.unheld and timer.protocol()["hold"] == "none"
    assert seconds == pytest.approx(2000 * HOST_STEP * 1e-9, rel=0.01)  # the host's launch time: what the call costs
    spins = gpu.order.count("spin")
    timer.sample(0)
    assert gpu.order.count("spin") == spins and timer.redone == timers._MAX_REDO + 1  # no hold, no retry
    timer.prepare([honest(gpu)])
    assert not timer.unheld  # the next task is held again


def test_side_stream_check_collects_once_when_cupti_delivers_at_once(monkeypatch):
    """The marker's record in the collected ones proves the trace saw the call: no priming
    (a synchronization and a flush per call saved)."""
    from solbench.measure import guards

    gpu = SimGpu()
    monkeypatch.setattr(guards, "torch", sim_torch(gpu))
    collects = []
    real = gpu.collect
    gpu.collect = lambda: collects.append(1) or real()
    value, problem = guards.traced_call(honest(gpu), gpu)
    assert value == "out" and problem is None
    assert len(collects) == 1 and gpu.order.count("gemm") == 1


def test_side_stream_check_primes_and_calls_again_when_the_first_records_are_missing(monkeypatch):
    """CUPTI, just turned on, may deliver nothing at first: the check primes it, calls again, and
    still catches the side stream (a trace that stayed blind would have passed it)."""
    from solbench.measure import guards

    gpu = SimGpu()
    monkeypatch.setattr(guards, "torch", sim_torch(gpu))
    real = gpu.collect
    lost = iter([True])

    def collect():
        calls, work = real()
        return ([], []) if next(lost, False) else (calls, work)

    gpu.collect = collect
    value, problem = guards.traced_call(unjoined(gpu), gpu)
    assert value == "out"
    assert problem is not None and "does not wait" in problem
    assert gpu.order.count("side-gemm") == 20  # called twice: the blind try and the checked one
    assert gpu.order.count("fill:buffer") >= 3  # the marker after each call, and the priming one


def test_a_checked_call_reports_the_kernels_it_launched(monkeypatch):
    from solbench.measure import guards
    from solbench.measure.worker import kernel_names

    gpu = SimGpu()
    monkeypatch.setattr(guards, "torch", sim_torch(gpu))
    seen = []
    value, problem = guards.traced_call(honest(gpu), gpu, seen)
    assert value == "out" and problem is None
    assert seen == ["gemm"]  # the call's own kernel; not the spin before it nor the marker after
    guards.traced_call(honest(gpu), gpu, seen)
    assert kernel_names(seen) == "gemm"
    cut = kernel_names(["a" * 200, "b", "a" * 200]).split(" | ")
    assert cut[1] == "b" and cut[0].startswith("a" * 96 + "~") and len(cut[0]) == 96 + 1 + 8
    assert kernel_names(["a" * 199]) != cut[0]  # names alike in their first 96 characters stay apart


def test_the_cupti_timer_verifies_timed_outputs_with_collection_off():
    """The harness's checks between samples launch work of their own (a tolerance check of a large
    output: many kernels); the CUPTI timer turns collection off for them and on again before the
    next sample, so none of it is recorded, and every sample is still traced."""
    from solbench.measure.criteria import CIWidth
    from solbench.measure.loop import measure

    gpu = SimGpu()
    timer = _timer(gpu)
    timer.prepare = lambda launches: (setattr(timer, "_launches", launches), gpu.begin(),
                                      setattr(timer, "_turned_on", True))
    seen = []

    def verify(index, output, seconds):
        seen.append(gpu.enabled)
        for _ in range(50):  # the check's own kernels
            gpu.launch("check", 10)
        return None

    timing = measure(timer, [honest(gpu)], CIWidth(0.5, 6, 6, 10.0), warmup=1, verify=verify)
    assert len(timing.samples) == 6 and seen and not any(seen)  # collection off in every verification
    assert all(s == pytest.approx(5000e-9) for s in timing.samples)  # every sample traced: the GEMM alone
    assert not gpu.enabled  # off again once sampling ended
    assert "check" in gpu.order and not any(w.name == "check" for w in gpu.work)


def test_a_checked_call_reports_the_streams_its_work_ran_on(monkeypatch):
    from solbench.measure import guards

    gpu = SimGpu()
    monkeypatch.setattr(guards, "torch", sim_torch(gpu))
    streams: set[int] = set()
    guards.traced_call(honest(gpu), gpu, None, streams)
    assert streams == {CURRENT}  # the call's own work, on the current stream
    guards.traced_call(unjoined(gpu), gpu, None, streams)
    assert streams == {CURRENT, SIDE}


def test_the_side_stream_check_hands_back_each_kernels_name_and_launch_shape(monkeypatch):
    """The checked call's kernels, in order, with the grid each was launched with: the worker records
    both (protocol kernels, kernel_shapes), so a round whose library chose another split shows it."""
    from solbench.measure import guards

    gpu = SimGpu()
    monkeypatch.setattr(guards, "torch", sim_torch(gpu))

    def split_gemm():
        gpu.launch("gemm", 4000, shape="grid 64x4x1 block 128x1x1")
        gpu.launch("reduce", 500, shape="grid 16x1x1 block 256x1x1")
        return "out"

    kernels, shapes = [], []
    value, problem = guards.traced_call(split_gemm, gpu, kernels, set(), shapes)
    assert (value, problem) == ("out", None)
    assert kernels == ["gemm", "reduce"]
    assert shapes == ["grid 64x4x1 block 128x1x1", "grid 16x1x1 block 256x1x1"]


def unordered(gpu, kernels=4, duration=1500):
    """Work on a side stream that does not wait for the current stream (no ``wait_stream`` on it),
    joined back by the current stream: it runs while the current stream is held."""
    def call():
        end = 0
        for _ in range(kernels):
            end = gpu.launch("side-gemm", duration, stream=SIDE)
        gpu.launch("join", 10, after=end)  # the current stream waits for the side stream
        return "out"
    return call


def test_side_stream_check_sees_work_that_began_before_the_stream_reached_the_call(monkeypatch):
    """Under the cold timer such work would run during the hold and be missed by the event pair."""
    from solbench.measure import guards

    gpu = SimGpu()
    monkeypatch.setattr(guards, "torch", sim_torch(gpu))
    value, problem = guards.traced_call(unordered(gpu), gpu)
    assert value == "out" and problem is not None
    assert "before the current stream reached the call" in problem and "stream 9" in problem
    assert gpu.order.index("spin") < gpu.order.index("fill:buffer") < gpu.order.index("side-gemm")
    _, waited = guards.traced_call(unjoined(gpu), gpu)  # a side stream that waits: not early
    assert waited is not None and "before the current stream reached" not in waited


def test_cupti_timer_reports_work_that_began_before_the_call_was_reached():
    gpu = SimGpu()
    timer = _timer(gpu)
    timer._launches = [unordered(gpu)]
    gpu.begin()
    timer.sample(0)
    assert timer.stray is not None and "before the current stream reached the call" in timer.stray
    gpu2 = SimGpu()
    timer2 = _timer(gpu2)
    timer2._launches = [honest(gpu2)]
    gpu2.begin()
    timer2.sample(0)
    assert timer2.stray is None


def waits_then_unordered(gpu, wait_ns, kernels=10, duration=1500):
    """Waits ``wait_ns`` on the host, then launches its work on a side stream that does not wait for
    the current one and waits for it to end before returning: under the cold timer's gate (which holds
    the stream for up to 0.5 s) all of it runs during the hold, and the event pair sees none of it."""
    def call():
        gpu.host += wait_ns
        for _ in range(kernels):
            gpu.launch("side-gemm", duration, stream=SIDE)
        gpu.host = max(gpu.host, gpu.free[SIDE])  # the host waits for the side stream (its work is settled)
        return "out"
    return call


@pytest.mark.parametrize("wait_ms", [2, 80, 300])
def test_side_stream_check_is_not_blind_to_a_call_the_cold_timers_gate_would_hold(monkeypatch, wait_ms):
    """A call whose host side outlasted the check's longest spin (64 ms) was judged behind a spin that
    had already ended: its side-stream work began after the opener and ended before the marker, so
    nothing was seen, while the timer's gate (0.5 s) held the stream through the same call and timed
    none of that work. Every call the gate can hold must be checked behind a spin that outlasts it."""
    from solbench.measure import guards

    gpu = SimGpu()
    monkeypatch.setattr(guards, "torch", sim_torch(gpu))
    value, problem = guards.traced_call(waits_then_unordered(gpu, wait_ms * 1_000_000), gpu)
    assert value == "out"
    assert problem is not None and "before the current stream reached the call" in problem


def test_side_stream_check_grows_its_spin_fourfold_and_stops_at_the_gates_hold(monkeypatch):
    """A dry try is made again behind a spin four times longer, up to the gate's whole hold; one slower
    than that hold (which the cold timer then times unheld, host gaps included) is judged as it is. A
    spin sized on the dry try's host time instead (twice it) made a process's first call, slow once
    (lazy loading, a JIT) and fast after, wait behind a spin of up to the whole hold: on an H100 an
    o_proj run's correctness checks took 28-31 s of worker time against 19.5 s."""
    from solbench.device import timer as timers
    from solbench.measure import guards

    gpu = SimGpu()
    monkeypatch.setattr(guards, "torch", sim_torch(gpu))
    first = [True]

    def slow_once():  # 300 ms on the host the first time, then an ordinary call
        if first[0]:
            gpu.host += 300_000_000
            first[0] = False
        return gpu.launch("gemm", 1500)

    value, problem = guards.traced_call(slow_once, gpu)
    assert problem is None and gpu.order.count("spin") == 2
    assert gpu.free[CURRENT] < 300_000_000 + 10_000_000  # the retry's spin is 4 ms, not half a second
    gpu.order.clear()
    hold_ns = timers._GATE_TIMEOUT_US * 1e3
    value, problem = guards.traced_call(waits_then_unordered(gpu, int(2 * hold_ns), kernels=1), gpu)
    spins = gpu.order.count("spin")  # 1, 4, 16, 64, 256 ms, then the hold: no more
    assert value == "out" and spins == 6
