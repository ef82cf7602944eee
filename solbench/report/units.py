"""Human-readable numbers for reporters. Results are stored in SI units; only reporters convert.

    format_seconds(1.234e-5)   -> "12.3 µs"
    format_ratio(1.0712)       -> "1.071×"     (format_ratio(1.0004, threshold=0.05) -> "1.0004×")
    format_percent(0.05)       -> "5%"
    format_p(3.2e-7)           -> "3.2e-07"
    format_pct(0.734)          -> "73.4%"
    format_flops(2.0e9)        -> "2.00 GFLOP"      (format_flops(x, "/s") for rates)
    format_bytes(1.0e8)        -> "100 MB"          (decimal prefixes, format_bytes(x, "/s"))
    format_number(0.0123)      -> "0.0123"          (a plain number, e.g. FLOP/B)
"""

from __future__ import annotations

import math

from solbench.analysis.thresholds import decimals_apart, decision_edges, percent
from solbench.text import decimals as _decimals
from solbench.text import scaled as _scaled
from solbench.text import seconds

MISSING = "—"

_SI_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))

__all__ = [
    "MISSING",
    "format_bytes",
    "format_ci",
    "format_flops",
    "format_number",
    "format_p",
    "format_pct",
    "format_percent",
    "format_ratio",
    "format_seconds",
]


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def format_number(x: float | None, digits: int = 3) -> str:
    """A plain number to ``digits`` significant figures, never as an exponent nor with its integer digits
    rounded away: 0.125 -> "0.125", 0.0004 -> "0.000400", 12.345 -> "12.3", 4096 -> "4096"; 0 is "0";
    None, NaN and infinities are "—"."""
    if not _finite(x):
        return MISSING
    assert x is not None
    if x == 0.0:
        return "0"
    return f"{x:.{_decimals(float(f'{abs(x):.{digits - 1}e}'), digits)}f}"


def format_seconds(x: float | None, digits: int = 3) -> str:
    """Seconds with a unit from ns to s and ``digits`` significant figures.

    ``format_seconds(0.00123) == "1.23 ms"``; 0 is ``"0 s"``; None, NaN and
    infinities are ``"—"``. Values under 1 ns stay in ns; values of 1000 s and
    more stay in s.
    """
    if not _finite(x):
        return MISSING
    assert x is not None
    return seconds(x, digits)


def _edges(threshold: float | None) -> tuple[float, ...]:
    return () if threshold is None else decision_edges(threshold)


def format_ratio(x: float | None, decimals: int = 3, threshold: float | None = None) -> str:
    """A time ratio with a multiplication sign: ``"1.071×"``; given the ``threshold`` a verdict was
    decided at, more decimals where it would otherwise print as an edge it is not (1, 1 + threshold,
    1 / (1 + threshold): :func:`~solbench.analysis.thresholds.decision_edges`)."""
    return f"{x:.{decimals_apart((x,), _edges(threshold), decimals)}f}×" if _finite(x) else MISSING


def format_ci(low: float | None, high: float | None, decimals: int = 3, threshold: float | None = None) -> str:
    """A ratio interval: ``"[1.021, 1.094]"``; given the ``threshold``, both bounds with more
    decimals where either would otherwise print as an edge it is not (as :func:`format_ratio`)."""
    if not (_finite(low) and _finite(high)):
        return MISSING
    d = decimals_apart((low, high), _edges(threshold), decimals)
    return f"[{low:.{d}f}, {high:.{d}f}]"


def format_percent(x: float | None) -> str:
    """A fraction as a percent without trailing zeros: 0.05 -> "5%", 0.125 -> "12.5%", 0.0025 -> "0.25%"
    (``thresholds.percent``: a threshold prints as the one applied)."""
    if not _finite(x):
        return MISSING
    assert x is not None
    return percent(x)


def format_p(p: float | None) -> str:
    """A p-value with two significant figures: "0.043", "3.2e-07"."""
    if not _finite(p):
        return MISSING
    assert p is not None
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}"


def format_pct(x: float | None, decimals: int = 1) -> str:
    """A fraction as a percent with fixed decimals: 0.734 -> "73.4%"; None -> "—"."""
    return f"{x * 100:.{decimals}f}%" if x is not None and _finite(x) else MISSING


def _format_si(x: float | None, unit: str, digits: int) -> str:
    if not _finite(x):
        return MISSING
    assert x is not None
    if x == 0.0:
        return f"0 {unit}"
    return _scaled(x, tuple((s, p + unit) for s, p in _SI_PREFIXES), digits)


def format_flops(x: float | None, suffix: str = "", digits: int = 3) -> str:
    """FLOP (or FLOP/s with ``suffix="/s"``) with a decimal SI prefix: 2e9 -> "2.00 GFLOP"."""
    return _format_si(x, "FLOP" + suffix, digits)


def format_bytes(x: float | None, suffix: str = "", digits: int = 3) -> str:
    """Bytes (or bytes/s with ``suffix="/s"``) with a decimal SI prefix: 1e8 -> "100 MB"."""
    return _format_si(x, "B" + suffix, digits)
