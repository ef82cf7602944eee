"""Wording shared by every layer's messages."""

from __future__ import annotations

import difflib
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
