"""Nsight Compute counters: CSV parsing, totals, diagnosis, the command line, and errors without ncu."""

import json
import os
import stat
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from solbench.cli import main
from solbench.tools import ncu
from solbench.tools.profile import ProfileRequest, _profile_cmd, find_ncu
from solbench.tools.profile_target import main as target_main

# Shaped like `ncu --import R --csv --page raw --print-units base`: a ==PROF== line, header, units, kernels.
SAMPLE = """==PROF== Connected to process 1234 (/usr/bin/python3.12)
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC",\
"dram__bytes_read.sum","dram__bytes_write.sum","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",\
"gpu__time_duration.sum","sm__ops_path_tensor_src_bf16_dst_fp32.sum",\
"sm__ops_path_tensor_src_bf16_dst_fp32_sparsity_off.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed",\
"sm__warps_active.avg.pct_of_peak_sustained_active","smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",\
"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum","smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"
"","","","","","","","","","","","byte","Mbyte","%","usecond","","","%","%","inst","inst","inst"
"0","1234","python3.12","host","void gemm_kernel<128>(Params)","1","7","(256, 1, 1)","(132, 1, 1)","0","9.0",\
"40,000,000","2","35.5","50","2,000,000,000","2,000,000,000","80.2","11.9","0","1,000","0"
"1","1234","python3.12","host","void add_kernel(float*)","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0",\
"8,000,000","4","85.0","3","0","0","12.0","80.5","500","0","n/a"
"""


def _k(name="k", duration=1e-5, read=1e6, write=1e6, sm=10.0, mem=10.0, occupancy=50.0):
    return ncu.KernelMetrics(name, duration, read, write, sm, mem, None, occupancy, None, None, None)


def test_raw_csv_is_parsed_into_base_units():
    gemm, add = ncu.parse_raw_csv(SAMPLE)
    assert gemm.name == "void gemm_kernel<128>(Params)" and gemm.grid == "(132, 1, 1)"
    assert gemm.dram_read == 40e6 and gemm.dram_write == 2e6 and gemm.dram_bytes == 42e6  # Mbyte scaled
    assert gemm.duration == pytest.approx(50e-6) and gemm.sm_pct == 80.2 and gemm.occupancy_pct == 11.9
    assert gemm.tensor_flops == 2e9  # the sparsity_off sub-counter is not added a second time
    assert gemm.fp32_flops == 2000.0  # an FFMA is two FLOPs
    assert add.fp32_flops == 500.0  # n/a counts as absent
    assert add.raw["dram__bytes_read.sum"] == "8,000,000"


@pytest.mark.parametrize("text", ["", "==PROF== No kernels were profiled.\n", '"a","b"\n"1","2"\n'])
def test_output_without_kernels_is_a_parse_error(text):
    with pytest.raises(ncu.NcuParseError):
        ncu.parse_raw_csv(text)


def test_summary_totals_and_ratios():
    s = ncu.summarize(ncu.parse_raw_csv(SAMPLE), analytic_bytes=40e6, analytic_tensor_flops=2e9,
                      analytic_vector_flops=1000.0)
    assert s.measured_bytes == 54e6 and s.bytes_ratio == pytest.approx(1.35)
    assert s.tensor_ratio == 1.0 and s.fp32_ratio == 2.5
    assert s.duration == pytest.approx(53e-6)
    assert s.sm_pct == pytest.approx((80.2 * 50 + 12.0 * 3) / 53)  # weighted by duration
    assert s.diagnosis.startswith("compute-bound") and "gemm_kernel" in s.diagnosis


def test_diagnosis_memory_bound_with_extra_traffic_names_the_kernel():
    kernels = [_k("big_copy", 2e-5, 30e6, 30e6, sm=20, mem=90), _k("small", 1e-5, 5e6, 5e6, sm=10, mem=70)]
    s = ncu.summarize(kernels, analytic_bytes=40e6, analytic_tensor_flops=0, analytic_vector_flops=0)
    assert s.diagnosis.startswith("memory-bound with extra traffic: DRAM bytes 1.75x")
    assert "big_copy moves 86%" in s.diagnosis and "over 2 kernels" in s.diagnosis


