"""The only reader and writer of result JSON.

Files carry ``schema_version``. A newer file is refused; an older one is migrated step by step
(one ``_migrate_N_to_M`` per step; none exist yet, as version 1 is the first). Writes are atomic:
a temporary file in the same folder, fsync, then ``os.replace``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from solbench.errors import ResultsFormatError
from solbench.results.model import (
    SCHEMA_VERSION,
    Calibration,
    CaseResult,
    Correctness,
    Cost,
    Environment,
    ImplResult,
    Peaks,
    Protocol,
    RunResult,
    Score,
    SpecRef,
    Timing,
)

_MIGRATIONS: dict[int, Any] = {}  # version N -> function(dict) -> dict of version N + 1


def to_dict(run: RunResult) -> dict[str, Any]:
    """A JSON-ready dict of a run (SI units)."""
    data = dataclasses.asdict(run)
    for case, case_obj in zip(data["cases"], run.cases, strict=True):
        case["cost"]["flops"] = case_obj.cost.flops
        for impl in case["impls"]:
            if impl["timing"] is not None:
                impl["timing"]["n"] = len(impl["timing"]["samples"])
    return data


def dumps(run: RunResult) -> str:
    """The run as JSON text."""
    return json.dumps(to_dict(run), indent=1, allow_nan=True)


def save(run: RunResult, path: Path) -> Path:
    """Write a run atomically; creates parent folders."""
    return _write_atomic(path, dumps(run))


def _write_atomic(path: Path, text: str) -> Path:
    """Temporary file in the same folder, fsync, then rename: readers see the old or the new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load(path: Path) -> RunResult:
    """Read a run; a malformed or newer file is a ResultsFormatError."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResultsFormatError(f"{path}: no such result file") from None
    except json.JSONDecodeError as exc:
        raise ResultsFormatError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    return from_dict(data, str(path))


def from_dict(data: Any, origin: str = "<result>") -> RunResult:
    """Rebuild a RunResult from its dict, migrating older schema versions."""
    if not isinstance(data, dict) or "schema_version" not in data:
        raise ResultsFormatError(f"{origin}: not a solbench result (no schema_version)")
    version = data["schema_version"]
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise ResultsFormatError(
            f"{origin}: schema_version {version} is newer than this solbench reads "
            f"({SCHEMA_VERSION}); upgrade solbench")
    while version < SCHEMA_VERSION:
        data = _MIGRATIONS[version](data)
        version = data["schema_version"]
    try:
        return _run(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise ResultsFormatError(f"{origin}: malformed result: {type(exc).__name__}: {exc}") from None


def _fields(cls: Any, d: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in d.items() if k in names}


def _opt(cls: Any, d: dict[str, Any] | None) -> Any:
    return None if d is None else cls(**_fields(cls, d))


def _run(d: dict[str, Any]) -> RunResult:
    cases = []
    for c in d["cases"]:
        impls = []
        for i in c["impls"]:
            t = i.get("timing")
            timing = None if t is None else Timing(**{**_fields(Timing, t), "samples": tuple(t["samples"])})
            impls.append(ImplResult(i["name"], i["status"], i.get("message", ""),
                                    _opt(Correctness, i.get("correctness")), timing,
                                    _opt(Score, i.get("score")), dict(i.get("protocol") or {}),
                                    i.get("log_tail", "")))
        cost = c["cost"]
        cases.append(CaseResult(
            **{**_fields(CaseResult, c),
               "cost": Cost(**{**_fields(Cost, cost), "overridden": tuple(cost.get("overridden", ()))}),
               "peaks": Peaks(**_fields(Peaks, c["peaks"])),
               "impls": tuple(impls)}))
    return RunResult(
        created=d["created"], environment=Environment(**_fields(Environment, d["environment"])),
        spec=SpecRef(**_fields(SpecRef, d["spec"])), protocol=Protocol(**_fields(Protocol, d["protocol"])),
        cases=tuple(cases), workload_files=tuple(d.get("workload_files", ())),
        schema_version=d["schema_version"], notes=tuple(d.get("notes", ())),
        gate_thresholds=dict(d.get("gate_thresholds") or {}), complete=bool(d.get("complete", True)))


def slug(text: str) -> str:
    """A file-name-safe form of a device or run name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-").lower() or "run"


def default_path(run: RunResult, results_dir: Path, name: str | None = None) -> Path:
    """``results/<spec-id>/<timestamp>[_<name>].json``."""
    stamp = run.created.replace(":", "").replace("-", "").split(".")[0]
    suffix = f"_{slug(name)}" if name else ""
    return results_dir / slug(run.spec.id) / f"{stamp}{suffix}.json"


def find(name_or_path: str, results_dir: Path) -> Path:
    """A result file from a path, or the newest run saved under ``name`` in ``results_dir``."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    matches = sorted(results_dir.glob(f"**/*_{slug(name_or_path)}.json"), key=lambda p: p.name)
    if not matches:
        raise ResultsFormatError(f"{name_or_path}: no such result file or saved run in {results_dir}")
    return matches[-1]


def latest(results_dir: Path) -> Path:
    """The newest result file under ``results_dir``."""
    files = sorted(results_dir.glob("**/*.json"), key=lambda p: p.stat().st_mtime)
    if not files:
        raise ResultsFormatError(f"no result files under {results_dir}; run `solbench run` first")
    return files[-1]


def calibration_path(results_dir: Path, spec_id: str, device_uuid: str | None) -> Path:
    """``results/calibration/<spec-id>/<uuid or 'default'>.json``."""
    return results_dir / "calibration" / slug(spec_id) / f"{slug(device_uuid or 'default')}.json"


def save_calibration(cal: Calibration, results_dir: Path) -> Path:
    """Write a calibration atomically next to the runs."""
    path = calibration_path(results_dir, cal.spec_id, cal.device_uuid)
    return _write_atomic(path, json.dumps(dataclasses.asdict(cal), indent=1))


def load_calibration(results_dir: Path, spec_id: str, device_uuid: str | None) -> Calibration:
    """The calibration of this device; ResultsFormatError if there is none."""
    path = calibration_path(results_dir, spec_id, device_uuid)
    if not path.is_file():
        raise ResultsFormatError(f"no calibration for this device at {path}: run `solbench calibrate` first")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("schema_version", 0) > SCHEMA_VERSION:
            raise ResultsFormatError(f"{path}: newer schema than this solbench reads")
        return Calibration(**_fields(Calibration, data))
    except (json.JSONDecodeError, TypeError) as exc:
        raise ResultsFormatError(f"{path}: malformed calibration: {exc}") from None


def check_writable(folder: Path) -> None:
    """Create ``folder`` if needed and prove a file can be written there; ResultsFormatError if not."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".solbench-write-test.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ResultsFormatError(f"{folder}: cannot write results there: {exc.strerror or exc}") from None
