"""Summarize a run of workloads/collectives.yaml: all-reduce busbw per size, and the overlap efficiency.

Usage: PYTHONPATH=. python3 bench/collectives_table.py RUN.json   (prints Markdown)
"""

from __future__ import annotations

import sys

from solbench.results import store

# Published nccl-tests figure to compare with (no nccl-tests binary on the device image):
# NVIDIA/nccl-tests issue #272 (2024-11-27): all_reduce_perf -b 64k -e 4G on 8x H200 SXM (NVLink 4,
# NVSwitch), NCCL 2.20.3: peak busbw 475 GB/s (above the 450 GB/s per-direction NVLink figure: with
# NVSwitch, NCCL's NVLS algorithm reduces in the switch, so fewer bytes cross each GPU's link than the
# 2(n-1)/n convention counts). With two GPUs NVLS gives no such gain; ring busbw tops out below 450 GB/s.
# nccl-tests averages 20 back-to-back calls (launch gaps amortized, L2 warm for small buffers); solbench
# times each call alone (cold: L2 flushed, ranks released together), so its small sizes read slower.
PUBLISHED = "nccl-tests #272: 8x H200 SXM, NCCL 2.20.3, peak all_reduce busbw 475 GB/s (NVLS)"


def main(path: str) -> None:
    run = store.load(path)
    print(f"## {run.environment.device_name} ({run.spec.id}), 2 ranks, torch {run.environment.torch}, {run.created}\n")
    cases = [c for c in run.cases if c.workload == "allreduce"]
    impls = list(dict.fromkeys(r.name for c in cases for r in c.impls))
    link = cases[0].peaks.link_bandwidth if cases else None
    print(f"all-reduce, 2 ranks, busbw in GB/s (link {link / 1e9:g} GB/s per direction)" if link else "all-reduce")
    print("\n| size | " + " | ".join(impls) + " | T_SOL | best SOL |")
    print("|---:|" + "---:|" * (len(impls) + 2))
    for c in cases:
        cells, sols = [], []
        for name in impls:
            r = c.impl(name)
            if r is None or r.score is None or r.score.busbw is None:
                cells.append(r.status if r is not None else "")
                continue
            cells.append(f"{r.score.busbw / 1e9:.1f}")
            sols.append(r.score.sol)
        size = c.cost.collective_bytes
        label = f"{size / 2**20:g} MiB" if size < 2**30 else f"{size / 2**30:g} GiB"
        best = f"{max(sols):.2f}" if sols else ""
        print(f"| {label} | " + " | ".join(cells) + f" | {c.t_sol * 1e6:.1f} µs | {best} |")
    print(f"\nPublished: {PUBLISHED}\n")
    for c in (c for c in run.cases if c.workload == "gemm_allreduce"):
        times = {r.name: r.timing.median for r in c.impls if r.timing is not None}
        params = " ".join(f"{k}={v}" for k, v in c.params.items())
        print(f"gemm_allreduce {params}: " + ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in times.items()))
        for r in c.impls:
            if r.score is not None and r.score.overlap is not None:
                print(f"  {r.name}: overlap efficiency {r.score.overlap:.2f}, speedup {r.score.speedup:.2f}x, "
                      f"SOL {r.score.sol:.2f}")
            elif r.status != "ok":
                print(f"  {r.name}: {r.status}: {r.message[:120]}")


if __name__ == "__main__":
    main(sys.argv[1])
