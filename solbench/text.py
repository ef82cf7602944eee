"""Wording shared by every layer's messages."""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Sequence


def first_few(items: Sequence[object], shown: int, sep: str = ", ") -> str:
    """The first ``shown`` items joined by ``sep``, then how many were left out: "a, b and 3 more"."""
    head = sep.join(str(item) for item in items[:shown])
    return head + (f" and {len(items) - shown} more" if len(items) > shown else "")


def suggest(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices``, or an empty string."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def guessed(names: Iterable[str], choices: Iterable[str]) -> str:
    """Unknown ``names`` joined by ", ", each followed by its closest choice where one is close:
    "o_prj (did you mean 'o_proj'?), nothing"."""
    known = sorted(choices)
    return ", ".join(f"{name}{suggest(name, known)}" for name in names)


TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))


def scaled(x: float, units: tuple[tuple[float, str], ...], digits: int) -> str:
    """``x`` rounded to ``digits`` significant figures, in the largest unit it reaches.

    Rounding happens before the unit is chosen, so 0.99996e-3 s is "1.00 ms", not "1000 µs".
    """
    mag = float(f"{abs(x):.{digits - 1}e}")
    scale, unit = next(((s, u) for s, u in units if mag >= s), units[-1])
    value = math.copysign(mag / scale, x)
    return f"{value:.{decimals(mag / scale, digits)}f} {unit}"


def decimals(mag: float, digits: int) -> int:
    """The decimals that show ``digits`` significant figures of a positive ``mag`` (none below its units)."""
    return max(digits - 1 - math.floor(math.log10(mag)), 0)


def seconds(x: float, digits: int = 3) -> str:
    """Seconds with a unit from ns to s and ``digits`` significant figures: "1.23 ms"; 0 is "0 s"."""
    return "0 s" if x == 0.0 else scaled(x, TIME_UNITS, digits)
