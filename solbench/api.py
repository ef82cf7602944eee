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
from solbench.analysis.sol import is_below_sol, score, speed_of_light
from solbench.config.workloads import load_workload_file
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

    timer: str = "cold"  # "cold", "graph"; the CPU always uses "cpu"
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
    flush: str = "write"  # cold timer: "write" (nvbench's) or "clean" (no dirty lines left in L2)
    results_dir: Path = Path("results")


Progress = Callable[[str, dict[str, Any]], None]


def plan(files: Sequence[str | Path], device_kind: str, only: Sequence[str] = ()) -> list[Planned]:
    """Load workload files and expand their cases for a device kind ("cpu" or "cuda")."""
    planned = []
    for f in files:
        path = Path(f)
        for i, spec in enumerate(load_workload_file(path)):
            if only and spec.name not in only:
                continue
            try:
                cases = tuple(expand(spec, device_kind))
            except CaseError as exc:
                raise read_yaml(path).error(["workloads", i, *exc.loc], str(exc)) from None
            planned.append(Planned(spec, path, i, cases))
    if only and not planned:
        raise ConfigError(f"no workload named {', '.join(only)} in {', '.join(map(str, files))}")
    return planned


def cost_of(p: Planned, case: Case) -> Any:
    """Analytic cost of a case; a bad op field is a ConfigError naming the file and line."""
    try:
        return case_cost(case, [op.model_dump(exclude_none=True) for op in p.spec.ops],
                         flops=p.spec.flops, bytes_=p.spec.bytes)
    except ValueError as exc:
        raise read_yaml(p.path).error(["workloads", p.index, "ops"], str(exc)) from None


def dry_run(files: Sequence[str | Path], spec: HardwareSpec, only: Sequence[str] = ()) -> RunResult:
    """FLOPs, bytes and T_SOL of every case against ``spec``, without running anything."""
    kind = "cpu" if spec.kind == "cpu" else "cuda"
    cases = []
    for p in plan(files, kind, only):
        for case in p.cases:
            cases.append(_case_result(p, case, spec, (), tf32=False))
    env = Environment(device_kind=kind, device_name=spec.name, spec_id=spec.id, solbench=__version__)
    protocol = Protocol("none", 0, 0, 0, 0.0, 0.0, 0)
    return RunResult(_now(), env, SpecRef(spec.id, spec.name, spec.source), protocol, tuple(cases),
                     tuple(str(f) for f in files), notes=("dry run: nothing was measured",))


def run(files: Sequence[str | Path], options: RunOptions = RunOptions(), *,
        device: str = "auto", progress: Progress | None = None,
        on_case: Callable[[RunResult], None] | None = None) -> RunResult:
    """Check and time every implementation of every case on the detected device."""
    from solbench.device.detect import detect  # device code only when measuring

    info = detect(device)
    if options.peaks == "measured":
        info = replace(info, spec=measured_spec(info.spec, info.uuid, options.results_dir))
    planned = plan(files, info.kind, options.workloads)
    timer = _make_timer(info, options.timer, options.flush)
    protocol = Protocol(timer.name, options.warmup, options.min_samples, options.max_samples,
                        options.target_rel_ci, options.budget_s, options.input_sets)
    run_result = RunResult(_now(), info.environment(), SpecRef(info.spec.id, info.spec.name, info.spec.source),
                           protocol, (), tuple(str(f) for f in files))
    total = sum(1 for p in planned for c in p.cases
                if not options.keys or any(k.startswith(c.id + "/") for k in options.keys))
    emit = progress or (lambda event, data: None)
    emit("start", {"cases": total})
    for p in planned:
        for case in p.cases:
            if options.keys and not any(k.startswith(case.id + "/") for k in options.keys):
                continue
            impls = _measure_case(p, case, info, timer, options, emit)
            result = _case_result(p, case, info.spec, impls, tf32=False)
            run_result = replace(run_result, cases=(*run_result.cases, result),
                                 protocol=replace(protocol, **timer.protocol()))
            if on_case is not None:
                on_case(run_result)
            emit("case_done", {"case": case.id})
    emit("done", {})
    return replace(run_result, environment=_with_end_clocks(run_result.environment, info))


