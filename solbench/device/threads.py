"""How many CPU threads the measuring process gives torch: the CPU thread policy.

torch runs CPU ops on an OpenMP team as wide as the machine. A parallel region ends at a barrier,
so one call lasts as long as its slowest thread: when any other process is runnable (the parent
reading progress, an idle worker's pool spinning down, the OS, another job on a shared host),
the scheduler deschedules one team member for a whole time slice (milliseconds) and a 100 µs call
reads 8 or 16 ms. On a 2-core machine with one busy process beside it, o_proj at 16 tokens read
between 0.1 and 16 ms per sample with 2 threads, and a stable 95 µs with 1.

The policy, applied in every measuring process (worker or ``--in-process``) before each task, and
to the CPU peaks the run is scored against (so SOL compares like with like)::

    threads = --threads N                         when given
            = max(1, usable cores - 1)            on the CPU: one core left for the harness and the OS
            = 0 (torch's own default, untouched)  on a GPU

``usable cores`` is the CPU affinity of this process (``os.sched_getaffinity``), else
``os.cpu_count()``. The run records it (``protocol.threads``).
"""

from __future__ import annotations

import os

THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def usable_cores() -> int:
    """Cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def policy(requested: int, device_kind: str) -> int:
    """The threads a run uses: ``requested`` when > 0, else the default for the device (above)."""
    if requested > 0:
        return requested
    return max(1, usable_cores() - 1) if device_kind == "cpu" else 0


def apply(threads: int) -> None:
    """Set torch's intra-op threads in this process (0: leave them); cheap when unchanged."""
    if threads <= 0:
        return
    import torch

    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def env_for(threads: int) -> dict[str, str]:
    """OpenMP and MKL thread variables for a process started before torch loads (0: none)."""
    return {name: str(threads) for name in THREAD_ENV} if threads > 0 else {}
