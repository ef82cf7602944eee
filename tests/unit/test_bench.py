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


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"flops": -1e6}, "flops must be a finite number, 0 or more, got -1000000.0"),  # a negative MFU
    ({"bytes": float("nan")}, "bytes must be a finite number"),  # MBU nan, bound "compute"
    ({"vector_flops": float("inf")}, "vector_flops must be a finite number"),  # SOL inf
    ({"min_samples": 20, "max_samples": 5}, "min_samples 20 is larger than max_samples 5"),  # n=20, "max_samples"
    ({"min_samples": 0}, "min_samples must be an integer at least 1"),
    ({"budget_s": float("nan")}, "budget_s must be a positive finite number"),  # never stopped by the budget
    ({"target_rel_ci": 0}, "target_rel_ci must be a positive finite number"),
    ({"warmup": -1}, "warmup must be an integer at least 0"),
    ({"flops": 1e6, "dtype": "fp16"}, "unknown dtype 'fp16'"),  # was raised after the whole budget was spent
])
def test_bench_refuses_arguments_it_cannot_honour_before_timing(kwargs, message) -> None:
    calls = []
    with pytest.raises(solbench.ConfigError, match=message):
        solbench.bench(lambda: calls.append(1), **{"budget_s": 0.02, "max_samples": 10, **kwargs})
    assert calls == []  # refused before fn was called


def test_bench_takes_numpy_numbers_for_costs_and_counts() -> None:
    np = pytest.importorskip("numpy")
    r = solbench.bench(lambda: None, flops=np.int64(10**6), bytes=np.float64(8e3), budget_s=np.float64(0.02),
                       min_samples=np.int64(3), max_samples=np.int32(5))
    assert r.t_sol is not None and 3 <= r.n <= 5
