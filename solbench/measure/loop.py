"""The measurement loop: warm up, then sample through a Timer until a criterion says stop.

Device-agnostic: the Timer does the device work; this module only counts, keeps raw samples
and asks the criterion. Tests drive it with a fake timer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

from solbench.analysis.stats import median, median_ci
from solbench.measure.criteria import CIWidth
from solbench.results.model import Timing

Launch = Callable[[], object]


class Timer(Protocol):
    """Times one call of a launch; knows how (events, graph replay, wall clock)."""

    name: str

    def prepare(self, launches: Sequence[Launch]) -> None:
        """Warm whatever the timer needs (graph capture, spin sizing) for these launches."""

    def sample(self, index: int) -> float:
        """Seconds per call for one sample of launch ``index % len(launches)``."""


def measure(
    timer: Timer,
    launches: Sequence[Launch],
    criterion: CIWidth,
    *,
    warmup: int = 3,
    on_sample: Callable[[int], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Timing:
    """Sample ``launches`` (rotated) until ``criterion`` stops; returns raw samples and stats.

    ::

        timer.prepare(launches)
        repeat warmup times: timer.sample(i)            # discarded
        samples = []
        until criterion.reason(samples, elapsed): samples += timer.sample(i)
    """
    timer.prepare(launches)
    for i in range(warmup):
        timer.sample(i)
    samples: list[float] = []
    start = clock()
    reason = None
    while reason is None:
        samples.append(timer.sample(len(samples)))
        if on_sample is not None:
            on_sample(len(samples))
        reason = criterion.reason(samples, clock() - start)
    lo, hi = median_ci(samples)
    return Timing(tuple(samples), median(samples), lo, hi, reason)
