"""An implementation that reads an input narrower, made once in set-up (``input_dtypes``: o_proj's FP8
weight), is scored against its own bytes: its T_SOL, SOL, MBU, floor fraction and INVALID floor."""

from dataclasses import replace

import pytest
import yaml

from solbench.config.hwspecs import get_spec
from solbench.errors import ConfigError
from solbench.plan.workloads import case_result, impl_cost, plan
from solbench.report import flags
from solbench.report.console import run_tables
from solbench.results.model import ImplResult
from solbench.workload.schema import WorkloadFile
from tests.unit.factories import make_run, make_timing

H200 = get_spec("h200-sxm")


def _o_proj(tokens: int):
    (p,) = plan(["workloads/attn.yaml"], "cuda", only=("o_proj",), cases=(f"tokens={tokens},bfloat16",))
    (case,) = p.cases
    return p, case


def _result(name: str, t: float) -> ImplResult:
    return ImplResult(name, "ok", timing=make_timing([t * (1 + 0.001 * k) for k in range(-2, 3)]))


def test_the_fp8_weight_is_counted_at_one_byte():
    p, case = _o_proj(1)
    hidden = 4096
    bf16 = impl_cost(p, case, "fused")
    fp8 = impl_cost(p, case, "fp8")
    assert bf16.fused_bytes == 2 * (3 * hidden + hidden * hidden)  # x, residual, out and the weight, 16-bit
    assert fp8.fused_bytes == 2 * 3 * hidden + hidden * hidden  # the weight as FP8
    assert impl_cost(p, case, "fp8_dynamic").fused_bytes == fp8.fused_bytes
    assert fp8.tensor_flops == bf16.tensor_flops  # the work is the same


def test_an_fp8_time_between_its_own_t_sol_and_the_cases_is_scored_not_invalid():
    p, case = _o_proj(1)
    own_t_sol = impl_cost(p, case, "fp8").fused_bytes / H200.bandwidth
    case_t_sol = impl_cost(p, case, "fused").fused_bytes / H200.bandwidth
    t = (own_t_sol + case_t_sol) / 2  # faster than the bf16 weight can be read, slower than the FP8 one
    scored = {r.name: r for r in case_result(p, case, H200, [_result("baseline", 20e-6), _result("fp8", t)]).impls}
    fp8 = scored["fp8"]
    assert fp8.status == "ok", fp8.message
    assert fp8.score.t_sol == pytest.approx(own_t_sol)
    assert fp8.score.sol == pytest.approx(own_t_sol / fp8.timing.median)
    assert fp8.score.mbu == pytest.approx(fp8.score.fused_bytes / (fp8.timing.median * H200.bandwidth))
    assert fp8.score.bound == "memory"
    assert "own" in fp8.message and "w as float8_e4m3fn" in fp8.message
    base = scored["baseline"]
    assert base.score.t_sol == pytest.approx(case_t_sol)  # the baseline keeps the case's


def test_below_its_own_t_sol_it_is_still_invalid():
    p, case = _o_proj(1)
    own_t_sol = impl_cost(p, case, "fp8").fused_bytes / H200.bandwidth
    (fp8,) = case_result(p, case, H200, [_result("fp8", own_t_sol * 0.9)]).impls
    assert fp8.status == "invalid" and fp8.score is None


def test_the_floor_fraction_is_scaled_to_its_own_bytes():
    p, case = _o_proj(1)
    floor = replace(_result("floor", 8e-6), protocol={"part": "floor"})
    scored = {r.name: r for r in case_result(p, case, H200, [floor, _result("fp8", 10e-6), _result("fused", 10e-6)]
                                             ).impls}
    ratio = impl_cost(p, case, "fp8").fused_bytes / impl_cost(p, case, "fused").fused_bytes
    assert scored["fused"].score.floor_fraction == pytest.approx(floor.timing.median / scored["fused"].timing.median)
    assert scored["fp8"].score.floor_fraction == pytest.approx(scored["fused"].score.floor_fraction * ratio)


def test_the_table_shows_the_t_sol_each_row_is_scored_against_and_says_so():
    p, case = _o_proj(1)
    result = case_result(p, case, H200, [_result("baseline", 20e-6), _result("fp8", 10e-6)])
    run = replace(make_run({}), cases=(result,))
    by = {r.name: r for r in result.impls}
    assert flags.own(result, by["fp8"]) and not flags.own(result, by["baseline"])
    assert flags.t_sol(result, by["fp8"]).endswith(flags.OWN)
    assert flags.OWN not in flags.t_sol(result, by["baseline"])
    assert "own T_SOL" in flags.legend(run)
    from rich.console import Console

    console = Console(width=240, record=True)
    for table in run_tables(run):
        console.print(table)
    text = console.export_text()
    assert "3.50 µs *" in text and "7.00 µs" in text


