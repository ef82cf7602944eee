"""The runs' own offsets are priced per point, by the runs of each side that measured it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from solbench.analysis.compare import compare_runs
from solbench.analysis.gate import gate
from solbench.analysis.sequential import t_ppf
from tests.unit.factories import make_run


def _rounds_run(rng, shift, rounds, cases, n=15, sd_round=0.01):
    def samples():
        offsets = rng.normal(0.0, sd_round, size=rounds).repeat(n)
        return list(1e-3 * shift * np.exp(offsets + rng.normal(0.0, 0.01, rounds * n)))
    return make_run({c: {"k": samples()} for c in cases}, rounds=rounds)


def test_a_run_of_the_side_that_holds_none_of_a_point_does_not_narrow_its_interval():
    """``--baseline a.json other.json``, other.json measuring other cases (another workload, or runs
    from before a case was added): the points of a.json carry a.json's offset alone. They were priced
    as if two runs measured them, S^2 (1/2 + 1) for S^2 (1 + 1): an interval too narrow, which moved
    with a run that holds none of their samples."""
    rng = np.random.default_rng(5)
    base = _rounds_run(rng, 1.0, 3, ("a", "b", "c"))
    other = _rounds_run(rng, 1.0, 3, ("x", "y"))
    cur = _rounds_run(rng, 1.02, 4, ("a", "b", "c"))
    alone = gate(base, cur, threshold=0.05, run_sd=0.01)
    beside = gate([base, other], cur, threshold=0.05, run_sd=0.01)
    shared = {v.key: v for v in beside.verdicts}
    for v in alone.verdicts:
        w = shared[v.key]
        assert (w.ci_low, w.ci_high) == pytest.approx((v.ci_low, v.ci_high), rel=1e-12)
        assert w.verdict == v.verdict
    a = compare_runs(base, cur, threshold=0.05, run_sd=0.01)
    b = compare_runs([base, other], cur, threshold=0.05, run_sd=0.01)
    assert [(r.key, r.ci_low, r.ci_high) for r in a.rows] == \
        [(r.key, pytest.approx(r.ci_low, rel=1e-12), pytest.approx(r.ci_high, rel=1e-12)) for r in b.rows]


def test_points_measured_by_every_run_of_a_side_are_priced_by_all_of_them():
    """Fewer than ten points (no moderation): a point both baseline runs measured gets S^2 (1/2 + 1),
    one only the first measured S^2 (1 + 1)."""
    rng = np.random.default_rng(6)
    base = [_rounds_run(rng, 1.0, 3, ("a", "b")), _rounds_run(rng, 1.0, 3, ("a",))]
    cur = _rounds_run(rng, 1.0, 4, ("a", "b"))
    plain = {v.key: v for v in gate(base, cur, threshold=0.05).verdicts}
    priced = {v.key: v for v in gate(base, cur, threshold=0.05, run_sd=0.01).verdicts}
    for key, m in (("a/k", 2), ("b/k", 1)):
        p, v = plain[key], priced[key]
        half = math.log(p.ci_high / p.ci_low) / 2.0
        q = float(t_ppf(0.975, p.rounds_base + p.rounds_cur - 2))
        se = math.sqrt((half / q) ** 2 + 0.01 ** 2 * (1.0 / m + 1.0))
        assert math.log(v.ci_high / v.ci_low) / 2.0 == pytest.approx(q * se, rel=1e-9)