def _with_end_clocks(env: Environment, info: Any) -> Environment:
    """The SM clock and clocks-event reasons right after measuring (the start reading is often idle)."""
    if info.kind != "cuda" or info.uuid is None:
        return env
    from solbench.device import nvml

    handle = nvml.get_handle(info.uuid)
    if handle is None:
        return env
    sample = nvml.read_clocks(handle)
    return replace(env, sm_clock_end_mhz=sample.sm_clock_mhz,
                   clock_event_reasons_end=sample.clocks_event_reasons)


def _measure_case(p: Planned, case: Case, info: Any, timer: Any, options: RunOptions,
                  emit: Progress) -> list[ImplResult]:
    from solbench.measure.criteria import CIWidth
    from solbench.measure.runner import prepare_case, run_impl

    criterion = CIWidth(options.target_rel_ci, options.min_samples, options.max_samples, options.budget_s)
    base_dir = p.path.parent
    device = info.kind
    try:
        inputs = prepare_case(p.spec, case, device, base_dir, input_sets=options.input_sets,
                              seed=options.seed)
    except Exception as exc:
        _reraise_config(exc, p, ["reference"])
        return [ImplResult(n, "error", f"reference failed: {type(exc).__name__}: {exc}")
                for n in p.spec.implementations]
    results = []
    for name, impl in p.spec.implementations.items():
        if options.impls and name not in options.impls and name != p.spec.baseline:
            continue
        if options.keys and f"{case.id}/{name}" not in options.keys:
            continue
        emit("impl", {"case": case.id, "impl": name})
        try:
            r = run_impl(name, impl, p.spec, case, inputs, timer, criterion, device=device,
                         base_dir=base_dir, warmup=options.warmup,
                         on_sample=functools.partial(_emit_sample, emit, name))
        except Exception as exc:
            _reraise_config(exc, p, ["implementations", name, "fn"])
            raise
        results.append(r)
        emit("impl_done", {"case": case.id, "impl": name, "status": r.status})
    return results


def _emit_sample(emit: Progress, impl: str, n: int) -> None:
    emit("sample", {"impl": impl, "n": n})


def _reraise_config(exc: Exception, p: Planned, loc: list[str | int]) -> None:
    from solbench.impls.registry import ResolveError

    if isinstance(exc, ResolveError):
        raise read_yaml(p.path).error(["workloads", p.index, *loc], str(exc)) from None


def _case_result(p: Planned, case: Case, spec: HardwareSpec, impls: Sequence[ImplResult],
                 *, tf32: bool) -> CaseResult:
    cost = cost_of(p, case)
    peaks = spec.peaks_for(case.dtype, tf32=tf32)
    sol = speed_of_light(cost, peaks)
    baseline = next((r for r in impls if r.name == p.spec.baseline and r.status == "ok"), None)
    t_base = baseline.timing.median if baseline and baseline.timing else None
    scored = []
    for r in impls:
        if r.status != "ok" or r.timing is None:
            scored.append(r)
            continue
        dtype = p.spec.implementations[r.name].peak_dtype or case.dtype
        impl_peaks = peaks if dtype == case.dtype else spec.peaks_for(dtype, tf32=tf32)
        impl_sol = sol if dtype == case.dtype else speed_of_light(cost, impl_peaks)
        t = r.timing.median
        if is_below_sol(t, impl_sol.t_sol) and spec.source == "datasheet":
            scored.append(replace(r, status="invalid", message=(
                f"median {t:.3e} s is below T_SOL {impl_sol.t_sol:.3e} s: the timing or the "
                "cost model is wrong")))
            continue
        note = f"scored against the {dtype} peak" if dtype != case.dtype else r.message
        scored.append(replace(r, message=note, score=score(t, cost, impl_peaks, impl_sol, t_base)))
    return CaseResult(case.workload, case.id, dict(case.params), case.dtype, cost, peaks, sol.t_sol,
                      sol.bound, sol.intensity, tuple(scored), p.spec.baseline)