def _spec(**impl):
    return {"name": "w", "parameters": {"n": [64]}, "dtypes": ["bfloat16"],
            "inputs": {"x": {"shape": ["n", 8]}, "w": {"shape": [8, 8]}}, "outputs": {"y": {"shape": ["n", 8]}},
            "ops": [{"op": "matmul", "m": "n", "n": 8, "k": 8}], "reference": "tests.unit.helpers:double",
            "implementations": {"baseline": {"fn": "tests.unit.helpers:double", **impl}}}


def test_input_dtypes_must_name_an_input():
    with pytest.raises(ValueError, match="input_dtypes names 'v', which is not an input"):
        WorkloadFile.model_validate({"workloads": [_spec(input_dtypes={"v": "float8_e4m3fn"})]})


def test_widening_an_input_is_refused_at_its_line(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump({"workloads": [_spec(input_dtypes={"w": "float32"})]}, sort_keys=False))
    with pytest.raises(ConfigError, match=r"w\.yaml:\d+.*widens 'w' from bfloat16 to float32"):
        plan([path], "cpu")


def test_a_run_saved_before_scores_recorded_their_own_t_sol_reads_it_back():
    """Runs saved before ``Score.t_sol`` (results/h200/attn.json) hold an FP8 row's SOL against its own
    T_SOL but no T_SOL: every report printed the case's beside it (69.5 us, 129 us, SOL 0.27)."""
    from solbench.report.csv import run_csv
    from solbench.results import store

    p, case = _o_proj(1)
    result = case_result(p, case, H200, [_result("baseline", 20e-6), _result("fp8", 10e-6)])
    data = store.to_dict(replace(make_run({}), cases=(result,)))
    for impl in data["cases"][0]["impls"]:
        del impl["score"]["t_sol"], impl["score"]["bound"], impl["score"]["fused_bytes"]
    old = store.from_dict(data)
    (c,) = old.cases
    fp8 = next(r for r in c.impls if r.name == "fp8")
    base = next(r for r in c.impls if r.name == "baseline")
    assert fp8.score.t_sol == pytest.approx(fp8.score.sol * fp8.timing.median)
    assert fp8.score.t_sol == pytest.approx(c.t_sol / 2, rel=1e-3) and base.score.t_sol is None
    assert flags.t_sol(c, fp8) == "3.50 µs *" and flags.t_sol(c, base) == "7.00 µs"
    row = next(line for line in run_csv([old]).splitlines() if ",fp8," in line)
    assert f",{fp8.score.t_sol:.15g}," in row  # its own T_SOL (to the CSV's 15 significant digits)


def test_an_fp4_input_is_counted_at_half_a_byte_a_value(tmp_path):
    """float4_e2m1fn_x2 packs two values in a byte: a 16-bit weight read as FP4 costs a quarter of its bytes,
    not half (each value was counted at one byte, so an FP4 GEMV's T_SOL, SOL and MBU read off by the weight)."""
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump({"workloads": [_spec(input_dtypes={"w": "float4_e2m1fn_x2"})]}, sort_keys=False))
    (p,) = plan([path], "cpu")
    case = p.cases[0]
    w_values = 8 * 8  # the spec's w: 8 x 8 bfloat16
    case_bytes = sum(t.nbytes for t in case.inputs + case.outputs)
    assert impl_cost(p, case, "baseline").fused_bytes == case_bytes - w_values * 2 + w_values / 2


def test_reading_an_fp8_input_as_fp4_saves_half_its_bytes_and_fp4_as_fp8_widens(tmp_path):
    spec = _spec(input_dtypes={"w": "float4_e2m1fn_x2"})
    spec["inputs"]["w"]["dtype"] = "float8_e4m3fn"
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump({"workloads": [spec]}, sort_keys=False))
    (p,) = plan([path], "cpu")
    case = p.cases[0]
    case_bytes = sum(t.nbytes for t in case.inputs + case.outputs)
    assert impl_cost(p, case, "baseline").fused_bytes == case_bytes - 8 * 8 / 2
    spec = _spec(input_dtypes={"w": "float8_e4m3fn"})
    spec["inputs"]["w"] = {"shape": [8, 4], "dtype": "float4_e2m1fn_x2"}  # 8 x 8 FP4 values, packed
    path.write_text(yaml.safe_dump({"workloads": [spec]}, sort_keys=False))
    with pytest.raises(ConfigError, match="widens 'w' from float4_e2m1fn_x2 to float8_e4m3fn"):
        plan([path], "cpu")
