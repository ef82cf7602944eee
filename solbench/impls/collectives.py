"""Multi-rank implementations (workloads/collectives.yaml): all-reduce, and a GEMM overlapped with it.

Each function runs in every rank process of its group (torch.distributed is initialized: NCCL
on CUDA, gloo on the CPU) and sees only its own rank's inputs. References see every rank's
inputs stacked on a leading dimension ([world_size, ...], fp32) and return this rank's outputs.

The harness's contract is out of place: inputs unchanged, outputs fresh. ``all_reduce`` works
in place, so the baseline reduces a copy (the copy, one read and one write of the buffer in
HBM, is inside its time); ``allreduce_rs_ag`` writes its result straight into a fresh buffer
with a reduce-scatter into this rank's slice and an in-place all-gather (NCCL's ring all-reduce
is those two phases too), so it moves the same bus bytes with no copy.
"""

from __future__ import annotations

import warnings

import torch
import torch.distributed as dist

# torch 2.13 renames reduce_scatter_tensor (same call); the old name still works on 2.4-2.13
warnings.filterwarnings("ignore", message=".*reduce_scatter_tensor.*", category=FutureWarning)


def allreduce_reference(x: torch.Tensor) -> torch.Tensor:
    """Sum over ranks of every rank's x."""
    return x.sum(0)


def allreduce(x: torch.Tensor) -> torch.Tensor:
    """``torch.distributed.all_reduce`` (sum) of a copy of x."""
    out = x.clone()
    dist.all_reduce(out)
    return out


def allreduce_rs_ag(x: torch.Tensor) -> torch.Tensor:
    """All-reduce out of place: reduce-scatter into this rank's slice of out, then all-gather in place."""
    world, rank = dist.get_world_size(), dist.get_rank()
    if x.numel() % world:
        raise ValueError(f"{x.numel()} elements do not split into {world} equal slices")
    out = torch.empty_like(x)
    mine = out.view(world, -1)[rank]
    dist.reduce_scatter_tensor(mine, x)
    dist.all_gather_into_tensor(out, mine)
    return out


def gemm_allreduce_reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Row-parallel linear: the sum over ranks of x_r @ w_r."""
    return torch.bmm(x, w).sum(0)


def gemm_allreduce(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Sequential baseline: the whole GEMM, then one all-reduce of its output."""
    out = x @ w
    dist.all_reduce(out)
    return out


def _row_chunks(m: int, chunks: int) -> list[slice]:
    if chunks < 1:  # 0 would divide by zero, a negative count would skip every row
        raise ValueError(f"chunks must be at least 1, got {chunks}")
    step = -(-m // chunks)
    return [slice(i, min(i + step, m)) for i in range(0, m, step)]


def gemm_allreduce_overlapped(x: torch.Tensor, w: torch.Tensor, chunks: int) -> torch.Tensor:
    """The GEMM in row chunks; each chunk's all-reduce starts as soon as the chunk is computed and runs
    while the next chunk computes (on CUDA on NCCL's own stream, which waits for the chunk at the
    time it is issued; on gloo in gloo's thread); all of them are joined before returning."""
    out = torch.empty(x.shape[0], w.shape[1], dtype=x.dtype, device=x.device)
    works = []
    for rows in _row_chunks(x.shape[0], chunks):
        torch.matmul(x[rows], w, out=out[rows])
        works.append(dist.all_reduce(out[rows], async_op=True))
    for work in works:
        work.wait()
    return out


def gemm_chunks(x: torch.Tensor, w: torch.Tensor, chunks: int) -> torch.Tensor:
    """Part ``compute``: the overlapped implementation's GEMM chunks alone (T_compute)."""
    out = torch.empty(x.shape[0], w.shape[1], dtype=x.dtype, device=x.device)
    for rows in _row_chunks(x.shape[0], chunks):
        torch.matmul(x[rows], w, out=out[rows])
    return out


def comm_buffer(x: torch.Tensor, w: torch.Tensor) -> dict[str, torch.Tensor]:
    """Set-up of part ``comm``: a zeroed buffer of the output's shape (zeros stay zeros when summed)."""
    return {"buf": torch.zeros(x.shape[0], w.shape[1], dtype=x.dtype, device=x.device)}


def allreduce_chunks(buf: torch.Tensor, chunks: int) -> torch.Tensor:
    """Part ``comm``: the overlapped implementation's all-reduces alone, chunk after chunk (T_comm)."""
    works = [dist.all_reduce(buf[rows], async_op=True) for rows in _row_chunks(buf.shape[0], chunks)]
    for work in works:
        work.wait()
    return buf
