"""The one CuPy/NVRTC loader for solbench's fused CUDA kernels.

Sources live beside this file (``*.cu``). A line ``#include "name.cu"`` is inlined
here, before compiling, so that CuPy's on-disk cubin cache (keyed on the source
text and the options) sees every byte that goes into a kernel::

    kernel = get_kernel("bias_gelu.cu", "bias_gelu_kernel<0, 8, 0>",
                        name_expressions=("bias_gelu_kernel<0, 8, 0>",))
    launch(kernel, grid=(blocks,), block=(256,), args=(ptr(x), ptr(b), ptr(out), ...))

CuPy is imported lazily: importing this module never needs it.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from solbench.errors import DeviceError

__all__ = ["get_kernel", "launch", "ptr", "read_source"]

_KERNEL_DIR = Path(__file__).resolve().parent
_BASE_OPTIONS = ("-std=c++17",)
_INCLUDE = re.compile(r'^#include "([A-Za-z0-9_]+\.cu)"[ \t]*$', re.MULTILINE)
_NO_CUPY = "CuPy is not installed: pip install 'solbench[cuda12]' or 'solbench[cuda13]'"


def _cupy() -> Any:
    try:
        import cupy
    except ImportError as exc:
        raise DeviceError(_NO_CUPY) from exc
    return cupy


def _expand(name: str, seen: set[str]) -> str:
    path = _KERNEL_DIR / name
    if path.parent != _KERNEL_DIR or path.suffix != ".cu" or not path.is_file():
        raise ValueError(f"no kernel source {name!r} in {_KERNEL_DIR}")
    if name in seen:
        return ""
    seen.add(name)
    text = path.read_text(encoding="utf-8")
    return _INCLUDE.sub(lambda m: _expand(m.group(1), seen), text)


@functools.cache
def read_source(source_file: str) -> str:
    """The text of a kernel source with its local ``#include "x.cu"`` lines inlined."""
    return _expand(source_file, set())


@functools.cache
def _module(source_file: str, options: tuple[str, ...],
            name_expressions: tuple[str, ...] | None) -> Any:
    cupy = _cupy()
    return cupy.RawModule(code=read_source(source_file), options=_BASE_OPTIONS + options,
                          name_expressions=name_expressions)


@functools.cache
def _kernel(source_file: str, name: str, options: tuple[str, ...],
            name_expressions: tuple[str, ...] | None) -> Any:
    return _module(source_file, options, name_expressions).get_function(name)


def get_kernel(source_file: str, name: str, *, options: Sequence[str] = (),
               name_expressions: Sequence[str] | None = None) -> Any:
    """A compiled ``cupy.RawKernel`` for ``name`` in ``source_file``, cached in-process.

    ``name`` is an ``extern "C"`` kernel name, or, for a template, one of
    ``name_expressions`` (e.g. ``"gemv_residual_kernel<0, 2>"``). Compilation is
    lazy (at the first launch); CuPy also caches the cubin on disk.
    """
    exprs = None if name_expressions is None else tuple(name_expressions)
    if exprs is not None and name not in exprs:
        raise ValueError(f"kernel {name!r} is not among name_expressions {exprs!r}")
    return _kernel(source_file, name, tuple(options), exprs)


def ptr(tensor: Any) -> np.uint64:
    """A tensor's device address as a kernel argument (no copy)."""
    return np.uint64(tensor.data_ptr())


def launch(kernel: Any, grid: Sequence[int], block: Sequence[int], args: Sequence[Any],
           shared_mem: int = 0, *, device: Any = None) -> None:
    """Launch ``kernel`` on PyTorch's current stream of ``device`` (default: current device).

    Integers and floats in ``args`` must already be sized NumPy scalars
    (``np.int32``, ``np.float32``, ``ptr(t)``): CuPy passes a bare Python int as
    int64 and a float as double.
    """
    import torch

    cupy = _cupy()
    dev = torch.cuda.current_device() if device is None else torch.device(device).index
    if dev is None:
        dev = torch.cuda.current_device()
    with cupy.cuda.Device(dev), _cupy_stream(cupy, torch.cuda.current_stream(dev), dev):
        kernel(tuple(grid), tuple(block), tuple(args), shared_mem=shared_mem)


def _cupy_stream(cupy: Any, stream: Any, dev: int) -> Any:
    """CuPy's view of a torch stream, without owning it.

    CuPy >= 14 takes any object with ``__cuda_stream__`` (torch streams have it) and
    deprecates ExternalStream; older CuPy only has ExternalStream.
    """
    if hasattr(cupy.cuda.Stream, "from_external") and hasattr(stream, "__cuda_stream__"):
        return cupy.cuda.Stream.from_external(stream)
    with warnings.catch_warnings():  # deprecated in CuPy 14, the only way before it
        warnings.simplefilter("ignore", DeprecationWarning)
        return cupy.cuda.ExternalStream(stream.cuda_stream, dev)
