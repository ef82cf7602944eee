"""Fuzz the workload loader: every input loads, expands and is costed, or raises one SolbenchError line.

The chain is what ``solbench run --dry-run`` does before measuring: read and validate the file,
expand every workload's cases on both device kinds, and cost every case.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml
from hypothesis import given
from hypothesis import strategies as st

from solbench.api import cost_of, plan
from solbench.config.workloads import load_workload_file
from solbench.errors import SolbenchError
from tests.unit.fuzzing import WORKLOAD_TEXTS, fuzz_settings, json_like, mutated_data, mutated_text

EXAMPLES = 150
SHIPPED_DATA = [yaml.safe_load(text) for text in WORKLOAD_TEXTS.values()]


def load_everything(content: str | bytes) -> None:
    """Write ``content`` to a file and run the whole loading chain; only SolbenchError may escape."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "w.yaml"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", errors="surrogatepass")
        try:
            load_workload_file(path)
            for kind in ("cpu", "cuda"):
                for planned in plan([path], kind):
                    for case in planned.cases:
                        cost_of(planned, case)
        except SolbenchError as exc:
            assert len(str(exc).splitlines()) == 1, str(exc)
            assert str(exc).startswith(str(path)), str(exc)


@fuzz_settings(EXAMPLES)
@given(mutated_text(WORKLOAD_TEXTS))
def test_mutated_shipped_files(text):
    load_everything(text)


@fuzz_settings(100)
@given(st.sampled_from(SHIPPED_DATA).flatmap(mutated_data))
def test_mutated_shipped_structures(data):
    load_everything(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


@fuzz_settings(EXAMPLES)
@given(json_like(max_leaves=40))
def test_random_structures(data):
    load_everything(yaml.safe_dump(data, allow_unicode=True))


@fuzz_settings(EXAMPLES)
@given(st.binary(max_size=200))
def test_random_bytes(raw):
    load_everything(raw)


def test_the_shipped_files_load_unchanged():
    for text in WORKLOAD_TEXTS.values():
        load_everything(text)  # the fuzzers' seeds are valid files
