"""The only reader and writer of result JSON.

Files carry ``schema_version``. A newer file is refused; an older one is migrated step by step
(one ``_migrate_N_to_M`` per step: 1 -> 2 marks every case's cost ``analytic``, the only kind
version 1 knew). Reading checks
every field against the record definitions (:mod:`solbench.results.codec`), then the numbers no
statistic can use (a time outside [1e-12 s, 1e6 s], a peak not positive, ...: :func:`_check_numbers`);
a file that is not UTF-8, not JSON, nested too deeply, too large, of the wrong shape or holding such
a number is one ResultsFormatError line naming the field's path (``cases[0].impls[1].timing.median``).

Writing is finite JSON (no bare NaN/Infinity) and atomic: a temporary file in the same folder,
fsync, then a rename. A new file is claimed exclusively (a hard link, which fails if the name
exists), so two runs never share a file and a file this process did not write is never replaced
unless ``force=True``; later saves of a file this process wrote replace it. A run in progress is
its record without cases, plus a journal beside it (``PATH.journal``) each measured case is
appended to (:func:`append_cases`); :func:`load` replays it, and the final save writes the whole
run and removes it. Default names carry microseconds and a random suffix.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import functools
import json
import math
import os
import re
import secrets
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from solbench.errors import ResultsFormatError, ResultsWriteError
from solbench.results.codec import DecodeError, decode, encode
from solbench.results.model import (
    MAX_RUN_SD,
    SCHEMA_VERSION,
    Calibration,
    CaseResult,
    ImplResult,
    RunResult,
    RunSpread,
)

MAX_FILE_BYTES = 256 << 20  # a result file of 2,000 samples per case and implementation is ~1 MiB
def _migrate_1_to_2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 added ``cost.source`` ("analytic" or "traced"), ``source`` and ``peak_policy`` of a
    case: every version-1 cost was analytic, every case native."""
    out = {**data, "schema_version": 2}
    cases = data.get("cases")
    if isinstance(cases, list):
        out["cases"] = [{**c, "cost": {**c["cost"], "source": "analytic"}}
                        if isinstance(c, dict) and isinstance(c.get("cost"), dict) else c for c in cases]
    return out


_MIGRATIONS: dict[int, Any] = {1: _migrate_1_to_2}  # version N -> function(dict) -> dict of version N + 1
_WRITTEN: set[Path] = set()  # files this process created: later saves may replace them


