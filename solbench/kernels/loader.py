"""The CuPy/NVRTC loader for CUDA kernels: solbench's own (``get_kernel``) and users' (``load``).

A source is read with its local ``#include "file"`` lines inlined (``#line`` directives keep the
compiler's messages pointing at the right file and line), so that CuPy's on-disk cubin cache,
keyed on the source text and the options, sees every byte that goes into a kernel. A line

    // solbench: min_cc 8.0

in a source (or in a file it includes) declares the oldest compute capability its kernels build
for; the highest such line wins. On an older GPU the loader raises :class:`UnsupportedDevice`
(a :class:`~solbench.errors.DeviceError`: the implementation is reported ``skipped`` with the
reason) before compiling anything. NVRTC errors raise :class:`KernelCompileError` with the
compiler's first error (file and line) on its first line, then its log (reported as ``error``)::

    kernel = get_kernel("bias_gelu.cu", "bias_gelu_kernel<0, 8, 0>",
                        name_expressions=("bias_gelu_kernel<0, 8, 0>",))
    launch(kernel, grid=(blocks,), block=(256,), args=(ptr(x), ptr(b), ptr(out), ...))

CuPy is imported lazily: importing this module never needs it.
"""

from __future__ import annotations

import functools
import re
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from solbench.errors import DeviceError, SolbenchError
from solbench.kernels.requirements import importable

__all__ = ["KernelCompileError", "Source", "UnsupportedDevice", "compile_module", "get_kernel", "import_cupy",
           "kernel_min_cc", "launch", "ptr", "read_source", "unsupported_reason"]

KERNEL_DIR = Path(__file__).resolve().parent
BASE_OPTIONS = ("-std=c++17",)
MAX_GRID_YZ = 65535  # CUDA's limit on gridDim.y and gridDim.z (a launch with more blocks there is refused)
# a quoted include, also without a space before the name or with a comment after it on its line
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"[ \t]*(?://[^\n]*|/\*[^\n]*?\*/[ \t]*)?$', re.MULTILINE)
_MIN_CC = re.compile(r"^[ \t]*//[ \t]*solbench:[ \t]*min_cc\b(.*)$", re.MULTILINE)
_LEVEL = re.compile(r"[ \t]+(\d+)\.(\d+)[ \t]*")
_NO_CUPY = "needs CuPy (pip install 'solbench[cuda12]' or 'solbench[cuda13]')"


class KernelCompileError(SolbenchError):
    """NVRTC rejected a kernel source; the message carries the compiler's log."""


class UnsupportedDevice(DeviceError):
    """The GPU's compute capability is below what a kernel source declares."""


@dataclass(frozen=True)
class Source:
    """A kernel source ready for NVRTC: includes inlined, minimum compute capability read."""

    path: Path
    text: str
    min_cc: tuple[int, int]


def import_cupy() -> Any:
    """The cupy module, or DeviceError (the implementation is skipped) where it is missing or broken."""
    try:
        import cupy
    except ImportError as exc:
        if not importable("cupy"):
            raise DeviceError(_NO_CUPY) from exc
        cause: BaseException = exc  # installed but broken (no driver, another CUDA): CuPy's own cause
        while cause.__cause__ is not None:
            cause = cause.__cause__
        lines = str(cause).strip().splitlines()
        raise DeviceError(f"needs a working CuPy: importing it failed ({type(cause).__name__}: "
                          f"{lines[0] if lines else ''})") from exc
    return cupy


def _expand(path: Path, label: Callable[[Path], str], resolve: Callable[[Path, str], Path],
            seen: set[Path], levels: list[tuple[int, int]]) -> str:
    """``path``'s text with quoted includes inlined once each, ``#line`` marking every seam."""
    if path in seen:
        return ""
    seen.add(path)
    text = path.read_text(encoding="utf-8")
    for match in _MIN_CC.finditer(text):
        level = _LEVEL.fullmatch(match.group(1))
        if level is None:  # a misspelt declaration would leave the source without a minimum
            line = text.count("\n", 0, match.start()) + 1
            raise ValueError(f"{path}:{line}: {match.group().strip()!r} is not a declaration "
                             "'// solbench: min_cc X.Y' (e.g. 8.0)")
        levels.append((int(level[1]), int(level[2])))
    name = label(path)
    out = [f'#line 1 "{name}"\n']
    pos = 0
    for match in _INCLUDE.finditer(text):
        out.append(text[pos:match.start()])
        child = resolve(path, match.group(1))
        out.append(_expand(child, label, resolve, seen, levels))
        line = text.count("\n", 0, match.end()) + 2  # the number of the line after the include
        out.append(f'\n#line {line} "{name}"')
        pos = match.end()
    out.append(text[pos:])
    return "".join(out)


def _build_source(path: Path, label: Callable[[Path], str],
                  resolve: Callable[[Path, str], Path]) -> Source:
    levels: list[tuple[int, int]] = []
    text = _expand(path, label, resolve, set(), levels)
    return Source(path, text, max(levels, default=(0, 0)))


