"""Python entry points: what the CLI calls, usable without it.

    plan(files, device)  -> workloads and cases (no device work)
    run(files, ...)      -> RunResult (measures on the detected device, or a dry run)
"""

from __future__ import annotations

import datetime as _dt
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from solbench.analysis.cost import case_cost
from solbench.analysis.sol import speed_of_light
from solbench.config.workloads import load_workload_file, validate_references
from solbench.config.yamlio import read_yaml
from solbench.errors import ConfigError, DeviceError
from solbench.results.model import (
    CaseResult,
    Environment,
    ImplResult,
    Protocol,
    RunResult,
    SpecRef,
)
from solbench.workload.cases import Case, CaseError, expand
from solbench.workload.schema import WorkloadSpec

if TYPE_CHECKING:
    from solbench.analysis.hwspec import HardwareSpec

from solbench._version import __version__

# re-exported: the façade's device, spec and saved-run helpers live in api_info
from solbench.api_info import calibrate as calibrate
from solbench.api_info import device_summary as device_summary
from solbench.api_info import hardware_spec as hardware_spec
from solbench.api_info import list_specs as list_specs
from solbench.api_info import list_workloads as list_workloads
from solbench.api_info import load_run as load_run
from solbench.api_info import measured_spec as measured_spec


@dataclass(frozen=True)
class Planned:
    """One workload of a file with its expanded cases."""

    spec: WorkloadSpec
    path: Path
    index: int
    cases: tuple[Case, ...]


@dataclass(frozen=True)
class RunOptions:
    """Knobs of a run; the defaults are the documented protocol."""

    timer: str = "cold"  # "cold", "graph", "cupti" (cupti-python); the CPU always uses "cpu"
    target_rel_ci: float = 0.01
    min_samples: int = 10
    max_samples: int = 2000
    budget_s: float = 2.0
    warmup: int = 3
    input_sets: int = 2
    seed: int = 0
    workloads: tuple[str, ...] = ()  # only these workload names (all when empty)
    impls: tuple[str, ...] = ()  # only these implementations (and the baseline)
    keys: tuple[str, ...] = ()  # only these "case_id/impl" pairs (re-measuring for the gate)
    peaks: str = "datasheet"  # or "measured": ceilings from `solbench calibrate`
    flush: str = "clean"  # cold/cupti timer: "clean" (no dirty lines left in L2) or "write" (nvbench's)
    results_dir: Path = Path("results")
    timeout_s: float = 120.0  # per implementation and case, compilation included (worker mode)
    in_process: bool = False  # run implementations in this process (debugging; no isolation)
    tuned: Path | None = None  # a tuned-configuration file from `solbench tune`
    repeat: int = 0  # rounds, each with fresh workers (median and CI over rounds); 0: 3 on a GPU, 1 on the CPU
    devices: str = ""  # "all" or "0,1": shard cases over these local GPUs ("": the one --device)
    executor: str = "local"  # or "ray": shard cases over the GPUs of a Ray cluster
    address: str | None = None  # Ray: "auto", "ray://host:10001"; None: the running or a new local instance
    schedule_from: Path | None = None  # --devices/Ray: case times from this run (default: the newest saved)


Progress = Callable[[str, dict[str, Any]], None]


def plan(files: Sequence[str | Path], device_kind: str, only: Sequence[str] = (),
         impls: Sequence[str] = ()) -> list[Planned]:
    """Load workload files and expand their cases for a device kind ("cpu" or "cuda").

    ``only`` and ``impls`` (workload and implementation names) must each name something that
    exists, or this raises a ConfigError listing what does.
    """
    planned = []
    for f in files:
        path = Path(f)
        specs = load_workload_file(path)
        validate_references(path, specs, include=functools.partial(_checked, specs, only=only, impls=impls,
                                                                   device_kind=device_kind))
        for i, spec in enumerate(specs):
            if only and spec.name not in only:
                continue
            try:
                cases = tuple(expand(spec, device_kind))
            except CaseError as exc:
                raise read_yaml(path).error(["workloads", i, *exc.loc], str(exc)) from None
            p = Planned(spec, path, i, cases)
            for case in cases:  # every op of every case is costed before anything is measured
                cost_of(p, case)
            planned.append(p)
    if only:
        missing = sorted(set(only) - {p.spec.name for p in planned})
        if missing:
            known = sorted({s.name for f in files for s in load_workload_file(Path(f))})
            raise ConfigError(f"-w: no workload named {', '.join(missing)} in {', '.join(map(str, files))} "
                              f"(there are: {', '.join(known)})")
    if impls:
        known_impls = {n for p in planned for n in p.spec.implementations}
        missing = sorted(set(impls) - known_impls)
        if missing:
            raise ConfigError(f"-i: no implementation named {', '.join(missing)} in the selected workloads "
                              f"(there are: {', '.join(sorted(known_impls))})")
    return planned


