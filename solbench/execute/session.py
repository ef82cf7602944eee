"""The run loop: every case, every implementation, each through its worker; results as they come.

    for each round (``repeat`` of them; one by default):
        for each workload (its workers start side by side first; none start while measuring):
            for each case:
                for each implementation: worker.run(task) -> ImplResult (faults are statuses)
                merge the case's rounds so far (pooling.merge_rounds), score the case;
                hand the partial run to on_case (which saves it)
            retire the workload's workers

Workers are retired after each workload, so every round starts fresh processes: new CUDA
contexts, new allocations (inputs, flush buffers), the timer's spin sized again.

Ctrl-C stops the loop: the run measured so far is returned marked incomplete, inside
:class:`~solbench.errors.RunInterrupted`, so the caller can save it and exit 130.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol

from solbench.errors import RunInterrupted
from solbench.measure.worker import MeasureSettings, Task
from solbench.plan.prepare import Unit as Unit  # re-exported: executors take the plan's units
from solbench.results.model import CaseResult, ImplResult, RunResult
from solbench.workload.cases import Case
from solbench.workload.schema import WorkloadSpec

Progress = Callable[[str, dict[str, Any]], None]


class Executor(Protocol):
    """Runs tasks: in worker processes (:class:`~solbench.measure.pool.Pool`) or in-process.

    Runs over several devices (:mod:`solbench.execute.shard`) also call ``abort()`` where an
    executor has it: kill its workers now, from another thread (Ctrl-C).
    """

    def prestart(self, keys: Any) -> None: ...
    def run(self, key: tuple[str, str], task: Task, timeout_s: float,
            progress: Progress | None = None) -> ImplResult: ...
    def retire(self, keys: Any) -> None: ...
    def close(self) -> None: ...


class Interrupted(Exception):
    """Ctrl-C during a run; ``result`` holds everything measured before it."""

    def __init__(self, result: RunResult) -> None:
        super().__init__("interrupted")
        self.result = result


def measure_units(units: Sequence[Unit], run: RunResult, executor: Executor, *, device: str,
                  settings: MeasureSettings, timeout_s: float, l2_bytes: int | None,
                  score: Callable[[Unit, Case, Sequence[ImplResult]], CaseResult],
                  emit: Progress, on_case: Callable[[RunResult], None] | None = None,
                  keys: Sequence[str] = (), repeat: int = 1, nvml_id: str | None = None,
                  variant: Callable[[WorkloadSpec, Case, str], WorkloadSpec] | None = None) -> RunResult:
    """Measure every case of every unit, ``repeat`` rounds; see the module docstring.

    ``nvml_id`` is the device UUID workers read clocks by after every sample (None: no readings).
    ``variant(spec, case, impl)`` may return the spec to send for one implementation and case.
    """
    from solbench.execute.group import with_groups

    executor = with_groups(executor, units, device)  # multi-rank workloads: one process per rank
    rounds: dict[tuple[int, str], list[list[ImplResult]]] = {}  # (unit, case) -> each round's results
    scored: dict[tuple[int, str], CaseResult] = {}
    before = run.cases
    try:
        skips = [_skipped(unit, device) for unit in units]
        for r in range(repeat):
            if repeat > 1:
                emit("round", {"round": r + 1, "of": repeat})
            for n, unit in enumerate(units):
                emit("workers", {"workload": unit.spec.name})
                executor.prestart(_keys(unit, skips[n]))  # all of them, before anything is measured
                for case in unit.cases:
                    impls = [name for name in unit.impls if not keys or f"{case.id}/{name}" in keys]
                    if not impls:
                        continue
                    task = Task(unit.spec, case, "", str(unit.path.parent.absolute()), device, settings, l2_bytes,
                                nvml_id)
                    results = [_one(executor, unit, task, name, skips[n], timeout_s, emit, variant)
                               for name in impls]
                    per_round = rounds.setdefault((n, case.id), [])
                    per_round.append(results)
                    scored[(n, case.id)] = score(unit, case, _merged(per_round))
                    run = replace(run, cases=(*before, *scored.values()))
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


def _one(executor: Executor, unit: Unit, task: Task, name: str, skips: dict[str, str], timeout_s: float,
         emit: Progress, variant: Callable[[WorkloadSpec, Case, str], WorkloadSpec] | None = None) -> ImplResult:
    """One implementation of one case (``task`` with its name filled in), through its worker."""
    emit("impl", {"case": task.case.id, "impl": name})
    if name in skips:
        r = ImplResult(name, "skipped", skips[name])
    else:
        spec = variant(unit.spec, task.case, name) if variant is not None else unit.spec
        r = executor.run((unit.spec.name, name), replace(task, spec=spec, impl=name), timeout_s, emit)
    emit("impl_done", {"case": task.case.id, "impl": name, "status": r.status})
    return r


def _merged(per_round: list[list[ImplResult]]) -> list[ImplResult]:
    """Each implementation's rounds so far as one result (the first round alone: unchanged)."""
    if len(per_round) == 1:
        return per_round[0]
    from solbench.analysis.pooling import merge_rounds

    names = list(dict.fromkeys(r.name for results in per_round for r in results))
    return [merge_rounds([r for results in per_round for r in results if r.name == name]) for name in names]


def _skipped(unit: Unit, device: str) -> dict[str, str]:
    """Implementations whose requirements this machine lacks: skipped without starting a worker."""
    from solbench.measure.runner import missing_requirement

    found = {name: missing_requirement(unit.spec.implementations[name], device) for name in unit.impls}
    return {name: reason for name, reason in found.items() if reason is not None}


def _keys(unit: Unit, skipped: dict[str, str]) -> list[tuple[str, str]]:
    return [(unit.spec.name, name) for name in unit.impls if name not in skipped]
