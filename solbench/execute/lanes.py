"""Runs over several devices: every GPU of this node (``run --devices``) or a Ray cluster
(``run --executor ray``). :func:`solbench.execute.run.run` calls :func:`run_sharded` for both.

    lanes   one per device: its workers, its spec (each GPU model scored against its own), its
            fingerprint (stored with every case it measured)
    order   cases longest-first, handed to free lanes by :mod:`solbench.execute.shard`; the
            estimate is the time a case took in the newest saved run of this spec that has it
            (``--schedule-from RUN`` names one), else T_SOL x implementations (the dry run's
            figure, which knows nothing of compilation); the run lists cases in plan order
"""

from __future__ import annotations

import os
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from solbench.errors import ConfigError, DeviceError, LaneLost
from solbench.plan.options import refuse_round_options
from solbench.results.model import Environment, RunResult

Progress = Callable[[str, dict[str, Any]], None]
HISTORY_FILES = 20  # saved runs looked at (newest first) for the schedule's estimates


def parse_devices(text: str, count: int) -> tuple[int, ...]:
    """``"all"`` -> every index below ``count``; ``"0,2"`` -> (0, 2). ConfigError names what is wrong."""
    text = text.strip().lower()
    if text == "all":
        if count < 1:
            raise DeviceError("--devices all: no CUDA device is visible")
        return tuple(range(count))
    if not re.fullmatch(r"\d+(\s*,\s*\d+)*", text):
        raise ConfigError(f"--devices {text!r}: expected 'all' or CUDA indices such as '0,1'")
    indices = tuple(int(x) for x in text.split(","))
    if len(set(indices)) != len(indices):
        raise ConfigError(f"--devices {text!r}: an index is listed twice")
    missing = [i for i in indices if i >= count]
    if missing:
        raise DeviceError(f"--devices {text!r}: no CUDA device {missing[0]} (torch sees {count})")
    return indices


def run_sharded(files: Sequence[str | Path], options: Any, *, progress: Progress | None = None,
                on_case: Callable[[RunResult], None] | None = None, infos: Sequence[Any] | None = None,
                before_measuring: Callable[[RunResult], None] | None = None,
                measured_on: Mapping[tuple[str, str], Environment] | None = None) -> RunResult:
    """Measure the files over several devices; the same RunResult as a one-device run, plus each
    case's ``device`` fingerprint. ``infos`` (DeviceInfo, one per lane) replaces detection (tests).
    ``before_measuring``: as for :func:`solbench.execute.run.run`, called with the run as planned
    (the first lane's fingerprint, ``protocol.devices`` the lanes) before anything is measured.
    ``measured_on``: the device each (workload, case id) was measured on before, the device it is
    measured on again (:func:`solbench.execute.shard.measure_sharded`)."""
    if options.in_process:
        raise ConfigError("--in-process measures in this one process: it cannot use several devices")
    if options.max_rounds:
        raise ConfigError("--max-rounds adds rounds on one device; with --devices or --executor ray give --repeat N")
    refuse_round_options(options)
    if options.executor == "ray":
        from solbench.execute import ray_cluster as ray_exec

        cluster = ray_exec.connect(options.address)
        try:
            lanes, prepared = ray_exec.lanes(cluster, files, options)
            return _measure(files, options, lanes, prepared, progress, on_case, "ray", before_measuring, measured_on)
        finally:
            cluster.close()
    if options.executor != "local":
        raise ConfigError(f"--executor {options.executor!r}: expected 'local' or 'ray'")
    if infos is None:
        infos = _local_devices(options.devices)
    lanes, prepared = local_lanes(files, options, infos)
    return _measure(files, options, lanes, prepared, progress, on_case, "local", before_measuring, measured_on)


def _local_devices(text: str) -> list[Any]:
    """DeviceInfo of every GPU ``--devices`` names; DeviceError without CUDA."""
    import torch

    from solbench.device.detect import detect

    if not torch.cuda.is_available():
        raise DeviceError("--devices needs CUDA GPUs and torch sees none (run without --devices to measure "
                          "on the CPU)")
    return [detect(f"cuda:{i}") for i in parse_devices(text, torch.cuda.device_count())]


