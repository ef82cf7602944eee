"""Imported by the fork server of a GPU run after the GPU libraries
(:mod:`solbench.measure.library_preload`), and only there: one-time work that every worker would
otherwise repeat on its first CUDA use or first Triton compile, though it touches no device. Done
once before the first fork, each worker inherits it done.

- torch's lazy CUDA initialization registers two Triton sparse-matrix ops with the dispatcher
  (``torch.cuda._register_triton_kernels``, queued by ``_lazy_call``): 0.23 s a worker on the H200
  host, 11.6 s of a 51-worker o_proj run (``results/h200/issue16/session10/prof-summary.txt``).
  Registered here, the worker's own call finds both ops in torch's table and returns.
- Triton hashes its own sources into every compile's cache key (``triton.runtime.cache.triton_key``,
  cached per process): 0.22 s in each worker that compiles or loads a Triton kernel.

Either is skipped where this torch or Triton lacks it. The fork server's driver check
(:mod:`solbench.measure.preload`) runs after this module as after any other.
"""

import contextlib
import importlib.util

import torch

with contextlib.suppress(Exception):
    torch.cuda._register_triton_kernels()

if importlib.util.find_spec("triton") is not None:
    with contextlib.suppress(Exception):
        from triton.runtime.cache import triton_key

        triton_key()
