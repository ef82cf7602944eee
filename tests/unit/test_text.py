"""solbench.text: the "first few and N more" wording every long list in a message uses."""

from __future__ import annotations

import pytest

from solbench.text import first_few


@pytest.mark.parametrize("n", [0, 1, 3, 4, 9])
def test_first_few_shows_at_most_shown_and_counts_the_rest(n: int) -> None:
    items = [f"case{i}" for i in range(n)]
    text = first_few(items, 3)
    shown = [i for i in items if i in text.split(" and ")[0].split(", ")]
    assert shown == items[:3]
    if n > 3:
        assert text.endswith(f" and {n - 3} more")
    else:
        assert "more" not in text


def test_first_few_joins_with_the_separator_given() -> None:
    assert first_few(["a b", "c d"], 5, "; ") == "a b; c d"
    assert first_few(["a", "b", "c"], 1, "; ") == "a and 2 more"
