"""solbench.kernels.load on a real GPU: compile, launch on torch's stream, errors, the example.

Skipped without CUDA or CuPy.
"""

import warnings

import numpy as np
import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    pytest.importorskip("cupy")

from click.testing import CliRunner

from solbench.cli import main
from solbench.kernels import KernelCompileError, UnsupportedDevice, load
from solbench.results import store

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.filterwarnings("ignore::Warning:cupy.*"),
    pytest.mark.filterwarnings("ignore::Warning:cupy_backends.*"),
]

AXPY = """\
// solbench: min_cc 5.0
#include "scale.cuh"
extern "C" __global__ void axpy(const float* x, float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = scaled(a, x[i]) + y[i];
}
"""
HEADER = "__device__ inline float scaled(float a, float v) { return a * v; }\n"


@pytest.fixture
def axpy_file(tmp_path):
    (tmp_path / "scale.cuh").write_text(HEADER)
    path = tmp_path / "axpy.cu"
    path.write_text(AXPY)
    return path


def test_load_compiles_includes_and_launches(axpy_file):
    kernel = load(axpy_file, "axpy")
    x = torch.randn(1000, device="cuda")
    y = torch.randn(1000, device="cuda")
    expected = 2.5 * x + y
    kernel(grid=4, block=256, args=(x, y, np.float32(2.5), np.int32(1000)))
    torch.testing.assert_close(y, expected)
    assert load(axpy_file, "axpy").function is kernel.function  # cached


def test_launch_is_on_torchs_current_stream(axpy_file):
    """A CUDA graph captures only work launched on the capturing stream: the kernel is in it."""
    kernel = load(axpy_file, "axpy")
    x = torch.ones(256, device="cuda")
    y = torch.zeros(256, device="cuda")
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        kernel(grid=1, block=256, args=(x, y, np.float32(1.0), np.int32(256)))  # warm outside capture
    torch.cuda.current_stream().wait_stream(side)
    y.zero_()
    with torch.cuda.graph(graph):
        kernel(grid=1, block=256, args=(x, y, np.float32(1.0), np.int32(256)))
    torch.cuda.synchronize()
    assert (y == 0).all()  # captured, not run
    graph.replay()
    graph.replay()
    torch.cuda.synchronize()
    assert (y == 2).all()


def test_compile_error_carries_the_compilers_message(tmp_path):
    path = tmp_path / "broken.cu"
    path.write_text('extern "C" __global__ void broken(float* y) {\n  y[0] = undefined_name;\n}\n')
    with pytest.raises(KernelCompileError) as info:
        load(path, "broken")
    message = str(info.value)
    assert "broken.cu" in message and "undefined_name" in message
    assert "(2)" in message  # the compiler's line number of the error


def test_newer_min_cc_than_the_gpu_is_unsupported(tmp_path):
    path = tmp_path / "future.cu"
    path.write_text('// solbench: min_cc 99.0\nextern "C" __global__ void k() {}\n')
    with pytest.raises(UnsupportedDevice, match=r"needs compute capability 99\.0"):
        load(path, "k")


def test_python_scalars_are_refused(axpy_file):
    kernel = load(axpy_file, "axpy")
    x = torch.ones(4, device="cuda")
    with pytest.raises(TypeError, match=r"np\.int32"):
        kernel(grid=1, block=32, args=(x, x, np.float32(1.0), 4))


def test_the_example_workload_runs_on_the_gpu(tmp_path):
    out = tmp_path / "run.json"
    result = CliRunner().invoke(main, ["run", "examples/rmsnorm_residual/rmsnorm_residual.yaml", "-o", str(out),
                                       "--budget", "0.2", "--min-samples", "5", "-q"])
    assert result.exit_code == 0, result.output
    impls = {r.name: r for c in store.load(out).cases for r in c.impls}
    assert impls["kernel"].status == "ok", impls["kernel"].message
    assert impls["baseline"].status == "ok"
