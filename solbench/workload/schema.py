"""Pydantic models of a workload file, and the frozen ``Case`` it expands into.

A workload file holds one or more workloads::

    workloads:
      - name: o_proj
        parameters: {tokens: [16, 2048], hidden: [4096]}   # swept as a cartesian product
        dtypes: [bfloat16]
        inputs:  {x: {shape: [tokens, hidden]}, w: {shape: [hidden, hidden], std: "hidden**-0.5"}}
        outputs: {out: {shape: [tokens, hidden]}}
        ops:     [{op: matmul, m: tokens, n: hidden, k: hidden}, {op: add, numel: tokens*hidden}]
        reference: solbench.impls.attn:o_proj_reference
        implementations: {baseline: "solbench.impls.attn:o_proj_baseline", fused: ...}

Sizes are expressions of the parameters (see :mod:`solbench.workload.expr`). Every model is
strict: an unknown key, at any level and in every ``ops`` entry, is an error that names the key
and the close match ("unknown field 'casual' for op 'attention' (did you mean 'causal'?)"); each op
kind takes only its own fields (:mod:`solbench.workload.ops`); a boolean is refused where a number
is meant, and read as 1/0 where the field is a flag (``causal: true``).
"""

from __future__ import annotations

import keyword
import math
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from solbench.text import suggest
from solbench.workload.expr import ExprError, names
from solbench.workload.ops import OpFieldError, check_op

DTYPES = (
    "float64",
    "float32",
    "bfloat16",
    "float16",
    "float8_e4m3fn",
    "float8_e5m2",
    "float4_e2m1fn_x2",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "bool",
)
DType = Literal[
    "float64",
    "float32",
    "bfloat16",
    "float16",
    "float8_e4m3fn",
    "float8_e5m2",
    "float4_e2m1fn_x2",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "bool",
]
DTYPE_BYTES = {
    "float64": 8,
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float4_e2m1fn_x2": 1,  # two 4-bit values packed in one byte (one element of the x2 dtype)
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint8": 1,
    "bool": 1,
}


NAME = r"^[A-Za-z0-9_.\-]+$"  # a workload's or an implementation's name: shown in tables, given to -w and -i


