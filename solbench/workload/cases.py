"""Expand a workload's parameter sweep into concrete, frozen cases. Pure.

Expansion is bounded before it is done: a sweep (parameter product x dtypes, or explicit cases x
dtypes) of more than MAX_CASES cases is refused with its count, and a tensor of more than
MAX_ELEMENTS elements is refused with its shape. :func:`check_fits` refuses a case whose tensors
would not fit in the free memory the caller measured, before anything is allocated.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from solbench.errors import ConfigError
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
    traced: bool = False  # shape and dtype not known until the case is traced (shape: null)

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
    scalars: tuple[str, ...] = ()  # inputs the input generator gives as Python numbers (not tensors)
    extra_bytes: int = 0  # parameters and buffers the reference reads besides its inputs (traced)

    @property
    def traced(self) -> bool:
        """Whether some tensor's shape waits for tracing (``shape: null``)."""
        return any(t.traced for t in self.inputs + self.outputs)

    @property
    def scope(self) -> dict[str, ParamValue]:
        """The names visible to expressions: parameters, derived values and ``dtype``."""
        return {**self.params, **self.derived, "dtype": self.dtype}


MAX_CASES = 10_000  # cases one workload may expand to on one device kind
MAX_ELEMENTS = 2**48  # elements of one tensor (2.3 PB of float64): beyond any device or host
# input dtypes drawn from a normal distribution (std, mean); the others are drawn uniformly (measure.tensors)
NORMAL_DTYPES = frozenset({"float64", "float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2"})


class CaseError(ConfigError, ValueError):
    """A case cannot be built or would not fit; ``loc`` is the path of the offending field
    (relative to the workload), for ``YamlDocument.error(["workloads", i, *loc], str(exc))``."""

    def __init__(self, loc: Sequence[str | int], message: str) -> None:
        super().__init__(message)
        self.loc = list(loc)


def parameter_sets(spec: WorkloadSpec, device_kind: str,
                   overrides: Mapping[str, Sequence[ParamValue]] | None = None) -> list[dict[str, ParamValue]]:
    """Parameter dictionaries for a device kind, profile overrides applied, then ``overrides``
    (``run --set name=v1,v2``): each named parameter the workload has takes these values instead
    (in a ``cases:`` list, every listed case once per value)."""
    profile = spec.profiles.get(device_kind)  # type: ignore[call-overload]
    parameters = spec.parameters
    cases = spec.cases
    if profile is not None and profile.parameters is not None:
        parameters, cases = {**parameters, **profile.parameters}, None
    if profile is not None and profile.cases is not None:
        cases = profile.cases
    mine = {k: list(v) for k, v in (overrides or {}).items() if k in parameter_names(spec, device_kind)}
    if mine and cases is not None:
        cases = [{**c, **dict(zip(mine, combo, strict=True))} for c in cases
                 for combo in itertools.product(*mine.values())]
    elif mine:
        parameters = {**parameters, **mine}
    dtypes = len(dtypes_for(spec, device_kind))
    count = (len(cases) if cases is not None else math.prod(len(v) for v in parameters.values())) * dtypes
    if count > MAX_CASES:
        where = "cases" if cases is not None else "parameters"
        if profile is not None and (profile.cases is not None or profile.parameters is not None):
            where = f"profiles.{device_kind}.{where}"
        raise CaseError(list(where.split(".")), f"the sweep expands to {count} cases on {device_kind} "
                        f"(x {dtypes} dtype(s)), more than the {MAX_CASES} allowed")
    if cases is not None:
        sets = [dict(c) for c in cases]
    else:
        keys = list(parameters)
        sets = [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*parameters.values())]
    return [{**s, **{k: v for k, v in spec.constants.items() if k not in s}} for s in sets]


def parameter_names(spec: WorkloadSpec, device_kind: str) -> set[str]:
    """The parameters a workload's cases have on a device kind (what ``--set`` can override)."""
    profile = spec.profiles.get(device_kind)  # type: ignore[call-overload]
    names = set(spec.parameters)
    for source in (spec.cases, getattr(profile, "cases", None)):
        for c in source or ():
            names |= set(c)
    if profile is not None and profile.parameters is not None:
        names |= set(profile.parameters)
    return names


def case_matches(case_id: str, pattern: str) -> bool:
    """Whether ``run --case PATTERN`` selects a case.

    A pattern with ``[``, ``*`` or ``?`` is matched against the whole id, ``*`` and ``?`` as
    wildcards and everything else literally (``o_proj[tokens=16,*``). Otherwise it is a list of
    ``name=value`` items (and dtypes), every one of which the case must have: ``tokens=16``,
    ``tokens=16,float32``.
    """
    if any(ch in pattern for ch in "[*?"):
        regex = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
        return re.fullmatch(regex, case_id) is not None
    items = set(case_id[case_id.find("[") + 1:-1].split(",")) if case_id.endswith("]") else set()
    return all(item.strip() in items for item in pattern.split(",") if item.strip())


