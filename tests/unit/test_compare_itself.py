"""A run compared (or gated) with itself is SAME (PASS) everywhere, however noisy it was."""

from __future__ import annotations

import numpy as np

from solbench.analysis.compare import compare_runs
from solbench.analysis.gate import gate
from tests.unit.factories import make_run, noisy


def _noisy_run(seed: int):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    return make_run({f"c{i}": {"base": noisy(rng, 12, 1e-3, 0.4), "fused": noisy(rng, 12, 8e-4, 0.4)}
                     for i in range(4)})


def test_a_noisy_run_with_itself_is_same_and_passes() -> None:
    run = _noisy_run(3)
    c = compare_runs(run, run)
    assert len(c.rows) == 8 and {r.verdict for r in c.rows} == {"SAME"}
    assert all((r.ratio, r.ci_low, r.ci_high) == (1.0, 1.0, 1.0) for r in c.rows)
    g = gate(run, run, threshold=0.05)
    assert g.overall == "PASS" and {v.verdict for v in g.verdicts} == {"PASS"}


def test_two_different_noisy_runs_are_still_judged_on_their_intervals() -> None:
    c = compare_runs(_noisy_run(3), _noisy_run(4))
    assert "INCONCLUSIVE" in {r.verdict for r in c.rows}  # 40% noise, 12 samples: too noisy for +-5%
    assert all(r.ci_low is not None and r.ci_low < r.ci_high for r in c.rows)
