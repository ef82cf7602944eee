"""The pieces a worker assembles a measurement from: inputs and references, requirements,
set-up and bound calls, tolerances. :mod:`solbench.measure.worker` runs them in order.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from solbench.impls.registry import resolve
from solbench.measure import tensors
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
        refs.append(tensors.as_outputs(value, names, strict=False))
        sets.append(inputs)
    return CaseInputs(tuple(sets), tuple(refs))


def missing_requirement(impl: Implementation, device: str) -> str | None:
    """Why an implementation cannot run on this device (its first unmet ``requires``), or None."""
    from solbench.kernels.requirements import requirement_missing

    for need in impl.requires:
        reason = requirement_missing(need, device)
        if reason is not None:
            return reason
    return None


def build_launches(impl: Implementation, case: Case, sets: Sequence[Mapping[str, torch.Tensor]],
                   base_dir: Path | None, *, with_kwargs: bool = False) -> Any:
    """One zero-argument call per input set: ``fn`` bound to its set-up's keyword arguments.

    With ``with_kwargs``, returns ``(launches, kwargs)`` so that checks can see what each call got.
    """
    fn = resolve(impl.fn, base_dir)
    setup = resolve(impl.setup, base_dir) if impl.setup else None
    launches: list[Callable[[], Any]] = []
    all_kwargs: list[dict[str, Any]] = []
    for inputs in sets:
        extra = {k: v for k, v in impl.params.items() if setup and _accepts(setup, k)}
        kwargs = dict(_call(setup, {**inputs, **extra}, case.params)) if setup else dict(inputs)
        kwargs.update(impl.params)  # fixed (e.g. tuned) keyword arguments of fn
        launches.append(functools.partial(fn, **kwargs, **_params_for(fn, case.params, kwargs)))
        all_kwargs.append(kwargs)
    return (launches, all_kwargs) if with_kwargs else launches


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` takes a keyword argument ``name`` (by name or through ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def tolerance_for(spec: WorkloadSpec, impl: Implementation,
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
