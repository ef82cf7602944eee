"""Workload files -> planned workloads: cases expanded and every op costed before anything runs.

    plan(files, device_kind)   -> [Planned]   (ConfigError naming file, line and field)
    dry_run(files, spec)       -> RunResult   (FLOPs, bytes and T_SOL; nothing measured)
    case_result(p, case, ...)  -> CaseResult  (a case's cost, T_SOL and its implementations scored)
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from solbench._version import __version__
from solbench.analysis.cost import case_cost, value_bytes
from solbench.analysis.hwspec import summary_source
from solbench.analysis.scoring import ImplPeaks, score_impls
from solbench.analysis.sol import speed_of_light
from solbench.config.workloads import load_workload_file, validate_references
from solbench.config.yamlio import read_yaml, yaml_files
from solbench.errors import ConfigError
from solbench.results.model import CaseResult, Cost, Environment, ImplResult, Peaks, Protocol, RunResult, SpecRef
from solbench.text import guessed, seconds
from solbench.workload.cases import Case, CaseError, case_matches, expand, parameter_names
from solbench.workload.schema import ParamValue, WorkloadSpec, first_repeat

if TYPE_CHECKING:
    from solbench.analysis.hwspec import HardwareSpec


@dataclass(frozen=True)
class Planned:
    """One workload of a file with its expanded cases (and, for a traced cost, each case's cost)."""

    spec: WorkloadSpec
    path: Path
    index: int
    cases: tuple[Case, ...]
    costs: Mapping[str, Cost] = field(default_factory=dict)  # case id -> traced cost
    skipped: tuple[tuple[str, str], ...] = ()  # (case id, why): cases this machine cannot trace or run

    def skip_notes(self) -> list[str]:
        """A run note for each case left out (``skipped <case id>: <why>``; the CLI prints them)."""
        return [f"skipped {case_id}: {why}" for case_id, why in self.skipped]


def load_specs(path: Path, device_kind: str, only: Sequence[str], impls: Sequence[str],
               solutions: Sequence[str | Path] = (),
               used: set[Path] | None = None) -> list[tuple[WorkloadSpec, Path, int]]:
    """The workloads of one path: a solbench YAML file, or problems of a suite (solbench.suites);
    ``used``: the solutions that joined a problem are added to it."""
    from solbench.suites import NoProblems, detect, load

    yamls = yaml_files(path) if path.is_dir() else []
    if yamls:  # a folder of workload files: each, in name order
        return [entry for f in yamls for entry in load_specs(f, device_kind, only, impls, solutions, used)]
    try:
        suite = detect(path)
    except NoProblems:  # said below, with workload files among what a folder may hold
        suite = None
    if suite is not None:
        return [(spec, origin, 0) for spec, origin in load(path, solutions, used=used)]
    if path.is_dir():
        raise ConfigError(f"{path}: a folder with no workload file (.yaml, .yml), no KernelBench problem (.py files "
                          "defining Model) and no SOL-ExecBench problem (folders with definition.json)")
    specs = load_workload_file(path)
    for i, spec in enumerate(specs):
        _check_source(path, i, spec)
    validate_references(path, specs, include=functools.partial(_checked, specs, only=only, impls=impls,
                                                               device_kind=device_kind))
    return [(spec, path, i) for i, spec in enumerate(specs)]


def _check_source(path: Path, index: int, spec: WorkloadSpec) -> None:
    """ConfigError at ``source.sha256`` of an imported workload whose problem file (a SOL-ExecBench
    problem's definition.json or workload.jsonl) changed since the import: the run would record the
    import's sha256 as the provenance of a file it did not run."""
    src = spec.source
    if src is None:
        return
    from solbench.suites.kernelbench import sha256

    problem = Path(src.path)
    files = (problem / "definition.json", problem / "workload.jsonl") if src.suite == "sol-execbench" else (problem,)
    try:
        now = sha256(*files)
    except OSError as exc:
        raise located(path, ["workloads", index, "source", "path"],
                      f"cannot read the imported problem {exc.filename or files[0]}: {exc.strerror or exc}") from None
    if now != src.sha256:
        raise located(path, ["workloads", index, "source", "sha256"],
                      f"{' or '.join(map(str, files))} changed since it was imported (its sha256 is now {now[:12]}..., "
                      f"not {src.sha256[:12]}...): import it again (solbench import --force)")


def plan(files: Sequence[str | Path], device_kind: str, only: Sequence[str] = (),
         impls: Sequence[str] = (), solutions: Sequence[str | Path] = (), *, cases: Sequence[str] = (),
         overrides: Mapping[str, Sequence[ParamValue]] | None = None, require_impls: bool = True,
         require_workloads: bool = True) -> list[Planned]:
    """Load workload files (or suite problems) and expand their cases for a device kind ("cpu" or
    "cuda"); a workload with ``cost: traced`` or traced shapes is traced case by case.

    ``only`` and ``impls`` (workload and implementation names) must each name something that
    exists, or this raises a ConfigError listing what does (``impls`` only with ``require_impls``:
    ``ab`` checks them over both trees; ``only`` only with ``require_workloads``: files with none of
    them plan nothing, and ``ab`` refuses such a baseline tree). ``solutions``: solution files of
    suite problems (``run --solution``). ``overrides`` (``--set``) replaces the values of the parameters
    it names; ``cases`` (``--case``) keeps the cases that match one of its patterns
    (:func:`~solbench.workload.cases.case_matches`); each must apply somewhere.
    """
    for option, names in (("-w", only), ("-i", impls)):  # "-w '$W'" unset: "no workload named  in ..."
        blank = next((n for n in names if not n.strip()), None)
        if blank is not None:
            raise ConfigError(f"{option}: {blank!r} names nothing (an unset variable?); give a name, or leave "
                              f"{option} out")
    for pattern in cases or ():  # an empty or blank pattern has no item to match: it kept every case
        if not any(item.strip() for item in pattern.split(",")):
            raise ConfigError(f"--case: {pattern!r} names no case (an unset variable?); give a case id or "
                              "name=value items")
    for name, values in (overrides or {}).items():
        j = first_repeat(values)
        if j is not None:
            raise ConfigError(f"--set {name}={','.join(map(str, values))}: {values[j]} is given twice (each case once)")
    planned: list[Planned] = []
    every_id: list[str] = []
    known: set[str] = set()
    first: dict[str, Path] = {}  # workload name -> the file that defined it
    used: set[Path] = set()
    for f in files:
        if isinstance(f, str) and not f.strip():  # Path("") is the current folder: every workload file in it
            raise ConfigError(f"{f!r} names no workload file or folder (an unset variable?)")
        for spec, path, i in load_specs(Path(f), device_kind, only, impls, solutions, used):
            if spec.name in first:
                again = "given twice" if Path(first[spec.name]).resolve() == Path(path).resolve() else \
                    f"also defined in {first[spec.name]}"
                raise ConfigError(f"{path}: workload {spec.name!r} {again}: a run measures each workload once, and "
                                  "its cases must be unique to compare or gate it (rename one, or give the file once)")
            first[spec.name] = path
            known.add(spec.name)
            if only and spec.name not in only:
                continue
            _check_set_types(spec, path, device_kind, overrides or {})
            try:
                expanded = tuple(expand(spec, device_kind, overrides))
            except CaseError as exc:
                given = [f"{k}={','.join(map(str, v))}" for k, v in (overrides or {}).items()
                         if k in parameter_names(spec, device_kind)]
                raise located(path, ["workloads", i, *exc.loc], str(exc) + (
                    f" (with --set {' '.join(given)})" if given else "")) from None
            ids = [c.id for c in expanded]
            j = first_repeat(ids)
            if j is not None:  # e.g. --set over explicit cases, or 1e-20 (text in YAML) beside 1.0e-20
                field = "cases" if spec.cases else "parameters"  # where the two came from
                raise located(path, ["workloads", i, field], f"case {ids[j]} would be measured twice"
                              + (" (--set gives every listed case the same value)" if overrides else "")
                              + "; each case once")
            every_id += ids
            if cases:
                expanded = tuple(c for c in expanded if any(case_matches(c.id, pat) for pat in cases))
            expanded, costs, skipped = _traced(spec, path, expanded, _real_device(device_kind))
            p = Planned(spec, path, i, expanded, costs, skipped)
            for case in expanded:  # every op of every case is costed before anything is measured
                cost = cost_of(p, case)
                for name in spec.implementations:
                    impl_cost(p, case, name, cost)
            planned.append(p)
    if solutions:
        from solbench.suites import check_solutions_used

        check_solutions_used(solutions, used, files)
    if only:
        missing = sorted(set(only) - {p.spec.name for p in planned})
        if missing and require_workloads:
            raise ConfigError(f"-w: no workload named {guessed(missing, known)} in {', '.join(map(str, files))} "
                              f"(there are: {', '.join(sorted(known))})")
        if not planned:  # none of them here (ab's baseline tree): before --set and --case find nothing to apply to
            return []
    _check_selection(planned, every_id, device_kind, cases, overrides or {})
    if impls and require_impls:
        known_impls = {n for p in planned for n in p.spec.implementations}
        missing = sorted(set(impls) - known_impls)
        if missing:
            raise ConfigError(f"-i: no implementation named {guessed(missing, known_impls)} in the selected workloads "
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


def _check_set_types(spec: WorkloadSpec, path: Path, device_kind: str,
                     overrides: Mapping[str, Sequence[ParamValue]]) -> None:
    """ConfigError naming ``--set`` for a text value given to a parameter the file sweeps in numbers
    (``--set n=abc``), before any expression would blame the file for it."""
    profile = spec.profiles.get(device_kind)  # type: ignore[call-overload]
    declared: dict[str, list[Any]] = {k: list(v) for k, v in spec.parameters.items()}
    if profile is not None and profile.parameters is not None:
        declared.update({k: list(v) for k, v in profile.parameters.items()})
    for c in spec.cases or []:
        for k, v in c.items():
            declared.setdefault(k, []).append(v)
    for name, values in overrides.items():
        numeric = declared.get(name) and all(isinstance(v, int | float) and not isinstance(v, bool)
                                             for v in declared[name])
        text = [v for v in values if isinstance(v, str)]
        if numeric and text:
            raise ConfigError(f"--set {name}={','.join(map(str, values))}: {name} is a number in {path} (workload "
                              f"{spec.name!r}: {', '.join(map(str, declared[name][:6]))}), got {text[0]!r}")


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
    """Whether ``-i`` selects an implementation: all when none is named; the baseline and the byte
    floor (``part: floor``) always."""
    return not impls or impl in impls or impl == spec.baseline or spec.implementations[impl].part == "floor"


def _real_device(device_kind: str) -> str:
    """Where a reference that cannot run on the meta device is traced: this machine's device of
    that kind, or nowhere ("meta") for a what-if on a GPU this machine does not have."""
    if device_kind == "cpu":
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "meta"


def _traced(spec: WorkloadSpec, path: Path, cases: tuple[Case, ...], device: str = "meta",
            ) -> tuple[tuple[Case, ...], dict[str, Cost], tuple[tuple[str, str], ...]]:
    """Cases with traced shapes filled in and, for ``cost: traced``, their traced costs (on the meta
    device; a reference that cannot run there is traced on ``device`` with real inputs). A case
    whose inputs this machine lacks (a safetensors file that is not here) is left out and listed
    with the reason: skipped, not an error."""
    if spec.cost != "traced" and not any(c.traced for c in cases):
        return cases, {}, ()
    from solbench.errors import DeviceError
    from solbench.suites.trace import probe_on

    done, costs, skipped = [], {}, []
    for case in cases:
        try:
            filled, cost, _ = probe_on(spec, case, path.parent, device)
        except DeviceError as exc:
            skipped.append((case.id, str(exc)))
            continue
        except ConfigError as exc:
            raise ConfigError(f"{path}: workload {spec.name!r}, case {case.id}: {exc}") from None
        except ModuleNotFoundError as exc:  # the reference needs a package this machine lacks: not a bad file
            from solbench.kernels.requirements import not_installed

            if not not_installed(exc):
                raise
            skipped.append((case.id, f"the reference needs the Python module {exc.name!r}, which is not installed "
                                     "here"))
            continue
        except Exception as exc:
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            if device == "meta":  # a what-if (--gpu) on a machine without that device: nowhere to trace it
                skipped.append((case.id, f"no cost: the reference cannot run on the meta device ({type(exc).__name__}: "
                                         f"{text[:160]}) and this machine has no GPU to trace it on with real inputs"))
                continue
            where = f"the meta device and on {device}"
            raise ConfigError(f"{path}: workload {spec.name!r}, case {case.id}: tracing the reference on "
                              f"{where} raised {type(exc).__name__}: {text[:300]}") from None
        done.append(filled)
        if spec.cost == "traced":
            costs[filled.id] = cost
    return tuple(done), costs, tuple(skipped)


def located(path: Path, loc: Sequence[str | int], message: str) -> ConfigError:
    """An error at ``loc`` of a workload file: its YAML line, or the file alone for a suite's problem."""
    if path.suffix in (".yaml", ".yml"):
        return read_yaml(path).error(loc, message)
    return ConfigError(f"{path}: {message}")


def cost_of(p: Planned, case: Case) -> Any:
    """The cost of a case: traced (at plan time) or analytic; a bad op field (or a negative ``flops:``
    or ``bytes:``) is a ConfigError naming the file and line."""
    if case.id in p.costs:
        return p.costs[case.id]
    try:
        return case_cost(case, [op.model_dump(exclude_none=True) for op in p.spec.ops],
                         flops=p.spec.flops, bytes_=p.spec.bytes)
    except CaseError as exc:  # an op (at its field), or the flops: or bytes: override
        raise located(p.path, ["workloads", p.index, *exc.loc], str(exc)) from None


def impl_cost(p: Planned, case: Case, impl: str, cost: Cost | None = None) -> Cost:
    """The cost an implementation is scored against: the case's (``cost``, else :func:`cost_of`), with
    the inputs it reads in a narrower dtype made once in set-up (``input_dtypes``: a weight quantized to
    FP8) counted at that width. An input it would widen is a ConfigError naming the file and line."""
    cost = cost if cost is not None else cost_of(p, case)
    narrowed = p.spec.implementations[impl].input_dtypes
    if not narrowed:
        return cost
    saved = 0.0
    tensors = {t.name: t for t in case.inputs}
    for name, dtype in narrowed.items():
        t = tensors[name]
        if value_bytes(dtype) > value_bytes(t.dtype):
            raise located(p.path, ["workloads", p.index, "implementations", impl, "input_dtypes", name],
                          f"widens {name!r} from {t.dtype} to {dtype} at case {case.id}: an implementation may only "
                          "read an input narrower (wider, its T_SOL would count bytes the work does not need)")
        values = t.nbytes / value_bytes(t.dtype)  # a packed dtype's element (float4_e2m1fn_x2) holds two
        saved += t.nbytes - values * value_bytes(dtype)
    if not saved:
        return cost
    return dataclasses.replace(cost, fused_bytes=cost.fused_bytes - saved)


def dry_run(files: Sequence[str | Path], spec: HardwareSpec, only: Sequence[str] = (),
            impls: Sequence[str] = (), solutions: Sequence[str | Path] = (), *, select: Sequence[str] = (),
            overrides: Mapping[str, Sequence[ParamValue]] | None = None, notes: Sequence[str] = ()) -> RunResult:
    """FLOPs, bytes and T_SOL of every case against ``spec``, without running anything
    (``select``, ``overrides``: as :func:`plan`'s ``cases`` and ``overrides``; ``notes``: what the
    run must say about ``spec``'s peaks, as :func:`solbench.plan.prepare.device_notes` gives them for
    a detected device, kept in the run's notes as a measured run keeps them)."""
    kind = "cpu" if spec.kind == "cpu" else "cuda"
    cases, skipped = [], []
    planned = plan(files, kind, only, impls, solutions, cases=select, overrides=overrides)
    for p in planned:
        skipped += p.skip_notes()
        for case in p.cases:
            cases.append(case_result(p, case, spec, ()))
        skipped += own_t_sol_notes(p, spec, impls)
    skipped += no_tensor_unit_notes(planned, spec)
    if spec.link_bandwidth is None and any(c.cost.bus_bytes for c in cases):  # as a measured run says per result
        skipped.append(f"peaks: {spec.name} has no interconnect bandwidth (nvlink_gbs, pcie_gbs): the T_SOL of "
                       "a case with a collective has no link term")
    env = Environment(device_kind=kind, device_name=spec.name, spec_id=spec.id, solbench=__version__)
    protocol = Protocol("none", 0, 0, 0, 0.0, 0.0, 0)
    return RunResult(now(), env, SpecRef(spec.id, spec.name, spec.source), protocol, tuple(cases),
                     tuple(str(f) for f in files), notes=("dry run: nothing was measured", *notes, *skipped))


def no_tensor_unit_notes(planned: Sequence[Planned], spec: HardwareSpec) -> list[str]:
    """One note per case dtype with matrix FLOPs that ``spec`` has no tensor unit for (bf16 on a V100 or
    T4, fp8 on an A100): those FLOPs are scored against the vector peak, and the tables say only
    "compute", so the run must say which peak its SOL and MFU are against. A CPU has no tensor peak at
    all, and its spec says so for every dtype."""
    if spec.kind == "cpu":
        return []
    found: dict[str, list[str]] = {}
    for p in planned:
        for case in p.cases:
            cost = cost_of(p, case)
            if cost.tensor_flops > 0 and peaks_at(spec, case.dtype, p.spec.fp32_peak, cost).tensor_flops is None:
                found.setdefault(case.dtype, []).append(case.id)
    return [f"peaks: {spec.name} has no {dtype} tensor unit: the matrix FLOPs of {len(ids)} {dtype} case(s) "
            f"(e.g. {ids[0]}) are scored against its vector peak (CUDA cores), SOL and MFU with them; a kernel "
            "that runs them on another dtype's tensor cores can read faster than that T_SOL (INVALID)"
            for dtype, ids in found.items()]


def own_t_sol_notes(p: Planned, spec: HardwareSpec, impls: Sequence[str] = ()) -> list[str]:
    """For a dry run, one note per implementation of ``p`` (of ``impls``, if given) scored against a
    T_SOL of its own (``peak_dtype``, ``input_dtypes``: an FP8 GEMM) where it differs from the case's
    that the table shows: each case's own T_SOL, as :func:`case_result` scores a measured one."""
    notes = []
    for name, impl in p.spec.implementations.items():
        if (impls and name not in impls) or not (impl.peak_dtype or impl.input_dtypes):
            continue
        own, differs = [], False
        for case in p.cases:
            cost, mine = cost_of(p, case), impl_cost(p, case, name)
            sol = speed_of_light(mine, peaks_at(spec, impl.peak_dtype or case.dtype, p.spec.fp32_peak, mine))
            theirs = speed_of_light(cost, peaks_at(spec, case.dtype, p.spec.fp32_peak, cost)).t_sol
            differs = differs or abs(sol.t_sol - theirs) > 1e-9 * theirs
            own.append(f"{case.id} {seconds(sol.t_sol)} ({sol.bound})")
        if not differs:
            continue
        peak = "" if not impl.peak_dtype else f"the {impl.peak_dtype} peak" \
            if spec.peaks_for(impl.peak_dtype).tensor_flops is not None else \
            f"no {impl.peak_dtype} tensor unit here: its matrix FLOPs at the vector peak"
        why = "; ".join(filter(None, [peak,
                                      ", ".join(f"{k} read as {v}" for k, v in impl.input_dtypes.items())]))
        notes.append(f"peaks: {p.spec.name} {name} is scored against its own T_SOL ({why}), not the table's: "
                     + ", ".join(own))
    return notes


def case_result(p: Planned, case: Case, spec: HardwareSpec, impls: Sequence[ImplResult],
                *, floor_spec: HardwareSpec | None = None, device_kind: str = "cuda") -> CaseResult:
    """A case's cost and T_SOL against ``spec``, its implementations scored (SOL, MFU, S, INVALID
    against ``floor_spec``, default ``spec``)."""
    cost = cost_of(p, case)
    policy = p.spec.fp32_peak
    # the INVALID floor prices fp32 work at the TF32 rate whatever the scoring policy: a float32 case
    # run on TF32 tensor cores that passes its tolerance beats the CUDA-core T_SOL honestly
    floor_policy = "tf32" if policy in ("fp32", "torch") else policy
    peaks = peaks_at(spec, case.dtype, policy, cost)
    floor = floor_spec or spec
    per_impl = {}
    for r in impls:
        dtype = p.spec.implementations[r.name].peak_dtype or case.dtype
        own = impl_cost(p, case, r.name, cost)
        note = "; ".join(filter(None, [
            f"scored against the {dtype} peak" if dtype != case.dtype else "",
            f"scored against its own {own.fused_bytes:.0f} fused bytes (the case's: {cost.fused_bytes:.0f}; "
            f"it reads {', '.join(f'{k} as {v}' for k, v in p.spec.implementations[r.name].input_dtypes.items())})"
            if own.fused_bytes != cost.fused_bytes else ""]))
        per_impl[r.name] = ImplPeaks(peaks_at(spec, dtype, policy, own), peaks_at(floor, dtype, floor_policy, own),
                                     note, own, dtype if dtype != case.dtype else "")
    sol = speed_of_light(cost, peaks)
    scored = score_impls(cost, impls, per_impl, p.spec.baseline, device_kind)
    src = p.spec.source
    return CaseResult(case.workload, case.id, dict(case.params), case.dtype, cost, peaks, sol.t_sol,
                      sol.bound, sol.intensity, scored, p.spec.baseline,
                      source=f"{src.suite}:{src.path}@{src.sha256}" if src is not None else "",
                      peak_policy=policy if case.dtype == "float32" else "")


def peaks_at(spec: HardwareSpec, dtype: str, policy: str, cost: Cost | None = None) -> Peaks:
    """The spec's peaks for ``dtype``; an fp32 case's tensor peak by the workload's ``fp32_peak``
    policy: fp32 (CUDA cores), tf32, the fp16 tensor rate (as SOLAR prices fp32 problems), or torch.

    torch: the cost's convolution FLOPs at the TF32 peak and the rest at the fp32 peak, as one
    tensor peak that takes the same time for the whole (F / (F_conv / P_tf32 + F_rest / P_fp32)).
    torch runs fp32 convolutions on TF32 tensor cores by default; priced at the fp32 peak, 12 of
    KernelBench's level-1 convolutions read SOL 1.2-3.2 on an H200.
    """
    if dtype != "float32" or policy == "fp32":
        return spec.peaks_for(dtype)
    if policy == "tf32":
        return spec.peaks_for(dtype, tf32=True)
    if policy == "torch":
        base, tf32 = spec.peaks_for(dtype), spec.peaks_for(dtype, tf32=True).tensor_flops
        total = cost.tensor_flops if cost is not None else 0.0
        conv = min(cost.conv_flops, total) if cost is not None else 0.0
        if not conv or not tf32 or not base.tensor_flops:
            return base
        seconds = conv / tf32 + (total - conv) / base.tensor_flops
        tf32_source = spec.peaks_for(dtype, tf32=True).tensor_source
        return _with_tensor(base, total / seconds, summary_source(tf32_source, base.tensor_source))
    fp16 = spec.peaks_for("float16")
    base = spec.peaks_for(dtype)
    if fp16.tensor_flops is None:
        return base
    return _with_tensor(base, fp16.tensor_flops, fp16.tensor_source)


def _with_tensor(peaks: Peaks, flops: float, source: str) -> Peaks:
    """``peaks`` with another tensor peak, which came from ``source``."""
    return dataclasses.replace(peaks, tensor_flops=flops, tensor_source=source,
                               source=summary_source(source, peaks.vector_source, peaks.bandwidth_source))


def now() -> str:
    """The current UTC time as a run's ``created`` stamp."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
