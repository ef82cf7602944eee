"""Strict workload schema: unknown keys at every level, op field sets, flags, sweep and memory caps."""

from dataclasses import replace

import pytest

from solbench.analysis.cost import op_cost
from solbench.api import cost_of, plan
from solbench.config.workloads import load_workload_file
from solbench.errors import ConfigError
from solbench.workload import cases as cases_mod
from solbench.workload.cases import CaseError, check_fits, expand, required_bytes
from solbench.workload.ops import OP_FIELDS
from solbench.workload.schema import Op
from tests.unit.test_input_yaml import GOOD, error_of, write

ATTENTION = "ops: [{op: attention, b: 1, h: 2, sq: n, sk: n, d: 4}]"


def with_ops(ops: str) -> str:
    return GOOD.replace("ops: [{op: mul, numel: n * 4, inputs: 1}]", ops)


@pytest.mark.parametrize("old,new,expected", [
    ("d: 4}", "d: 4, casual: 1}", "w.yaml:9: workloads.0.ops.0.casual: unknown field 'casual' for op 'attention' (did you mean 'causal'?)"),
    ("op: attention", "op: atention", "w.yaml:9: workloads.0.ops.0.op: unknown op 'atention' (did you mean 'attention'?)"),
    ("d: 4}", "}", "w.yaml:9: workloads.0.ops.0: op 'attention' needs field 'd'"),
    ("d: 4}", "d: 4, numel: 7}", "workloads.0.ops.0.numel: unknown field 'numel' for op 'attention'"),
    ("d: 4}", "d: true}", "workloads.0.ops.0.d: a boolean is not a number"),
    ("op: attention,", "", "workloads.0.ops.0.op: 'op' must name the operation kind"),
])
def test_op_errors(tmp_path, old, new, expected):
    text = with_ops(ATTENTION)
    assert old in text
    assert expected in error_of(write(tmp_path, text.replace(old, new)))


@pytest.mark.parametrize("op,expected", [
    ("{op: add, numel: n, rows: n, cols: 4}", "give 'numel' or 'rows' and 'cols', not both"),
    ("{op: add, rows: n}", "needs 'numel', or both 'rows' and 'cols'"),
    ("{op: matmul, m: n, n: 4, k: 4, stride: 2}", "unknown field 'stride' for op 'matmul'"),
    ("{op: conv2d, n: 1, c: 1, h: 4, w: 4, k: 1, r: 1, s: 1, casual: 1}", "unknown field 'casual' for op 'conv2d'"),
])
def test_op_field_sets(tmp_path, op, expected):
    assert expected in error_of(write(tmp_path, with_ops(f"ops: [{op}]")))


def test_causal_true_is_read_as_one_and_halves_the_flops(tmp_path):
    flops = {}
    for value in ("true", "1", "false", "0"):
        path = write(tmp_path, with_ops(ATTENTION.replace("d: 4}", f"d: 4, causal: {value}}}")), f"{value}.yaml")
        (p,) = plan([path], "cpu")
        flops[value] = cost_of(p, p.cases[0]).tensor_flops
    assert flops["true"] == flops["1"] == flops["false"] / 2 == flops["0"] / 2
    assert flops["0"] == 4 * 1 * 2 * 8 * 8 * 4


