"""KernelBench- and SOL-ExecBench-style problems (our own small files in those formats) read in
place, traced, run end to end on the CPU, and malformed ones refused with one line."""

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from solbench.cli import main
from solbench.plan.workloads import plan
from solbench.results import store
from solbench.suites import detect, load
from solbench.suites.trace import probe
from solbench.workload.cases import expand

DATA = Path(__file__).resolve().parents[1] / "data"
KB = DATA / "kernelbench"
SOL = DATA / "solexec" / "rmsnorm"
FAST = ["--budget", "0.05", "--min-samples", "3", "--max-samples", "10", "--device", "cpu"]


@pytest.fixture
def runner():
    return CliRunner()


def test_detect_by_shape():
    assert detect(KB / "level1" / "1_Square_matmul.py") == "kernelbench"
    assert detect(KB / "level1") == "kernelbench"
    assert detect(SOL) == "sol-execbench"
    assert detect(SOL.parent) == "sol-execbench"
    assert detect(DATA / "double.yaml") is None


def test_kernelbench_problem_reads_with_provenance_and_cpu_profile():
    [(spec, origin)] = load(KB / "level2" / "1_Conv2D_ReLU_BiasAdd.py")
    assert origin.name == "1_Conv2D_ReLU_BiasAdd.py"
    assert spec.source.suite == "kernelbench" and len(spec.source.sha256) == 64
    assert spec.parameters["out_channels"] == [64] and spec.cost == "traced"
    assert set(spec.implementations) == {"baseline", "compiled"}
    cpu = spec.profiles["cpu"].parameters
    assert cpu["kernel_size"] == [3] and cpu["in_channels"] == [3]  # small sizes are left alone
    assert cpu["height"][0] < 128


def test_traced_cost_of_a_matmul_is_2mnk_and_bytes_are_inputs_plus_outputs():
    [(spec, _)] = load(KB / "level1" / "1_Square_matmul.py")
    [case] = expand(spec, "cuda")
    filled, cost = probe(spec, case, None)
    n = 256
    assert [t.shape for t in filled.inputs + filled.outputs] == [(n, n)] * 3
    assert cost.tensor_flops == 2 * n**3 and cost.source == "traced"
    assert cost.fused_bytes == 3 * n * n * 4


def test_traced_bytes_count_parameters_and_vector_work():
    [(spec, _)] = load(KB / "level2" / "1_Conv2D_ReLU_BiasAdd.py")
    [case] = expand(spec, "cuda")
    filled, cost = probe(spec, case, None)
    out = filled.outputs[0]
    assert out.shape == (8, 64, 126, 126)
    weights = (64 * 3 * 3 * 3 + 64 + 64) * 4  # conv weight, conv bias, the added bias
    assert filled.extra_bytes == weights
    assert cost.fused_bytes == filled.inputs[0].nbytes + out.nbytes + weights
    assert cost.tensor_flops == 2 * 8 * 64 * 126 * 126 * 3 * 3 * 3
    assert cost.conv_flops == cost.tensor_flops  # every tensor FLOP is the convolution's
    assert cost.vector_flops == 2 * out.numel  # relu, then the bias add


def test_imported_fp32_problems_are_priced_as_torch_runs_them(runner):
    """torch runs fp32 convolutions on TF32 tensor cores by default and fp32 matmuls on CUDA cores:
    an imported problem's convolution is priced at the TF32 peak, its matmul at the fp32 peak."""
    from solbench.config.hwspecs import get_spec

    h200 = get_spec("h200")
    for problem, tensor_peak in [("level2/1_Conv2D_ReLU_BiasAdd.py", h200.peaks_for("float32", tf32=True)),
                                 ("level1/1_Square_matmul.py", h200.peaks_for("float32"))]:
        [(spec, _)] = load(KB / problem)
        assert spec.fp32_peak == "torch"
        result = runner.invoke(main, ["run", str(KB / problem), "--dry-run", "--gpu", "h200", "--json"])
        assert result.exit_code == 0, result.output
        [case] = json.loads(result.output)["cases"]
        assert case["peak_policy"] == "torch"
        assert case["peaks"]["tensor_flops"] == pytest.approx(tensor_peak.tensor_flops)
    [(spec, _)] = load(KB / "level1" / "1_Square_matmul.py")
    [case] = expand(spec, "cuda")
    assert probe(spec, case, None)[1].conv_flops == 0.0