def test_diagnosis_memory_bound_as_modelled():
    s = ncu.summarize([_k("stream", read=20e6, write=20e6, sm=30, mem=92)], analytic_bytes=40e6,
                      analytic_tensor_flops=0, analytic_vector_flops=0)
    assert s.diagnosis == ("memory-bound, traffic as modelled (DRAM bytes 1.00x the analytic fused bytes); "
                           "memory throughput 92% of peak (no FLOP counters)")


def _with_flops(k, tensor, fp32=0.0):
    return ncu.KernelMetrics(**{**k.__dict__, "tensor_flops": tensor, "fp32_flops": fp32})


def test_diagnosis_uses_the_counter_roofline_when_flop_counters_exist():
    # A GEMM whose shared memory is as busy as its tensor pipes (memory % >= SM %) and that re-reads
    # its operands: above the ridge it is compute-bound, the extra bytes are named but not blamed.
    gemm = _with_flops(_k("gemm", 7e-4, 730e6, 131e6, sm=91, mem=92), 558e9)
    s = ncu.summarize([gemm], analytic_bytes=436e6, analytic_tensor_flops=550e9, analytic_vector_flops=0,
                      ridge=206.0)
    assert s.measured_intensity == pytest.approx(558e9 / 861e6)
    assert s.diagnosis.startswith("compute-bound: SM throughput 91% of peak, tensor FLOPs 1.01x analytic "
                                  "(648.1 FLOP/B measured, ridge 206); DRAM bytes 1.97x analytic (re-reads")
    # Below the ridge a kernel is memory-bound even when its SM % is the larger one.
    norm = _with_flops(_k("norm", 1e-4, 268e6, 242e6, sm=77, mem=70), 0.0, 6e8)
    s = ncu.summarize([norm], analytic_bytes=537e6, analytic_tensor_flops=0, analytic_vector_flops=6e8, ridge=14.0)
    assert s.diagnosis.startswith("memory-bound, traffic as modelled (DRAM bytes 0.95x")
    assert s.diagnosis.endswith("(1.2 FLOP/B measured, ridge 14)")


def test_diagnosis_latency_bound_below_sixty_percent_in_both():
    s = ncu.summarize([_k("tiny", sm=12, mem=41, occupancy=9.5)], analytic_bytes=1e6, analytic_tensor_flops=0,
                      analytic_vector_flops=0)
    assert s.diagnosis.startswith("latency-bound: SM 12% and memory 41% of peak (< 60%), occupancy 10%")
    assert ncu.summarize([], analytic_bytes=1, analytic_tensor_flops=0,
                         analytic_vector_flops=0).diagnosis == "no kernel was profiled"


def test_metric_names_from_query_and_the_metrics_asked_for():
    query = """Device NVIDIA H200 (GH100)
-----------------------------------------
Metric Name                                      Metric Type     Metric Description
dram__bytes_read                                 Counter         # of bytes read from DRAM
sm__ops_path_tensor_src_bf16_dst_fp32            Counter         # of math ops executed in Tensor path
sm__ops_path_tensor_src_bf16_dst_fp32_sparsity_on Counter        # of math ops ... sparsity on
sm__ops_path_tensor_src_fp8                      Counter         # of math ops ... FP8
"""
    names = ncu.parse_metric_names(query)
    assert names == {"dram__bytes_read", "sm__ops_path_tensor_src_bf16_dst_fp32",
                     "sm__ops_path_tensor_src_bf16_dst_fp32_sparsity_on", "sm__ops_path_tensor_src_fp8"}
    wanted = ncu.wanted_metrics(names)
    assert wanted[:5] == list(ncu.BASE_METRICS)
    assert wanted[5:] == ["sm__ops_path_tensor_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_src_fp8.sum"]
    assert ncu.wanted_metrics(None) == list(ncu.BASE_METRICS)


