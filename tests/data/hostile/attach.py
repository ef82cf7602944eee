"""Implementations that are right only where no other process of the user may attach to them:
each reads its own ``prctl(PR_GET_DUMPABLE)`` and returns a wrong answer when it is not 0, so the
status says whether the worker (or rank) was undumpable while the implementation ran."""

import ctypes

import torch
import torch.distributed as dist

PR_GET_DUMPABLE = 3


def _undumpable() -> bool:
    return ctypes.CDLL(None, use_errno=True).prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0


def reference(x, w, residual):
    return x @ w.T + residual


def right_only_if_undumpable(x, w, residual):
    out = x @ w.T + residual
    return out if _undumpable() else torch.zeros_like(out)


def rank_reference(x):
    return x.sum(0)


def all_reduce(x):
    out = x.clone()
    dist.all_reduce(out)
    return out


def all_reduce_only_if_undumpable(x):
    out = all_reduce(x)
    return out if _undumpable() else torch.zeros_like(out)
