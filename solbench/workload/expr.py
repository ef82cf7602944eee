"""A small, safe evaluator for shape and size expressions.

Workload files write shapes and sizes as expressions of their parameters, e.g.
``tokens * hidden`` or ``ceil((h + 2*pad - r) / stride) + 1``. This module parses them with
:mod:`ast` and evaluates a whitelist of nodes: numbers, parameter names, ``+ - * / // % **``,
unary minus, and the functions ``min``, ``max``, ``ceil``, ``floor``, ``sqrt``. Nothing else is
accepted, and nothing ever reaches :func:`eval`.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from functools import lru_cache

Number = int | float

_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_FUNCTIONS: dict[str, Callable[..., Number]] = {
    "min": min,
    "max": max,
    "ceil": math.ceil,
    "floor": math.floor,
    "sqrt": math.sqrt,
}
_MAX_POWER = 64


class ExprError(ValueError):
    """An expression is malformed, uses something not allowed, or names an unknown parameter."""


@lru_cache(maxsize=4096)
def _parse(text: str) -> ast.expr:
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"cannot parse expression {text!r}: {exc.msg}") from None
    for node in ast.walk(tree):
        _check_node(node, text)
    return tree.body


def _check_node(node: ast.AST, text: str) -> None:
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Call, ast.Load)
    if isinstance(node, ast.operator | ast.unaryop):
        if type(node) not in _BINARY and not isinstance(node, ast.USub | ast.UAdd):
            raise ExprError(f"operator {type(node).__name__} is not allowed in {text!r}")
        return
    if not isinstance(node, allowed):
        raise ExprError(f"{type(node).__name__} is not allowed in {text!r}")
    if isinstance(node, ast.Constant) and (
        isinstance(node.value, bool) or not isinstance(node.value, int | float)
    ):
        raise ExprError(f"only numbers are allowed as constants in {text!r}")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            raise ExprError(f"only {', '.join(sorted(_FUNCTIONS))} may be called in {text!r}")
        if node.keywords or not node.args:
            raise ExprError(f"call with no or keyword arguments in {text!r}")


def names(text: str | Number) -> frozenset[str]:
    """The parameter names an expression refers to."""
    if not isinstance(text, str):
        return frozenset()
    tree = _parse(text)
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)}  # type: ignore[attr-defined]
    found = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return frozenset(found - called)


def evaluate(text: str | Number, params: Mapping[str, Number]) -> Number:
    """Evaluate an expression (or pass a number through) with the given parameter values."""
    if isinstance(text, bool):
        raise ExprError("a boolean is not a number")
    if isinstance(text, int | float):
        return text
    return _eval(_parse(text), params, text)


def evaluate_int(text: str | Number, params: Mapping[str, Number]) -> int:
    """Evaluate an expression that must give a whole number (a size or a dimension)."""
    value = evaluate(text, params)
    if isinstance(value, float):
        if not value.is_integer():
            raise ExprError(f"{text!r} = {value} is not a whole number")
        value = int(value)
    return value


def _eval(node: ast.expr, params: Mapping[str, Number], text: str) -> Number:
    if isinstance(node, ast.Constant):
        return node.value  # type: ignore[return-value]  # numbers only: checked in _check_node
    if isinstance(node, ast.Name):
        if node.id not in params:
            known = ", ".join(sorted(params)) or "none"
            raise ExprError(f"unknown parameter {node.id!r} in {text!r} (known: {known})")
        return params[node.id]
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, params, text)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left = _eval(node.left, params, text)
        right = _eval(node.right, params, text)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_POWER:
            raise ExprError(f"exponent {right} too large in {text!r}")
        try:
            return _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ExprError(f"division by zero in {text!r}") from None
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    args = [_eval(a, params, text) for a in node.args]
    return _FUNCTIONS[node.func.id](*args)
