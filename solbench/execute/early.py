"""Start a run's fork server first, so that its imports run beside this process's own.

A run's workers are forked by multiprocessing's fork server, which imports torch and solbench's
worker, and on a GPU CuPy and nvmath-python, before its first fork (:mod:`solbench.measure.pool`).
Started by the first worker, those imports (2.3 s on the development machine's CPU) wait until this
process has imported torch itself, detected the device and planned the run. Started before this
process imports torch (the ``run`` command calls :func:`start_for_run` first), they overlap.

What the server preloads is fixed once it starts, so it starts early only where the command line
and the workload files say what it must preload::

    one device, local workers, no --in-process, --dry-run or --solution     else: not early
    every FILE a solbench YAML file that loads                              else: not early
    torch.compile preloaded    where a selected implementation requires compile, inductor or build
                               (a superset of what compiles: the plan also drops what cannot run)
    CuPy and nvmath-python     where the device is or may be a GPU (cuda, cuda:N, or auto with an
                               NVIDIA device node and CUDA_VISIBLE_DEVICES not empty)

A wrong guess is slow, never wrong: a library preloaded that the run does not use costs the server
an import; one not preloaded is imported by each worker that needs it, as without a fork server.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from solbench.plan.options import RunOptions

COMPILES = frozenset({"compile", "inductor", "build"})  # requirements whose set-up the run compiles ahead
NVIDIA_NODE = "/dev/nvidiactl"


def start_for_run(files: Sequence[str], options: RunOptions, *, device: str) -> bool:
    """Start the fork server now where the run has one and :func:`preloads` knows what it needs;
    whether it started. Not for a run in this process, sharded over devices, or with solutions."""
    from solbench.measure import pool

    if options.in_process or options.sharded or options.solutions:
        return False
    wanted = preloads(files, device=device, workloads=options.workloads, impls=options.impls)
    if wanted is None:
        return False
    libraries, compiler = wanted
    return pool.start_fork_server(libraries=libraries, compiler=compiler)


def preloads(files: Sequence[str], *, device: str, workloads: Sequence[str] = (),
             impls: Sequence[str] = ()) -> tuple[bool, bool] | None:
    """(CuPy and nvmath-python, torch.compile): what the fork server of this run preloads; None where
    the files alone do not say (not all solbench YAML files)."""
    compiler = False
    for name in files:
        requires = _requirements(Path(name), workloads, impls)
        if requires is None:
            return None
        compiler = compiler or bool(COMPILES & requires)
    return _may_be_gpu(device), compiler


def _requirements(path: Path, workloads: Sequence[str], impls: Sequence[str]) -> set[str] | None:
    """Every requirement of the selected implementations in one workload file; None where it is not
    a solbench YAML file that loads (the run itself then says what is wrong with it)."""
    from solbench.config.workloads import load_workload_file

    if path.suffix not in (".yaml", ".yml") or not path.is_file():
        return None
    try:
        specs = load_workload_file(path)
    except Exception:
        return None
    return {str(r) for spec in specs if not workloads or spec.name in workloads
            for name, impl in spec.implementations.items() if not impls or name in impls for r in impl.requires}


def _may_be_gpu(device: str) -> bool:
    if device.startswith("cuda"):
        return True
    if device != "auto" or os.environ.get("CUDA_VISIBLE_DEVICES") in ("", "-1"):
        return False
    return os.path.exists(NVIDIA_NODE)
