"""The run loop: every case, every implementation, each through its worker; results as they come.

    for each workload (its workers start side by side first; none start while measuring):
        for each case:
            for each implementation: worker.run(task) -> ImplResult (faults are statuses)
            score the case; hand the partial run to on_case (which saves it)
        retire the workload's workers

Ctrl-C stops the loop: the run measured so far is returned marked incomplete, inside
:class:`~solbench.errors.RunInterrupted`, so the caller can save it and exit 130.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from solbench.errors import RunInterrupted
from solbench.measure.worker import MeasureSettings, Task
from solbench.results.model import CaseResult, ImplResult, RunResult
from solbench.workload.cases import Case
from solbench.workload.schema import WorkloadSpec

Progress = Callable[[str, dict[str, Any]], None]


class Executor(Protocol):
    """Runs tasks: in worker processes (:class:`~solbench.measure.pool.Pool`) or in-process."""

    def prestart(self, keys: Any) -> None: ...
    def run(self, key: tuple[str, str], task: Task, timeout_s: float,
            progress: Progress | None = None) -> ImplResult: ...
    def retire(self, keys: Any) -> None: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class Unit:
    """One workload to measure: its spec, where it came from, its cases and implementations."""

    spec: WorkloadSpec
    path: Path
    cases: tuple[Case, ...]
    impls: tuple[str, ...]


class Interrupted(Exception):
    """Ctrl-C during a run; ``result`` holds everything measured before it."""

    def __init__(self, result: RunResult) -> None:
        super().__init__("interrupted")
        self.result = result


def measure_units(units: Sequence[Unit], run: RunResult, executor: Executor, *, device: str,
                  settings: MeasureSettings, timeout_s: float, l2_bytes: int | None,
                  score: Callable[[Unit, Case, Sequence[ImplResult]], CaseResult],
                  emit: Progress, on_case: Callable[[RunResult], None] | None = None,
                  keys: Sequence[str] = (),
                  variant: Callable[[WorkloadSpec, Case, str], WorkloadSpec] | None = None) -> RunResult:
    """Measure every case of every unit; see the module docstring.

    ``variant(spec, case, impl)`` may return the spec to send for one implementation and case
    (``run --tuned`` swaps in an implementation with its tuned parameters).
    """
    try:
        skips = [_skipped(unit, device) for unit in units]
        for n, unit in enumerate(units):
            emit("workers", {"workload": unit.spec.name})
            executor.prestart(_keys(unit, skips[n]))  # all of them, before anything is measured
            for case in unit.cases:
                impls = [name for name in unit.impls if not keys or f"{case.id}/{name}" in keys]
                if not impls:
                    continue
                results = []
                for name in impls:
                    emit("impl", {"case": case.id, "impl": name})
                    if name in skips[n]:
                        r = ImplResult(name, "skipped", skips[n][name])
                    else:
                        spec = variant(unit.spec, case, name) if variant is not None else unit.spec
                        task = Task(spec, case, name, str(unit.path.parent), device, settings, l2_bytes)
                        r = executor.run((unit.spec.name, name), task, timeout_s, emit)
                    results.append(r)
                    emit("impl_done", {"case": case.id, "impl": name, "status": r.status})
                run = replace(run, cases=(*run.cases, score(unit, case, results)))
                if on_case is not None:
                    on_case(run)
                emit("case_done", {"case": case.id})
            executor.retire(_keys(unit, skips[n]))
    except KeyboardInterrupt:
        run = replace(run, complete=False, notes=(*run.notes, "interrupted (Ctrl-C): the cases listed are "
                                                  "all that were measured"))
        raise RunInterrupted(run) from None
    finally:
        executor.close()
    return run


def _skipped(unit: Unit, device: str) -> dict[str, str]:
    """Implementations whose requirements this machine lacks: skipped without starting a worker."""
    from solbench.measure.runner import missing_requirement

    found = {name: missing_requirement(unit.spec.implementations[name], device) for name in unit.impls}
    return {name: reason for name, reason in found.items() if reason is not None}


def _keys(unit: Unit, skipped: dict[str, str]) -> list[tuple[str, str]]:
    return [(unit.spec.name, name) for name in unit.impls if name not in skipped]
