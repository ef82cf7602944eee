"""A plan made ready for one detected device: what an executor needs, as data.

    prepare(files, options, info, floor) -> Prepared(units, settings, empty run, score, nvml id)

Executors (:mod:`solbench.execute`) take a Prepared; they never plan or detect on their own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from solbench.plan.options import RunOptions, rounds_for
from solbench.plan.workloads import Planned, case_result, located, no_tensor_unit_notes, now, plan, wanted
from solbench.results.model import CaseResult, ImplResult, Protocol, RunResult, SpecRef
from solbench.text import first_few
from solbench.workload.cases import Case, CaseError
from solbench.workload.schema import WorkloadSpec

if TYPE_CHECKING:
    from solbench.analysis.hwspec import HardwareSpec


@dataclass(frozen=True)
class Unit:
    """One workload to measure: its spec, where it came from, its cases and implementations."""

    spec: WorkloadSpec
    path: Path
    cases: tuple[Case, ...]
    impls: tuple[str, ...]
    index: int = 0  # the workload's place in its file (for an error at a line of it)


Score = Callable[[Unit, Case, Sequence[ImplResult]], CaseResult]


@dataclass(frozen=True)
class Prepared:
    """What measuring a set of workload files needs, planned and checked (nothing run yet)."""

    units: tuple[Unit, ...]
    settings: Any  # measure.worker.MeasureSettings
    run: RunResult  # the empty run the measurements are added to
    score: Score
    nvml_id: str | None  # the device UUID workers read clocks by (None: no clock monitor)


def prepare(files: Sequence[str | Path], options: RunOptions, info: Any, floor_spec: HardwareSpec, *,
            require_impls: bool = True, require_workloads: bool = True) -> Prepared:
    """Plan the files for a detected device, check memory, and build the settings and empty run
    (``require_impls``, ``require_workloads``: as :func:`solbench.plan.workloads.plan`'s)."""
    from solbench.device import nvml, threads
    from solbench.measure.worker import MeasureSettings

    planned = plan(files, info.kind, options.workloads, options.impls, options.solutions, cases=options.cases,
                   overrides=dict(options.overrides), require_impls=require_impls,
                   require_workloads=require_workloads)
    _check_memory(planned, info, options)
    units = tuple(Unit(p.spec, p.path, _selected(p.cases, options.keys), _impls(p, options), p.index)
                  for p in planned)
    settings = replace(MeasureSettings.of(options, info.kind), threads=threads.policy(options.threads, info.kind))
    nvml_id = info.uuid if info.kind == "cuda" and info.uuid and nvml.nvml_available() else None
    protocol = Protocol(settings.timer, options.warmup, options.min_samples, options.max_samples,
                        options.target_rel_ci, options.budget_s, options.input_sets, flush=options.flush
                        if info.kind == "cuda" and options.timer in ("cold", "cupti") else "",
                        isolation="in-process" if options.in_process else "worker", timeout_s=options.timeout_s,
                        rounds=rounds_for(options, info.kind), max_rounds=options.max_rounds or 0,
                        rounds_target=options.rounds_target_rel_ci if options.max_rounds else 0.0,
                        rounds_spread=options.rounds_spread if options.max_rounds else "",
                        clock_monitor="nvml" if nvml_id else "",
                        threads=settings.threads,
                        launch=settings.launch if info.kind == "cuda" and options.timer == "cold" else "")
    thresholds = {p.spec.name: p.spec.gate_threshold for p in planned if p.spec.gate_threshold is not None}
    run_result = RunResult(now(), info.environment(), SpecRef(info.spec.id, info.spec.name, info.spec.source),
                           protocol, (), tuple(str(f) for f in files), gate_thresholds=thresholds,
                           notes=(*device_notes(info), *no_tensor_unit_notes(planned, info.spec),
                                  *(note for p in planned for note in p.skip_notes())))
    by_path = {(p.path, p.spec.name): p for p in planned}

    def score_case(unit: Unit, case: Case, impls: Sequence[ImplResult]) -> CaseResult:
        return case_result(by_path[(unit.path, unit.spec.name)], case, info.spec, impls,
                           floor_spec=floor_spec, device_kind=info.kind)

    return Prepared(units, settings, run_result, score_case, nvml_id)


def device_notes(info: Any) -> tuple[str, ...]:
    """What a run must say about its peaks: detection's warnings (an estimated spec, a device that
    disagrees with its datasheet, a MIG slice's scaled peaks) and, with ``--peaks measured``, whose
    ceilings were measured and which stayed the datasheet's."""
    measured = info.spec.notes[-1:] if info.spec.source == "measured" else ()
    return (*(f"device: {w}" for w in info.warnings), *(f"peaks: {n}" for n in measured))


def _check_memory(planned: Sequence[Planned], info: Any, options: RunOptions) -> None:
    """Refuse, before allocating, a case whose tensors cannot fit in free device (or host) memory.

    A worker holds the timed input sets, a pristine copy of each (to catch in-place changes) and
    two fresh sets for the checks after timing.
    """
    from solbench.workload.cases import check_fits

    free, where = free_memory(info), "device" if info.kind == "cuda" else "host"
    if free is None:
        return
    for p in planned:
        try:
            check_fits(p.cases, free, input_sets=options.input_sets + 2, copies=2, where=where)
        except CaseError as exc:
            raise located(p.path, ["workloads", p.index, *exc.loc], str(exc)) from None


def free_memory(info: Any) -> int | None:
    """Free bytes where the run's tensors go: the device's (NVML), or the host's on the CPU; None
    where it cannot be read."""
    from solbench.device import nvml

    if info.kind == "cuda":
        handle = nvml.get_handle(info.uuid) if info.uuid else None
        return nvml.free_memory(handle) if handle is not None else None
    return nvml.host_available_memory()


def tuned_variant(path: Path | None, spec_id: str, units: Sequence[Unit], launch: str,
                  device_kind: str) -> tuple[Any, tuple[str, ...]]:
    """``run --tuned FILE``: (each implementation with its tuned parameters for each case, the run's notes).
    ConfigError for a file tuned on another device, or an entry for ``units`` that its ``tune:`` space no
    longer holds. A note where configurations the run applies were tuned under another ``--launch`` than
    the run's (a winner on the stream need not win as a graph's replay); a file from before tune recorded
    its launch was tuned on the stream. A note for the entries of the run's workloads that name an
    implementation or case the workload no longer declares: they apply to nothing."""
    if path is None:
        return None, ()
    from solbench.config.yamlio import read_yaml
    from solbench.errors import ConfigError
    from solbench.plan.tuned import declared, load_tuned, undeclared
    from solbench.workload.tune_space import ConstraintError

    tuned = load_tuned(path)
    tuned.check_device(spec_id)
    used: Counter[str] = Counter()  # entries the run applies, by the launch they were tuned under
    for unit in units:
        for case in unit.cases:
            for name in unit.impls:
                try:
                    why = tuned.stale(unit.spec.name, name, case, unit.spec.implementations[name])
                except ConstraintError as exc:  # the workload's fault: said at the constraint's line
                    loc = ["workloads", unit.index, "implementations", name, "tune", "constraints", exc.index]
                    raise read_yaml(unit.path).error(loc, f"{exc}, where {path} applies the configuration tuned "
                                                          f"for {case.id}") from None
                if why:
                    raise ConfigError(f"{path}: the configuration tuned for {name} on {case.id} is not in its "
                                      f"tune: space now ({why}): the workload changed since; run `solbench tune` "
                                      "again")
                entry = tuned.entries.get((unit.spec.name, name, case.id))
                if entry is not None:  # none recorded: tuned when tune always launched on the stream
                    used[str(entry.get("launch", "stream"))] += 1
    notes = tuple(f"tuned: {n} configuration{'s' if n != 1 else ''} in {path} {'was' if n == 1 else 'were'} tuned "
                  f"with --launch {was}; this run launches {launch}, under which another configuration may win"
                  for was, n in sorted(used.items()) if was != launch)
    gone = []  # not those of implementations or cases the run only left out (-i, --case, --set)
    for unit in units:
        keys = sorted(k for k in tuned.entries if k[0] == unit.spec.name)
        if not keys:
            continue
        try:
            now = declared(unit.spec, device_kind)
        except CaseError:  # its own values never expanded (this run's --set replaced them): nothing to say
            continue
        gone += [f"{w} {name} on {case_id} ({why})" for w, name, case_id in keys
                 if (why := undeclared((w, name, case_id), now))]
    if gone:
        notes += (f"tuned: {len(gone)} entr{'y' if len(gone) == 1 else 'ies'} in {path} name what their workload no "
                  f"longer declares and apply to nothing: {first_few(gone, 5, '; ')}; tuning the workload again drops "
                  + ("it" if len(gone) == 1 else "them"),)

    def variant(spec: WorkloadSpec, case: Case, name: str) -> WorkloadSpec:
        impl = tuned.apply(spec.name, name, case.id, spec.implementations[name])
        if impl is spec.implementations[name]:
            return spec
        return spec.model_copy(update={"implementations": {**spec.implementations, name: impl}})

    return variant, notes


def _selected(cases: Sequence[Case], keys: Sequence[str]) -> tuple[Case, ...]:
    if not keys:
        return tuple(cases)
    return tuple(c for c in cases if any(k.startswith(c.id + "/") for k in keys))


def _impls(p: Planned, options: RunOptions) -> tuple[str, ...]:
    """Implementations to measure, in file order."""
    return tuple(n for n in p.spec.implementations if wanted(p.spec, n, options.impls))
