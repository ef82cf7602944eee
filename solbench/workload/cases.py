"""Expand a workload's parameter sweep into concrete, frozen cases. Pure."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field

from solbench.workload.expr import ExprError, evaluate, evaluate_int
from solbench.workload.schema import DTYPE_BYTES, ParamValue, TensorSpec, WorkloadSpec


@dataclass(frozen=True)
class TensorShape:
    """A named tensor with its evaluated shape and dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    std: float = 1.0
    mean: float = 0.0
    positive: bool = False

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPE_BYTES[self.dtype]


@dataclass(frozen=True)
class Case:
    """One workload at one set of parameter values and one dtype."""

    workload: str
    params: Mapping[str, ParamValue]
    dtype: str
    inputs: tuple[TensorShape, ...]
    outputs: tuple[TensorShape, ...]

    @property
    def id(self) -> str:
        values = ",".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.workload}[{values},{self.dtype}]"

    derived: Mapping[str, ParamValue] = field(default_factory=dict)

    @property
    def scope(self) -> dict[str, ParamValue]:
        """The names visible to expressions: parameters, derived values and ``dtype``."""
        return {**self.params, **self.derived, "dtype": self.dtype}


class CaseError(ValueError):
    """A case cannot be built; ``loc`` is the path of the offending field."""

    def __init__(self, loc: list[str | int], message: str) -> None:
        super().__init__(message)
        self.loc = loc


def parameter_sets(spec: WorkloadSpec, device_kind: str) -> list[dict[str, ParamValue]]:
    """Parameter dictionaries for a device kind, profile overrides applied."""
    profile = spec.profiles.get(device_kind)  # type: ignore[call-overload]
    parameters = spec.parameters
    cases = spec.cases
    if profile is not None and profile.parameters is not None:
        parameters, cases = {**parameters, **profile.parameters}, None
    if profile is not None and profile.cases is not None:
        cases = profile.cases
    if cases is not None:
        sets = [dict(c) for c in cases]
    else:
        keys = list(parameters)
        sets = [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*parameters.values())]
    return [{**s, **{k: v for k, v in spec.constants.items() if k not in s}} for s in sets]


def dtypes_for(spec: WorkloadSpec, device_kind: str) -> list[str]:
    """The dtypes a workload runs in on a device kind."""
    profile = spec.profiles.get(device_kind)  # type: ignore[call-overload]
    if profile is not None and profile.dtypes is not None:
        return list(profile.dtypes)
    return list(spec.dtypes)


def expand(spec: WorkloadSpec, device_kind: str) -> list[Case]:
    """All cases of a workload on a device kind, in file order (parameters, then dtype)."""
    return [
        build_case(spec, params, dtype)
        for params in parameter_sets(spec, device_kind)
        for dtype in dtypes_for(spec, device_kind)
    ]


def build_case(spec: WorkloadSpec, params: Mapping[str, ParamValue], dtype: str) -> Case:
    """Evaluate every tensor shape of a workload at one parameter set."""
    scope: dict[str, ParamValue] = {**params, "dtype": dtype}
    derived: dict[str, ParamValue] = {}
    for name, expr in spec.derived.items():
        numeric = {k: v for k, v in scope.items() if isinstance(v, int | float)}
        try:
            derived[name] = evaluate(expr, numeric)
        except ExprError as exc:
            raise CaseError(["derived", name], str(exc)) from None
        scope[name] = derived[name]
    inputs = tuple(_tensor(name, t, scope, dtype, "inputs") for name, t in spec.inputs.items())
    outputs = tuple(_tensor(name, t, scope, dtype, "outputs") for name, t in spec.outputs.items())
    return Case(spec.name, dict(params), dtype, inputs, outputs, derived)


def _tensor(name: str, t: TensorSpec, scope: dict, dtype: str, group: str) -> TensorShape:
    numeric = {k: v for k, v in scope.items() if isinstance(v, int | float)}
    try:
        shape = tuple(evaluate_int(d, numeric) for d in t.shape)
        std = float(evaluate(t.std, numeric))
        mean = float(evaluate(t.mean, numeric))
    except ExprError as exc:
        raise CaseError([group, name], str(exc)) from None
    if any(d <= 0 for d in shape):
        raise CaseError([group, name, "shape"], f"shape {shape} has a dimension <= 0")
    return TensorShape(name, shape, dtype if t.dtype == "case" else t.dtype, std, mean, t.positive)
