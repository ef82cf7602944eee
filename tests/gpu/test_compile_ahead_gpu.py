"""Compiling ahead on a GPU (solbench.execute.warm; skipped without CUDA): Inductor and Triton build
in processes side by side, the measuring workers load the run's cache."""

import pytest
from click.testing import CliRunner

from solbench.kernels.requirements import requirement_missing
from solbench.results import store

pytestmark = pytest.mark.gpu


@pytest.mark.skipif(requirement_missing("inductor", "cuda") is not None, reason="no Triton for Inductor on CUDA")
def test_the_measuring_workers_load_what_was_compiled_ahead(tmp_path):
    from solbench.cli import main

    out, kept = tmp_path / "run.json", tmp_path / "cache"
    result = CliRunner().invoke(main, ["run", "tests/data/compiled.yaml", "--device", "cuda", "-i", "compiled",
                                       "--compile-jobs", "2", "--compile-cache", str(kept), "--repeat", "2",
                                       "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    run = store.load(out)
    assert run.protocol.compile_ahead == 2 and run.harness["compile_ahead_s"] > 0
    compiled = [r for c in run.cases for r in c.impls if r.name == "compiled"]
    assert len(compiled) == 2 and all(r.status == "ok" for r in compiled)
    assert all(r.protocol.get("compile_cache_hits", 0) >= 1 for r in compiled)
    assert all("compile_cache_misses" not in r.protocol for r in compiled)
    assert any(kept.rglob("*.py"))
