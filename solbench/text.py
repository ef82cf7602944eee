"""Wording shared by every layer's messages."""

from __future__ import annotations

from collections.abc import Sequence


def first_few(items: Sequence[object], shown: int, sep: str = ", ") -> str:
    """The first ``shown`` items joined by ``sep``, then how many were left out: "a, b and 3 more"."""
    head = sep.join(str(item) for item in items[:shown])
    return head + (f" and {len(items) - shown} more" if len(items) > shown else "")
