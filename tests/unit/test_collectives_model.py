"""Collectives in the cost model, the speed of light and the scores; interconnect specs; schema. Pure."""

import math
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import ValidationError

from solbench.analysis.cost import bus_factor, op_cost
from solbench.analysis.scoring import ImplPeaks, part_times, score_impls
from solbench.analysis.sol import overlap_efficiency, score, speed_of_light
from solbench.config.hwspecs import get_spec
from solbench.results.model import Cost, ImplResult, Peaks, Timing
from solbench.workload.ops import OpFieldError
from solbench.workload.schema import WorkloadSpec

MIB = 2**20


@pytest.mark.parametrize(("kind", "n", "factor"), [
    ("allreduce", 2, 1.0), ("allreduce", 4, 1.5), ("allreduce", 8, 1.75),
    ("reduce_scatter", 2, 0.5), ("reduce_scatter", 8, 0.875), ("all_gather", 4, 0.75)])
def test_bus_factors_are_nccl_tests(kind, n, factor):
    assert bus_factor(kind, n) == factor
    c = op_cost({"op": kind, "numel": "m", "ranks": n}, {"m": MIB}, "bfloat16")
    assert c.collective_bytes == 2 * MIB and c.bus_bytes == 2 * MIB * factor
    # read the send buffer, write the receive buffer: one of them is this rank's 1/n outside an all-reduce
    assert c.bytes == (4 * MIB if kind == "allreduce" else 2 * MIB * (1 + 1 / n))
    assert c.vector_flops == (MIB * (n - 1) / n if kind != "all_gather" else 0.0)


def test_ranks_default_to_the_workloads_world_size_and_need_two():
    c = op_cost({"op": "allreduce", "numel": 1024}, {"world_size": 4}, "float32")
    assert c.bus_bytes == 4096 * 1.5
    with pytest.raises(ValueError, match="2 ranks or more"):
        op_cost({"op": "allreduce", "numel": 1024}, {}, "float32")
    assert op_cost({"op": "allreduce", "numel": 1024, "ranks": 2}, {"world_size": 4}, "float32").bus_bytes == 4096
    # more ranks than the workload has: a busbw factor no measured time ever had (8 ranks' 1.75 for 2 ranks' 1)
    with pytest.raises(OpFieldError, match="ranks = 8 is more than the workload's world_size 2") as info:
        op_cost({"op": "allreduce", "numel": 1024, "ranks": 8}, {"world_size": 2}, "float32")
    assert info.value.field == "ranks"


PEAKS = Peaks(tensor_flops=1e15, vector_flops=1e14, bandwidth=4.8e12, source="datasheet", link_bandwidth=450e9)


def _allreduce(size):
    return Cost("bfloat16", 0.0, size / 2 / 2, 2.0 * size, 2.0 * size, (), float(size), float(size))


def test_the_link_sets_t_sol_of_an_all_reduce_and_sol_is_busbw_over_link():
    cost = _allreduce(2**30)
    sol = speed_of_light(cost, PEAKS)
    assert sol.bound == "link" and sol.t_sol == 2**30 / 450e9 and sol.link_known
    t = 3e-3
    s = score(t, cost, PEAKS, sol, None)
    assert s.algbw == 2**30 / t and s.busbw == 2**30 / t
    assert math.isclose(s.sol, s.busbw / 450e9)


def test_without_a_link_bandwidth_the_link_term_is_left_out_and_said_so():
    cost = _allreduce(2**30)
    sol = speed_of_light(cost, replace(PEAKS, link_bandwidth=None))
    assert sol.bound == "memory" and not sol.link_known and sol.t_link == 0.0
    r = ImplResult("baseline", "ok", timing=Timing((1e-2,), 1e-2, 1e-2, 1e-2, "converged"))
    peaks = ImplPeaks(replace(PEAKS, link_bandwidth=None), replace(PEAKS, link_bandwidth=None))
    (scored,) = score_impls(cost, [r], {"baseline": peaks}, "baseline", "cuda")
    assert "no link term" in scored.message and scored.score.busbw == 2**30 / 1e-2


def test_no_collective_no_bandwidths():
    cost = Cost("float32", 2e9, 0.0, 4e6, 4e6)
    s = score(1e-3, cost, PEAKS, speed_of_light(cost, PEAKS), None)
    assert s.algbw is None and s.busbw is None and s.overlap is None


def test_overlap_efficiency_anchors():
    assert overlap_efficiency(3.0, 2.0, 1.0) == 0.0  # nothing overlapped: T = T_compute + T_comm
    assert overlap_efficiency(2.0, 2.0, 1.0) == 1.0  # the shorter part hidden entirely
    assert overlap_efficiency(2.5, 2.0, 1.0) == 0.5
    assert overlap_efficiency(4.0, 2.0, 1.0) == -1.0  # worse than one after the other
    with pytest.raises(ValueError):
        overlap_efficiency(1.0, 0.0, 1.0)


