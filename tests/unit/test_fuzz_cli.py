"""Fuzz the CLI on generated files: ``run --dry-run FILE`` and ``show FILE`` exit 0, or exit 2 with
one ``error:`` line on stderr; never a traceback."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import yaml
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from solbench.cli import main
from solbench.results import store
from tests.unit.factories import make_run
from tests.unit.fuzzing import WORKLOAD_TEXTS, fuzz_settings, mutated_data, mutated_text

EXAMPLES = 40
SHIPPED_DATA = [yaml.safe_load(text) for text in WORKLOAD_TEXTS.values()]
RUN_DATA = store.to_dict(make_run({"gemm[n=1]": {"baseline": [1e-3] * 6, "fused": [5e-4] * 6}},
                                  statuses={"gemm[n=1]/broken": "error"}))


def invoke(args: list[str], content: bytes, name: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(content)
        result = CliRunner().invoke(main, [*args, str(path), "--results-dir", str(Path(folder) / "results")])
    assert result.exit_code in (0, 2), (result.exit_code, result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    if result.exit_code == 2:
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
        assert "Traceback" not in result.output


@fuzz_settings(EXAMPLES)
@given(mutated_text(WORKLOAD_TEXTS))
def test_dry_run_on_mutated_workload_text(text):
    invoke(["run", "--dry-run", "--gpu", "h200"], text.encode("utf-8", "surrogatepass"), "w.yaml")


@fuzz_settings(EXAMPLES)
@given(st.sampled_from(SHIPPED_DATA).flatmap(mutated_data))
def test_dry_run_on_mutated_workload_structures(data):
    invoke(["run", "--dry-run", "--gpu", "h200"], yaml.safe_dump(data, allow_unicode=True).encode(), "w.yaml")


@fuzz_settings(EXAMPLES)
@given(mutated_data(RUN_DATA))
def test_show_on_mutated_results(data):
    invoke(["show"], json.dumps(data).encode(), "run.json")


def test_the_seeds_succeed():
    invoke(["show"], json.dumps(RUN_DATA).encode(), "run.json")
    for text in WORKLOAD_TEXTS.values():
        invoke(["run", "--dry-run", "--gpu", "h200"], text.encode(), "w.yaml")
