"""Run one case: make inputs, compute the reference, check and time each implementation.

Each implementation goes through: requirements -> set-up (once per input set, untimed) ->
correctness on every input set (outputs poisoned first) -> timing. An incorrect implementation
is reported and not timed. ``run_impl`` takes only plain data, so that it can later run in a
worker process of its own.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from solbench.errors import DeviceError
from solbench.impls.registry import ResolveError, resolve
from solbench.measure import tensors
from solbench.measure.criteria import CIWidth
from solbench.measure.loop import Timer, measure
from solbench.results.model import ImplResult
from solbench.workload.cases import Case
from solbench.workload.schema import Implementation, WorkloadSpec


@dataclass(frozen=True)
class CaseInputs:
    """Input sets of one case and the reference outputs for each."""

    sets: tuple[dict[str, torch.Tensor], ...]
    references: tuple[tuple[torch.Tensor, ...], ...]


def prepare_case(spec: WorkloadSpec, case: Case, device: str, base_dir: Path | None,
                 *, input_sets: int, seed: int) -> CaseInputs:
    """Draw ``input_sets`` fresh input sets and compute the reference on each."""
    reference = resolve(spec.reference, base_dir)
    names = [t.name for t in case.outputs]
    sets, refs = [], []
    for k in range(input_sets):
        inputs = tensors.make_inputs(case, device, seed + k)
        with _exact_fp32():
            value = _call(reference, tensors.upcast(inputs, spec.reference_dtype), case.params)
        refs.append(tensors.as_outputs(value, names))
        sets.append(inputs)
    return CaseInputs(tuple(sets), tuple(refs))


def missing_requirement(impl: Implementation, device: str) -> str | None:
    """Why an implementation cannot run on this device, or None."""
    for need in impl.requires:
        if need in ("cuda", "compile") and device != "cuda":
            return f"needs CUDA ({need})"
        if need == "cupy":
            try:
                import cupy  # noqa: F401
            except ImportError:
                return "needs CuPy (pip install 'solbench[cuda12]' or '[cuda13]')"
        if need == "fp8" and (device != "cuda" or torch.cuda.get_device_capability() < (8, 9)):
            return "needs FP8 tensor cores (compute capability 8.9+)"
    return None


def run_impl(name: str, impl: Implementation, spec: WorkloadSpec, case: Case,
             inputs: CaseInputs, timer: Timer, criterion: CIWidth, *, device: str,
             base_dir: Path | None, warmup: int,
             on_sample: Callable[[int], None] | None = None) -> ImplResult:
    """Check, then time, one implementation on one case."""
    reason = missing_requirement(impl, device)
    if reason is not None:
        return ImplResult(name, "skipped", reason)
    try:
        launches = build_launches(impl, case, inputs.sets, base_dir)
    except ResolveError:
        raise
    except DeviceError as exc:  # a device library it needs is missing here: not its fault
        return ImplResult(name, "skipped", str(exc))
    except Exception as exc:  # the implementation's own failure, reported per case
        return ImplResult(name, "error", f"set-up failed: {type(exc).__name__}: {exc}")
    atol, rtol, rel_l2 = _tolerance(spec, impl, case.dtype)
    correctness = None
    for k, launch in enumerate(launches):
        tensors.poison_allocator(case, device)
        try:
            out = tensors.as_outputs(launch(), [t.name for t in case.outputs])
        except DeviceError as exc:
            return ImplResult(name, "skipped", str(exc))
        except Exception as exc:
            return ImplResult(name, "error", f"{type(exc).__name__}: {exc}")
        correctness = tensors.compare(out, inputs.references[k], case, rtol, atol, rel_l2)
        if not correctness.passed:
            return ImplResult(name, "incorrect", f"input set {k}: {correctness.detail}", correctness)
    try:
        timing = measure(timer, launches, criterion, warmup=warmup, on_sample=on_sample)
    except Exception as exc:
        return ImplResult(name, "error", f"timing failed: {type(exc).__name__}: {exc}", correctness)
    return ImplResult(name, "ok", "", correctness, timing)


def build_launches(impl: Implementation, case: Case, sets: Sequence[Mapping[str, torch.Tensor]],
              base_dir: Path | None) -> list[Callable[[], Any]]:
    fn = resolve(impl.fn, base_dir)
    setup = resolve(impl.setup, base_dir) if impl.setup else None
    launches: list[Callable[[], Any]] = []
    for inputs in sets:
        extra = {k: v for k, v in impl.params.items() if setup and _accepts(setup, k)}
        kwargs = dict(_call(setup, {**inputs, **extra}, case.params)) if setup else dict(inputs)
        kwargs.update(impl.params)  # fixed (e.g. tuned) keyword arguments of fn
        launches.append(functools.partial(fn, **kwargs, **_params_for(fn, case.params, kwargs)))
    return launches


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` takes a keyword argument ``name`` (by name or through ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _tolerance(spec: WorkloadSpec, impl: Implementation,
               dtype: str) -> tuple[float, float, float | None]:
    tol = impl.tolerance or spec.tolerances.get(dtype)  # type: ignore[call-overload]
    if tol is not None:
        return tol.atol, tol.rtol, tol.rel_l2
    atol, rtol = tensors.DEFAULT_TOLERANCES.get(dtype, (1e-2, 1e-2))
    return atol, rtol, None


def _call(fn: Callable[..., Any], inputs: Mapping[str, Any], params: Mapping[str, Any]) -> Any:
    return fn(**inputs, **_params_for(fn, params, inputs))


def _params_for(fn: Callable[..., Any], params: Mapping[str, Any],
                taken: Mapping[str, Any]) -> dict[str, Any]:
    """Case parameters the function asks for by name (and that inputs do not already give)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return {}
    return {k: v for k, v in params.items() if k in sig.parameters and k not in taken}


class _exact_fp32:
    """Reference math in true fp32: no TF32 on CUDA matmuls and convolutions."""

    def __enter__(self) -> None:
        self._saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    def __exit__(self, *exc: object) -> None:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = self._saved
