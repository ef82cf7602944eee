"""``run --devices``: the sharded run end to end with real worker processes, on two CPU "devices"
(the lanes are given as detected CPUs; nothing here depends on speed), and its CLI errors."""

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from click.testing import CliRunner

from solbench import api
from solbench.cli import main
from solbench.device.detect import detect
from solbench.errors import ConfigError, DeviceError
from solbench.execute.lanes import parse_devices, run_sharded
from solbench.results import store

DOUBLE = "tests/data/double.yaml"
OPTIONS = api.RunOptions(budget_s=0.05, min_samples=5, max_samples=20, results_dir=Path("tests/data/no-results"),
                         repeat=1)  # one round: these tests are about the lanes, not the rounds
FAST = ["--budget", "0.05", "--min-samples", "5", "--max-samples", "20"]


def _statuses(run):
    return [(c.case_id, r.name, r.status) for c in run.cases for r in c.impls]


@pytest.fixture(scope="module")
def two_cpus():
    cpu = detect("cpu")
    return [replace(cpu, index=0), replace(cpu, index=1)]


@pytest.fixture(scope="module")
def two_workloads(tmp_path_factory):
    """double.yaml's workload twice (one case each): one per lane."""
    text = Path(DOUBLE).read_text().replace("{n: [64, 256]}", "{n: [64]}")
    body = text[text.index("  - name: double"):]
    path = tmp_path_factory.mktemp("two") / "two.yaml"
    path.write_text("workloads:\n" + body + body.replace("name: double", "name: double_b"))
    return str(path)


@pytest.fixture(scope="module")
def runs(two_cpus, two_workloads):
    local = api.run([two_workloads], OPTIONS, device="cpu")
    saved = []
    sharded = run_sharded([two_workloads], OPTIONS, infos=two_cpus, on_case=saved.append)
    return local, sharded, saved


def test_a_sharded_run_has_the_shape_and_statuses_of_a_local_run(runs):
    local, sharded, _ = runs
    assert _statuses(sharded) == _statuses(local)  # same cases, order, implementations and statuses
    assert {s for *_, s in _statuses(sharded)} == {"ok", "incorrect", "skipped"}
    assert sharded.complete and sharded.protocol.devices == 2 and sharded.protocol.executor == "local"
    assert local.protocol.devices == 1 and all(c.device is None for c in local.cases)
    for c in sharded.cases:
        base = c.impl("baseline")
        assert base.timing.n >= 5 and base.score.speedup == 1.0


def test_each_case_records_the_device_it_ran_on(runs):
    _, sharded, saved = runs
    assert {c.device.device_index for c in sharded.cases} == {0, 1}  # two workloads, two free lanes
    assert all(c.device.spec_id == sharded.spec.id for c in sharded.cases)
    assert len(saved) == 2 and len(saved[0].cases) == 1  # saved after every case
    assert any("sharded over 2 devices" in n for n in sharded.notes)


def test_the_device_record_survives_the_result_file_and_old_files_still_load(runs, tmp_path):
    _, sharded, _ = runs
    path = store.save(sharded, tmp_path / "sharded.json")
    back = store.load(path)
    assert store.to_dict(back) == store.to_dict(sharded)
    assert [c.device for c in back.cases] == [c.device for c in sharded.cases]
    data = json.loads(store.dumps(sharded))
    for case in data["cases"]:
        del case["device"]
    del data["protocol"]["devices"], data["protocol"]["executor"]
    old = store.from_dict(data)
    assert all(c.device is None for c in old.cases) and old.protocol.devices == 1


def test_repeat_works_with_devices(two_cpus):
    run = run_sharded([DOUBLE], replace(OPTIONS, repeat=2, impls=("baseline",)), infos=two_cpus)
    assert run.protocol.rounds == 2
    for c in run.cases:
        assert c.impl("baseline").timing.n_rounds == 2


