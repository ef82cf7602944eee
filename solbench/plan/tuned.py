"""Tuned-configuration files (``solbench tune`` writes them, ``run --tuned FILE`` applies them).

    {"format": "solbench-tuned/1", "spec_id": "h200", "device_name": ...,
     "entries": [{"workload", "impl", "case_id", "params": {...}, "median_s", ...}, ...]}
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solbench.errors import ConfigError, ResultsFormatError
from solbench.workload.cases import Case, expand
from solbench.workload.expr import ExprError
from solbench.workload.schema import Implementation, WorkloadSpec
from solbench.workload.tune_space import config_label, unmet

TUNED_FORMAT = "solbench-tuned/1"


@dataclass(frozen=True)
class TunedConfig:
    """A tuned-configuration file: per (workload, implementation, case id), the keyword arguments."""

    spec_id: str
    device_name: str
    entries: dict[tuple[str, str, str], dict[str, Any]]

    def params_for(self, workload: str, impl: str, case_id: str) -> dict[str, Any] | None:
        """The tuned keyword arguments of one implementation on one case, or None."""
        entry = self.entries.get((workload, impl, case_id))
        return dict(entry["params"]) if entry is not None else None

    def apply(self, workload: str, impl_name: str, case_id: str, impl: Implementation) -> Implementation:
        """The implementation with its tuned params for this case (unchanged when none is stored)."""
        params = self.params_for(workload, impl_name, case_id)
        if params is None:
            return impl
        return impl.model_copy(update={"params": {**impl.params, **params}})

    def stale(self, workload: str, impl_name: str, case: Case, impl: Implementation) -> str | None:
        """Why the stored configuration of one implementation on one case is not one of its ``tune:``
        space now, or not one its constraints allow on that case (the workload changed since it was
        tuned), or None; ConstraintError where a constraint cannot be evaluated there."""
        params = self.params_for(workload, impl_name, case.id)
        if params is None:
            return None
        if impl.tune is None:
            return out_of_space(params, {})
        return out_of_space(params, impl.tune.space, impl.tune.constraints, case.scope, strict=True)

    def check_device(self, spec_id: str) -> None:
        """Refuse configurations tuned on another kind of device."""
        if spec_id != self.spec_id:
            raise ConfigError(f"the tuned configurations are for {self.spec_id} ({self.device_name}); "
                              f"this device is {spec_id}: run `solbench tune` here")


def declared(spec: WorkloadSpec, device_kind: str) -> dict[str, list[str]]:
    """What an entry of the workload ``spec`` may name now on this kind of device: its implementations with
    a ``tune:`` space ("impls") and its case ids ("cases"); CaseError where its cases cannot be made."""
    return {"impls": [name for name, impl in spec.implementations.items() if impl.tune is not None],
            "cases": [c.id for c in expand(spec, device_kind)]}


def undeclared(key: tuple[str, str, str], now: Mapping[str, Sequence[str]]) -> str | None:
    """Why an entry (workload, implementation, case id) names nothing its workload declares ``now``
    (:func:`declared`), or None."""
    if key[1] not in now["impls"]:
        return "no such implementation with a tune: space"
    return "no such case" if key[2] not in now["cases"] else None


def out_of_space(params: Mapping[str, Any], space: Mapping[str, Sequence[Any]], constraints: Sequence[str] = (),
                 scope: Mapping[str, Any] | None = None, *, strict: bool = False) -> str | None:
    """Why a configuration is not one of a ``tune:`` space, or (given a case's ``scope``: its parameters,
    derived values and dtype) one of the space's ``constraints`` excludes it on that case, or None.
    A constraint that cannot be evaluated there is a reason too, or (``strict``) its ConstraintError, whose
    ``index`` names the constraint for an error at its line of the workload file."""
    if set(params) != set(space):
        return f"it sets {', '.join(sorted(params))}, the tune: space {', '.join(sorted(space)) or 'nothing'}"
    outside = next((f"{k}={v!r} is not one of {list(space[k])}" for k, v in params.items()
                    if not _one_of(v, space[k])), None)
    if outside is not None or scope is None:
        return outside
    try:
        failed = unmet(constraints, scope, params)
    except ExprError as exc:
        if strict:
            raise
        return f"its constraints cannot be evaluated there: {exc}"
    return None if failed is None else f"{config_label(params)} does not meet its constraint {failed!r} on this case"


def _one_of(value: Any, values: Sequence[Any]) -> bool:
    """``value`` is one of ``values`` with its type too: ``in`` took 64.0 and True for 64 and 1, and the
    implementation then got a float where it needs an int."""
    return any(type(value) is type(v) and value == v for v in values)


def parse_tuned(text: str, origin: str = "<tuned>") -> TunedConfig:
    """Read a tuned-configuration file's text; ResultsFormatError when it is not one."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsFormatError(f"{origin}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    except (RecursionError, ValueError) as exc:  # nested too deep, an integer of thousands of digits
        raise ResultsFormatError(f"{origin}: not a solbench tuned-configuration file: {str(exc)[:200]}") from None
    if not isinstance(data, dict) or data.get("format") != TUNED_FORMAT:
        raise ResultsFormatError(f"{origin}: not a solbench tuned-configuration file "
                                 f"(format {TUNED_FORMAT!r} expected)")
    try:
        entries = {}
        for e in data["entries"]:
            key = (e["workload"], e["impl"], e["case_id"])
            if key in entries:  # the later one silently won
                raise ResultsFormatError(f"{origin}: two entries for {key[1]} on {key[2]} ({key[0]}): keep one")
            entries[key] = e
        if not all(isinstance(e["params"], dict) for e in entries.values()):
            raise TypeError("params must be a mapping")
        return TunedConfig(str(data["spec_id"]), str(data.get("device_name", "")), entries)
    except (KeyError, TypeError) as exc:
        raise ResultsFormatError(f"{origin}: malformed tuned-configuration file: {exc}") from None


def load_tuned(path: str | Path) -> TunedConfig:
    """Read a tuned-configuration file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultsFormatError(f"{path}: no such tuned-configuration file") from None
    except UnicodeDecodeError:
        raise ResultsFormatError(f"{path}: not a solbench tuned-configuration file (not UTF-8 text)") from None
    except OSError as exc:
        raise ResultsFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return parse_tuned(text, str(path))
