"""Which part of a rank's protocol stalls an NCCL all-reduce? Two ranks, 1 MiB bf16, 30 calls each way.

    python3 bench/nccl_diag.py MODE      MODE: plain | spin | cupti | flush

plain: all_reduce alone; spin: a torch.cuda._sleep before each call (as the cold timer does);
cupti: with solbench's CUPTI tracer collecting (as the side-stream check does); flush: an L2-sized
write between calls. Prints one line per rank; run each mode under `timeout`.
"""

import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank: int, mode: str, store: str) -> None:
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"file://{store}", rank=rank, world_size=2,
                            device_id=torch.device("cuda", rank))
    x = torch.randn(1 << 19, device="cuda", dtype=torch.bfloat16)
    scratch = torch.empty(120 << 20, dtype=torch.uint8, device="cuda")
    trace = None
    if mode == "cupti":
        from solbench.device import cupti
        trace = cupti.tracer()
        trace.begin()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(30):
        if mode == "spin":
            torch.cuda._sleep(2_000_000)
        if mode == "flush":
            scratch.fill_(1)
        y = x.clone()
        dist.all_reduce(y)
    torch.cuda.synchronize()
    print(f"{mode} rank {rank}: 30 calls in {1e3 * (time.perf_counter() - start):.1f} ms", flush=True)
    if trace is not None:
        _calls, work = trace.collect()
        print(f"cupti rank {rank}: {len(work)} activities", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    mode = sys.argv[1]
    store = os.path.join(tempfile.mkdtemp(), "store")
    mp.spawn(rank_main, args=(mode, store), nprocs=2)
