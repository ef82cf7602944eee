"""An implementation that says whether torch.compile's machinery was imported before it was
(tests/unit/test_preload.py): the worker imports this module at its first task."""

import sys

import torch

PRELOADED = "torch._dynamo" in sys.modules


def double(x: torch.Tensor) -> torch.Tensor:
    if not PRELOADED:
        raise RuntimeError("torch._dynamo was not imported before the task")
    return 2 * x
