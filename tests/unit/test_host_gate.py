"""The cold timer's gate (solbench.device.timer.HostGate) on the simulated GPU of test_cupti_sim: the
stream is held from the gate until the host releases it (or the gate times out), so a call whose
launches take the host longer than any spin still runs back to back, and a GPU let go early is
seen and the sample taken again."""

import pytest

from solbench.device import timer as timers
from tests.unit.test_cupti_sim import CURRENT, HOST_STEP, SimGpu, many_kernels, sim_torch


class SimGate:
    """Holds the simulated stream: work enqueued behind it is placed after the gate's timeout; the
    release moves the stream's cursor back to the host's clock where that comes first."""

    def __init__(self, gpu, timeout_ns):
        self.gpu, self.timeout_ns = gpu, timeout_ns
        self.opens_at = None
        self.held = self.released = 0

    def hold(self):
        gpu = self.gpu
        gpu.host += HOST_STEP
        gpu.order.append("gate")
        self.opens_at = max(gpu.host, gpu.free[CURRENT]) + self.timeout_ns
        gpu.free[CURRENT] = self.opens_at
        self.held += 1

    def release(self):
        gpu = self.gpu
        self.released += 1
        if gpu.host < self.opens_at:  # released before the timeout: everything queued starts sooner
            gpu.free[CURRENT] -= self.opens_at - gpu.host


def _gated(gpu, timeout_ns, call):
    timer = timers.CudaColdTimer(sim_torch(gpu), 50 << 20, clean=True)
    timer.gate = SimGate(gpu, timeout_ns)
    timer._launches = [call]
    return timer


def test_the_gate_holds_the_stream_for_as_long_as_the_host_takes():
    gpu = SimGpu()
    timer = _gated(gpu, timeout_ns=10**9, call=many_kernels(gpu, kernels=2000))  # 4 ms of host launches
    seconds = timer.sample(0)
    assert seconds == pytest.approx(2000 * 300e-9)  # back to back: no host gap in the window
    assert timer.redone == 0 and timer.spin_us == 0.0  # no spin to size or to grow
    assert gpu.order[:3] == ["gate", "fill:buffer", "amax"] and timer.gate.released == 1
    assert timer.protocol()["hold"] == "gate"


def test_a_gate_that_timed_out_before_the_call_was_enqueued_is_a_dry_sample():
    gpu = SimGpu()
    timer = _gated(gpu, timeout_ns=10_000, call=many_kernels(gpu, kernels=20))  # 40 µs of launches, 10 µs gate
    seconds = timer.sample(0)
    assert timer.redone == timers._MAX_REDO + 1 and timer.gate.held == timers._MAX_REDO + 1
    assert timer.gate.released == timer.gate.held  # every hold released
    assert timer.unheld and timer.protocol()["hold"] == "none"  # then taken with nothing held
    assert seconds == pytest.approx(20 * HOST_STEP * 1e-9, rel=0.05)  # the host's launch time is in it


def synchronizing(gpu):
    """A call that waits for the device inside (a cuDNN handle made and destroyed per call): under
    the gate, the wait lasts until the gate times out."""
    def call():
        gpu.launch("softmax", 5000)
        gpu.host = max(gpu.host, gpu.free[CURRENT]) + 100_000  # synchronize, then 0.1 ms more host work
        return "out"
    return call


def test_a_call_that_synchronizes_is_timed_with_nothing_held():
    gpu = SimGpu()
    timer = _gated(gpu, timeout_ns=500_000_000, call=synchronizing(gpu))
    seconds = timer.sample(0)
    assert timer.gate.held == timers._MAX_REDO + 1 and timer.unheld
    assert gpu.host > (timers._MAX_REDO + 1) * 500_000_000  # each held try waited out the gate
    # nothing held: the kernel and the host's work after the wait, not the gate's 0.5 s
    assert 5000e-9 < seconds < 200_000e-9
    held = timer.gate.held
    timer.sample(0)
    assert timer.gate.held == held  # later samples: no hold, no retry


def test_the_gate_is_released_when_the_call_raises():
    gpu = SimGpu()

    def broken():
        gpu.launch("partial", 100)
        raise RuntimeError("the implementation failed")

    timer = _gated(gpu, timeout_ns=10**9, call=broken)
    with pytest.raises(RuntimeError):
        timer.sample(0)
    assert timer.gate.held == timer.gate.released == 1


def test_without_cupy_the_timer_spins(monkeypatch):
    def no_gate(*args):
        raise ImportError("no cupy")

    monkeypatch.setattr(timers.HostGate, "__init__", no_gate)
    monkeypatch.setattr(timers, "_GATES", {})
    timer = timers.CudaColdTimer(sim_torch(SimGpu()), 50 << 20, clean=True)
    assert timer.gate is None and timer.protocol()["hold"] == "spin"
