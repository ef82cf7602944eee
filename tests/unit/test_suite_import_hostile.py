"""``solbench import`` (and ``run``) of hostile or malformed suite problems: one line naming the
file, exit 2, and nothing clobbered or half-written."""

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from solbench.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"
KB = DATA / "kernelbench"
SOL = DATA / "solexec" / "rmsnorm"


@pytest.fixture
def runner():
    return CliRunner()


def _one_line(result, needle, name):
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and needle in lines[0] and name in lines[0], result.output


def _sol_problem(tmp_path, name="p", definition=None, workloads=None):
    folder = tmp_path / name
    shutil.copytree(SOL, folder)
    d = json.loads((folder / "definition.json").read_text())
    d.update(definition or {})
    (folder / "definition.json").write_text(json.dumps(d))
    if workloads is not None:
        (folder / "workload.jsonl").write_text(workloads)
    return folder


EXITS = "import torch\nimport sys\nsys.exit(0)\n"


@pytest.mark.parametrize("suite", ["kernelbench", "sol-execbench"])
def test_a_problem_that_calls_sys_exit_is_an_error_not_a_silent_success(runner, tmp_path, suite):
    if suite == "kernelbench":
        src = tmp_path / "exits.py"
        src.write_text(EXITS + (KB / "level1" / "23_Softmax.py").read_text())
    else:
        src = _sol_problem(tmp_path, definition={"reference": EXITS + "\n\ndef run(input, weight, eps):\n    return input\n"})
    result = runner.invoke(main, ["import", str(src), "--out", str(tmp_path / "out")])
    _one_line(result, "called sys.exit(0)", src.name)
    assert not (tmp_path / "out").exists()


def test_two_problems_named_alike_are_refused_not_written_over_each_other(runner, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    softmax = (KB / "level1" / "23_Softmax.py").read_text()
    (src / "1_a b.py").write_text(softmax)
    (src / "1_a_b.py").write_text(softmax.replace("dim=1", "dim=0"))
    result = runner.invoke(main, ["import", str(src), "--out", str(tmp_path / "out")])
    _one_line(result, "would be named '1_a_b'", "1_a")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("definition", "needle"), [
    ({"inputs": [1, 2]}, "inputs: expected an object"),
    ({"outputs": "output"}, "outputs: expected an object"),
    ({"inputs": {"input": 5}}, "inputs.input: expected an object with shape and dtype"),
])
def test_a_definition_whose_inputs_or_outputs_are_not_objects_is_one_line(runner, tmp_path, definition, needle):
    src = _sol_problem(tmp_path, definition=definition)
    result = runner.invoke(main, ["import", str(src), "--out", str(tmp_path / "out")])
    _one_line(result, needle, "definition.json")


@pytest.mark.parametrize(("line", "needle"), [
    ({"axes": [8]}, "workload.jsonl:1: axes: expected an object"),
    ({"axes": {"batch_size": "8"}}, "workload.jsonl:1: axes.batch_size: a var axis needs an integer value, not '8'"),
    ({"axes": {"batch_size": 8}, "tolerance": [1]}, "workload.jsonl:1: tolerance: expected an object"),
    ({"axes": {"batch_size": 8}, "tolerance": {"max_atol": "big"}},
     "workload.jsonl:1: tolerance.max_atol: expected a number, not 'big'"),
])
def test_a_malformed_workload_line_is_one_line_naming_its_file_and_line(runner, tmp_path, line, needle):
    src = _sol_problem(tmp_path, workloads=json.dumps(line) + "\n")
    result = runner.invoke(main, ["import", str(src), "--out", str(tmp_path / "out")])
    _one_line(result, needle, "workload.jsonl")


def test_a_kernelbench_problem_that_cannot_be_traced_is_one_line_naming_the_file(runner, tmp_path):
    src = tmp_path / "complex.py"
    src.write_text((KB / "level1" / "23_Softmax.py").read_text().replace("torch.rand(batch_size, dim)",
                                                                         "torch.rand(batch_size, dim, dtype=torch.cfloat)"))
    result = runner.invoke(main, ["import", str(src), "--out", str(tmp_path / "out")])
    _one_line(result, "dtype complex64 is not supported", "complex.py")


@pytest.mark.parametrize(("definition", "workloads", "needle"), [
    ({"axes": {"batch_size": {"type": "var"}, "hidden_size": {"type": "const", "value": 512},
               "total": {"type": "expr", "expression": "nope * 2"}}}, None, "unknown parameter 'nope'"),
    ({}, '{"axes": {"batch_size": 0}}\n', "has a dimension <= 0"),
])
def test_a_sol_execbench_case_that_cannot_be_built_is_one_line_naming_the_file(runner, tmp_path, definition,
                                                                               workloads, needle):
    src = _sol_problem(tmp_path, definition=definition, workloads=workloads)
    result = runner.invoke(main, ["import", str(src), "--out", str(tmp_path / "out")])
    _one_line(result, needle, "definition.json: case wl=0 (workload.jsonl line 1)")


