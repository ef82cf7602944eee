import random

import pytest

from solbench.analysis.stats import iqr, median, median_ci, rel_ci_half_width
from solbench.measure.criteria import CIWidth
from solbench.measure.loop import measure


def test_median_ci_brackets_the_median_and_shrinks_with_n():
    rng = random.Random(1)
    small = [rng.gauss(1.0, 0.05) for _ in range(20)]
    large = [rng.gauss(1.0, 0.05) for _ in range(2000)]
    for s in (small, large):
        lo, hi = median_ci(s)
        assert lo <= median(s) <= hi
    assert rel_ci_half_width(large) < rel_ci_half_width(small)


def test_median_ci_coverage_is_about_95_percent():
    rng = random.Random(7)
    covered = 0
    for _ in range(2000):
        s = [rng.lognormvariate(0.0, 0.3) for _ in range(30)]  # true median 1.0
        lo, hi = median_ci(s)
        covered += lo <= 1.0 <= hi
    assert 0.93 <= covered / 2000 <= 0.995


def test_all_equal_samples_have_zero_width():
    assert median_ci([2.0] * 15) == (2.0, 2.0)
    assert rel_ci_half_width([2.0] * 15) == 0.0
    assert iqr([2.0] * 15) == 0.0


def test_criterion_rules():
    c = CIWidth(target=0.01, min_samples=10, max_samples=50, budget_s=1.0)
    assert c.reason([1.0] * 9, 0.0) is None  # below the minimum
    assert c.reason([1.0] * 10, 0.0) == "converged"
    noisy = [1.0, 2.0] * 10
    assert c.reason(noisy, 0.5) is None
    assert c.reason(noisy, 1.0) == "budget"
    assert c.reason([1.0, 2.0] * 25, 0.0) == "max_samples"



@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_fewer_samples_than_a_95_percent_interval_needs_never_converge(n):
    """[min, max] of n samples covers the median with probability 1 - 2^(1-n): 75% at 3, 93.75% at 5,
    96.9% at 6. Below 6 no order-statistic interval is a 95% one, yet n equal samples (a zero-width
    interval) stopped the loop as converged at min_samples (--min-samples 3; bench() takes 1)."""
    c = CIWidth(target=0.01, min_samples=1, max_samples=100, budget_s=1.0)
    assert c.reason([1.0] * n, 0.0) is None
    assert c.reason([1.0] * 6, 0.0) == "converged"
    assert CIWidth(0.01, 1, n, 1.0).reason([1.0] * n, 0.0) == "max_samples"  # the cap still stops it, saying so


class FakeTimer:
    """Returns seeded samples from a cost table: no device, deterministic."""

    name = "fake"

    def __init__(self, cost_s, noise, seed=0):
        self.cost, self.noise, self.rng = cost_s, noise, random.Random(seed)
        self.prepared = None
        self.calls = []

    def prepare(self, launches):
        self.prepared = list(launches)

    def sample(self, index):
        self.calls.append(index % len(self.prepared))
        return self.cost * (1 + self.rng.gauss(0, self.noise))


def test_loop_warms_up_rotates_inputs_and_converges():
    timer = FakeTimer(1e-3, 0.005)
    clock = iter(range(10_000)).__next__
    timing = measure(timer, ["a", "b"], CIWidth(0.01, 10, 1000, 1e9), warmup=3, clock=clock)
    assert timing.stop_reason == "converged"
    assert timing.n >= 10
    assert set(timer.calls) == {0, 1}  # both input sets used
    assert len(timer.calls) == timing.n + 3  # warm-up samples are discarded
    assert timing.median == pytest.approx(1e-3, rel=0.01)
    assert timing.ci_low <= timing.median <= timing.ci_high


def test_loop_stops_on_budget_when_too_noisy():
    timer = FakeTimer(1e-3, 0.5)
    ticks = iter(range(10_000))
    timing = measure(timer, ["a"], CIWidth(0.001, 10, 100_000, 25.0), clock=lambda: next(ticks))
    assert timing.stop_reason == "budget"
    assert timing.n == 25  # the clock ticks once per sample: elapsed reaches 25 at sample 25
