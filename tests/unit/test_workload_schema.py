import textwrap

import pytest

from solbench.config.workloads import load_workload_file, workload_json_schema
from solbench.errors import ConfigError
from solbench.workload.cases import expand

GOOD = """\
workloads:
  - name: scale
    parameters: {n: [8, 16], m: [4]}
    dtypes: [float32, bfloat16]
    profiles:
      cpu: {parameters: {n: [2]}, dtypes: [float32]}
    inputs:
      x: {shape: [n, m]}
    outputs:
      y: {shape: [n, m]}
    ops: [{op: mul, numel: n * m, inputs: 1}]
    reference: tests.unit.helpers:double
    implementations:
      baseline: tests.unit.helpers:double
"""


def write(tmp_path, text):
    path = tmp_path / "w.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_good_file_expands_per_device(tmp_path):
    (spec,) = load_workload_file(write(tmp_path, GOOD))
    cuda = expand(spec, "cuda")
    assert [c.id for c in cuda] == [
        "scale[n=8,m=4,float32]", "scale[n=8,m=4,bfloat16]",
        "scale[n=16,m=4,float32]", "scale[n=16,m=4,bfloat16]"]
    cpu = expand(spec, "cpu")
    assert [c.id for c in cpu] == ["scale[n=2,m=4,float32]"]
    assert spec.implementations["baseline"].fn == "tests.unit.helpers:double"


@pytest.mark.parametrize("old,new,expected", [
    ("dtypes: [float32, bfloat16]", "dtypes: [float33]", r"w.yaml:4: workloads.0.dtypes.0: Input should be"),
    ("      x: {shape: [n, m]}", "      x: {shape: [n, m], colour: red}", r"w.yaml:8: workloads.0.inputs.x.colour: unknown field"),
    ("      x: {shape: [n, m]}", "      x: {shape: [n, __import__]}", r"w.yaml:8: workloads.0.inputs.x.shape.1: unknown parameter '__import__'"),
    ("    reference: tests.unit.helpers:double\n", "", r"w.yaml:2: workloads.0.reference: required field missing"),
    ("      baseline: tests.unit.helpers:double", "      fused: tests.unit.helpers:double", r"workloads.0: baseline 'baseline' is not one"),
])
def test_errors_name_file_line_and_field(tmp_path, old, new, expected):
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(ConfigError, match=expected):
        load_workload_file(path)


def test_yaml_syntax_error_has_line(tmp_path):
    path = write(tmp_path, GOOD.replace("dtypes: [float32, bfloat16]", "dtypes: [float32"))
    with pytest.raises(ConfigError, match=r"w.yaml:\d+: invalid YAML"):
        load_workload_file(path)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_workload_file(tmp_path / "nope.yaml")


def test_duplicate_workload_names(tmp_path):
    body = GOOD.split("workloads:\n", 1)[1]
    path = write(tmp_path, "workloads:\n" + body + body)
    with pytest.raises(ConfigError, match="duplicate workload name 'scale'"):
        load_workload_file(path)


def test_json_schema_describes_workloads():
    schema = workload_json_schema()
    assert schema["title"] == "solbench workload file"
    assert "workloads" in schema["properties"]
    assert "WorkloadSpec" in schema["$defs"]


def test_the_json_schema_takes_every_file_the_loader_takes(tmp_path):
    """`solbench schema` is for editor validation, yet it refused what the loader takes: the shorthand
    `name: module:function` of an implementation (the README's example, every shipped workload file)
    and of an input_generator, an op's flag written true/false (`bias: true`), a gate_threshold as a
    percent ('5%') and the top-level `x-` keys that hold YAML anchors. It must still refuse an unknown key."""
    jsonschema = pytest.importorskip("jsonschema")
    import glob
    import re
    from pathlib import Path

    import yaml

    validator = jsonschema.Draft202012Validator(workload_json_schema())
    readme = Path("README.md").read_text(encoding="utf-8").split("## Writing a workload", 1)[1]
    texts = {"README.md": re.search(r"```yaml\n(.*?)```", readme, re.S).group(1)}
    texts |= {f: Path(f).read_text(encoding="utf-8")
              for f in sorted(glob.glob("workloads/*.yaml") + glob.glob("examples/*/*.yaml"))}
    texts["shorthands"] = GOOD.replace("workloads:\n", "x-shared: &anchor {n: [8]}\nworkloads:\n").replace(
        "ops: [{op: mul, numel: n * m, inputs: 1}]",
        "ops: [{op: matmul, m: n, n: m, k: m, bias: true}]\n    gate_threshold: '5%'\n"
        "    input_generator: tests.unit.helpers:double")
    load_workload_file(write(tmp_path, texts["shorthands"]))  # the loader takes every one of them
    for where, text in texts.items():
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(yaml.safe_load(text))]
        assert not errors, f"{where}: {errors}"
    unknown = yaml.safe_load(GOOD.replace("    dtypes:", "    dtype: [float32]\n    dtypes:"))
    assert any("dtype" in e.message for e in validator.iter_errors(unknown))
    assert not validator.is_valid({**yaml.safe_load(GOOD), "workload": []})


