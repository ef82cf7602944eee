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


def test_two_processes_on_one_clock_step_are_not_the_same_samples() -> None:
    """Between single runs a PASS is demoted (one process a side cannot tell the code from its offset),
    except for a run gated against itself. A coarse clock (CUDA events tick in 32 ns) can give two
    processes' samples the same median and an interval of exactly [1, 1]: that is not one measurement."""
    from solbench.analysis.adaptive import UNCONFIRMED_VERDICTS
    from solbench.analysis.gate import unconfirmed

    step = 32e-9
    rng = np.random.default_rng(0)
    base = make_run({"c": {"k": list(rng.permutation([63 * step] * 25 + [62 * step] * 5))}})
    cur = make_run({"c": {"k": list(rng.permutation([63 * step] * 24 + [64 * step] * 6))}})
    two = gate(base, cur, threshold=0.05).verdicts[0]
    assert (two.ci_low, two.ci_high, two.verdict) == (1.0, 1.0, "PASS")  # the case the rule must not mistake
    assert unconfirmed(gate(base, cur, threshold=0.05), verdicts=UNCONFIRMED_VERDICTS).overall == "INCONCLUSIVE"
    assert unconfirmed(gate(base, base, threshold=0.05), verdicts=UNCONFIRMED_VERDICTS).overall == "PASS"
