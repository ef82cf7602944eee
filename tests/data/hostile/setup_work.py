"""An implementation whose set-up does the work (tests/unit/test_known_holes.py): a known hole."""

import torch

_KEPT: dict = {}


def does_the_work(x, w, residual):
    """Set-up (untimed, once per input set, and again for every unseen input set) computes the result
    and keeps it where no check looks; it returns only what the call needs to find it."""
    _KEPT[x.data_ptr()] = torch.addmm(residual, x, w.T)
    return {"x": x}


def returns_a_copy(x):
    return _KEPT[x.data_ptr()].clone()
