"""What one tamper snapshot costs a worker: ``TamperGuard.tampered()`` (a walk of every watched object, compared
with the snapshot) in a process holding a worker's guard, and the part of it that reads ``torch.Tensor``'s and
``builtins``' attributes: in one pass over their namespaces (``guards._static_attrs``, since a8de62f) against
name by name with ``inspect.getattr_static`` (before). A task compares the snapshot three times (after its
checks, after timing, at its end).

    python bench/tamper_walk.py [N]      # N of each (default 50), interleaved; medians and minimums
"""

import builtins
import inspect
import sys
import time

import torch

from solbench.measure import guards
from solbench.measure.worker import WorkerState

OWNERS = (torch.Tensor, builtins)


def _one_pass() -> None:
    for owner in OWNERS:
        found = guards._static_attrs(owner)
        for attr in dir(owner):
            found.get(attr)


def _by_name() -> None:
    for owner in OWNERS:
        for attr in dir(owner):
            inspect.getattr_static(owner, attr, None)


def main(n: int = 50) -> None:
    state = WorkerState()  # the worker's guard: its snapshot holds the modules a worker watches
    steps = {"whole walk (now)": lambda: state.tamper.tampered(), "Tensor + builtins, one pass": _one_pass,
             "Tensor + builtins, by name": _by_name}
    times: dict[str, list[float]] = {label: [] for label in steps}
    for _ in range(n):
        for label, step in steps.items():
            start = time.perf_counter()
            step()
            times[label].append(time.perf_counter() - start)
    assert state.tamper.tampered() is None
    for label, ts in times.items():
        ts.sort()
        print(f"{label:28s} median {ts[len(ts) // 2] * 1e3:5.2f} ms  min {ts[0] * 1e3:5.2f} ms")
    print(f"{n} of each, interleaved; {len(state.tamper._snapshot)} snapshot entries")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50)
