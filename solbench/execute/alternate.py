"""The A/B loop: two checkouts of the same workloads measured side by side on one device.

Each side has its own workers (:class:`~solbench.measure.pool.Pool` with its tree; every worker
resolves implementations in that checkout, the harness is the invoking solbench's). The two
sides take turns implementation by implementation, and which side goes first alternates case by
case and round by round, so drift, heat and the power cap hit both alike::

    for each round r (fresh workers on both sides each round; every check until a point has passed
                      them all once, lighter checks after that: solbench.measure.worker):
        for each workload (present on either side):
            start both sides' workers (side by side, before anything is measured)
            for case k:
                order = (baseline, current) if (k + r) is even else (current, baseline)
                for each implementation: measure it on each side, in that order
                merge each side's rounds so far; score; hand both runs to on_case
            retire both sides' workers

After the first ``rounds`` rounds, with ``undecided`` given, the loop adds rounds only for the
``case_id/impl`` keys ``undecided(runs)`` names (the gate's INCONCLUSIVE cases), both sides,
alternating as above, until it names none or ``max_rounds`` rounds are measured::

    r = rounds
    while r < max_rounds and (keys := undecided([baseline run, current run])):
        round r as above, for those keys only (only their workers start)

From the second round on, both sides' calls of a point take at most the same number of samples:
the larger of the two sides' allocations (n*, :mod:`solbench.analysis.allocation`).

A workload, case or implementation on one side only is measured on that side only (the gate
lists it as MISSING, or BROKEN if the current side lost a working one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from solbench.errors import RunInterrupted
from solbench.execute.session import (
    Checked,
    Executor,
    Progress,
    Unit,
    _job,
    _keys,
    _merged,
    _samples_cap,
    _skipped,
    run_case,
)
from solbench.measure.worker import MeasureSettings, Task
from solbench.results.model import CaseResult, ImplResult, RunResult
from solbench.workload.cases import Case


@dataclass
class Side:
    """One checkout: its units, the run its results go into, its workers and how to score."""

    label: str  # "baseline" or "current"
    units: Sequence[Unit]
    run: RunResult
    executor: Executor
    score: Callable[[Unit, Case, Sequence[ImplResult]], CaseResult]
    rounds: dict[tuple[str, str], list[list[ImplResult]]] = field(default_factory=dict)
    scored: dict[tuple[str, str], CaseResult] = field(default_factory=dict)
    checked: Checked = field(default_factory=Checked)  # points past every check: lighter checks after

    def unit(self, workload: str) -> Unit | None:
        return next((u for u in self.units if u.spec.name == workload), None)


def _workloads(sides: Sequence[Side]) -> list[str]:
    """Workload names in the current side's order, then those only the baseline has."""
    names: dict[str, None] = {}
    for side in reversed(sides):
        names.update(dict.fromkeys(u.spec.name for u in side.units))
    return list(names)


def _case_ids(units: Sequence[Unit | None]) -> list[str]:
    ids: dict[str, None] = {}
    for unit in reversed(units):
        if unit is not None:
            ids.update(dict.fromkeys(c.id for c in unit.cases))
    return list(ids)


def measure_ab(sides: Sequence[Side], *, device: str, settings: MeasureSettings, timeout_s: float,
               l2_bytes: int | None, emit: Progress, rounds: int = 2, nvml_id: str | None = None,
               on_case: Callable[[Sequence[RunResult]], None] | None = None, max_rounds: int | None = None,
               undecided: Callable[[Sequence[RunResult]], Sequence[str]] | None = None) -> list[RunResult]:
    """Measure both sides, alternating (module docstring); returns their runs in ``sides`` order.

    ``undecided`` and ``max_rounds``: add rounds for the keys still undecided (module docstring).
    Ctrl-C raises RunInterrupted whose ``result`` is the list of both runs so far, marked incomplete.
    """
    cap = max(rounds, max_rounds or rounds)
    try:
        r = 0
        while r < cap:
            keys: set[str] | None = None
            if r >= rounds:
                keys = set(undecided([side.run for side in sides])) if undecided is not None else set()
                if not keys:
                    break
            emit("round", {"round": r + 1, "of": rounds if keys is None else cap, "keys": len(keys or ())})
            for name in _workloads(sides):
                _workload(sides, name, r, device=device, settings=settings, timeout_s=timeout_s,
                          l2_bytes=l2_bytes, emit=emit, nvml_id=nvml_id, on_case=on_case, keys=keys)
            r += 1
    except KeyboardInterrupt:
        for side in sides:
            side.run = replace(side.run, complete=False, notes=(*side.run.notes, "interrupted (Ctrl-C)"))
        raise RunInterrupted([side.run for side in sides]) from None
    finally:
        for side in sides:
            side.executor.close()
    return [side.run for side in sides]


