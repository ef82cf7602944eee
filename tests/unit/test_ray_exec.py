"""``run --executor ray`` on a local Ray cluster of two CPU nodes (two lanes), against local runs.

The lane plan is tested without Ray; everything else skips cleanly where Ray is not importable
(CI installs it: the ``test`` extra includes ``ray``).
"""

from pathlib import Path

import pytest
from click.testing import CliRunner

from solbench import api
from solbench.cli import main
from solbench.errors import ConfigError, DeviceError
from solbench.execute.ray_cluster import cpu_nodes, gpu_models, lane_plan
from solbench.results import store

DOUBLE = "tests/data/double.yaml"
HOSTILE = "tests/data/hostile/hostile.yaml"
SHIPPED = "workloads/bert.yaml"
FAST = dict(budget_s=0.05, min_samples=5, max_samples=20)


def _shape(run):
    """Everything but the numbers: cases in order, implementations, statuses."""
    return [(c.workload, c.case_id, r.name, r.status) for c in run.cases for r in c.impls]


def _messages(run):
    """Each result's status and message, for an assertion that fails (a status that differs says why)."""
    return "\n".join(f"{c.case_id} {r.name}: {r.status}: {r.message[:300]}" for c in run.cases for r in c.impls)


def test_gpus_are_counted_per_model_over_alive_nodes():
    nodes = [{"Alive": True, "Resources": {"GPU": 8.0, "accelerator_type:H200": 1.0, "CPU": 128.0}},
             {"Alive": True, "Resources": {"GPU": 4.0, "accelerator_type:H100": 1.0}},
             {"Alive": False, "Resources": {"GPU": 8.0, "accelerator_type:H200": 1.0}},
             {"Alive": True, "Resources": {"CPU": 64.0}},
             {"Alive": True, "Resources": {"GPU": 1.0}}]
    assert gpu_models(nodes) == {"H200": 8, "H100": 4, "": 1}


def test_the_lane_plan_takes_every_gpu_or_n_or_one_cpu_each():
    models = {"H200": 2, "H100": 1}
    assert lane_plan(models, ["n1"], "all") == [("cuda", "H100"), ("cuda", "H200"), ("cuda", "H200")]
    assert lane_plan(models, ["n1"], "2") == [("cuda", "H100"), ("cuda", "H200")]
    assert lane_plan({}, ["n1", "n2"], "") == [("cpu", "n1"), ("cpu", "n2")]
    assert lane_plan({}, [], "") == [("cpu", "")]
    with pytest.raises(DeviceError, match="has 3 GPUs"):
        lane_plan(models, ["n1"], "4")
    with pytest.raises(ConfigError):
        lane_plan(models, ["n1"], "0,1")


def test_a_cluster_without_gpus_gets_one_cpu_lane_per_node_not_per_core():
    """A node's CPU is one device: lanes on its cores would time side by side, each worker with torch
    threads on every core but one, and disturb each other's timings. So one lane per alive node."""
    nodes = [{"NodeID": "a", "Alive": True, "Resources": {"CPU": 64.0}},
             {"NodeID": "b", "Alive": True, "Resources": {"CPU": 8.0}},
             {"NodeID": "c", "Alive": False, "Resources": {"CPU": 8.0}},
             {"NodeID": "d", "Alive": True, "Resources": {"memory": 1.0}}]
    assert cpu_nodes(nodes) == ["a", "b"]
    assert lane_plan(gpu_models(nodes), cpu_nodes(nodes), "all") == [("cpu", "a"), ("cpu", "b")]
    with pytest.raises(DeviceError, match="has 2 CPU nodes"):
        lane_plan({}, ["a", "b"], "3")


def test_an_unreachable_address_is_one_line():
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("a Ray instance runs in this process: --address is not used")
    for address in ("127.0.0.1:1", "ray://127.0.0.1:1"):
        result = CliRunner().invoke(main, ["run", DOUBLE, "--executor", "ray", "--address", address])
        assert result.exit_code == 2 and "cannot connect to Ray" in result.output, result.output
        assert "Traceback" not in result.output
    result = CliRunner().invoke(main, ["run", DOUBLE, "--executor", "ray", "--address", "no port"])
    assert result.exit_code == 2 and "expected 'auto'" in result.output


