"""Anti-cheat checks: ways an implementation can look fast or correct without doing the work.

Each check returns ``None`` when all is well, or a one-line reason the run reports as
``reward_hack``. They run around the untimed correctness calls and a sample of the timed calls,
never inside a timed window.

    check_outputs        outputs are plain ``torch.Tensor``s (no subclass, no meta tensor) whose
                         storage aliases no input and no output of an earlier call still alive
    InputGuard           inputs are bit-for-bit unchanged after a call
    TamperGuard          the timers, ``time``, ``torch.cuda.Event`` and solbench's own measuring
                         and checking functions are the objects they were before user code ran
    settled_outputs      outputs do not change after the call returned (a thread or an unjoined
                         side stream still writing them)
    traced_call          with cupti-python: every GPU activity the call launched (any stream) ended
                         before the current stream passed the end of the call (an unjoined side
                         stream is seen however fast or slow it is, unlike a host-timed drain), and
                         began only once the current stream reached the call (a side stream that
                         does not wait for it runs while the timer holds the stream, unseen by the
                         event pair)

What they cannot do: code running in the same process can, with enough effort, defeat any
in-process check. The worker process boundary protects the run itself and the other
implementations; these checks catch the cheats that are easy to write by accident or on purpose
(the classes listed in the README), and each has a test that keeps it caught.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
import time
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch

from solbench.device import cupti as _cupti  # noqa: F401  (imported before the tamper snapshot: watched)
from solbench.device.timer import gate_cycles
from solbench.text import first_few


def _span(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    start = storage.data_ptr()
    return start, start + storage.nbytes()


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1] and a[0] != a[1] and b[0] != b[1]


def check_outputs(outputs: Sequence[Any], names: Sequence[str], inputs: Mapping[str, Any],
                  earlier: Iterable[torch.Tensor] = ()) -> str | None:
    """Why these outputs are not honest fresh results, or None.

    Views of one buffer the call allocated itself (e.g. q, k, v split from one GEMM output) are
    fine; sharing storage with an input, a set-up tensor or an earlier call's output is not.
    """
    return aliased_outputs(outputs, names, inputs, earlier)  # which checks them plain first


def shadowed(t: torch.Tensor) -> list[str]:
    """Attributes set on the tensor instance that hide ``torch.Tensor``'s own (an instance ``detach``,
    ``clone`` or ``untyped_storage`` would answer the checks in the implementation's stead: an
    unwritten output whose ``detach`` computes the result when a check reads it), and keys that are
    not plain strings; read from the instance dict, not through attribute lookup."""
    return [k if type(k) is str else repr(k) for k in vars(t)
            if type(k) is not str or hasattr(torch.Tensor, k)]


def _shadowed_reason(what: str, t: torch.Tensor) -> str | None:
    """Why ``what`` (``"output 'y'"``) cannot be checked: methods shadowed on it (:func:`shadowed`); or None."""
    hidden = shadowed(t)
    if not hidden:
        return None
    return (f"{what} has torch.Tensor attribute(s) shadowed on the instance ({', '.join(hidden[:4])}): the "
            "checks would call the implementation's code")


def plain_outputs(outputs: Sequence[Any], names: Sequence[str]) -> str | None:
    """Why an output is not a plain ``torch.Tensor`` with data (subclass, meta tensor, a tensor
    method shadowed on the instance), or None."""
    for name, out in zip(names, outputs, strict=True):
        if type(out) is not torch.Tensor:
            return f"output {name!r} is a {type(out).__module__}.{type(out).__qualname__}, not a plain torch.Tensor"
        hidden = _shadowed_reason(f"output {name!r}", out)
        if hidden is not None:
            return hidden
        if out.is_meta:
            return f"output {name!r} is a meta tensor (no data)"
    return None


def aliased_outputs(outputs: Sequence[torch.Tensor], names: Sequence[str], inputs: Mapping[str, Any],
                    earlier: Iterable[torch.Tensor] = ()) -> str | None:
    """Why a (plain) output shares storage with an input or an earlier call's output, or None.
    The outputs are checked to be plain again: a thread the call left could have shadowed a method
    since."""
    problem = plain_outputs(outputs, names)
    if problem is not None:
        return problem
    spans = [(_span(o), n) for n, o in zip(names, outputs, strict=True)]
    for key, value in inputs.items():
        if isinstance(value, torch.Tensor) and type(value) is torch.Tensor:
            for span, name in spans:
                if _overlaps(span, _span(value)):
                    return f"output {name!r} shares storage with input {key!r} (returned an input or a view of it)"
    for old in earlier:
        for span, name in spans:
            if _overlaps(span, _span(old)):
                return f"output {name!r} reuses the storage of an earlier call's output (a cached result)"
    return None


class InputGuard:
    """Remembers inputs bit for bit and says which one a call changed."""

    def __init__(self, inputs: Mapping[str, Any]) -> None:
        self._saved = {k: v.detach().clone() for k, v in inputs.items()
                       if isinstance(v, torch.Tensor)}

    def changed(self, inputs: Mapping[str, Any]) -> str | None:
        """The first input whose bits differ from the saved copy, as a reason; or None."""
        keys = list(self._saved)
        for key in keys:
            value = inputs[key]
            hidden = _shadowed_reason(f"input {key!r}", value) if type(value) is torch.Tensor else None
            if hidden is not None:
                return hidden
        equal = bits_equal([(inputs[key], self._saved[key]) for key in keys])
        for key, same in zip(keys, equal, strict=True):
            if not same:
                return f"input {key!r} was modified in place (inputs must be left unchanged)"
        return None


_VIEWS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bits_equal(pairs: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> list[bool]:
    """For each pair, whether the two tensors hold the same shape, dtype and bits, read from the
    device at once: one wait for the device for all of them, not one a pair (a verified timed
    sample compares its outputs and every input so)."""
    same: list[bool | None] = []
    pending: list[torch.Tensor] = []
    for a, b in pairs:
        if a.shape != b.shape or a.dtype != b.dtype:
            same.append(False)
        elif a.numel() == 0:
            same.append(True)
        elif a.element_size() in _VIEWS and a.is_contiguous() and b.is_contiguous() and a.device == b.device:
            view = _VIEWS[a.element_size()]
            pending.append(torch.ne(a.view(view), b.view(view)).any())
            same.append(None)
        else:
            same.append(bool(torch.equal(a, b)))  # NaN != NaN: an all-NaN input would read as changed
    if pending:
        differ = iter(torch.stack(pending).tolist())
        same = [not next(differ) if s is None else s for s in same]
    return [bool(s) for s in same]


# Objects the harness relies on: replacing any of them (or a function's code) from user code
# is tampering. Modules are imported before the snapshot and walked for every name they bind
# (their own functions and classes, and what they imported: ``worker.measure``, ``worker.tensors``,
# ``worker.tolerance_for`` re-pointed is as much tampering as a patched function); their classes
# for their methods.
_WATCHED_MODULES = (
    "solbench.measure.loop", "solbench.measure.tensors", "solbench.measure.guards",
    "solbench.measure.criteria", "solbench.measure.runner", "solbench.measure.worker",
    "solbench.measure.wire", "solbench.measure.pool", "solbench.device.timer", "solbench.device.cupti",
    "solbench.analysis.stats", "solbench.analysis.sol", "solbench.results.codec", "solbench.results.model",
)
# Module globals the harness itself sets while it runs (never a function it calls to measure or check)
_VOLATILE_GLOBALS = frozenset({"TREE", "FALLBACK_DIR", "_TRACER"})
_WATCHED_ATTRS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("time", ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns",
              "process_time", "sleep")),
    ("os", ("urandom", "write", "getpid")),
    ("random", ("_urandom", "SystemRandom", "Random")),
    ("json", ("dumps", "loads")),
    # not torch.manual_seed and the like: torch.compile wraps some of torch's functions itself
    ("torch", ("equal", "isfinite", "allclose", "abs", "empty", "full", "randn", "randint", "Generator", "stack",
               "zeros", "ones", "where", "fmax", "ne", "amax", "no_grad")),
    ("torch.linalg", ("vector_norm",)),
    ("torch.cuda", ("Event", "synchronize", "_sleep", "current_stream", "Stream", "stream",
                    "graph", "CUDAGraph")),
)
_WATCHED_CLASSES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("torch.cuda", "Event", ("record", "synchronize", "elapsed_time", "query", "wait")),
    ("torch.cuda", "CUDAGraph", ("replay", "capture_begin", "capture_end")),
    ("random", "SystemRandom", ("random",)),
    ("multiprocessing.connection", "Connection", ("send_bytes", "_send_bytes", "_send", "recv", "recv_bytes")),
    ("json", "JSONEncoder", ("encode", "iterencode")),
)
# Instance attributes a watched object (a timer) may rebind itself while it runs
_VOLATILE_ATTRS = frozenset({"agree_dry", "last_output", "stray"})
# Whose every attribute is watched, found as attribute lookup finds it (through the class's bases): the
# checks use tensor methods and operators throughout (``rtol * |ref|`` is ``Tensor.__rmul__``), and call
# builtins (``int`` of a count, ``all`` of a comparison) by names a module global can shadow
_WATCHED_ALL = (("torch", "Tensor"), ("builtins", None))


def _identity(obj: Any) -> tuple[int, int]:
    code = getattr(obj, "__code__", None)
    return id(obj), id(code) if code is not None else 0


def _watched(value: Any) -> bool:
    return callable(value) or isinstance(value, types.ModuleType)


class TamperGuard:
    """A snapshot of the objects the harness relies on; ``tampered()`` names any that changed.

    Taken when the guard is made, after importing every watched module (a module imported
    later would have no entry). ``watch(label, obj)`` adds an object's own attributes (a
    timer's bound clock): rebinding one, or shadowing a method of its class with an instance
    attribute, is tampering too.
    """

    def __init__(self) -> None:
        for name in _WATCHED_MODULES:
            importlib.import_module(name)
        self._objects: dict[str, Any] = {}
        self._snapshot = self._take()

    def watch(self, label: str, obj: Any) -> None:
        """Watch ``obj``'s instance attributes from now on (see the class docstring)."""
        self._objects[label] = obj
        self._snapshot.update(_instance(label, obj))

    def _take(self) -> dict[str, tuple[int, int]]:
        snap: dict[str, tuple[int, int]] = {}
        for mod_name, attrs in _WATCHED_ATTRS:
            mod = sys.modules.get(mod_name)
            for attr in attrs:
                if mod is not None and hasattr(mod, attr):
                    snap[f"{mod_name}.{attr}"] = _identity(getattr(mod, attr))
        for mod_name, cls_name, attrs in _WATCHED_CLASSES:
            cls = getattr(sys.modules.get(mod_name), cls_name, None)
            for attr in attrs:
                if cls is not None and hasattr(cls, attr):
                    snap[f"{mod_name}.{cls_name}.{attr}"] = _identity(getattr(cls, attr))
        for mod_name in _WATCHED_MODULES:
            mod = sys.modules.get(mod_name)
            for attr, value in list(vars(mod).items()) if mod is not None else ():
                if attr.startswith("__") or attr in _VOLATILE_GLOBALS:
                    continue
                snap[f"{mod_name}.{attr}"] = _identity(value)
                if isinstance(value, type) and value.__module__ == mod_name:
                    for meth, fn in vars(value).items():
                        if callable(fn) or isinstance(fn, staticmethod | classmethod | property):
                            snap[f"{mod_name}.{attr}.{meth}"] = _identity(fn)
        for mod_name, cls_name in _WATCHED_ALL:
            owner = sys.modules[mod_name] if cls_name is None else getattr(sys.modules[mod_name], cls_name)
            found = _static_attrs(owner)
            for attr in dir(owner):
                if not (cls_name is None and attr.startswith("_")):
                    label = ".".join(n for n in (mod_name, cls_name, attr) if n)
                    snap[label] = _identity(found.get(attr))
        for label, obj in self._objects.items():
            snap.update(_instance(label, obj))
        return snap

    def changed(self) -> list[str]:
        """The watched objects replaced since the snapshot, by name."""
        now = self._take()
        changed = sorted(k for k, v in self._snapshot.items() if now.get(k) != v)
        # a name a watched module did not have: it shadows a builtin (``int``) for that module's code
        changed += sorted(k for k in now if k not in self._snapshot and (k.startswith("instance ")
                                                                       or k.rpartition(".")[0] in _WATCHED_MODULES))
        return changed

    def tampered(self, after: str = "") -> str | None:
        """Which watched objects were replaced since the snapshot, as a reason (saying it was seen right
        ``after`` a step, where given); or None."""
        changed = self.changed()
        if not changed:
            return None
        return (f"replaced what the harness measures or checks with: {first_few(changed, 4)}"
                + (f" (seen right after {after})" if after else ""))