def to_dict(run: RunResult, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-ready dict of a run (SI units; non-finite floats as "NaN", "Infinity", "-Infinity").

    Derived values are written beside the record for readers of the JSON and ignored when it is
    read back (the decoder skips unknown keys; they are recomputed from the record): each case's
    ``cost.flops``, each timing's ``n``, and ``extra``'s top-level keys (e.g. ``suite_summary``).
    """
    data = dataclasses.asdict(run)
    for key in extra or {}:
        if key in data:
            raise ValueError(f"derived key {key!r} would replace the record's own field")
    data.update(extra or {})
    for case, case_obj in zip(data["cases"], run.cases, strict=True):
        case["cost"]["flops"] = case_obj.cost.flops
        for impl in case["impls"]:
            if impl["timing"] is not None:
                impl["timing"]["n"] = len(impl["timing"]["samples"])
    return encode(data)  # type: ignore[no-any-return]


def dumps(run: RunResult, extra: Mapping[str, Any] | None = None) -> str:
    """The run as JSON text (finite JSON: every number is a JSON number); ``extra``: see :func:`to_dict`."""
    return json.dumps(to_dict(run, extra), indent=1, allow_nan=False)


def save(run: RunResult, path: Path, *, force: bool = False, extra: Mapping[str, Any] | None = None) -> Path:
    """Write a run atomically; creates parent folders.

    An existing file is replaced only if this process wrote it (an earlier save of the same run)
    or ``force`` is true; otherwise ResultsWriteError. Any failure to write is a ResultsWriteError.
    """
    path = Path(path)
    return _write_atomic(path, dumps(run, extra), replace=force or path.absolute() in _WRITTEN)


def save_new(run: RunResult, results_dir: Path, name: str | None = None, *,
             extra: Mapping[str, Any] | None = None) -> Path:
    """Write a run under a fresh name (:func:`default_path`) that no other file has; returns it."""
    text = dumps(run, extra)
    for _ in range(16):
        path = default_path(run, results_dir, name)
        try:
            return _write_atomic(path, text, replace=False)
        except ResultsWriteError as exc:
            if not isinstance(exc.__cause__, _Taken):
                raise
    raise ResultsWriteError(f"{results_dir}: no free result file name after 16 tries")


def a_stream(path: Path) -> bool:
    """Whether ``path`` leads, through its symbolic links, into ``/proc`` or ``/dev/fd``: a standard
    stream (``/dev/stdout``) or another open file descriptor. With stdout sent to a file it reads as
    a regular file, and an atomic save would rename a file over the link itself (``/dev/stdout``)."""
    hop = Path(path).absolute()
    for _ in range(40):  # the kernel's own limit on links followed
        if hop.parts[1:2] == ("proc",) or hop.parts[1:3] == ("dev", "fd"):
            return True
        if not hop.is_symlink():
            return False
        hop = (hop.parent / os.readlink(hop)).absolute()
    return False


def not_a_file(path: Path) -> str | None:
    """Why an atomic write must not replace ``path`` (it would rename a file over a stream's link, a
    device or a pipe), or None where it may: a regular file, or nothing there yet."""
    if a_stream(path):
        return "a standard stream or open file descriptor, not a file"
    if path.exists() and not path.is_file():
        return "not a regular file (a device or pipe)"
    return None


def check_writable(path: Path, *, is_file: bool = False, force: bool = False) -> None:
    """ResultsWriteError unless results can be written at ``path``: a folder (created if missing),
    or with ``is_file`` a file (which must not exist unless ``force``). Call before measuring."""
    path = Path(path)
    folder = path.parent if is_file else path
    if is_file and path.is_dir():
        raise ResultsWriteError(f"{path}: is a directory, not a result file")
    if is_file and path.is_symlink() and not path.exists():  # the save would fail after measuring
        raise ResultsWriteError(f"{path}: a symbolic link to nothing ({os.readlink(path)}); give a real path")
    why = not_a_file(path) if is_file else None
    if why:
        raise ResultsWriteError(f"{path}: {why}; a run is saved as a file: name one"
                                + (" (--json prints it)" if a_stream(path) else ""))
    if is_file and path.exists() and not force:
        raise ResultsWriteError(f"{path}: exists; not overwriting it (pass --force to replace it)")
    above = next((f for f in (folder, *folder.parents) if f.exists() or f.is_symlink()), None)
    if above is not None and not above.is_dir():  # mkdir would say only "File exists"
        raise ResultsWriteError(f"{path}: cannot write results there: {above} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".solbench-check-", dir=folder)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise ResultsWriteError(f"{folder}: cannot write results there: {exc.strerror or exc}") from None


@functools.cache
def _umask() -> int:
    """This process's umask (read once, by setting it and setting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _write_atomic(path: Path, text: str | bytes, *, replace: bool = True) -> Path:
    """Temporary file in the same folder, fsync, then rename: readers see the old or the new file.

    With ``replace`` false the file must not exist yet: it is claimed with a hard link (atomic,
    fails if the name is taken) or, where links are not supported, an exclusive create.
    """
    if a_stream(path):  # never rename a file over /dev/stdout (see a_stream)
        raise ResultsWriteError(f"cannot write {path}: a standard stream or open file descriptor, not a file")
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, 0o666 & ~_umask())  # as open() would make it (mkstemp's 0600 hid results from CI uploaders)
        with (os.fdopen(fd, "wb") if isinstance(text, bytes) else os.fdopen(fd, "w", encoding="utf-8")) as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            _claim(tmp, path)
    except _Taken as exc:
        raise ResultsWriteError(f"{path}: exists; not overwriting it (pass --force to replace it)") from exc
    except OSError as exc:
        raise ResultsWriteError(f"cannot write {path}: {exc.strerror or exc}") from exc
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    _WRITTEN.add(path.absolute())
    return path


def write_text(path: Path, text: str | bytes, *, replace: bool = True) -> Path:
    """Any of solbench's records and reports (a tuning log, a tuned-configuration file, JUnit, a CSV,
    a PNG as bytes) written atomically, as a run is; ``replace`` false: ResultsWriteError if ``path``
    exists."""
    return _write_atomic(path, text, replace=replace)


class _Taken(Exception):
    """The name a new result file was to get is taken."""


