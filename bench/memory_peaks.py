"""What each point's worker held on the device (``memory_peak_bytes``: torch's allocator at its
peak, the CUDA context not included) against what the parent counted it would hold
(:func:`solbench.execute.warm.held_bytes` less the context), from saved runs.

    PYTHONPATH=. python3 bench/memory_peaks.py RUN.json...

Prints one line per case (the largest peak over its implementations and rounds, and the estimate),
then the largest ratio of peak to estimate: above 1, the estimate let workers keep more than fits.
"""

from __future__ import annotations

import sys
from pathlib import Path

from solbench.config.workloads import load_workload_file
from solbench.execute import warm
from solbench.results import store
from solbench.workload.cases import expand


def main(paths: list[str]) -> None:
    estimates: dict[str, int] = {}
    worst = 0.0
    print(f"{'case':52} {'impl':14} {'peak GiB':>9} {'estimate GiB':>13} {'ratio':>6}")
    for path in paths:
        run = store.load(Path(path))
        input_sets = int(run.protocol.input_sets)
        for file in run.workload_files:
            for spec in load_workload_file(Path(file)):
                for case in expand(spec, "cuda"):
                    estimates[case.id] = warm.held_bytes(case, input_sets=input_sets,
                                                         reference_dtype=spec.reference_dtype,
                                                         device="cpu")  # the tensors alone, as the peak
        for case in run.cases:
            peaks = [(int(i.protocol.get("memory_peak_bytes", 0)), i.name) for i in case.impls]
            peak, name = max(peaks, default=(0, ""))
            estimate = estimates.get(case.case_id)
            if not peak or not estimate:
                continue
            worst = max(worst, peak / estimate)
            print(f"{case.case_id:52} {name:14} {peak / 2**30:9.3f} {estimate / 2**30:13.3f} {peak / estimate:6.2f}")
    print(f"largest peak / estimate: {worst:.2f} (above 1: the estimate is short)")


if __name__ == "__main__":
    main(sys.argv[1:])