@pytest.mark.parametrize(("edit", "needle"), [
    (("def get_init_inputs():", "get_init_inputs = 5\n\n\ndef _unused():"),
     "Model(*get_init_inputs()) raised TypeError: 'int' object is not callable"),
    (("def __init__(self):", "def __init__(self, width):"),
     "Model(*get_init_inputs()) raised TypeError: Model.__init__() missing 1 required positional argument"),
])
def test_a_model_that_cannot_be_built_is_not_blamed_on_its_forward(runner, tmp_path, edit, needle):
    src = tmp_path / "unbuilt.py"
    src.write_text((KB / "level1" / "23_Softmax.py").read_text().replace(*edit))
    result = runner.invoke(main, ["import", str(src), "--out", str(tmp_path / "out")])
    _one_line(result, needle, "unbuilt.py")


@pytest.mark.parametrize(("reference", "needle"), [
    ("def run(:\n", "definition.json:reference:1: syntax error"),
    ("import torch\n\n\ndef go(input, weight, eps):\n    return input\n", "defines no 'run' at top level"),
    (5, "reference: expected the reference's Python source, not int"),
])
def test_a_reference_that_cannot_run_is_refused_at_import_not_written(runner, tmp_path, reference, needle):
    src = _sol_problem(tmp_path, definition={"reference": reference})
    result = runner.invoke(main, ["import", str(src), "--out", str(tmp_path / "out")])
    _one_line(result, needle, "definition.json")
    assert not (tmp_path / "out").exists()