def _ok(name, t, part=None):
    return ImplResult(name, "ok", timing=Timing((t,), t, t, t, "converged"),
                      protocol={"part": part} if part else {})


def test_parts_are_timed_not_scored_and_give_the_others_their_overlap():
    cost = replace(_allreduce(2**20), tensor_flops=1e9)
    impls = [_ok("sequential", 3e-3), _ok("overlapped", 2.5e-3), _ok("compute", 2e-3, "compute"),
             _ok("comm", 1e-3, "comm")]
    peaks = {r.name: ImplPeaks(PEAKS, PEAKS) for r in impls}
    assert part_times(impls) == (2e-3, 1e-3)
    out = {r.name: r for r in score_impls(cost, impls, peaks, "sequential", "cuda")}
    assert out["compute"].score is None and out["comm"].score is None and out["comm"].status == "ok"
    assert out["sequential"].score.overlap == pytest.approx(0.0)
    assert out["overlapped"].score.overlap == pytest.approx(0.5)
    assert out["overlapped"].score.speedup == pytest.approx(3e-3 / 2.5e-3)


def test_a_failed_part_means_no_overlap():
    impls = [_ok("sequential", 3e-3), _ok("compute", 2e-3, "compute"),
             ImplResult("comm", "error", "boom", protocol={"part": "comm"})]
    assert part_times(impls) is None
    out = score_impls(_allreduce(2**20), impls, {r.name: ImplPeaks(PEAKS, PEAKS) for r in impls}, "sequential",
                      "cuda")
    assert out[0].score.overlap is None


def test_interconnect_is_per_direction_as_busbw_is():
    h200 = get_spec("h200-sxm")
    assert h200.nvlink_bandwidth == 450e9 and h200.pcie_bandwidth == 64e9  # datasheet 900 and 128 GB/s
    assert h200.peaks_for("bfloat16").link_bandwidth == 450e9
    l4 = get_spec("l4")
    assert l4.nvlink_bandwidth is None and l4.link_bandwidth == 32e9  # no NVLink: PCIe
    assert get_spec("h20").link_bandwidth is None  # unpublished
    cpu = get_spec("cpu").with_peaks(vector={"fp32": 1e11}, bandwidth=20e9)
    assert cpu.peaks_for("float32").link_bandwidth == 10e9  # gloo: half the copy bandwidth


def test_a_spec_file_with_a_bad_interconnect_figure_is_refused(tmp_path):
    from solbench.config.hwspecs import load_spec_file
    from solbench.errors import ConfigError

    text = Path("hardware_specs/h200-sxm.yaml").read_text().replace("nvlink_gbs: 900", "nvlink_gbs: -900")
    (tmp_path / "h200-sxm.yaml").write_text(text)
    with pytest.raises(ConfigError, match="nvlink_gbs"):
        load_spec_file(tmp_path / "h200-sxm.yaml")


BASE = {"name": "w", "parameters": {"n": [8]}, "dtypes": ["float32"], "inputs": {"x": {"shape": ["n"]}},
        "outputs": {"out": {"shape": ["n"]}}, "reference": "m:ref"}


def _spec(impls, **extra):
    return WorkloadSpec.model_validate({**BASE, "implementations": impls, **extra})


def test_world_size_env_and_parts_in_the_schema():
    spec = _spec({"baseline": "m:f", "nccl_ring": {"fn": "m:f", "env": {"NCCL_ALGO": "Ring"}, "requires": ["nccl"]},
                  "c": {"fn": "m:c", "part": "compute"}, "m": {"fn": "m:m", "part": "comm"}}, world_size=2)
    assert spec.world_size == 2 and spec.implementations["nccl_ring"].env == {"NCCL_ALGO": "Ring"}
    assert _spec({"baseline": "m:f"}).world_size == 1


@pytest.mark.parametrize(("impls", "extra", "message"), [
    ({"baseline": {"fn": "m:f", "env": {"A": "1"}}}, {}, "env needs world_size > 1"),
    ({"baseline": "m:f", "c": {"fn": "m:c", "part": "compute"}}, {}, "part needs world_size > 1"),
    ({"baseline": {"fn": "m:f", "part": "compute"}, "m": {"fn": "m:m", "part": "comm"}}, {"world_size": 2},
     "cannot be a part"),
    ({"baseline": "m:f", "c": {"fn": "m:c", "part": "compute"}}, {"world_size": 2}, "one 'compute' and one 'comm'"),
    ({"baseline": "m:f"}, {"world_size": 0}, "greater than or equal to 1"),
    ({"baseline": {"fn": "m:f", "env": {"1BAD": "x"}}}, {"world_size": 2}, "pattern"),
])
def test_schema_refuses_misplaced_rank_fields(impls, extra, message):
    with pytest.raises(ValidationError, match=message):
        _spec(impls, **extra)


