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

Sizes are expressions of the parameters (see :mod:`solbench.workload.expr`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from solbench.workload.expr import ExprError, names

Expr = int | float | str
ParamValue = int | float | str

DTYPES = (
    "float64",
    "float32",
    "bfloat16",
    "float16",
    "float8_e4m3fn",
    "float8_e5m2",
    "int8",
    "int32",
    "int64",
)
DType = Literal[
    "float64",
    "float32",
    "bfloat16",
    "float16",
    "float8_e4m3fn",
    "float8_e5m2",
    "int8",
    "int32",
    "int64",
]
DTYPE_BYTES = {
    "float64": 8,
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "int8": 1,
    "int32": 4,
    "int64": 8,
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_expr(value: Expr) -> Expr:
    try:
        names(value)
    except ExprError as exc:
        raise ValueError(str(exc)) from None
    return value


class TensorSpec(_Model):
    """One named input or output tensor."""

    shape: list[Expr] = Field(description="Dimensions, as expressions of the parameters.")
    dtype: DType | Literal["case"] = Field(
        "case", description="Element type; 'case' takes the case's dtype."
    )
    std: Expr = Field(1.0, description="Standard deviation of the random normal initial values.")
    mean: Expr = Field(0.0, description="Mean of the random initial values.")
    positive: bool = Field(False, description="Draw |values| + mean (e.g. variances).")

    @field_validator("shape", "std", "mean")
    @classmethod
    def _exprs_ok(cls, value: Any) -> Any:
        return [_check_expr(d) for d in value] if isinstance(value, list) else _check_expr(value)


class Op(_Model):
    """One operation, for the analytic cost model. Fields depend on ``op``.

    matmul: m, n, k, batch · conv2d: n, c, h, w, k, r, s, stride, pad, dilation, groups ·
    attention: b, h, sq, sk, d, causal · elementwise kinds (add, mul, bias_add, relu, gelu,
    elementwise, layernorm, softmax, batchnorm): numel (or rows x cols), inputs, flops_per_element.
    """

    model_config = ConfigDict(extra="allow", frozen=True)
    op: str = Field(description="Operation kind.")
    dtype: DType | None = Field(None, description="Element type, if not the case's.")


class Tolerance(_Model):
    """Elementwise |out - ref| <= atol + rtol * |ref|, and ||out - ref|| / ||ref|| <= rel_l2."""

    rtol: float = Field(gt=0)
    atol: float = Field(ge=0)
    rel_l2: float | None = Field(None, gt=0)


class Implementation(_Model):
    """An implementation: a function, and optionally a set-up step run once per input set."""

    fn: str = Field(description="'module:function' or 'path/to/file.py:function'.")
    setup: str | None = Field(
        None,
        description="Called once per input set, outside timing, with the inputs; returns the "
        "keyword arguments for fn (e.g. folded or concatenated weights).",
    )
    requires: list[Literal["cuda", "cupy", "fp8", "compile", "nvmath", "sm80", "sm89", "sm90"]] = Field(
        default_factory=list, description="What the implementation needs; skipped otherwise."
    )
    peak_dtype: DType | None = Field(
        None, description="Score against this dtype's peak (e.g. float8_e4m3fn for an FP8 path)."
    )
    tolerance: Tolerance | None = Field(
        None, description="Overrides the workload's tolerance for this implementation (e.g. FP8)."
    )
    description: str = ""


class Profile(_Model):
    """Overrides used on one kind of device (e.g. smaller sizes on the CPU)."""

    parameters: dict[str, list[ParamValue]] | None = None
    cases: list[dict[str, ParamValue]] | None = None
    dtypes: list[DType] | None = None


class WorkloadSpec(_Model):
    """One workload: its parameter sweep, tensors, ops, reference and implementations."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-]+$")]
    description: str = ""
    parameters: dict[str, list[ParamValue]] = Field(
        default_factory=dict, description="Swept as a cartesian product."
    )
    cases: list[dict[str, ParamValue]] | None = Field(
        None, description="Explicit parameter sets, used instead of the product when given."
    )
    constants: dict[str, ParamValue] = Field(
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
    reference_dtype: Literal["float32", "float64"] = "float32"
    implementations: dict[str, Implementation] = Field(min_length=1)
    baseline: str = Field("baseline", description="Implementation speedups are measured against.")
    tolerances: dict[DType, Tolerance] = Field(default_factory=dict)
    gate_threshold: float | None = Field(None, gt=0, description="Per-workload gate threshold.")
    profiles: dict[Literal["cpu", "cuda"], Profile] = Field(default_factory=dict)

    @field_validator("implementations", mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: {"fn": v} if isinstance(v, str) else v for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _consistent(self) -> WorkloadSpec:
        if self.baseline not in self.implementations:
            raise ValueError(f"baseline {self.baseline!r} is not one of the implementations")
        if self.cases is None and not self.parameters and not self.constants:
            raise ValueError("give parameters, cases or constants")
        clash = set(self.inputs) & set(self.outputs)
        if clash:
            raise ValueError(f"names used for both inputs and outputs: {sorted(clash)}")
        params = set(self.parameters) | set(self.constants) | set(self.derived)
        for case in self.cases or []:
            params |= set(case)
        shadow = (set(self.inputs) | set(self.outputs)) & params
        if shadow:
            raise ValueError(f"tensor names that are also parameters: {sorted(shadow)} "
                             "(an implementation could not tell them apart); rename one")
        return self


class WorkloadFile(_Model):
    """A workload file: one or more workloads. Top-level keys starting with ``x-`` are ignored
    (a home for YAML anchors shared by several workloads)."""

    workloads: list[WorkloadSpec] = Field(min_length=1)
    model_config = ConfigDict(extra="forbid", frozen=True, title="solbench workload file")

    @model_validator(mode="before")
    @classmethod
    def _drop_extensions(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if not (isinstance(k, str) and k.startswith("x-"))}
        return value