def _make_timer(info: Any, name: str, flush: str = "write") -> Any:
    from solbench.device import timer as timers

    if info.kind == "cpu":
        return timers.CpuTimer()
    import torch

    if name == "graph":
        return timers.CudaGraphTimer(torch)
    if name == "cold":
        return timers.CudaColdTimer(torch, info.l2_bytes, clean=flush == "clean")
    raise DeviceError(f"unknown timer {name!r} (cold, graph)")


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def hardware_spec(name: str | None) -> HardwareSpec:
    """The spec named (id or alias), or the detected device's spec when None."""
    if name is None:
        from solbench.device.detect import detect

        return detect("auto").spec
    from solbench.config.hwspecs import get_spec

    return get_spec(name)


def list_specs() -> tuple[HardwareSpec, ...]:
    """Every hardware spec shipped in hardware_specs/."""
    from solbench.config.hwspecs import load_specs

    return load_specs()


def list_workloads(paths: Sequence[str | Path]) -> list[tuple[Path, WorkloadSpec]]:
    """(file, workload) for every workload file in ``paths`` (files or folders)."""
    files: list[Path] = []
    for p in map(Path, paths):
        files.extend(sorted(p.glob("*.yaml")) if p.is_dir() else [p])
    return [(f, spec) for f in files for spec in load_workload_file(f)]


def device_summary() -> dict[str, Any]:
    """Detected device, matched spec, driver, versions and current clocks, for ``solbench info``."""
    from solbench.device.detect import detect

    info = detect("auto")
    env = info.environment()
    data: dict[str, Any] = {k: v for k, v in vars(env).items() if v is not None}
    data["spec_source"] = info.spec.source
    if info.spec.kind != "cpu":
        peaks = info.spec.peaks_for("bfloat16")
        data["bf16_tensor_peak_tflops"] = (peaks.tensor_flops or 0) / 1e12
    if info.spec.bandwidth is not None:
        data["bandwidth_tbs"] = info.spec.bandwidth / 1e12
    return data


def load_run(name_or_path: str, results_dir: Path = Path("results")) -> RunResult:
    """A saved run: a file path, or the newest run saved under that name."""
    from solbench.results import store

    return store.load(store.find(name_or_path, results_dir))


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


def measured_spec(spec: HardwareSpec, uuid: str | None, results_dir: Path) -> HardwareSpec:
    """The spec with the ceilings ``solbench calibrate`` measured on this device (others kept)."""
    from solbench.results import store

    if spec.kind == "cpu":
        return spec  # CPU peaks are always measured
    cal = store.load_calibration(results_dir, spec.id, uuid)
    kept = sorted(set(spec.tensor_peaks) - set(cal.tensor_peaks))
    note = f"measured ceilings of {cal.created}" + (f"; datasheet for {', '.join(kept)}" if kept else "")
    return spec.with_peaks(tensor={**spec.tensor_peaks, **cal.tensor_peaks},
                           vector={**spec.vector_peaks, **cal.vector_peaks},
                           bandwidth=cal.bandwidth, source="measured", note=note)


def calibrate(*, seconds: float = 1.0, results_dir: Path = Path("results"), device: str = "auto") -> Any:
    """Measure this GPU's ceilings and save them for ``run --peaks measured``."""
    import torch

    from solbench.device import calibrate as cal
    from solbench.device.detect import detect
    from solbench.results import store

    info = detect(device)
    if info.kind != "cuda":
        raise DeviceError("calibrate needs a CUDA GPU; CPU peaks are measured at every run")
    from solbench.device import nvml

    handle = nvml.get_handle(info.uuid) if info.uuid else None
    result = cal.calibrate(torch, spec_id=info.spec.id, device_name=info.name, device_uuid=info.uuid,
                           seconds=seconds,
                           sm_clock=(lambda: nvml.read_clocks(handle).sm_clock_mhz) if handle is not None else None)
    return result, store.save_calibration(result, results_dir), info.spec
