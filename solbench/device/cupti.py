"""CUPTI activity tracing: which GPU work a call launched, and when it ran (``cupti-python``).

The activity API records, for every CUDA runtime and driver API call, its host start time and a
correlation id, and for every kernel, memcpy and memset the GPU start and end times and the
correlation id of the API call that launched it (on any stream). So the GPU work one Python call
launched is found without knowing its streams (SOL-ExecBench's method)::

    t0 = host timestamp (CUPTI's clock)
    call()
    t1 = host timestamp
    synchronize the device; flush CUPTI's buffers
    launched = API records with t0 <= start <= t1      -> their correlation ids
    work     = kernel, memcpy and memset records with those ids
    span     = max(end) - min(start) over ``work``

The same records say whether work outlived the call: the harness launches a marker on the current
stream right after the call (and its end event); work of the call that ends after the marker began
ran on a stream the current stream never waited for (:func:`stray_work`).

``cupti-python`` is optional (``pip install 'solbench[cupti]'``; 13.0.x matches the CUPTI of CUDA
13.0). The records are plain :class:`Activity` values, so the selection logic is tested without a GPU.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from solbench.errors import DeviceError
from solbench.text import first_few

# Work counts as late only when it ends this long after the marker began: timestamps of work in
# stream order never invert, and a cheat's unjoined work outlasts the call by far more.
LATE_NS = 1000

# API calls that only read state (the current device, the last error, whether a stream is capturing,
# attributes): they never launch GPU work, so their records cannot change which work a call launched,
# yet they are most of the records: in one graph-launch check of o_proj's decode GEMM (two input sets),
# 334 of 400 API records (cudaGetDevice alone 213), and CUPTI's records cost ~11 µs of host time each to
# deliver and read (BENCHMARKS.md, twenty-eighth session). The tracer turns their records off by name
# (any version suffix: cudaGetDevice_v3020, cuStreamGetCaptureInfo_v2_ptsz).
QUERIES = frozenset({
    "cudaGetDevice", "cudaGetDeviceCount", "cudaGetDeviceFlags", "cudaGetDeviceProperties", "cudaGetLastError",
    "cudaPeekAtLastError", "cudaDeviceGetAttribute", "cudaPointerGetAttributes", "cudaFuncGetAttributes",
    "cudaDriverGetVersion", "cudaRuntimeGetVersion", "cudaStreamIsCapturing", "cudaStreamGetCaptureInfo",
    "cudaStreamGetId", "cudaStreamGetDevice", "cudaStreamGetFlags", "cudaStreamGetPriority",
    "cuCtxGetCurrent", "cuCtxGetDevice", "cuCtxGetId", "cuDevicePrimaryCtxGetState", "cuDeviceGet",
    "cuDeviceGetAttribute", "cuDeviceGetCount", "cuDriverGetVersion", "cuKernelGetAttribute", "cuKernelGetName",
    "cuFuncGetAttribute", "cuFuncGetName", "cuPointerGetAttribute", "cuPointerGetAttributes", "cuGetErrorName",
    "cuGetErrorString", "cuStreamIsCapturing", "cuStreamGetCaptureInfo", "cuStreamGetCtx", "cuStreamGetId",
})


def query_name(name: str) -> bool:
    """Whether a runtime or driver API callback name (``cudaGetDevice_v3020``) is one of :data:`QUERIES`."""
    return re.sub(r"(_ptsz|_v\d+)+$", "", name) in QUERIES


INSTALL_HINT = "--timer cupti needs NVIDIA's cupti-python (pip install 'solbench[cupti]', 13.0.x for CUDA 13.0)"


@dataclass(frozen=True)
class Activity:
    """One GPU activity record (kernel, memcpy or memset); times in ns on CUPTI's clock."""

    kind: str  # "kernel", "memcpy", "memset"
    start: int
    end: int
    correlation_id: int
    stream_id: int
    name: str
    # what the work was launched with: a kernel's grid, block, cluster and dynamic shared memory
    # ("grid 132x1x1 block 384x1x1 cluster 1x1x1 smem 232448"), a memcpy's or memset's bytes ("bytes 4096");
    # empty where the record has none (a replay is checked against it: replay_mismatch)
    shape: str = ""


@dataclass(frozen=True)
class ApiCall:
    """One runtime or driver API record: when the host made it and its correlation id."""

    start: int
    correlation_id: int


def launched_in(calls: Iterable[ApiCall], work: Iterable[Activity], t0: int, t1: int) -> list[Activity]:
    """The GPU work launched by API calls made between host times ``t0`` and ``t1`` (inclusive)."""
    ids = {c.correlation_id for c in calls if t0 <= c.start <= t1}
    return sorted((a for a in work if a.correlation_id in ids), key=lambda a: (a.start, a.end))


