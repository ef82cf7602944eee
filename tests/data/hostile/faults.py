"""Implementations that fail in every way a process can: each must become a status, not a dead run."""

import ctypes
import os
import sys

import torch


def raises(x, w, residual):
    raise ValueError("this implementation is broken")


def hangs(x, w, residual):
    while True:
        pass


def exits_zero(x, w, residual):
    sys.exit(0)


def os_exit(x, w, residual):
    os._exit(1)


def segfault(x, w, residual):
    ctypes.string_at(0)


def huge_allocation(x, w, residual):
    return torch.empty(2**50, dtype=torch.uint8, device=x.device)  # 1 PiB: more than any address space


def illegal_memory_access(x, w, residual):
    """A CUDA kernel that writes far outside its buffer (CUDA only)."""
    import cupy

    kernel = cupy.RawKernel(r'''
    extern "C" __global__ void oob(float* p) { p[(size_t)1 << 40] = 1.0f; }
    ''', "oob")
    out = torch.empty_like(residual)
    stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    with stream:
        kernel((1,), (1,), (out.data_ptr(),))
    torch.cuda.synchronize()
    return out


def never_returns_gpu(x, w, residual):
    """A GPU kernel that spins forever (CUDA only)."""
    torch.cuda._sleep(2**62)
    torch.cuda.synchronize()
    return residual.clone()


def allocates_200_gib(x, w, residual):
    return torch.empty(200 * 2**30, dtype=torch.uint8, device=x.device)


def keyboard_interrupt(x, w, residual):
    raise KeyboardInterrupt  # its own: no Ctrl-C reaches a worker


def generator_exit(x, w, residual):
    raise GeneratorExit


class Unprintable(Exception):
    def __str__(self):
        raise ValueError("no message")


def unprintable(x, w, residual):
    raise Unprintable
