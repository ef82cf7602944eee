"""The tensor peak an fp32 case is priced at (a workload's ``fp32_peak``), and the convolutions' share
of a cost that the ``torch`` policy prices at TF32."""

import pytest

from solbench.analysis.cost import case_cost
from solbench.config.hwspecs import get_spec
from solbench.plan.workloads import peaks_at
from solbench.results.model import Cost
from solbench.workload.cases import Case, TensorShape

H200 = get_spec("h200")
FP32 = H200.peaks_for("float32").tensor_flops
TF32 = H200.peaks_for("float32", tf32=True).tensor_flops


def _cost(tensor: float, conv: float) -> Cost:
    return Cost("float32", tensor, 0.0, 1e6, 1e6, source="traced", conv_flops=conv)


def test_the_fixed_policies_ignore_the_convolutions_share():
    cost = _cost(1e12, 1e12)
    assert peaks_at(H200, "float32", "fp32", cost).tensor_flops == FP32
    assert peaks_at(H200, "float32", "tf32", cost).tensor_flops == TF32
    assert peaks_at(H200, "float32", "fp16-rate", cost).tensor_flops == H200.peaks_for("float16").tensor_flops
    assert peaks_at(H200, "bfloat16", "torch", cost) == H200.peaks_for("bfloat16")  # fp32 cases only


def test_torch_prices_convolutions_at_tf32_and_the_rest_at_fp32():
    assert TF32 > 5 * FP32  # the H200's datasheet: 494.7 vs 66.9 TFLOP/s dense
    assert peaks_at(H200, "float32", "torch", _cost(1e12, 1e12)).tensor_flops == pytest.approx(TF32)
    assert peaks_at(H200, "float32", "torch", _cost(1e12, 0.0)).tensor_flops == pytest.approx(FP32)
    assert peaks_at(H200, "float32", "torch", None).tensor_flops == pytest.approx(FP32)
    mixed = peaks_at(H200, "float32", "torch", _cost(3e12, 1e12)).tensor_flops
    # the same time as pricing each part at its own peak
    assert 3e12 / mixed == pytest.approx(1e12 / TF32 + 2e12 / FP32)


def test_an_analytic_cost_counts_its_convolutions_apart():
    case = Case("w", {}, "float32", (TensorShape("x", (1, 8, 16, 16), "float32"),),
                (TensorShape("y", (1, 8, 16, 16), "float32"),))
    conv = {"op": "conv2d", "n": 1, "c": 8, "h": 16, "w": 16, "k": 8, "r": 3, "s": 3, "pad": 1}
    matmul = {"op": "matmul", "m": 16, "n": 16, "k": 16}
    cost = case_cost(case, [conv, matmul])
    assert cost.conv_flops == 2 * 8 * 16 * 16 * 8 * 9 and cost.tensor_flops == cost.conv_flops + 2 * 16**3
    assert case_cost(case, [conv], flops="1000").conv_flops == 0.0  # an expression: its share is not known


def test_the_invalid_floor_of_an_fp32_case_is_at_the_tf32_rate_whatever_the_scoring_policy(tmp_path):
    """A float32 matmul run on TF32 tensor cores beats the CUDA-core T_SOL honestly: it is scored against
    the fp32 peak (the default policy) but never INVALID above the TF32 T_SOL."""
    import yaml

    from solbench.plan.workloads import case_result, plan
    from solbench.results.model import ImplResult
    from tests.unit.factories import make_timing

    spec = {"name": "mm", "parameters": {"n": [4096]}, "dtypes": ["float32"],
            "inputs": {"a": {"shape": ["n", "n"]}, "b": {"shape": ["n", "n"]}}, "outputs": {"c": {"shape": ["n", "n"]}},
            "ops": [{"op": "matmul", "m": "n", "n": "n", "k": "n"}], "reference": "tests.unit.helpers:double",
            "implementations": {"baseline": "tests.unit.helpers:double"}}
    path = tmp_path / "mm.yaml"
    path.write_text(yaml.safe_dump({"workloads": [spec]}))
    (p,) = plan([path], "cuda")
    (case,) = p.cases
    flops = 2 * 4096 ** 3
    t_fp32, t_tf32 = flops / FP32, flops / TF32
    between = ImplResult("baseline", "ok", timing=make_timing([(t_fp32 + t_tf32) / 2] * 5))
    below = ImplResult("baseline", "ok", timing=make_timing([t_tf32 * 0.9] * 5))
    (ok,) = case_result(p, case, H200, [between]).impls
    assert ok.status == "ok" and ok.score.sol > 1  # above the fp32 speed of light, which SOL says
    (bad,) = case_result(p, case, H200, [below]).impls
    assert bad.status == "invalid"


@pytest.mark.parametrize("dtype", ["int16", "int32", "int64", "uint8", "bool"])
def test_integer_cases_the_schema_accepts_are_priced_on_the_vector_units(dtype):
    peaks = H200.peaks_for(dtype)
    assert peaks.tensor_flops is None  # no matrix unit: matrix FLOPs fall back to the vector peak
    assert peaks.vector_flops == H200.peaks_for("float32").vector_flops
    assert peaks.bandwidth == H200.bandwidth