def _claim(tmp: str, path: Path) -> None:
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise _Taken(path) from None
    except OSError:  # a file system without hard links
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            raise _Taken(path) from None
        os.replace(tmp, path)


JOURNAL = ".journal"  # PATH.journal: the cases of the incomplete run saved at PATH, one JSON line each


def journal_path(path: Path) -> Path:
    """Where the cases of an incomplete run saved at ``path`` are appended as they come."""
    path = Path(path)
    return path.with_name(path.name + JOURNAL)


def append_cases(path: Path, run: RunResult, cases: Sequence[CaseResult]) -> None:
    """Append ``cases`` of the incomplete ``run`` saved at ``path`` to its journal, one JSON line each,
    with the run's harness record so far; flushed and fsynced, so a killed run loses nothing written.

    A run saved after every case pays for its own size only once this way, not at every case (a
    suite's multi-MB file rewritten case after case is quadratic). :func:`load` replays the journal
    of an incomplete run: the last line of a case wins; a torn last line is ignored.

    A write that fails part way (a full disk) is cut back off the journal: the next append would
    follow the torn line, and a torn line before others makes the whole run unreadable.
    """
    lines = "".join(json.dumps(encode({"run": run.created, "case": dataclasses.asdict(c), "harness": run.harness}),
                               allow_nan=False) + "\n" for c in cases)
    try:
        with journal_path(path).open("ab", buffering=0) as f:
            end = f.seek(0, os.SEEK_END)
            try:
                left = memoryview(lines.encode("utf-8"))
                while left:
                    left = left[f.write(left):]
                os.fsync(f.fileno())
            except OSError:
                with contextlib.suppress(OSError):
                    f.truncate(end)
                raise
    except OSError as exc:
        raise ResultsWriteError(f"cannot write {journal_path(path)}: {exc.strerror or exc}") from exc


def drop_journal(path: Path) -> None:
    """Remove the journal of ``path`` (its run is complete, or a new run takes the name)."""
    journal_path(path).unlink(missing_ok=True)