@pytest.fixture(scope="module")
def ray_cpu():
    """A local Ray cluster of two CPU nodes of one CPU each: two lanes, one actor a node."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()
    cluster.shutdown()


@pytest.fixture(scope="module")
def double_runs(ray_cpu):
    options = api.RunOptions(**FAST)
    return api.run([DOUBLE], options, device="cpu"), api.run([DOUBLE], api.RunOptions(**FAST, executor="ray"))


def test_a_ray_run_has_the_shape_and_statuses_of_a_local_run(double_runs):
    local, remote = double_runs
    assert _shape(remote) == _shape(local), _messages(remote)
    assert remote.protocol.executor == "ray" and remote.protocol.devices == 2 and remote.complete
    assert all(c.device is not None and c.device.device_kind == "cpu" for c in remote.cases)
    for c in remote.cases:
        assert c.impl("baseline").timing.n >= 5 and c.impl("baseline").score.speedup == 1.0


def test_faults_through_ray_are_the_same_statuses(ray_cpu):
    options = api.RunOptions(**FAST, workloads=("faults",), timeout_s=3.0)  # the timeout starts once the worker is up
    local = api.run([HOSTILE], options, device="cpu")
    remote = api.run([HOSTILE], api.RunOptions(**FAST, workloads=("faults",), timeout_s=3.0, executor="ray"))
    assert _shape(remote) == _shape(local), _messages(remote)
    status = {r.name: r.status for c in remote.cases for r in c.impls}
    assert status["hangs"] == "timeout" and status["os_exit"] == "crashed" and status["segfault"] == "crashed"
    assert status["honest"] == "ok"


def test_a_shipped_workloads_cpu_profile_through_ray(ray_cpu):
    options = dict(**FAST, workloads=("residual_layernorm",))
    local = api.run([SHIPPED], api.RunOptions(**options), device="cpu")
    remote = api.run([SHIPPED], api.RunOptions(**options, executor="ray", repeat=2))
    assert _shape(remote) == _shape(local), _messages(remote)
    assert remote.protocol.rounds == 2
    assert all(c.impl("baseline").timing.n_rounds == 2 for c in remote.cases)


def test_the_cli_runs_on_ray_and_saves_one_run(ray_cpu, tmp_path):
    out = tmp_path / "ray.json"
    result = CliRunner().invoke(main, ["run", DOUBLE, "--executor", "ray", "-o", str(out), "--budget", "0.05",
                                       "--min-samples", "5", "--max-samples", "20"])
    assert result.exit_code == 4, result.output  # double.yaml has a wrong implementation
    run = store.load(out)
    assert run.protocol.executor == "ray" and len(run.cases) == 2



_KILLS = """
import os
import signal
from pathlib import Path

MARK = Path({mark!r})


