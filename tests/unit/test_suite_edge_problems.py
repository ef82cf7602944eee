"""Suite problems at the edges of their formats (our own small files in tmp_path): what KernelBench
and SOL-ExecBench accept runs as it does there, and what they refuse is one line naming the file."""

import json

import pytest
import torch
from click.testing import CliRunner

from solbench.cli import main
from solbench.measure.runner import build_launches, draw_inputs
from solbench.suites import load
from solbench.suites.trace import probe
from solbench.workload.cases import expand

KB_TWO_INPUTS = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, {name}):
        return x * 2 + {name}


size = 8


def get_inputs():
    return [torch.randn(size, size), torch.randn(size, size)]


def get_init_inputs():
    return []
'''


@pytest.fixture
def runner():
    return CliRunner()


def _first_case(spec):
    [case, *_] = expand(spec, "cpu")
    return probe(spec, case, None)[0]


@pytest.mark.parametrize("name", ["problem", "order", "cls", "solution", "compile"])
def test_a_forward_parameter_named_as_the_runtimes_own_runs(tmp_path, name):
    """forward's inputs are passed by name beside the problem file, the input order, the class and
    solution to build and whether to compile: an input named ``cls`` (or ``problem``, ...) took their
    place, and the baseline failed at set-up (or the import with KeyError: 'problem')."""
    path = tmp_path / f"uses_{name}.py"
    path.write_text(KB_TWO_INPUTS.format(name=name))
    [(spec, _)] = load(path)
    case = _first_case(spec)
    inputs = draw_inputs(spec, case, "cpu", None, seed=1)
    first, second = inputs.values()
    [launch] = build_launches(spec.implementations["baseline"], case, [inputs], None)
    torch.testing.assert_close(launch(), first * 2 + second)


def _sol(tmp_path, inputs, reference, lines, **extra):
    """A SOL-ExecBench problem folder: one var axis ``batch``, the given inputs and reference."""
    folder = tmp_path / "problem"
    folder.mkdir()
    definition = {"name": "problem", "axes": {"batch": {"type": "var"}}, "inputs": inputs,
                  "outputs": {"y": {"shape": ["batch", "64"], "dtype": "float32"}},
                  "reference": reference, **extra}
    (folder / "definition.json").write_text(json.dumps(definition))
    (folder / "workload.jsonl").write_text("".join(json.dumps({"uuid": str(i), **line}) + "\n"
                                                   for i, line in enumerate(lines)))
    return folder


def test_a_shape_with_a_literal_size_runs(tmp_path):
    """SOL-ExecBench reads a shape entry of digits (``"64"``) as that size; it was looked up as an axis
    name: the import wrote the workload (without a CPU profile) and every run of it failed, KeyError: '64'."""
    folder = _sol(tmp_path, {"x": {"shape": ["batch", "64"], "dtype": "float32"}},
                  "def run(x):\n    return x * 2\n", [{"axes": {"batch": 8}, "inputs": {"x": {"type": "random"}}}])
    [(spec, _)] = load(folder)
    case = _first_case(spec)
    assert [t.shape for t in case.inputs + case.outputs] == [(8, 64), (8, 64)]
    assert draw_inputs(spec, case, "cpu", None, seed=1)["x"].shape == (8, 64)


X_AND_ALPHA = {"x": {"shape": ["batch", "64"], "dtype": "float32"}, "alpha": {"shape": None, "dtype": "float32"}}
SCALED = "def run(x, alpha):\n    return x * alpha\n"


@pytest.mark.parametrize(("inputs", "extra", "needle"), [
    ({"x": {"type": "safetensor", "path": "x.st", "tensor_key": "x"}}, {},
     "workload.jsonl:1: inputs.x.type: expected one of random, scalar, safetensors, custom, not 'safetensor'"),
    ({"x": {"type": "custom"}}, {},
     "workload.jsonl:1: inputs.x: a custom input needs the definition's custom_inputs_entrypoint"),
    ({"alpha": {"type": "scalar"}}, {}, "workload.jsonl:1: inputs.alpha.value: a scalar input needs a number"),
    ({"x": {"type": "safetensors", "path": "x.safetensors"}}, {},
     "workload.jsonl:1: inputs.x: a safetensors input needs path and tensor_key"),
    ({"x": "random"}, {}, "workload.jsonl:1: inputs.x.type: expected one of"),
    ({"x": {"type": "custom"}, "alpha": {"type": "custom"}}, {"custom_inputs_entrypoint": "make"},
     "definition.json:reference defines no 'make' at top level"),
])
def test_a_workload_input_sol_execbench_refuses_is_one_line_naming_the_line(runner, tmp_path, inputs, extra,
                                                                              needle):
    """Each was read as it came: an unknown type (a typo of safetensors) or a custom input with no
    entry point drew random inputs and the run exited 0 on data the problem does not describe; a
    scalar without its value was None and every implementation failed."""
    folder = _sol(tmp_path, X_AND_ALPHA, SCALED, [{"axes": {"batch": 8}, "inputs": inputs}], **extra)
    result = runner.invoke(main, ["import", str(folder), "--out", str(tmp_path / "out")])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and needle in lines[0], result.output
    assert not (tmp_path / "out").exists()


def test_a_random_scalar_input_is_drawn_as_sol_execbench_draws_it(tmp_path):
    """A scalar input of type random (or not described on the line) was None: the trace and every
    implementation failed (``Tensor * NoneType``); SOL-ExecBench draws a number for it."""
    folder = _sol(tmp_path, X_AND_ALPHA, SCALED, [{"axes": {"batch": 8}, "inputs": {"alpha": {"type": "random"}}}])
    [(spec, _)] = load(folder)
    case = _first_case(spec)
    inputs = draw_inputs(spec, case, "cpu", None, seed=1)
    assert isinstance(inputs["alpha"], float)
    [launch] = build_launches(spec.implementations["baseline"], case, [inputs], None)
    torch.testing.assert_close(launch(), inputs["x"] * inputs["alpha"])


def test_a_random_packed_fp4_input_is_drawn(tmp_path):
    """torch cannot cast to float4_e2m1fn_x2: drawing such an input failed (``copy_kernel`` not
    implemented) and every implementation of an FP4 problem was an error."""
    folder = _sol(tmp_path, {"x": {"shape": ["batch", "64"], "dtype": "float4_e2m1fn_x2"}},
                  "import torch\n\n\ndef run(x):\n    return x.view(torch.uint8).float()\n",
                  [{"axes": {"batch": 8}, "inputs": {"x": {"type": "random"}}}])
    [(spec, _)] = load(folder)
    case = _first_case(spec)
    x = draw_inputs(spec, case, "cpu", None, seed=1)["x"]
    assert x.dtype == torch.float4_e2m1fn_x2 and x.shape == (8, 64)
    assert len(x.view(torch.uint8).unique()) > 1  # random bytes, not one value


def test_annotated_constants_are_parameters_scaled_for_the_cpu(tmp_path):
    """``size: int = 2048`` was not read as a constant: the problem had no parameters and no CPU
    profile, so a CPU run drew its full sizes."""
    path = tmp_path / "annotated.py"
    path.write_text(KB_TWO_INPUTS.format(name="y").replace("size = 8", "size: int = 2048"))
    [(spec, _)] = load(path)
    assert spec.parameters == {"size": [2048]}
    assert spec.profiles["cpu"].parameters["size"][0] < 2048


def test_a_solution_beside_its_problem_that_copies_model_joins_it(tmp_path):
    """``<stem>_new.py`` holding the problem's Model (and get_inputs) as well as ModelNew was read as a
    problem of its own (its baseline Model measured under another name) and its ModelNew dropped: the
    problem ran without it and the run exited 0."""
    problem = tmp_path / "5_Add.py"
    problem.write_text(KB_TWO_INPUTS.format(name="y"))
    (tmp_path / "5_Add_new.py").write_text(KB_TWO_INPUTS.format(name="y") + "\n\nclass ModelNew(Model):\n    pass\n")
    for path in (tmp_path, problem):
        [(spec, origin)] = load(path)
        assert origin == problem and set(spec.implementations) == {"baseline", "compiled", "new"}


def test_a_workload_line_changed_since_the_import_is_refused(runner, tmp_path):
    """An imported SOL-ExecBench workload holds its lines' sizes and tolerances and reads the rest of a
    line (scalar values, input types) when run; only definition.json was hashed, so after an edit of
    workload.jsonl it ran the old sizes with the new scalars and recorded the import's sha256."""
    folder = _sol(tmp_path, X_AND_ALPHA, SCALED,
                  [{"axes": {"batch": 8}, "inputs": {"alpha": {"type": "scalar", "value": 2.0}}}])
    result = runner.invoke(main, ["import", str(folder), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    args = ["run", str(tmp_path / "out" / "problem.yaml"), "--dry-run", "--device", "cpu"]
    assert runner.invoke(main, [*args, "-o", str(tmp_path / "same.json")]).exit_code == 0
    lines = folder / "workload.jsonl"
    lines.write_text(lines.read_text().replace('"batch": 8', '"batch": 16').replace("2.0", "3.0"))
    result = runner.invoke(main, [*args, "-o", str(tmp_path / "r.json")])
    assert result.exit_code == 2, result.output
    assert "workload.jsonl changed since it was imported" in result.output and "source.sha256" in result.output
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(("bad", "needle"), [
    ({"axes": {"batch": "16"}}, "workload.jsonl:4: axes.batch: a var axis needs an integer value"),
    ({"axes": {"batch": 0}}, "definition.json: case wl=1 (workload.jsonl line 4): "),
])
def test_a_bad_workload_line_is_named_by_its_line_number_past_blank_lines(runner, tmp_path, bad, needle):
    """Blank lines are not workloads; a bad line after them was named by its index among the others
    (line 2 for the file's fourth line)."""
    folder = _sol(tmp_path, X_AND_ALPHA, SCALED, [])
    good = {"axes": {"batch": 8}, "inputs": {"alpha": {"type": "scalar", "value": 2.0}}}
    (folder / "workload.jsonl").write_text(f"\n{json.dumps(good)}\n\n{json.dumps(bad)}\n")
    result = runner.invoke(main, ["import", str(folder), "--out", str(tmp_path / "out")])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and needle in lines[0], result.output


def _safetensors_file(path, tensors):
    """A safetensors file (its format: 8-byte header size, JSON header, data) of ``{key: (dtype, shape)}``,
    written without the safetensors package; the data are zeros."""
    import math

    sizes = {"F32": 4, "BF16": 2}
    header, offset = {}, 0
    for key, (dtype, shape) in tensors.items():
        end = offset + sizes[dtype] * math.prod(shape)
        header[key] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, end]}
        offset = end
    text = json.dumps(header).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + bytes(offset))


FROM_FILE = {"x": {"type": "safetensors", "path": "x.safetensors", "tensor_key": "x"}}


@pytest.mark.parametrize(("stored", "needle"), [
    ({"x": ("F32", [8, 32])}, "tensor 'x' is F32 [8, 32]; the definition declares float32 (8, 64)"),
    ({"x": ("BF16", [8, 64])}, "tensor 'x' is BF16 [8, 64]; the definition declares float32 (8, 64)"),
    ({"y": ("F32", [8, 64])}, "no tensor 'x' (it holds: y)"),
])
def test_a_safetensors_input_unlike_its_declaration_is_one_line_naming_the_line_file_and_tensor(
        runner, tmp_path, stored, needle):
    """A tensor read from a file was used as it came: another shape failed in the reference ('reference
    failed: RuntimeError: The size of tensor a ...'), another dtype made every implementation INCORRECT
    ('dtype torch.float32 != bfloat16'), a missing key was 'KeyError: ...', each exit 4 and blamed on the
    implementations; or, where the shapes broadcast, a number for inputs the problem does not describe."""
    folder = _sol(tmp_path, {"x": {"shape": ["batch", "64"], "dtype": "float32"}}, "def run(x):\n    return x * 2\n",
                  [{"axes": {"batch": 8}, "inputs": FROM_FILE}])
    _safetensors_file(folder / "x.safetensors", stored)
    result = runner.invoke(main, ["run", str(folder), "--device", "cpu", "--in-process", "--budget", "0.05",
                                  "-o", str(tmp_path / "r.json")])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert "definition.json: case wl=0 (workload.jsonl line 1): inputs.x: " in lines[0]
    assert f"x.safetensors: {needle}" in lines[0]


def test_a_safetensors_input_like_its_declaration_is_planned_at_its_size(tmp_path):
    """The file's header is read on the meta device, not its data: a matching tensor plans as before, and
    the CPU profile keeps the size the file holds; it halved batch to 16384 (16 MiB moved is over the CPU
    budget), and a CPU run would have read the file's 32768 rows as the input of a 16384-row case."""
    folder = _sol(tmp_path, {"x": {"shape": ["batch", "64"], "dtype": "float32"}}, "def run(x):\n    return x * 2\n",
                  [{"axes": {"batch": 32768}, "inputs": FROM_FILE}])
    _safetensors_file(folder / "x.safetensors", {"x": ("F32", [32768, 64])})
    [(spec, _)] = load(folder)
    assert [t.shape for t in _first_case(spec).inputs] == [(32768, 64)]
    assert "cpu" not in spec.profiles


KB_BATCHED_LINEAR = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, w):
        return torch.matmul(x, w)


def get_inputs():
    return [torch.randn(4, 16, 32), torch.randn(32, 8)]


def get_init_inputs():
    return []
'''


def test_a_matmul_of_a_batch_of_rows_moves_its_operands_and_result_once(tmp_path):
    """torch.matmul of a [4, 16, 32] x by a [32, 8] w is one mm on x viewed as [64, 32], its result
    unfolded by _unsafe_view, an alias of the same storage that torch does not flag a view: counted
    as an op moving bytes, it added the result read and written again (15360 bytes, not 11264)."""
    path = tmp_path / "batched_linear.py"
    path.write_text(KB_BATCHED_LINEAR)
    [(spec, _)] = load(path)
    [case, *_] = expand(spec, "cuda")
    _, cost = probe(spec, case, None)
    assert cost.unfused_bytes == (4 * 16 * 32 + 32 * 8 + 4 * 16 * 8) * 4
