"""Multi-rank implementations that fail on one rank only: each must become a status, not a dead run."""

import os
import struct
import sys
import threading
import time

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


def sends_half_a_message_on_rank1(x):
    """Rank 1 writes its pipe a length header and one byte of the message it announces, then sleeps."""
    if dist.get_rank() == 1:
        frame = sys._getframe()
        while frame.f_code.co_name != "serve":  # solbench.measure.pool.serve(conn, ...)
            frame = frame.f_back
        os.write(frame.f_locals["conn"].fileno(), struct.pack("!i", 100) + b"{")
        time.sleep(3600)
    return all_reduce(x)


_TIMED = {"setups": 0, "calls": 0, "real": None}


def counts_its_setups(x):
    _TIMED["setups"] += 1
    return {"x": x}


def _always_right(*args, **kwargs):
    from solbench.results.model import Correctness

    return Correctness(True, 0.0, 0.0, 1.0, 1.0)


def patches_comparison_while_timed_on_rank1(x):
    """Rank 1 is right on its three checked calls (input sets 0, 1, 0), wrong under a patched comparison on every
    timed call, and takes the patch off at the first call after timing (on new inputs, set-up run again: a third
    set-up), right again, so nothing is left for the snapshot at the task's end. Every call does the collective,
    so no peer is left waiting."""
    import solbench.measure.tensors

    out = all_reduce(x)
    if dist.get_rank() != 1:
        return out
    _TIMED["calls"] += 1
    if _TIMED["setups"] > 2:
        if _TIMED["real"] is not None:
            solbench.measure.tensors.compare, _TIMED["real"] = _TIMED["real"], None
        return out
    if _TIMED["calls"] <= 3:
        return out
    if _TIMED["real"] is None:
        _TIMED["real"] = solbench.measure.tensors.compare
        solbench.measure.tensors.compare = _always_right
    return out.zero_()


def chunked_all_reduce(x, chunk=1):
    """All-reduce in ``chunk`` pieces (tests/unit/test_tune.py tunes ``chunk``); three pieces leave the
    last one unreduced, a wrong configuration the checks must catch on every rank."""
    out = x.clone()
    for k, piece in enumerate(out.chunk(chunk)):
        if not (chunk == 3 and k == 2):
            dist.all_reduce(piece)
    return out


def reduces_in_setup(x):
    """Set-up does the all-reduce; the call hands back a copy of set-up's sum, with no communication."""
    ready = x.clone()
    dist.all_reduce(ready)
    return {"x": x, "ready": ready}


def returns_setups_sum(x, ready):
    return ready.clone()