def _replayed(data: Any, path: Path) -> Any:
    """An incomplete run's record with the cases of its journal (see :func:`append_cases`)."""
    journal = journal_path(path)
    if not (isinstance(data, dict) and data.get("complete") is False and journal.is_file()):
        return data
    try:
        with journal.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ResultsFormatError(f"{journal}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ResultsFormatError(f"{journal}: larger than the {MAX_FILE_BYTES} bytes a journal may have")
    lines = raw.split(b"\n")
    if not isinstance(data.get("cases", []), list):
        return data  # decoding names the field (cases: expected a list)
    # a case without a string id is kept where it is, for decoding to name its field
    cases: dict[Any, Any] = {_case_key(c, k): c for k, c in enumerate(data.get("cases") or [])}
    harness = data.get("harness")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            if n >= len(lines) - 1:  # the last line, torn by a kill mid-write
                break
            raise ResultsFormatError(f"{journal}:{n}: not a journal line") from None
        if not (isinstance(entry, dict) and isinstance(entry.get("case"), dict)):
            raise ResultsFormatError(f"{journal}:{n}: not a journal line")
        if not isinstance(entry["case"].get("case_id"), str):
            raise ResultsFormatError(f"{journal}:{n}: not a journal line (its case has no case_id string)")
        if entry.get("run") != data.get("created"):
            continue  # left by an earlier run under the same name
        cases[entry["case"].get("case_id")] = entry["case"]
        harness = entry.get("harness", harness)
    return {**data, "cases": list(cases.values()), "harness": harness if harness is not None else {}}


def _case_key(case: Any, index: int) -> Any:
    """The key a journal line replaces a recorded case under: its id where that is a string; else its
    place in the record (a hand-edited id, a list or an object, cannot key a dict)."""
    key = case.get("case_id") if isinstance(case, dict) else None
    return key if isinstance(key, str) else ("record", index)


def read_json(path: Path, what: str = "result file") -> Any:
    """Parsed JSON of a file; every problem with the file itself is one ResultsFormatError line.

    Bare NaN/Infinity literals (written by solbench before 0.2) are still read. A gzip-compressed
    file (``gzip run.json``: a tenth of the size, for results kept in a repository) is read as its
    contents, held to the same size limit once uncompressed.
    """
    path = Path(path)
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)  # bounded: a device file or a huge file is not read whole
    except FileNotFoundError:
        raise ResultsFormatError(f"{path}: no such {what}") from None
    except OSError as exc:
        raise ResultsFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if raw[:2] == GZIP_MAGIC:
        raw = _gunzipped(raw, path)
    if len(raw) > MAX_FILE_BYTES:
        raise ResultsFormatError(f"{path}: larger than the {MAX_FILE_BYTES} bytes a {what} may have")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ResultsFormatError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsFormatError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise ResultsFormatError(f"{path}: not a {what}: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise ResultsFormatError(f"{path}: not valid JSON: {str(exc).split(';')[0]}") from None


GZIP_MAGIC = b"\x1f\x8b"


def _gunzipped(raw: bytes, path: Path) -> bytes:
    """The contents of a gzip file, at most MAX_FILE_BYTES + 1 of them (a small file that inflates
    without bound is cut there, and the caller's size check then refuses it)."""
    import zlib

    inflate = zlib.decompressobj(wbits=31)  # 31: a gzip header and trailer
    try:
        out = inflate.decompress(raw, MAX_FILE_BYTES + 1)
    except zlib.error as exc:
        raise ResultsFormatError(f"{path}: a gzip file that does not inflate: {exc}") from None
    if len(out) <= MAX_FILE_BYTES and not inflate.eof:
        raise ResultsFormatError(f"{path}: a gzip file cut short")
    return out


def load(path: Path) -> RunResult:
    """Read a run (an incomplete one with the cases its journal holds); a malformed or newer file is a
    ResultsFormatError, and so is another of solbench's records (a spread, a calibration), said as such."""
    data = read_json(path)
    other = other_record(data)
    if other is not None:  # not "malformed result: environment: required field missing"
        raise ResultsFormatError(f"{path}: {other}, not a run; give a run's result file")
    return from_dict(_replayed(data, Path(path)), str(path))


TUNING_LOG = "a tuning log (solbench tune)"  # what other_record calls one (tune -o replaces it)
# the JSON documents gate, ab, compare and spread print (--json), as a user keeps them (a CI job's verdict)
_VERDICTS = {"gate": "a gate verdict (solbench gate or ab --json)", "comparison": "a comparison (solbench compare "
             "--json)", "spread": "a spread (solbench spread --json)"}


def other_record(data: Any) -> str | None:
    """Which of solbench's other records parsed JSON is (tuned configurations, a tuning log, a profile, a
    calibration, a spread record, a verdict a command printed with --json), in words; None for a run or
    anything else."""
    if not isinstance(data, dict) or is_run_data(data):
        return None
    keys = set(data)
    fmt = str(data.get("format", ""))
    if fmt.startswith("solbench-tuned/"):
        return "tuned configurations"
    if fmt.startswith("solbench-tune/"):
        return TUNING_LOG
    if fmt.startswith("solbench-profile/"):
        return "a profile (solbench profile)"
    if {"spec_id", "bandwidth", "tensor_peaks", "vector_peaks"} <= keys:
        return "a calibration (solbench calibrate's measured ceilings)"
    if {"spec_id", "run_sd", "runs"} <= keys:
        return "a spread record (solbench spread --save)"
    if data.get("kind") in _VERDICTS and "version" in keys:
        return _VERDICTS[data["kind"]]
    return None


def from_dict(data: Any, origin: str = "<result>") -> RunResult:
    """Rebuild a RunResult from its dict, migrating older schema versions and checking every field."""
    data = _before_workers(_migrated(data, origin, "result"))
    try:
        run: RunResult = decode(RunResult, data)
    except DecodeError as exc:
        raise ResultsFormatError(f"{origin}: malformed result: {_one_line(exc)}") from None
    _check_numbers(run, origin)
    return _own_t_sols(run)


def _before_workers(data: dict[str, Any]) -> dict[str, Any]:
    """A run saved before implementations ran in worker processes records no ``protocol.isolation``; it
    was measured in this process, so it reads as "in-process", not as the "worker" of later runs."""
    protocol = data.get("protocol")
    if not isinstance(protocol, dict) or "isolation" in protocol:
        return data
    return {**data, "protocol": {**protocol, "isolation": "in-process"}}


def _own_t_sols(run: RunResult) -> RunResult:
    """A score saved before ``Score.t_sol`` was recorded, against its own T_SOL (an FP8 row scored at the
    FP8 peak), gets that T_SOL back: SOL x T, where SOL = T_SOL / T disagrees with the case's T_SOL (by
    more than 1e-6). Without it every report printed the case's T_SOL beside the row's own SOL (o_proj
    fp8 at 2048 tokens: T_SOL 69.5 us, time 129 us, SOL 0.27)."""
    def fixed(case: CaseResult, r: ImplResult) -> ImplResult:
        s, t = r.score, r.timing
        if (s is None or s.t_sol is not None or t is None or not 0 < case.t_sol < math.inf
                or not 0 < s.sol < math.inf or not 0 < t.median < math.inf):
            return r
        own = s.sol * t.median
        if abs(own - case.t_sol) <= 1e-6 * max(own, case.t_sol):
            return r
        return dataclasses.replace(r, score=dataclasses.replace(s, t_sol=own))

    cases = tuple(dataclasses.replace(c, impls=tuple(fixed(c, r) for r in c.impls)) for c in run.cases)
    return run if cases == run.cases else dataclasses.replace(run, cases=cases)


MIN_TIME, MAX_TIME = 1e-12, 1e6  # seconds: a recorded time outside these is a damaged file, not a measurement


def _check_numbers(run: RunResult, origin: str) -> None:
    """Refuse numbers that decode but that no statistic or report can use: a time (sample, median)
    outside [MIN_TIME, MAX_TIME] or not finite, a CI bound negative or not finite (an interval over two
    rounds that differ a lot is honestly wider than any time: t with 1 degree of freedom is 12.7), an
    "ok" implementation of a measured run (not a dry run) without a timing or with a score that is not
    finite, a peak that is not positive and finite, a T_SOL or cost that is negative or not finite,
    negative rounds, a recorded gate threshold outside (0, 1]."""
    def refuse(path: str, problem: str) -> NoReturn:
        raise ResultsFormatError(_one_line(f"{origin}: {path}: {problem}"))

    if run.protocol.rounds < 0:
        refuse("protocol.rounds", f"must be at least 0, got {run.protocol.rounds}")
    for workload, tau in run.gate_thresholds.items():
        if not 0.0 < tau <= 1.0:
            refuse(f"gate_thresholds.{workload}", f"must be a fraction above 0 and at most 1 (100%), got {tau!r}")
    measured = run.protocol.timer != "none"  # a dry run's cases have no timings
    for c, case in enumerate(run.cases):
        for name in ("tensor_flops", "vector_flops", "bandwidth", "link_bandwidth"):
            peak = getattr(case.peaks, name)
            if peak is not None and not 0.0 < peak < math.inf:
                refuse(f"cases[{c}].peaks.{name}", f"must be a positive finite number, got {peak!r}")
        amounts = {f"cost.{name}": getattr(case.cost, name) for name in ("tensor_flops", "vector_flops", "fused_bytes",
                   "unfused_bytes", "collective_bytes", "bus_bytes", "conv_flops")}
        for name, value in {"t_sol": case.t_sol, **amounts}.items():
            if not 0.0 <= value < math.inf:  # shown as "nan" or "inf" in every table otherwise
                refuse(f"cases[{c}].{name}", f"must be a finite number, at least 0, got {value!r}")
        for i, impl in enumerate(case.impls):
            where, t = f"cases[{c}].impls[{i}].timing", impl.timing
            if impl.status != "ok":  # kept as measured (an INVALID one may be 0); no statistic reads it
                continue
            for f in dataclasses.fields(impl.score) if impl.score is not None else ():
                value = getattr(impl.score, f.name)
                if isinstance(value, float) and not math.isfinite(value):  # printed as "nanx", "inf !"
                    refuse(f"cases[{c}].impls[{i}].score.{f.name}", f"must be a finite number, got {value!r}")
            if t is None:
                if measured:
                    refuse(where, f"is null, but implementation {impl.name!r} is ok in a measured run")
                continue
            values = (t.median, t.ci_low, t.ci_high, *t.samples)
            if min(values) >= MIN_TIME and max(values) <= MAX_TIME and math.isfinite(sum(values)):
                continue  # the common case, in C loops (a NaN anywhere makes the sum NaN)
            for key, value in (("ci_low", t.ci_low), ("ci_high", t.ci_high)):
                if not 0.0 <= value < math.inf:  # NaN fails every comparison
                    refuse(f"{where}.{key}", f"{value!r} s is not a finite interval bound, at least 0")
            times = [("median", t.median), *((f"samples[{k}]", s) for k, s in enumerate(t.samples))]
            for key, value in times:
                if not MIN_TIME <= value <= MAX_TIME:
                    refuse(f"{where}.{key}", f"{value!r} s is not a time within [{MIN_TIME:g} s, {MAX_TIME:g} s]")


def _migrated(data: Any, origin: str, what: str) -> dict[str, Any]:
    if not isinstance(data, dict) or "schema_version" not in data:
        raise ResultsFormatError(f"{origin}: not a solbench {what} (no schema_version)")
    version = data["schema_version"]
    if type(version) is not int or version < 1:
        raise ResultsFormatError(f"{origin}: schema_version {_short(version)} is not a version number")
    if version > SCHEMA_VERSION:
        raise ResultsFormatError(
            f"{origin}: schema_version {version} is newer than this solbench reads "
            f"({SCHEMA_VERSION}); upgrade solbench")
    while version < SCHEMA_VERSION:
        data = _MIGRATIONS[version](data)
        version = data["schema_version"]
    return data


def slug(text: str) -> str:
    """A file-name-safe form of a device or run name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-").lower()[:80] or "run"


def default_path(run: RunResult, results_dir: Path, name: str | None = None) -> Path:
    """``results/<spec-id>/<UTC time to the microsecond>-<random>[_<name>].json``, a new name each call."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S-%f")
    suffix = f"_{slug(name)}" if name else ""
    return Path(results_dir) / slug(run.spec.id) / f"{stamp}-{secrets.token_hex(2)}{suffix}.json"


