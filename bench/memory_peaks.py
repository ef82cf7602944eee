"""What each point's worker held on the device against what the parent counted it would hold
(:func:`solbench.execute.warm.held_bytes`, its context included), from saved runs.

    PYTHONPATH=. python3 bench/memory_peaks.py RUN.json...

A worker holds its allocator's peak (``memory_peak_bytes``) and what torch's allocator does not see:
the CUDA context, module images and library handles, ``OUTSIDE`` here. Prints one line per case (the
largest peak over its implementations and rounds, and the count), then the largest ratio of held to
counted: above 1, the count let workers keep more than they hold.
"""

from __future__ import annotations

import sys
from pathlib import Path

from solbench.config.workloads import load_workload_file
from solbench.execute import warm
from solbench.results import store
from solbench.results.model import RunResult
from solbench.workload.cases import expand

# Device memory a worker holds outside torch's allocator: 0.75 GiB on an H100 (an out-of-memory message of
# the thirty-ninth session's suite, results/h100/issue16/session39/call4/suite.txt: 4.51 GiB in use by the
# process, 3.49 GiB allocated by torch and 0.27 GiB reserved but unallocated).
OUTSIDE = 0.75 * 2**30


def counted(run: RunResult) -> dict[str, int]:
    """What the parent counts a worker of each of ``run``'s cases to hold on a GPU (by case id), from
    the run's workload files and input sets."""
    input_sets = int(run.protocol.input_sets)
    return {case.id: warm.held_bytes(case, input_sets=input_sets, reference_dtype=spec.reference_dtype,
                                     device="cuda")
            for file in run.workload_files for spec in load_workload_file(Path(file))
            for case in expand(spec, "cuda")}


def main(paths: list[str]) -> None:
    worst = 0.0
    print(f"{'case':52} {'impl':14} {'peak GiB':>9} {'counted GiB':>12} {'(peak + outside) / counted':>27}")
    for path in paths:
        run = store.load(Path(path))
        estimates = counted(run)
        for case in run.cases:
            peaks = [(int(i.protocol.get("memory_peak_bytes", 0)), i.name) for i in case.impls]
            peak, name = max(peaks, default=(0, ""))
            estimate = estimates.get(case.case_id)
            if not peak or not estimate:
                continue
            ratio = (peak + OUTSIDE) / estimate
            worst = max(worst, ratio)
            print(f"{case.case_id:52} {name:14} {peak / 2**30:9.3f} {estimate / 2**30:12.3f} {ratio:27.2f}")
    print(f"largest (peak + outside) / counted: {worst:.2f} (above 1: the count is short)")


if __name__ == "__main__":
    main(sys.argv[1:])
