import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from solbench.workload.expr import ExprError, evaluate, evaluate_int, names


def test_arithmetic_and_functions():
    p = {"h": 56, "pad": 1, "r": 3, "stride": 2}
    assert evaluate("(h + 2*pad - r) // stride + 1", p) == 28
    assert evaluate("ceil(h / 3)", p) == math.ceil(56 / 3)
    assert evaluate("max(h, 100) - min(pad, r)", p) == 99
    assert evaluate("h ** -0.5", p) == pytest.approx(56 ** -0.5)
    assert evaluate("-h % 5", p) == (-56) % 5
    assert evaluate(7, p) == 7


def test_names_excludes_functions():
    assert names("min(a, b) * c + ceil(d)") == {"a", "b", "c", "d"}
    assert names(3) == frozenset()


@pytest.mark.parametrize("text", [
    "__import__('os')", "a.b", "[1, 2]", "x if y else z", "lambda: 1", "open('f')",
    "'text'", "a < b", "a and b", "2 ** 1000", "f(x=1)", "(1).__class__",
])
def test_rejects_everything_else(text):
    with pytest.raises(ExprError):
        evaluate(text, {"a": 1, "b": 2, "x": 1, "y": 1, "z": 1})


def test_unknown_parameter_names_known_ones():
    with pytest.raises(ExprError, match=r"unknown parameter 'tokenz'.*tokens"):
        evaluate("tokenz * 2", {"tokens": 4})


def test_division_by_zero_is_an_expr_error():
    with pytest.raises(ExprError, match="division by zero"):
        evaluate("a / (b - 2)", {"a": 1, "b": 2})


def test_evaluate_int_requires_whole_numbers():
    assert evaluate_int("a / 2", {"a": 8}) == 4
    with pytest.raises(ExprError, match="not a whole number"):
        evaluate_int("a / 3", {"a": 8})


@given(st.integers(-1000, 1000), st.integers(1, 1000))
def test_matches_python_on_integers(a, b):
    p = {"a": a, "b": b}
    assert evaluate("a * b + a // b - a % b", p) == a * b + a // b - a % b
