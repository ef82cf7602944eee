"""Fuzz the result reader: every file gives a RunResult or one ResultsFormatError line."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from solbench.errors import ResultsFormatError
from solbench.results import store
from tests.unit.factories import make_run
from tests.unit.fuzzing import ROOT, fuzz_settings, json_like, mutated_data

EXAMPLES = 150
SMALL_RUN = store.to_dict(make_run({"gemm[n=1]": {"baseline": [1e-3, 1.1e-3] * 3, "fused": [5e-4] * 4}},
                                   statuses={"gemm[n=1]/broken": "incorrect"}))
REAL_RUN = json.loads((ROOT / "results" / "h200" / "bert.json").read_text())
RESULT_KEYS = sorted({k for d in (SMALL_RUN, SMALL_RUN["cases"][0], SMALL_RUN["cases"][0]["impls"][0]) for k in d})


def read(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.json"
        path.write_bytes(content)
        try:
            run = store.load(path)
        except ResultsFormatError as exc:
            assert len(str(exc).splitlines()) == 1, str(exc)
            return
        again = store.from_dict(json.loads(store.dumps(run)))  # what was read can be written and read back
        assert store.dumps(again) == store.dumps(run)


@fuzz_settings(EXAMPLES)
@given(st.sampled_from([SMALL_RUN, REAL_RUN]).flatmap(mutated_data))
def test_mutated_results(data):
    read(json.dumps(data).encode())


@fuzz_settings(EXAMPLES)
@given(json_like(max_leaves=40).map(lambda d: {"schema_version": 1, **d} if isinstance(d, dict) else d))
def test_random_json(data):
    read(json.dumps(data).encode())


@fuzz_settings(EXAMPLES)
@given(st.data())
def test_mutated_bytes(data):
    raw = bytearray(json.dumps(SMALL_RUN, indent=1).encode())
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        edit = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if edit == "flip":
            raw[i] = data.draw(st.integers(0, 255))
        elif edit == "cut":
            del raw[i: i + data.draw(st.integers(1, 40))]
        else:
            raw[i:i] = data.draw(st.sampled_from([b"NaN", b"[", b"{", b"1e999", b"\xff", b'"x"', b"-", b"9" * 30]))
    read(bytes(raw))


def test_nesting_bomb_and_seeds():
    read(b"[" * 200_000 + b"]" * 200_000)
    read(json.dumps(SMALL_RUN).encode())
    read(json.dumps(REAL_RUN).encode())
    assert RESULT_KEYS
