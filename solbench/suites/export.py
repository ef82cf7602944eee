"""``solbench import``: a suite's problems written as solbench workload files, to edit and keep.

Each problem becomes ``<out>/<workload name>.yaml``: the workload ``run`` reads from the problem
directly (the same parameters, CPU profile, implementations and provenance). The glue is
solbench's own runtime (:mod:`solbench.suites.kb_runtime`, :mod:`solbench.suites.sol_runtime`);
the problem file stays where it is and is named by absolute path, with its sha256.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from solbench.config.workloads import write_workload_file
from solbench.errors import ConfigError
from solbench.suites import detect, load


def import_problems(src: str | Path, out: str | Path, solutions: Sequence[str | Path] = ()) -> list[Path]:
    """Write one workload file per problem under ``src`` into folder ``out``; the paths written."""
    if detect(src) is None:
        raise ConfigError(f"{src}: not a KernelBench problem or level folder, nor a SOL-ExecBench problem or "
                          "benchmark folder")
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for spec, origin in load(src, solutions):
        path = folder / f"{spec.name}.yaml"
        suite = spec.source.suite if spec.source is not None else ""
        write_workload_file(path, [spec], header=f"Imported by `solbench import` from {suite} {origin}")
        written.append(path)
    return written