def span_ns(work: Sequence[Activity]) -> int:
    """From the first start to the last end of ``work``; raises ValueError when there is none."""
    if not work:
        raise ValueError("no GPU activity")
    return max(a.end for a in work) - min(a.start for a in work)


def stray_work(work: Sequence[Activity], marker: Sequence[Activity]) -> str | None:
    """Why some of a call's work ran after the current stream moved past the call, or None.

    ``marker`` is the work the harness launched on the current stream right after the call (and
    its end event): it begins only once the current stream has reached the end of the call. Work
    of the call that ends later than that (by more than ``LATE_NS``) ran on a stream the current
    stream never waited for:
    outside an event-timed window, and racing whatever reads the outputs next.
    """
    if not work or not marker:
        return None
    begin = min(a.start for a in marker)
    late = [a for a in work if a.end > begin + LATE_NS]
    if not late:
        return None
    return _unordered(late, work, max(a.end for a in late) - begin, "ran up to {} µs after the current stream passed "
                      "the end of the call: work on a stream the current stream does not wait for")


def early_work(work: Sequence[Activity], opener: Sequence[Activity]) -> str | None:
    """Why some of a call's work began before the current stream reached the call, or None.

    ``opener`` is the work the harness launched on the current stream right before the call, after
    the stream was held (the spin): it begins only once the hold ends. Work of the call ordered
    after the current stream begins after it; work that begins earlier (by more than ``LATE_NS``) ran
    on a stream that does not wait for the current one, so it ran while the stream was held, before
    a timed window opened, and may read the inputs before the work queued ahead of the call wrote
    them (a side stream made without ``wait_stream`` on the current one). Under the cold timer its
    time would be missed; under CUPTI the span would take in the hold.
    """
    if not work or not opener:
        return None
    begin = min(a.start for a in opener)
    early = [a for a in work if a.start < begin - LATE_NS]
    if not early:
        return None
    return _unordered(early, work, begin - min(a.start for a in early), "began up to {} µs before the current "
                      "stream reached the call: work on a stream that does not wait for the current stream")


def _unordered(offending: Sequence[Activity], work: Sequence[Activity], gap_ns: int, what: str) -> str:
    """``N of M GPU activities it launched (stream s) <what, with the gap in µs>``."""
    streams = ", ".join(map(str, sorted({a.stream_id for a in offending})))
    return f"{len(offending)} of {len(work)} GPU activities it launched (stream {streams}) " + what.format(
        f"{gap_ns / 1e3:.1f}")


def judged(calls: Iterable[ApiCall], work: Iterable[Activity], t0: int, t1: int,
           t2: int, opened: tuple[int, int] | None = None) -> tuple[list[Activity], str | None]:
    """The work of a call made between ``t0`` and ``t1`` and followed by a marker launched by ``t2``
    on the current stream; and why some of that work was stray (:func:`stray_work`: it ended after
    the marker began; :func:`early_work`: it began before the opener, a marker launched on the held
    current stream between host times ``opened``, began), or None."""
    calls, work = list(calls), list(work)
    mine = launched_in(calls, work, t0, t1)
    late = stray_work(mine, launched_in(calls, work, t1 + 1, t2))
    early = early_work(mine, launched_in(calls, work, *opened)) if opened is not None else None
    return mine, "; ".join(filter(None, (late, early))) or None


def available() -> bool:
    """Whether ``cupti-python`` can be imported here (nothing is initialized)."""
    import importlib.util

    return importlib.util.find_spec("cupti") is not None


# A worker's answer to wanted(), fixed before it runs any implementation (freeze); None: not fixed
_FROZEN: bool | None = None


def wanted() -> bool:
    """Whether this process may trace: cupti-python importable and ``SOLBENCH_NO_CUPTI=1`` not set
    (as they were when the process called :func:`freeze`, where it did)."""
    import os

    if _FROZEN is not None:
        return _FROZEN
    return os.environ.get("SOLBENCH_NO_CUPTI") != "1" and available()


def freeze() -> bool:
    """Fix this process's :func:`wanted` now: a worker calls this before it imports any implementation
    (and before its tamper snapshot, which then watches the answer). Read at every use, the switch was
    the implementation's too: one that set ``SOLBENCH_NO_CUPTI=1`` in its worker's environment (at
    import, or in set-up) turned off every CUPTI check made after it, the side-stream check of its
    checked calls and the match of a graph's replay against the launched call, and was timed launched,
    its work free to run on a side stream while the cold timer held the timed one."""
    global _FROZEN
    _FROZEN = None
    _FROZEN = wanted()
    return _FROZEN