def test_the_ncu_command_profiles_only_the_timed_range_at_the_clocks_found():
    req = ProfileRequest("workloads/attn.yaml", "o_proj", "fused")
    cmd = _profile_cmd("/x/ncu", req, "o_proj[tokens=16,hidden=4096,bfloat16]", "r.ncu-rep", ["m.sum"], nvtx=True)
    assert cmd[:4] == ["/x/ncu", "--nvtx", "--nvtx-include", "solbench_timed/"]
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--metrics") + 1] == "m.sum" and cmd[cmd.index("--export") + 1] == "r.ncu-rep"
    tail = cmd[cmd.index(sys.executable):]
    assert tail[:3] == [sys.executable, "-m", "solbench.tools.profile_target"]
    assert "--profile-from-start" in _profile_cmd("/x/ncu", req, "c", "r", [], nvtx=False)


# ------------------------------------------------------------------ without ncu or without a GPU


def test_profile_without_ncu_is_one_line_exit_2(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty PATH: no ncu
    result = CliRunner().invoke(main, ["profile", "workloads/attn.yaml", "-w", "o_proj", "-i", "fused"])
    assert result.exit_code == 2
    assert result.output.strip() == "error: Nsight Compute (ncu) is not on PATH: install it or pass --ncu PATH"
    with pytest.raises(Exception, match="not an executable file"):
        find_ncu(str(tmp_path / "ncu"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message without a GPU")
def test_profile_with_ncu_but_without_a_gpu_is_one_line_exit_2(tmp_path):
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    result = CliRunner().invoke(main, ["profile", "workloads/attn.yaml", "-w", "o_proj", "-i", "fused",
                                       "--ncu", str(fake)])
    assert result.exit_code == 2
    line = result.output.strip()
    assert "\n" not in line and line.startswith("error: profile needs a CUDA GPU")


def test_profile_params_must_be_a_json_object():
    result = CliRunner().invoke(main, ["profile", "workloads/attn.yaml", "-w", "o_proj", "-i", "fused",
                                       "--params", "[1]", "--ncu", os.devnull])
    assert result.exit_code == 2 and "expected a JSON object" in result.output


@pytest.mark.parametrize(("args", "message"), [
    (["workloads/attn.yaml", "nope", "fused", "x"], "no workload named nope"),
    (["workloads/attn.yaml", "o_proj", "fused", "o_proj[tokens=3]"], "no case 'o_proj[tokens=3]' in o_proj"),
    (["workloads/attn.yaml", "o_proj", "nope", "o_proj[tokens=16,hidden=4096,bfloat16]"],
     "workload 'o_proj' has no implementation 'nope'"),
])
def test_profile_target_refuses_bad_input_with_exit_2(args, message, capsys):
    assert target_main(args) == 2
    assert message in capsys.readouterr().err


# ------------------------------------------------------------------ the whole flow, with a stand-in for ncu

FAKE_NCU = '''#!{python}
import sys
from pathlib import Path
args = sys.argv[1:]
log = Path(__file__).with_name("calls.txt")
log.write_text(log.read_text() + " ".join(args) + "\\n" if log.exists() else " ".join(args) + "\\n")
if args == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2025.3.1.0 (build 0)")
elif args == ["--query-metrics"]:
    print("dram__bytes_read  Counter  bytes\\nsm__ops_path_tensor_src_bf16_dst_fp32  Counter  ops")
elif "--import" in args:
    print(Path(__file__).with_name("sample.csv").read_text())
elif "--nvtx" in args and {nvtx_fails}:
    print("==PROF== Disconnected from process 1\\n==WARNING== No kernels were profiled.")
else:
    Path(args[args.index("--export") + 1]).write_bytes(b"report")
'''


@pytest.mark.parametrize("nvtx_fails", [False, True])
def test_profile_flow_with_a_stand_in_ncu(tmp_path, monkeypatch, nvtx_fails):
    from types import SimpleNamespace

    from solbench.config.hwspecs import get_spec

    fake = tmp_path / "ncu"
    fake.write_text(FAKE_NCU.format(python=sys.executable, nvtx_fails=nvtx_fails))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "sample.csv").write_text(SAMPLE)
    info = SimpleNamespace(name="NVIDIA H200", spec=get_spec("h200-sxm"))
    monkeypatch.setattr("solbench.device.detect.detect", lambda device: info)
    out = tmp_path / "out"
    case = "o_proj[tokens=16,hidden=4096,bfloat16]"
    result = CliRunner().invoke(main, ["profile", "workloads/attn.yaml", "-w", "o_proj", "-i", "fused", "--case", case,
                                       "--ncu", str(fake), "--out-dir", str(out), "--params", '{"block": 1}'])
    assert result.exit_code == 0, result.output
    # 2 GFLOP + 2.5 kFLOP over 54 MB measured: 37 FLOP/B, below the H200's bf16 ridge (989 TFLOP/s / 4.8 TB/s = 206)
    assert "diagnosis: memory-bound with extra traffic: DRAM bytes 1.59x the analytic fused bytes over 2 kernels" in result.output
    assert "gemm_kernel<128>(Params) moves 78% of them (37.0 FLOP/B measured, ridge 206)" in result.output
    assert "measured / analytic" in result.output
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    profiled = [c for c in calls if "--export" in c]
    assert len(profiled) == (2 if nvtx_fails else 1)
    assert "--nvtx-include solbench_timed/" in profiled[0]
    if nvtx_fails:
        assert "--profile-from-start off" in profiled[1] and "--nvtx" not in profiled[1]
    assert f"solbench.tools.profile_target workloads/attn.yaml o_proj fused {case}" in profiled[-1]
    assert '--params {"block": 1}' in profiled[-1]
    summary = next(out.glob("*.json"))
    data = json.loads(summary.read_text())
    assert data["ncu_rep"].endswith(".ncu-rep") and data["range_mode"] == ("profiler-api" if nvtx_fails else "nvtx")
    assert data["summary"]["analytic_bytes"] == 3 * (16 * 4096 * 2) + 4096 * 4096 * 2  # x, residual, out; w
    assert data["summary"]["bytes_ratio"] == pytest.approx(data["summary"]["measured_bytes"] / data["summary"]["analytic_bytes"])
    assert next(out.glob("*.csv")).read_text().strip() == SAMPLE.strip()
    assert data["ncu_version"] == "Version 2025.3.1.0 (build 0)"


def test_a_multi_rank_workload_is_refused_before_profiling(tmp_path, monkeypatch):
    """ncu profiles one process: there a world_size 2 workload's reference saw one rank's inputs and its
    all-reduce had no process group, and the target's failure read as the implementation's (exit 4)."""
    from types import SimpleNamespace

    from solbench.config.hwspecs import get_spec

    fake = tmp_path / "ncu"
    fake.write_text(FAKE_NCU.format(python=sys.executable, nvtx_fails=False))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "sample.csv").write_text(SAMPLE)
    monkeypatch.setattr("solbench.device.detect.detect",
                        lambda device: SimpleNamespace(name="NVIDIA H200", spec=get_spec("h200-sxm")))
    result = CliRunner().invoke(main, ["profile", "workloads/collectives.yaml", "-w", "allreduce", "-i", "baseline",
                                       "--ncu", str(fake), "--out-dir", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    line = " ".join(result.output.split())  # one line, wrapped by the test terminal's width
    assert "workloads/collectives.yaml:" in line and "workloads.0.world_size: workload 'allreduce' has world_size 2" in line
    calls = tmp_path / "calls.txt"
    assert not calls.exists() or "--export" not in calls.read_text()  # nothing profiled


def test_profile_into_a_folder_it_cannot_make_is_one_line_exit_2_before_profiling(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from solbench.config.hwspecs import get_spec

    fake = tmp_path / "ncu"
    fake.write_text(FAKE_NCU.format(python=sys.executable, nvtx_fails=False))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    info = SimpleNamespace(name="NVIDIA H200", spec=get_spec("h200-sxm"))
    monkeypatch.setattr("solbench.device.detect.detect", lambda device: info)
    (tmp_path / "file").write_text("not a folder")
    out = tmp_path / "file" / "profiles"
    result = CliRunner().invoke(main, ["profile", "workloads/attn.yaml", "-w", "o_proj", "-i", "fused",
                                       "--ncu", str(fake), "--out-dir", str(out)])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output  # was NotADirectoryError, 5
    assert result.output.strip().startswith(f"error: {out}: cannot write results there")
    assert not (tmp_path / "calls.txt").exists()  # ncu never ran


# ------------------------------------------------------------------ real captures (H200, ncu 2025.3.1)

DATA = Path(__file__).resolve().parents[1] / "data"


def _capture(name):
    return ncu.parse_raw_csv((DATA / f"ncu_h200_{name}.csv").read_text())


def test_h200_gemv_capture_counts_exactly_the_gemm_flops():
    (k,) = _capture("o_proj_16_fused")  # only the timed call: the NVTX range held one kernel
    assert k.name.startswith("void gemv_residual_kernel<0, 2>(")
    assert (k.dram_read, k.dram_write) == (33_835_776, 1_190_656)
    assert k.duration == pytest.approx(14.624e-6)
    assert k.tensor_flops == 2 * 16 * 4096 * 4096  # one tensor-pipe op is one FLOP (TENSOR_FLOPS_PER_OP)
    assert k.sm_pct == 15.39 and k.grid == "(128, 1, 1)" and k.block == "(256, 1, 1)"
    assert "solbench_timed" in (DATA / "ncu_h200_o_proj_16_fused.csv").read_text()


def test_h200_gemm_capture_counts_the_padded_tiles():
    (k,) = _capture("o_proj_16384_fused")
    assert k.name == "nvjet_sm90_tst_320x128_64x3_1x2_h_badd_coopB_TNT"
    # 16384 rows in 320-row tiles: 52 tiles, 16640 rows computed
    assert k.tensor_flops == 2 * 16640 * 4096 * 4096
    s = ncu.summarize([k], analytic_bytes=436_207_616, analytic_tensor_flops=2 * 16384 * 4096 * 4096,
                      analytic_vector_flops=16384 * 4096, ridge=989.4e12 / 4.8e12)
    assert s.bytes_ratio == pytest.approx((729_831_680 + 130_568_192) / 436_207_616)
    assert s.diagnosis.startswith("compute-bound: SM throughput 91% of peak")


def test_h200_two_kernel_capture_sums_and_weights():
    add, norm = _capture("residual_layernorm_baseline")
    assert "CUDAFunctor_add" in add.name and "layer_norm_kernel" in norm.name
    s = ncu.summarize([add, norm], analytic_bytes=4 * 16384 * 4096 * 2 + 2 * 4096 * 2,
                      analytic_vector_flops=9 * 16384 * 4096, analytic_tensor_flops=0, ridge=66.9e12 / 4.8e12)
    assert s.measured_bytes == add.dram_bytes + norm.dram_bytes
    assert s.duration == pytest.approx(add.duration + norm.duration)
    assert min(add.sm_pct, norm.sm_pct) < s.sm_pct < max(add.sm_pct, norm.sm_pct)
    assert s.diagnosis.startswith("memory-bound")


def test_profile_of_a_misspelt_implementation_names_the_close_one(monkeypatch, tmp_path):
    from types import SimpleNamespace

    from solbench.config.hwspecs import get_spec

    ncu = tmp_path / "ncu"
    ncu.write_text("#!/bin/sh\nexit 0\n")
    ncu.chmod(0o755)
    monkeypatch.setattr("solbench.device.detect.detect",
                        lambda device: SimpleNamespace(name="NVIDIA H200", spec=get_spec("h200-sxm")))
    result = CliRunner().invoke(main, ["profile", "workloads/attn.yaml", "-w", "o_proj", "-i", "fusd",
                                       "--ncu", str(ncu)])
    line = " ".join(result.output.split())
    assert result.exit_code == 2 and "has no implementation 'fusd' (did you mean 'fused'?)" in line, result.output