def _actor_pid():
    # the topmost ancestor whose command line is the lane's Ray actor (a fork server forked from it
    # shows the same title)
    pid, found = os.getpid(), None
    while pid > 1:
        cmdline = Path(f"/proc/{{pid}}/cmdline").read_bytes()
        if b"_LaneActor" in cmdline:
            found = pid
        elif found is not None:
            return found
        pid = int(Path(f"/proc/{{pid}}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return found


def double_killing_its_actor_once(x):
    if not MARK.exists():
        MARK.write_text("killed")
        os.kill(_actor_pid(), signal.SIGKILL)
    return 2 * x
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="walks /proc to find its Ray actor")
def test_a_case_whose_actor_dies_is_measured_again_on_another_actor(ray_cpu, tmp_path):
    """An implementation kills the Ray actor measuring it (once): the driver loses that lane, measures
    the case again from its start on the other actor, and the run ends with every point ok and a note."""
    (tmp_path / "kills.py").write_text(_KILLS.format(mark=str(tmp_path / "killed")))
    text = Path(DOUBLE).read_text().split("    implementations:")[0].replace("{n: [64, 256]}", "{n: [64]}")
    text = text.replace("tests.unit.helpers:double", str(Path("tests/unit/helpers.py").absolute()) + ":double")
    (tmp_path / "w.yaml").write_text(text + "    implementations:\n      baseline: "
                                     + str(Path("tests/unit/helpers.py").absolute()) + ":double\n"
                                     "      kills: kills.py:double_killing_its_actor_once\n")
    run = api.run([str(tmp_path / "w.yaml")], api.RunOptions(**FAST, executor="ray"))
    assert (tmp_path / "killed").exists()
    assert [(r.name, r.status) for c in run.cases for r in c.impls] == [("baseline", "ok"), ("kills", "ok")], \
        _messages(run)
    lost = [n for n in run.notes if "was lost in the first round: the Ray actor of lane" in n]
    assert len(lost) == 1 and "(kills was being measured) is measured again" in lost[0]
    assert run.cases[0].device.device_index is not None or run.cases[0].device.device_kind == "cpu"


class _FakeRay:
    """Ray's ``get`` returning what an actor sent: no cluster needed to test what the driver accepts."""

    class exceptions:
        RayActorError = RuntimeError

    def __init__(self, sent):
        self.sent = sent

    def get(self, ref, timeout=None):
        return self.sent


class _FakeActor:
    class _Method:
        def remote(self, *args):
            return None

    open = run = _Method()


def test_the_driver_takes_a_result_only_as_checked_message_text():
    from solbench.execute.ray_cluster import RayLane
    from solbench.measure import wire
    from solbench.results.model import ImplResult

    class Task:
        impl = "impl"

    ok = ImplResult("impl", "skipped", "no GPU")
    assert RayLane(_FakeRay(wire.result_text(ok)), _FakeActor()).run(("w", "impl"), Task(), 1.0) == ok
    for sent in (ok, b"\x80\x04", '{"kind": "ready", "pid": 1}'):  # an object, a pickle, the wrong message
        got = RayLane(_FakeRay(sent), _FakeActor()).run(("w", "impl"), Task(), 1.0)
        assert got.status == "reward_hack" and "the Ray actor sent" in got.message


class _Lost(Exception):
    """What Ray raises for a call on an actor whose process or node is gone."""


class _LostRay:
    """Ray's ``get`` on an actor that died after ``alive`` calls (each ref is the method's name)."""

    class exceptions:
        RayActorError = _Lost

    def __init__(self, alive=0):
        self.alive = alive

    def get(self, ref, timeout=None):
        if self.alive > 0:
            self.alive -= 1
            return None
        raise _Lost(f"The actor died unexpectedly before finishing this task ({ref}).\n\tclass_name: _LaneActor\n\tpid: 1")


class _NamedActor:
    class _Method:
        def __init__(self, name):
            self.name = name

        def remote(self, *args):
            return self.name

    def __getattr__(self, name):
        return self._Method(name)


def test_a_lost_actor_is_a_lost_lane_in_one_line_whatever_was_asked_of_it():
    """Whatever the lane asks of an actor that died (the point it was measuring, workers for its next
    case, a retirement, a new round) raises LaneLost, a one-line DeviceError (exit 2 where the run
    cannot go on), not Ray's multi-line exception read as solbench's own failure (exit 5, a traceback).
    The sharded run moves the lane's work to the lanes left (tests/unit/test_shard.py)."""
    from solbench.errors import LaneLost
    from solbench.execute.ray_cluster import RayLane

    class Task:
        impl = "impl"

    lane = RayLane(_LostRay(alive=1), _NamedActor(), 3)  # opened, then lost
    for call in (lambda: lane.run(("w", "impl"), Task(), 1.0), lambda: lane.prestart([("w", "impl")]),
                 lambda: lane.retire([("w", "impl")]), lambda: RayLane(_LostRay(), _NamedActor(), 3)):
        with pytest.raises(LaneLost) as err:
            call()
        assert isinstance(err.value, DeviceError)
        assert "\n" not in str(err.value) and str(err.value).startswith("the Ray actor of lane 3 died (The actor")
    lane.close()
    lane.abort()  # a dead actor's workers died with it: nothing to raise