def test_imported_workload_files_get_the_modes_any_new_file_gets(runner, tmp_path):
    import os

    from solbench.results.store import _umask

    result = runner.invoke(main, ["import", str(KB / "level1" / "23_Softmax.py"), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    [written] = tmp_path.glob("*.yaml")
    assert os.stat(written).st_mode & 0o777 == 0o666 & ~_umask()  # not mkstemp's owner-only 0600


@pytest.mark.parametrize(("inputs", "needle"), [
    ('["hello"]', "get_inputs() gives str for 'x'"),
    ('[{"a": torch.rand(4)}]', "get_inputs() gives dict for 'x'"),
    ("[3]", "get_inputs() gives no tensor"),
])
def test_inputs_that_are_not_tensors_are_said_so(runner, tmp_path, inputs, needle):
    src = tmp_path / "odd.py"
    src.write_text((KB / "level1" / "23_Softmax.py").read_text().replace("[torch.rand(batch_size, dim)]", inputs))
    result = runner.invoke(main, ["import", str(src), "--out", str(tmp_path / "out")])
    _one_line(result, needle, "odd.py")


@pytest.mark.parametrize("name", ["rmsnorm_dps", "baseline"])
def test_a_solution_named_as_another_implementation_is_refused_not_swapped_in(runner, tmp_path, name):
    src = _sol_problem(tmp_path)
    solution = json.loads((src / "solution_python.json").read_text())
    (src / "solution_again.json").write_text(json.dumps({**solution, "name": name}))
    result = runner.invoke(main, ["import", str(src), "--out", str(tmp_path / "out")])
    _one_line(result, f"is named {name!r}", "solution_")
    assert not (tmp_path / "out").exists()


def test_a_solution_beside_its_problem_and_given_again_counts_once(runner, tmp_path):
    result = runner.invoke(main, ["import", str(SOL), "--solution", str(SOL / "solution_python.json"),
                                  "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "rmsnorm_dps:" in (tmp_path / "rmsnorm.yaml").read_text()


def test_force_over_a_folder_named_as_a_workload_file_writes_nothing(runner, tmp_path):
    (tmp_path / "level1_1_Square_matmul.yaml").write_text("# edited\n")
    (tmp_path / "level1_23_Softmax.yaml").mkdir()
    result = runner.invoke(main, ["import", str(KB / "level1"), "--out", str(tmp_path), "--force"])
    _one_line(result, "a folder (or not a file) where a workload file would go", "level1_23_Softmax.yaml")
    assert (tmp_path / "level1_1_Square_matmul.yaml").read_text() == "# edited\n"


def test_a_solution_beside_a_problem_with_a_syntax_error_is_refused_not_dropped(runner, tmp_path):
    """``<stem>_new.py`` beside a problem joins it; one that does not parse was left out without a word,
    and the run exited 0 as if the solution had never been written."""
    shutil.copy(KB / "level1" / "23_Softmax.py", tmp_path / "23_Softmax.py")
    (tmp_path / "23_Softmax_new.py").write_text("import torch.nn as nn\n\n\nclass ModelNew(nn.Module)\n    pass\n")
    result = runner.invoke(main, ["run", str(tmp_path / "23_Softmax.py"), "--dry-run", "--device", "cpu",
                                  "-o", str(tmp_path / "r.json")])
    _one_line(result, "23_Softmax_new.py:4: syntax error", "23_Softmax_new.py")
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(("edit", "needle"), [
    (lambda d: d["spec"].update(languages="pytorch"), "spec.languages: expected a list of strings, not 'pytorch'"),
    (lambda d: d["spec"].update(entry_point="kernel.py"), "spec.entry_point: expected 'file::function'"),
    (lambda d: d["spec"].update(entry_point=5), "spec.entry_point: expected 'file::function', not 5"),
    (lambda d: d["spec"].update(destination_passing_style="false"),
     "spec.destination_passing_style: expected true or false, not 'false'"),
    (lambda d: d.update(name=["a"]), "name: expected a string"),
    (lambda d: d.update(sources={"kernel.py": "x"}), "sources: expected a list of {path, content}"),
    (lambda d: d.update(sources=[{"path": "kernel.py"}]), "sources[0]: expected {path, content}"),
])
def test_a_solution_json_with_a_field_of_the_wrong_type_is_one_line_naming_the_field(runner, tmp_path, edit,
                                                                                    needle):
    """``languages: "pytorch"`` was read as the languages p, y, t, o, r, c, h: the solution was
    ``skipped`` (needs a build of c, h, o, ...) and the run exited 0; other fields failed in the worker."""
    solution = json.loads((SOL / "solution_python.json").read_text())
    edit(solution)
    path = tmp_path / "bad_solution.json"
    path.write_text(json.dumps(solution))
    result = runner.invoke(main, ["run", str(SOL), "--solution", str(path), "--dry-run", "--device", "cpu",
                                  "-o", str(tmp_path / "r.json")])
    _one_line(result, needle, "bad_solution.json")
    assert not (tmp_path / "r.json").exists()


def test_a_solution_joins_only_the_problem_with_the_longest_stem_that_starts_its_name(tmp_path):
    """``5_Softmax_scaled_new.py`` belongs to 5_Softmax_scaled; it also joined 5_Softmax (whose stem
    starts its name too), where it was INCORRECT, the run exited 4 and the summary counted a failure."""
    from solbench.suites import load

    softmax = (KB / "level1" / "23_Softmax.py").read_text()
    (tmp_path / "5_Softmax.py").write_text(softmax)
    (tmp_path / "5_Softmax_scaled.py").write_text(softmax.replace("torch.softmax(x, dim=1)",
                                                                  "torch.softmax(x, dim=1) * 2"))
    solution = tmp_path / "sols" / "5_Softmax_scaled_new.py"
    solution.parent.mkdir()
    solution.write_text("import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                        "    def forward(self, x):\n        return torch.softmax(x, dim=1) * 2\n")
    used: set[Path] = set()
    impls = {spec.name: set(spec.implementations) for spec, _ in load(tmp_path, [solution], used=used)}
    assert impls == {"5_Softmax": {"baseline", "compiled"}, "5_Softmax_scaled": {"baseline", "compiled", "new"}}
    assert used == {solution}


def test_a_problem_changed_since_its_import_is_refused_not_recorded_with_the_old_sha256(runner, tmp_path):
    """An imported workload names its problem file and that file's sha256; run after the file was edited,
    the results recorded the import's sha256 as the provenance of code they did not run."""
    problem = tmp_path / "23_Softmax.py"
    shutil.copy(KB / "level1" / "23_Softmax.py", problem)
    result = runner.invoke(main, ["import", str(problem), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    args = ["run", str(tmp_path / "out" / "23_Softmax.yaml"), "--dry-run", "--device", "cpu"]
    assert runner.invoke(main, [*args, "-o", str(tmp_path / "same.json")]).exit_code == 0
    problem.write_text(problem.read_text().replace("dim=1)", "dim=0)"))
    result = runner.invoke(main, [*args, "-o", str(tmp_path / "r.json")])
    _one_line(result, "source.sha256: ", "23_Softmax.yaml:")
    assert "23_Softmax.py changed since it was imported" in result.output
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("suite", ["kernelbench", "sol-execbench"])
@pytest.mark.parametrize("where", ["module", "inputs"])
def test_a_problem_that_calls_os_exit_is_an_error_not_a_silent_success(tmp_path, suite, where):
    """``os._exit(0)`` in a problem's code, which solbench runs in its own process to read the problem,
    ended solbench at once with exit 0 and nothing printed or written (sys.exit was already caught).
    Run in a subprocess: a regression would end the test's own process."""
    import subprocess
    import sys

    exits = "import os\nos._exit(0)\n"
    if suite == "kernelbench":
        src = tmp_path / "exits.py"
        text = (KB / "level1" / "23_Softmax.py").read_text()
        src.write_text(exits + text if where == "module" else
                       text.replace("def get_inputs():\n", "def get_inputs():\n    import os\n    os._exit(0)\n"))
    else:
        body = (exits if where == "module" else "") + "\n\ndef run(input, weight, eps):\n" \
            + ("    import os\n    os._exit(0)\n" if where == "inputs" else "") + "    return input\n"
        src = _sol_problem(tmp_path, definition={"reference": body})
    done = subprocess.run([sys.executable, "-m", "solbench", "import", str(src), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "its code called os._exit(0) while it was read" in done.stderr and src.name in done.stderr
    assert not (tmp_path / "out").exists()
