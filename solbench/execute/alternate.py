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

Rounds 2 to ``rounds`` go out in one pass, as in ``run`` (:mod:`solbench.execute.session`): each
round of a point in a worker of its own, so the pass pays its worker starts once.

After the first ``rounds`` rounds, with ``undecided`` given, the loop adds rounds only for the
``case_id/impl`` keys ``undecided(runs)`` names (the gate's INCONCLUSIVE cases, and those it
decided between one process a side), both sides, alternating as above, ROUNDS_A_LOOK (4) at a
time, until it names none or ``max_rounds`` rounds are measured::

    r = rounds
    while r < max_rounds and (keys := undecided([baseline run, current run])):
        one pass as above, for those keys only: min(4, max_rounds - r) rounds of each,
        each round in a worker of its own (a rank group: that many passes of one round)
        r += that many

So a point is looked at after ``rounds``, ``rounds + 4``, ... rounds: at most
:func:`~solbench.analysis.gate.looks_for` times, the number the gate splits its error rates over
(:class:`~solbench.analysis.adaptive.Looks`). Four
rounds a look instead of one make fewer looks (each tested at a less strict level) and fewer
passes, each of which pays its workers' start; a round more than a point needed costs a worker.

From the second round on, both sides' calls of a point take at most the same number of samples:
the larger of the two sides' allocations (n*, :mod:`solbench.analysis.allocation`).