def test_in_process_cannot_shard(two_cpus):
    with pytest.raises(ConfigError, match="in-process"):
        run_sharded([DOUBLE], replace(OPTIONS, in_process=True), infos=two_cpus)


def test_device_lists_are_parsed_and_checked():
    assert parse_devices("all", 3) == (0, 1, 2)
    assert parse_devices(" 2, 0 ", 3) == (2, 0)
    for bad, err in (("0,0", ConfigError), ("zero", ConfigError), ("", ConfigError), ("3", DeviceError)):
        with pytest.raises(err):
            parse_devices(bad, 3)
    with pytest.raises(DeviceError):
        parse_devices("all", 0)


@pytest.mark.parametrize("visible,indices,expected", [(None, (0, 1), "0,1"), ("2,3", (0, 1), "2,3"),
                                                     ("GPU-aa, GPU-bb,GPU-cc", (2, 0), "GPU-cc,GPU-aa")])
def test_a_multi_rank_groups_gpus_are_named_as_its_ranks_will_read_them(monkeypatch, visible, indices, expected):
    """The ranks inherit this process's CUDA_VISIBLE_DEVICES and read theirs against the machine's GPUs:
    lanes 0 and 1 under CUDA_VISIBLE_DEVICES=2,3 are GPUs 2 and 3, not 0 and 1."""
    from solbench.execute import lanes as lanes_module

    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    lanes = [SimpleNamespace(index=i, device="cuda") for i in indices]
    unit = SimpleNamespace(spec=SimpleNamespace(name="allreduce", world_size=2))
    assert lanes_module._group_executor("local")(lanes, unit).visible == expected


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error without a GPU")
def test_devices_without_a_gpu_is_a_clear_error():
    result = CliRunner().invoke(main, ["run", DOUBLE, "--devices", "all", *FAST])
    assert result.exit_code == 2
    assert "--devices needs CUDA GPUs" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("args,text", [
    (["--device", "cpu", "--devices", "0"], "--devices"),
    (["--address", "auto"], "--executor ray"),
])
def test_conflicting_options_are_usage_errors(args, text):
    result = CliRunner().invoke(main, ["run", DOUBLE, *args, *FAST])
    assert result.exit_code == 2 and text in result.output


def test_the_schedule_uses_the_times_of_an_earlier_run(runs, two_workloads, two_cpus, tmp_path):
    local, _, _ = runs
    path = store.save(local, tmp_path / "earlier.json")
    run = run_sharded([two_workloads], replace(OPTIONS, schedule_from=path), infos=two_cpus)
    assert f"estimated from the per-task times of {path}" in run.notes[-1]
    fresh = run_sharded([two_workloads], replace(OPTIONS, results_dir=tmp_path / "none"), infos=two_cpus)
    assert "T_SOL x implementations" in fresh.notes[-1]
    other = store.save(replace(local, cases=()), tmp_path / "empty.json")
    with pytest.raises(ConfigError, match="timed none of these cases"):
        run_sharded([two_workloads], replace(OPTIONS, schedule_from=other), infos=two_cpus)


def test_history_estimates_are_case_times_and_the_first_call_spike():
    from solbench.execute.session import Unit
    from solbench.execute.shard import history_estimates
    from tests.unit.factories import make_run

    run = make_run({"c0": {"x": [1.0]}, "c1": {"x": [1.0]}, "c2": {"x": [1.0]}})
    secs = {"c0": 30.0, "c1": 3.0, "c2": 2.0}
    run = replace(run, cases=tuple(replace(c, impls=tuple(replace(r, protocol={"task_s": secs[c.case_id]})
                                                          for r in c.impls)) for c in run.cases))
    cases = tuple(SimpleNamespace(id=i) for i in ("c0", "c1", "c2", "c9"))
    unit = Unit(SimpleNamespace(name="demo"), Path("w.yaml"), cases, ("x",))
    times, cold = history_estimates([unit], run)
    assert times == {("demo", "c0"): 30.0, ("demo", "c1"): 3.0, ("demo", "c2"): 2.0}
    assert cold == {0: 27.0}  # slowest minus median


