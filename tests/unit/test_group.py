"""Multi-rank workloads end to end on the CPU: 2 gloo processes per implementation.

The shipped collectives (workloads/collectives.yaml) are measured and their bandwidths checked
against their own times and bytes; faults on one rank (tests/data/ranks/) become statuses. Nothing
here depends on how fast the machine is.
"""

import contextlib
import math
import multiprocessing
import struct
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest
import torch
from click.testing import CliRunner

from solbench.cli import main
from solbench.execute import group as group_module
from solbench.execute.group import Group, _Rank
from solbench.measure import wire
from solbench.results import store
from solbench.results.model import ImplResult

FAST = ["--budget", "0.05", "--min-samples", "5", "--max-samples", "20", "--device", "cpu"]


@pytest.fixture(scope="module")
def collectives(tmp_path_factory):
    out = tmp_path_factory.mktemp("collectives") / "run.json"
    result = CliRunner().invoke(main, ["run", "workloads/collectives.yaml", "-o", str(out), "-q", *FAST])
    return result, store.load(out)


def _impls(run, workload):
    return [(c, r) for c in run.cases if c.workload == workload for r in c.impls]


def test_allreduce_runs_on_two_gloo_ranks_with_busbw_from_its_time_and_bytes(collectives):
    result, run = collectives
    assert result.exit_code == 0, result.output
    measured = 0
    for case, r in _impls(run, "allreduce"):
        size = case.params["mib"] * 2**20  # bf16 buffer of mib MiB per rank
        assert case.cost.collective_bytes == size
        assert case.cost.bus_bytes == size * 2 * (2 - 1) / 2  # nccl-tests: S x 2(n-1)/n, n = 2
        if r.name in ("ring_simple", "ring_ll128"):
            assert r.status == "skipped" and r.message.startswith("needs NCCL")
            continue
        assert r.status == "ok", (r.name, r.message)
        assert r.correctness.passed
        assert r.protocol["world_size"] == 2 and r.protocol["backend"] == "gloo"
        assert r.protocol["rank_time"] == "max over ranks"
        t = r.timing.median
        assert math.isclose(r.score.algbw, size / t, rel_tol=1e-12)
        assert math.isclose(r.score.busbw, case.cost.bus_bytes / t, rel_tol=1e-12)
        assert case.bound == "link" and math.isclose(case.t_sol, case.cost.bus_bytes / case.peaks.link_bandwidth)
        assert math.isclose(r.score.sol, case.t_sol / t)
        measured += 1
    assert measured == 4  # baseline and rs_ag, two sizes


def test_overlap_efficiency_comes_from_the_parts_medians(collectives):
    _, run = collectives
    rows = _impls(run, "gemm_allreduce")
    assert rows
    by_name = {r.name: r for _, r in rows}
    compute, comm = by_name["compute"], by_name["comm"]
    for part, which in ((compute, "compute"), (comm, "comm")):
        assert part.status == "ok" and part.protocol["part"] == which
        assert part.score is None and part.correctness is None and part.timing.n >= 5
    tc, tm = compute.timing.median, comm.timing.median
    for name in ("sequential", "overlapped"):
        r = by_name[name]
        assert r.status == "ok" and r.correctness.passed
        t = r.timing.median
        assert math.isclose(r.score.overlap, (tc + tm - t) / min(tc, tm), rel_tol=1e-12)
        assert r.score.busbw is not None


def test_the_table_shows_bandwidths_overlap_and_parts(collectives):
    _, run = collectives
    from solbench.report.console import run_tables
    from solbench.report.markdown import run_markdown

    tables = {t.title.plain: [c.header for c in t.columns] for t in run_tables(run)}
    assert tables["allreduce"][-2:] == ["algbw", "busbw"]
    assert tables["gemm_allreduce"][-3:] == ["algbw", "busbw", "overlap"]
    md = run_markdown(run)
    rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in md.splitlines() if line.startswith("| m=")]
    parts = [row for row in rows if row[1] in ("compute", "comm")]
    assert len(parts) == 2 and all(row[5] == "part" for row in parts)  # the SOL column


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    out = tmp_path_factory.mktemp("rank_faults") / "run.json"
    # the timeout starts once every rank is up (gloo set-up is inside it): 4 s bounds the hanging rank
    result = CliRunner().invoke(main, ["run", "tests/data/ranks/ranks.yaml", "-w", "rank_faults", "--timeout", "4",
                                       "-o", str(out), "--repeat", "1", *FAST])
    return result, store.load(out)