A workload, case or implementation on one side only is measured on that side only (the gate
lists it as MISSING, or BROKEN if the current side lost a working one).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from solbench.analysis.adaptive import ROUNDS_A_LOOK
from solbench.errors import RunInterrupted
from solbench.execute.session import (
    Checked,
    Executor,
    Progress,
    Unit,
    _job,
    _keys,
    _merged,
    _ranks,
    _samples_cap,
    _skipped,
    _slot_key,
    ended,
    fits_side_by_side,
    held_before,
    note_escaped,
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


Slots = Callable[[str, str, str], int]  # (workload, case id, implementation) -> rounds of it in a pass


def measure_ab(sides: Sequence[Side], *, device: str, settings: MeasureSettings, timeout_s: float,
               l2_bytes: int | None, emit: Progress, rounds: int = 2, nvml_id: str | None = None,
               on_case: Callable[[Sequence[RunResult]], None] | None = None, max_rounds: int | None = None,
               undecided: Callable[[Sequence[RunResult]], Sequence[str]] | None = None) -> list[RunResult]:
    """Measure both sides, alternating (module docstring); returns their runs in ``sides`` order.

    ``undecided`` and ``max_rounds``: add rounds for the keys still undecided (module docstring).
    Ctrl-C raises RunInterrupted whose ``result`` is the list of both runs so far, marked incomplete.
    """
    cap = max(rounds, max_rounds or rounds)
    multi_rank = {u.spec.name for side in sides for u in side.units if _ranks(u) > 1}
    run_pass = functools.partial(_pass, sides, device=device, settings=settings, timeout_s=timeout_s,
                                 l2_bytes=l2_bytes, emit=emit, nvml_id=nvml_id, on_case=on_case)

    def together(first: int, last: int, keys: set[str] | None = None) -> None:
        """Rounds ``first`` to ``last`` (1-based) of every point, or of ``keys``: in one pass, each round
        in a worker of its own; a rank group (it holds every GPU) one round a pass."""
        def wanted(case_id: str, impl: str) -> bool:
            return keys is None or f"{case_id}/{impl}" in keys

        run_pass(first - 1, lambda name, case_id, impl: wanted(case_id, impl) * (
            1 if name in multi_rank else last - first + 1), of=rounds if keys is None else cap, last=last,
            keys=len(keys or ()))
        for r in range(first + 1, last + 1) if multi_rank else ():
            run_pass(r - 1, lambda name, case_id, impl: wanted(case_id, impl) * int(name in multi_rank),
                     of=rounds if keys is None else cap, keys=len(keys or ()))

    try:
        together(1, 1)  # every check in full
        if rounds > 1:
            together(2, rounds)
        done = rounds
        while done < cap and undecided is not None:
            keys = set(undecided([side.run for side in sides]))
            if not keys:
                break
            step = min(ROUNDS_A_LOOK, cap - done)
            emit("more", {"cases": step * len({key.rsplit("/", 1)[0] for key in keys}), "points": len(keys),
                          "rounds": step * len(keys), "of": cap})
            together(done + 1, done + step, keys)
            done += step
    except KeyboardInterrupt:
        for side in sides:
            side.run = replace(side.run, complete=False, notes=(*side.run.notes, "interrupted (Ctrl-C or SIGTERM)"))
        raise RunInterrupted([side.run for side in sides]) from None
    finally:
        for side in sides:
            side.executor.close()
    escaped = sum(n for n in (getattr(side.executor, "escaped", 0) for side in sides) if isinstance(n, int))
    for side in sides:  # either tree's implementations: one sweep kills what workers of both left (pool.sweep)
        side.run = note_escaped(side.run, escaped)
    return [side.run for side in sides]


def _pass(sides: Sequence[Side], done: int, slots: Slots, *, device: str, settings: MeasureSettings,
          timeout_s: float, l2_bytes: int | None, emit: Progress, nvml_id: str | None,
          on_case: Callable[[Sequence[RunResult]], None] | None, of: int, last: int | None = None,
          keys: int = 0) -> None:
    """One pass over the workloads: ``slots(workload, case id, impl)`` rounds of each point (each in a
    worker of its own), after ``done`` rounds; progress says rounds ``done + 1`` to ``last`` of ``of``."""
    event: dict[str, Any] = {"round": done + 1, "of": of, "keys": keys}
    emit("round", event if last is None or last <= done + 1 else {**event, "last": last})
    for name in _workloads(sides):
        _workload(sides, name, done, slots, device=device, settings=settings, timeout_s=timeout_s,
                  l2_bytes=l2_bytes, emit=emit, nvml_id=nvml_id, on_case=on_case)


def _wanted(unit: Unit | None, skip: dict[str, str], depth: Mapping[str, int]) -> list[tuple[str, str]]:
    """The workers a pass needs: one per round of each implementation it measures (``depth``)."""
    if unit is None:
        return []
    return [_slot_key(key, s) for key in _keys(unit, skip) for s in range(depth.get(key[1], 0))]


def _workload(sides: Sequence[Side], name: str, r: int, slots: Slots, *, device: str, settings: MeasureSettings,
              timeout_s: float, l2_bytes: int | None, emit: Progress, nvml_id: str | None,
              on_case: Callable[[Sequence[RunResult]], None] | None) -> None:
    units = [side.unit(name) for side in sides]
    skips = [_skipped(u, device) if u is not None else {} for u in units]
    case_ids = _case_ids(units)
    impls: dict[str, None] = {}
    for unit in reversed(units):
        impls.update(dict.fromkeys(unit.impls if unit is not None else ()))
    def live(i: int, case_id: str, impl: str) -> int:
        """The rounds of a point on side ``i`` in this pass: none where it failed there in an earlier round."""
        return 0 if ended(sides[i].rounds.get((name, case_id), ()), impl) else slots(name, case_id, impl)

    depths = [{impl: max((live(i, c, impl) for c in case_ids), default=0) for impl in impls} for i in range(len(sides))]
    workers = [_wanted(u, skip, depth) for u, skip, depth in zip(units, skips, depths, strict=True)]
    if not any(workers):
        for case_id in case_ids:  # every point asked for had ended (or is skipped): still counted done
            if (asked := max((slots(name, case_id, impl) for impl in impls), default=0)):
                emit("case_done", {"case": case_id, "rounds": asked})
        return
    alive = sum(len(wanted) for wanted in workers)  # both trees' workers hold their caches at once
    held = {(i, case_id, impl): held_before(side.rounds.get((name, case_id), []), impl, device)
            for i, side in enumerate(sides) for case_id in case_ids for impl in impls if slots(name, case_id, impl)}
    measured = max(held.values(), default=0)
    fit = all(fits_side_by_side(side.executor, wanted[0], settings, alive,
                                [c for c in unit.cases if any(slots(name, c.id, impl) for impl in impls)],
                                unit.spec.reference_dtype, device, measured)
              for side, unit, wanted in zip(sides, units, workers, strict=True) if unit is not None and wanted)
    emit("workers", {"workload": name})
    for side, wanted in zip(sides, workers, strict=True):
        if wanted:
            side.executor.prestart(wanted)
    for k, case_id in enumerate(case_ids):
        cases = [next((c for c in u.cases if c.id == case_id), None) if u is not None else None for u in units]
        counts = {impl: n for impl in impls if (n := slots(name, case_id, impl))}
        if not counts:
            continue
        jobs, owners = [], []  # owners: (side, slot)
        for impl, n in counts.items():
            cap = _shared_cap(sides, name, case_id, impl, settings)
            for s in range(n):
                order = list(range(len(sides))) if (k + r + s) % 2 == 0 else list(reversed(range(len(sides))))
                for i in order:
                    unit, case = units[i], cases[i]
                    if unit is None or case is None or impl not in unit.impls or s >= live(i, case_id, impl):
                        continue
                    task = Task(unit.spec, case, "", str(unit.path.parent.absolute()), device, settings, l2_bytes,
                                nvml_id, release_after=not fit, workload_file=str(unit.path.absolute()))
                    job = _job(sides[i].executor, unit, task, impl, skips[i], timeout_s, _tagged(emit, i),
                               checked=sides[i].checked, cap=cap)
                    jobs.append(replace(job, slot=s, held=held[(i, case_id, impl)]))
                    owners.append((i, s))
        results: dict[tuple[int, int], list[ImplResult]] = {}
        for owner, result in zip(owners, run_case(jobs), strict=True):  # checked side by side, timed in this order
            results.setdefault(owner, []).append(result)
        for i, side in enumerate(sides):
            unit, case = units[i], cases[i]
            mine = [results[(j, s)] for (j, s) in sorted(results) if j == i]
            if unit is None or case is None or not mine:
                continue
            per_round = side.rounds.setdefault((name, case_id), [])
            per_round.extend(mine)
            side.scored[(name, case_id)] = side.score(unit, case, _merged(per_round))
            side.run = replace(side.run, cases=tuple(side.scored.values()))
        if on_case is not None:
            on_case([side.run for side in sides])
        emit("case_done", {"case": case_id, "rounds": max(counts.values())})
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
