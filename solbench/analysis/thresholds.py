"""Gate thresholds: parsing ``--threshold``, and which threshold a workload's cases are held to.

Pure. The order (see :mod:`solbench.analysis.gate`): an explicit threshold, else the workload's
``gate_threshold`` as the run recorded it, else DEFAULT_THRESHOLD.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from solbench.errors import ConfigError, ResultsFormatError
from solbench.results.model import MAX_RUN_SD

ThresholdSource = Literal["explicit", "workload", "default"]

DEFAULT_THRESHOLD = 0.05

# S, the sd of a run's own offset in log time, for gates between separate runs (analysis.gate,
# "Between runs"). Measured on an H200 (BENCHMARKS.md, issue 16, thirty-fourth and thirty-fifth
# sessions): five o_proj runs of one tree gave a median sd_extra (the spread of run medians beyond
# what their rounds show) of 0.12%; replayed over 306 recorded `run --gate-against` invocations, 0.2%
# brought the share of a true 5% slowdown that PASSes from 2.7-4.2% to 1.0-1.9% (its bound: 2.5%).
DEFAULT_RUN_SD = 0.002


MOST_DECIMALS = 6  # a ratio or bound closer than this to a decision edge prints as the edge


def decision_edges(threshold: float) -> tuple[float, ...]:
    """The ratios a compare or gate verdict turns on at ``threshold``: 1, 1 + threshold and
    1 / (1 + threshold)."""
    return (1.0, 1.0 + threshold, 1.0 / (1.0 + threshold))


def decimals_apart(values: tuple[float | None, ...], edges: tuple[float, ...], decimals: int) -> int:
    """The fewest decimals from ``decimals`` on (at most MOST_DECIMALS) at which no value prints as
    an edge it is not: a verdict turns on which side of an edge a ratio or bound lies, so 1.0498
    next to a 5% threshold reads "1.0498", never "1.050" (at the threshold, where PASS needs below)."""
    shown = [v for v in values if v is not None and math.isfinite(v)]
    while decimals < MOST_DECIMALS and any(v != e and f"{v:.{decimals}f}" == f"{e:.{decimals}f}"
                                           for v in shown for e in edges):
        decimals += 1
    return decimals


def percent(fraction: float) -> str:
    """A fraction as a percent to MOST_DECIMALS - 2 decimals, without trailing zeros: 0.05 -> "5%",
    0.0025 -> "0.25%". A threshold prints as the one applied: at one decimal 0.25% read "0.2%", and a
    PASS whose interval reached 1.0023 said it ruled out a slowdown of 0.2%."""
    return f"{fraction * 100:.{MOST_DECIMALS - 2}f}".rstrip("0").rstrip(".") + "%"


@dataclass(frozen=True)
class ThresholdRule:
    """A regression threshold: fail when ``stat`` got slower by more than ``fraction``."""

    stat: str  # only "median" is supported
    fraction: float  # 0.05 means 5%


_RULE = re.compile(r"^(?:(?P<stat>[a-z_]+)\s*:)?\s*(?P<num>[0-9]*\.?[0-9]+(?:e-?[0-9]+)?)\s*(?P<pct>%)?$")


def parse_threshold(text: str) -> ThresholdRule:
    """Parse ``"5%"``, ``"0.05"`` or ``"median:5%"`` (pytest-benchmark style).

    A bare number is a fraction and must be below 1 (``"5"`` is refused: write
    ``"5%"``). Raises ConfigError for any other stat than median, a zero or
    malformed value.
    """
    m = _RULE.match(text.strip().lower())
    if m is None:
        raise ConfigError(f"cannot parse threshold {text!r}: expected e.g. '5%', '0.05' or 'median:5%'")
    stat = m.group("stat") or "median"
    if stat != "median":
        raise ConfigError(f"threshold stat {stat!r} is not supported: only 'median' is")
    value = _fraction(m, text, "threshold")
    if value <= 0.0:
        raise ConfigError(f"threshold {text!r} must be positive")
    return ThresholdRule(stat, value)


def validate(threshold: float | None, recorded: Mapping[str, object], alpha: float, confidence: float) -> None:
    """Refuse a non-positive threshold, a malformed recorded one, and alpha or confidence outside (0, 1)."""
    if threshold is not None and not (0.0 < threshold < math.inf):
        raise ConfigError(f"threshold must be positive, got {threshold}")
    for name, tau in recorded.items():
        if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not 0.0 < tau < math.inf:
            raise ResultsFormatError(f"the recorded gate_threshold of workload {name!r} must be a positive "
                                     f"number, got {tau!r}")
    if not 0.0 < alpha < 1.0 or not 0.0 < confidence < 1.0:
        raise ConfigError(f"alpha and confidence must lie in (0, 1), got {alpha}, {confidence}")


def threshold_of(explicit: float | None,
                  recorded: Mapping[str, float]) -> Callable[[str], tuple[float, ThresholdSource]]:
    """A workload's threshold and where it came from: explicit, recorded by the workload, or the default."""
    def of(workload: str) -> tuple[float, ThresholdSource]:
        if explicit is not None:
            return explicit, "explicit"
        if workload in recorded:
            return float(recorded[workload]), "workload"
        return DEFAULT_THRESHOLD, "default"

    return of


def parse_run_sd(text: str) -> float:
    """Parse ``--run-sd``: ``"0.2%"``, ``"0.002"`` or ``"0"`` (no between-run term). A bare number is a
    fraction and must be below 1 (``"2"`` is refused: write ``"2%"``); ConfigError for anything else."""
    m = _RULE.match(text.strip().lower())
    if m is None or m.group("stat"):
        raise ConfigError(f"cannot parse run sd {text!r}: expected e.g. '0.2%', '0.002' or '0'")
    value = _fraction(m, text, "run sd")
    if value >= MAX_RUN_SD:
        raise ConfigError(f"run sd {text!r} must be below {MAX_RUN_SD:.0%}")
    return value


def _fraction(m: re.Match[str], text: str, what: str) -> float:
    """The number of a ``_RULE`` match as a fraction: ``N%`` is N/100; a bare number must be below 1."""
    value = float(m.group("num"))
    if not math.isfinite(value):  # "1e400%": float() reads it as inf, which no verdict or JSON can use
        raise ConfigError(f"{what} {text!r} is not a finite number")
    if m.group("pct"):
        return value / 100.0
    if value >= 1.0:
        raise ConfigError(f"{what} {text!r} reads as {value:.0%}; write '{m.group('num')}%' for percent")
    return value
