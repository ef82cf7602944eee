"""Users' own CUDA kernels: ``solbench.kernels.load("my_kernel.cu", "name")``.

``load`` compiles a ``.cu`` file through NVRTC (via CuPy) and returns a :class:`Kernel` that
launches on PyTorch's current stream::

    from solbench.kernels import load

    def setup(x, residual, weight):               # a workload's set-up step: untimed
        kernel = load("rmsnorm.cu", "rmsnorm_residual_kernel")   # next to this .py file
        return {"x": x, "residual": residual, "weight": weight, "kernel": kernel}

    def rmsnorm(x, residual, weight, kernel):
        out = torch.empty_like(x)
        kernel(grid=(rows,), block=(256,), args=(x, residual, weight, out, np.int32(hidden)))
        return out

* A relative path is looked up next to the Python file that calls ``load``, then in the
  current directory. Quoted ``#include "file"`` lines are inlined (relative to the including
  file), so the cache key covers every byte; compiler messages keep their file and line.
* Compiled modules are cached in-process (keyed on the source text, name and options) and
  by CuPy on disk (keyed on the source text, options and GPU architecture).
* A line ``// solbench: min_cc 8.0`` in the source declares the oldest GPU it supports;
  ``load`` then raises :class:`~solbench.kernels.loader.UnsupportedDevice` on older GPUs,
  and solbench reports the implementation ``skipped`` with the reason (so it does when CUDA
  or CuPy is missing). An NVRTC error raises
  :class:`~solbench.kernels.loader.KernelCompileError` with the compiler's log: reported as
  ``error``. Call ``load`` from a ``setup`` function, not at import time, so that these
  errors stay with the one implementation.
* Kernel arguments: torch tensors (passed as device pointers; they must be on the launch
  device) and NumPy scalars of the kernel parameter's exact type (``np.int32(n)``,
  ``np.float32(eps)``). A bare Python ``int`` or ``float`` is refused: its C type is ambiguous.
"""

from __future__ import annotations

import functools
import inspect
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from solbench.kernels import loader
from solbench.workload import paths

__all__ = ["Kernel", "load"]


@dataclass(frozen=True)
class Kernel:
    """A compiled user kernel; call it to launch it on torch's current stream."""

    path: Path
    name: str
    options: tuple[str, ...]
    min_cc: tuple[int, int]
    function: Any  # cupy.RawKernel

    def __call__(self, grid: Sequence[int] | int, block: Sequence[int] | int, args: Sequence[Any],
                 shared_mem: int = 0) -> None:
        """Launch: ``grid`` and ``block`` as ints or up to 3 dimensions, ``args`` in order."""
        import torch

        converted, device = _convert_args(self.name, args)
        dev = torch.cuda.current_device() if device is None else device
        loader.launch(self.function, _dims(grid), _dims(block), converted, shared_mem, device=dev)

    @property
    def attributes(self) -> dict[str, Any]:
        """The compiled function's attributes (registers, shared memory, ...), from CuPy."""
        return dict(self.function.attributes)


def load(path: str | Path, name: str, *, options: Sequence[str] = (),
         name_expressions: Sequence[str] | None = None) -> Kernel:
    """Compile kernel ``name`` of the CUDA source at ``path`` (cached) for the current GPU.

    ``name`` is an ``extern "C"`` kernel, or for a template one of ``name_expressions``
    (e.g. ``"scale<float>"``); ``options`` go to NVRTC (``"-DBLOCK=256"``, ``"-lineinfo"``).
    Raises DeviceError (CuPy or CUDA missing), UnsupportedDevice (GPU older than the
    source's ``// solbench: min_cc X.Y`` line), KernelCompileError (NVRTC's log), or
    FileNotFoundError.
    """
    for what, value in (("options", options), ("name_expressions", name_expressions)):
        if isinstance(value, str):  # ("-DTILE=128") without its comma: each character would be one
            raise TypeError(f"load: {what} must be a sequence of strings, e.g. ({value!r},), not a str")
    source = loader.user_source(_find(Path(path), _caller_dir()))
    reason = loader.unsupported_reason(source)
    if reason is not None:
        raise loader.UnsupportedDevice(reason)
    exprs = None if name_expressions is None else tuple(name_expressions)
    if exprs is not None and name not in exprs:
        raise ValueError(f"kernel {name!r} is not among name_expressions {exprs!r}")
    function = _compiled(source.text, str(source.path), name, tuple(options), exprs)
    return Kernel(source.path, name, tuple(options), source.min_cc, function)