def test_a_fault_on_one_rank_is_a_status_and_the_run_goes_on(faults):
    result, run = faults
    assert result.exit_code == 4, result.output
    status = {r.name: (r.status, r.message) for c in run.cases for r in c.impls}
    assert status["raises_on_rank1"][0] == "error"
    assert status["raises_on_rank1"][1].startswith("rank 1: RuntimeError: rank 1 is broken")
    assert status["exits_on_rank1"][0] == "crashed"
    assert status["exits_on_rank1"][1].startswith("rank 1:") and "code 3" in status["exits_on_rank1"][1]
    assert status["hangs_on_rank0"][0] == "timeout" and "group was killed" in status["hangs_on_rank0"][1]
    assert "rank 0: correctness calls" in status["hangs_on_rank0"][1]  # where each rank was when killed
    assert status["wrong_on_rank1"][0] == "incorrect" and status["wrong_on_rank1"][1].startswith("rank 1: ")
    assert status["returns_its_input"][0] == "reward_hack" and "shares storage" in status["returns_its_input"][1]
    assert status["local_sum_only"][0] == "incorrect"
    patched = status["patches_comparison_while_timed_on_rank1"]  # taken off after timing, before the task's end
    assert patched[0] == "reward_hack" and patched[1].startswith("rank 1: "), patched
    assert "solbench.measure.tensors.compare" in patched[1] and "after timing" in patched[1], patched
    # the sum computed in set-up: the ranks make the timed call again on new values in x, set-up not run again
    in_setup = status["reduces_in_setup"]
    assert in_setup[0] == "reward_hack" and "right on the inputs it was timed on, wrong on new values in x" in \
        in_setup[1], in_setup
    for name in ("baseline", "honest"):  # before and after the faults
        assert status[name][0] == "ok", status[name]
    assert run.complete


def test_a_rank_that_sends_half_a_message_times_out_and_the_run_goes_on(tmp_path):
    # rank 1 writes a length header and one byte of its message, then sleeps: the parent read a message
    # whole once its first bytes were there, with no deadline, and waited for the rest forever
    out = tmp_path / "run.json"
    proc = subprocess.run([sys.executable, "-m", "solbench", "run", "tests/data/ranks/ranks.yaml", "-w", "rank_stallers",
                           "--timeout", "4", "-o", str(out), "-q", "--repeat", "1",
                           "--results-dir", str(tmp_path / "r"), *FAST],
                          capture_output=True, text=True, timeout=300)  # a hang, not slowness, is what this catches
    assert proc.returncode == 4, proc.stderr[-2000:]
    status = {r.name: (r.status, r.message) for c in store.load(out).cases for r in c.impls}
    stalled = status["sends_half_a_message_on_rank1"]
    assert stalled[0] == "timeout" and "no result from every rank within 4 s" in stalled[1], stalled
    assert status["baseline"][0] == "ok" and status["honest"][0] == "ok"


def test_each_rank_draws_its_own_inputs_and_the_reference_sees_them_all():
    from solbench.config.workloads import load_workload_file
    from solbench.measure.rank import RANK_SEED_STRIDE, prepare_rank
    from solbench.measure.tensors import make_inputs
    from solbench.workload.cases import expand

    spec = next(s for s in load_workload_file("workloads/collectives.yaml") if s.name == "allreduce")
    case = expand(spec, "cpu")[0]
    r0 = prepare_rank(spec, case, "cpu", None, input_sets=2, seed=7, rank=0, world=2)
    r1 = prepare_rank(spec, case, "cpu", None, input_sets=2, seed=7, rank=1, world=2)
    for k in range(2):
        x0, x1 = r0.sets[k]["x"], r1.sets[k]["x"]
        assert torch.equal(x0, make_inputs(case, "cpu", 7 + k)["x"])
        assert torch.equal(x1, make_inputs(case, "cpu", 7 + k + RANK_SEED_STRIDE)["x"])
        assert not torch.equal(x0, x1)
        expected = x0.float() + x1.float()
        assert torch.equal(r0.references[k][0], expected) and torch.equal(r1.references[k][0], expected)
    assert not torch.equal(r0.sets[0]["x"], r0.sets[1]["x"])


