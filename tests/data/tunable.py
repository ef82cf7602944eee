"""Tunable CPU implementations for the autotuning tests: an add computed in row chunks."""

import os
import signal
import time

import torch


def chunked_add(x: torch.Tensor, y: torch.Tensor, chunk: int = 8) -> torch.Tensor:
    """out = x + y, ``chunk`` rows at a time (correct for every chunk size)."""
    out = torch.empty_like(x)
    for start in range(0, x.shape[0], chunk):
        torch.add(x[start:start + chunk], y[start:start + chunk], out=out[start:start + chunk])
    return out


def chunked_add_no_tail(x: torch.Tensor, y: torch.Tensor, chunk: int = 8) -> torch.Tensor:
    """The classic tiling bug: rows past the last whole chunk are never written."""
    out = torch.full_like(x, float("nan"))
    for start in range(0, x.shape[0] - chunk + 1, chunk):
        torch.add(x[start:start + chunk], y[start:start + chunk], out=out[start:start + chunk])
    return out


def chunked_add_faulty(x: torch.Tensor, y: torch.Tensor, chunk: int = 8) -> torch.Tensor:
    """chunked_add, but some chunk sizes bring the process down: 24 leaves it (os._exit), 32 segfaults,
    48 hangs (a configuration that deadlocks)."""
    if chunk == 24:
        os._exit(3)
    if chunk == 32:
        os.kill(os.getpid(), signal.SIGSEGV)
    if chunk == 48:
        time.sleep(3600)
    return chunked_add(x, y, chunk)
