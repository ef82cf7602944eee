"""CUDA kernels through CuPy/NVRTC: solbench's fused kernels (``ops``) and users' own (``load``).

    from solbench.kernels import load
    kernel = load("my_kernel.cu", "my_kernel")       # compiled now, cached
    kernel(grid=(blocks,), block=(256,), args=(x, out, np.int32(n)))   # torch's current stream

See :mod:`solbench.kernels.user` for the rules on paths, arguments, errors and ``min_cc``.
"""

from solbench.kernels.loader import KernelCompileError, UnsupportedDevice
from solbench.kernels.requirements import requirement_missing
from solbench.kernels.user import Kernel, load

__all__ = ["Kernel", "KernelCompileError", "UnsupportedDevice", "load", "requirement_missing"]