def test_dry_run_of_a_level_folder_prints_every_problem_and_marks_traced_costs(runner):
    result = runner.invoke(main, ["run", str(KB / "level1"), "--dry-run", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert "level1_1_Square_matmul" in result.output and "level1_23_Softmax" in result.output
    assert "‡" in result.output and "T_SOL from a traced cost" in result.output


@pytest.fixture(scope="module")
def kb_new_run(tmp_path_factory):
    """One CPU run of 1_Square_matmul with its ModelNew solution (``new``): (result, saved JSON)."""
    out = tmp_path_factory.mktemp("kb") / "kb.json"
    result = CliRunner().invoke(main, ["run", str(KB / "level1" / "1_Square_matmul.py"), "--solution",
                                       str(KB / "solutions" / "1_Square_matmul_new.py"), "-i", "baseline", "-i", "new",
                                       "--in-process", "-o", str(out), *FAST])
    return result, out


def test_kernelbench_solutions_run_end_to_end_and_a_cached_output_is_caught(runner, tmp_path, kb_new_run):
    result, out = kb_new_run
    problem = KB / "level1" / "1_Square_matmul.py"
    assert result.exit_code == 0, result.output
    run = store.load(out)
    [case] = run.cases
    assert case.source.startswith("kernelbench:") and case.cost.source == "traced"
    assert case.impl("new").status == "ok" and case.impl("new").score.speedup is not None
    cheat = runner.invoke(main, ["run", str(problem), "--solution",
                                 str(KB / "solutions" / "1_Square_matmul_cached.py"), "-i", "solution",
                                 "--in-process", "-o", str(tmp_path / "cheat.json"), *FAST])
    assert cheat.exit_code == 4, cheat.output
    assert "INCORRECT" in cheat.output or "REWARD" in cheat.output.upper()


@pytest.mark.parametrize("mode", [[], ["--in-process"]], ids=["worker", "in-process"])
def test_a_solution_returning_a_1_tuple_where_model_returns_a_tensor_is_incorrect(runner, tmp_path, mode):
    out = tmp_path / "tuple.json"
    result = runner.invoke(main, ["run", str(KB / "level1" / "1_Square_matmul.py"), "--solution",
                                  str(KB / "solutions" / "1_Square_matmul_new_tuple.py"), "-i", "new_tuple",
                                  "--repeat", "1", "-o", str(out), *mode, *FAST])
    assert result.exit_code == 4, result.output
    r = store.load(out).cases[0].impl("new_tuple")
    assert (r.status, r.message) == ("incorrect", "returned a tuple of 1 where the reference returns a tensor (out)")


def test_a_solution_with_another_parameter_order_gets_the_problems_weights():
    [(spec, _)] = load(KB / "level2" / "2_Linear_ReLU_order.py",
                       [KB / "solutions" / "2_Linear_ReLU_order_new.py"])
    assert "new" in spec.implementations
    from solbench.suites import kb_runtime

    params = {"batch_size": 32, "in_features": 64, "out_features": 64}
    import torch

    ref = kb_runtime.build(spec.source.path, "Model", params, torch.device("cpu"))
    new = kb_runtime.build(spec.source.path, "ModelNew", params, torch.device("cpu"),
                           spec.implementations["new"].params["solution"])
    assert torch.equal(ref.first.weight, new.first.weight) and torch.equal(ref.second.bias, new.second.bias)


def test_sol_execbench_folder_runs_with_scalar_input_dps_solution_and_per_case_tolerance(runner, tmp_path):
    [p] = plan([SOL], "cpu")
    assert [c.params["wl"] for c in p.cases] == [0, 1]
    assert p.cases[0].scalars == ("eps",)
    assert p.spec.case_tolerances[1].matched_ratio == 0.95 and p.spec.case_tolerances[1].error_cap == 0.5
    assert p.spec.implementations["rmsnorm_dps"].destination
    out = tmp_path / "sol.json"
    result = runner.invoke(main, ["run", str(SOL), "-i", "baseline", "-i", "rmsnorm_dps", "--in-process",
                                  "-o", str(out), *FAST])
    assert result.exit_code == 0, result.output
    run = store.load(out)
    assert {r.status for c in run.cases for r in c.impls} == {"ok"}
    assert all(c.source.startswith("sol-execbench:") for c in run.cases)


@pytest.mark.parametrize(("path", "needle"), [
    (KB / "bad" / "no_model.py", "no class Model"),
    (KB / "bad" / "inputs_raise.py", "get_inputs() raised RuntimeError: no inputs today"),
    (KB / "bad" / "needs_module.py", "No module named 'solbench_no_such_module' (the problem needs it: pip install "
                                     "solbench_no_such_module)"),
    (DATA / "solexec_bad" / "unknown_axis", "axes.n: unknown axis type 'variable'"),
])
def test_malformed_problems_exit_2_with_one_line_naming_the_file(runner, path, needle):
    result = runner.invoke(main, ["run", str(path), "--dry-run", "--device", "cpu"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0] and path.name in lines[0], result.output


@pytest.mark.parametrize(("command", "src", "solution", "kind"), [
    ("run", KB / "level1", KB / "solutions" / "2_Linear_ReLU_order_new.py", "a KernelBench ModelNew file"),
    ("run", KB / "level1" / "1_Square_matmul.py", DATA / "solexec_solutions" / "rmsnorm_cuda.json",
     "a SOL-ExecBench solution"),
    ("run", Path("workloads/attn.yaml"), DATA / "solexec_solutions" / "rmsnorm_cuda.json", "a SOL-ExecBench solution"),
    ("import", KB / "level1", DATA / "solexec_solutions" / "rmsnorm_cuda.json", "a SOL-ExecBench solution"),
])
def test_a_solution_that_joins_no_problem_is_refused_not_dropped(runner, tmp_path, command, src, solution, kind):
    args = ["--dry-run", "--device", "cpu", "-o", str(tmp_path / "r.json")] if command == "run" else \
        ["--out", str(tmp_path / "out")]
    result = runner.invoke(main, [command, str(src), "--solution", str(solution), *args])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert f"--solution {solution}: {kind} that belongs to no problem of {src}" in lines[0]
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_solution_joins_the_problem_of_its_own_suite_among_several_paths():
    solution = KB / "solutions" / "2_Linear_ReLU_order_new.py"
    planned = plan([KB / "level1", KB / "level2"], "cpu", solutions=[solution])
    joined = {p.spec.name: [i for i in p.spec.implementations if i not in ("baseline", "compiled")] for p in planned}
    assert [name for name, extra in joined.items() if extra] == ["level2_2_Linear_ReLU_order"], joined


def test_import_writes_yaml_that_runs_the_same_workload(runner, tmp_path):
    result = runner.invoke(main, ["import", str(KB / "level1" / "23_Softmax.py"), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    [written] = sorted(tmp_path.glob("*.yaml"))
    [p] = plan([written], "cpu")
    [q] = plan([KB / "level1" / "23_Softmax.py"], "cpu")
    assert p.spec == q.spec
    assert [c.id for c in p.cases] == [c.id for c in q.cases]


def test_show_prints_the_suite_summary_of_a_kernelbench_run(runner, tmp_path, kb_new_run):
    result, out = kb_new_run
    assert result.exit_code == 0, result.output
    run = store.load(out)
    assert {r.name: r.status for r in run.cases[0].impls} == {"baseline": "ok", "new": "ok"}
    shown = runner.invoke(main, ["show", str(out), "--fast-p", "0", "--fast-p", "1", "--fast-p", "1.5"])
    assert shown.exit_code == 0, shown.output
    assert "suite summary" in shown.output and "fast_1.5" in shown.output and "mean S" in shown.output
    [row] = [line for line in shown.output.splitlines() if "kernelbench" in line and "new" in line]
    assert "100% (1/1)" in row  # fast_0: correct with a baseline time; fast_1 depends on the timings
    [saved] = json.loads(out.read_text())["suite_summary"]
    assert saved["impl"] == "new" and saved["correct"] == 1 and [f["p"] for f in saved["fast"]] == [0.0, 1.0]
    assert saved["fast"][1]["count"] == (run.cases[0].impl("new").score.speedup > 1.0)
    as_json = json.loads(runner.invoke(main, ["show", str(out), "--json", "--fast-p", "2"]).stdout)
    assert [f["p"] for f in as_json["suite_summary"][0]["fast"]] == [2.0]
    md = runner.invoke(main, ["show", str(out), "--markdown"]).output
    assert "#### suite summary" in md and "| kernelbench | new |" in md
    page = tmp_path / "r.html"
    report = runner.invoke(main, ["report", str(out), "--html", str(page), "--fast-p", "3"])
    assert report.exit_code == 0, report.output
    assert "Suite summary" in page.read_text() and "fast_3" in page.read_text()


def test_a_solution_found_beside_a_problem_for_another_definition_is_skipped_and_said(tmp_path):
    """SOL-ExecBench's own samples hold a solution naming another definition: found beside the
    problem it is left out (and said in the description); asked for with --solution it is refused."""
    import shutil

    from solbench.errors import ConfigError
    from solbench.suites.solexec import read as load_solexec

    folder = tmp_path / "rmsnorm"
    shutil.copytree(SOL, folder)
    other = json.loads(next(folder.glob("solution*.json")).read_text())
    stray = folder / "solution_other.json"
    stray.write_text(json.dumps({**other, "name": "other", "definition": "vecadd"}))
    spec = load_solexec(folder)
    assert "other" not in spec.implementations
    assert "solution_other.json skipped: a solution of 'vecadd'" in spec.description
    with pytest.raises(ConfigError, match="a solution of 'vecadd'"):
        load_solexec(folder, [stray])


def _rmsnorm_variant(tmp_path, reference=None, weight_input=None):
    """tests/data/solexec/rmsnorm copied, with another reference source or weight input spec."""
    import shutil

    folder = tmp_path / "rms"
    shutil.copytree(SOL, folder)
    for stray in folder.glob("solution*.json"):
        stray.unlink()
    d = json.loads((folder / "definition.json").read_text())
    if reference is not None:
        d["reference"] = reference
    (folder / "definition.json").write_text(json.dumps(d))
    if weight_input is not None:
        lines = [json.loads(x) for x in (folder / "workload.jsonl").read_text().splitlines()]
        for line in lines:
            line["inputs"]["weight"] = weight_input
        (folder / "workload.jsonl").write_text("\n".join(map(json.dumps, lines)))
    return folder


def test_a_reference_that_reads_a_value_is_traced_on_the_real_device(runner, tmp_path):
    """``.item()`` cannot run on the meta device: the cost is traced on the CPU with real inputs:
    the same bytes as the plain RMSNorm, and its vector work plus the extra abs and max."""
    reads = ("import torch\n\n\ndef run(input, weight, eps):\n"
             "    assert input.abs().max().item() >= 0\n"
             "    variance = input.to(torch.float32).pow(2).mean(-1, keepdim=True)\n"
             "    rstd = torch.rsqrt(variance + eps)\n"
             "    return (input.to(torch.float32) * rstd * weight.to(torch.float32)).to(weight.dtype)\n")
    folder = _rmsnorm_variant(tmp_path, reference=reads)
    [p] = plan([folder], "cpu")
    [q] = plan([SOL], "cpu")
    assert [c.id.split("[")[1] for c in p.cases] == [c.id.split("[")[1] for c in q.cases]
    for a, b in zip(p.cases, q.cases, strict=True):
        assert p.costs[a.id].fused_bytes == q.costs[b.id].fused_bytes
        assert p.costs[a.id].tensor_flops == q.costs[b.id].tensor_flops == 0.0
        assert p.costs[a.id].vector_flops == q.costs[b.id].vector_flops + 2 * a.inputs[0].numel + 1
    out = tmp_path / "r.json"
    result = runner.invoke(main, ["run", str(folder), "-i", "baseline", "--in-process", "-o", str(out), *FAST])
    assert result.exit_code == 0, result.output
    assert {r.status for c in store.load(out).cases for r in c.impls} == {"ok"}


READS = ("import torch\n\n\ndef run(input, weight, eps):\n"
         "    assert input.abs().max().item() >= 0\n"
         "    return (input.to(torch.float32) * weight.to(torch.float32)).to(weight.dtype)\n")
MISSING = {"type": "safetensors", "path": "blob/w.safetensors", "tensor_key": "weight"}


def test_a_case_whose_safetensors_input_is_not_here_is_skipped_when_timed(runner, tmp_path):
    folder = _rmsnorm_variant(tmp_path, weight_input=MISSING)
    out = tmp_path / "t.json"
    result = runner.invoke(main, ["run", str(folder), "--in-process", "-o", str(out), *FAST])
    assert result.exit_code == 0, result.output
    impls = [r for c in store.load(out).cases for r in c.impls]
    assert impls and all(r.status == "skipped" and "w.safetensors" in r.message for r in impls)


def test_a_case_that_cannot_be_traced_without_its_safetensors_input_is_skipped_and_said(runner, tmp_path):
    """The reference reads a value (no meta trace) and its weight is in a file that is not here (no
    trace on the CPU either): the case is left out of the plan and listed as skipped, exit 0."""
    folder = _rmsnorm_variant(tmp_path, reference=READS, weight_input=MISSING)
    out = tmp_path / "s.json"
    result = runner.invoke(main, ["run", str(folder), "--in-process", "-o", str(out), *FAST])
    assert result.exit_code == 0, result.output
    run = store.load(out)
    assert run.cases == ()
    skipped = [n for n in run.notes if n.startswith("skipped ")]
    assert len(skipped) == 2 and all("w.safetensors" in n and "not on this machine" in n for n in skipped)
    assert "skipped rms" in result.output


def test_an_inline_reference_has_its_source_for_inspect(tmp_path):
    """A reference given inline in definition.json is executed with its source in linecache, so a
    decorator that reads its function's source (Triton's @jit) finds it."""
    import inspect

    from solbench.suites import sol_runtime

    source = ("import inspect\n\n\ndef _needs_source(fn):\n    fn.src = inspect.getsource(fn)\n    return fn\n\n\n"
              "@_needs_source\ndef run(x):\n    return x + 1\n")
    folder = _rmsnorm_variant(tmp_path, reference=source)
    module = sol_runtime.reference_module(str(folder / "definition.json"))
    assert "return x + 1" in module.run.src
    assert inspect.getsource(module.run).startswith("@_needs_source")


SOLUTIONS = DATA / "solexec_solutions"
CAN_BUILD = shutil.which("ninja") is not None and shutil.which("c++") is not None


@pytest.mark.skipif(not CAN_BUILD, reason="needs a C++ compiler and ninja to build a torch extension")
def test_cpp_solutions_are_built_at_set_up_and_what_cannot_build_is_said(runner, tmp_path, monkeypatch):
    """SOL-ExecBench's C++/CUDA solutions (torch binding) are built as SOL-ExecBench builds them:
    one that compiles runs and is checked like any other; one that does not compile fails with the
    compiler's first error (exit 4); one that needs what this machine lacks is skipped with what it
    needs. The build lands in $TORCH_EXTENSIONS_DIR once, however many cases use it."""
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.setenv("CUTLASS_DIR", str(tmp_path / "no_cutlass"))
    names = ["cpp", "broken", "cutlass", "dsl", "tile", "cuda"]
    out = tmp_path / "b.json"
    args = ["run", str(SOL), "--in-process", "-o", str(out), "--repeat", "1", "-i", "baseline", *FAST]
    for n in names:
        args += ["--solution", str(SOLUTIONS / f"rmsnorm_{n}.json"), "-i", f"rmsnorm_{n}"]
    result = runner.invoke(main, args)
    assert result.exit_code == 4, result.output
    by = {(c.params["wl"], r.name): r for c in store.load(out).cases for r in c.impls}
    for wl in (0, 1):
        assert by[wl, "rmsnorm_cpp"].status == "ok", by[wl, "rmsnorm_cpp"].message
        assert by[wl, "rmsnorm_cpp"].correctness.passed
        broken = by[wl, "rmsnorm_broken"]
        assert broken.status == "error" and "the build failed: main.cpp:3:" in broken.message
        assert "error: expected primary-expression" in broken.message
        assert by[wl, "rmsnorm_cutlass"].status == "skipped"
        assert "needs CUTLASS's headers" in by[wl, "rmsnorm_cutlass"].message
        assert by[wl, "rmsnorm_dsl"].status == "skipped"
        assert "needs the Python module 'solbench_no_such_dsl'" in by[wl, "rmsnorm_dsl"].message
        assert by[wl, "rmsnorm_tile"].status == "skipped"
        assert "needs the Python module 'json.solbench_tile'" in by[wl, "rmsnorm_tile"].message
        assert by[wl, "rmsnorm_cuda"].status == "skipped" and "needs CUDA" in by[wl, "rmsnorm_cuda"].message
    built = list((tmp_path / "ext").glob("*/solbench_sol_*/solbench_sol_*.so"))
    assert len(built) == 1, built  # the one that compiled, built once for both cases


def test_a_cpp_solution_is_built_ahead_once_and_a_python_one_not_at_all():
    """A C++ solution declares ``requires: [build]``; compiling ahead builds it once, for its first case
    (the build serves every case), beside torch.compile's work on every case."""
    from solbench.execute import warm
    from solbench.measure.worker import MeasureSettings
    from solbench.plan.prepare import Unit

    [(spec, _)] = load(SOL, [SOLUTIONS / "rmsnorm_cpp.json", SOLUTIONS / "rmsnorm_dsl.json"])
    assert spec.implementations["rmsnorm_cpp"].requires == ["build"]
    assert spec.implementations["rmsnorm_dsl"].requires == []
    [p] = plan([SOL], "cpu", solutions=[SOLUTIONS / "rmsnorm_cpp.json", SOLUTIONS / "rmsnorm_dsl.json"])
    assert len(p.cases) >= 2
    tasks = warm.warm_tasks([Unit(p.spec, p.path, tuple(p.cases), tuple(p.spec.implementations))],
                            MeasureSettings(), "cpu", threads=1)
    built = [t.case.id for t in tasks if t.impl == "rmsnorm_cpp"]
    assert built == ([p.cases[0].id] if CAN_BUILD else [])  # without a toolchain it is skipped, not built
    assert not [t for t in tasks if t.impl in ("baseline", "rmsnorm_dsl")]


MISSING_MODULE = ("import torch\nimport solbench_no_such_kernels as k\n\n\ndef run(input, weight, eps):\n"
                  "    return k.rmsnorm(input, weight, eps)\n")


@pytest.mark.parametrize(("reference", "gpu", "needle"), [
    (READS, ["--gpu", "h200"], "no cost: the reference cannot run on the meta device (RuntimeError: "),
    (MISSING_MODULE, [], "the reference needs the Python module 'solbench_no_such_kernels', which is not installed"),
])
def test_a_case_whose_reference_cannot_be_traced_here_is_skipped_in_a_dry_run(runner, tmp_path, reference, gpu,
                                                                             needle):
    """A folder of problems is not stopped by one whose reference this machine cannot trace: one
    that reads a value, in a what-if for a GPU this machine lacks (no meta trace, no device to
    trace it on), or one that needs a package that is not installed. Its cases are skipped, said."""
    folder = _rmsnorm_variant(tmp_path, reference=reference)
    out = tmp_path / "d.json"
    result = runner.invoke(main, ["run", str(folder), str(SOL), "--dry-run", *gpu, "-o", str(out)])
    assert result.exit_code == 0, result.output
    run = store.load(out)
    skipped = [n for n in run.notes if n.startswith("skipped ")]
    assert len(skipped) == 2 and all(needle in n for n in skipped), skipped
    assert {c.workload for c in run.cases} == {"rmsnorm"} and len(run.cases) == 2  # the other problem is costed


def test_a_folder_of_more_than_max_problems_entries_is_refused_not_truncated(runner, tmp_path, monkeypatch):
    """A folder import read only its first MAX_PROBLEMS entries and dropped the rest without a word."""
    import solbench.suites

    level = tmp_path / "level1"
    shutil.copytree(KB / "level1", level)
    monkeypatch.setattr(solbench.suites, "MAX_PROBLEMS", len(list(level.iterdir())) - 1)
    result = runner.invoke(main, ["run", str(level), "--dry-run", "--device", "cpu"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    limit = solbench.suites.MAX_PROBLEMS
    assert len(lines) == 1 and str(level) in lines[0] and f"more than {limit} entries" in lines[0], result.output


READS_A_VALUE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """x / (1 + max |x|): forward reads the max with .item() (a host sync)."""

    def forward(self, x):
        return x / (1.0 + x.abs().max().item())


N = 4096


def get_inputs():
    return [torch.rand(N, 512)]


def get_init_inputs():
    return []
'''


def test_a_kernelbench_forward_that_reads_a_value_is_traced_with_real_inputs_and_run(runner, tmp_path):
    """``.item()`` cannot run on the meta device, where the problem's outputs and cost were read: the
    file was refused ('Model's forward raised RuntimeError: Tensor.item() cannot be called on meta
    tensors', exit 2), where a SOL-ExecBench reference that reads a value is traced with real inputs.
    Its outputs are now read from one call with real inputs, its cost traced per case on the run's
    device, and it has no CPU profile (halving sizes needs the meta trace): it runs at the file's size."""
    problem = tmp_path / "level1" / "9_Reads_max.py"
    problem.parent.mkdir()
    problem.write_text(READS_A_VALUE)
    [(spec, _)] = load(problem)
    assert list(spec.outputs) == ["out"] and "cpu" not in spec.profiles
    assert "no CPU profile" in spec.description and ".item()" in spec.description
    [p] = plan([problem], "cpu")
    cost = p.costs[p.cases[0].id]
    assert cost.fused_bytes == 2 * 4096 * 512 * 4  # x and out, float32
    out = tmp_path / "r.json"
    result = runner.invoke(main, ["run", str(problem), "-i", "baseline", "--in-process", "-o", str(out), *FAST])
    assert result.exit_code == 0, result.output
    assert [r.status for c in store.load(out).cases for r in c.impls] == ["ok"]


@pytest.mark.parametrize("device,index", [("cuda", 1), ("cuda:2", 2), ("cpu", None)])
def test_a_kernelbench_problems_inputs_fork_the_generator_of_the_gpu_they_are_drawn_on(tmp_path, monkeypatch,
                                                                                      device, index):
    """get_inputs() runs under torch's seeded global generators, given back after; on ``cuda`` (a worker's
    own GPU, made current) GPU 0's were forked, not that GPU's. Mocked: no GPU is needed."""
    import torch

    from solbench.suites import kb_runtime

    forked = []
    real = torch.random.fork_rng
    monkeypatch.setattr(torch.random, "fork_rng", lambda devices: forked.append(list(devices)) or real(devices=[]))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    problem = tmp_path / "problem.py"
    problem.write_text("N = 4\n\ndef get_inputs():\n    return [N]\n")
    generator = torch.Generator().manual_seed(5)
    assert kb_runtime.inputs({"N": 8}, device, generator, str(problem), "n") == {"n": 8}
    assert forked == [[] if index is None else [index]]
