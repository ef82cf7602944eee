"""Each kernel source builds at the compute capability it declares, and not one step below.

Compiles with libnvrtc directly (no GPU needed); skipped where no libnvrtc is found (NVIDIA's
``nvidia-cuda-nvrtc`` wheel, as CuPy installs it, or ``SOLBENCH_NVRTC_DIR``).
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

import pytest

from solbench.kernels import loader

# One instantiation of each template, enough to emit every instruction the file can use.
KERNELS = {
    "bias_gelu.cu": ["bias_gelu_kernel<0, 8, 0>", "bias_gelu_kernel<1, 8, 1>"],
    "residual_layernorm.cu": ["residual_layernorm_kernel<0, 8, 4>", "residual_layernorm_kernel<1, 1, 2>",
                              "residual_layernorm_kernel<0, 8, 2, 1>", "residual_layernorm_kernel<1, 8, 1, 2>"],
    "gemv_residual.cu": ["gemv_residual_kernel<0, 2>", "gemv_residual_scalar_kernel<1>"],
    "maxpool_nhwc.cu": ["maxpool_nhwc_kernel<0, 8>", "maxpool_nhwc_kernel<1, 1>"],
    "gemv_stream.cu": ["gemv_stream_kernel<0, 0, 32, 2>", "gemv_stream_kernel<0, 1, 64, 8>",
                       "gemv_stream_kernel<1, 1, 64, 8>"],
}
BELOW = {(8, 0): (7, 5), (8, 9): (8, 6), (9, 0): (8, 9)}


def _nvrtc() -> ctypes.CDLL | None:
    dirs = [Path(os.environ["SOLBENCH_NVRTC_DIR"])] if "SOLBENCH_NVRTC_DIR" in os.environ else []
    dirs += [Path(p) / "nvidia" / sub / "lib" for p in sys.path for sub in ("cu13", "cuda_nvrtc", "cu12")]
    for d in dirs:
        libs = sorted(d.glob("libnvrtc.so*")) if d.is_dir() else []
        if libs:
            for builtins in d.glob("libnvrtc-builtins.so*"):  # found by soname once loaded
                ctypes.CDLL(str(builtins), mode=ctypes.RTLD_GLOBAL)
            return ctypes.CDLL(str(libs[0]))
    return None


NVRTC = _nvrtc()
pytestmark = pytest.mark.skipif(NVRTC is None, reason="no libnvrtc (pip install nvidia-cuda-nvrtc, or set SOLBENCH_NVRTC_DIR)")


def _compiles(source: str, names: list[str], cc: tuple[int, int]) -> tuple[bool, str]:
    assert NVRTC is not None
    prog = ctypes.c_void_p()
    assert NVRTC.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"k.cu", 0, None, None) == 0
    for name in names:
        assert NVRTC.nvrtcAddNameExpression(prog, name.encode()) == 0
    opts = [b"-std=c++17", f"-arch=sm_{cc[0]}{cc[1]}".encode()]
    rc = NVRTC.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    NVRTC.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    NVRTC.nvrtcGetProgramLog(prog, log)
    if rc == 0:  # ptxas runs when the cubin is asked for
        cubin = ctypes.c_size_t()
        rc = NVRTC.nvrtcGetCUBINSize(prog, ctypes.byref(cubin))
    NVRTC.nvrtcDestroyProgram(ctypes.byref(prog))
    return rc == 0, log.value.decode(errors="replace")


@pytest.mark.parametrize("source", sorted(KERNELS))
def test_builds_at_its_declared_minimum_and_not_below(source):
    declared = loader.kernel_min_cc(source)
    ok, log = _compiles(loader.read_source(source), KERNELS[source], declared)
    assert ok, f"{source} fails at its declared sm_{declared[0]}{declared[1]}:\n{log}"
    below = BELOW[declared]
    ok, _ = _compiles(loader.read_source(source), KERNELS[source], below)
    assert not ok, f"{source} also builds for sm_{below[0]}{below[1]}: its min_cc line is too high"


def test_cluster_variants_need_sm90():
    names = ["gemv_stream_cluster_kernel<0, 0, 64, 2, 2>"]
    assert _compiles(loader.read_source("gemv_stream.cu"), names, (9, 0))[0]
    assert not _compiles(loader.read_source("gemv_stream.cu"), names, (8, 9))[0]