@pytest.mark.parametrize("old,new,expected", [
    ("    dtypes:", "    dtypse:", "w.yaml:4: workloads.0.dtypse: unknown field 'dtypse' (did you mean 'dtypes'?)"),
    ("workloads:", "workload:", "w.yaml:1: workload: unknown field 'workload' (did you mean 'workloads'?)"),
    ("x: {shape: [n, 4]}", "x: {shap: [n, 4]}", "workloads.0.inputs.x.shap: unknown field 'shap' (did you mean 'shape'?)"),
    ("baseline: tests.unit.helpers:double", "baseline: {fn: tests.unit.helpers:double, setpu: x.py:f}",
     "workloads.0.implementations.baseline.setpu: unknown field 'setpu' (did you mean 'setup'?)"),
    ("x: {shape: [n, 4]}", "x: {shape: [n, true]}", "workloads.0.inputs.x.shape.1: a boolean is not a number"),
    ("[8, 16]", "[8, .inf]", "workloads.0.parameters.n.1: inf is not a finite number"),
    ("[8, 16]", "[]", "workloads.0.parameters.n: List should have at least 1 item"),
    ("x: {shape: [n, 4]}", "x: {shape: [n, 4], std: .nan}", "workloads.0.inputs.x.std: nan is not a finite number"),
    # an empty list of cases or dtypes would run nothing, and exit 0
    ("parameters: {n: [8, 16]}", "cases: []", "w.yaml:3: workloads.0.cases: List should have at least 1 item"),
    ("    dtypes:", "    profiles: {cpu: {cases: []}}\n    dtypes:",
     "w.yaml:4: workloads.0.profiles.cpu.cases: List should have at least 1 item"),
    ("    dtypes:", "    profiles: {cpu: {dtypes: []}}\n    dtypes:",
     "w.yaml:4: workloads.0.profiles.cpu.dtypes: List should have at least 1 item"),
    # a parameter whose value is text is known, but no expression can compute with it
    ("[8, 16]", "[8, sixteen]", "w.yaml:6: workloads.0.inputs.x.shape.0: 'n' is 'sixteen' in some case, not a number"),
    ("x: {shape: [n, 4]}", "x: {shape: [n, 4], std: dtype}", "w.yaml:6: workloads.0.inputs.x.std: 'dtype' is 'float32'"),
    # a parameter named dtype was passed to the functions while every expression saw the case's dtype
    ("{n: [8, 16]}", "{n: [8, 16], dtype: [2]}", "w.yaml:3: workloads.0.parameters.dtype: 'dtype' names the case's own"),
    ("parameters: {n: [8, 16]}", "cases: [{n: 8, dtype: 2}]", "w.yaml:3: workloads.0.cases.0.dtype: 'dtype' names"),
    # no implementation named baseline: say which there are and how to name the one speedups are against
    ("baseline: tests.unit.helpers:double", "eager: tests.unit.helpers:double",
     "w.yaml:2: workloads.0: baseline 'baseline' is not one of the implementations (eager): speedups are measured "
     "against the one named 'baseline', or the one a 'baseline: NAME' field names"),
    # an implementation's name is printed in tables and messages: a line break or an escape sequence would go with it
    ("baseline: tests.unit.helpers:double", 'baseline: tests.unit.helpers:double\n      "a\\nb": tests.unit.helpers:double',
     "w.yaml:13: workloads.0.implementations.a b: String should match pattern '^[A-Za-z0-9_.\\-]+$' (got 'a\\nb')"),
])
def test_unknown_keys_and_values_at_every_level(tmp_path, old, new, expected):
    assert old in GOOD
    message = error_of(write(tmp_path, GOOD.replace(old, new)))
    assert expected in message, message


def test_extension_keys_are_still_ignored(tmp_path):
    (spec,) = load_workload_file(write(tmp_path, "x-anything: [1, 2]\n" + GOOD))
    assert spec.name == "scale"


def test_every_op_kind_round_trips_its_fields():
    for kind, (required, optional) in OP_FIELDS.items():
        fields = {f: 1 for f in required | optional}
        if "rows" in fields:  # elementwise kinds take numel, or rows and cols
            del fields["rows"], fields["cols"]
        op = Op.model_validate({"op": kind, **fields})
        assert op.sizes() == {"op": kind, **fields}


def test_op_model_rejects_without_a_file():
    with pytest.raises(ValueError, match="unknown field 'casual' for op 'attention'"):
        Op.model_validate({"op": "attention", "b": 1, "h": 1, "sq": 1, "sk": 1, "d": 1, "casual": 1})


# ------------------------------------------------------------------ sweeps and memory


def test_sweep_past_the_cap_is_refused_with_its_count(tmp_path, monkeypatch):
    text = GOOD.replace("parameters: {n: [8, 16]}", "parameters: {n: [8, 16], m: [1, 2, 3], k: [1, 2]}")
    (spec,) = load_workload_file(write(tmp_path, text))
    monkeypatch.setattr(cases_mod, "MAX_CASES", 11)
    with pytest.raises(CaseError, match="the sweep expands to 12 cases on cpu") as info:
        expand(spec, "cpu")
    assert info.value.loc == ["parameters"]
    monkeypatch.setattr(cases_mod, "MAX_CASES", 12)
    assert len(expand(spec, "cpu")) == 12


