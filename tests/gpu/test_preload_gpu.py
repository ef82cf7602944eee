"""A GPU run's fork server imports CuPy and nvmath-python once, ahead of its workers, without
initializing CUDA there (solbench.measure.library_preload). Each check runs in a fresh interpreter."""

import pytest

from tests.unit.preloading import first_task, last_line

pytestmark = pytest.mark.gpu
NVMATH_YAML = "tests/data/preload/nvmath_check.yaml"

IMPORTS = """
import os, sys
import torch
from solbench.measure import preload
assert not preload.driver_initialized(), "torch's import initialized the driver"
import solbench.measure.library_preload
assert "cupy" in sys.modules, "cupy not imported"
assert not preload.driver_initialized(), "a library's import initialized the driver"
assert preload.TAINTED not in os.environ
if "triton" in sys.modules:  # solbench.measure.state_preload: the work a worker's CUDA start repeats
    assert ("_triton_bsr_dense_mm_out", "SparseCsrCUDA") in torch._TritonLibrary.ops_table
    from triton.runtime.cache import triton_key
    assert triton_key.cache_info().currsize == 1
torch.cuda.init()
assert preload.driver_initialized(), "the check did not see torch initialize the driver"
print("nvmath" in sys.modules)
"""


def test_the_gpu_libraries_import_without_initializing_the_driver():
    nvmath = last_line(IMPORTS)
    assert nvmath in ("True", "False")  # nvmath-python is optional


def test_a_gpu_runs_workers_start_with_the_libraries_imported():
    pytest.importorskip("nvmath")
    assert first_task("libraries", NVMATH_YAML, "cuda").startswith("ok")
    line = first_task("plain", NVMATH_YAML, "cuda")
    assert line.startswith("error") and "nvmath was not imported before the task" in line