def test_a_ranks_kept_inputs_are_every_ranks_as_set_up_saw_them_and_the_reference_sees_them_all():
    """The check after timing keeps the fixed weight as set-up saw it and draws new x: on each rank its own
    weight (the very tensor) and, for the reference, each peer's drawn again from the first set's seed."""
    from solbench.config.workloads import load_workload_file
    from solbench.measure.rank import prepare_rank
    from solbench.workload.cases import expand

    spec = next(s for s in load_workload_file("workloads/collectives.yaml") if s.name == "gemm_allreduce")
    case = expand(spec, "cpu")[0]
    first = [prepare_rank(spec, case, "cpu", None, input_sets=1, seed=7, rank=r, world=2) for r in range(2)]
    fresh = [prepare_rank(spec, case, "cpu", None, input_sets=1, seed=90, rank=r, world=2,
                          keep={"w": first[r].sets[0]["w"]}, kept_seed=7) for r in range(2)]
    for r in range(2):
        assert fresh[r].sets[0]["w"] is first[r].sets[0]["w"]
        assert not torch.equal(fresh[r].sets[0]["x"], first[r].sets[0]["x"])
    expected = sum(fresh[r].sets[0]["x"].double() @ first[r].sets[0]["w"].double() for r in range(2))
    for r in range(2):
        assert torch.allclose(fresh[r].references[0][0].double(), expected, rtol=1e-5, atol=1e-5)


def test_single_process_runs_keep_their_executor_and_too_few_gpus_is_a_skip(monkeypatch):
    from types import SimpleNamespace

    from solbench.execute import group

    inner = object()
    single = SimpleNamespace(spec=SimpleNamespace(name="o_proj", world_size=1))
    assert group.with_groups(inner, [single], "cuda") is inner
    multi = SimpleNamespace(spec=SimpleNamespace(name="allreduce", world_size=2))
    wrapped = group.with_groups(inner, [single, multi], "cuda")
    assert isinstance(wrapped, group.GroupExecutor) and wrapped.ranks == {"allreduce": 2}
    assert group.missing_gpus("cpu", 2) is None
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert group.missing_gpus("cuda", 2) == "needs 2 GPUs (one per rank), this machine has 1"


def test_ranks_that_do_not_start_in_time_are_a_start_up_timeout_not_a_crash(monkeypatch):
    # TimeoutError is an OSError: caught as one, ranks that missed the start-up limit read "crashed"
    import os
    from types import SimpleNamespace

    from solbench.execute.group import Group

    g = Group(2, "cpu", dict(os.environ))

    def late() -> None:
        raise TimeoutError

    for r in g.ranks:
        monkeypatch.setattr(r, "_wait_ready", late)
    try:
        result, fatal = g.run(SimpleNamespace(impl="allreduce"), 10.0)  # refused before the task is sent
    finally:
        g.kill()
    assert fatal and result.status == "timeout"
    assert "did not start within" in result.message


TASK = SimpleNamespace(impl="impl", settings=SimpleNamespace(min_samples=1, max_samples=10))


def _piped_group(tmp_path, world=2):
    """A rank group's parent side with no processes (ranks alive until killed): the group, and its ranks'
    ends of their pipes."""
    group = object.__new__(Group)
    group.ranks, ends = [], []
    for r in range(world):
        rank = object.__new__(_Rank)
        rank._conn, end = multiprocessing.Pipe()
        rank._frames = wire.Frames(rank._conn)
        rank._proc = SimpleNamespace(is_alive=lambda: True, join=lambda timeout=None: None, kill=lambda: None,
                                     pid=None)
        rank.log_path = str(tmp_path / "none.log")
        rank.rank = r
        group.ranks.append(rank)
        ends.append(end)
    return group, ends


def test_a_rank_stopped_halfway_through_a_message_holds_up_no_other_ranks_fault(tmp_path):
    """The group read each rank's message whole once its first bytes came, waiting for the rest until the
    deadline: rank 1's half message hid rank 0's error until the whole --timeout had passed, and the
    group read as a timeout. The error is read as it comes, and reported GRACE_S later."""
    group, (end0, end1) = _piped_group(tmp_path)
    end1._send(struct.pack("!i", 100) + b"{")
    wire.send_result(end0, ImplResult("impl", "error", "RuntimeError: rank 0 is broken"), False)
    result, fatal = group._collect("impl", TASK, time.monotonic() + 30, 30, None)  # generous: the outcome is tested
    assert (result.status, result.message) == ("error", "rank 0: RuntimeError: rank 0 is broken") and fatal


