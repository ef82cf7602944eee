"""The byte floor of a case: how fast this device moves the case's bytes, under the run's timer.

A workload with ``floor: true`` gets an implementation ``floor`` (``part: floor``) next to its own.
Its worker draws two buffers of random fp32 values (never zeros): ``src`` as large as the bytes the
case reads (its declared inputs, plus the parameters a traced reference reads, or the workload's
``bytes`` override less the outputs) and ``dst`` as large as the bytes it writes (its outputs). Each
timed call is :func:`read`: one kernel that reads all of ``src`` and writes all of ``dst``, with the
same timer, flush and rounds as every implementation; its times are scaled by the case's bytes over
the bytes the kernel moved (:func:`buffers` says how close one kernel gets). It is never checked
against the reference (it computes nothing of the case) and never scored; every scored
implementation of the case gets ``floor_fraction = T_floor / T``: 1.0 moves the bytes as fast as
this plain kernel does.

Against T_SOL, which prices the bytes at the datasheet bandwidth, the floor also holds what the
timer and a launch cost at this size: at decode sizes the gap to SOL is mostly those. A workload
may bring its own floor kernel (``part: floor``, ``fn(src, dst)``); the fastest is the floor.
"""

from __future__ import annotations

import torch

from solbench.workload.cases import Case
from solbench.workload.expr import evaluate
from solbench.workload.schema import WorkloadSpec

ELEMENT = 4  # bytes: the buffers hold fp32 values


WORD = 16  # bytes: the GPU kernel moves 16-byte words
BLOCKS_PER_SM = 4  # 512-thread blocks of the GPU kernel per SM


def buffers(read_bytes: int, write_bytes: int, device: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``src`` and ``dst`` for :func:`read`, filled with random values (never zeros).

    On a GPU, the case's bytes rounded up to 16-byte words, moved by one kernel
    (``kernels/floor.cu``): read exactly, written exactly. On the CPU (torch), fp32 buffers that
    one torch op moves in full, as close to ``read_bytes`` and ``write_bytes`` as one op allows:

        read within 2x of written   a copy of (read + written) / 2 each way: the total is exact
        read >= 2x written          a row reduction of k = round(read / written) elements a row
        written >= 2x read          a broadcast copy of each element to k = round(written / read)

    What they really move is ``src.nbytes + dst.nbytes`` (on the CPU at most a seventh off the
    total, read 2.5x written); the worker scales the time to the case's bytes (:func:`scale`).
    """
    if device == "cuda":  # drawn on the device: on the host, 33 MB of random values took 0.18 s a task
        n_read, n_write = max(1, -(-read_bytes // WORD)), max(1, -(-write_bytes // WORD))
        gen = torch.Generator(device=device).manual_seed(seed)
        src = torch.rand(n_read * WORD // ELEMENT, generator=gen, device=device).add_(0.5)
        return src, torch.empty(n_write * WORD // ELEMENT, device=device)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    n_read = max(1, -(-read_bytes // ELEMENT))
    n_write = max(1, -(-write_bytes // ELEMENT))
    if n_read >= 2 * n_write:
        src = torch.rand(n_write, round(n_read / n_write), generator=gen) + 0.5
        dst = torch.empty(n_write)
    elif n_write >= 2 * n_read:
        src = torch.rand(n_read, 1, generator=gen) + 0.5
        dst = torch.empty(n_read, round(n_write / n_read))
    else:
        n = max(1, (n_read + n_write) // 2)
        src, dst = torch.rand(n, generator=gen) + 0.5, torch.empty(n)
    return src.to(device), dst.to(device)


def scale(read_bytes: int, write_bytes: int, src: torch.Tensor, dst: torch.Tensor) -> float:
    """The factor that turns the kernel's time into the floor of the case's bytes: the case's bytes
    over the bytes the kernel moves (bandwidth-bound, time goes with bytes; the factor is near 1)."""
    return (read_bytes + write_bytes) / (src.nbytes + dst.nbytes) if read_bytes + write_bytes else 1.0


def read(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """Read every element of ``src`` and write every element of ``dst``, in one kernel: on a GPU
    solbench's ``move_floor`` (CuPy), on the CPU a copy (same size), a row reduction (``src`` has
    rows of ``dst``'s length) or a broadcast copy (``dst`` rows)."""
    if src.is_cuda:
        _move_on_gpu(src, dst)
        return dst
    if src.dim() == 1:
        return dst.copy_(src)
    if dst.dim() == 1:
        return torch.sum(src, dim=1, out=dst)
    return dst.copy_(src.expand_as(dst))


def _move_on_gpu(src: torch.Tensor, dst: torch.Tensor) -> None:
    import numpy as np

    from solbench.kernels.loader import get_kernel, launch, ptr

    kernel = get_kernel("floor.cu", "move_floor")
    props = torch.cuda.get_device_properties(src.device)
    blocks = props.multi_processor_count * BLOCKS_PER_SM
    sink = _SINKS.get(src.device.index)
    if sink is None or sink.numel() < blocks:
        sink = _SINKS[src.device.index] = torch.zeros(blocks, dtype=torch.int32, device=src.device)
    launch(kernel, (blocks,), (512,), (ptr(src), np.int64(src.nbytes // WORD), ptr(dst),
                                       np.int64(dst.nbytes // WORD), ptr(sink)), device=src.device)


_SINKS: dict[int | None, torch.Tensor] = {}


def case_bytes(spec: WorkloadSpec, case: Case) -> tuple[int, int]:
    """(read, write): the bytes the case's fused-bytes cost counts, split into what it reads and writes."""
    write = sum(t.nbytes for t in case.outputs)
    if spec.bytes is not None:
        scope = {k: v for k, v in case.scope.items() if isinstance(v, int | float)}
        fused = int(float(evaluate(spec.bytes, scope)))
    else:
        fused = sum(t.nbytes for t in case.inputs) + case.extra_bytes + write
    return max(fused - write, 0), write
