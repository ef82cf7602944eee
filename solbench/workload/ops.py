"""The fields each op kind of the cost model takes, and their checks. Pure.

    matmul     m, n, k; batch, batched_b (flag), bias (flag); b_dtype (the B operand's element type,
               where it is stored narrower than the op's, e.g. an FP8 weight)
    conv2d     n, c, h, w, k, r, s; stride, pad, dilation, groups
    attention  b, h, sq, sk, d; dv, causal (flag)
    pool2d     n, c, h, w, r, s; stride, pad (max or average pooling; a global mean is r = h, s = w)
    add, mul, bias_add, relu, gelu, elementwise, softmax, layernorm, batchnorm, copy:
               numel, or rows and cols; inputs, flops_per_element, param_elements
    allreduce, reduce_scatter, all_gather (collectives over ranks):
               numel; ranks (default: the workload's world_size, and at most it where it has ranks)

Every kind also takes ``op`` and ``dtype``. :mod:`solbench.analysis.cost` reads exactly these
fields (a unit test holds the two together).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from solbench.text import suggest

ELEMENTWISE_KINDS = ("add", "mul", "bias_add", "relu", "gelu", "elementwise", "softmax", "layernorm",
                     "batchnorm", "copy")
COLLECTIVE_KINDS = ("allreduce", "reduce_scatter", "all_gather")
_ELEMENTWISE_FIELDS = frozenset({"numel", "rows", "cols", "inputs", "flops_per_element", "param_elements"})

# kind -> (required fields, optional fields)
OP_FIELDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "matmul": (frozenset({"m", "n", "k"}), frozenset({"batch", "batched_b", "bias"})),
    "conv2d": (frozenset({"n", "c", "h", "w", "k", "r", "s"}),
               frozenset({"stride", "pad", "dilation", "groups"})),
    "attention": (frozenset({"b", "h", "sq", "sk", "d"}), frozenset({"dv", "causal"})),
    "pool2d": (frozenset({"n", "c", "h", "w", "r", "s"}), frozenset({"stride", "pad"})),
    **{kind: (frozenset(), _ELEMENTWISE_FIELDS) for kind in ELEMENTWISE_KINDS},
    **{kind: (frozenset({"numel"}), frozenset({"ranks"})) for kind in COLLECTIVE_KINDS},
}
COMMON_FIELDS = frozenset({"op", "dtype"})
# kind -> fields that name an operand's element type (a dtype name, not a size expression)
DTYPE_FIELDS: dict[str, frozenset[str]] = {"matmul": frozenset({"b_dtype"})}
NAME_FIELDS = COMMON_FIELDS.union(*DTYPE_FIELDS.values())  # fields that hold names, not size expressions
FLAG_FIELDS = frozenset({"batched_b", "bias", "causal"})  # true/false accepted, read as 1/0


def all_size_fields() -> list[str]:
    """Every size or flag field of any op kind, sorted."""
    return sorted({f for req, opt in OP_FIELDS.values() for f in req | opt})


class OpFieldError(ValueError):
    """An op names an unknown kind or field, or lacks a required one; ``field`` is the key at fault."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def check_op(op: Mapping[Any, Any]) -> None:
    """Raise OpFieldError unless ``op`` has a known kind, only that kind's fields, and the required ones."""
    kind = op.get("op")
    if not isinstance(kind, str):
        raise OpFieldError("'op' must name the operation kind", "op")
    if kind not in OP_FIELDS:
        raise OpFieldError(f"unknown op {_short(kind)}{suggest(kind, OP_FIELDS)} "
                           f"(known: {', '.join(sorted(OP_FIELDS))})", "op")
    required, optional = OP_FIELDS[kind]
    allowed = required | optional | COMMON_FIELDS | DTYPE_FIELDS.get(kind, frozenset())
    for key in op:
        if key not in allowed:
            name = key if isinstance(key, str) else str(key)
            raise OpFieldError(f"unknown field {_short(key)} for op {kind!r}{suggest(name, allowed)}", key)
    missing = sorted(required - set(op))
    if missing:
        raise OpFieldError(f"op {kind!r} needs field {missing[0]!r}")
    if kind in ELEMENTWISE_KINDS:
        has_numel, has_rows, has_cols = "numel" in op, "rows" in op, "cols" in op
        if has_numel and (has_rows or has_cols):
            raise OpFieldError(f"op {kind!r}: give 'numel' or 'rows' and 'cols', not both")
        if not has_numel and not (has_rows and has_cols):
            raise OpFieldError(f"op {kind!r} needs 'numel', or both 'rows' and 'cols'")


def _short(value: Any, limit: int = 50) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
