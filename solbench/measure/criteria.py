"""Stopping criteria: when has the measurement loop taken enough samples? Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from solbench.analysis.stats import median_ci, rel_ci_half_width

# The fewest samples whose order-statistic interval of the median reaches 95%: [min, max] of n
# samples covers it with probability 1 - 2^(1-n) (75% at 3, 93.75% at 5, 96.9% at 6)
MIN_CI_SAMPLES = 6


@dataclass(frozen=True)
class CIWidth:
    """Stop once the 95% CI half-width of the median is within ``target`` of the median.

    Also stops at ``max_samples`` or once ``budget_s`` seconds of wall time are spent, but never
    before ``min_samples``; never "converged" on fewer than ``MIN_CI_SAMPLES`` (no 95% interval
    there). ``reason`` says which rule fired.
    """

    target: float = 0.01
    min_samples: int = 10
    max_samples: int = 2000
    budget_s: float = 2.0

    def reason(self, samples: Sequence[float], elapsed_s: float) -> str | None:
        """Why to stop now ("converged", "max_samples", "budget"), or None to go on."""
        n = len(samples)
        if n < self.min_samples:
            return None
        if n >= MIN_CI_SAMPLES and rel_ci_half_width(samples) <= self.target:
            return "converged"
        if n >= self.max_samples:
            return "max_samples"
        if elapsed_s >= self.budget_s:
            return "budget"
        return None


class BeatOrStop:
    """A stopping criterion that also gives up once a configuration is clearly slower than the best
    (``solbench tune``: ``Task.beaten_above``).

    ``reason`` is the inner criterion's, or "beaten" once at least ``min_samples`` samples, and never
    fewer than ``MIN_CI_SAMPLES`` (below it the interval's lower end is the smallest sample, above the
    median with probability 2^-n: no 95% interval), put the lower end of the median's 95% CI above
    ``bound`` seconds.
    """

    def __init__(self, inner: CIWidth, bound: float | None) -> None:
        self.inner, self.bound = inner, bound

    def reason(self, samples: Sequence[float], elapsed_s: float) -> str | None:
        """Why to stop now, or None to go on."""
        done = self.inner.reason(samples, elapsed_s)
        if done is None and self.bound is not None and len(samples) >= max(self.inner.min_samples, MIN_CI_SAMPLES) \
                and median_ci(samples)[0] > self.bound:
            return "beaten"
        return done
