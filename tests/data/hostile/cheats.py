"""Implementations that try to look fast or correct without doing the work. Each must be caught."""

import builtins
import os
import sys
import threading
import time
import weakref

import torch

import solbench.measure.tensors
from solbench.errors import DeviceError

_CACHE = {}


def cached_by_nothing(x, w, residual):
    if "out" not in _CACHE:
        _CACHE["out"] = torch.addmm(residual, x, w.T)
    return _CACHE["out"]


def cached_by_pointer(x, w, residual):
    key = (x.data_ptr(), w.data_ptr(), residual.data_ptr())
    if key not in _CACHE:
        _CACHE[key] = torch.addmm(residual, x, w.T)
    return _CACHE[key]


def cached_by_contents(x, w, residual):
    key = hash((x.sum().item(), w.sum().item(), residual.sum().item()))
    if key not in _CACHE:
        _CACHE[key] = torch.addmm(residual, x, w.T)
    return _CACHE[key]


def caches_under_capture(x, w, residual):
    """Launched, it computes; while a CUDA graph captures it, it records only a copy of the result it
    computed last for these inputs, so a replay returns right values in the time of a copy."""
    key = ("captured", x.data_ptr(), w.data_ptr(), residual.data_ptr())
    if torch.cuda.is_current_stream_capturing() and key in _CACHE:
        return _CACHE[key].clone()
    _CACHE[key] = torch.addmm(residual, x, w.T)
    return _CACHE[key]


def cached_copy_by_pointer(x, w, residual):
    key = ("copy", x.data_ptr())
    if key not in _CACHE:
        _CACHE[key] = torch.addmm(residual, x, w.T)
    return _CACHE[key].clone()


def returns_input(x, w, residual):
    residual += x @ w.T
    return residual


def returns_view_of_input(x, w, residual):
    return residual.view(residual.shape)


class LazyTensor(torch.Tensor):
    """A subclass that could compute on demand (the timer would see nothing)."""


def returns_subclass(x, w, residual):
    return torch.addmm(residual, x, w.T).as_subclass(LazyTensor)


def returns_meta(x, w, residual):
    return torch.empty(residual.shape, dtype=residual.dtype, device="meta")


def work_in_thread(x, w, residual):
    out = torch.full_like(residual, float("nan"))

    def work():
        # Outlives the call by design: without the wait, a main thread descheduled on a loaded machine let
        # the whole computation finish before the call returned (then nothing was left in a thread).
        time.sleep(0.2)
        torch.addmm(residual, x, w.T, out=out)

    threading.Thread(target=work).start()
    return out


_NEVER = threading.Event()


def leaves_a_thread(x, w, residual):
    # Right and synchronous; every call leaves a thread behind that touches nothing and never ends
    # (SOL-ExecBench's thread-injection sample, which sleeps 10 s). Not a cheat: its checks must
    # neither fail it nor wait on each such thread in turn.
    threading.Thread(target=_NEVER.wait, daemon=True).start()
    return torch.addmm(residual, x, w.T)


def mutates_input(x, w, residual):
    out = torch.addmm(residual, x, w.T)
    x.mul_(0.5)
    return out


def lazy_detach(x, w, residual):
    """An unwritten output whose instance ``detach`` (what the checks copy it through) computes the
    answer when a check reads it: the timed call only allocates."""
    out = torch.empty_like(residual)
    out.detach = lambda: torch.addmm(residual, x, w.T)
    return out


def mutates_input_hidden(x, w, residual):
    """Mutates an input and shadows its ``view`` (what the bit-for-bit input check reads it through)
    with one onto the untouched values."""
    saved = x.clone()
    out = torch.addmm(residual, x, w.T)
    x.mul_(0.5)
    x.view = saved.view
    return out


def partial_output(x, w, residual):
    out = torch.empty_like(residual)
    half = residual.shape[0] // 2
    out[:half] = torch.addmm(residual[:half], x[:half], w.T)
    return out


def low_precision(x, w, residual):
    return (x.half().float() @ w.half().float().T + residual).half().float()


_CALLS = [0]


def honest_first_calls_only(x, w, residual):
    _CALLS[0] += 1
    if _CALLS[0] <= 5:
        return torch.addmm(residual, x, w.T)
    return torch.empty_like(residual)


def _always_right(*args, **kwargs):
    from solbench.results.model import Correctness

    return Correctness(True, 0.0, 0.0, 1.0, 1.0)


def patches_comparison(x, w, residual):
    solbench.measure.tensors.compare = _always_right
    return torch.zeros_like(residual)