@functools.lru_cache(maxsize=256)
def _compiled(text: str, path: str, name: str, options: tuple[str, ...],
              exprs: tuple[str, ...] | None) -> Any:
    source = loader.Source(Path(path), text, (0, 0))
    module = loader.compile_module(source, options, exprs)
    try:
        return module.get_function(name)
    except Exception as exc:  # CuPy raises a driver error naming no kernel
        raise loader.KernelCompileError(
            f"{path}: no kernel named {name!r} after compiling ({type(exc).__name__}: {exc}); "
            "is it extern \"C\", or a template missing from name_expressions?") from None


def _caller_dir() -> Path | None:
    """The folder of the Python file that called ``load`` (None from an interactive prompt)."""
    frame = inspect.currentframe()
    try:
        caller = frame.f_back.f_back if frame is not None and frame.f_back is not None else None
        filename = caller.f_code.co_filename if caller is not None else ""
    finally:
        del frame
    path = Path(filename)
    return path.resolve().parent if path.is_file() else None


def _find(path: Path, caller_dir: Path | None) -> Path:
    """``path`` as given if absolute; else next to the caller first, then in the working folder
    (the parent's in a worker: :mod:`solbench.workload.paths`)."""
    if path.is_absolute():
        return path
    cwd = Path(paths.FALLBACK_DIR) if paths.FALLBACK_DIR is not None else Path.cwd()
    candidates = ([caller_dir / path] if caller_dir is not None else []) + [cwd / path]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    tried = ", ".join(str(c) for c in candidates)
    raise FileNotFoundError(f"no kernel source {str(path)!r} (looked in: {tried})")


def _dims(value: Sequence[int] | int) -> tuple[int, ...]:
    try:
        dims = tuple(map(operator.index, value if isinstance(value, Sequence) else (value,)))
    except TypeError:  # a float (n / 256 written for n // 256) is refused, not cut down to fewer blocks
        dims = ()
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise ValueError(f"launch dimensions must be 1 to 3 positive integers, got {value!r}")
    return dims


def _convert_args(name: str, args: Sequence[Any]) -> tuple[tuple[Any, ...], int | None]:
    """Tensors to device pointers, NumPy scalars kept; the device the tensors are on."""
    import torch

    out: list[Any] = []
    device: int | None = None
    for i, arg in enumerate(args):
        if isinstance(arg, torch.Tensor):
            if arg.device.type != "cuda":
                raise ValueError(f"{name}: argument {i} is a tensor on {arg.device}; kernels need CUDA tensors")
            if device is not None and arg.device.index != device:
                raise ValueError(f"{name}: argument {i} is on cuda:{arg.device.index}, others on cuda:{device}")
            device = arg.device.index
            out.append(loader.ptr(arg))
        elif isinstance(arg, bool | int | float):
            raise TypeError(f"{name}: argument {i} is a Python {type(arg).__name__} ({arg!r}); pass a NumPy "
                            "scalar of the kernel parameter's type, e.g. np.int32(n) or np.float32(x)")
        elif isinstance(arg, np.generic):
            out.append(arg)
        else:
            raise TypeError(f"{name}: argument {i} has type {type(arg).__name__}; expected a CUDA tensor or "
                            "a NumPy scalar")
    return tuple(out), device
