"""Implementations that attack the harness itself, as an author who has read solbench's source would:
they reach the parent through the pipe, or forge the numbers the worker reports. Each must be caught
(reward_hack or incorrect), and honest implementations in the same run must stay ok.

Every one computes the right answer, so only the attack can be what is caught.
"""

import ctypes
import gc
import json
import os
import struct
import sys
import time
from collections.abc import Mapping
from multiprocessing.connection import Connection

import torch

import solbench.device.timer
import solbench.measure.worker

FACTOR = 700.0  # how much faster the forged numbers claim to be
_DONE = {}


def _right(x, w, residual):
    return torch.addmm(residual, x, w.T)


def _connections():
    return [o for o in gc.get_objects() if isinstance(o, Connection) and not o.closed and o.writable]


class _Payload:
    """Unpickled, this runs code: in the parent it would set a flag the tests look for."""

    def __reduce__(self):
        return (exec, ("import sys; sys.solbench_hostile_payload_ran = True",))


def sends_pickle(x, w, residual):
    """Sends a pickle whose loading runs code, on every pipe it can find (once)."""
    if "pickle" not in _DONE:
        _DONE["pickle"] = True
        for conn in _connections():
            conn.send(("result", _Payload(), False))
    return _right(x, w, residual)


def patches_timer_sample(x, w, residual):
    """Replaces the timer classes' ``sample`` with one that reports FACTOR times less."""
    for cls in (solbench.device.timer.CpuTimer, solbench.device.timer.CudaColdTimer):
        if "sample" + cls.__name__ not in _DONE:
            real = cls.sample
            _DONE["sample" + cls.__name__] = real
            cls.sample = lambda self, i, real=real: real(self, i) / FACTOR
    return _right(x, w, residual)


def patches_timer_clock(x, w, residual):
    """Rebinds the clock a CPU timer instance bound at creation (no class or module changes)."""
    for obj in gc.get_objects():
        if isinstance(obj, solbench.device.timer.CpuTimer) and "_clock" in vars(obj):
            real = _DONE.setdefault("clock", obj._clock)
            obj._clock = lambda real=real: int(real() / FACTOR)
    return _right(x, w, residual)


def rebinds_worker_measure(x, w, residual):
    """Re-points the worker's name ``measure`` at a wrapper that scales the timing."""
    real = _DONE.setdefault("measure", solbench.measure.worker.measure)

    def fast(*args, **kwargs):
        from dataclasses import replace

        timing = real(*args, **kwargs)
        samples = tuple(s / FACTOR for s in timing.samples)
        return replace(timing, samples=samples, median=timing.median / FACTOR, ci_low=timing.ci_low / FACTOR,
                       ci_high=timing.ci_high / FACTOR)

    solbench.measure.worker.measure = fast
    return _right(x, w, residual)


class _AlwaysRight:
    """A stand-in for solbench.measure.tensors whose compare passes anything."""

    def __getattr__(self, name):
        import solbench.measure.tensors as real

        if name == "compare":
            from solbench.results.model import Correctness

            return lambda *a, **k: Correctness(True, 0.0, 0.0, 1.0, 1.0)
        return getattr(real, name)


def rebinds_tensors_module(x, w, residual):
    """Re-points the worker's name ``tensors`` at a module whose compare passes anything; does no work."""
    solbench.measure.worker.tensors = _AlwaysRight()
    return torch.zeros_like(residual)


def scales_samples_in_frame(x, w, residual):
    """Finds the measuring loop's ``samples`` list in the call stack and scales what is in it."""
    frame = sys._getframe(1)
    while frame is not None:
        samples = frame.f_locals.get("samples")
        if frame.f_code.co_name == "_loop" and isinstance(samples, list):
            samples[:] = [s / FACTOR if s > 1e-9 else s for s in samples]
        frame = frame.f_back
    return _right(x, w, residual)


def rewrites_sent_samples(x, w, residual):
    """Wraps the pipe's ``send_bytes`` to divide every sample it sends (stream and result alike)."""
    if "send" not in _DONE:
        real = _DONE["send"] = Connection.send_bytes

        def send_bytes(self, buf, *args):
            try:
                msg = json.loads(bytes(buf))
                if msg.get("kind") == "value":
                    msg["s"] /= FACTOR
                elif msg.get("kind") == "result" and msg["result"].get("timing"):
                    timing = msg["result"]["timing"]
                    for key in ("median", "ci_low", "ci_high"):
                        timing[key] /= FACTOR
                    timing["samples"] = [s / FACTOR for s in timing["samples"]]
                buf = json.dumps(msg).encode()
            except (ValueError, TypeError, KeyError):
                pass
            return real(self, buf, *args)

        Connection.send_bytes = send_bytes
    return _right(x, w, residual)


def _frame_local_set(frame, name, value):
    frame.f_locals[name] = value
    ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))


def rewrites_window_start(x, w, residual):
    """Works for 0.2 s, then moves the CPU timer's window start (a local of its caller's frame) to
    now: the sample reads microseconds. No object is replaced; only the parent's clock sees it."""
    time.sleep(0.2)
    out = _right(x, w, residual)
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "sample" and "t0" in frame.f_code.co_varnames:
            _frame_local_set(frame, "t0", time.perf_counter_ns())
            break
        frame = frame.f_back
    return out


