"""Names, sweeps, overrides and references a workload cannot mean: each a one-line error at its field and line."""

import pytest
from click.testing import CliRunner

from solbench.api import cost_of, plan
from solbench.cli.main import main
from solbench.config.workloads import load_workload_file, validate_references
from solbench.errors import ConfigError
from solbench.measure.runner import tolerance_for
from solbench.workload.cases import expand
from tests.unit.test_input_yaml import GOOD, error_of, write

PARAMS = "    parameters: {n: [8, 16]}\n"
DTYPES = "    dtypes: [float32]\n"


def edit(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new)


def plan_error(path) -> str:
    with pytest.raises(ConfigError) as info:
        plan([path], "cpu")
    message = str(info.value)
    assert "\n" not in message
    return message


def exit_2(path, *args: str) -> str:
    result = CliRunner().invoke(main, ["run", str(path), "--dry-run", "--gpu", "h200", *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return result.output


@pytest.mark.parametrize("old,new,expected", [
    (DTYPES, DTYPES + "    derived: {n: 5}\n", "w.yaml:5: workloads.0.derived.n: 'n' is also a parameter"),
    (DTYPES, DTYPES + "    constants: {n: 5}\n", "w.yaml:5: workloads.0.constants.n: 'n' is also a parameter"),
    (DTYPES, DTYPES + "    constants: {m: 2}\n    derived: {m: n}\n",
     "w.yaml:6: workloads.0.derived.m: 'm' is also a constant"),
    (PARAMS, "    cases: [{n: 8, twice: 3}]\n    derived: {twice: n * 2}\n",
     "w.yaml:3: workloads.0.cases.0.twice: 'twice' is derived"),
])
def test_a_name_is_a_parameter_a_constant_or_derived_never_two(tmp_path, old, new, expected):
    message = error_of(write(tmp_path, edit(old, new)))
    assert message.startswith(str(tmp_path)) and expected in message, message


@pytest.mark.parametrize("old,new,expected", [
    ("[8, 16]", "[8, 8]", "w.yaml:3: workloads.0.parameters.n.1: 8 is given twice"),
    ("[float32]", "[float32, float32]", "w.yaml:4: workloads.0.dtypes.1: 'float32' is given twice"),
    (PARAMS, "    cases: [{n: 8}, {n: 16}, {n: 8}]\n", "w.yaml:3: workloads.0.cases.2: the same as case 0"),
    (DTYPES, DTYPES + "    profiles: {cpu: {parameters: {n: [2, 2]}}}\n",
     "w.yaml:5: workloads.0.profiles.cpu.parameters.n.1: 2 is given twice"),
    (DTYPES, DTYPES + "    profiles: {cpu: {dtypes: [float64, float64]}}\n",
     "w.yaml:5: workloads.0.profiles.cpu.dtypes.1: 'float64' is given twice"),
    (DTYPES, DTYPES + "    profiles: {cpu: {cases: [{n: 2}, {n: 2}]}}\n",
     "w.yaml:5: workloads.0.profiles.cpu.cases.1: the same as case 0"),
])
def test_no_case_twice(tmp_path, old, new, expected):
    assert expected in error_of(write(tmp_path, edit(old, new)))


def test_set_with_a_value_twice_is_exit_2(tmp_path):
    path = write(tmp_path, GOOD)
    assert "--set n=8,8: 8 is given twice" in exit_2(path, "--set", "n=8,8")
    assert CliRunner().invoke(main, ["run", str(path), "--dry-run", "--gpu", "h200", "--set", "n=8,4"]).exit_code == 0


@pytest.mark.parametrize("old,new,expected", [
    (DTYPES, DTYPES + "    profiles: {cpu: {parameters: {m: [2]}}}\n",
     "w.yaml:5: workloads.0.profiles.cpu.parameters.m: unknown parameter 'm' (a profile overrides the workload's "
     "own: n)"),
    (DTYPES, DTYPES + "    derived: {twice: n * 2}\n    profiles: {cpu: {parameters: {twice: [2]}}}\n",
     "w.yaml:6: workloads.0.profiles.cpu.parameters.twice: unknown parameter 'twice'"),
    (DTYPES, DTYPES + "    profiles: {cpu: {cases: [{n: 2, m: 1}]}}\n",
     "w.yaml:5: workloads.0.profiles.cpu.cases.0.m: 'm' is not a parameter (known: n)"),
    (PARAMS, PARAMS + "    cases: [{n: 8, m: 2}]\n", "w.yaml:4: workloads.0.cases.0.m: 'm' is not a parameter"),
    (PARAMS, "    cases: [{n: 8}, {n: 16, m: 2}]\n",
     "w.yaml:3: workloads.0.cases.1: gives n, m where case 0 gives n (every case gives the same parameters)"),
    (DTYPES, DTYPES + "    case_tolerances: [{where: {m: 8}, rtol: 0.1, atol: 0.1}]\n",
     "w.yaml:5: workloads.0.case_tolerances.0.where.m: unknown name 'm' (known: dtype, n)"),
])
def test_unknown_parameter_names_are_refused(tmp_path, old, new, expected):
    assert expected in error_of(write(tmp_path, edit(old, new)))


@pytest.mark.parametrize("where, expected", [
    ('{n: "8"}', "where.n: '8' matches no case: n takes 8, 16 (in the workload and its profiles)"),
    ("{n: 12}", "where.n: 12 matches no case: n takes 8, 16"),
    ("{dtype: float16}", "where.dtype: 'float16' matches no case: dtype takes 'float32'"),
])
def test_a_where_that_matches_no_case_is_refused(tmp_path, where, expected):
    """A case tolerance whose value no case takes (a number quoted as text, a typo) silently
    applied to nothing: the case kept the workload's tolerance."""
    text = edit(DTYPES, DTYPES + f"    case_tolerances: [{{where: {where}, rtol: 0.1, atol: 0.1}}]\n")
    assert f"w.yaml:5: workloads.0.case_tolerances.0.{expected}" in error_of(write(tmp_path, text))


def test_what_a_profile_and_a_where_may_name(tmp_path):
    text = edit(DTYPES, DTYPES + "    constants: {c: 3}\n    derived: {twice: n * 2}\n"
                "    profiles: {cpu: {parameters: {n: [2, 4], c: [1]}}}\n"
                "    case_tolerances: [{where: {twice: 8, dtype: float32}, rtol: 0.5, atol: 0.25}]\n")
    (spec,) = load_workload_file(write(tmp_path, text))
    case = next(c for c in expand(spec, "cpu") if c.params["n"] == 4)
    assert case.params == {"n": 4, "c": 1}  # a profile may override a constant
    tol = tolerance_for(spec, spec.implementations["baseline"], "float32", case.scope)
    assert (tol.rtol, tol.atol) == (0.5, 0.25)  # a where on a derived value and the dtype matches


@pytest.mark.parametrize("key", ["bytes", "flops"])
def test_a_negative_cost_override_is_refused(tmp_path, key):
    path = write(tmp_path, edit(DTYPES, DTYPES + f'    {key}: "-n"\n'))
    assert plan_error(path) == f"{path}:5: workloads.0.{key}: {key} = -8 is less than 0"
    assert f"w.yaml:5: workloads.0.{key}: {key} = -8 is less than 0" in exit_2(path)


def test_a_case_with_no_cost_at_all_is_refused(tmp_path):
    """bytes: 0 beside ops that count no FLOPs made T_SOL 0: every implementation read SOL 0.00 and MBU 0%,
    bound "compute"; bytes: 0 beside FLOPs still prices the FLOPs."""
    path = write(tmp_path, edit("    ops: [{op: mul, numel: n * 4, inputs: 1}]\n", '    bytes: "n - 8"\n'))
    expected = "w.yaml:9: workloads.0.bytes: bytes = 0 and the case counts no FLOPs: its T_SOL would be 0"
    assert expected in plan_error(path)
    assert expected in exit_2(path)
    path = write(tmp_path, edit("numel: n * 4, inputs: 1}]\n", 'numel: n * 4, inputs: 1}]\n    bytes: 0\n'))
    (p,) = plan([path], "cpu")
    assert [(cost_of(p, c).fused_bytes, cost_of(p, c).vector_flops) for c in p.cases] == [(0.0, 32.0), (0.0, 64.0)]


@pytest.mark.parametrize("op,expected", [
    ("{op: matmul, m: n - 16, n: n, k: n}", "w.yaml:11: workloads.0.ops.1.m: op 'matmul': m = -8 is less than 0"),
    ("{op: matmul, m: n, n: n, k: n / (n - 8)}", "w.yaml:11: workloads.0.ops.1.k: division by zero in 'n / (n - 8)'"),
    ("{op: pool2d, n: 1, c: 1, h: 2, w: 2, r: 3, s: 3}",
     "w.yaml:11: workloads.0.ops.1: op 'pool2d': the output would be 0 x 0"),
    ("{op: matmul, m: n / 3, n: n, k: n}", "w.yaml:11: workloads.0.ops.1.m: op 'matmul': m = 2.66667 is not a whole"),
])
def test_an_op_that_cannot_be_costed_is_refused_at_its_line_and_field(tmp_path, op, expected):
    """The error named only the ops list (its first line), whichever op of the list was at fault."""
    text = GOOD.replace("    ops: [{op: mul, numel: n * 4, inputs: 1}]\n",
                        f"    ops:\n      - {{op: mul, numel: n * 4, inputs: 1}}\n      - {op}\n")
    path = write(tmp_path, text)
    assert expected in plan_error(path)
    assert expected in exit_2(path)


@pytest.mark.parametrize("tolerances,expected", [
    ("tolerances: {float32: {rtol: .inf, atol: 0.1}}", "workloads.0.tolerances.float32.rtol: Input should be a finite"),
    ("tolerances: {float32: {rtol: 0.1, atol: .nan}}", "workloads.0.tolerances.float32.atol: Input should be a finite"),
    ("case_tolerances: [{where: {n: 8}, rtol: 0.1, atol: .inf}]",
     "workloads.0.case_tolerances.0.atol: Input should be a finite number"),
])
def test_tolerances_are_finite(tmp_path, tolerances, expected):
    assert f"w.yaml:5: {expected}" in error_of(write(tmp_path, edit(DTYPES, DTYPES + f"    {tolerances}\n")))


def test_a_negative_std_is_refused(tmp_path):
    message = error_of(write(tmp_path, edit("x: {shape: [n, 4]}", "x: {shape: [n, 4], std: -1}")))
    assert "w.yaml:6: workloads.0.inputs.x.std: a standard deviation cannot be negative (got -1)" in message
    path = write(tmp_path, edit("x: {shape: [n, 4]}", 'x: {shape: [n, 4], std: "4 - n"}'), "e.yaml")
    assert plan_error(path) == f"{path}:6: workloads.0.inputs.x.std: std = -4 is negative"
    assert "e.yaml:6: workloads.0.inputs.x.std: std = -4 is negative" in exit_2(path)


@pytest.mark.parametrize("old,new,expected", [
    ("baseline: tests.unit.helpers:double\n", "baseline: os:sep\n",
     "w.yaml:12: workloads.0.implementations.baseline.fn: 'os:sep' is not callable"),
    ("baseline: tests.unit.helpers:double\n", "baseline: {fn: tests.unit.helpers:double, setup: os:sep}\n",
     "w.yaml:12: workloads.0.implementations.baseline.setup: 'os:sep' is not callable"),
    (DTYPES, DTYPES + "    input_generator: os:sep\n",
     "w.yaml:5: workloads.0.input_generator.fn: 'os:sep' is not callable"),
    (DTYPES, DTYPES + "    input_generator: {fn: gen.py:draw}\n",
     "w.yaml:5: workloads.0.input_generator.fn: no such file 'gen.py'"),
])
def test_references_that_cannot_be_called_are_refused_at_load(tmp_path, old, new, expected):
    path = write(tmp_path, edit(old, new))
    with pytest.raises(ConfigError) as info:
        validate_references(path, load_workload_file(path))
    assert expected in str(info.value) and "\n" not in str(info.value)
    assert expected in exit_2(path)


def test_a_where_on_the_dtype_or_a_derived_value_applies_in_a_run(tmp_path):
    text = edit("[8, 16]", "[8]").replace("baseline: tests.unit.helpers:double\n",
                                          "baseline: tests.unit.helpers:double\n      wrong: tests.unit.helpers:double_wrong\n")
    text = text.replace(DTYPES, DTYPES + "    derived: {twice: n * 2}\n"
                        "    case_tolerances: [{where: {twice: 16, dtype: float32}, rtol: 0.1, atol: 0.1}]\n")
    out = tmp_path / "run.json"
    result = CliRunner().invoke(main, ["run", str(write(tmp_path, text)), "--device", "cpu", "--in-process", "-o",
                                       str(out), "--budget", "0.02", "--min-samples", "3", "--max-samples", "5"])
    assert result.exit_code == 0, result.output  # double_wrong (0.5% off) passes the case's 10%
