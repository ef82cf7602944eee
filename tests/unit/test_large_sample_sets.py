"""gate and compare on very large sample sets (issue 17: 400k samples per point): the verdicts
are the ones the same data give subsampled, the subsample bootstrapped by drawing whole resamples.

Above significance._RESAMPLE_MAX_N samples a side's bootstrap draws the middle order statistics
directly instead of whole resamples; rounds are grouped with numpy. No timing is asserted here.
"""

import numpy as np
import pytest

from solbench.analysis import significance as sig
from solbench.analysis.compare import compare_runs
from solbench.analysis.gate import gate
from tests.unit.factories import make_run

N = 400_000
STEP = 100  # every 100th sample: 4000, bootstrapped by resampling (the threshold raised for it)
CHANGES = {"same": 1.0, "within": 1.01, "slower": 1.10, "faster": 0.90}  # current / baseline


def _side(rng: np.random.Generator, n: int, *, current: bool) -> dict[str, dict[str, list[float]]]:
    return {case: {"torch": list(1e-3 * (k if current else 1.0) * rng.lognormal(0.0, 0.02, n))}
            for case, k in CHANGES.items()}


def _every(cases: dict[str, dict[str, list[float]]], step: int) -> dict[str, dict[str, list[float]]]:
    return {c: {i: s[::step] for i, s in impls.items()} for c, impls in cases.items()}


@pytest.fixture(scope="module")
def big():
    rng = np.random.default_rng(17)
    return _side(rng, N, current=False), _side(rng, N, current=True)


def test_large_sample_sets_take_the_order_statistic_path():
    assert N > N // STEP > sig._RESAMPLE_MAX_N


@pytest.fixture
def resampling(monkeypatch):
    """Runs ``fn()`` with the subsampled sides bootstrapped by drawing whole resamples."""
    def run(fn):
        with monkeypatch.context() as m:
            m.setattr(sig, "_RESAMPLE_MAX_N", N // STEP)
            return fn()
    return run


def test_gate_verdicts_on_400k_samples_match_the_subsampled_data(big, resampling):
    base, cur = big
    full = gate(make_run(base), make_run(cur))
    sub = resampling(lambda: gate(make_run(_every(base, STEP)), make_run(_every(cur, STEP))))
    verdicts = {v.case_id: v.verdict for v in full.verdicts}
    assert verdicts == {v.case_id: v.verdict for v in sub.verdicts}
    assert verdicts == {"same": "PASS", "within": "PASS", "slower": "REGRESSION", "faster": "FASTER"}
    for v in full.verdicts:  # 100 times the samples: an interval about 10 times narrower
        w = next(s for s in sub.verdicts if s.case_id == v.case_id)
        assert w.ci_low < v.ci_low < v.ratio < v.ci_high < w.ci_high
        assert (v.ci_high - v.ci_low) < 0.3 * (w.ci_high - w.ci_low)


def test_compare_verdicts_on_400k_samples_match_the_subsampled_data(big, resampling):
    base, cur = big
    full = compare_runs(make_run(base), make_run(cur))
    sub = resampling(lambda: compare_runs(make_run(_every(base, STEP)), make_run(_every(cur, STEP))))
    verdicts = {r.case_id: r.verdict for r in full.rows}
    assert verdicts == {r.case_id: r.verdict for r in sub.rows}
    assert verdicts == {"same": "SAME", "within": "SAME", "slower": "SLOWER", "faster": "FASTER"}
    assert all(r.n_a == r.n_b == N for r in full.rows)


def test_gate_over_rounds_on_large_runs_matches_the_subsampled_runs(big, resampling):
    # Several runs per side: each run a round of 100k samples (their labels grouped with numpy).
    base, cur = big
    quarter = N // 4

    def runs(cases, step):
        return [make_run({c: {i: s[r * quarter:(r + 1) * quarter:step] for i, s in impls.items()}
                          for c, impls in cases.items()}) for r in range(4)]

    full = gate(runs(base, 1), runs(cur, 1))
    sub = resampling(lambda: gate(runs(base, STEP), runs(cur, STEP)))
    assert all(v.rounds_base == v.rounds_cur == 4 for v in full.verdicts)
    verdicts = {v.case_id: v.verdict for v in full.verdicts}
    assert verdicts == {v.case_id: v.verdict for v in sub.verdicts}
    assert verdicts == {"same": "PASS", "within": "PASS", "slower": "REGRESSION", "faster": "FASTER"}
