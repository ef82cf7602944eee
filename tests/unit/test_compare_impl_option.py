"""``compare A B --impl X`` where A and B are implementations of one run: --impl has nothing to pick."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from solbench.cli import main
from solbench.results import store
from tests.unit.factories import make_run

CASE = "demo[n=1]"


@pytest.mark.parametrize("impl", ["nonexistent", "fused"])
def test_impl_with_two_implementations_of_one_run_is_refused(tmp_path, impl):
    """It was ignored: a misspelled --impl compared every case of A and B and exited 0."""
    rdir = tmp_path / "results"
    run = store.save_new(make_run({CASE: {"baseline": [1e-3] * 30, "fused": [1e-3] * 30}}), rdir, "head")
    r = CliRunner().invoke(main, ["compare", "baseline", "fused", "--run", str(run), "--impl", impl,
                                  "--results-dir", str(rdir)])
    assert r.exit_code == 2, r.output
    assert f"--impl {impl} picks one implementation of two runs" in r.output
    assert "Traceback" not in r.output