class _Model(BaseModel):
    """Base of every workload model: frozen, and an unknown key is an error naming the close match."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    _extension_prefix: ClassVar[str | None] = None  # keys starting with this are allowed (and ignored)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, value: Any) -> Any:
        if isinstance(value, dict):
            cls._check_keys(value)
        return value

    @classmethod
    def _check_keys(cls, value: dict[Any, Any]) -> None:
        allowed, prefix = set(cls.model_fields), cls._extension_prefix
        for key in value:
            if key in allowed or (prefix and isinstance(key, str) and key.startswith(prefix)):
                continue
            hint = suggest(key, allowed) if isinstance(key, str) else ""
            raise PydanticCustomError("unknown_field", "unknown field {name}{hint}",
                                      {"field": key, "name": _short(key), "hint": hint})


def _short(value: Any, limit: int = 50) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _not_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number (write a number or an expression)")
    return value


def _flag(value: Any) -> Any:
    return int(value) if isinstance(value, bool) else value


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value} is not a finite number")
    return value


def _check_expr(value: Any) -> Any:
    _finite(value)
    try:
        names(value)
    except ExprError as exc:
        raise ValueError(str(exc)) from None
    return value


# A size: a number, or an expression of the parameters (never a boolean).
Expr = Annotated[int | float | str, BeforeValidator(_not_bool), AfterValidator(_check_expr)]
# A flag of an op (bias, causal): true/false read as 1/0; a number or an expression also works.
Flag = Annotated[int | float | str, BeforeValidator(_flag), AfterValidator(_check_expr)]
ParamValue = int | float | str
Param = Annotated[int | float | str, BeforeValidator(_not_bool), AfterValidator(_finite)]
_Values = Annotated[list[Param], Field(min_length=1)]


class TensorSpec(_Model):
    """One named input or output tensor."""

    shape: list[Expr] | None = Field(
        max_length=16, description="Dimensions, as expressions of the parameters; null: traced (the shape the "
        "input generator draws, or the reference returns, on the meta device).")
    dtype: DType | Literal["case"] = Field(
        "case", description="Element type; 'case' takes the case's dtype."
    )
    std: Expr = Field(1.0, description="Standard deviation of the random normal initial values (floating-point "
                      "inputs; integer, boolean and float4_e2m1fn_x2 ones are drawn uniformly and refuse it).")
    mean: Expr = Field(0.0, description="Mean of the random initial values (floating-point inputs, as std).")
    positive: bool = Field(False, description="Draw |values| + mean (e.g. variances); integers from [0, 8) instead "
                           "of [-8, 8), float4_e2m1fn_x2 with both sign bits clear.")
    fixed: bool = Field(False, description="Inputs only: the same on every call of real use (a weight, a scale, "
                        "BatchNorm statistics), so set-up may prepare from its values (quantize, fold, concatenate). "
                        "The check after timing that writes new values into the other inputs, without running set-up "
                        "again, leaves it as it was.")

    @field_validator("std")
    @classmethod
    def _std_not_negative(cls, value: Any) -> Any:
        if isinstance(value, int | float) and value < 0:
            raise ValueError("a standard deviation cannot be negative")
        return value


class Op(_Model):
    """One operation, for the analytic cost model. Each kind takes its own fields
    (see :mod:`solbench.workload.ops`); any other field is an error.

    matmul: m, n, k; batch, batched_b, bias; b_dtype · conv2d: n, c, h, w, k, r, s; stride, pad, dilation,
    groups · attention: b, h, sq, sk, d; dv, causal · pool2d: n, c, h, w, r, s; stride, pad ·
    elementwise kinds (add, mul, bias_add, relu, gelu, elementwise, softmax, layernorm, batchnorm,
    copy): numel or rows and cols; inputs,
    flops_per_element, param_elements. Flags (batched_b, bias, causal) take true/false or 1/0.
    """

    op: str = Field(description="Operation kind.")
    dtype: DType | None = Field(None, description="Element type, if not the case's.")
    b_dtype: DType | None = Field(None, description="matmul: the B operand's element type, if not the op's "
                                                    "(a weight stored narrower, e.g. float8_e4m3fn).")
    m: Expr | None = None
    n: Expr | None = None
    k: Expr | None = None
    batch: Expr | None = None
    batched_b: Flag | None = None
    bias: Flag | None = None
    c: Expr | None = None
    h: Expr | None = None
    w: Expr | None = None
    r: Expr | None = None
    s: Expr | None = None
    stride: Expr | None = None
    pad: Expr | None = None
    dilation: Expr | None = None
    groups: Expr | None = None
    b: Expr | None = None
    sq: Expr | None = None
    sk: Expr | None = None
    d: Expr | None = None
    dv: Expr | None = None
    causal: Flag | None = None
    numel: Expr | None = None
    rows: Expr | None = None
    cols: Expr | None = None
    inputs: Expr | None = None
    flops_per_element: Expr | None = None
    param_elements: Expr | None = None
    ranks: Expr | None = None

    @classmethod
    def _check_keys(cls, value: dict[Any, Any]) -> None:
        try:
            check_op(value)
        except OpFieldError as exc:
            if exc.field is None:
                raise PydanticCustomError("op_field", str(exc)) from None
            kind = "unknown_field" if exc.field != "op" else "bad_field"
            raise PydanticCustomError(kind, "{message}", {"field": exc.field, "message": str(exc)}) from None

    def sizes(self) -> dict[str, Any]:
        """The fields given, as the cost model reads them (flags as 1/0)."""
        return self.model_dump(exclude_none=True)


class Tolerance(_Model):
    """Elementwise |out - ref| <= atol + rtol * |ref|, and ||out - ref|| / ||ref|| <= rel_l2.

    With ``matched_ratio`` (SOL-ExecBench's ``required_matched_ratio``), an output passes when at
    least that fraction of its elements is within the elementwise bound; ``error_cap`` then bounds
    the largest absolute error of any element. Where the reference is +inf or -inf, the same
    infinity is right (excluded from the errors) and any other value is wrong; any other NaN/Inf
    fails. ``allow_negative_inf`` (SOL-ExecBench's) is taken and changes nothing: that is always so.
    Every bound is finite (an infinite one would pass anything).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    rtol: float = Field(gt=0)
    atol: float = Field(ge=0)
    rel_l2: float | None = Field(None, gt=0)
    matched_ratio: float | None = Field(None, gt=0, le=1)
    error_cap: float | None = Field(None, gt=0)
    allow_negative_inf: bool = False


class CaseTolerance(Tolerance):
    """A tolerance for the cases whose parameters match ``where`` (every key equal)."""

    where: dict[str, Param] = Field(min_length=1)


class InputGenerator(_Model):
    """A workload-level input generator: ``fn(params, device, generator, **params_fixed) -> dict`` of
    every input (tensors, or Python scalars), drawn on ``device`` from ``generator`` (a seeded
    torch.Generator); ``params`` is the case's parameters, derived values and dtype."""

    fn: str = Field(description="'module:function' or 'path/to/file.py:function'.")
    params: dict[str, ParamValue] = Field(default_factory=dict, description="Fixed keyword arguments.")


class Source(_Model):
    """Where an imported workload came from (provenance, recorded in the results)."""

    suite: Literal["kernelbench", "sol-execbench"]
    path: str
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class TuneSpace(_Model):
    """Autotuning search space: a grid of keyword-argument values, filtered by constraints."""

    space: dict[str, Annotated[list[Param], Field(min_length=1)]] = Field(
        min_length=1, description="Parameter name -> values to try, e.g. {block: [128, 256, 512]}."
    )
    constraints: list[str] = Field(
        default_factory=list,
        description="Conditions every configuration must meet, over tuned and case parameters, "
        "e.g. 'block <= hidden', 'block * vec <= 4096 and hidden % vec == 0'.",
    )

    @field_validator("space")
    @classmethod
    def _each_value_once(cls, space: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for name, values in space.items():
            j = first_repeat(values)
            if j is not None:  # the same configuration would be measured twice
                raise ValueError(f"{name}: {values[j]!r} is given twice (each configuration once)")
        return space


class Implementation(_Model):
    """An implementation: a function, and optionally a set-up step run once per input set."""

    fn: str = Field(description="'module:function' or 'path/to/file.py:function'.")
    setup: str | None = Field(
        None,
        description="Called once per input set, outside timing, with the inputs; returns the "
        "keyword arguments for fn (e.g. folded or concatenated weights).",
    )
    requires: list[Literal["cuda", "cupy", "fp8", "compile", "inductor", "nvmath", "sm80", "sm89", "sm90",
                           "nccl", "build"]] = Field(
        default_factory=list, description="What the implementation needs; skipped otherwise."
    )
    peak_dtype: DType | None = Field(
        None, description="Score against this dtype's peak (e.g. float8_e4m3fn for an FP8 path)."
    )
    input_dtypes: dict[str, DType] = Field(
        default_factory=dict, description="Inputs this implementation reads in a narrower dtype, made once in setup "
        "(e.g. {w: float8_e4m3fn} for a weight quantized to FP8): its fused bytes count them at that width, and its "
        "T_SOL, MBU, floor fraction and INVALID floor follow (scales and other set-up metadata are not counted).",
    )
    setup_reads: list[str] = Field(
        default_factory=list, description="Inputs beyond the fixed ones whose values this implementation's set-up "
        "keeps something made from (a copy of x in another layout, as a previous layer would hand it over). The "
        "check after timing writes new values only into the inputs neither fixed nor named here, without running "
        "set-up again; with none left it runs set-up again on new values in every input (a weaker check). "
        "Recorded in the result (protocol.setup_reads).",
    )
    tolerance: Tolerance | None = Field(
        None, description="Overrides the workload's tolerance for this implementation (e.g. FP8)."
    )
    description: str = ""
    destination: bool = Field(
        False, description="Destination-passing: fn also takes every output as a keyword argument, allocated "
        "outside the timed call, and writes it (what it returns is ignored).")
    tune: TuneSpace | None = Field(
        None, description="Search space for `solbench tune`: parameter values and constraints."
    )
    params: dict[str, ParamValue] = Field(
        default_factory=dict,
        description="Fixed keyword arguments passed to fn (and to setup if it takes them), "
        "e.g. a tuned configuration {block: 256}.",
    )
    env: dict[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], str] = Field(
        default_factory=dict,
        description="Environment variables set in each rank process before its process group is "
        "created (world_size > 1 only), e.g. {NCCL_ALGO: Ring, NCCL_PROTO: Simple}.",
    )
    part: Literal["compute", "comm", "floor"] | None = Field(
        None,
        description="compute or comm: a component of an overlapped implementation (world_size > 1 only): "
        "timed with the same protocol, never checked against the reference nor scored; its time is T_compute "
        "or T_comm of the overlap efficiency (T_compute + T_comm - T) / min(T_compute, T_comm). floor "
        "(world_size 1 only): fn(src, dst) reads the case's read bytes and writes its written bytes, timed "
        "the same way; each scored implementation gets T_floor / T (solbench.impls.floor).",
    )


class Profile(_Model):
    """Overrides used on one kind of device (e.g. smaller sizes on the CPU)."""

    parameters: dict[str, _Values] | None = None
    cases: list[dict[str, Param]] | None = Field(None, min_length=1)
    dtypes: list[DType] | None = Field(None, min_length=1)


class WorkloadSpec(_Model):
    """One workload: its parameter sweep, tensors, ops, reference and implementations."""

    name: Annotated[str, Field(pattern=NAME)]
    description: str = ""
    parameters: dict[str, _Values] = Field(
        default_factory=dict, description="Swept as a cartesian product."
    )
    cases: list[dict[str, Param]] | None = Field(
        None, min_length=1, description="Explicit parameter sets, used instead of the product when given."
    )
    constants: dict[str, Param] = Field(
        default_factory=dict, description="Fixed parameters, visible to every expression."
    )
    derived: dict[str, Expr] = Field(
        default_factory=dict,
        description="Named expressions of the parameters (in order), e.g. p: (h + 2*pad - r)//stride + 1.",
    )
    dtypes: list[DType] = Field(min_length=1)
    inputs: dict[str, TensorSpec] = Field(min_length=1)
    outputs: dict[str, TensorSpec] = Field(min_length=1)
    ops: list[Op] = Field(default_factory=list)
    flops: Expr | None = Field(None, description="Override of the tensor-unit FLOPs.")
    bytes: Expr | None = Field(None, description="Override of the fused bytes.")
    reference: str = Field(description="'module:function' computing the outputs (run in fp32+).")
    returns: Literal["tensor", "tuple", "list"] | None = Field(
        None, description="What every implementation must return: the one output as a bare tensor, or the "
        "outputs in order as a tuple or a list (an imported KernelBench problem: what Model returns); anything "
        "else is incorrect. Unset: a tensor, tuple, list or dict (by output name) alike.")
    reference_params: dict[str, ParamValue] = Field(
        default_factory=dict, description="Fixed keyword arguments passed to the reference.")
    reference_dtype: Literal["float32", "float64", "declared"] = Field(
        "float32", description="Narrower floating inputs are converted to this dtype for the reference (float64 "
        "ones stay float64); 'declared': "
        "the reference runs on the inputs as drawn, at their declared dtypes, with torch's default backend "
        "settings (cuDNN convolutions in TF32 on CUDA), as KernelBench and SOL-ExecBench run theirs; the "
        "others run in true fp32 or fp64 (no TF32).")
    input_generator: InputGenerator | None = Field(
        None, description="Draws every input instead of the random normal values (see InputGenerator).")
    cost: Literal["analytic", "traced"] = Field(
        "analytic", description="analytic: from ops (and flops/bytes); traced: the reference run on the meta "
        "device per case, tensor FLOPs by torch.utils.flop_counter, one vector FLOP per element an "
        "elementwise or reduction op touches, bytes = inputs + parameters + buffers + outputs.")
    fp32_peak: Literal["fp32", "tf32", "fp16-rate", "torch"] = Field(
        "fp32", description="The tensor peak an fp32 case is priced at: fp32 (CUDA cores), tf32, the fp16 "
        "tensor rate (as SOLAR prices fp32 problems), or torch (as torch runs fp32 by default on CUDA: "
        "convolutions on TF32 tensor cores, matmuls on CUDA cores; traced costs count the two apart).")
    source: Source | None = Field(None, description="Provenance of an imported workload.")
    implementations: dict[Annotated[str, Field(pattern=NAME)], Implementation] = Field(min_length=1)
    baseline: str = Field("baseline", description="Implementation speedups are measured against.")
    tolerances: dict[DType, Tolerance] = Field(default_factory=dict)
    case_tolerances: list[CaseTolerance] = Field(
        default_factory=list, description="Per-case tolerances (first match wins), before the dtype's.")
    gate_threshold: float | None = Field(
        None, gt=0, lt=1, description="Per-workload gate threshold: a fraction below 1 (0.05) or a percent ('5%').")
    profiles: dict[Literal["cpu", "cuda"], Profile] = Field(default_factory=dict)
    floor: bool = Field(
        False, description="Also time the case's byte floor: an implementation 'floor' (part: floor) that "
        "reads and writes the case's fused bytes in one plain kernel under the same timer; every scored "
        "implementation then reports T_floor / T (solbench.impls.floor).")
    world_size: int = Field(
        1, ge=1, le=64,
        description="Ranks: implementations run as one process per rank (torch.distributed, NCCL on CUDA "
        "with rank r on GPU r, gloo on the CPU); inputs are drawn per rank (solbench.execute.group).",
    )

    @field_validator("implementations", mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: {"fn": v} if isinstance(v, str) else v for k, v in value.items()}
        return value

    @model_validator(mode="before")
    @classmethod
    def _with_floor(cls, value: Any) -> Any:
        """``floor: true`` adds the built-in floor implementation, unless the workload has its own."""
        if not (isinstance(value, dict) and value.get("floor") is True):
            return value
        impls = value.get("implementations")
        if not isinstance(impls, dict) or any(isinstance(v, dict) and v.get("part") == "floor" for v in impls.values()):
            return value
        if FLOOR in impls:
            raise ValueError(f"floor: true adds an implementation named {FLOOR!r}; rename yours or give it part: floor")
        return {**value, "implementations": {**impls, FLOOR: {"fn": "solbench.impls.floor:read", "part": "floor",
                                                              "description": BUILTIN_FLOOR}}}

    @field_validator("gate_threshold", mode="before")
    @classmethod
    def _threshold_percent(cls, value: Any) -> Any:
        """'5%' is 0.05; a bare 5 would be 500%: refused by the bound below 1, with this hint."""
        if isinstance(value, str) and value.strip().endswith("%"):
            try:
                return float(value.strip()[:-1]) / 100.0
            except ValueError:
                raise ValueError(f"cannot read {value!r} as a percent (e.g. '5%')") from None
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 1:
            raise ValueError(f"{value} reads as {value:.0%}; write '{value:g}%' for percent, or a fraction below 1")
        return value

    @field_validator("input_generator", mode="before")
    @classmethod
    def _generator_shorthand(cls, value: Any) -> Any:
        return {"fn": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _consistent(self) -> WorkloadSpec:
        if self.baseline not in self.implementations:
            raise ValueError(f"baseline {self.baseline!r} is not one of the implementations "
                             f"({', '.join(self.implementations)}): speedups are measured against the one named "
                             "'baseline', or the one a 'baseline: NAME' field names")
        _check_ranks(self)
        if self.input_generator is None and any(t.shape is None for t in self.inputs.values()):
            raise ValueError("an input without a shape needs an input_generator (it draws the inputs)")
        if self.cases is None and not self.parameters and not self.constants:
            raise ValueError("give parameters, cases or constants")
        bad = [n for n in self.inputs if not n.isidentifier() or keyword.iskeyword(n)]
        if bad:
            raise ValueError(f"input {bad[0]!r} is not a Python name (inputs are passed as keyword arguments)")
        if self.returns == "tensor" and len(self.outputs) != 1:
            raise ValueError(f"returns: tensor is one output, and there are {len(self.outputs)} "
                             f"({', '.join(self.outputs)}): returns: tuple or list")
        clash = set(self.inputs) & set(self.outputs)
        if clash:
            raise ValueError(f"names used for both inputs and outputs: {sorted(clash)}")
        _check_parameters(self)
        params = set(self.parameters) | set(self.constants) | set(self.derived)
        for case in self.cases or []:
            params |= set(case)
        for name, impl in self.implementations.items():
            for field, tensor in [*(("input_dtypes", t) for t in impl.input_dtypes),
                                  *(("setup_reads", t) for t in impl.setup_reads)]:
                if tensor not in self.inputs:
                    raise ValueError(f"implementation {name!r}: {field} names {tensor!r}, which is not an input "
                                     f"(inputs: {', '.join(self.inputs)})")
        fixed_outputs = [name for name, t in self.outputs.items() if t.fixed]
        if fixed_outputs:
            raise ValueError(f"output {fixed_outputs[0]!r}: fixed is for inputs (what set-up may prepare from)")
        shadow = (set(self.inputs) | set(self.outputs)) & params
        if shadow:
            raise ValueError(f"tensor names that are also parameters: {sorted(shadow)} "
                             "(an implementation could not tell them apart); rename one")
        return self


FLOOR = "floor"  # the name of the implementation ``floor: true`` adds
BUILTIN_FLOOR = ("the case's bytes in one plain kernel (a reduction or a broadcast copy of random fp32), same timer; "
                 "never checked or scored: each implementation's T_floor / T")


def first_repeat(values: Sequence[Any]) -> int | None:
    """The index of the first value equal to an earlier one, or None: a case, configuration or
    value that would be measured twice."""
    return next((j for j, v in enumerate(values) if v in values[:j]), None)


def _refused(loc: Sequence[str | int], message: str) -> PydanticCustomError:
    """An error at ``loc`` below the workload (the loader names that field and its line)."""
    return PydanticCustomError("bad_field", "{message}", {"field": tuple(loc), "message": message})


def _check_parameters(spec: WorkloadSpec) -> None:
    """Each name is one of parameter, constant or derived, and not one solbench gives every case (``dtype``,
    and ``world_size`` where there are ranks); no value, dtype or case twice; a case, a profile or a ``where``
    names only the workload's own parameters."""
    reserved = {"dtype", "world_size"} if spec.world_size > 1 else {"dtype"}
    named = [*(["parameters", n] for n in spec.parameters), *(["constants", n] for n in spec.constants),
             *(["derived", n] for n in spec.derived),
             *(["cases", j, n] for j, case in enumerate(spec.cases or []) for n in case)]
    loc = next((loc for loc in named if loc[-1] in reserved), None)
    if loc is not None:
        name = loc[-1]
        raise _refused(loc, f"{name!r} names the case's own {name} in every expression; give this one another name")
    for name in spec.constants:
        if name in spec.parameters:
            raise _refused(["constants", name], f"{name!r} is also a parameter; give it in one place")
    for name in spec.derived:
        if name in spec.parameters or name in spec.constants:
            kind = "parameter" if name in spec.parameters else "constant"
            raise _refused(["derived", name], f"{name!r} is also a {kind}; a derived value needs a name of its own")
    declared = set(spec.parameters) | set(spec.constants) if spec.parameters else None
    _check_sweep([], spec.parameters, spec.cases or [], spec.dtypes, declared, spec.derived)
    known = set(spec.parameters) | set(spec.constants) | {k for c in spec.cases or [] for k in c}
    for kind, profile in spec.profiles.items():
        for name in profile.parameters or {}:
            if name not in known:
                raise _refused(["profiles", kind, "parameters", name], f"unknown parameter {name!r} (a profile "
                               f"overrides the workload's own: {', '.join(sorted(known)) or 'none'})")
        _check_sweep(["profiles", kind], profile.parameters or {}, profile.cases or [], profile.dtypes or [], known,
                     spec.derived)
        unset = [n for n in (spec.cases or [{}])[0] if n not in {**spec.parameters, **(profile.parameters or {})}]
        if profile.parameters is not None and profile.cases is None and unset:  # the sweep replaces the cases
            raise _refused(["profiles", kind, "parameters"],
                           f"gives {', '.join(profile.parameters)} but not {', '.join(unset)}, which the workload's "
                           f"cases give: a profile's parameters replace the cases (give {', '.join(unset)} too, or "
                           f"give profiles.{kind}.cases)")
    names = known | set(spec.derived) | {"dtype"}
    taken = _values_taken(spec)
    for j, tol in enumerate(spec.case_tolerances):
        for name, value in tol.where.items():
            if name not in names:
                raise _refused(["case_tolerances", j, "where", name],
                               f"unknown name {name!r} (known: {', '.join(sorted(names))})")
            if name in taken and value not in taken[name]:  # a derived value is computed: not checked here
                shown = ", ".join(repr(v) for v in taken[name])
                raise _refused(["case_tolerances", j, "where", name],
                               f"{value!r} matches no case: {name} takes {shown} (in the workload and its profiles)")


def _values_taken(spec: WorkloadSpec) -> dict[str, list[Any]]:
    """Every value each parameter, constant and ``dtype`` takes in some case, the profiles' included."""
    profiles = spec.profiles.values()
    taken: dict[str, list[Any]] = {"dtype": [*spec.dtypes, *(d for p in profiles for d in p.dtypes or [])]}
    sweeps = [spec.parameters, *(p.parameters or {} for p in profiles)]
    cases = [*(spec.cases or []), *(c for p in profiles for c in p.cases or [])]
    for name, value in [*((n, v) for sweep in sweeps for n, vs in sweep.items() for v in vs),
                        *spec.constants.items(), *(item for case in cases for item in case.items())]:
        if value not in taken.setdefault(name, []):
            taken[name].append(value)
    return taken


def _check_sweep(at: list[str | int], parameters: Mapping[str, Sequence[Any]], cases: Sequence[Mapping[str, Any]],
                 dtypes: Sequence[str], known: set[str] | None, derived: Mapping[str, Any]) -> None:
    """No value of a parameter, dtype or case twice; every case of one key set, none of its names
    derived nor (``known`` given) unknown."""
    for loc, values in [*((["parameters", name], v) for name, v in parameters.items()), (["dtypes"], dtypes)]:
        j = first_repeat(values)
        if j is not None:
            raise _refused([*at, *loc, j], f"{values[j]!r} is given twice (each case once)")
    for j, case in enumerate(cases):
        bad = next((k for k in case if k in derived or (known is not None and k not in known)), None)
        if bad is not None:
            why = "is derived" if bad in derived else f"is not a parameter (known: {', '.join(sorted(known or ()))})"
            raise _refused([*at, "cases", j, bad], f"{bad!r} {why}")
        if set(case) != set(cases[0]):
            raise _refused([*at, "cases", j], f"gives {', '.join(case)} where case 0 gives {', '.join(cases[0])} "
                           "(every case gives the same parameters)")
        if case in cases[:j]:
            raise _refused([*at, "cases", j], f"the same as case {list(cases).index(case)} (each case once)")


def _check_ranks(spec: WorkloadSpec) -> None:
    """``env`` and ``part`` only where there are ranks; parts are never the baseline, and come as a pair."""
    impls = spec.implementations
    if impls[spec.baseline].part is not None:
        raise _refused(["implementations", spec.baseline, "part"], f"the baseline {spec.baseline!r} cannot be a part")
    if spec.world_size == 1:
        for name, impl in impls.items():
            if impl.env or impl.part not in (None, "floor"):
                field = "env" if impl.env else "part"
                raise _refused(["implementations", name, field],
                               f"implementation {name!r}: {field} needs world_size > 1 (a multi-rank workload)")
        return
    floors = [name for name, impl in impls.items() if impl.part == "floor"]
    if floors:
        if spec.floor and floors == ["floor"]:  # the one ``floor: true`` added (WorkloadSpec._with_floor)
            raise _refused(["floor"], "floor: true needs world_size 1 (the byte floor is one process's)")
        raise _refused(["implementations", floors[0], "part"], f"implementation {floors[0]!r}: part floor needs "
                       "world_size 1")
    parts = sorted(impl.part for impl in impls.values() if impl.part is not None)
    if parts and parts != ["comm", "compute"]:
        raise ValueError(f"parts come as one 'compute' and one 'comm' implementation, got {parts}")


class WorkloadFile(_Model):
    """A workload file: one or more workloads. Top-level keys starting with ``x-`` are ignored
    (a home for YAML anchors shared by several workloads)."""

    workloads: list[WorkloadSpec] = Field(min_length=1)
    model_config = ConfigDict(extra="forbid", frozen=True, title="solbench workload file")
    _extension_prefix: ClassVar[str | None] = "x-"

    @model_validator(mode="before")
    @classmethod
    def _drop_extensions(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if not (isinstance(k, str) and k.startswith("x-"))}
        return value
