"""Hypothesis strategies and settings shared by the fuzzers (tests/unit/test_fuzz_*.py).

Every fuzzer runs a fixed number of examples, derandomized and without an example database,
so CI runs the same inputs every time; ``deadline=None`` keeps a loaded machine from failing it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD_TEXTS = {p.name: p.read_text() for p in [*sorted((ROOT / "workloads").glob("*.yaml")),
                                                  ROOT / "tests" / "data" / "double.yaml"]}


def fuzz_settings(examples: int) -> settings:
    """Reproducible settings running exactly ``examples`` examples (fewer only if the space is smaller)."""
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck), print_blob=False)


# Words a workload file is made of, misspellings of them, and values that stress the checks.
KEYS = ["workloads", "name", "parameters", "cases", "constants", "derived", "dtypes", "inputs", "outputs",
        "ops", "op", "shape", "dtype", "std", "mean", "positive", "reference", "implementations", "fn",
        "setup", "requires", "baseline", "tolerances", "rtol", "atol", "rel_l2", "profiles", "cpu", "cuda",
        "flops", "bytes", "gate_threshold", "m", "n", "k", "causal", "casual", "numel", "rows", "cols",
        "batch", "bias", "stride", "groups", "x", "y", "x-ext", "<<", "tokens", "hidden"]
SCALARS = st.one_of(
    st.sampled_from(["matmul", "matmull", "attention", "add", "conv2d", "float32", "bfloat16", "case",
                     "n * 8", "tokens * hidden", "sqrt(-n)", "min(n)", "((10**64)**64)**64", "n / 0",
                     "9" * 50, "2024-13-45", "tests.unit.helpers:double", "nope.py:f", ":", "", "~",
                     "!!float x", "&a", "*a", ".inf", ".nan", "true", "null", "0x1F", "1e400"]),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=12),
)


def json_like(leaves: st.SearchStrategy[Any] = SCALARS, max_leaves: int = 30) -> st.SearchStrategy[Any]:
    """Nested lists and mappings (keys drawn from KEYS or any text) of ``leaves``."""
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=5),
            st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=8)), inner, max_size=5),
        ),
        max_leaves=max_leaves,
    )


YAML_NOISE = st.text(alphabet=[*list("{}[]:,&*!-#|>'\"\n %@`?<=.0123456789abcnxyz\t\\"), "é", "\x00", "\ufeff"],
                     max_size=30)


@st.composite
def mutated_text(draw: st.DrawFn, texts: dict[str, str]) -> str:
    """One of ``texts`` after a few line- and character-level edits."""
    lines = texts[draw(st.sampled_from(sorted(texts)))].splitlines()
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            lines = [""]
        i = draw(st.integers(0, len(lines) - 1))
        edit = draw(st.sampled_from(["delete", "duplicate", "swap", "noise", "key", "indent", "replace"]))
        if edit == "delete":
            del lines[i]
        elif edit == "duplicate":
            lines.insert(i, lines[i])
        elif edit == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif edit == "noise":
            pos = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:pos] + draw(YAML_NOISE) + lines[i][pos + draw(st.integers(0, 3)):]
        elif edit == "key":
            indent = " " * draw(st.integers(0, 8))
            lines.insert(i, f"{indent}{draw(st.sampled_from(KEYS))}: {yaml.safe_dump(draw(SCALARS)).split(chr(10))[0]}")
        elif edit == "indent":
            lines[i] = " " * draw(st.integers(0, 3)) + lines[i] if draw(st.booleans()) else lines[i].lstrip()
        else:
            old = draw(st.sampled_from(["n", "tokens", "hidden", "matmul", "add", "float32", "[", "{", ":", "x"]))
            lines[i] = lines[i].replace(old, draw(st.sampled_from(["", "m", "casual", "1e30", "-1", "0", "]", "*a"])), 1)
    return "\n".join(lines) + "\n"


@st.composite
def mutated_data(draw: st.DrawFn, data: Any) -> Any:
    """``data`` (parsed YAML or JSON) with a few values replaced, keys deleted or keys added."""
    import copy

    data = copy.deepcopy(data)
    for _ in range(draw(st.integers(1, 3))):
        path = _random_path(draw, data)
        parent, key = _parent(data, path)
        if parent is None:
            return draw(json_like())
        edit = draw(st.sampled_from(["nudge", "nudge", "replace", "delete", "add"]))
        if edit == "nudge":  # a value of the same kind: stays close to valid, reaches deeper checks
            parent[key] = draw(_nudged(parent[key]))
        elif edit == "replace":
            parent[key] = draw(json_like(max_leaves=6))
        elif edit == "delete":
            del parent[key]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(KEYS))] = draw(json_like(max_leaves=4))
        else:
            parent.insert(key, draw(json_like(max_leaves=4)))
    return data


def _nudged(value: Any) -> st.SearchStrategy[Any]:
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.one_of(st.integers(value - 2, value + 2), st.sampled_from([0, -1, 2**62, 10**30]))
    if isinstance(value, float):
        return st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -value]))
    if isinstance(value, str):
        return st.one_of(st.sampled_from(KEYS), SCALARS.filter(lambda v: isinstance(v, str)),
                         st.just(value[:-1]), st.just(value + " * 2"), st.just(value.upper()))
    return json_like(max_leaves=4)


def _random_path(draw: st.DrawFn, data: Any) -> list[Any]:
    path: list[Any] = []
    node = data
    while isinstance(node, dict | list) and node and (not path or draw(st.integers(0, 7)) > 0):
        key = draw(st.sampled_from(sorted(node, key=str))) if isinstance(node, dict) else draw(
            st.integers(0, len(node) - 1))
        path.append(key)
        node = node[key]
    return path


def _parent(data: Any, path: list[Any]) -> tuple[Any, Any]:
    if not path:
        return None, None
    node = data
    for key in path[:-1]:
        node = node[key]
    return node, path[-1]
