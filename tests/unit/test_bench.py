"""``solbench.bench``: one callable timed with the run's protocol and scored on the roofline."""

from __future__ import annotations

import pytest
import torch

import solbench
from solbench.device import threads


def test_bench_times_and_scores_a_callable_on_the_cpu() -> None:
    a, b = torch.randn(64, 128), torch.randn(128, 128)
    before = torch.get_num_threads()
    flops, nbytes = 2 * 64 * 128 * 128, 4 * (64 * 128 + 128 * 128 + 64 * 128)
    r = solbench.bench(torch.mm, a, b, flops=flops, bytes=nbytes, budget_s=0.05, min_samples=5, max_samples=50)
    assert torch.get_num_threads() == before  # the policy applies while timing only
    assert r.ci_low <= r.median <= r.ci_high and 5 <= r.n <= 50
    assert r.timing is not None and len(r.timing.samples) == r.n
    assert r.stop_reason in ("converged", "budget", "max_samples")
    assert r.protocol["timer"] == "cpu" and r.protocol["threads"] == threads.policy(0, "cpu")
    assert r.spec == "cpu (measured peaks)" and r.bound in ("compute", "memory")
    assert r.t_sol is not None and r.sol == pytest.approx(r.t_sol / r.median)
    assert r.mfu is not None and r.mbu is not None and not r.invalid  # measured peaks: never INVALID


def test_bench_without_a_cost_times_only() -> None:
    calls = []
    r = solbench.bench(lambda x: calls.append(x), 3, budget_s=0.02, min_samples=3, max_samples=5, warmup=2)
    assert (r.sol, r.mfu, r.t_sol, r.bound) == (None, None, None, None)
    assert len(calls) == r.n + 2 and set(calls) == {3}  # warm-up calls, then one call per sample