def optional_tracer() -> Tracer | None:
    """This process's tracer, or None: cupti-python missing, ``SOLBENCH_NO_CUPTI=1``, or CUPTI
    failing to start here (a broken install must not fail a run: the checks without it remain)."""
    if not wanted():
        return None
    try:
        return tracer()
    except Exception:
        return None


def replay_mismatch(launched: Sequence[Activity], replayed: Sequence[Activity]) -> str | None:
    """Why a CUDA graph's replay did not run the work the same call ran when launched, or None.

    Both are the GPU activities (kernels by name, memcpys, memsets) of one call: once launched on a
    stream, once as the replay of the graph captured from it. A capture records the launches the call
    makes, so an honest graph replays the same kernels, as many times each. A call that behaves
    otherwise while captured (``torch.cuda.is_current_stream_capturing()``), for example one that puts
    in the graph only a copy of a result it computed while launched, shows other work here.

    Each kernel is compared with its launch shape (grid, block, cluster, dynamic shared memory), and
    each memcpy and memset with its bytes (:attr:`Activity.shape`): the same kernels launched over
    less work are other work. A call with no GPU work matches an empty replay: the caller makes sure
    that CUPTI delivered records at all (GraphLaunch's canary), and the poisoned outputs catch a
    replay that writes nothing.

    Durations are not compared: graphs are captured while the other workers of the case set up and
    check side by side on the same GPU, and on an H200 that stretched the launched o_proj GEMMs at
    16384 tokens to 2.0-15.2 ms against 0.77-0.83 ms for their replays (issue 16, twenty-sixth session).
    """
    from collections import Counter

    want, got = Counter((a.name, a.shape) for a in launched), Counter((a.name, a.shape) for a in replayed)
    if want == got:
        return None
    missing = [_described(*key) for key in sorted((want - got).elements())]
    extra = [_described(*key) for key in sorted((got - want).elements())]
    parts = []
    if missing:
        parts.append(f"not replayed: {first_few(missing, 3)}")
    if extra:
        parts.append(f"only in the replay: {first_few(extra, 3)}")
    return (f"the replay ran other GPU work than the launched call ({len(replayed)} activities against "
            f"{len(launched)}; {'; '.join(parts)})")


def shape_of(kind: str, record: Any) -> str:
    """What one CUPTI record says the work was launched with (:attr:`Activity.shape`): a kernel's
    grid, block, cluster and dynamic shared memory; a memcpy's or memset's bytes. Fields a record
    lacks are left out."""

    def dims(prefix: str) -> str | None:
        parts = [getattr(record, f"{prefix}_{axis}", None) for axis in "xyz"]
        return None if any(p is None for p in parts) else "x".join(str(int(p)) for p in parts)

    if kind == "kernel":
        fields = [(label, dims(label)) for label in ("grid", "block", "cluster")]
        smem = getattr(record, "dynamic_shared_memory", None)
        fields.append(("smem", None if smem is None else str(int(smem))))
    else:
        size = getattr(record, "bytes", None)
        fields = [("bytes", None if size is None else str(int(size)))]
    return " ".join(f"{label} {value}" for label, value in fields if value is not None)


def _described(name: str, shape: str) -> str:
    """A kernel's name (cut to 60 characters) or the work's kind, with its shape."""
    name = name if len(name) <= 60 else name[:60] + "~"
    return f"{name} ({shape})" if shape else name