def local_lanes(files: Sequence[str | Path], options: Any, infos: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """One lane per local device (a Pool of workers on it), each prepared against its own spec."""
    from solbench.execute.shard import Lane
    from solbench.measure import pool
    from solbench.plan.device import with_peaks
    from solbench.plan.prepare import prepare

    lanes, prepared = [], []
    for n, info in enumerate(infos):
        info, floor = with_peaks(info, options.peaks, options.results_dir)
        prep = prepare(files, options, info, floor)
        index = info.index if info.index is not None else n
        env = replace(info.environment(), device_index=info.index)
        make = _pool_factory(pool.Pool, info.kind, info.index)
        if prep.nvml_id:  # a GPU NVML can watch: a point that fails on it asks whether it is lost
            make = _watched_factory(make, prep.nvml_id, f"GPU {index} ({info.name})")
        lanes.append(Lane(index, info.kind, make, prep.score, env, info.l2_bytes, prep.nvml_id))
        prepared.append((info, prep))
    return lanes, prepared


def _pool_factory(cls: Any, kind: str, index: int | None) -> Callable[[], Any]:
    return lambda: cls(kind, index)


def _watched_factory(make: Callable[[], Any], uuid: str, label: str) -> Callable[[], Any]:
    return lambda: WatchedGpu(make(), uuid, label)


class WatchedGpu:
    """A local GPU lane's executor that tells a point failing on a GPU gone from the bus from a failing
    implementation: after a point that crashed, errored or timed out, NVML is asked whether the GPU is
    lost (:func:`solbench.device.nvml.gpu_lost`); if it is, LaneLost, and the sharded run moves the
    lane's cases to the GPUs left (:mod:`solbench.execute.shard`). Everything else is ``inner``'s."""

    FAILED = ("crashed", "error", "timeout")

    def __init__(self, inner: Any, uuid: str, label: str) -> None:
        self.inner, self.uuid, self.label = inner, uuid, label

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def hold_budget(self, key: tuple[str, str]) -> None:
        """None: every task goes through :meth:`run`, where a failure asks after the GPU (a sharded run
        measures a lane's points one at a time anyway)."""
        return None

    def run(self, key: tuple[str, str], task: Any, timeout_s: float, progress: Any = None) -> Any:
        from solbench.device import nvml

        result = self.inner.run(key, task, timeout_s, progress)
        if result.status in self.FAILED:
            why = nvml.gpu_lost(self.uuid)
            if why is not None:
                raise LaneLost(f"{self.label} is gone ({why})")
        return result


def _measure(files: Sequence[str | Path], options: Any, lanes: Sequence[Any], prepared: Sequence[Any],
             progress: Progress | None, on_case: Callable[[RunResult], None] | None, executor: str,
             before_measuring: Callable[[RunResult], None] | None = None,
             measured_on: Mapping[tuple[str, str], Environment] | None = None) -> RunResult:
    from solbench.execute.shard import measure_sharded
    from solbench.plan.device import with_end_clocks
    from solbench.plan.options import rounds_for
    from solbench.plan.prepare import tuned_variant

    first_info, first = prepared[0]
    options = replace(options, repeat=rounds_for(options, first_info.kind))  # 0: the device's default
    units = first.units
    # a stale or foreign file: refused now
    variant, tuned = tuned_variant(options.tuned, first_info.spec.id, units, options.launch_on(first_info.kind),
                                   first_info.kind)
    emit = progress or (lambda event, data: None)
    emit("start", {"cases": sum(len(u.cases) for u in units) * options.repeat, "devices": len(lanes)})
    run = replace(first.run, protocol=replace(first.run.protocol, devices=len(lanes), executor=executor),
                  notes=(*first.run.notes, *tuned, _devices_note(lanes)))
    if before_measuring is not None:
        before_measuring(run)

    estimate, cold, source = _estimates(units, first, options, first_info.spec.id)
    run = replace(run, notes=(*run.notes, f"schedule: longest case first, estimated from {source}"))
    result = measure_sharded(units, run, lanes, settings=first.settings, timeout_s=options.timeout_s,
                             estimate=estimate, emit=emit, on_case=on_case, keys=options.keys,
                             repeat=options.repeat, group=_group_executor(executor),
                             variant=variant, cold=cold, measured_on=measured_on)
    emit("done", {})
    return with_end_clocks(result, first_info) if executor == "local" else result


def _estimates(units: Sequence[Any], first: Any, options: Any,
               spec_id: str) -> tuple[Callable[[Any, Any], float], dict[int, float], str]:
    """Case estimates for the schedule: the time each case took in the newest earlier run of this
    spec that has it (cases it lacks: the median known time of their workload, else of all),
    else T_SOL x implementations. Returns (estimate, cold start-up per unit, where they came from)."""
    from solbench.execute.shard import history_estimates

    found = _history(options, spec_id, {(u.spec.name, c.id) for u in units for c in u.cases})
    if found is None:
        return (lambda unit, case: float(first.score(unit, case, ()).t_sol) * max(1, len(unit.impls))), {}, \
            "T_SOL x implementations (no earlier run of these cases)"
    path, history = found
    times, cold = history_estimates(units, history)
    overall = statistics.median(times.values())
    per_unit = {u.spec.name: statistics.median(v) for u in units
                if (v := [times[(u.spec.name, c.id)] for c in u.cases if (u.spec.name, c.id) in times])}

    def estimate(unit: Any, case: Any) -> float:
        return times.get((unit.spec.name, case.id), per_unit.get(unit.spec.name, overall))

    return estimate, cold, f"the per-task times of {path}"


def _history(options: Any, spec_id: str, wanted: set[tuple[str, str]]) -> tuple[Path, RunResult] | None:
    """``options.schedule_from`` (any GPU), else the newest saved run of this spec under
    results/<spec>/ (of the newest HISTORY_FILES files) that timed any of ``wanted``, or None."""
    from solbench.errors import ResultsFormatError
    from solbench.results import store

    if options.schedule_from is not None:
        candidates = [Path(options.schedule_from)]
    else:
        candidates = store.newest_first(Path(options.results_dir) / store.slug(spec_id))[:HISTORY_FILES]
    for path in candidates:
        try:
            run = store.load(path)
        except ResultsFormatError:
            if options.schedule_from is not None:
                raise
            continue
        timed = any((c.workload, c.case_id) in wanted and any("task_s" in r.protocol for r in c.impls)
                    for c in run.cases)
        if timed and (options.schedule_from is not None or run.spec.id == spec_id):
            return path, run
    if options.schedule_from is not None:
        raise ConfigError(f"--schedule-from {options.schedule_from}: it timed none of these cases")
    return None


def _devices_note(lanes: Sequence[Any]) -> str:
    names = [f"{lane.index}: {lane.environment.device_name} ({lane.environment.spec_id})"
             if lane.environment is not None else str(lane.index) for lane in lanes]
    return f"cases sharded over {len(lanes)} devices ({'; '.join(names)}); each case records its own"


def _group_executor(executor: str) -> Any:
    """world_size > 1 on local GPUs: ``solbench.execute.group.GroupExecutor`` (where installed) over
    the job's lanes, its ranks seeing only those GPUs (CUDA_VISIBLE_DEVICES in each rank's env)."""
    if executor != "local":
        return None
    try:
        from solbench.execute.group import GroupExecutor  # type: ignore[attr-defined]
    except ImportError:
        return None
    from solbench.execute.shard import world_size

    def make(lanes: Sequence[Any], unit: Any) -> Any:
        inner = GroupExecutor(_NoWorkers(), {unit.spec.name: world_size(unit)}, lanes[0].device)
        visible = visible_devices([lane.index for lane in lanes]) if lanes[0].device == "cuda" else None
        return _OnLanes(inner, visible)

    return make


def visible_devices(indices: Sequence[int]) -> str:
    """CUDA_VISIBLE_DEVICES for processes that are to see only these CUDA devices of this process: the
    entries of this process's own CUDA_VISIBLE_DEVICES at those indices, where it has one (a child reads
    its list against the machine's GPUs, not against the ones this process sees)."""
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not given:
        return ",".join(map(str, indices))
    entries = [entry.strip() for entry in given.split(",")]
    return ",".join(entries[i] for i in indices)


class _NoWorkers:
    """The inner executor of a group executor that only ever gets its own (multi-rank) tasks."""

    def prestart(self, keys: Any) -> None:
        pass

    def run(self, key: Any, task: Any, timeout_s: float, progress: Any = None) -> Any:
        raise AssertionError(f"{key} is not a multi-rank task")

    def retire(self, keys: Any) -> None:
        pass

    def close(self) -> None:
        pass


class _OnLanes:
    """An executor whose tasks' ranks see only the job's GPUs (``visible``; None: the CPU)."""

    def __init__(self, inner: Any, visible: str | None) -> None:
        self.inner, self.visible = inner, visible

    def prestart(self, keys: Any) -> None:
        self.inner.prestart(keys)

    def run(self, key: Any, task: Any, timeout_s: float, progress: Any = None) -> Any:
        if self.visible is not None:
            impl = task.spec.implementations[task.impl]
            env = {**dict(getattr(impl, "env", None) or {}), "CUDA_VISIBLE_DEVICES": self.visible}
            impls = {**task.spec.implementations, task.impl: impl.model_copy(update={"env": env})}
            task = replace(task, spec=task.spec.model_copy(update={"implementations": impls}))
        return self.inner.run(key, task, timeout_s, progress)

    def retire(self, keys: Any) -> None:
        self.inner.retire(keys)

    def close(self) -> None:
        self.inner.close()

    def abort(self) -> None:
        abort = getattr(self.inner, "abort", None)
        if abort is not None:
            abort()