def _checked(specs: Sequence[WorkloadSpec], workload: str, impl: str, *, only: Sequence[str],
             impls: Sequence[str], device_kind: str) -> bool:
    """Whether to check an implementation's references: selected, and able to run on this kind of
    device (a CUDA-only implementation may name a module only GPU machines have)."""
    spec = next(s for s in specs if s.name == workload)
    if (only and workload not in only) or not _wanted(spec, impl, impls):
        return False
    return not (device_kind == "cpu" and "cuda" in spec.implementations[impl].requires)


def cost_of(p: Planned, case: Case) -> Any:
    """Analytic cost of a case; a bad op field is a ConfigError naming the file and line."""
    try:
        return case_cost(case, [op.model_dump(exclude_none=True) for op in p.spec.ops],
                         flops=p.spec.flops, bytes_=p.spec.bytes)
    except ValueError as exc:
        raise read_yaml(p.path).error(["workloads", p.index, "ops"], str(exc)) from None


def dry_run(files: Sequence[str | Path], spec: HardwareSpec, only: Sequence[str] = (),
            impls: Sequence[str] = ()) -> RunResult:
    """FLOPs, bytes and T_SOL of every case against ``spec``, without running anything."""
    kind = "cpu" if spec.kind == "cpu" else "cuda"
    cases = []
    for p in plan(files, kind, only, impls):
        for case in p.cases:
            cases.append(_case_result(p, case, spec, ()))
    env = Environment(device_kind=kind, device_name=spec.name, spec_id=spec.id, solbench=__version__)
    protocol = Protocol("none", 0, 0, 0, 0.0, 0.0, 0)
    return RunResult(_now(), env, SpecRef(spec.id, spec.name, spec.source), protocol, tuple(cases),
                     tuple(str(f) for f in files), notes=("dry run: nothing was measured",))


def run(files: Sequence[str | Path], options: RunOptions = RunOptions(), *,
        device: str = "auto", progress: Progress | None = None,
        on_case: Callable[[RunResult], None] | None = None) -> RunResult:
    """Check and time every implementation of every case on the detected device.

    With ``options.repeat`` > 1, every case is measured in that many rounds, each with fresh
    workers, and the run holds them all (round labels; median and CI over rounds).
    With ``options.devices`` or ``options.executor == "ray"`` the cases are sharded over several
    devices (:func:`solbench.api_shard.run_sharded`).
    Raises :class:`solbench.errors.RunInterrupted` (holding the partial run) on Ctrl-C.
    """
    from solbench.measure import pool, session

    if options.devices or options.executor != "local":
        from solbench.api_shard import run_sharded

        return run_sharded(files, options, progress=progress, on_case=on_case)

    info, floor_spec = _detect(device, options)
    options = replace(options, repeat=rounds_for(options, info.kind))
    prep = prepare(files, options, info, floor_spec)
    emit = progress or (lambda event, data: None)
    emit("start", {"cases": sum(len(u.cases) for u in prep.units) * options.repeat})
    if options.in_process and info.kind == "cuda":
        import torch

        torch.cuda.set_device(info.index)  # workers select it themselves; here, this process must
    executor = pool.InProcess() if options.in_process else pool.Pool(info.kind, info.index)
    result = session.measure_units(prep.units, prep.run, executor, device=info.kind, settings=prep.settings,
                                   timeout_s=options.timeout_s, l2_bytes=info.l2_bytes, score=prep.score,
                                   emit=emit, on_case=on_case, keys=options.keys, repeat=options.repeat,
                                   nvml_id=prep.nvml_id, variant=_tuned_variant(options.tuned, info.spec.id))
    emit("done", {})
    return with_end_clocks(result, info)


def ab(files: Sequence[str | Path], baseline_tree: str | Path, current_tree: str | Path,
       options: RunOptions | None = None, **kwargs: Any) -> tuple[RunResult, RunResult]:
    """Measure two checkouts of the same workloads in one invocation, alternating (``solbench ab``).

    See :func:`solbench.api_ab.ab`; returns (baseline, current).
    """
    from solbench.api_ab import ab as _ab

    return _ab(files, baseline_tree, current_tree, options, **kwargs)


