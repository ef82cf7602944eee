"""Imports a fork server makes before it forks the first worker, without initializing CUDA there.

The fork server must never initialize the CUDA driver: no worker forked from it could then use CUDA
("Cannot re-initialize CUDA in forked subprocess"). :func:`preload` imports each module with
``PYTORCH_NVML_BASED_CUDA_CHECK`` set (``torch.cuda.is_available()`` then asks NVML, not the
driver; importing ``torch._inductor.compile_fx`` otherwise initializes it: ``bench/preload_probe.py``)
and restores the environment after them, so workers start with the environment the run was given.

After each import it asks the driver whether it was initialized (:func:`driver_initialized`). If a
library did, the imports stop and the fork server records the module in ``TAINTED``: every CUDA
worker forked from it then refuses to start with a message naming the module
(:func:`refuse_tainted`), instead of failing on its first CUDA call with torch's message.

An import that fails leaves the fork server running (multiprocessing's own preload lets only an
ImportError pass): the workers import for themselves and meet the error there.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Callable

NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"
TAINTED = "SOLBENCH_FORK_SERVER_CUDA"  # set in the fork server (and so in its workers) by a tainting import
_NOT_INITIALIZED = 3  # CUDA_ERROR_NOT_INITIALIZED


def driver_initialized() -> bool:
    """Whether this process has initialized the CUDA driver (``cuInit``): libcuda loaded, and
    ``cuCtxGetCurrent`` answering anything but CUDA_ERROR_NOT_INITIALIZED. Loads nothing itself."""
    with open("/proc/self/maps") as f:
        if "libcuda.so" not in f.read():
            return False
    try:
        lib = ctypes.CDLL("libcuda.so.1", mode=getattr(os, "RTLD_NOLOAD", 4))
    except OSError:
        return False
    ctx = ctypes.c_void_p()
    return int(lib.cuCtxGetCurrent(ctypes.byref(ctx))) != _NOT_INITIALIZED


def preload(modules: tuple[str, ...], initialized: Callable[[], bool] = driver_initialized) -> None:
    """Import ``modules`` in order (see the module docstring); ``initialized``: the driver check
    (tests pass their own)."""
    before = os.environ.get(NVML_CHECK)
    os.environ[NVML_CHECK] = "1"
    try:
        for name in modules:
            with contextlib.suppress(Exception):
                __import__(name)
            with contextlib.suppress(OSError):
                if initialized():
                    os.environ[TAINTED] = name
                    return
    finally:
        if before is None:
            os.environ.pop(NVML_CHECK, None)
        else:
            os.environ[NVML_CHECK] = before


def refuse_tainted(device: str) -> None:
    """A CUDA worker's first step: RuntimeError, naming the module, if its fork server initialized
    CUDA while preloading (the worker could not use CUDA)."""
    name = os.environ.get(TAINTED)
    if device == "cuda" and name:
        raise RuntimeError(f"the fork server initialized CUDA while importing {name!r} ahead of the workers, "
                           "so no worker forked from it can use CUDA; run with SOLBENCH_PRELOAD=0 to import "
                           "the GPU libraries in each worker instead")
