"""The pieces a worker assembles a measurement from: inputs and references, requirements,
set-up and bound calls, tolerances. :mod:`solbench.measure.worker` runs them in order.
"""

from __future__ import annotations

import contextlib
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
                 *, input_sets: int, seed: int, keep: Mapping[str, Any] | None = None) -> CaseInputs:
    """Draw ``input_sets`` fresh input sets and compute the reference on each; ``keep``: inputs every set
    takes as given instead (the fixed ones of the set an implementation was set up on)."""
    reference = resolve(spec.reference, base_dir)
    names = [t.name for t in case.outputs]
    sets, refs = [], []
    for k in range(input_sets):
        inputs = {**draw_inputs(spec, case, device, base_dir, seed + k), **(keep or {})}
        given = {**tensors.upcast(inputs, spec.reference_dtype), **spec.reference_params}
        if k == 0:
            _check_takes(reference, f"the workload's reference {spec.reference}",
                         {**given, **params_for(reference, case.params, given, case.scope)}, False)
        with _exact_fp32() if spec.reference_dtype != "declared" else contextlib.nullcontext():
            value = _call(reference, given, case.params, case.scope)
        ref = tensors.as_outputs(value, names, strict=False)
        for r, t in zip(ref, case.outputs, strict=True):
            if not t.traced and tuple(r.shape) != tuple(t.shape):
                raise ValueError(f"the workload's reference {spec.reference} returned {t.name} of shape "
                                 f"{tuple(r.shape)}, but the workload declares {tuple(t.shape)}: the workload file's "
                                 "outputs or its reference are wrong, not the implementation")
        no_nan(spec.reference, ref, names, k)
        refs.append(ref)
        sets.append(inputs)
    return CaseInputs(tuple(sets), tuple(refs))


def no_nan(reference: str, ref: Sequence[torch.Tensor], names: Sequence[str], k: int) -> None:
    """A ValueError where the reference returned NaN: no output can be checked against it there (a NaN
    error passed every bound, and the reference's own code, returning the same NaN, read as unwritten)."""
    for r, name in zip(ref, names, strict=True):
        n, at = tensors.nans(r)
        if n:
            raise ValueError(f"the workload's reference {reference} returned {n} NaN element(s) in {name} on input "
                             f"set {k} (the first at {list(at)}): the workload's inputs (std, mean, positive, its "
                             "input generator) or its reference are wrong, not the implementation")


def draw_inputs(spec: WorkloadSpec, case: Case, device: str, base_dir: Path | None, seed: int) -> dict[str, Any]:
    """One input set of ``case`` from ``seed``: the workload's input generator where it has one."""
    gen = spec.input_generator
    generator = resolve(gen.fn, base_dir) if gen is not None else None
    return tensors.make_inputs(case, device, seed, generator, gen.params if gen is not None else None)


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
        if setup:
            prepared = _call(setup, {**inputs, **extra}, case.params, case.scope)
            if not isinstance(prepared, Mapping):
                raise TypeError(f"setup {impl.setup} returned {type(prepared).__name__}, not a dict: setup returns "
                                f"the keyword arguments {impl.fn} is called with")
            kwargs = dict(prepared)
        else:
            kwargs = dict(inputs)
        kwargs.update(impl.params)  # fixed (e.g. tuned) keyword arguments of fn
        taken = params_for(fn, case.params, kwargs, case.scope)
        outputs = [t.name for t in case.outputs] if impl.destination else []  # given at each call
        _check_takes(fn, impl.fn, {**kwargs, **taken}, bool(setup), outputs)
        call = functools.partial(fn, **kwargs, **taken)
        launches.append(_destination(call, case, inputs) if impl.destination else call)
        all_kwargs.append(kwargs)
    return (launches, all_kwargs) if with_kwargs else launches


