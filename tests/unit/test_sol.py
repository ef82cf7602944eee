import pytest

from solbench.analysis.sol import is_below_sol, s_score, score, speed_of_light
from solbench.results.model import Cost, Peaks

H200 = Peaks(tensor_flops=989.4e12, vector_flops=66.9e12, bandwidth=4.8e12, source="datasheet")


def oproj_cost(tokens, hidden=4096):
    flops = 2.0 * tokens * hidden * hidden
    fused = 2.0 * (3 * tokens * hidden + hidden * hidden)  # x, residual, out + w, bf16
    return Cost("bfloat16", flops, tokens * hidden, fused, fused + 4.0 * tokens * hidden)


def test_prefill_o_proj_is_compute_bound_at_556us():
    sol = speed_of_light(oproj_cost(16384), H200)
    assert sol.bound == "compute"
    assert sol.t_sol == pytest.approx(2 * 16384 * 4096**2 / 989.4e12)
    assert sol.t_sol == pytest.approx(555.6e-6, rel=1e-3)


def test_decode_o_proj_is_memory_bound():
    cost = oproj_cost(16)
    sol = speed_of_light(cost, H200)
    assert sol.bound == "memory"
    assert sol.t_sol == pytest.approx(cost.fused_bytes / 4.8e12)
    assert sol.intensity == pytest.approx(cost.flops / cost.fused_bytes)


def test_vector_bound_when_elementwise_flops_dominate():
    cost = Cost("float32", 0.0, 1e12, 1e6, 1e6)
    sol = speed_of_light(cost, H200)
    assert sol.bound == "vector" and sol.t_sol == pytest.approx(1e12 / 66.9e12)


def test_no_tensor_peak_falls_back_to_vector_peak():
    peaks = Peaks(None, 19.5e12, 1.5e12, "datasheet")
    sol = speed_of_light(Cost("float32", 19.5e12, 0, 1.0, 1.0), peaks)
    assert sol.t_sol == pytest.approx(1.0)


def test_scores_at_a_known_time():
    cost = oproj_cost(16384)
    sol = speed_of_light(cost, H200)
    s = score(783e-6, cost, H200, sol, t_baseline=800e-6)
    assert s.sol == pytest.approx(sol.t_sol / 783e-6)
    assert s.sol == pytest.approx(0.71, abs=0.01)  # the cuBLAS figure: 783 us vs 556 us
    assert s.mfu == pytest.approx(cost.tensor_flops / (783e-6 * 989.4e12))
    assert s.mbu == pytest.approx(cost.fused_bytes / (783e-6 * 4.8e12))
    assert s.speedup == pytest.approx(800 / 783)
    assert s.s_score == pytest.approx(1 / (1 + (783e-6 - sol.t_sol) / (800e-6 - sol.t_sol)))


def test_s_score_anchors():
    assert s_score(2.0, 1.0, 2.0) == pytest.approx(0.5)  # the baseline scores 0.5
    assert s_score(1.0, 1.0, 2.0) == 1.0  # speed of light scores 1
    assert s_score(0.5, 1.0, 2.0) == 1.0  # never above 1
    assert s_score(1e9, 1.0, 2.0) < 1e-8  # tends to 0
    assert s_score(3.0, 1.0, 0.5) == 0.0  # baseline at or below T_SOL: nothing to gain


def test_below_sol_is_flagged():
    assert is_below_sol(0.9, 1.0) and not is_below_sol(1.0, 1.0)


def test_score_rejects_non_positive_time():
    with pytest.raises(ValueError):
        score(0.0, oproj_cost(16), H200, speed_of_light(oproj_cost(16), H200), None)
