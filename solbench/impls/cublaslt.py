"""``D = x @ w.T + C`` as one cuBLASLt call with C and D distinct, through nvmath-python.

``torch.addmm(c, x, w.t())`` first copies C into the output, then runs a beta = 1 GEMM (two
kernels); cuBLASLt reads C and writes a separate D in the GEMM's epilogue. nvmath-python's
stateful ``Matmul`` is planned once (heuristic algorithm choice, descriptors, workspace):
that host work, tens of microseconds, belongs in an implementation's ``setup``. Each call
then runs one kernel into a freshly allocated D, on torch's current stream.

nvmath-python is optional (``pip install 'solbench[nvmath]'``); without it the plan raises
DeviceError, which solbench reports as ``skipped``.
"""

from __future__ import annotations

from typing import Any

import torch

from solbench.errors import DeviceError
from solbench.kernels.requirements import NO_NVMATH

__all__ = ["AddmmPlan", "MatmulPlan", "available"]


def available() -> bool:
    """Whether nvmath-python imports here."""
    try:
        _matmul_class()
    except DeviceError:
        return False
    return True


def _matmul_class() -> Any:
    try:
        from nvmath.linalg.advanced import Matmul
    except ImportError as exc:
        raise DeviceError(f"{NO_NVMATH}: {exc}") from None
    return Matmul


class AddmmPlan:
    """A planned ``x @ w.T + c`` (beta = 1) for these very tensors; call it to run it."""

    def __init__(self, x: torch.Tensor, w: torch.Tensor, c: torch.Tensor) -> None:
        if not (x.is_cuda and w.is_cuda and c.is_cuda):
            raise DeviceError("needs CUDA tensors (cuBLASLt)")
        matmul = _matmul_class()
        stream = torch.cuda.current_stream(x.device)
        self._mm = matmul(x, w.t(), c=c, beta=1.0, stream=stream)
        self._mm.plan(stream=stream)
        self.device = x.device

    def __call__(self) -> torch.Tensor:
        """One cuBLASLt GEMM with the C epilogue, into a new tensor."""
        return self._mm.execute(stream=torch.cuda.current_stream(self.device))  # type: ignore[no-any-return]

    def __repr__(self) -> str:  # shown if a plan ever lands in a message
        return f"AddmmPlan(device={self.device})"


class MatmulPlan:
    """A planned and autotuned ``x @ w.T`` for these very tensors; call it to run it.

    ``autotune`` times every algorithm cuBLASLt's heuristic offers (a few calls each, in
    set-up) and keeps the fastest, where ``torch.mm`` takes the heuristic's first choice.
    """

    def __init__(self, x: torch.Tensor, w: torch.Tensor, autotune: bool = True) -> None:
        if not (x.is_cuda and w.is_cuda):
            raise DeviceError("needs CUDA tensors (cuBLASLt)")
        matmul = _matmul_class()
        stream = torch.cuda.current_stream(x.device)
        self._mm = matmul(x, w.t(), stream=stream)
        self._mm.plan(stream=stream)
        if autotune:
            self._mm.autotune(iterations=5, stream=stream)
        self.device = x.device

    def __call__(self) -> torch.Tensor:
        """One cuBLASLt GEMM into a new tensor."""
        return self._mm.execute(stream=torch.cuda.current_stream(self.device))  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"MatmulPlan(device={self.device})"