def patches_clock(x, w, residual):
    import time

    real = _CACHE.setdefault("clock", time.perf_counter_ns)
    time.perf_counter_ns = lambda: real() // 1000
    return torch.addmm(residual, x, w.T)


def patches_event_timer(x, w, residual):
    _CACHE.setdefault("elapsed", torch.cuda.Event.elapsed_time)
    torch.cuda.Event.elapsed_time = lambda self, end: 1e-6
    return torch.addmm(residual, x, w.T)


def side_stream(x, w, residual):
    """GPU: the work runs on a side stream that the current stream never waits for."""
    side = _CACHE.setdefault("stream", torch.cuda.Stream())
    out = torch.empty_like(residual)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(50):
            torch.addmm(residual, x, w.T, out=out)
    return out


def waits_out_the_check(x, w, residual):
    """GPU: waits 80 ms on the host, then runs its work on a side stream that does not wait for the
    current stream and waits for that work before returning (its outputs are settled), and pads the
    current stream with a 20 µs spin. The cold timer's gate holds the timed stream for up to 0.5 s, so
    all of the work runs during the hold and the window times the pad. The side-stream check, whose
    longest spin was 64 ms, saw the work begin after its spin had ended."""
    time.sleep(0.08)
    return _unordered_then_pad("late_stream", x, w, residual)


def _unordered_then_pad(stream: str, x, w, residual):
    """The work on a side stream that does not wait for the current one, waited for on the host (settled
    outputs), then a ~20 µs spin on the current stream: above T_SOL, so not INVALID either."""
    side = _CACHE.setdefault(stream, torch.cuda.Stream())
    out = torch.empty_like(residual)
    with torch.cuda.stream(side):
        for _ in range(50):
            torch.addmm(residual, x, w.T, out=out)
    side.synchronize()
    torch.cuda._sleep(40_000)
    return out


def turn_off_cupti(x, w, residual):
    """Set-up that turns the CUPTI checks off in its own worker, as the run's SOLBENCH_NO_CUPTI=1 would."""
    os.environ["SOLBENCH_NO_CUPTI"] = "1"
    return {"x": x, "w": w, "residual": residual}


def hides_work_with_cupti_off(x, w, residual):
    """GPU, after turn_off_cupti: its work on a side stream that does not wait for the current stream,
    waited for before returning (settled outputs), and a 20 µs pad on the current stream. With the
    CUPTI checks off only the settle check remained, and the cold timer timed the pad."""
    return _unordered_then_pad("quiet_stream", x, w, residual)


_SEEN: set[int] = set()


def drifts_on_unseen_inputs(x, w, residual):
    """Exact on the first two input sets it is given (the checked and timed ones), 0.1% off on any
    later one: outside the tolerance on unseen inputs, but by a numerical amount, not a stale result
    (it is incorrect, not a cheat)."""
    out = torch.addmm(residual, x, w.T)
    if len(_SEEN) < 2:
        _SEEN.add(x.data_ptr())
    return out if x.data_ptr() in _SEEN else out * 1.001


_VERSIONED: dict = {}


def cached_by_version(x, w, residual):
    """Cached by the tensors themselves and their version counters (which an in-place write moves):
    no data read, a copy returned."""
    key = tuple((id(t), t._version) for t in (x, w, residual))
    hit = _VERSIONED.get(key)
    if hit is not None and all(ref() is t for ref, t in zip(hit[0], (x, w, residual), strict=True)):
        return hit[1].clone()
    out = torch.addmm(residual, x, w.T)
    _VERSIONED[key] = ([weakref.ref(t) for t in (x, w, residual)], out)
    return out.clone()


def skipped_when_unseen(x, w, residual):
    """Cached by pointer (a copy, as cached_copy_by_pointer); once timed, says it needs another GPU
    instead of facing the unseen inputs: skipped is not a failure."""
    if any(f.f_code.co_name == "_loop" for f in _frames()):
        _CACHE["timed"] = True
    elif "timed" in _CACHE:
        raise DeviceError("needs an sm_100 GPU")
    key = ("skip", x.data_ptr())
    if key not in _CACHE:
        _CACHE[key] = torch.addmm(residual, x, w.T)
    return _CACHE[key].clone()


def _frames():
    frame = sys._getframe(1)
    while frame is not None:
        yield frame
        frame = frame.f_back
def _from_checks() -> bool:
    """Whether the caller's caller is solbench's comparison or checks (where a patch lies)."""
    return sys._getframe(2).f_globals.get("__name__", "").startswith("solbench.measure")