def _resolve_builtin(parent: Path, name: str) -> Path:
    """``name`` in the first folder of the ``solbench.kernels`` package's search path that has it: a
    worker that entered another checkout (``solbench ab``, :func:`solbench.measure.worker.enter_tree`)
    has that checkout's folder first, so its kernels build from its own sources."""
    folders = [Path(p) for p in sys.modules[__package__].__path__]
    for folder in folders:
        path = folder / name
        if path.parent == folder and path.suffix == ".cu" and path.is_file():
            return path
    raise ValueError(f"{parent.name}: no kernel source {name!r} in {', '.join(map(str, folders))}")


def _resolve_user(parent: Path, name: str) -> Path:
    path = (parent.parent / name).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"{parent}: #include \"{name}\": no such file {path}")
    return path


@functools.cache
def builtin_source(source_file: str) -> Source:
    """One of solbench's own kernel sources (a file name in solbench/kernels/), read once a process."""
    return _build_source(_resolve_builtin(KERNEL_DIR, source_file), lambda p: p.name, _resolve_builtin)


def user_source(path: Path) -> Source:
    """A user's kernel source; quoted includes resolve against the including file's folder."""
    path = path.resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no such kernel source {path}")
    return _build_source(path, str, _resolve_user)


def read_source(source_file: str) -> str:
    """The text of one of solbench's kernel sources with its local includes inlined."""
    return builtin_source(source_file).text


def kernel_min_cc(source_file: str) -> tuple[int, int]:
    """The minimum compute capability one of solbench's kernel sources declares."""
    return builtin_source(source_file).min_cc


def device_cc(device: Any = None) -> tuple[int, int]:
    """Compute capability of a CUDA device (default: the current one)."""
    import torch

    major, minor = torch.cuda.get_device_capability(device)
    return int(major), int(minor)


def unsupported_reason(source: Source | str, device: Any = None,
                       min_cc: tuple[int, int] | None = None) -> str | None:
    """Why ``source`` cannot run on ``device`` (or None): no CUDA, or too old a GPU."""
    import torch

    src = builtin_source(source) if isinstance(source, str) else source
    need = max(src.min_cc, min_cc or (0, 0))
    if not torch.cuda.is_available():
        return f"needs a CUDA GPU ({src.path.name})"
    have = device_cc(device)
    if have < need:
        return (f"needs compute capability {need[0]}.{need[1]}+ ({src.path.name}); "
                f"this GPU is {have[0]}.{have[1]}")
    return None


def compile_module(source: Source, options: Sequence[str] = (),
                   name_expressions: Sequence[str] | None = None) -> Any:
    """A compiled ``cupy.RawModule`` (compiled now: NVRTC errors surface here)."""
    cupy = import_cupy()
    from cupy.cuda.compiler import CompileException

    module = cupy.RawModule(code=source.text, options=BASE_OPTIONS + tuple(options),
                            name_expressions=None if name_expressions is None else tuple(name_expressions))
    try:
        module.compile()
    except CompileException as exc:
        log = _log_of(exc)
        raise KernelCompileError(f"{source.path}: NVRTC failed to compile: {_first_error(log)}\n{log}") from None
    return module


def _log_of(exc: BaseException) -> str:
    """The compiler's own message out of CuPy's CompileException."""
    get = getattr(exc, "get_message", None)
    text = get() if callable(get) else str(exc)
    return str(text).strip()


def _first_error(log: str) -> str:
    """The compiler's first error (``file(line): error: ...``; else its log's first line): a status shows
    an exception's first line alone."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    return next((line for line in lines if re.search(r"\berror\b", line)), lines[0] if lines else "(no log)")


@functools.cache
def _module(source_file: str, options: tuple[str, ...],
            name_expressions: tuple[str, ...] | None) -> Any:
    return compile_module(builtin_source(source_file), options, name_expressions)


@functools.cache
def _kernel(source_file: str, name: str, options: tuple[str, ...],
            name_expressions: tuple[str, ...] | None) -> Any:
    return _module(source_file, options, name_expressions).get_function(name)


def get_kernel(source_file: str, name: str, *, options: Sequence[str] = (),
               name_expressions: Sequence[str] | None = None,
               min_cc: tuple[int, int] | None = None) -> Any:
    """A compiled ``cupy.RawKernel`` for ``name`` in ``source_file``, cached in-process.

    ``name`` is an ``extern "C"`` kernel name, or, for a template, one of
    ``name_expressions`` (e.g. ``"gemv_residual_kernel<0, 2>"``). Raises UnsupportedDevice
    when the current GPU is older than the source's ``min_cc`` line (or the ``min_cc`` given,
    for a variant that needs more than the file). CuPy also caches the cubin on disk.
    """
    exprs = None if name_expressions is None else tuple(name_expressions)
    if exprs is not None and name not in exprs:
        raise ValueError(f"kernel {name!r} is not among name_expressions {exprs!r}")
    reason = unsupported_reason(source_file, min_cc=min_cc)
    if reason is not None:
        raise UnsupportedDevice(reason)
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

    cupy = import_cupy()
    dev = torch.cuda.current_device() if device is None else torch.device(device).index
    if dev is None:
        dev = torch.cuda.current_device()
    with cupy.cuda.Device(dev), _cupy_stream(cupy, torch.cuda.current_stream(dev), dev):
        # CuPy keeps a kernel's function, and its attributes, per device: the launch device's
        if shared_mem > 48 * 1024 and getattr(kernel, "max_dynamic_shared_size_bytes", 0) < shared_mem:
            kernel.max_dynamic_shared_size_bytes = shared_mem
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