DEFAULT_GPU_ROUNDS = 3


def rounds_for(options: RunOptions, device_kind: str) -> int:
    """Rounds to measure: ``options.repeat``, or by default 3 on a GPU (the CI covers what changes
    from process to process) and 1 on the CPU (wall-clock timing for development and CI)."""
    if options.repeat > 0:
        return options.repeat
    return DEFAULT_GPU_ROUNDS if device_kind == "cuda" else 1


def _detect(device: str, options: RunOptions) -> tuple[Any, HardwareSpec]:
    """The device and its spec (measured ceilings with ``--peaks measured``), and the INVALID floor."""
    from solbench.device.detect import detect  # device code only when measuring

    info = detect(device)
    if options.timer == "cupti" and info.kind == "cuda":
        from solbench.device import cupti

        if not cupti.available():
            raise DeviceError(cupti.INSTALL_HINT)
    return with_peaks(info, options.peaks, options.results_dir)


def with_peaks(info: Any, peaks: str, results_dir: Path) -> tuple[Any, HardwareSpec]:
    """The device scored against its measured ceilings where ``peaks`` is "measured" (else as
    detected), and the spec of the INVALID floor (:func:`_floor_spec`)."""
    if peaks != "measured":
        return info, info.spec
    measured = replace(info, spec=measured_spec(info.spec, info.uuid, results_dir))
    return measured, _floor_spec(info.spec, measured.spec)


@dataclass(frozen=True)
class Prepared:
    """What measuring a set of workload files needs, planned and checked (nothing run yet)."""

    units: tuple[Any, ...]  # measure.session.Unit
    settings: Any  # measure.worker.MeasureSettings
    run: RunResult  # the empty run the measurements are added to
    score: Callable[[Any, Case, Sequence[ImplResult]], CaseResult]
    nvml_id: str | None  # the device UUID workers read clocks by (None: no clock monitor)


def prepare(files: Sequence[str | Path], options: RunOptions, info: Any, floor_spec: HardwareSpec) -> Prepared:
    """Plan the files for a detected device, check memory, and build the settings and empty run."""
    from solbench.device import nvml
    from solbench.measure import session
    from solbench.measure.worker import MeasureSettings

    planned = plan(files, info.kind, options.workloads, options.impls)
    _check_memory(planned, info, options)
    units = tuple(session.Unit(p.spec, p.path, _selected(p.cases, options.keys), _impls(p, options))
                  for p in planned)
    settings = MeasureSettings.of(options, info.kind)
    nvml_id = info.uuid if info.kind == "cuda" and info.uuid and nvml.nvml_available() else None
    protocol = Protocol(settings.timer, options.warmup, options.min_samples, options.max_samples,
                        options.target_rel_ci, options.budget_s, options.input_sets, flush=options.flush
                        if info.kind == "cuda" and options.timer in ("cold", "cupti") else "",
                        isolation="in-process" if options.in_process else "worker", timeout_s=options.timeout_s,
                        rounds=rounds_for(options, info.kind), clock_monitor="nvml" if nvml_id else "")
    thresholds = {p.spec.name: p.spec.gate_threshold for p in planned if p.spec.gate_threshold is not None}
    run_result = RunResult(_now(), info.environment(), SpecRef(info.spec.id, info.spec.name, info.spec.source),
                           protocol, (), tuple(str(f) for f in files), gate_thresholds=thresholds)
    by_path = {(p.path, p.spec.name): p for p in planned}

    def score_case(unit: Any, case: Case, impls: Sequence[ImplResult]) -> CaseResult:
        return _case_result(by_path[(unit.path, unit.spec.name)], case, info.spec, impls,
                            floor_spec=floor_spec, device_kind=info.kind)

    return Prepared(units, settings, run_result, score_case, nvml_id)


def _check_memory(planned: Sequence[Planned], info: Any, options: RunOptions) -> None:
    """Refuse, before allocating, a case whose tensors cannot fit in free device (or host) memory.

    A worker holds the timed input sets, a pristine copy of each (to catch in-place changes) and
    two fresh sets for the checks after timing.
    """
    from solbench.device import nvml
    from solbench.workload.cases import check_fits

    if info.kind == "cuda":
        handle = nvml.get_handle(info.uuid) if info.uuid else None
        free, where = (nvml.free_memory(handle) if handle is not None else None), "device"
    else:
        free, where = nvml.host_available_memory(), "host"
    if free is None:
        return
    for p in planned:
        try:
            check_fits(p.cases, free, input_sets=options.input_sets + 2, copies=2, where=where)
        except CaseError as exc:
            raise read_yaml(p.path).error(["workloads", p.index, *exc.loc], str(exc)) from None


