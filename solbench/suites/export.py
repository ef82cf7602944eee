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
from solbench.errors import ConfigError, ResultsWriteError
from solbench.suites import check_solutions_used, detect, load


def import_problems(src: str | Path, out: str | Path, solutions: Sequence[str | Path] = (), *,
                    force: bool = False) -> list[Path]:
    """Write one workload file per problem under ``src`` into folder ``out``; the paths written.
    ConfigError, before anything is written, where a file would replace one already there (the
    files are written to be edited) unless ``force``."""
    if detect(src) is None:
        raise ConfigError(f"{src}: not a KernelBench problem or level folder, nor a SOL-ExecBench problem or "
                          "benchmark folder")
    folder = Path(out)
    used: set[Path] = set()
    problems = list(load(src, solutions, used=used))
    check_solutions_used(solutions, used, [src])
    seen: dict[str, Path] = {}
    for spec, origin in problems:  # one file per name: a second problem of that name would replace the first
        if spec.name in seen:
            raise ConfigError(f"{origin}: its workload would be named {spec.name!r}, as {seen[spec.name]}'s is "
                              "(rename one of the problems)")
        seen[spec.name] = origin
    taken = [folder / f"{spec.name}.yaml" for spec, _ in problems if (folder / f"{spec.name}.yaml").exists()]
    if taken and not force:
        more = f" (and {len(taken) - 1} more)" if len(taken) > 1 else ""
        raise ConfigError(f"{taken[0]} exists{more}: not replacing workload files that may have been edited "
                          "(pass --force to replace them, or --out another folder)")
    folders = [path for path in taken if not path.is_file()]
    if folders:  # found before anything is written, not after the files before it were replaced
        raise ConfigError(f"{folders[0]}: a folder (or not a file) where a workload file would go: not replacing it")
    written = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for spec, origin in problems:
            path = folder / f"{spec.name}.yaml"
            suite = spec.source.suite if spec.source is not None else ""
            write_workload_file(path, [spec], header=f"Imported by `solbench import` from {suite} {origin}")
            written.append(path)
    except (OSError, ResultsWriteError) as exc:  # --out under a file, a folder not writable, a full disk
        why = exc.__cause__ if isinstance(exc, ResultsWriteError) and exc.__cause__ else exc  # the write's OSError
        done = f" ({len(written)} of {len(problems)} written)" if written else ""
        raise ResultsWriteError(f"--out {out}: cannot write workload files there: "
                                f"{getattr(why, 'strerror', None) or why}{done}") from None
    return written