_MRO_OF = type.__dict__["__mro__"].__get__  # a class's MRO and own namespace, past any override on the class
_NAMESPACE_OF = type.__dict__["__dict__"].__get__


def _static_attrs(owner: Any) -> dict[str, Any]:
    """Each attribute of a class or module as ``inspect.getattr_static`` finds it, all in one pass: a class's MRO
    (nearest first) before its metaclass's; a module's own namespace. The same answers for every name of
    ``torch.Tensor`` and ``builtins`` in 0.21 ms against 3.65 ms name by name, of a snapshot's 2.3 ms (5.8 ms
    before) on a 2-core CPU host (``bench/tamper_walk.py``), which matters now that a task takes three."""
    if not isinstance(owner, type):
        return dict(vars(owner))
    found: dict[str, Any] = {}
    for klass in (*reversed(_MRO_OF(type(owner))), *reversed(_MRO_OF(owner))):
        found.update(_NAMESPACE_OF(klass))
    return found


def _instance(label: str, obj: Any) -> dict[str, tuple[int, int]]:
    """The callable (or module) instance attributes of ``obj``, and any that shadows a method."""
    out = {}
    cls = type(obj)
    for attr, value in vars(obj).items():
        if attr in _VOLATILE_ATTRS:
            continue
        if _watched(value) or callable(getattr(cls, attr, None)):
            out[f"instance {label}.{attr}"] = _identity(value)
    return out