def rewrites_window_start_widening_the_bound(x, w, residual):
    """rewrites_window_start, with a result that says its timer replays 1000 calls a sample behind the
    longest spin, launch and flush: keys slipped into the worker's protocol through a harness function
    no snapshot watches (cuBLASLt's record of the plans a task chose). The parent's wall-time bound
    took the worker's word for every one of them."""
    import solbench.impls.cublaslt as lt

    if "plans" not in _DONE:
        real = _DONE["plans"] = lt.plans_since

        def plans_since(start):
            count, chosen = real(start)
            return count, {**chosen, "graph_calls": 1000, "spin_us": 6400.0, "host_launch_us": 6400.0,
                           "l2_flush_bytes": 1}

        lt.plans_since = plans_since
    return rewrites_window_start(x, w, residual)


def predicts_rng(x, w, residual):
    """Copies the measuring loop's random generator to predict which timed calls get verified, and
    skips the work on the others. Where the generator cannot be copied it assumes no check."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_name != "_loop":
        frame = frame.f_back
    if frame is None or "samples" not in frame.f_locals:  # untimed (checked) or warm-up: do the work
        return _right(x, w, residual)
    rng, i = frame.f_locals["rng"], len(frame.f_locals["samples"])
    try:
        twin = type(rng)()
        twin.setstate(rng.getstate())
        checked = twin.random() < 4 / (i + 1)
    except (NotImplementedError, AttributeError, TypeError):
        checked = False
    return _right(x, w, residual) if checked else torch.empty_like(residual)


def shadows_rng_draw(x, w, residual):
    """Sets ``random`` on the measuring loop's generator instance (no class, module or function is
    replaced, nothing is written into a frame) so that no timed call is verified after the first four
    (drawn at a rate of 1), and skips the work on every timed call but those and the last, which it
    knows where --min-samples equals --max-samples."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_name != "_loop":
        frame = frame.f_back
    if frame is None or "samples" not in frame.f_locals:  # untimed (checked) or warm-up: do the work
        return _right(x, w, residual)
    found = frame.f_locals
    rng, i, last = found["rng"], len(found["samples"]), found["criterion"].max_samples - 1
    if "random" not in vars(rng):
        rng.random = lambda: 0.999999
    return _right(x, w, residual) if i < 4 or i >= last else torch.zeros_like(residual)


class _LazyOutputs(Mapping):
    """Computes the output when it is looked up: after the timer's window."""

    def __init__(self, args):
        self._args = args

    def __getitem__(self, key):
        return _right(*self._args)

    def __iter__(self):
        return iter(["out"])

    def __len__(self):
        return 1


def returns_lazy_mapping(x, w, residual):
    return _LazyOutputs((x, w, residual))


def returns_generator(x, w, residual):
    return (_right(x, w, residual) for _ in range(1))


def shadows_gpu_timer_sample(x, w, residual):
    """GPU: shadows the cold timer instance's ``sample`` with one that reports FACTOR times less."""
    for obj in gc.get_objects():
        if isinstance(obj, solbench.device.timer.CudaColdTimer) and "sample" not in vars(obj):
            obj.sample = lambda i, real=obj.sample: real(i) / FACTOR
    return _right(x, w, residual)


def rerecords_start_event(x, w, residual):
    """GPU: works for ~200 ms on the GPU, then records the cold timer's start event again after its
    work, so the timed window holds nothing. No object is replaced: only the parent's clock sees it."""
    torch.cuda._sleep(400_000_000)  # ~200 ms at 2 GHz: well past the harness allowance of ~40 ms per sample
    out = _right(x, w, residual)
    for obj in gc.get_objects():
        if isinstance(obj, solbench.device.timer.CudaColdTimer):
            obj._start.record()
    return out


def _pipe_fd():
    """The worker's end of its pipe to the parent, as an implementation that read solbench's source finds it."""
    frame = sys._getframe()
    while frame.f_code.co_name != "serve":  # solbench.measure.pool.serve(conn, ...)
        frame = frame.f_back
    return frame.f_locals["conn"].fileno()


def floods_its_pipe(x, w, residual):
    """Keeps its worker's pipe full of well-formed progress messages, forever: the parent reads each
    as it would a long task's progress, so only a deadline that holds against messages ends it."""
    fd = _pipe_fd()
    msg = json.dumps({"kind": "progress", "event": "sample", "data": {"n": 1}}).encode()
    block = (struct.pack("!i", len(msg)) + msg) * 4096  # framed as Connection.send_bytes frames it
    while True:
        os.write(fd, block)


def sends_half_a_message(x, w, residual):
    """Writes its worker's pipe a length header and the first byte of the message it announces, then
    sleeps: a parent that reads a message whole, whenever its first bytes are there, waits forever."""
    os.write(_pipe_fd(), struct.pack("!i", 100) + b"{")
    time.sleep(3600)
