"""Fuzz the expression evaluator: every input gives a finite number of sane size or an ExprError."""

from __future__ import annotations

import contextlib
import math

from hypothesis import given
from hypothesis import strategies as st

from solbench.workload.expr import MAX_MAGNITUDE, ExprError, evaluate, evaluate_int, names
from tests.unit.fuzzing import fuzz_settings

EXAMPLES = 400
PARAMS = {"n": 3, "m": 0, "neg": -7, "half": 0.5, "big": 10**29, "tiny": 1e-300}

NUMBERS = st.one_of(
    st.integers(-10, 10), st.integers(-(2**200), 2**200), st.sampled_from(["10**64", "1e308", "1e400", "0.0"]),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
).map(str)
LEAVES = st.one_of(NUMBERS, st.sampled_from([*PARAMS, "unknown", "min", "__import__", "True", "None", "'s'"]))


def _node(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    ops = st.sampled_from(["+", "-", "*", "/", "//", "%", "**", "@", "<<", "<", "and", "if"])
    calls = st.sampled_from(["min", "max", "ceil", "floor", "sqrt", "abs", "eval", "__import__"])
    return st.one_of(
        st.tuples(inner, ops, inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(st.sampled_from(["-", "+", "~", "not "]), inner).map("".join),
        st.tuples(calls, st.lists(inner, max_size=3)).map(lambda t: f"{t[0]}({', '.join(t[1])})"),
        inner.map(lambda s: f"{s}.real"),
    )


EXPRESSIONS = st.recursive(LEAVES, _node, max_leaves=40)
TEXT = st.text(alphabet=[*list("nm0123456789+-*/%().,e_ abcdfghijklopqrstuvwxyz'\"[]{}:<>=!~\\\n\t"), "\x00", "é"],
               max_size=120)


def check(text: str) -> None:
    try:
        value = evaluate(text, PARAMS)
    except ExprError as exc:
        assert len(str(exc).splitlines()) == 1
        return
    assert isinstance(value, int | float) and not isinstance(value, bool)
    assert math.isfinite(value) and abs(value) <= MAX_MAGNITUDE
    with contextlib.suppress(ExprError):
        assert isinstance(evaluate_int(text, PARAMS), int)
    assert names(text) <= set(PARAMS)


@fuzz_settings(EXAMPLES)
@given(EXPRESSIONS)
def test_generated_expressions(text):
    check(text)


@fuzz_settings(EXAMPLES)
@given(TEXT)
def test_random_text(text):
    check(text)


@fuzz_settings(EXAMPLES)
@given(st.one_of(st.integers(), st.floats(), st.booleans(), st.none(), st.lists(st.integers(), max_size=2)))
def test_non_text_values(value):
    try:
        result = evaluate(value, PARAMS)
    except ExprError:
        return
    assert math.isfinite(result) and abs(result) <= MAX_MAGNITUDE


@fuzz_settings(100)
@given(st.integers(1, 5000), st.sampled_from(["+n", "*n", "**n", "-", "(", "min(n,"]))
def test_long_and_deep_expressions(repeat, piece):
    check("n" + piece * repeat if piece[0] in "+*" else piece * repeat + "n")