def settled_outputs(outputs: Sequence[torch.Tensor], device: str, threads_before: set[threading.Thread],
                    join_s: float = 0.5) -> tuple[list[torch.Tensor], str | None]:
    """The outputs as they were when the call returned, and a reason if they changed afterwards.

    The outputs are copied at once (on CUDA: on the current stream, with no device-wide
    synchronization, so work on a side stream the call did not join races with the copy). Then
    threads started since ``threads_before`` are given ``join_s`` in all (one deadline, not one
    per thread: a call that leaves a sleeping thread behind on every call costs a check at most
    ``join_s``), the device is synchronized, and the copy must still equal the outputs.

    Callers judge correctness on the copy, not on the live outputs: a thread that finishes the
    output after the wait, just before the comparison reads it, is then wrong, not right. So the
    wait decides only how late work is named (``reward_hack`` here, ``incorrect`` after it), never
    whether it passes; SOL-ExecBench's thread-injection sample (a thread left asleep on every call)
    cost 60 s a case with a 2 s wait per thread, on an H200 (results/h200/issue19/session9/).
    """
    snapshot = [o.detach().clone() for o in outputs]
    deadline = time.monotonic() + join_s
    for thread in set(threading.enumerate()) - threads_before:
        thread.join(max(deadline - time.monotonic(), 0.0))
    if device == "cuda":
        torch.cuda.synchronize()
    if not all(bits_equal([(before, after.detach()) for before, after in zip(snapshot, outputs, strict=True)])):
        return snapshot, ("outputs changed after the call returned: work went on in another thread or "
                          "on an unjoined stream, outside the timed window")
    return snapshot, None