def _check_takes(fn: Callable[..., Any], name: str, kwargs: Mapping[str, Any], setup: bool,
                 later: Sequence[str] = ()) -> None:
    """A TypeError naming what ``fn`` (``name``, as the workload file spells it) is given and what it
    takes, when it cannot take those keyword arguments (a function written for other input names) or
    needs one it is not given (``later``: names given at each call, not yet in ``kwargs``): said
    here, not from deep in a timed call."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C function: nothing to check
        return
    params = sig.parameters.values()
    taken = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    extra = [] if any(p.kind is p.VAR_KEYWORD for p in params) else sorted(set(kwargs) - taken)
    needed = [p.name for p in params if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
              and p.name not in kwargs and p.name not in later]
    if extra or needed:
        source = "what its setup returns" if setup else "the workload's inputs"
        wrong = [f"{', '.join(extra)} not taken"] * bool(extra) + [f"{', '.join(needed)} not given"] * bool(needed)
        raise TypeError(f"{name} takes ({', '.join(sorted(taken))}) but is called with "
                        f"{', '.join(sorted(kwargs))} ({source}, as keyword arguments): {'; '.join(wrong)}")


def _destination(call: Callable[..., Any], case: Case, inputs: Mapping[str, Any]) -> Callable[[], Any]:
    """A destination-passing call: its outputs allocated here, once (outside every timed call), on
    the inputs' device, NaN-filled where floating (an unwritten element fails the check)."""
    device = next((v.device for v in inputs.values() if isinstance(v, torch.Tensor)), torch.device("cpu"))
    outs = {t.name: torch.empty(t.shape, dtype=tensors.torch_dtype(t.dtype), device=device) for t in case.outputs}

    def launch() -> tuple[torch.Tensor, ...]:
        call(**outs)
        return tuple(outs.values())

    launch.outputs = outs  # type: ignore[attr-defined]  # the same buffers every call: the checks refill them
    refill(launch)
    # and so does the timer before each timed call on the stream (before its flush): a call that skips its
    # work on some timed calls would otherwise leave an earlier call's right result for the verification
    launch.poison = functools.partial(refill, launch)  # type: ignore[attr-defined]
    return launch


def refill(launch: Callable[[], Any]) -> None:
    """NaN into a destination-passing call's outputs before an untimed check, so that a call that
    skips its work fails instead of showing the previous call's result (packed FP4: -6 in every value,
    which has no NaN)."""
    for t in getattr(launch, "outputs", {}).values():
        if t.dtype in tensors.PACKED:
            t.view(torch.uint8).fill_(0xFF)
        elif t.is_floating_point():
            t.fill_(float("nan"))
        else:
            t.fill_(0)


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` takes a keyword argument ``name`` (by name or through ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def tolerance_for(spec: WorkloadSpec, impl: Implementation, dtype: str,
                  params: Mapping[str, Any] | None = None) -> tensors.Bounds:
    """The implementation's own tolerance, else the first matching per-case one (``params``: the
    case's scope, its parameters, derived values and dtype), else the dtype's, else the default for
    the dtype."""
    case_tol = next((t for t in spec.case_tolerances
                     if params is not None and all(params.get(k) == v for k, v in t.where.items())), None)
    tol = impl.tolerance or case_tol or spec.tolerances.get(dtype)  # type: ignore[call-overload]
    if tol is not None:
        return tensors.Bounds(tol.atol, tol.rtol, tol.rel_l2, tol.matched_ratio, tol.error_cap)
    atol, rtol = tensors.DEFAULT_TOLERANCES.get(dtype, tensors.FALLBACK_TOLERANCE)
    return tensors.Bounds(atol, rtol, exact_integers=True)


def _call(fn: Callable[..., Any], inputs: Mapping[str, Any], params: Mapping[str, Any],
          scope: Mapping[str, Any] | None = None) -> Any:
    return fn(**inputs, **params_for(fn, params, inputs, scope))


def params_for(fn: Callable[..., Any], params: Mapping[str, Any],
                taken: Mapping[str, Any], scope: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Case parameters the function asks for by name (and that inputs do not already give).

    A function with a parameter named ``params`` that no case parameter fills gets them all, as
    one dict: ``scope`` (parameters, derived values and dtype), as an input generator does.
    """
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return {}
    found = {k: v for k, v in params.items() if k in sig.parameters and k not in taken}
    if scope is not None and "params" in sig.parameters and "params" not in params and "params" not in taken:
        found["params"] = dict(scope)
    return found


class _exact_fp32:
    """Reference math in true fp32: no TF32 on CUDA matmuls and convolutions.

    Set through the legacy booleans, and given back exactly as found: where torch has the
    ``fp32_precision`` strings (2.9+), those too. The legacy setter alone would leave "ieee" where
    "none" was: the same behaviour, but torch.compile keys its cache on the strings, so an
    implementation compiled after a reference would miss what the run compiled ahead."""

    _STRINGS = (torch.backends.cuda.matmul, torch.backends.cudnn, torch.backends.cudnn.conv, torch.backends.cudnn.rnn)

    def __enter__(self) -> None:
        self._strings = [(o, o.fp32_precision) for o in self._STRINGS if hasattr(o, "fp32_precision")]
        self._saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    def __exit__(self, *exc: object) -> None:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = self._saved
        for owner, value in self._strings:
            owner.fp32_precision = value
