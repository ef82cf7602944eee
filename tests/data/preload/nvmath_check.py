"""An implementation that says whether nvmath-python was imported before it was
(tests/gpu/test_preload_gpu.py): the worker imports this module at its first task."""

import sys

import torch

PRELOADED = "nvmath" in sys.modules


def double(x: torch.Tensor) -> torch.Tensor:
    if not PRELOADED:
        raise RuntimeError("nvmath was not imported before the task")
    return 2 * x