def stream_tracer(device: str) -> Any:
    """This process's CUPTI tracer for the side-stream check, or None: not CUDA, cupti-python not
    installed, ``SOLBENCH_NO_CUPTI=1`` set, or CUPTI failing to start here."""
    from solbench.device import cupti

    return cupti.optional_tracer() if device == "cuda" else None


def warm_tracer(device: str) -> None:
    """Load CUPTI and collect once now, at a worker's start (side by side with the other workers),
    not inside the first task's first checked call: importing cupti-python and its first collection
    took about 0.3 s a process on an H200 under the profiler (results/h200/issue16/session5/
    oproj-inprocess-profile.txt), paid once per worker and round, one worker after another.
    Nothing here can fail the worker: a CUPTI that misbehaves is met again, and handled, by the
    checks."""
    trace = stream_tracer(device)
    if trace is not None:
        with contextlib.suppress(Exception):
            traced_call(lambda: None, trace)


def traced_call(call: Callable[[], Any], trace: Any, kernels: list[str] | None = None,
                streams: set[int] | None = None, shapes: list[str] | None = None) -> tuple[Any, str | None]:
    """Call once; with a CUPTI ``trace``, also say whether its GPU work outlived it on a side stream.

    ::

        spin (~1 ms) on the current stream       # as in a timed sample: the host runs ahead of the GPU
        opened; opener on the current stream    # begins when the spin ends
        t0; value = call(); t1; marker on the current stream; t2; synchronize
        the work launched in [t0, t1] must have ended before the marker (launched in (t1, t2]) began,
        and must not have begun before the opener (launched in [opened, t0)) began

    Without the spin the check is blind: on an H200 the hostile side-stream call (50 GEMMs on a
    stream the current one never waits for) took longer on the host to launch than on the GPU to
    run, so its work was done before the marker ran, while in a cold-timed window (spin first) it
    ran 600 µs past the end event. A spin shorter than the host's launch time is as blind (the
    same call took 1.35 ms to enqueue against a 1 ms spin): when the spin has already ended once the
    call returns, the call is made again behind a spin four times longer, up to as long as the cold
    timer's gate holds a stream (:func:`solbench.device.timer.gate_cycles`).
    A call the check is still blind to after that spin outlasts the gate too, so the timer cannot
    hold the stream through it either (it times the call unheld, host gaps included). A shorter
    ceiling (three retries, 64 ms, before) left calls that wait on the host between 64 ms and the
    gate's 0.5 s unchecked: side-stream work launched after such a wait began after the opener and
    ended before the marker, while the gate held the timed stream through all of it.

    The spin stays here, where the timed loop holds the stream with the gate
    (:class:`solbench.device.timer.HostGate`): with the gate here too, an o_proj run's checks took
    91 s instead of 12 s on an H200 (about 170 ms more per task, every round), for a cause not yet
    found (results/h200/issue16/session6/).

    The check is also blind when CUPTI, just turned on, delivers nothing: the marker's own record
    must be among those collected. When it is missing, CUPTI is primed (the marker launched until
    its record arrives) and the call made again; a trace that stays silent checks nothing. Checking
    the marker in the collected records, instead of priming before every call, saves a device
    synchronization and a buffer flush per call (3.4 ms a call on the H200).

    Returns (what the call returned, a reason or None). Without a tracer: (value, None). With a
    ``kernels`` list, the names of the kernels the call launched are appended to it, in order, and
    with a ``shapes`` list their launch shapes (:attr:`solbench.device.cupti.Activity.shape`), in the
    same order; with a ``streams`` set, the streams its work (kernels, copies, sets) ran on are added to it.
    """
    if trace is None:
        return call(), None
    from solbench.device.cupti import judged, launched_in

    marker = torch.empty(1, dtype=torch.int32, device="cuda")
    opener = torch.empty(1, dtype=torch.int32, device="cuda")
    try:
        turned_on = trace.begin()
    except Exception:  # CUPTI refused here (another profiler attached, say): the settle check remains
        return call(), None
    spun = torch.cuda.Event()
    cycles, primed = _CHECK_SPIN_CYCLES, not turned_on
    ceiling: int | None = None  # the longest spin (the gate's hold), read when first needed
    try:
        while True:
            torch.cuda._sleep(cycles)  # the GPU busy while the host enqueues the whole call
            spun.record()
            opened = trace.now()
            opener.zero_()  # begins when the spin ends: work ordered after the current stream begins later
            t0 = trace.now()
            value = call()  # its exceptions are the implementation's, and propagate
            t1 = trace.now()
            dry = spun.query()  # the spin ended before the call was enqueued: the check was blind
            marker.zero_()
            t2 = trace.now()
            torch.cuda.synchronize()
            try:
                calls, work = trace.collect()
            except Exception:
                return value, None
            if not launched_in(calls, work, t1 + 1, t2):  # the records of this call did not arrive
                if primed:
                    return value, None
                try:
                    primed = _primed(trace, marker)
                except Exception:
                    return value, None
                if not primed:  # CUPTI delivers nothing here: the settle check remains
                    return value, None
                continue
            if not dry:
                break
            if ceiling is None:
                ceiling = gate_cycles(torch)
            if cycles >= ceiling:  # its host side outlasts any hold of the cold timer: judged as it is
                break
            # the call took longer on the host than the spin ran: again, behind a spin four times longer. Not
            # one sized on this try's host time: a process's first call (lazy loading, a JIT) can take
            # hundreds of ms once and microseconds after, and a spin sized on it cost every fresh worker
            # up to the whole hold (an o_proj run's checks: 19.5 -> 28-31 s of worker time on an H100)
            cycles = min(ceiling, 4 * cycles)
    finally:
        with contextlib.suppress(Exception):
            trace.end(turned_on)
    mine, problem = judged(calls, work, t0, t1, t2, opened=(opened, t0 - 1))
    if kernels is not None:
        kernels.extend(a.name for a in mine if a.kind == "kernel")
    if shapes is not None:
        shapes.extend(a.shape for a in mine if a.kind == "kernel")
    if streams is not None:
        streams.update(a.stream_id for a in mine)
    return value, problem


# ~1 ms at 2 GHz (longer at a lower clock: the safe side). A call whose host launch outlasts it
# (50 cuBLAS GEMMs on a side stream took 1.35 ms to enqueue on an H200, 827 API calls) would run
# to its end before the marker: the spin then grows 4x per try, up to as long as the cold timer's gate
# holds a stream (timer.gate_cycles), so that any call whose timed samples the gate can hold is checked
# behind a spin that outlasts it.
_CHECK_SPIN_CYCLES = 2_000_000


def _primed(trace: Any, marker: torch.Tensor, tries: int = 4) -> bool:
    """Whether CUPTI, just turned on, delivers records: launch the marker until its record arrives
    (a guard: a trace that records nothing would pass every call)."""
    from solbench.device.cupti import launched_in

    for _ in range(tries):
        t0 = trace.now()
        marker.zero_()
        t1 = trace.now()
        torch.cuda.synchronize()
        calls, work = trace.collect()
        if launched_in(calls, work, t0, t1):
            return True
    return False