class Tracer:
    """CUPTI activity collection in this process: kernels, memcpys, memsets and the API calls.

    One per process (:func:`tracer`). ``begin()`` enables collection (if not already on) and
    ``end()`` turns it off again only if that ``begin()`` turned it on, so a timer that keeps it on
    and a check that wants it briefly can share it. ``collect()`` flushes CUPTI's buffers (after
    the caller synchronized the device) and hands back every record since the last collect. The
    records of API calls that only read state (:data:`QUERIES`) are turned off with collection.
    """

    def __init__(self, module: Any) -> None:
        self._cupti = module
        kind = module.ActivityKind
        self._work_kinds = {int(kind.CONCURRENT_KERNEL): "kernel", int(kind.MEMCPY): "memcpy",
                            int(kind.MEMSET): "memset"}
        self._api_kinds = {int(kind.RUNTIME), int(kind.DRIVER)}
        self._kinds = [kind.RUNTIME, kind.DRIVER, kind.CONCURRENT_KERNEL, kind.MEMCPY, kind.MEMSET]
        self._queries = [(enable, int(cbid)) for names, enable in _query_switches(module)
                         for cbid in names if query_name(cbid.name)]
        self._layouts: dict[type, tuple[str, ...] | None] = {}  # per record type: _row_names
        self._calls: list[ApiCall] = []
        self._work: list[Activity] = []
        self.enabled = False
        module.activity_register_callbacks(self._requested, self._completed)

    @staticmethod
    def _requested() -> tuple[int, int]:
        return 8 << 20, 0  # 8 MiB buffers, no record limit

    def _completed(self, activities: list[Any]) -> None:
        for a in activities:
            row = self._row(a)
            kind = int(row.kind)
            if kind in self._api_kinds:
                self._calls.append(ApiCall(int(row.start), int(row.correlation_id)))
            elif kind in self._work_kinds:
                what = self._work_kinds[kind]
                name = str(getattr(a, "name", "") or "") if what == "kernel" else what
                self._work.append(Activity(what, int(row.start), int(row.end), int(row.correlation_id),
                                           int(getattr(row, "stream_id", 0)), name, shape_of(what, row)))

    def _row(self, record: Any) -> Any:
        """The record's fields, read at once from the numpy row that cupti-python keeps behind it
        (``_data``), or the record itself. Each of its properties reads that row through numpy's
        recarray, ~3 µs a field on the H200's host, and a kernel's record has 16 fields the tracer
        needs. A record type's row is used only once its values matched the properties on the first
        record of that type (:func:`_row_names`)."""
        cls = type(record)
        if cls not in self._layouts:
            self._layouts[cls] = _row_names(record)
        names = self._layouts[cls]
        if names is None:
            return record
        try:
            return SimpleNamespace(**dict(zip(names, record._data.tolist()[0], strict=True)))
        except Exception:
            return record

    def now(self) -> int:
        """CUPTI's host timestamp (ns), the clock of the API records."""
        return int(self._cupti.get_timestamp())

    def begin(self) -> bool:
        """Turn collection on; True if this call did (pass it to ``end``)."""
        if self.enabled:
            return False
        for k in self._kinds:
            self._cupti.activity_enable(k)
        for enable, cbid in self._queries:  # their records off (QUERIES); where CUPTI refuses, they stay
            with contextlib.suppress(Exception):
                enable(cbid, 0)
        self.enabled = True
        return True

    def end(self, turned_on: bool) -> None:
        """Turn collection off if ``begin`` turned it on."""
        if turned_on and self.enabled:
            self.collect()
            for k in self._kinds:
                self._cupti.activity_disable(k)
            self.enabled = False

    def collect(self) -> tuple[list[ApiCall], list[Activity]]:
        """Every record since the last collect (synchronize the device first)."""
        self._cupti.activity_flush_all(1)
        calls, work = self._calls, self._work
        self._calls, self._work = [], []
        return calls, work


# the record fields the tracer reads (Tracer._completed, shape_of)
_READ = ("kind", "start", "end", "correlation_id", "stream_id", "bytes", "dynamic_shared_memory",
         *(f"{dim}_{axis}" for dim in ("grid", "block", "cluster") for axis in "xyz"))


def _row_names(record: Any) -> tuple[str, ...] | None:
    """The names, in the properties' spelling, of the fields of the numpy row behind a cupti-python
    record (``correlationId`` or ``correlation_id`` -> ``correlation_id``), if the row holds every
    field the tracer reads that the record has, and each field's value equals the record's property
    of that name; None otherwise (the record is then read by its properties)."""
    try:  # anything unexpected (inside CUPTI's buffer callback): the properties are read
        data = record._data
        names = tuple(re.sub(r"(?<!^)(?=[A-Z])", "_", n).lower() for n in data.dtype.names)
        fields = dict(zip(names, data.tolist()[0], strict=True))
        if len(fields) != len(names) or any(n not in fields for n in _READ if hasattr(record, n)):
            return None
        if any(n in fields and getattr(record, n, None) != fields[n] for n in _READ):
            return None
    except Exception:
        return None
    return names


def _query_switches(module: Any) -> list[tuple[Any, Any]]:
    """Each API domain's callback ids (an enum) with the function that turns its records on or off;
    none where this cupti-python lacks them."""
    pairs = [("runtime_api_trace_cbid", "activity_enable_runtime_api"),
             ("driver_api_trace_cbid", "activity_enable_driver_api")]
    return [(getattr(module, ids), getattr(module, enable)) for ids, enable in pairs
            if hasattr(module, ids) and hasattr(module, enable)]


_TRACER: Tracer | None = None


def tracer() -> Tracer:
    """This process's tracer; DeviceError (with how to install it) when cupti-python is missing."""
    global _TRACER
    if _TRACER is None:
        try:
            from cupti import cupti as module
        except Exception as exc:  # not installed, or its CUPTI library failed to load
            raise DeviceError(f"{INSTALL_HINT}: {exc}") from None
        _TRACER = Tracer(module)
    return _TRACER
