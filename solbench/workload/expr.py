"""A small, safe evaluator for shape and size expressions.

Workload files write shapes and sizes as expressions of their parameters, e.g.
``tokens * hidden`` or ``ceil((h + 2*pad - r) / stride) + 1``. This module parses them with
:mod:`ast` and evaluates a whitelist of nodes: numbers, parameter names, ``+ - * / // % **``,
unary minus, and the functions ``min``, ``max`` (two or more arguments), ``ceil``, ``floor``,
``sqrt`` (one). Nothing else is accepted, and nothing ever reaches :func:`eval`.

Every input, however malformed, either gives a finite real number or raises :class:`ExprError`.
Work is bounded before it is done: an expression has at most MAX_LENGTH characters, MAX_NODES
syntax nodes and MAX_DEPTH levels of nesting, and every value (parameters, constants and each
intermediate result) is at most MAX_MAGNITUDE in size; a power is refused from the logarithms
of its operands before it is computed, so ``((10**64)**64)**64`` fails at once.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from solbench.errors import ConfigError

Number = int | float

MAX_LENGTH = 1000  # characters
MAX_NODES = 400  # ast nodes
MAX_DEPTH = 60  # ast nesting
MAX_MAGNITUDE = 10**30  # |value| of any parameter, constant or intermediate result
_LOG10_MAX = 30.0

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int]] = {  # name -> (function, min args, max args)
    "min": (min, 2, MAX_NODES),
    "max": (max, 2, MAX_NODES),
    "ceil": (math.ceil, 1, 1),
    "floor": (math.floor, 1, 1),
    "sqrt": (math.sqrt, 1, 1),
}


class ExprError(ConfigError, ValueError):
    """An expression is malformed, uses something not allowed, names an unknown parameter, or
    has no finite value of sane size."""


def _quote(text: str, limit: int = 80) -> str:
    shown = repr(text)
    return shown if len(shown) <= limit else shown[: limit - 4] + "...'"


@lru_cache(maxsize=4096)
def _parse(text: str) -> ast.expr:
    if len(text) > MAX_LENGTH:
        raise ExprError(f"expression of {len(text)} characters is longer than {MAX_LENGTH}: {_quote(text)}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"cannot parse expression {_quote(text)}: {exc.msg}") from None
    except (ValueError, MemoryError, RecursionError, OverflowError) as exc:
        raise ExprError(f"cannot parse expression {_quote(text)}: {type(exc).__name__}") from None
    nodes = list(ast.walk(tree))
    if len(nodes) > MAX_NODES:
        raise ExprError(f"expression has {len(nodes)} terms, more than {MAX_NODES}: {_quote(text)}")
    if _depth(tree) > MAX_DEPTH:
        raise ExprError(f"expression is nested more than {MAX_DEPTH} deep: {_quote(text)}")
    for node in nodes:
        _check_node(node, text)
    return tree.body


def _depth(tree: ast.AST) -> int:
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((child, d + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _check_node(node: ast.AST, text: str) -> None:
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Call, ast.Load)
    if isinstance(node, ast.operator | ast.unaryop):
        if type(node) not in _BINARY and not isinstance(node, ast.USub | ast.UAdd):
            raise ExprError(f"operator {type(node).__name__} is not allowed in {_quote(text)}")
        return
    if not isinstance(node, allowed):
        raise ExprError(f"{type(node).__name__} is not allowed in {_quote(text)}")
    if isinstance(node, ast.Constant) and (
        isinstance(node.value, bool) or not isinstance(node.value, int | float)
    ):
        raise ExprError(f"only numbers are allowed as constants in {_quote(text)}")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            raise ExprError(f"only {', '.join(sorted(_FUNCTIONS))} may be called in {_quote(text)}")
        _, least, most = _FUNCTIONS[node.func.id]
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise ExprError(f"{node.func.id}() takes plain arguments in {_quote(text)}")
        if not least <= len(node.args) <= most:
            count = "one argument" if least == most else f"at least {least} arguments"
            raise ExprError(f"{node.func.id}() takes {count}, got {len(node.args)} in {_quote(text)}")


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
        return _checked(text, str(text))
    if not isinstance(text, str):
        raise ExprError(f"expected a number or an expression, got {type(text).__name__}")
    return _eval(_parse(text), params, text)


def evaluate_int(text: str | Number, params: Mapping[str, Number]) -> int:
    """Evaluate an expression that must give a whole number (a size or a dimension)."""
    value = evaluate(text, params)
    if isinstance(value, float):
        if not value.is_integer():
            raise ExprError(f"{_quote(str(text))} = {value} is not a whole number")
        value = int(value)
    return value


def _checked(value: Any, text: str) -> Number:
    """``value`` if it is a finite real number of sane magnitude; ExprError otherwise."""
    if isinstance(value, bool):
        return int(value)
    if not isinstance(value, int | float):
        raise ExprError(f"{_quote(text)} has no real value (got {type(value).__name__})")
    if isinstance(value, float) and not math.isfinite(value):
        raise ExprError(f"{_quote(text)} is not a finite number ({value})")
    if abs(value) > MAX_MAGNITUDE:
        raise ExprError(f"a value in {_quote(text)} is larger than 1e30")
    return value


def _eval(node: ast.expr, params: Mapping[str, Number], text: str) -> Number:
    if isinstance(node, ast.Constant):
        return _checked(node.value, text)
    if isinstance(node, ast.Name):
        if node.id not in params:
            known = ", ".join(sorted(params)) or "none"
            raise ExprError(f"unknown parameter {node.id!r} in {_quote(text)} (known: {_cut(known)})")
        return _checked(params[node.id], text)
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, params, text)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left = _eval(node.left, params, text)
        right = _eval(node.right, params, text)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right, text)
        try:
            return _checked(_BINARY[type(node.op)](left, right), text)
        except ZeroDivisionError:
            raise ExprError(f"division by zero in {_quote(text)}") from None
        except OverflowError:
            raise ExprError(f"a value in {_quote(text)} is larger than 1e30") from None
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    args = [_eval(a, params, text) for a in node.args]
    name = node.func.id
    if name == "sqrt" and args[0] < 0:
        raise ExprError(f"sqrt of a negative number in {_quote(text)}")
    return _checked(_FUNCTIONS[name][0](*args), text)


def _check_power(base: Number, exponent: Number, text: str) -> None:
    """Refuse ``base ** exponent`` before computing it when it has no real value or is too large."""
    if base == 0 and exponent < 0:
        raise ExprError(f"division by zero (0 to a negative power) in {_quote(text)}")
    if base < 0 and not float(exponent).is_integer():
        raise ExprError(f"a negative number to a fractional power in {_quote(text)}")
    grows = (abs(base) > 1) == (exponent > 0)  # |result| > 1
    if base != 0 and grows and abs(exponent) * abs(math.log10(abs(base))) > _LOG10_MAX:
        raise ExprError(f"a power in {_quote(text)} is larger than 1e30")


def _cut(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
