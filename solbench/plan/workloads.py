"""Workload files -> planned workloads: cases expanded and every op costed before anything runs.

    plan(files, device_kind)   -> [Planned]   (ConfigError naming file, line and field)
    dry_run(files, spec)       -> RunResult   (FLOPs, bytes and T_SOL; nothing measured)
    case_result(p, case, ...)  -> CaseResult  (a case's cost, T_SOL and its implementations scored)
"""

from __future__ import annotations

import datetime as _dt
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from solbench._version import __version__
from solbench.analysis.cost import case_cost
from solbench.analysis.scoring import ImplPeaks, score_impls
from solbench.analysis.sol import speed_of_light
from solbench.config.workloads import load_workload_file, validate_references
from solbench.config.yamlio import read_yaml
from solbench.errors import ConfigError
from solbench.results.model import CaseResult, Environment, ImplResult, Protocol, RunResult, SpecRef
from solbench.workload.cases import Case, CaseError, case_matches, expand, parameter_names
from solbench.workload.schema import ParamValue, WorkloadSpec

if TYPE_CHECKING:
    from solbench.analysis.hwspec import HardwareSpec


@dataclass(frozen=True)
class Planned:
    """One workload of a file with its expanded cases."""

    spec: WorkloadSpec
    path: Path
    index: int
    cases: tuple[Case, ...]


def plan(files: Sequence[str | Path], device_kind: str, only: Sequence[str] = (),
         impls: Sequence[str] = (), *, cases: Sequence[str] = (),
         overrides: Mapping[str, Sequence[ParamValue]] | None = None) -> list[Planned]:
    """Load workload files and expand their cases for a device kind ("cpu" or "cuda").

    ``only`` and ``impls`` (workload and implementation names) must each name something that
    exists, or this raises a ConfigError listing what does. ``overrides`` (``--set``) replaces
    the values of the parameters it names; ``cases`` (``--case``) keeps the cases that match one
    of its patterns (:func:`~solbench.workload.cases.case_matches`); each must apply somewhere.
    """
    planned, every_id = [], []
    for f in files:
        path = Path(f)
        specs = load_workload_file(path)
        validate_references(path, specs, include=functools.partial(_checked, specs, only=only, impls=impls,
                                                                   device_kind=device_kind))
        for i, spec in enumerate(specs):
            if only and spec.name not in only:
                continue
            try:
                expanded = tuple(expand(spec, device_kind, overrides))
            except CaseError as exc:
                raise read_yaml(path).error(["workloads", i, *exc.loc], str(exc)) from None
            every_id += [c.id for c in expanded]
            if cases:
                expanded = tuple(c for c in expanded if any(case_matches(c.id, pat) for pat in cases))
            p = Planned(spec, path, i, expanded)
            for case in expanded:  # every op of every case is costed before anything is measured
                cost_of(p, case)
            planned.append(p)
    if only:
        missing = sorted(set(only) - {p.spec.name for p in planned})
        if missing:
            known = sorted({s.name for f in files for s in load_workload_file(Path(f))})
            raise ConfigError(f"-w: no workload named {', '.join(missing)} in {', '.join(map(str, files))} "
                              f"(there are: {', '.join(known)})")
    _check_selection(planned, every_id, device_kind, cases, overrides or {})
    if impls:
        known_impls = {n for p in planned for n in p.spec.implementations}
        missing = sorted(set(impls) - known_impls)
        if missing:
            raise ConfigError(f"-i: no implementation named {', '.join(missing)} in the selected workloads "
                              f"(there are: {', '.join(sorted(known_impls))})")
    return [p for p in planned if p.cases] if cases else planned  # a workload --case left empty: no workers


def _checked(specs: Sequence[WorkloadSpec], workload: str, impl: str, *, only: Sequence[str],
             impls: Sequence[str], device_kind: str) -> bool:
    """Whether to check an implementation's references: selected, and able to run on this kind of
    device (a CUDA-only implementation may name a module only GPU machines have)."""
    spec = next(s for s in specs if s.name == workload)
    if (only and workload not in only) or not wanted(spec, impl, impls):
        return False
    return not (device_kind == "cpu" and "cuda" in spec.implementations[impl].requires)


