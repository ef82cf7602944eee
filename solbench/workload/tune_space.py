"""Autotuning search spaces: the grid of configurations and the constraints that filter it. Pure.

An implementation declares::

    tune:
      space: {tpr: [32, 64, 128], rows: [1, 2, 4]}       # tried as a cartesian product
      constraints: ["tpr * rows <= 1024", "tpr <= hidden // 8"]

A constraint is a comparison (``< <= > >= == !=``, chained as in Python), or several joined
with ``and``, ``or``, ``not``; its operands are size expressions (:mod:`solbench.workload.expr`)
of the tuned parameters and the case's parameters. Nothing reaches :func:`eval`.
"""

from __future__ import annotations

import ast
import itertools
import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from solbench.workload.expr import ExprError, evaluate, names

Number = int | float
Config = dict[str, Any]

_COMPARE: dict[type[ast.cmpop], Callable[[Number, Number], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


def _parse(text: str) -> ast.expr:
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ExprError(f"cannot parse constraint {text!r}: {exc.msg}") from None
    _check(tree, text)
    return tree


def _check(node: ast.expr, text: str) -> None:
    """A boolean tree of comparisons whose operands are valid size expressions."""
    if isinstance(node, ast.BoolOp):
        for value in node.values:
            _check(value, text)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        _check(node.operand, text)
    elif isinstance(node, ast.Compare):
        if any(type(op) not in _COMPARE for op in node.ops):
            raise ExprError(f"only < <= > >= == != may compare in constraint {text!r}")
        for operand in (node.left, *node.comparators):
            names(ast.unparse(operand))  # raises ExprError for anything a size expression forbids
    else:
        raise ExprError(f"constraint {text!r} is not a comparison (e.g. 'block <= hidden')")


def constraint_names(text: str) -> frozenset[str]:
    """The parameter names a constraint refers to; ExprError if it is malformed."""
    tree = _parse(text)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                found |= names(ast.unparse(operand))
    return frozenset(found)


def holds(text: str, scope: Mapping[str, Number]) -> bool:
    """Whether a constraint holds for these parameter values; ExprError if it cannot be evaluated."""
    return _holds(_parse(text), scope)


def _holds(node: ast.expr, scope: Mapping[str, Number]) -> bool:
    if isinstance(node, ast.BoolOp):
        results = (_holds(v, scope) for v in node.values)
        return all(results) if isinstance(node.op, ast.And) else any(results)
    if isinstance(node, ast.UnaryOp):
        return not _holds(node.operand, scope)
    assert isinstance(node, ast.Compare)
    left = evaluate(ast.unparse(node.left), scope)
    for op, comparator in zip(node.ops, node.comparators, strict=True):
        right = evaluate(ast.unparse(comparator), scope)
        if not _COMPARE[type(op)](left, right):
            return False
        left = right
    return True


def grid(space: Mapping[str, Sequence[Any]]) -> Iterator[Config]:
    """Every configuration of a space, in declared order (the last parameter varies fastest)."""
    keys = list(space)
    for combo in itertools.product(*(space[k] for k in keys)):
        yield dict(zip(keys, combo, strict=True))


def valid_configs(space: Mapping[str, Sequence[Any]], constraints: Sequence[str],
                  case_scope: Mapping[str, Any]) -> tuple[list[Config], int]:
    """Configurations meeting every constraint for one case, and how many were filtered out.

    The scope of a constraint is the case's numeric parameters, overridden by the configuration.
    """
    trees = [_parse(c) for c in constraints]
    kept, dropped = [], 0
    for config in grid(space):
        scope = _scope(case_scope, config)
        if all(_holds_at(j, tree, scope) for j, tree in enumerate(trees)):
            kept.append(config)
        else:
            dropped += 1
    return kept, dropped


def unmet(constraints: Sequence[str], case_scope: Mapping[str, Any], config: Mapping[str, Any]) -> str | None:
    """The first constraint one configuration does not meet on a case (a stored one, checked against the
    constraints of now), or None; ConstraintError where one cannot be evaluated there."""
    scope = _scope(case_scope, config)
    return next((text for j, text in enumerate(constraints) if not _holds_at(j, _parse(text), scope)), None)


def _scope(case_scope: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Number]:
    """What a constraint sees: the case's numeric parameters, overridden by the configuration's."""
    base = {k: v for k, v in case_scope.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    return {**base, **{k: v for k, v in config.items() if isinstance(v, int | float)}}


class ConstraintError(ExprError):
    """A constraint that parses but cannot be evaluated at some configuration (e.g. a division by
    zero); ``index`` is its place in the list, for the error's file and line."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


def _holds_at(index: int, tree: ast.expr, scope: Mapping[str, Number]) -> bool:
    try:
        return _holds(tree, scope)
    except ExprError as exc:
        raise ConstraintError(index, f"{exc} (at {config_label(scope)})") from None


def config_label(config: Mapping[str, Any]) -> str:
    """``tpr=64,rows=2``: a configuration as a short, stable label."""
    return ",".join(f"{k}={v}" for k, v in config.items())