def dtypes_for(spec: WorkloadSpec, device_kind: str) -> list[str]:
    """The dtypes a workload runs in on a device kind."""
    profile = spec.profiles.get(device_kind)  # type: ignore[call-overload]
    if profile is not None and profile.dtypes is not None:
        return list(profile.dtypes)
    return list(spec.dtypes)


def expand(spec: WorkloadSpec, device_kind: str,
           overrides: Mapping[str, Sequence[ParamValue]] | None = None) -> list[Case]:
    """All cases of a workload on a device kind, in file order (parameters, then dtype)."""
    return [
        build_case(spec, params, dtype)
        for params in parameter_sets(spec, device_kind, overrides)
        for dtype in dtypes_for(spec, device_kind)
    ]


def build_case(spec: WorkloadSpec, params: Mapping[str, ParamValue], dtype: str) -> Case:
    """Evaluate every tensor shape of a workload at one parameter set."""
    scope: dict[str, ParamValue] = {**params, "dtype": dtype}
    derived: dict[str, ParamValue] = {}
    if spec.world_size > 1:  # visible to expressions and to the collectives' cost
        derived["world_size"] = scope["world_size"] = spec.world_size
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
    if t.shape is None:  # traced: solbench.suites.trace.probe fills it in at plan time
        return TensorShape(name, (), dtype if t.dtype == "case" else t.dtype, traced=True)
    try:
        shape = tuple(evaluate_int(d, numeric) for d in t.shape)
        std = float(evaluate(t.std, numeric))
        mean = float(evaluate(t.mean, numeric))
    except ExprError as exc:
        raise CaseError([group, name], str(exc)) from None
    if std < 0:
        raise CaseError([group, name, "std"], f"std = {std:g} is negative")
    kind = dtype if t.dtype == "case" else t.dtype
    for field_, value, default in (("std", std, 1.0), ("mean", mean, 0.0)):
        if group == "inputs" and value != default and kind not in NORMAL_DTYPES:
            drawn = "as random bytes" if kind == "float4_e2m1fn_x2" else "from [-8, 8) ([0, 8) with positive: true)"
            raise CaseError([group, name, field_], f"{field_} = {value:g}, but {name} ({kind}) is drawn uniformly "
                            f"{drawn}, not from a normal distribution: remove {field_}, or draw it with an "
                            "input_generator")
    if any(d <= 0 for d in shape):
        raise CaseError([group, name, "shape"], f"shape {shape} has a dimension <= 0")
    if math.prod(shape) > MAX_ELEMENTS:
        raise CaseError([group, name, "shape"],
                        f"shape {shape} has {math.prod(shape):.3g} elements, more than {MAX_ELEMENTS:.3g}")
    return TensorShape(name, shape, kind, std, mean, t.positive)


def required_bytes(case: Case, *, input_sets: int, copies: int = 1) -> int:
    """Bytes a case's tensors take at once: every input set ``copies`` times, the reference
    outputs of each input set and the outputs of the call being checked.

        inputs x input_sets x copies + outputs x (input_sets + 1) + 2 x parameters

    (parameters: what a traced reference reads besides its inputs, held by the reference and the
    implementation.)
    A lower bound: an implementation's own workspace is not counted.
    """
    inputs = sum(t.nbytes for t in case.inputs)
    outputs = sum(t.nbytes for t in case.outputs)
    return inputs * input_sets * copies + outputs * (input_sets + 1) + 2 * case.extra_bytes


def worker_bytes(case: Case, *, input_sets: int, reference_dtype: str) -> int:
    """Bytes of tensors one worker holds at once for a case: :func:`required_bytes`, with each input
    set's reference outputs kept at ``reference_dtype`` (the workload's ``reference_dtype``; float32
    outputs of a bfloat16 case take twice the bytes) and one input set converted to it while the
    reference runs. Still without the implementation's workspace and the CUDA context."""
    def converted(t: TensorShape) -> int:  # a copy of t at the reference's dtype; 0 where none is made
        if reference_dtype == "declared" or t.dtype == reference_dtype or not t.dtype.startswith(("float", "bfloat")):
            return 0
        return t.numel * DTYPE_BYTES[reference_dtype]

    kept = sum(max(0, converted(t) - t.nbytes) for t in case.outputs) * input_sets
    return required_bytes(case, input_sets=input_sets) + kept + sum(converted(t) for t in case.inputs)


def check_fits(cases: Iterable[Case], free_bytes: int, *, input_sets: int, copies: int = 1,
               where: str = "device") -> None:
    """Raise CaseError for the first case whose tensors (:func:`required_bytes`) exceed ``free_bytes``.

    Pure: the caller measures free memory (``torch.cuda.mem_get_info`` or the host's available
    memory) and calls this before allocating anything.
    """
    for case in cases:
        need = required_bytes(case, input_sets=input_sets, copies=copies)
        if need > free_bytes:
            raise CaseError(["inputs"], f"case {case.id} needs {_gib(need)} for its tensors "
                            f"({input_sets} input set(s) x {copies} + outputs), more than "
                            f"the {_gib(free_bytes)} free on the {where}")


def _gib(n: int) -> str:
    return f"{n / 2**30:.3g} GiB ({n} bytes)"
