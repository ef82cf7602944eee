"""Multi-rank workloads on two GPUs (NCCL): faults on one rank become statuses, and the shipped
all-reduce at 1 MiB runs and is scored against the spec's link. Skipped below two GPUs."""

import pytest
import torch
from click.testing import CliRunner

from solbench.cli import main
from solbench.results import store

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")]


def test_nccl_faults_on_one_rank_are_statuses(tmp_path):
    out = tmp_path / "faults.json"
    result = CliRunner().invoke(main, ["run", "tests/data/ranks/ranks.yaml", "--timeout", "30", "-o", str(out),
                                       "--budget", "0.2"])
    assert result.exit_code == 4, result.output
    run = store.load(out)
    status = {r.name: (r.status, r.message) for c in run.cases for r in c.impls}
    assert status["raises_on_rank1"][0] == "error" and status["raises_on_rank1"][1].startswith("rank 1: ")
    assert status["exits_on_rank1"][0] == "crashed"
    assert status["hangs_on_rank0"][0] == "timeout"
    assert status["wrong_on_rank1"][0] == "incorrect"
    for name in ("baseline", "honest"):
        r = next(r for c in run.cases for r in c.impls if r.name == name)
        assert r.status == "ok" and r.protocol["backend"] == "nccl", (r.status, r.message)


def test_allreduce_on_two_gpus_is_scored_against_the_link(tmp_path):
    out = tmp_path / "allreduce.json"
    result = CliRunner().invoke(main, ["run", "workloads/collectives.yaml", "-w", "allreduce", "-o", str(out),
                                       "--budget", "0.2", "--timeout", "120"])
    assert result.exit_code == 0, result.output
    run = store.load(out)
    first = run.cases[0]
    assert first.peaks.link_bandwidth is not None and first.bound == "link"
    ok = [r for r in first.impls if r.status == "ok"]
    assert {r.name for r in ok} == {"baseline", "rs_ag", "ring_simple", "ring_ll128"}
    for r in ok:
        assert r.score.busbw == pytest.approx(first.cost.bus_bytes / r.timing.median)
        assert r.protocol["rank_sync"] == "barrier + 1-element NCCL all-reduce"
