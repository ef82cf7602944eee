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


@pytest.mark.parametrize("text,message", [
    ("sqrt(-n)", "sqrt of a negative number"),
    ("min(n)", r"min\(\) takes at least 2 arguments, got 1"),
    ("min()", r"min\(\) takes at least 2 arguments, got 0"),
    ("ceil(n, 2)", r"ceil\(\) takes one argument, got 2"),
    ("max(*n)", r"max\(\) takes plain arguments"),
    ("n % 0", "division by zero"),
    ("n // (n - n)", "division by zero"),
    ("0 ** -1", r"division by zero \(0 to a negative power\)"),
    ("(-n) ** 0.5", "a negative number to a fractional power"),
    ("10 ** 31", r"a power in '10 \*\* 31' is larger than 1e30"),
    ("0.5 ** -200", "is larger than 1e30"),
    ("1.0000001 ** 1e29", "is larger than 1e30"),
    ("1e30 * 1e30", "is larger than 1e30"),
    ("1e400", "is not a finite number"),
    ("9" * 40, "is larger than 1e30"),
    ("n" + "+n" * 250, r"terms, more than 400"),
    ("(" * 70 + "n" + ")" * 70 + " + " + "-" * 70 + "n", "nested more than 60 deep"),
    ("n * " * 300 + "n", "characters is longer than 1000"),
    ("n\x00", "cannot parse expression"),
    ("huge", "is larger than 1e30"),
    ("bad", "is not a finite number"),
])
def test_every_bad_input_is_an_expr_error(text, message):
    with pytest.raises(ExprError, match=message):
        evaluate(text, {"n": 3, "huge": 10**40, "bad": float("nan")})


def test_powers_are_refused_before_they_are_computed(monkeypatch):
    import ast

    from solbench.workload import expr

    computed = []
    monkeypatch.setitem(expr._BINARY, ast.Pow, lambda a, b: computed.append((a, b)) or a**b)
    with pytest.raises(ExprError, match="larger than 1e30"):
        evaluate("((10**64)**64)**64", {})
    with pytest.raises(ExprError, match="larger than 1e30"):
        evaluate("((2**20)**20)**20", {})
    assert computed == [(2, 20)]  # 2**20 is fine; (2**20)**20 is refused from its logarithm
    assert evaluate("2 ** 99", {}) == 2**99
    assert evaluate("2 ** -200", {}) == 2.0**-200


def test_booleans_and_non_numbers_are_refused():
    with pytest.raises(ExprError, match="a boolean is not a number"):
        evaluate(True, {})
    with pytest.raises(ExprError, match="expected a number or an expression, got list"):
        evaluate([1], {})  # type: ignore[arg-type]
    with pytest.raises(ExprError, match="not a finite number"):
        evaluate(float("inf"), {})


def test_expr_error_is_a_config_error():
    from solbench.errors import ConfigError

    assert issubclass(ExprError, ConfigError) and issubclass(ExprError, ValueError)
