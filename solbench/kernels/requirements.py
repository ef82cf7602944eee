"""What an implementation may need (``requires:`` in a workload), and why this machine lacks it.

The runner calls :func:`requirement_missing` for each entry of an implementation's
``requires`` list; a non-None answer is the ``skipped`` reason. Kernels also check at the
point of use (the loader raises UnsupportedDevice, a DeviceError, on too old a GPU), so a
missing ``requires`` entry still ends in ``skipped``, only later.

    cuda, compile    a CUDA device
    inductor         torch.compile's inductor can build code here: Triton on a CUDA device, a C++
                     compiler on the CPU
    cupy             CuPy importable (solbench's and users' CUDA kernels)
    fp8              FP8 tensor cores (compute capability 8.9+)
    sm80, sm89, sm90 compute capability 8.0+, 8.9+, 9.0+
    nvmath           nvmath-python importable (cuBLASLt with a separate C and D)
    nccl             a CUDA device and torch built with NCCL (multi-rank workloads)
    build            a C++ compiler and ninja: the set-up builds C++/CUDA sources into a torch
                     extension (SOL-ExecBench's C++ solutions); built ahead of the run, beside
                     torch.compile's work (solbench.execute.warm)
"""

from __future__ import annotations

import importlib.util

__all__ = ["KNOWN", "requirement_missing"]

_CC = {"sm80": (8, 0), "sm89": (8, 9), "sm90": (9, 0), "fp8": (8, 9)}
KNOWN = ("cuda", "compile", "inductor", "cupy", "fp8", "sm80", "sm89", "sm90", "nvmath", "nccl", "build")
NO_NVMATH = "needs nvmath-python (pip install 'solbench[nvmath]')"


def requirement_missing(need: str, device: str = "cuda") -> str | None:
    """Why ``need`` is not met on ``device`` ("cuda" or "cpu"), or None when it is.

    Every reason starts with "needs ". An unknown ``need`` raises ValueError.
    """
    if need not in KNOWN:
        raise ValueError(f"unknown requirement {need!r}; known: {', '.join(KNOWN)}")
    if need in ("cuda", "compile"):
        return None if device == "cuda" else f"needs CUDA ({need})"
    if need == "inductor":
        return _inductor(device)
    if need == "build":
        return _toolchain()
    if need == "nccl":
        return None if device == "cuda" and _nccl() else "needs NCCL (a CUDA device; the CPU runs gloo)"
    if need == "cupy":
        return None if importable("cupy") else "needs CuPy (pip install 'solbench[cuda12]' or '[cuda13]')"
    if need == "nvmath":
        return None if importable("nvmath") else NO_NVMATH
    want = _CC[need]
    label = "FP8 tensor cores (compute capability 8.9+)" if need == "fp8" else \
        f"compute capability {want[0]}.{want[1]}+"
    if device != "cuda":
        return f"needs {label}"
    import torch

    have = tuple(torch.cuda.get_device_capability())
    if have < want:
        return f"needs {label}; this GPU is {have[0]}.{have[1]}"
    return None


def _toolchain() -> str | None:
    import shutil

    if not _cxx():
        return "needs a C++ compiler to build C++/CUDA sources"
    if shutil.which("ninja") is None and not importable("ninja"):
        return "needs ninja to build C++/CUDA sources (pip install ninja)"
    return None


def _inductor(device: str) -> str | None:
    if device == "cuda":
        return None if importable("triton") else "needs Triton for torch.compile on CUDA (pip install triton)"
    return None if _cxx() else "needs a C++ compiler for torch.compile on the CPU (inductor)"


def _cxx() -> bool:
    """Whether a C++ compiler is on the PATH."""
    import shutil

    return any(shutil.which(cc) for cc in ("c++", "g++", "clang++"))


def importable(module: str) -> bool:
    """Whether ``module`` (dotted names too) is installed here: False also when a parent package is missing."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def not_installed(exc: ModuleNotFoundError) -> bool:
    """Whether an import failed for a module this machine lacks (a dependency to install, not a bug in
    the code that imported it): the module it names, dotted names whole (``cuda.tile`` beside
    cuda-bindings' ``cuda``), is not installed."""
    return exc.name is not None and not importable(exc.name)


def _nccl() -> bool:
    import torch.distributed as dist

    return bool(dist.is_available() and dist.is_nccl_available())