def find(name_or_path: str, results_dir: Path) -> Path:
    """A result file from a path, or the newest run saved under ``name`` in ``results_dir`` (as
    ``.json``, or compressed as ``.json.gz``)."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    if path.is_dir():  # not "no such result file": it exists, and is not one
        raise ResultsFormatError(f"{name_or_path}: a folder, not a result file (give a run's JSON file, or a "
                                 "saved name; --results-dir names the folder runs are looked up in)")
    if path.exists():  # not "no such result file" either: a pipe (cat run.json | ... /dev/stdin) or a device
        raise ResultsFormatError(f"{name_or_path}: not a regular file (a pipe or device); give a run's JSON file")
    tail = f"_{slug(name_or_path)}.json"
    named = ((p, p.name.removesuffix(".gz")) for p in _result_files(results_dir))
    matches = sorted((p for p, name in named if name.endswith(tail) and "_" not in name[: -len(tail)]),
                     key=lambda p: p.name)
    if not matches:
        raise ResultsFormatError(f"{name_or_path}: no such result file or saved run in {results_dir}")
    return matches[-1]


def latest(results_dir: Path) -> Path:
    """The newest run file under ``results_dir`` (calibrations and other JSON files are skipped)."""
    found, _ = latest_with_skipped(results_dir)
    return found


def latest_with_skipped(results_dir: Path) -> tuple[Path, list[Path]]:
    """The newest run file under ``results_dir``, and the newer files passed over because they do not
    read as JSON at all (damaged, or cut short by a full disk): the caller says so, since the user
    asked for the newest run (tuning logs, calibrations and other solbench JSON are passed silently)."""
    unreadable: list[Path] = []
    for p in newest_first(results_dir):
        try:
            data = read_json(p)
        except ResultsFormatError:
            unreadable.append(p)
            continue
        if is_run_data(data):
            return p, unreadable
    raise ResultsFormatError(f"no result files under {results_dir}; run `solbench run` first")


def is_run_file(path: Path) -> bool:
    """Whether ``path`` holds a run result (a JSON object with a schema_version, an environment and cases)."""
    try:
        data = read_json(path)
    except ResultsFormatError:
        return False
    return is_run_data(data)


def is_run_data(data: Any) -> bool:
    """Whether parsed JSON is a run result (an object with a schema_version, an environment and cases)."""
    return (isinstance(data, dict) and type(data.get("schema_version")) is int
            and isinstance(data.get("cases"), list) and isinstance(data.get("environment"), dict))


def newest_first(results_dir: Path) -> list[Path]:
    """The files under ``results_dir`` that may hold a run (``.json`` or ``.json.gz``; calibrations,
    spreads and hidden files skipped), newest first."""
    return sorted(_result_files(results_dir), key=_mtime, reverse=True)


def _result_files(results_dir: Path) -> list[Path]:
    root = Path(results_dir)
    skipped = (root / "calibration", root / "spread")
    return [p for pattern in ("**/*.json", "**/*.json.gz") for p in root.glob(pattern)
            if not p.name.startswith(".") and not any(d in p.parents for d in skipped) and p.is_file()]


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def calibration_path(results_dir: Path, spec_id: str, device_uuid: str | None) -> Path:
    """``results/calibration/<spec-id>/<uuid or 'default'>.json``."""
    return results_dir / "calibration" / slug(spec_id) / f"{slug(device_uuid or 'default')}.json"


def save_calibration(cal: Calibration, results_dir: Path) -> Path:
    """Write a calibration atomically next to the runs (replacing this device's previous one)."""
    path = calibration_path(results_dir, cal.spec_id, cal.device_uuid)
    return _write_atomic(path, json.dumps(encode(dataclasses.asdict(cal)), indent=1, allow_nan=False))


def load_calibration(results_dir: Path, spec_id: str, device_uuid: str | None) -> Calibration:
    """The calibration of this device; ResultsFormatError if there is none, or if the file at its
    path says it was measured on another device (copied or renamed there): its ceilings are another
    card's, and would be scored against as this one's."""
    path = calibration_path(results_dir, spec_id, device_uuid)
    if not path.is_file():
        raise ResultsFormatError(f"no calibration for this device at {path}: run `solbench calibrate` first")
    cal = read_calibration(path)
    if (cal.spec_id, cal.device_uuid) != (spec_id, device_uuid):
        raise ResultsFormatError(f"{path}: measured on {cal.spec_id} {cal.device_uuid or '(no UUID)'} "
                                 f"({cal.device_name}), not on this device ({spec_id} {device_uuid or '(no UUID)'}): "
                                 "run `solbench calibrate` on this device")
    return cal


def read_calibration(path: Path) -> Calibration:
    """A calibration file (``solbench calibrate``'s JSON); ResultsFormatError, one line naming the
    file, when it is not one or holds a ceiling that is not a positive finite number."""
    data = _migrated(read_json(path, "calibration"), str(path), "calibration")
    try:
        cal: Calibration = decode(Calibration, data)
    except DecodeError as exc:
        raise ResultsFormatError(f"{path}: malformed calibration: {_one_line(exc)}") from None
    ceilings = {"bandwidth": cal.bandwidth, **{f"{group}.{unit}": v for group in ("tensor_peaks", "vector_peaks")
                                              for unit, v in getattr(cal, group).items()}}
    for name, value in ceilings.items():
        if not (isinstance(value, int | float) and 0.0 < value < math.inf):
            raise ResultsFormatError(f"{path}: {name}: a ceiling must be a positive finite number, got {value!r}")
    return cal


def spread_path(results_dir: Path, spec_id: str) -> Path:
    """``results/spread/<spec-id>.json``: one per GPU model (a CI job lands on any card of it)."""
    return results_dir / "spread" / f"{slug(spec_id)}.json"


def save_spread(spread: RunSpread, results_dir: Path) -> Path:
    """Write what ``solbench spread --save`` measured, atomically (replacing the model's previous one)."""
    return _write_atomic(spread_path(results_dir, spread.spec_id),
                         json.dumps(encode(dataclasses.asdict(spread)), indent=1, allow_nan=False))


def load_spread(results_dir: Path, spec_id: str) -> RunSpread | None:
    """The saved spread of this GPU model, or None where there is none; ResultsFormatError if malformed."""
    path = spread_path(results_dir, spec_id)
    if not path.is_file():
        return None
    data = _migrated(read_json(path, "spread record"), str(path), "spread record")
    try:
        spread: RunSpread = decode(RunSpread, data)
    except DecodeError as exc:
        raise ResultsFormatError(f"{path}: malformed spread record: {_one_line(exc)}") from None
    if not 0.0 <= spread.run_sd < MAX_RUN_SD:
        raise ResultsFormatError(f"{path}: run_sd must be at least 0 and below {MAX_RUN_SD}, got {spread.run_sd!r}")
    return spread


def _one_line(exc: Exception | str, limit: int = 400) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