def patches_stack(x, w, residual):
    """torch.stack gathers the comparison's counts (and bits_equal's): zeros there pass anything."""
    if "stack" not in _CACHE:
        real = _CACHE["stack"] = torch.stack
        torch.stack = lambda ts, *a, **k: torch.zeros_like(real(ts, *a, **k)) if _from_checks() else real(ts, *a, **k)
    return torch.zeros_like(residual)


def patches_tensor_operator(x, w, residual):
    """``rtol * |ref|`` is Tensor.__rmul__: made huge in the comparison, no element is outside it."""
    if "rmul" not in _CACHE:
        real = _CACHE["rmul"] = torch.Tensor.__rmul__
        torch.Tensor.__rmul__ = lambda self, other: real(self, other) + 1e30 if _from_checks() else real(self, other)
    return torch.zeros_like(residual)


def patches_builtin(x, w, residual):
    """builtins.int reads the comparison's counts of bad elements: 0 in solbench's code."""
    if "int" not in _CACHE:
        real = _CACHE["int"] = builtins.int

        class _Int(real):
            def __new__(cls, value=0, *args):
                return real(0) if _from_checks() else real(value, *args)

        builtins.int = _Int
    return torch.zeros_like(residual)


def shadows_builtin_in_module(x, w, residual):
    """A new global ``int`` in the comparison's module shadows the builtin there (no name replaced)."""
    solbench.measure.tensors.int = lambda value=0: 0
    return torch.zeros_like(residual)


_WHILE = {"setups": 0, "real": None, "set0": None}


def counts_its_setups(x, w, residual):
    _WHILE["setups"] += 1
    return {"x": x, "w": w, "residual": residual}


def patches_comparison_for_a_while(x, w, residual):
    """Honest until its fourth set-up (a later round's, in one process: the first round sets up three times, once
    an input set and once more for the fresh inputs after timing). Then wrong and fast on the input set of that
    round's one checked call, honest on the other: the comparison is patched by the checked call and restored by
    the next call, and the zeros of every later call on that set hold the checked call's bits, so their
    verification reuses the patched verdict; the tamper snapshot at the task's end sees nothing."""
    if _WHILE["setups"] < 4:
        return torch.addmm(residual, x, w.T)
    if _WHILE["set0"] is None:
        _WHILE["set0"] = x.data_ptr()
        _WHILE["real"] = solbench.measure.tensors.compare
        solbench.measure.tensors.compare = _always_right
    elif _WHILE["real"] is not None:
        solbench.measure.tensors.compare, _WHILE["real"] = _WHILE["real"], None
    if x.data_ptr() != _WHILE["set0"]:
        return torch.addmm(residual, x, w.T)
    return torch.zeros_like(residual)


_TIMED = {"setups": 0, "calls": 0, "real": None}


def counts_setups_for_timing(x, w, residual):
    _TIMED["setups"] += 1
    return {"x": x, "w": w, "residual": residual}


def patches_comparison_while_timed(x, w, residual):
    """Right on its three checked calls (input sets 0, 1, 0); then zeros, under a patched comparison, on every
    timed call; the first call after timing (on the fresh inputs, a third set-up: one an input set before it)
    takes the patch off and is right again, so nothing is left for the snapshot at the task's end."""
    _TIMED["calls"] += 1
    if _TIMED["setups"] > 2:
        if _TIMED["real"] is not None:
            solbench.measure.tensors.compare, _TIMED["real"] = _TIMED["real"], None
        return torch.addmm(residual, x, w.T)
    if _TIMED["calls"] <= 3:
        return torch.addmm(residual, x, w.T)
    if _TIMED["real"] is None:
        _TIMED["real"] = solbench.measure.tensors.compare
        solbench.measure.tensors.compare = _always_right
    return torch.zeros_like(residual)


_FIRST_SHAPE = []


def cheats_in_its_first_case(x, w, residual):
    """Returns its input (a cheat) on every call of the first case its process measures, and is honest on any
    other case: measured again in that process, a later case would read ok."""
    if not _FIRST_SHAPE:
        _FIRST_SHAPE.append(tuple(x.shape))
    if tuple(x.shape) == _FIRST_SHAPE[0]:
        return residual
    return torch.addmm(residual, x, w.T)


def plainly_wrong(x, w, residual):
    """Zeros: incorrect under the harness's comparison, ok under one an earlier implementation left patched."""
    return torch.zeros_like(residual)