def test_derived_values_and_extension_keys(tmp_path):
    text = GOOD.replace("workloads:\n", "x-shared: &anchor {n: [8]}\nworkloads:\n").replace(
        "    outputs:\n      y: {shape: [n, m]}", "    derived: {twice: n * 2}\n    outputs:\n      y: {shape: [twice, m]}")
    (spec,) = load_workload_file(write(tmp_path, text))
    case = expand(spec, "cuda")[0]
    assert case.outputs[0].shape == (16, 4)
    assert case.id == "scale[n=8,m=4,float32]"  # derived values are not part of the id


def test_tensor_names_may_not_shadow_parameters(tmp_path):
    path = write(tmp_path, GOOD.replace("      x: {shape: [n, m]}", "      m: {shape: [n, 4]}").replace(
        "ops: [{op: mul, numel: n * m, inputs: 1}]", "ops: []"))
    with pytest.raises(ConfigError, match=r"tensor names that are also parameters: \['m'\]"):
        load_workload_file(path)


def test_a_gate_threshold_is_a_fraction_or_a_percent_never_a_bare_percent_number():
    import pytest

    from solbench.workload.schema import WorkloadFile

    base = {"name": "w", "parameters": {"n": [8]}, "dtypes": ["float32"], "inputs": {"x": {"shape": ["n"]}},
            "outputs": {"y": {"shape": ["n"]}}, "ops": [{"op": "add", "numel": "n"}],
            "reference": "tests.unit.helpers:double", "implementations": {"baseline": "tests.unit.helpers:double"}}

    def threshold(value):
        return WorkloadFile.model_validate({"workloads": [{**base, "gate_threshold": value}]}).workloads[0].gate_threshold

    assert threshold(0.05) == 0.05 and threshold("5%") == pytest.approx(0.05)
    with pytest.raises(ValueError, match="reads as 500%; write '5%'"):
        threshold(5)
    with pytest.raises(ValueError, match="as a percent"):
        threshold("five%")


def test_returns_tensor_is_one_output(tmp_path):
    two = GOOD.replace("      y: {shape: [n, m]}", "      y: {shape: [n, m]}\n      z: {shape: [n, m]}").replace(
        "    reference:", "    returns: tensor\n    reference:")
    with pytest.raises(ConfigError, match=r"returns: tensor is one output, and there are 2 \(y, z\)"):
        load_workload_file(write(tmp_path, two))


@pytest.mark.parametrize(("returns", "value", "got"), [
    ("tensor", "(t,)", "a tuple of 1"), ("tensor", "[t]", "a list of 1"), ("tensor", "{'y': t}", "a dict"),
    ("tuple", "t", "a tensor"), ("tuple", "[t]", "a list of 1"), ("tuple", "(t, t)", "a tuple of 2"),
])
def test_with_returns_only_the_references_structure_is_taken(returns, value, got):
    import torch

    from solbench.measure.tensors import as_outputs

    t = torch.zeros(2)
    with pytest.raises(TypeError, match=rf"returned {got} where the reference returns a {returns}"):
        as_outputs(eval(value), ["y"], returns=returns)
    assert len(as_outputs(t if returns == "tensor" else (t,), ["y"], returns=returns)) == 1


def test_without_returns_one_output_may_come_in_any_structure():
    import torch

    from solbench.measure.tensors import as_outputs

    t = torch.zeros(2)
    assert all(as_outputs(v, ["y"])[0] is t for v in (t, (t,), [t], {"y": t}))
