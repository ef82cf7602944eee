"""Honest implementations of out = x @ w.T + residual (the yardstick the hostile ones are run beside)."""

import torch


def reference(x, w, residual):
    return x @ w.T + residual


def baseline(x, w, residual):
    return torch.addmm(residual, x, w.T)


def slow_but_honest(x, w, residual):
    out = x @ w.T
    return out + residual