def _check_selection(planned: list[Planned], ids: list[str], device_kind: str, cases: Sequence[str],
                     overrides: Mapping[str, Sequence[ParamValue]]) -> None:
    """ConfigError for a --set parameter no selected workload has, or a --case pattern nothing matched."""
    names = set().union(*(parameter_names(p.spec, device_kind) for p in planned)) if planned else set()
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise ConfigError(f"--set: no selected workload has a parameter {', '.join(unknown)} "
                          f"(they have: {', '.join(sorted(names))})")
    for pattern in cases:
        if not any(case_matches(i, pattern) for i in ids):
            raise ConfigError(f"--case: no case matches {pattern!r} (cases: {', '.join(ids[:6])}"
                              f"{', ...' if len(ids) > 6 else ''})")


def wanted(spec: WorkloadSpec, impl: str, impls: Sequence[str]) -> bool:
    """Whether ``-i`` selects an implementation: all when none is named; the baseline always."""
    return not impls or impl in impls or impl == spec.baseline


def cost_of(p: Planned, case: Case) -> Any:
    """Analytic cost of a case; a bad op field is a ConfigError naming the file and line."""
    try:
        return case_cost(case, [op.model_dump(exclude_none=True) for op in p.spec.ops],
                         flops=p.spec.flops, bytes_=p.spec.bytes)
    except ValueError as exc:
        raise read_yaml(p.path).error(["workloads", p.index, "ops"], str(exc)) from None


def dry_run(files: Sequence[str | Path], spec: HardwareSpec, only: Sequence[str] = (),
            impls: Sequence[str] = (), *, select: Sequence[str] = (),
            overrides: Mapping[str, Sequence[ParamValue]] | None = None) -> RunResult:
    """FLOPs, bytes and T_SOL of every case against ``spec``, without running anything
    (``select``, ``overrides``: as :func:`plan`'s ``cases`` and ``overrides``)."""
    kind = "cpu" if spec.kind == "cpu" else "cuda"
    cases = []
    for p in plan(files, kind, only, impls, cases=select, overrides=overrides):
        for case in p.cases:
            cases.append(case_result(p, case, spec, ()))
    env = Environment(device_kind=kind, device_name=spec.name, spec_id=spec.id, solbench=__version__)
    protocol = Protocol("none", 0, 0, 0, 0.0, 0.0, 0)
    return RunResult(now(), env, SpecRef(spec.id, spec.name, spec.source), protocol, tuple(cases),
                     tuple(str(f) for f in files), notes=("dry run: nothing was measured",))


def case_result(p: Planned, case: Case, spec: HardwareSpec, impls: Sequence[ImplResult],
                *, floor_spec: HardwareSpec | None = None, device_kind: str = "cuda") -> CaseResult:
    """A case's cost and T_SOL against ``spec``, its implementations scored (SOL, MFU, S, INVALID
    against ``floor_spec``, default ``spec``)."""
    cost = cost_of(p, case)
    peaks = spec.peaks_for(case.dtype)
    floor = floor_spec or spec
    per_impl = {}
    for r in impls:
        dtype = p.spec.implementations[r.name].peak_dtype or case.dtype
        note = f"scored against the {dtype} peak" if dtype != case.dtype else ""
        per_impl[r.name] = ImplPeaks(spec.peaks_for(dtype), floor.peaks_for(dtype), note)
    sol = speed_of_light(cost, peaks)
    scored = score_impls(cost, impls, per_impl, p.spec.baseline, device_kind)
    return CaseResult(case.workload, case.id, dict(case.params), case.dtype, cost, peaks, sol.t_sol,
                      sol.bound, sol.intensity, scored, p.spec.baseline)


def now() -> str:
    """The current UTC time as a run's ``created`` stamp."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
