"""Alternative views of one table, switched without JavaScript (the report stays script-free).

Each view is rendered in full, in the order it names; radio inputs before them pick the one shown,
through CSS alone (``input.oN:checked ~ .vN {display:block}``, the CSS "checkbox hack"). Without
CSS every view is shown, one after another, each under a caption that says its order. The first
view is the default.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

__all__ = ["MAX_VIEWS", "VIEWS_CSS", "views"]

MAX_VIEWS = 6


def _css() -> str:
    shown = ",".join(f".views>input.o{i}:checked~.v{i}" for i in range(MAX_VIEWS))
    picked = ",".join(f".views>input.o{i}:checked+label" for i in range(MAX_VIEWS))
    return ("\n.views>input{position:absolute;opacity:0;width:1px;height:1px;margin:0}"
            ".views>label{display:inline-block;cursor:pointer;font-size:12px;padding:1px 7px;margin:0 4px 0 0;"
            "border:1px solid #ccc;border-radius:3px;color:#333}"
            ".views>span.k{font-size:12px;color:#555;margin-right:6px}"
            ".views>input:focus-visible+label{outline:2px solid #4a7bd8}"
            ".views>.view{display:none}caption{caption-side:top;text-align:left;font-size:12px;color:#555}"
            f"{picked}{{background:#e6edfb;border-color:#4a7bd8;font-weight:600}}"
            f"{shown}{{display:block}}\n")


VIEWS_CSS = _css()


def views(group: str, items: Sequence[tuple[str, str, str]]) -> str:
    """``items``: (key, label, already-rendered HTML) per view; ``group`` names the radio set and must be
    unique in the document. One view: its HTML alone, with no switch."""
    if not 1 <= len(items) <= MAX_VIEWS:
        raise ValueError(f"views: {len(items)} views (1 to {MAX_VIEWS})")
    if len(items) == 1:
        return items[0][2]
    name = html.escape(group, quote=True)
    controls = ['<span class="k">order:</span>']
    for i, (key, label, _) in enumerate(items):
        ident = f"{name}-{html.escape(key, quote=True)}"
        controls.append(f'<input type="radio" class="o{i}" name="{name}" id="{ident}"{" checked" if i == 0 else ""}>'
                        f'<label for="{ident}">{html.escape(label)}</label>')
    bodies = [f'<div class="view v{i}" data-order="{html.escape(key, quote=True)}">{body}</div>'
              for i, (key, _, body) in enumerate(items)]
    return f'<div class="views">{"".join(controls)}{"".join(bodies)}</div>'