def test_ctrl_c_during_a_hanging_case_kills_its_worker_and_keeps_what_was_measured(tmp_path, two_cpus, sigint_raises_keyboard_interrupt):
    import _thread
    import threading

    from solbench.errors import RunInterrupted

    src = tmp_path / "slow.py"
    src.write_text("def ref(x):\n    return x * 2\n\n"
                   "def hang(x):\n    while True:\n        pass\n")
    body = ("    dtypes: [float32]\n    inputs: {x: {shape: [n]}}\n    outputs: {y: {shape: [n]}}\n"
            "    ops: [{op: mul, numel: n, inputs: 1}]\n    reference: slow.py:ref\n")
    wl = tmp_path / "slow.yaml"  # the larger case (longest estimate) first; then one that never returns
    wl.write_text("workloads:\n  - name: fine\n    parameters: {n: [4096]}\n" + body
                  + "    implementations: {baseline: slow.py:ref}\n"
                  + "  - name: hangs\n    parameters: {n: [64]}\n" + body
                  + "    implementations: {baseline: slow.py:hang}\n")
    saved = []

    def on_case(run):
        saved.append(run)
        threading.Timer(0.5, _thread.interrupt_main).start()  # Ctrl-C while (or before) the hang

    # the timeout only bounds the test should Ctrl-C fail to stop the lane (then it fails)
    with pytest.raises(RunInterrupted) as stop:
        run_sharded([str(wl)], replace(OPTIONS, timeout_s=120.0), infos=two_cpus, on_case=on_case)
    run = stop.value.result
    assert not run.complete and [c.case_id for c in run.cases] == ["fine[n=4096,float32]"]
    assert len(saved) == 1
    # the hanging worker was killed: its lane's thread has ended (it would wait out the timeout)
    assert not [t for t in threading.enumerate() if t.name.startswith("solbench-lane-")]


def test_multi_rank_workloads_run_as_groups_over_the_lanes(two_cpus):
    """Active once solbench.execute.group (multi-rank workloads) is in the tree: a world_size 2
    workload over two CPU lanes has the statuses of a local run (gloo ranks)."""
    group = pytest.importorskip("solbench.execute.group")
    if not hasattr(group, "GroupExecutor") or not Path("workloads/collectives.yaml").exists():
        pytest.skip("no multi-rank workloads in this tree")
    planned = api.plan(["workloads/collectives.yaml"], "cpu")
    wide = [p.spec.name for p in planned if getattr(p.spec, "world_size", 1) > 1]
    if not wide:
        pytest.skip("no multi-rank workload")
    spec = next(p.spec for p in planned if p.spec.name == wide[0])
    options = replace(OPTIONS, workloads=(spec.name,), impls=(spec.baseline,), timeout_s=300.0)
    local = api.run(["workloads/collectives.yaml"], options, device="cpu")
    sharded = run_sharded(["workloads/collectives.yaml"], options, infos=two_cpus)
    assert _statuses(sharded) == _statuses(local)
    assert any(s == "ok" for *_, s in _statuses(sharded))


def test_run_gate_against_re_measures_a_sharded_run_over_its_devices(monkeypatch, two_cpus):
    """``run --devices ... --gate-against``: the gate's re-measurement of the undecided cases runs
    over the same devices; it was refused as if the user had asked for ``--max-rounds`` (exit 2,
    no verdict), because it capped its rounds with max_rounds, which several devices refuse."""
    import solbench.analysis.gate as gate
    import solbench.execute.lanes as lanes
    from solbench.execute.run import gate_live

    monkeypatch.setattr(lanes, "_local_devices", lambda text: two_cpus)  # run() finds the two "GPUs"
    monkeypatch.setattr(gate, "cases_to_rerun", lambda result: [v.key for v in result.verdicts])  # all undecided
    options = replace(OPTIONS, devices="0,1", impls=("baseline",))
    base = api.run([DOUBLE], options)
    cur = api.run([DOUBLE], options)
    assert cur.protocol.devices == 2
    verdict = gate_live(base, cur, [DOUBLE], options, rerun=1, threshold=0.05)
    assert verdict.reruns == 1
    assert all(v.rounds_cur == 2 for v in verdict.verdicts)