def _wanted(unit: Unit | None, skip: dict[str, str], keys: set[str] | None) -> list[tuple[str, str]]:
    """The workers a round needs: every implementation's, or those with a key in ``keys``."""
    if unit is None:
        return []
    return [(w, impl) for w, impl in _keys(unit, skip)
            if keys is None or any(f"{c.id}/{impl}" in keys for c in unit.cases)]


def _workload(sides: Sequence[Side], name: str, r: int, *, device: str, settings: MeasureSettings,
              timeout_s: float, l2_bytes: int | None, emit: Progress, nvml_id: str | None,
              on_case: Callable[[Sequence[RunResult]], None] | None, keys: set[str] | None = None) -> None:
    units = [side.unit(name) for side in sides]
    skips = [_skipped(u, device) if u is not None else {} for u in units]
    workers = [_wanted(u, skip, keys) for u, skip in zip(units, skips, strict=True)]
    if not any(workers):
        return
    emit("workers", {"workload": name})
    for side, wanted in zip(sides, workers, strict=True):
        if wanted:
            side.executor.prestart(wanted)
    for k, case_id in enumerate(_case_ids(units)):
        order = list(range(len(sides))) if (k + r) % 2 == 0 else list(reversed(range(len(sides))))
        cases = [next((c for c in u.cases if c.id == case_id), None) if u is not None else None for u in units]
        impls: dict[str, None] = {}
        for unit in reversed(units):
            impls.update(dict.fromkeys(unit.impls if unit is not None else ()))
        if keys is not None:
            impls = {impl: None for impl in impls if f"{case_id}/{impl}" in keys}
            if not impls:
                continue
        results: list[list[ImplResult]] = [[] for _ in sides]
        jobs, owners = [], []
        for impl in impls:
            cap = _shared_cap(sides, name, case_id, impl, settings)
            for i in order:
                unit, case = units[i], cases[i]
                if unit is None or case is None or impl not in unit.impls:
                    continue
                task = Task(unit.spec, case, "", str(unit.path.parent.absolute()), device, settings, l2_bytes, nvml_id)
                jobs.append(_job(sides[i].executor, unit, task, impl, skips[i], timeout_s, _tagged(emit, i),
                                 checked=sides[i].checked, cap=cap))
                owners.append(i)
        for i, result in zip(owners, run_case(jobs), strict=True):  # checked side by side, timed in this order
            results[i].append(result)
        for i, side in enumerate(sides):
            unit, case = units[i], cases[i]
            if unit is None or case is None or not results[i]:
                continue
            per_round = side.rounds.setdefault((name, case_id), [])
            per_round.append(results[i])
            side.scored[(name, case_id)] = side.score(unit, case, _merged(per_round))
            side.run = replace(side.run, cases=tuple(side.scored.values()))
        if on_case is not None:
            on_case([side.run for side in sides])
        emit("case_done", {"case": case_id})
    for side, wanted in zip(sides, workers, strict=True):
        if wanted:
            side.executor.retire(wanted)


def _shared_cap(sides: Sequence[Side], name: str, case_id: str, impl: str, settings: MeasureSettings) -> int | None:
    """The samples cap of a point's next round on both sides: the larger of the two sides' n*
    (:func:`solbench.execute.session._samples_cap`, from each side's rounds so far), so that both
    sides sample alike and the noisier side's allocation holds; None before the second round."""
    caps = [_samples_cap(side.rounds.get((name, case_id), []), impl, settings) for side in sides]
    known = [c for c in caps if c is not None]
    return max(known) if known else None


def _tagged(emit: Progress, side: int) -> Progress:
    def tagged(event: str, data: dict[str, Any]) -> None:
        emit(event, {**data, "side": side})

    return tagged