def test_a_busbw_above_the_link_is_scored_not_invalid():
    """In-switch reduction (NVLS) can beat the ring convention's bus bytes: SOL above 1, not INVALID."""
    cost = _allreduce(2**30)
    t = 0.9 * 2**30 / 450e9  # busbw 500 GB/s over a 450 GB/s link
    r = ImplResult("baseline", "ok", timing=Timing((t,), t, t, t, "converged"))
    (scored,) = score_impls(cost, [r], {"baseline": ImplPeaks(PEAKS, PEAKS)}, "baseline", "cuda")
    assert scored.status == "ok" and scored.score.sol > 1.0
    below_memory = 0.5 * cost.fused_bytes / 4.8e12  # faster than reading and writing the buffer once
    r = ImplResult("baseline", "ok", timing=Timing((below_memory,), below_memory, below_memory, below_memory, "c"))
    (flagged,) = score_impls(cost, [r], {"baseline": ImplPeaks(PEAKS, PEAKS)}, "baseline", "cuda")
    assert flagged.status == "invalid"


def test_world_size_may_size_a_multi_rank_workloads_tensors_and_ops(tmp_path):
    """build_case puts world_size in every expression's scope where there are ranks; the loader's name
    check refused it as an unknown parameter, so a per-rank shard could not be sized by it."""
    from solbench.analysis.cost import case_cost
    from solbench.config.workloads import load_workload_file
    from solbench.workload.cases import expand

    path = tmp_path / "w.yaml"
    path.write_text("workloads:\n  - name: ar\n    world_size: 2\n    parameters: {n: [4]}\n    dtypes: [float32]\n"
                    "    inputs: {x: {shape: [n * world_size]}}\n    outputs: {y: {shape: [n]}}\n"
                    "    ops: [{op: allreduce, numel: n * world_size}]\n"
                    "    reference: tests.unit.helpers:double\n    implementations: {baseline: tests.unit.helpers:double}\n")
    (spec,) = load_workload_file(path)
    (case,) = expand(spec, "cpu")
    assert case.inputs[0].shape == (8,)
    cost = case_cost(case, [op.sizes() for op in spec.ops])
    assert cost.collective_bytes == 8 * 4 and cost.fused_bytes == (8 + 4) * 4


@pytest.mark.parametrize(("kind", "sent", "received"), [("reduce_scatter", "n", "n // 4"), ("all_gather", "n // 4", "n")])
def test_a_lone_collectives_unfused_bytes_are_its_declared_buffers(kind, sent, received):
    """A reduce-scatter reads the whole buffer and writes this rank's quarter (an all-gather the other
    way round): its own bytes are the workload's fused bytes, not two whole buffers (an unfused chain
    moving a third more than the fused one, where there is nothing to fuse)."""
    from solbench.analysis.cost import case_cost
    from solbench.workload.cases import expand

    spec = WorkloadSpec.model_validate({**BASE, "parameters": {"n": [4096]}, "world_size": 4,
                                        "inputs": {"x": {"shape": [sent]}}, "outputs": {"out": {"shape": [received]}},
                                        "ops": [{"op": kind, "numel": "n"}], "implementations": {"baseline": "m:f"}})
    (case,) = expand(spec, "cpu")
    cost = case_cost(case, [op.sizes() for op in spec.ops])
    assert cost.fused_bytes == (4096 + 1024) * 4 and cost.unfused_bytes == cost.fused_bytes


@pytest.mark.parametrize(("extra", "impl", "line", "says"), [
    ("", "      other: {fn: m:f, env: {NCCL_ALGO: Ring}}\n", 10, r"\.implementations\.other\.env: .*env needs world_size > 1"),
    ("", "      other: {fn: m:f, part: comm}\n", 10, r"\.implementations\.other\.part: .*part needs world_size > 1"),
    ("    world_size: 2\n    floor: true\n", "", 4, r"\.floor: floor: true needs world_size 1"),
])
def test_a_misplaced_rank_field_is_refused_at_its_own_line(tmp_path, extra, impl, line, says):
    """These errors named the workload's first line (and 'implementation floor', one the file never
    wrote, for floor: true), not the field at fault."""
    import re

    from solbench.config.workloads import load_workload_file
    from solbench.errors import ConfigError

    path = tmp_path / "w.yaml"
    path.write_text(f"workloads:\n  - name: w\n{extra}    parameters: {{n: [8]}}\n    dtypes: [float32]\n"
                    "    inputs: {x: {shape: [n]}}\n    outputs: {out: {shape: [n]}}\n    reference: m:ref\n"
                    f"    implementations:\n      baseline: m:f\n{impl}")
    with pytest.raises(ConfigError) as info:
        load_workload_file(path)
    assert re.search(f"^{re.escape(str(path))}:{line}: workloads\\.0{says}", str(info.value)), str(info.value)
