"""A solution to KernelBench level 2 problem 2 (ConvTranspose2d, bias add, clamp, scale, clamp,
divide), in KernelBench's format: ``class ModelNew``.

The transposed convolution stays with torch (cuDNN); the five elementwise ops after it run as one
CUDA kernel (CuPy RawKernel, compiled by NVRTC on the first call) that reads and writes the
convolution's output once, in place, instead of five reads and five writes. At the problem's
sizes the output is 128 x 64 x 256 x 256 fp32 (2 GiB), so this saves about 18 GiB of traffic.

Each element is computed with the same fp32 operations in the same order as Model (as torch does
them on CUDA: the bias added, clamp with NaN passed through, times the scale, clamp, times the
reciprocal of the scale), so the results match Model's: bit for bit at the problem's scaling_factor
2.0, within an ulp at any other. ``__init__`` creates the same modules and parameters in the same
order as Model, so under the same seed the weights are the same.
"""

import numpy as np
import torch
import torch.nn as nn

SOURCE = r"""
__device__ __forceinline__ float clamp01(float v) {  // torch.clamp(v, 0, 1): NaN stays NaN
  return v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
}

// x: [planes, hw] (planes = batch * channels), in place; bias: [channels].
extern "C" __global__ void bias_clamp_scale_clamp_div(float* __restrict__ x, const float* __restrict__ bias,
                                                      long long planes, long long hw, int channels,
                                                      float scale, float inv_scale) {
  for (long long p = blockIdx.y; p < planes; p += gridDim.y) {
    const float b = bias[p % channels];
    float* row = x + p * hw;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < hw;
         i += (long long)gridDim.x * blockDim.x) {
      float v = row[i] + b;
      v = clamp01(v);
      v = v * scale;
      v = clamp01(v);
      row[i] = v * inv_scale;
    }
  }
}
"""
THREADS = 256
_KERNELS = {}


def _kernel(device_index):
    """The compiled kernel for this GPU (compiled once per process and device)."""
    import cupy

    if device_index not in _KERNELS:
        with cupy.cuda.Device(device_index):
            _KERNELS[device_index] = cupy.RawKernel(SOURCE, "bias_clamp_scale_clamp_div")
    return _KERNELS[device_index]


def _cupy_stream(cupy, stream):
    """CuPy's view of torch's current stream, so the kernel is ordered with torch's work."""
    if hasattr(cupy.cuda.Stream, "from_external") and hasattr(stream, "__cuda_stream__"):  # CuPy >= 14
        return cupy.cuda.Stream.from_external(stream)
    return cupy.cuda.ExternalStream(stream.cuda_stream, stream.device.index)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape,
                 scaling_factor):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        import cupy

        y = self.conv_transpose(x).contiguous()  # a fresh tensor of ours: the kernel writes into it
        if not y.is_cuda or y.dtype != torch.float32:
            raise TypeError(f"ModelNew needs float32 CUDA tensors, got {y.dtype} on {y.device}")
        bias = self.bias.detach().reshape(-1).contiguous()
        n, c, h, w = y.shape
        if bias.numel() != c:
            raise ValueError(f"bias has {bias.numel()} values for {c} channels")
        planes, hw = n * c, h * w
        grid = (min((hw + THREADS - 1) // THREADS, 1024), min(planes, 65535))
        scale = np.float32(self.scaling_factor)
        args = (np.uint64(y.data_ptr()), np.uint64(bias.data_ptr()), np.int64(planes), np.int64(hw), np.int32(c),
                scale, np.float32(1.0) / scale)
        with cupy.cuda.Device(y.device.index), _cupy_stream(cupy, torch.cuda.current_stream(y.device)):
            _kernel(y.device.index)(grid, (THREADS,), args)
        return y