def test_huge_sweep_is_counted_not_expanded(tmp_path):
    values = "[" + ", ".join(str(i) for i in range(1, 11)) + "]"
    params = ", ".join(f"p{i}: {values}" for i in range(12))
    text = GOOD.replace("parameters: {n: [8, 16]}", f"parameters: {{n: [8], {params}}}")
    with pytest.raises(ConfigError, match=r"w.yaml:3: workloads.0.parameters: the sweep expands to 1000000000000 cases"):
        plan([write(tmp_path, text)], "cuda")


def test_profile_sweeps_are_checked_per_device(tmp_path, monkeypatch):
    text = GOOD.replace("    dtypes: [float32]\n", "    dtypes: [float32]\n    profiles: {cpu: {parameters: {n: [1, 2, 3]}}}\n")
    (spec,) = load_workload_file(write(tmp_path, text))
    monkeypatch.setattr(cases_mod, "MAX_CASES", 2)
    assert len(expand(spec, "cuda")) == 2
    with pytest.raises(CaseError, match="expands to 3 cases on cpu") as info:
        expand(spec, "cpu")
    assert info.value.loc == ["profiles", "cpu", "parameters"]


def test_a_profile_sweep_that_leaves_out_a_parameter_the_cases_give_is_refused_at_the_profile(tmp_path):
    """A profile's parameters replace the workload's cases: one that gives n alone left m unset on that
    device, and the run blamed the first shape that reads m (inputs.x: unknown parameter 'm')."""
    text = GOOD.replace("    parameters: {n: [8, 16]}\n", "    cases: [{n: 8, m: 4}, {n: 16, m: 2}]\n"
                        "    profiles: {cpu: {parameters: {n: [2]}}}\n").replace("[n, 4]", "[n, m]")
    assert error_of(write(tmp_path, text)) == (
        f"{tmp_path / 'w.yaml'}:4: workloads.0.profiles.cpu.parameters: gives n but not m, which the workload's cases "
        "give: a profile's parameters replace the cases (give m too, or give profiles.cpu.cases)")
    assert len(expand(load_workload_file(write(tmp_path, text.replace("{n: [2]}", "{n: [2], m: [1]}")))[0], "cpu")) == 1


def test_tensor_with_too_many_elements_is_refused(tmp_path):
    text = GOOD.replace("x: {shape: [n, 4]}", "x: {shape: [n, 2 ** 60]}")
    with pytest.raises(ConfigError, match=r"workloads.0.inputs.x.shape: shape \(8, 1152921504606846976\) has"):
        plan([write(tmp_path, text)], "cpu")


def test_required_bytes_and_check_fits(tmp_path):
    (spec,) = load_workload_file(write(tmp_path, GOOD))
    small, large = expand(spec, "cuda")  # n = 8, 16; float32; x and y are n x 4
    need = required_bytes(large, input_sets=2, copies=3)
    assert need == (16 * 4 * 4) * 2 * 3 + (16 * 4 * 4) * 3
    check_fits([small, large], need, input_sets=2, copies=3)
    with pytest.raises(CaseError, match=rf"case scale\[n=16,float32\] needs .* \({need} bytes\).* free on the device"):
        check_fits([small, large], need - 1, input_sets=2, copies=3)


def test_a_worker_holds_the_references_at_their_own_dtype_and_one_input_set_converted(tmp_path):
    from solbench.workload.cases import worker_bytes

    (spec,) = load_workload_file(write(tmp_path, GOOD))
    (_, large) = expand(spec, "cuda")  # float32 case, float32 reference: nothing converted
    assert worker_bytes(large, input_sets=2, reference_dtype="float32") == required_bytes(large, input_sets=2)
    half = replace(large, inputs=tuple(replace(t, dtype="bfloat16") for t in large.inputs),
                   outputs=tuple(replace(t, dtype="bfloat16") for t in large.outputs))
    n = 16 * 4  # x and y: elements
    assert worker_bytes(half, input_sets=2, reference_dtype="declared") == required_bytes(half, input_sets=2)
    # y's reference kept in float32 for each of 2 input sets (2 more bytes an element), x converted once
    assert worker_bytes(half, input_sets=2, reference_dtype="float32") == required_bytes(half, input_sets=2) \
        + n * 2 * 2 + n * 4
    assert worker_bytes(half, input_sets=2, reference_dtype="float64") == required_bytes(half, input_sets=2) \
        + n * 6 * 2 + n * 8


