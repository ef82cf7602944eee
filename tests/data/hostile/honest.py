"""Honest implementations of out = x @ w.T + residual (the yardstick the hostile ones are run beside)."""

import torch


def reference(x, w, residual):
    return x @ w.T + residual


def baseline(x, w, residual):
    return torch.addmm(residual, x, w.T)


def slow_but_honest(x, w, residual):
    out = x @ w.T
    return out + residual


_SIDE: dict = {}


def joined_side_stream(x, w, residual):
    """GPU: the product on a side stream, the residual added on the current one after it joins."""
    side = _SIDE.setdefault("stream", torch.cuda.Stream())
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = x @ w.T
    torch.cuda.current_stream().wait_stream(side)
    out.record_stream(torch.cuda.current_stream())
    return out.add_(residual)