def _tuned_variant(path: Path | None, spec_id: str) -> Any:
    """``run --tuned FILE``: each implementation with its tuned parameters for each case."""
    if path is None:
        return None
    from solbench.tune import load_tuned

    tuned = load_tuned(path)
    tuned.check_device(spec_id)

    def variant(spec: WorkloadSpec, case: Case, name: str) -> WorkloadSpec:
        impl = tuned.apply(spec.name, name, case.id, spec.implementations[name])
        if impl is spec.implementations[name]:
            return spec
        return spec.model_copy(update={"implementations": {**spec.implementations, name: impl}})

    return variant


def _selected(cases: Sequence[Case], keys: Sequence[str]) -> tuple[Case, ...]:
    if not keys:
        return tuple(cases)
    return tuple(c for c in cases if any(k.startswith(c.id + "/") for k in keys))


def _wanted(spec: WorkloadSpec, impl: str, impls: Sequence[str]) -> bool:
    """Whether ``-i`` selects an implementation: all when none is named; the baseline always."""
    return not impls or impl in impls or impl == spec.baseline


def _impls(p: Planned, options: RunOptions) -> tuple[str, ...]:
    """Implementations to measure, in file order."""
    return tuple(n for n in p.spec.implementations if _wanted(p.spec, n, options.impls))


def _floor_spec(datasheet: HardwareSpec, measured: HardwareSpec) -> HardwareSpec:
    """Peaks for the INVALID rule: the higher of datasheet and measured, unit by unit."""
    def higher(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
        return {k: max(a.get(k, 0.0), b.get(k, 0.0)) for k in {*a, *b}}

    return datasheet.with_peaks(tensor=higher(datasheet.tensor_peaks, measured.tensor_peaks),
                                vector=higher(datasheet.vector_peaks, measured.vector_peaks),
                                bandwidth=max(datasheet.bandwidth or 0.0, measured.bandwidth or 0.0))


def with_end_clocks(result: RunResult, info: Any) -> RunResult:
    """The run with the clocks read right after measuring (the start reading is often idle) and
    whether clocks were locked (:func:`solbench.device.nvml.clocks_locked`; read only)."""
    if info.kind != "cuda" or info.uuid is None:
        return result
    from solbench.device import nvml

    handle = nvml.get_handle(info.uuid)
    if handle is None:
        return result
    sample = nvml.read_clocks(handle)
    app = nvml.application_clocks(handle)
    seen = [bits for c in result.cases for r in c.impls if r.timing is not None
            for bits in r.timing.throttle_reasons if bits is not None]
    env = replace(result.environment, sm_clock_end_mhz=sample.sm_clock_mhz,
                  clock_event_reasons_end=sample.clocks_event_reasons,
                  applications_sm_clock_mhz=app.sm_mhz, default_applications_sm_clock_mhz=app.default_sm_mhz,
                  applications_mem_clock_mhz=app.mem_mhz, default_applications_mem_clock_mhz=app.default_mem_mhz,
                  clocks_locked=nvml.clocks_locked(app, seen))
    return replace(result, environment=env)


def _case_result(p: Planned, case: Case, spec: HardwareSpec, impls: Sequence[ImplResult],
                 *, floor_spec: HardwareSpec | None = None, device_kind: str = "cuda") -> CaseResult:
    from solbench.analysis.scoring import ImplPeaks, score_impls

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


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def gate_live(base: RunResult, cur: RunResult, files: Sequence[str | Path], options: RunOptions, *,
              rerun: int, device: str = "auto", **gate_kwargs: Any) -> Any:
    """Gate ``cur`` against ``base``, re-measuring suspect cases up to ``rerun`` times first.

    Thresholds: an explicit ``threshold`` in ``gate_kwargs`` wins; otherwise each workload's
    ``gate_threshold`` as the runs recorded it (``RunResult.gate_thresholds``), else 5%.
    """
    from solbench.gate import gate_with_rerun

    def remeasure(keys: list[str]) -> RunResult:
        return run(files, replace(options, keys=tuple(keys)), device=device)

    return gate_with_rerun(base, cur, remeasure, rerun, **gate_kwargs)
