"""Problems of the suites kernel engineers already have, read where they are, as workloads.

    detect(path)              -> "kernelbench" | "sol-execbench" | None   (by the path's shape)
    load(path, solutions)     -> [(WorkloadSpec, origin path)]            (ConfigError naming the file)

KernelBench: a problem file (``class Model`` + ``get_inputs``) or a folder of them (a level);
files that define only ``ModelNew``, or ModelNew beside a copy of Model in ``<stem>_new*.py`` next to
problem ``<stem>.py``, are solutions (:mod:`solbench.suites.kernelbench`).
SOL-ExecBench: a problem folder (``definition.json`` + ``workload.jsonl``) or a folder of them
(:mod:`solbench.suites.solexec`). Nothing of either suite ships with solbench.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NoReturn

from solbench.errors import ConfigError
from solbench.workload.schema import WorkloadSpec

SUITES = ("kernelbench", "sol-execbench")
MAX_PROBLEMS = 5000


class NoProblems(ConfigError):
    """A folder holding neither suite's problems (a caller that takes other folders too says what it takes)."""


def detect(path: str | Path) -> str | None:
    """Which suite a path holds problems of, by its shape; None for a solbench YAML file."""
    from solbench.suites import kernelbench, solexec

    p = Path(path)
    if p.suffix in (".yaml", ".yml"):
        return None
    if solexec.looks_like_problem(p):
        return "sol-execbench"
    if p.suffix == ".py" and p.is_file():
        return "kernelbench"
    if p.is_dir():
        if any(solexec.looks_like_problem(c) for c in _children(p)):
            return "sol-execbench"
        if any(kernelbench.looks_like_problem(c) for c in _children(p)):
            return "kernelbench"
        raise NoProblems(f"{p}: a folder with neither KernelBench problems (.py files defining Model) nor "
                          "SOL-ExecBench problems (folders with definition.json)")
    return None


def _children(folder: Path) -> list[Path]:
    """A folder's entries in problem order; ConfigError past MAX_PROBLEMS (never a silent cut)."""
    entries = list(itertools.islice(folder.iterdir(), MAX_PROBLEMS + 1))
    if len(entries) > MAX_PROBLEMS:
        raise ConfigError(f"{folder}: more than {MAX_PROBLEMS} entries (problems, solutions and other files); "
                          "a suite folder is read whole or not at all: give a smaller folder of its problems")
    return sorted(entries, key=_natural)


def _natural(p: Path) -> tuple[int, str]:
    """``2_x`` before ``10_x``: KernelBench problems sort by their number."""
    head = p.name.split("_", 1)[0]
    return (int(head) if head.isdigit() else 1 << 30, p.name)


def problems(path: str | Path) -> list[Path]:
    """The problem files (KernelBench) or folders (SOL-ExecBench) a path holds."""
    from solbench.suites import kernelbench, solexec

    p = Path(path)
    suite = detect(p)
    if p.is_file() or (suite == "sol-execbench" and solexec.looks_like_problem(p)):
        return [p]
    if suite == "sol-execbench":
        return [c for c in _children(p) if solexec.looks_like_problem(c)]
    found = [c for c in _children(p) if c.suffix == ".py" and kernelbench.looks_like_problem(c)
             and not kernelbench.is_solution(c)]
    beside = {s for c in found for s in kernelbench.siblings(c)}  # solutions that copy Model as well
    return [c for c in found if c not in beside]


def load(path: str | Path, solutions: Sequence[str | Path] = (), *,
         used: set[Path] | None = None) -> list[tuple[WorkloadSpec, Path]]:
    """Every problem under ``path`` as a workload, with the file it came from.

    ``solutions`` (``--solution``): KernelBench ModelNew files (.py) or SOL-ExecBench solution.json
    files; each joins the problem of its own suite it belongs to (the only one, or the one with the longest
    file stem that starts the solution's name; a solution.json names its definition). Solutions found beside a
    problem join it too. ``used``: the solutions that joined a problem are added to it (a caller
    loading several paths refuses one that joined none: :func:`check_solutions_used`).
    """
    from solbench.suites import kernelbench, solexec

    suite = detect(path)
    out = []
    given = [Path(s) for s in solutions if Path(s).suffix == (".py" if suite == "kernelbench" else ".json")]
    found = problems(path)
    for problem in found:
        try:
            with _no_hard_exit():
                if suite == "kernelbench":
                    mine = [s for s in given if len(found) == 1 or _owner(s, found) == problem]
                    spec = kernelbench.read(problem, [*kernelbench.siblings(problem), *mine])
                    out.append((spec, problem.resolve()))
                else:
                    folder = problem if problem.is_dir() else problem.parent
                    mine = [s for s in given if len(found) == 1 or _names_definition(s, folder)]
                    spec = solexec.read(folder, [*sorted(folder.glob("solution*.json")), *mine] if mine else None)
                    out.append((spec, (folder / "definition.json").resolve()))
        except SystemExit as exc:  # the problem's code exited: solbench's own exit 0 would read as success
            how = "os._exit" if isinstance(exc, _HardExit) else "sys.exit"
            raise ConfigError(f"{problem}: its code called {how}({exc.code!r}) while it was read") from None
        if used is not None:
            used.update(mine)
    return out


class _HardExit(SystemExit):
    """``os._exit`` called by a problem's code while it is read (:func:`_no_hard_exit`)."""


@contextlib.contextmanager
def _no_hard_exit() -> Iterator[None]:
    """While a problem's code runs in this process (read: its module, ``get_inputs``, the model on the
    meta device), ``os._exit`` raises ``_HardExit`` instead of ending solbench on the spot with the
    problem's exit code (0: read as success, nothing printed or written). Code that means harm can
    still reach the C function; what is measured runs in workers, whose exit is a crash."""
    import posix

    saved = os._exit

    def refuse(code: int = 0) -> NoReturn:
        raise _HardExit(code)

    os._exit = posix._exit = refuse  # type: ignore[assignment]
    try:
        yield
    finally:
        os._exit = posix._exit = saved  # type: ignore[assignment]


def _owner(solution: Path, problems: Sequence[Path]) -> Path | None:
    """The KernelBench problem a ModelNew file belongs to: the one with the longest file stem that
    starts the solution's name (``5_Softmax_scaled_new.py`` is 5_Softmax_scaled's, not 5_Softmax's)."""
    starts = [p for p in problems if solution.stem.startswith(p.stem)]
    return max(starts, key=lambda p: len(p.stem), default=None)


def check_solutions_used(solutions: Sequence[str | Path], used: set[Path], paths: Sequence[str | Path]) -> None:
    """ConfigError for a ``--solution`` that joined no problem of ``paths`` (it would be silently left
    out: no row, nothing measured)."""
    for s in map(Path, solutions):
        if s not in used:
            kinds = {".py": "a KernelBench ModelNew file", ".json": "a SOL-ExecBench solution"}
            kind = kinds.get(s.suffix, "neither a .py nor a .json")
            raise ConfigError(f"--solution {s}: {kind} that belongs to no problem of {', '.join(map(str, paths))} "
                              "(a ModelNew file's name starts with its problem's file name; a solution.json names "
                              "its definition)")


def _names_definition(solution: Path, folder: Path) -> bool:
    import json

    try:
        definition = json.loads((folder / "definition.json").read_text(encoding="utf-8")).get("name")
        return bool(json.loads(solution.read_text(encoding="utf-8")).get("definition") == definition)
    except (OSError, ValueError, AttributeError):
        return False
