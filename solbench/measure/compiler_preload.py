"""Imported by the fork server of a run that compiles (:func:`solbench.measure.pool.preload_compiler`),
and only there: torch.compile's machinery, imported once before the first worker is forked, so that
no compiled worker imports it for itself (about 2 s a process on a 2-core CPU).

The fork server must never initialize the CUDA driver: no worker forked from it could then use CUDA
("Cannot re-initialize CUDA in forked subprocess"). Importing ``torch._inductor.compile_fx`` asks
``torch.cuda.is_available()``, which initializes the driver unless ``PYTORCH_NVML_BASED_CUDA_CHECK``
is set (it then asks NVML): on an H200 with torch 2.11 the import alone made every forked worker of
a run fail (``bench/preload_probe.py``). The imports run with the variable set, and the environment
is restored after them, so workers start with the environment the run was given.

A torch that initializes the driver some other way would show at the first worker's start: it
fails, and its result says that it failed while starting and quotes its log. An import that fails
leaves the fork server running (multiprocessing's own preload lets only an ImportError pass): the
compiled workers then import for themselves and meet the error there.
"""

import contextlib
import os

MODULES = ("torch._dynamo", "torch._inductor.compile_fx")
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"


def preload(modules: tuple[str, ...] = MODULES) -> None:
    before = os.environ.get(NVML_CHECK)
    os.environ[NVML_CHECK] = "1"
    try:
        for name in modules:
            with contextlib.suppress(Exception):
                __import__(name)
    finally:
        if before is None:
            os.environ.pop(NVML_CHECK, None)
        else:
            os.environ[NVML_CHECK] = before


preload()