def test_a_baseline_from_other_software_is_refused_before_a_sharded_run_measures(monkeypatch, two_cpus, runs):
    """``run --devices/--executor ray --gate-against``: as on one device, a baseline measured with
    other software is refused before any case is measured (it was measured in full, then refused).
    Each case of a sharded run records its own device, so the device itself is compared case by
    case afterwards, not against the first lane before."""
    import functools

    import solbench.execute.lanes as lanes
    from solbench.analysis.gate import GateRefused, same_hardware

    monkeypatch.setattr(lanes, "_local_devices", lambda text: two_cpus)
    local, _, _ = runs
    options = replace(OPTIONS, devices="0,1", impls=("baseline",), workloads=("double",))
    measured = []
    other = replace(local, environment=replace(local.environment, torch="1.13.1"))
    with pytest.raises(GateRefused, match="torch major"):
        api.run([DOUBLE], options, on_case=measured.append,
                before_measuring=functools.partial(same_hardware, other, allow_cross_hardware=None))
    assert measured == []
    seen = []
    another_gpu = replace(local, environment=replace(local.environment, device_name="another CPU", spec_id="x"))
    run = api.run([DOUBLE], options, before_measuring=lambda planned: seen.append(
        same_hardware(another_gpu, planned, allow_cross_hardware=None)))
    assert seen == [[]] and run.cases


def test_the_schedule_finds_the_newest_saved_run_kept_as_json_gz(runs, tmp_path):
    """--schedule-from's default (the newest saved run of this GPU) read only .json files; the store's
    own lookup (find, latest) reads runs compressed as .json.gz as well."""
    import gzip

    from solbench.execute.lanes import _history

    local, _, _ = runs
    saved = store.save(local, tmp_path / store.slug(local.spec.id) / "earlier.json")
    packed = saved.with_name("earlier.json.gz")
    packed.write_bytes(gzip.compress(saved.read_bytes()))
    saved.unlink()
    wanted = {(c.workload, c.case_id) for c in local.cases}
    found = _history(replace(OPTIONS, results_dir=tmp_path), local.spec.id, wanted)
    assert found is not None and found[0] == packed


def test_the_gate_adds_a_cases_rounds_on_the_device_that_measured_its_first(monkeypatch, two_cpus, two_workloads):
    """``run --devices ... --gate-against``: a case's added rounds were measured on whichever lane was
    free (here lane 0: the only case re-measured, double_b's, had been measured on lane 1) and pooled
    with its first rounds, which still named lane 1; they now run on the device of its first rounds."""
    import solbench.analysis.gate as gate
    import solbench.execute.lanes as lanes
    from solbench.execute.run import gate_live

    monkeypatch.setattr(lanes, "_local_devices", lambda text: two_cpus)
    options = replace(OPTIONS, devices="0,1", impls=("baseline",))
    cur = api.run([two_workloads], options)
    first = {c.workload: c.device.device_index for c in cur.cases}
    assert first == {"double": 0, "double_b": 1}
    wanted = [f"{c.case_id}/baseline" for c in cur.cases if c.workload == "double_b"]
    monkeypatch.setattr(gate, "cases_to_rerun", lambda result: wanted)
    fresh = []
    merge = gate.merge_samples
    monkeypatch.setattr(gate, "merge_samples", lambda cur, new, keys: fresh.append(new) or merge(cur, new, keys))
    verdict = gate_live(cur, cur, [two_workloads], options, rerun=2, threshold=0.05)
    assert verdict.reruns == 2 and len(fresh) == 2
    for again in fresh:
        assert [(c.workload, c.device.device_index) for c in again.cases] == [("double_b", 1)]