def test_cost_refuses_sizes_that_divide_by_zero_or_go_negative():
    conv = {"op": "conv2d", "n": 1, "c": 4, "h": 8, "w": 8, "k": 4, "r": 3, "s": 3}
    with pytest.raises(ValueError, match="groups = 0 is less than 1"):
        op_cost({**conv, "groups": 0}, {}, "float32")
    with pytest.raises(ValueError, match="stride = 0 is less than 1"):
        op_cost({**conv, "stride": 0}, {}, "float32")
    with pytest.raises(ValueError, match="the output would be -1 x -1"):
        op_cost({**conv, "h": 1, "w": 1}, {}, "float32")
    with pytest.raises(ValueError, match="m = -3 is less than 0"):
        op_cost({"op": "matmul", "m": "n - 5", "n": 1, "k": 1}, {"n": 2}, "float32")


def test_conv2d_groups_must_divide_the_channels():
    """c // groups priced 4 channels in 3 groups as one input channel a filter; torch refuses such a conv."""
    conv = {"op": "conv2d", "n": 1, "c": 4, "h": 8, "w": 8, "k": 4, "r": 3, "s": 3}
    with pytest.raises(ValueError, match="groups = 3 does not divide both c = 4 and k = 4"):
        op_cost({**conv, "groups": 3}, {}, "float32")
    with pytest.raises(ValueError, match="groups = 2 does not divide both c = 4 and k = 5"):
        op_cost({**conv, "k": 5, "groups": 2}, {}, "float32")
    assert op_cost({**conv, "groups": 2}, {}, "float32").tensor_flops == 2 * 4 * 6 * 6 * 2 * 3 * 3


def test_cost_refuses_sizes_that_are_not_whole_numbers():
    """2.67 rows gave 2.67 x the FLOPs and bytes of one row, silently; a rate may be a fraction."""
    with pytest.raises(ValueError, match=r"op 'matmul': m = 2.66667 is not a whole number"):
        op_cost({"op": "matmul", "m": "n / 3", "n": 1, "k": 1}, {"n": 8}, "float32")
    with pytest.raises(ValueError, match=r"op 'add': inputs = 1.5 is not a whole number"):
        op_cost({"op": "add", "numel": 8, "inputs": 1.5}, {}, "float32")
    assert op_cost({"op": "matmul", "m": "n / 2", "n": 1, "k": 1}, {"n": 8}, "float32").tensor_flops == 8
    assert op_cost({"op": "relu", "numel": 8, "flops_per_element": 0.5}, {}, "float32").vector_flops == 4


def test_an_fp4_op_counts_half_a_byte_a_value():
    """An op's sizes count values; one float4_e2m1fn_x2 element (the byte a declared tensor counts) holds
    two. An FP4 weight of k x n values was priced at k * n bytes, twice what it reads."""
    gemm = {"op": "matmul", "m": 16, "n": 64, "k": 128}
    fp4_weight = op_cost({**gemm, "b_dtype": "float4_e2m1fn_x2"}, {}, "bfloat16")
    assert fp4_weight.bytes == 2 * (16 * 128 + 16 * 64) + 128 * 64 / 2
    assert op_cost(gemm, {}, "float4_e2m1fn_x2").bytes == (16 * 128 + 16 * 64 + 128 * 64) / 2
    assert op_cost({"op": "relu", "numel": 10}, {}, "float4_e2m1fn_x2").bytes == 10  # read 10 values, write 10
    assert fp4_weight.tensor_flops == 2 * 16 * 64 * 128  # FLOPs count values either way
