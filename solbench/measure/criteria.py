"""Stopping criteria: when has the measurement loop taken enough samples? Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from solbench.analysis.stats import rel_ci_half_width


@dataclass(frozen=True)
class CIWidth:
    """Stop once the 95% CI half-width of the median is within ``target`` of the median.

    Also stops at ``max_samples`` or once ``budget_s`` seconds of wall time are spent, but never
    before ``min_samples``. ``reason`` says which rule fired.
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
        if rel_ci_half_width(samples) <= self.target:
            return "converged"
        if n >= self.max_samples:
            return "max_samples"
        if elapsed_s >= self.budget_s:
            return "budget"
        return None