def test_a_rank_stopped_halfway_through_a_message_times_out_named(tmp_path, monkeypatch):
    monkeypatch.setattr(wire, "STALL_S", 0.01)  # past the deadline, how long its message is waited for
    group, (end0, end1) = _piped_group(tmp_path)
    wire.send(end0, "progress", event="phase", data={"phase": "timing"})
    end1._send(struct.pack("!i", 100) + b"{")
    result, fatal = group._collect("impl", TASK, time.monotonic() + 5, 5, None)  # both read well within 5 s
    assert result.status == "timeout" and fatal
    assert "(rank 0: timing; rank 1: no progress reported, then 5 bytes of a message it did not finish)" \
        in result.message


def test_a_ranks_result_under_way_at_the_deadline_is_read_to_its_end(tmp_path, monkeypatch):
    """As a worker's (wire.Frames): past the deadline, a message a rank began is read on while it keeps coming."""
    monkeypatch.setattr(wire, "STALL_S", 60.0)  # generous: the outcome, not the machine's speed, is tested
    monkeypatch.setattr(wire, "FINISH_S", 600.0)
    monkeypatch.setattr(group_module, "GRACE_S", 600.0)  # rank 1 reports after rank 0's skip, however late
    group, (end0, end1) = _piped_group(tmp_path)
    wire.send_result(end0, ImplResult("impl", "skipped", "no GPU here"), False)
    body = wire.result_text(ImplResult("impl", "skipped", "x" * (1 << 20))).encode()
    raw, piece = struct.pack("!i", len(body)) + body, 32 << 10
    end1._send(raw[:piece])
    deadline = time.monotonic() + 2  # both begun well within 2 s; the rest comes once it has passed

    def rest() -> None:
        time.sleep(max(deadline - time.monotonic(), 0) + 0.1)
        with contextlib.suppress(OSError):  # the parent's end closed
            for at in range(piece, len(raw), piece):
                end1._send(raw[at:at + piece])
                time.sleep(0.002)

    writer = threading.Thread(target=rest, daemon=True)
    writer.start()
    try:
        result, fatal = group._collect("impl", TASK, deadline, 2, None)
    finally:
        group.ranks[1]._conn.close()
        writer.join()
    assert (result.status, result.message) == ("skipped", "no GPU here") and not fatal, result.message


def test_a_ranks_fault_is_that_fault_though_the_deadline_cuts_its_grace_short(tmp_path, monkeypatch):
    """Rank 0 reported an error less than GRACE_S before the deadline, rank 1 (waiting in a collective rank 0
    never joined) nothing: the deadline cut the grace short and the error read as the group's timeout."""
    monkeypatch.setattr(group_module, "GRACE_S", 600.0)  # the deadline comes first, however slow the machine
    group, (end0, _end1) = _piped_group(tmp_path)
    wire.send_result(end0, ImplResult("impl", "error", "RuntimeError: rank 0 is broken"), False)
    result, fatal = group._collect("impl", TASK, time.monotonic() + 5, 5, None)  # rank 0 read well within 5 s
    assert (result.status, result.message) == ("error", "rank 0: RuntimeError: rank 0 is broken") and fatal


def test_a_rank_group_stops_timing_a_configuration_beaten_by_the_best_as_one_process_does():
    """tune's early stop (Task.beaten_above, BeatOrStop) in a rank group: every rank decides alike on the
    agreed samples, so a bound no time can beat stops the group at the fewest samples a 95% interval needs."""
    import os

    from solbench.config.workloads import load_workload_file
    from solbench.measure.criteria import MIN_CI_SAMPLES
    from solbench.measure.worker import MeasureSettings, Task
    from solbench.workload.cases import expand

    spec = next(s for s in load_workload_file("tests/data/ranks/ranks.yaml") if s.name == "rank_faults")
    case = expand(spec, "cpu")[0]
    settings = MeasureSettings(budget_s=5.0, min_samples=3, max_samples=200, warmup=1, input_sets=1)
    base = os.path.abspath("tests/data/ranks")
    g = Group(2, "cpu", dict(os.environ))
    try:
        beaten, _ = g.run(Task(spec, case, "baseline", base, "cpu", settings, beaten_above=1e-12), 120.0)
        free, _ = g.run(Task(spec, case, "baseline", base, "cpu", settings), 120.0)
    finally:
        g.kill()
    assert beaten.status == "ok" and free.status == "ok", (beaten.message, free.message)
    assert beaten.timing.stop_reason == "beaten" and beaten.timing.n == MIN_CI_SAMPLES
    assert free.timing.stop_reason != "beaten"
