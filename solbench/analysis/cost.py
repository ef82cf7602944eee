"""Analytic FLOPs and bytes of a case. Pure.

Conventions (FLOP = 2 x multiply-accumulate; matching ``torch.utils.flop_counter``):

    matmul     2·batch·M·N·K                       tensor units  (bytes: B at ``b_dtype`` where given)
    conv2d     2·N·K·P·Q·(C/groups)·R·S            tensor units
    attention  4·B·H·Sq·Sk·D, halved when causal    tensor units  (two matmuls: QK^T and PV)
    pool2d     R·S per output element (max or mean)  vector units; bytes: input + output
    elementwise, reductions, softmax, normalization:
               flops_per_element · numel            vector units  (non-tensor bucket)
    collectives, over n ranks (``ranks``, default and at most the workload's world_size), S = numel x dtype bytes
    (nccl-tests' size: the whole buffer; doc/PERFORMANCE.md of NVIDIA/nccl-tests):
               allreduce       bus bytes S·2(n−1)/n   reductions S/eb·(n−1)/n (vector)   bytes 2S
               reduce_scatter  bus bytes S·(n−1)/n    reductions S/eb·(n−1)/n (vector)   bytes S·(1 + 1/n)
               all_gather      bus bytes S·(n−1)/n                                       bytes S·(1 + 1/n)
               collective bytes S (algbw = S / T); bus bytes over the link (busbw = bus bytes / T);
               bytes: the send buffer read and the receive buffer written (one of them S/n where
               the other is S, for reduce_scatter and all_gather)

Bytes come in two kinds:
    fused      every declared input read once + every declared output written once
    unfused    the sum over ops of each op's own inputs and outputs (what an unfused chain moves)
Their gap bounds the gain fusion can bring. ``flops:`` / ``bytes:`` expressions in the workload
override the tensor FLOPs / fused bytes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from solbench.results.model import Cost
from solbench.workload.cases import Case, CaseError
from solbench.workload.expr import ExprError, evaluate
from solbench.workload.ops import OpFieldError
from solbench.workload.schema import DTYPE_BYTES

Number = int | float


@dataclass(frozen=True)
class OpCost:
    """FLOPs and bytes of one op on its own."""

    tensor_flops: float = 0.0
    vector_flops: float = 0.0
    bytes: float = 0.0
    collective_bytes: float = 0.0
    bus_bytes: float = 0.0


# FLOPs per output element of the elementwise kinds, and how many same-sized tensors they read.
# layernorm: mean, variance (sub, square, add), normalize (sub, mul), affine (mul, add) ~ 8;
# softmax: max, sub, exp, sum, div ~ 5; gelu (erf form) counted as 8.
_ELEMENTWISE: dict[str, tuple[float, int]] = {
    "add": (1, 2),
    "mul": (1, 2),
    "bias_add": (1, 1),
    "relu": (1, 1),
    "gelu": (8, 1),
    "elementwise": (1, 1),
    "softmax": (5, 1),
    "layernorm": (8, 1),
    "batchnorm": (2, 1),
    "copy": (0, 1),
}


def case_cost(case: Case, ops: Iterable[Mapping[str, Any]], *,
              flops: str | Number | None = None, bytes_: str | Number | None = None) -> Cost:
    """The analytic cost of a case: op costs summed, fused bytes from declared tensors. An op that cannot be
    costed is a CaseError at that op (and its field, where one is at fault)."""
    scope = {k: v for k, v in case.scope.items() if isinstance(v, int | float)}
    total = OpCost()
    conv = 0.0  # the convolutions' tensor FLOPs (Cost.conv_flops)
    for j, op in enumerate(ops):
        try:
            c = op_cost(op, scope, case.dtype)
        except ValueError as exc:
            field = exc.field if isinstance(exc, OpFieldError) else None
            raise CaseError(["ops", j, *([field] if field else [])], str(exc)) from None
        conv += c.tensor_flops if str(op["op"]).startswith("conv") else 0.0
        total = OpCost(total.tensor_flops + c.tensor_flops, total.vector_flops + c.vector_flops,
                       total.bytes + c.bytes, total.collective_bytes + c.collective_bytes,
                       total.bus_bytes + c.bus_bytes)
    fused = float(sum(t.nbytes for t in case.inputs + case.outputs))
    overridden = []
    tensor_flops = total.tensor_flops
    if flops is not None:
        tensor_flops = _override("flops", flops, scope)
        overridden.append("flops")
        conv = 0.0  # which part of an expression's FLOPs are convolutions is not known
    if bytes_ is not None:
        fused = _override("bytes", bytes_, scope)
        overridden.append("bytes")
        if not (fused or tensor_flops or total.vector_flops or total.bus_bytes):  # declared tensors are never 0 bytes
            raise CaseError(["bytes"], "bytes = 0 and the case counts no FLOPs: its T_SOL would be 0, and its SOL, "
                            "MBU and S would score against nothing")
    return Cost(case.dtype, tensor_flops, total.vector_flops, fused, total.bytes, tuple(overridden),
                total.collective_bytes, total.bus_bytes, conv_flops=conv)


def _override(key: str, expr: str | Number, scope: Mapping[str, Number]) -> float:
    """A ``flops:`` or ``bytes:`` override at a case; CaseError (naming the field) where it fails or is negative."""
    try:
        value = float(evaluate(expr, scope))
    except ExprError as exc:
        raise CaseError([key], str(exc)) from None
    if value < 0:
        raise CaseError([key], f"{key} = {value:g} is less than 0")
    return value


def value_bytes(dtype: str) -> float:
    """Bytes of one value of ``dtype``. An op's sizes count values, and one element of a packed dtype
    (``float4_e2m1fn_x2``, a declared tensor's unit) holds two: an FP4 weight of k x n values is
    k * n / 2 bytes, not k * n."""
    return DTYPE_BYTES[dtype] / (2 if dtype.endswith("_x2") else 1)


def op_cost(op: Mapping[str, Any], scope: Mapping[str, Number], case_dtype: str) -> OpCost:
    """Cost of one op; sizes are expressions of ``scope``."""
    kind = op["op"]
    eb = value_bytes(op.get("dtype") or case_dtype)
    size = _Sizes(op, scope)
    if kind in _HANDLERS:
        return _HANDLERS[kind](size, eb)
    if kind in _ELEMENTWISE:
        return _elementwise(kind, size, eb)
    raise ValueError(f"unknown op {kind!r} (known: {', '.join(sorted(known_ops()))})")


def known_ops() -> set[str]:
    """Every op kind the cost model knows."""
    return set(_HANDLERS) | set(_ELEMENTWISE)


_FRACTIONAL = frozenset({"flops_per_element"})  # the one field that is a rate, not a count or a size


class _Sizes:
    """Evaluates an op's size fields on demand."""

    def __init__(self, op: Mapping[str, Any], scope: Mapping[str, Number]) -> None:
        self.op, self.scope = op, scope

    def __contains__(self, key: str) -> bool:
        return key in self.op

    def __call__(self, key: str, default: Number | None = None, least: Number = 0) -> Number:
        """The field's value (or ``default``); OpFieldError (naming ``key``) when it has no value or is
        below ``least``."""
        if key not in self.op:
            if default is None:
                raise OpFieldError(f"op {self.op['op']!r} needs field {key!r}")
            return default
        try:
            value = evaluate(self.op[key], self.scope)
        except ExprError as exc:
            raise OpFieldError(str(exc), key) from None
        if value < least:
            raise OpFieldError(f"op {self.op['op']!r}: {key} = {value} is less than {least}", key)
        if key not in _FRACTIONAL and not float(value).is_integer():  # 2.67 rows would count fractional FLOPs
            raise OpFieldError(f"op {self.op['op']!r}: {key} = {value:g} is not a whole number", key)
        return value


def _matmul(v: _Sizes, eb: float) -> OpCost:
    b, m, n, k = v("batch", 1), v("m"), v("n"), v("k")
    weight_batch = b if v("batched_b", 1) else 1
    bias = n * b if v("bias", 0) else 0
    wb = value_bytes(v.op["b_dtype"]) if "b_dtype" in v else eb  # e.g. an FP8 weight beside 16-bit x
    return OpCost(2.0 * b * m * n * k, 0.0, eb * (b * m * k + b * m * n + bias) + wb * weight_batch * k * n)


def _conv2d(v: _Sizes, eb: float) -> OpCost:
    n, c, h, w, k, r, s = v("n"), v("c"), v("h"), v("w"), v("k"), v("r"), v("s")
    stride, pad, dil, groups = v("stride", 1, 1), v("pad", 0), v("dilation", 1, 1), v("groups", 1, 1)
    if c % groups or k % groups:  # as torch refuses it; c // groups would price a channel count no filter has
        raise OpFieldError(f"op 'conv2d': groups = {groups} does not divide both c = {c} and k = {k}", "groups")
    p = (h + 2 * pad - dil * (r - 1) - 1) // stride + 1
    q = (w + 2 * pad - dil * (s - 1) - 1) // stride + 1
    if p < 1 or q < 1:
        raise ValueError(f"op 'conv2d': the output would be {p} x {q} (the filter is larger than the padded input)")
    flops = 2.0 * n * k * p * q * (c // groups) * r * s
    return OpCost(flops, 0.0, eb * (n * c * h * w + k * (c // groups) * r * s + n * k * p * q))


def _pool2d(v: _Sizes, eb: float) -> OpCost:
    n, c, h, w, r, s = v("n"), v("c"), v("h"), v("w"), v("r"), v("s")
    stride, pad = v("stride", 1, 1), v("pad", 0)
    p = (h + 2 * pad - r) // stride + 1
    q = (w + 2 * pad - s) // stride + 1
    if p < 1 or q < 1:
        raise ValueError(f"op 'pool2d': the output would be {p} x {q} (the window is larger than the padded input)")
    return OpCost(0.0, float(r * s * n * c * p * q), eb * (n * c * h * w + n * c * p * q))


def _attention(v: _Sizes, eb: float) -> OpCost:
    b, h, sq, sk, d = v("b"), v("h"), v("sq"), v("sk"), v("d")
    dv = v("dv", d)
    flops = 2.0 * b * h * sq * sk * d + 2.0 * b * h * sq * sk * dv
    if v("causal", 0):
        flops /= 2
    return OpCost(flops, 0.0, eb * b * h * (sq * d + sk * d + sk * dv + sq * dv))


def _elementwise(kind: str, v: _Sizes, eb: float) -> OpCost:
    per, reads = _ELEMENTWISE[kind]
    numel = v("numel") if "numel" in v else v("rows") * v("cols")
    params = v("param_elements", 0)  # e.g. LayerNorm weight and bias, a bias vector
    return OpCost(0.0, float(v("flops_per_element", per)) * numel,
                  eb * (numel * (v("inputs", reads) + 1) + params))


# bus-bandwidth factor as a function of the rank count n, and whether the op reduces (nccl-tests)
_COLLECTIVES: dict[str, tuple[Callable[[Number], float], bool]] = {
    "allreduce": (lambda n: 2.0 * (n - 1) / n, True),
    "reduce_scatter": (lambda n: (n - 1) / n, True),
    "all_gather": (lambda n: (n - 1) / n, False),
}


def bus_factor(kind: str, ranks: Number) -> float:
    """nccl-tests' busbw / algbw of a collective over ``ranks`` ranks (allreduce: 2(n-1)/n)."""
    return _COLLECTIVES[kind][0](ranks)


def _collective(kind: str, v: _Sizes, eb: float) -> OpCost:
    numel = v("numel")
    world = v.scope.get("world_size")  # in scope where the workload has ranks
    n = v("ranks", world or 1)
    if world is not None and n > world:  # its bus factor would price ranks the measured time never had
        raise OpFieldError(f"op {kind!r}: ranks = {n} is more than the workload's world_size {world} (a collective "
                           "spans at most every rank)", "ranks")
    if n < 2:
        raise ValueError(f"op {kind!r}: ranks = {n}; a collective needs 2 ranks or more "
                         "(give 'ranks', or world_size on the workload)")
    size = eb * numel
    reduces = _COLLECTIVES[kind][1]
    # HBM per rank: read the send buffer, write the receive buffer (in-place or not); reduce_scatter
    # receives, and all_gather sends, this rank's 1/n of the buffer
    moved = 2.0 * size if kind == "allreduce" else size * (1 + 1 / n)
    return OpCost(0.0, numel * (n - 1) / n if reduces else 0.0, moved, float(size), size * bus_factor(kind, n))


_HANDLERS: dict[str, Callable[[_Sizes, float], OpCost]] = {
    "matmul": _matmul,
    "conv2d": _conv2d,
    "attention": _attention,
    "pool2d": _pool2d,
    **{kind: functools.partial(_collective, kind) for kind in _COLLECTIVES},
}
