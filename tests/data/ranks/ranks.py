"""Multi-rank implementations that fail on one rank only: each must become a status, not a dead run."""

import os
import threading

import torch.distributed as dist


def reference(x):
    return x.sum(0)


def all_reduce(x):
    out = x.clone()
    dist.all_reduce(out)
    return out


def raises_on_rank1(x):
    if dist.get_rank() == 1:
        raise RuntimeError("rank 1 is broken")
    return all_reduce(x)


def exits_on_rank1(x):
    if dist.get_rank() == 1:
        os._exit(3)
    return all_reduce(x)


def hangs_on_rank0(x):
    if dist.get_rank() == 0:
        threading.Event().wait()
    return all_reduce(x)


def wrong_on_rank1(x):
    out = all_reduce(x)
    if dist.get_rank() == 1:
        out[0] += 100.0
    return out


def returns_its_input(x):
    dist.all_reduce(x.clone())
    return x


def local_sum_only(x):
    """No collective at all: right on no rank (the reference sums over ranks)."""
    return x.clone()
