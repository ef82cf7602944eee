"""Lanes on a Ray cluster: one actor per GPU, each driving solbench's own workers on its GPU.

An actor holds one GPU (``num_gpus=1``, placed by GPU model through Ray's ``accelerator_type:<model>``
resource) and, inside it, the same :class:`~solbench.measure.pool.Pool` of worker processes a
local run uses: the same Task, the same checks and timer, the same statuses (a crash or a
timeout kills the worker inside the actor and becomes ``crashed``/``timeout``). The driver
schedules cases over the actors exactly as over local GPUs (:mod:`solbench.execute.shard`) and
scores each case against the spec its actor detected. A cluster without GPUs (CI) gets one CPU
actor per node, held there: a node's CPU is one device, and two lanes timing on its cores at once
(each worker with torch threads on every core but one) would disturb each other's timings::

    connect(address)                       ray.init(address) unless Ray is already initialised
    lanes(cluster, files, options)         an actor per GPU (or CPU node); each detects its device
    RayLane(actor)                         the Executor protocol over ray.get(actor.method.remote())

Every node needs solbench (and the implementations' packages) installed, and the workload files
at the same path as on the driver (a shared file system, as on a Slurm cluster).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from solbench.errors import ConfigError, DeviceError, LaneLost
from solbench.results.model import ImplResult

ABORT_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 10.0


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError("--executor ray needs Ray: pip install 'solbench[ray]'") from None
    return ray


@dataclass
class Cluster:
    """The Ray connection of one run; ``close`` shuts down only what this run started."""

    ray: Any
    started: bool
    actors: list[Any]

    def close(self) -> None:
        for actor in self.actors:
            with contextlib.suppress(Exception):
                self.ray.kill(actor)
        self.actors.clear()
        if self.started:
            self.ray.shutdown()


def connect(address: str | None) -> Cluster:
    """Join the cluster at ``address`` ("auto", "ray://host:10001"), or the Ray instance this process
    already initialised, or start a local one (None)."""
    ray = _ray()
    if ray.is_initialized():
        return Cluster(ray, False, [])
    if address not in (None, "auto", "local"):
        _check_reachable(address)
    try:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    except Exception as exc:  # ConnectionError, ValueError, RuntimeError: all mean "no cluster there"
        raise DeviceError(f"--address {address or '(local)'}: cannot connect to Ray: "
                          f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    return Cluster(ray, True, [])


def _check_reachable(address: str) -> None:
    """A quick TCP connect to ``host:port`` (``ray://host:port``): Ray itself retries for minutes."""
    m = re.fullmatch(r"(?:ray://)?\[?([^\]\s]+?)\]?:(\d+)", address.strip())
    if m is None:
        raise ConfigError(f"--address {address!r}: expected 'auto', 'host:port' or 'ray://host:10001'")
    try:
        socket.create_connection((m.group(1), int(m.group(2))), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise DeviceError(f"--address {address}: cannot connect to Ray: {exc.strerror or exc}") from None


def gpu_models(nodes: Iterable[dict[str, Any]]) -> dict[str, int]:
    """GPUs per model over the alive nodes of ``ray.nodes()`` (model from ``accelerator_type:<model>``;
    "" where a node reports GPUs without a model)."""
    out: dict[str, int] = {}
    for node in nodes:
        if not node.get("Alive", True):
            continue
        res = node.get("Resources", {})
        gpus = int(res.get("GPU", 0))
        if gpus < 1:
            continue
        model = next((k.split(":", 1)[1] for k in res if k.startswith("accelerator_type:")), "")
        out[model] = out.get(model, 0) + gpus
    return out


def cpu_nodes(nodes: Iterable[dict[str, Any]]) -> list[str]:
    """The ``NodeID`` of every alive node of ``ray.nodes()`` that has CPUs, in the order listed."""
    return [str(node["NodeID"]) for node in nodes
            if node.get("Alive", True) and node.get("Resources", {}).get("CPU", 0) >= 1 and "NodeID" in node]


def lane_plan(models: dict[str, int], cpu_nodes: Sequence[str], devices: str) -> list[tuple[str, str]]:
    """(device kind, GPU model or CPU node) of each actor to start: every GPU (``devices`` "all" or
    ""), or the first N; without GPUs, one CPU actor per node (module docstring; "" where no node is
    known: anywhere, one actor)."""
    if models:
        plan = [("cuda", model) for model, count in sorted(models.items()) for _ in range(count)]
    else:
        plan = [("cpu", node) for node in cpu_nodes] or [("cpu", "")]
    text = devices.strip().lower()
    if text in ("", "all"):
        return plan
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"--devices {devices!r} with --executor ray: expected 'all' or how many devices")
    if int(text) > len(plan):
        raise DeviceError(f"--devices {text}: the Ray cluster has {len(plan)} "
                          f"{'GPUs' if models else 'CPU nodes (and no GPU)'}")
    return plan[: int(text)]


def lanes(cluster: Cluster, files: Sequence[str | Path], options: Any) -> tuple[list[Any], list[Any]]:
    """Start one actor per device of the cluster; returns (lanes, [(DeviceInfo, Prepared)]) in lane order."""
    from solbench.execute.shard import Lane
    from solbench.plan.prepare import prepare

    ray = cluster.ray
    nodes = ray.nodes()
    plan = lane_plan(gpu_models(nodes), cpu_nodes(nodes), options.devices)
    remote = ray.remote(_LaneActor)
    for kind, where in plan:
        opts: dict[str, Any] = {"num_gpus": 1, "num_cpus": 1} if kind == "cuda" else {"num_cpus": 1}
        if kind == "cuda" and where:
            opts["resources"] = {f"accelerator_type:{where}": 0.001}
        if kind == "cpu" and where:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(where, soft=False)
        cluster.actors.append(remote.options(max_concurrency=4, **opts).remote(kind, os.getcwd()))
    described = ray.get([actor.describe.remote(options.peaks, str(options.results_dir)) for actor in cluster.actors])
    out, prepared = [], []
    for n, (actor, (info, floor, nvml_id)) in enumerate(zip(cluster.actors, described, strict=True)):
        prep = prepare(files, options, info, floor)
        env = replace(info.environment(), device_index=info.index)
        out.append(Lane(n, info.kind, _lane_factory(ray, actor, n), prep.score, env, info.l2_bytes, nvml_id))
        prepared.append((info, prep))
    return out, prepared


def _lane_factory(ray: Any, actor: Any, lane: int) -> Any:
    return lambda: RayLane(ray, actor, lane)


class RayLane:
    """The Executor protocol over one actor: fresh workers in it for each round.

    A lost actor (its node or process gone) raises :class:`~solbench.errors.LaneLost` from whatever
    was asked of it (a point being measured, workers for the next case, a retirement, a new round):
    no worker can run there any more, and :mod:`solbench.execute.shard` moves the lane's cases to the
    lanes left (or stops the run in one line where none is left)."""

    def __init__(self, ray: Any, actor: Any, lane: int | None = None) -> None:
        self.ray, self.actor, self.lane = ray, actor, lane
        self._get(actor.open)

    def _get(self, method: Any, *args: Any) -> Any:
        try:
            return self.ray.get(method.remote(*args))
        except self.ray.exceptions.RayActorError as exc:
            raise self._lost(exc) from None

    def _lost(self, exc: BaseException) -> LaneLost:
        which = "" if self.lane is None else f" of lane {self.lane}"
        return LaneLost(f"the Ray actor{which} died ({_first_line(exc)})")

    def prestart(self, keys: Iterable[tuple[str, str]]) -> None:
        self._get(self.actor.prestart, list(keys))

    def run(self, key: tuple[str, str], task: Any, timeout_s: float, progress: Any = None) -> ImplResult:
        from solbench.measure import wire

        try:
            text = self.ray.get(self.actor.run.remote(key, task, timeout_s))
        except self.ray.exceptions.RayActorError as exc:
            raise self._lost(exc) from None
        try:
            return wire.result_from_text(text)
        except wire.BadMessage as exc:
            return ImplResult(task.impl, "reward_hack", f"the Ray actor sent {exc}")

    def retire(self, keys: Iterable[tuple[str, str]]) -> None:
        self._get(self.actor.retire, list(keys))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ray.get(self.actor.close.remote())

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self.ray.get(self.actor.abort.remote(), timeout=ABORT_TIMEOUT_S)


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


class _LaneActor:
    """Runs in a Ray worker process holding one GPU (Ray sets CUDA_VISIBLE_DEVICES: it is cuda:0)."""

    def __init__(self, kind: str, cwd: str) -> None:
        with contextlib.suppress(OSError):
            os.chdir(cwd)  # relative workload paths resolve as on the driver
        self.kind = kind
        self.pool: Any = None

    def describe(self, peaks: str, results_dir: str) -> tuple[Any, Any, str | None]:
        """This actor's device, the spec to score against (measured ceilings with ``peaks``), the
        INVALID floor's spec, and the UUID workers read clocks by."""
        from solbench.device import nvml
        from solbench.device.detect import detect
        from solbench.plan.device import with_peaks

        info, floor = with_peaks(detect("cuda:0" if self.kind == "cuda" else "cpu"), peaks, Path(results_dir))
        nvml_id = info.uuid if info.kind == "cuda" and info.uuid and nvml.nvml_available() else None
        return info, floor, nvml_id

    def open(self) -> None:
        from solbench.measure.pool import Pool

        self.close()
        self.pool = Pool(self.kind, 0 if self.kind == "cuda" else None)

    def prestart(self, keys: list[tuple[str, str]]) -> None:
        self.pool.prestart(keys)

    def run(self, key: tuple[str, str], task: Any, timeout_s: float) -> str:
        """The result as message text (:func:`solbench.measure.wire.result_text`): data, not an object."""
        from solbench.measure import wire

        if self.pool is None:
            raise DeviceError("lane not opened")
        return wire.result_text(self.pool.run(key, task, timeout_s))

    def retire(self, keys: list[tuple[str, str]]) -> None:
        self.pool.retire(keys)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None

    def abort(self) -> None:
        if self.pool is not None:
            self.pool.abort()
