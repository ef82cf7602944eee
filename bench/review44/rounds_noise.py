"""The noise model the review44 simulations share: each point's log round medians.

A round takes 10-20 samples with 2% within-round noise (its median carries that sampling error), and
each round's process adds a normal offset of the point's between-round sd.
"""

from __future__ import annotations

import math

import numpy as np

SD_SAMPLE = 0.02  # within-round sd of one sample's log time


def medians(rng: np.random.Generator, rounds: int, shift: float, sd: np.ndarray) -> np.ndarray:
    """(points, rounds) log round medians around log(shift); ``sd``: each point's between-round sd."""
    points = sd.size
    n = rng.integers(10, 21, size=(points, rounds))
    noise = rng.normal(0.0, SD_SAMPLE, size=(points, rounds, 20))
    noise = np.where(np.arange(20) < n[..., None], noise, np.nan)
    return math.log(shift) + rng.normal(0.0, 1.0, size=(points, rounds)) * sd[:, None] + np.nanmedian(noise, -1)
