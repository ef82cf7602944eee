"""Inputs a case draws and the check of an implementation's outputs against the reference: the
reference at least as precise as the case, and the check's verdicts and messages honest."""

import pytest
import torch

from solbench.measure import tensors
from solbench.measure.runner import prepare_case, tolerance_for
from solbench.plan.workloads import plan

MATMUL = """
workloads:
  - name: mm
    parameters: {n: [128]}
    dtypes: [%s]
    inputs: {x: {shape: [n, n]}, w: {shape: [n, n]}}
    outputs: {out: {shape: [n, n]}}
    ops: [{op: matmul, m: n, n: n, k: n}]
    reference: mm.py:ref
    implementations:
      baseline: mm.py:ref
"""


def _planned(tmp_path, text, source):
    (tmp_path / "mm.py").write_text(source)
    (tmp_path / "w.yaml").write_text(text)
    [p] = plan([tmp_path / "w.yaml"], "cpu")
    return p


def test_a_float64_reference_is_not_narrowed_to_float32(tmp_path):
    """The default reference_dtype (float32) raises narrower inputs; a float64 case's inputs stay
    float64, else the reference of an exact float64 matmul is off by ~1e-5, 100x float64's
    default tolerance, and every honest float64 implementation reads INCORRECT."""
    p = _planned(tmp_path, MATMUL % "float64", "def ref(x, w):\n    return x @ w\n")
    (case,) = p.cases
    inputs = prepare_case(p.spec, case, "cpu", tmp_path, input_sets=1, seed=0)
    (ref,) = inputs.references[0]
    assert ref.dtype == torch.float64
    out = inputs.sets[0]["x"] @ inputs.sets[0]["w"]  # what an honest float64 implementation returns
    tol = tolerance_for(p.spec, p.spec.implementations["baseline"], case.dtype, case.scope)
    result = tensors.compare([out], [ref], case, tol.rtol, tol.atol, None, tol)
    assert result.passed, result.detail


def test_upcast_raises_narrower_inputs_only():
    inputs = {"h": torch.ones(2, dtype=torch.bfloat16), "d": torch.ones(2, dtype=torch.float64),
              "i": torch.ones(2, dtype=torch.int32), "s": 3}
    got = tensors.upcast(inputs, "float32")
    assert {k: v.dtype for k, v in got.items() if k != "s"} == {"h": torch.float32, "d": torch.float64,
                                                                "i": torch.int32}
    assert got["s"] == 3


LOG = """
workloads:
  - name: lg
    parameters: {n: [64]}
    dtypes: [float32]
    inputs: {x: {shape: [n, 4]}}
    outputs: {y: {shape: [n, 4]}}
    ops: [{op: elementwise, numel: n * 4}]
    reference: mm.py:ref
    implementations:
      baseline: mm.py:ref
"""


def test_a_reference_that_returns_nan_is_refused_naming_the_workload(tmp_path):
    """log of normal inputs is NaN where x < 0. Checked against it, a NaN error passed every bound (any
    finite value was right there) and the reference's own code failed as 'unwritten': the workload is
    wrong, and the error says so, with where."""
    p = _planned(tmp_path, LOG, "import torch\ndef ref(x):\n    return torch.log(x)\n")
    (case,) = p.cases
    x = tensors.make_inputs(case, "cpu", 0)["x"]
    first = tuple(int(i) for i in (x < 0).nonzero()[0])
    with pytest.raises(ValueError, match="reference") as raised:
        prepare_case(p.spec, case, "cpu", tmp_path, input_sets=1, seed=0)
    assert f"returned {int((x < 0).sum())} NaN element(s) in y on input set 0 (the first at {list(first)})" in str(
        raised.value)
    assert "not the implementation" in str(raised.value)


def test_positive_inputs_make_the_same_reference_fine(tmp_path):
    p = _planned(tmp_path, LOG.replace("{shape: [n, 4]}}\n    outputs", "{shape: [n, 4], positive: true}}\n    outputs"),
                 "import torch\ndef ref(x):\n    return torch.log(x)\n")
    (case,) = p.cases
    (ref,) = prepare_case(p.spec, case, "cpu", tmp_path, input_sets=1, seed=0).references[0]
    assert not ref.isnan().any()


def test_nans_counts_across_chunks_and_names_the_first(monkeypatch):
    monkeypatch.setattr(tensors, "CHUNK", 5)
    t = torch.zeros(3, 7)
    t[1, 6] = t[2, 0] = float("nan")  # flat 13 and 14: the third chunk
    assert tensors.nans(t) == (2, (1, 6))
    assert tensors.nans(torch.ones(4)) == (0, ())
    assert tensors.nans(torch.ones(4, dtype=torch.int32)) == (0, ())


FP4 = """
workloads:
  - name: f4
    parameters: {n: [64]}
    dtypes: [float32]
    inputs: {w: {shape: [n, 8], dtype: float4_e2m1fn_x2%s}}
    outputs: {y: {shape: [n, 8], dtype: uint8}}
    ops: [{op: copy, numel: n * 8}]
    reference: mm.py:ref
    implementations:
      baseline: mm.py:ref
"""


@pytest.mark.parametrize("positive", [False, True])
def test_a_declared_fp4_input_is_drawn_and_reaches_the_reference(tmp_path, positive):
    """torch cannot convert to the packed FP4 pair: drawing one as a normal sample raised
    NotImplementedError, reported as 'reference failed'. It is random bytes (two valid e2m1 values
    each), the same from the same seed, passed to the reference as drawn."""
    p = _planned(tmp_path, FP4 % (", positive: true" if positive else ""),
                 "import torch\ndef ref(w):\n    return w.view(torch.uint8).clone()\n")
    (case,) = p.cases
    inputs = prepare_case(p.spec, case, "cpu", tmp_path, input_sets=2, seed=0)
    w = inputs.sets[0]["w"]
    assert w.dtype == torch.float4_e2m1fn_x2 and w.shape == (64, 8)
    (bits,) = inputs.references[0]
    assert len(bits.unique()) > 16  # random bytes, not all one value
    assert ((bits & 0x88) == 0).all() == positive  # the sign bits of both halves clear when positive
    assert torch.equal(tensors.make_inputs(case, "cpu", 0)["w"].view(torch.uint8), bits)
    assert not torch.equal(inputs.references[1][0], bits)  # the next input set is another draw


def _fp4_case(rows, cols):
    from types import SimpleNamespace

    from solbench.workload.cases import TensorShape

    return SimpleNamespace(outputs=(TensorShape("y", (rows, cols), "float4_e2m1fn_x2"),))


def _passes(out, ref, case):
    return tensors.compare([out], [ref], case, 1e-4, 1e-4, None).passed


def test_a_packed_fp4_output_is_checked_by_the_values_it_holds():
    """torch cannot convert float4_e2m1fn_x2: the check of such an output raised NotImplementedError, and
    every implementation, the reference's own code too, was reported ERROR. It compares the FP4 values."""
    g = torch.Generator().manual_seed(8)
    bits = torch.randint(0, 256, (16, 4), generator=g, dtype=torch.uint8)
    ref = bits.view(torch.float4_e2m1fn_x2)
    case = _fp4_case(16, 4)
    assert _passes(ref.clone(), ref, case)
    wrong = bits.clone()
    wrong[2, 3] ^= 0x10  # the high nibble of byte [2, 3]: FP4 value [2, 7]
    result = tensors.compare([wrong.view(torch.float4_e2m1fn_x2)], [ref], case, 1e-4, 1e-4, None)
    assert not result.passed and "y: 1 of 128 elements outside" in result.detail and "worst y[2, 7]" in result.detail
    signed = bits & 0x77  # +0 and -0 are one value
    negative_zero = signed | torch.where((signed & 0x07) == 0, 0x08, 0).to(torch.uint8)
    assert _passes(negative_zero.view(torch.float4_e2m1fn_x2), signed.view(torch.float4_e2m1fn_x2), case)


def test_a_destination_fp4_output_is_allocated_and_poisoned():
    """Allocating a destination-passing call's FP4 output filled it with NaN, which torch cannot do for
    float4_e2m1fn_x2 (NotImplementedError, the implementation reported ERROR); now it is poisoned with -6
    values, so a call that writes nothing fails."""
    from types import SimpleNamespace

    from solbench.measure.runner import _destination

    case = _fp4_case(16, 4)
    bits = torch.randint(0, 256, (16, 4), generator=torch.Generator().manual_seed(9), dtype=torch.uint8)
    ref = (bits & 0x77).view(torch.float4_e2m1fn_x2)  # no negative value: no -6 anywhere
    launch = _destination(lambda y: None, SimpleNamespace(outputs=case.outputs), {"w": ref})
    (out,) = launch()
    assert (out.view(torch.uint8) == 0xFF).all()
    assert not _passes(out, ref, case)


INTS = """
workloads:
  - name: ix
    parameters: {n: [64]}
    dtypes: [float32]
    inputs:
      x: {shape: [n]}
      idx: {shape: [n], dtype: %s%s}
    outputs: {y: {shape: [n]}}
    ops: [{op: copy, numel: n}]
    reference: mm.py:ref
    implementations:
      baseline: mm.py:ref
"""


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8"])
def test_a_positive_integer_input_holds_no_negative_value(tmp_path, dtype):
    """positive: true on an integer input (indices) was ignored: they were drawn from [-8, 8) all the same."""
    p = _planned(tmp_path, INTS % (dtype, ", positive: true"), "def ref(x, idx):\n    return x\n")
    (case,) = p.cases
    idx = tensors.make_inputs(case, "cpu", 0)["idx"].to(torch.int64)
    assert idx.min() >= 0 and idx.max() < 8 and len(idx.unique()) > 4
    (q,) = _planned(tmp_path, INTS % (dtype, ""), "def ref(x, idx):\n    return x\n").cases
    signed = tensors.make_inputs(q, "cpu", 0)["idx"].to(torch.int64)
    assert (signed < 0).any() if dtype != "uint8" else (signed > 8).any()  # without it, as before


@pytest.mark.parametrize(("dtype", "field"), [("int64", "std: 4"), ("int32", "mean: 3"), ("bool", "std: 0.5"),
                                              ("float4_e2m1fn_x2", "mean: 1")])
def test_std_or_mean_on_an_input_drawn_uniformly_is_refused_at_its_line(tmp_path, dtype, field):
    """std and mean were ignored on integer, boolean and FP4 inputs, silently: the inputs were not what
    the file said."""
    from solbench.errors import ConfigError

    with pytest.raises(ConfigError) as raised:
        _planned(tmp_path, INTS % (dtype, f", {field}"), "def ref(x, idx):\n    return x\n")
    name = field.split(":")[0]
    assert f"w.yaml:8: workloads.0.inputs.idx.{name}: {name} = " in str(raised.value)
    assert f"idx ({dtype}) is drawn uniformly" in str(raised.value)


def test_an_input_generator_drawing_from_torchs_own_generator_is_reproducible_per_seed():
    """A generator that ignores the torch.Generator it is given (torch.randn without generator=) drew
    from the global state: the same case and seed gave other inputs wherever that state had moved."""
    from types import SimpleNamespace

    case = SimpleNamespace(scope={"n": 64}, inputs=(SimpleNamespace(name="x"),), scalars={})

    def drawn(params, device, generator):
        return {"x": torch.randn(params["n"], device=device)}

    first = tensors.make_inputs(case, "cpu", 5, drawn)["x"]
    torch.rand(3)  # the global state moves, as other code between two draws moves it
    state = torch.get_rng_state()
    again = tensors.make_inputs(case, "cpu", 5, drawn)["x"]
    assert torch.equal(first, again)
    assert torch.equal(torch.get_rng_state(), state)  # given back as found
    assert not torch.equal(tensors.make_inputs(case, "cpu", 6, drawn)["x"], first)  # another seed, another draw



@pytest.mark.parametrize("device,index", [("cuda", 1), ("cuda:2", 2), ("cpu", None)])
def test_an_input_generator_on_a_gpu_forks_the_generator_of_the_gpu_it_draws_on(monkeypatch, device, index):
    """``cuda`` (a worker's device: the GPU it made current) forked GPU 0's generator, so a worker on
    GPU 1 had its own seeded by the draw and not given back. Mocked: no GPU is needed."""
    from types import SimpleNamespace

    forked = []
    real = torch.random.fork_rng
    monkeypatch.setattr(torch.random, "fork_rng", lambda devices: forked.append(list(devices)) or real(devices=[]))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch, "Generator", lambda device: SimpleNamespace(manual_seed=lambda seed: None))
    case = SimpleNamespace(scope={"n": 4}, inputs=(SimpleNamespace(name="x"),), scalars={})
    tensors.make_inputs(case, device, 5, lambda params, device, generator: {"x": torch.zeros(params["n"])})
    assert forked == [[] if index is None else [index]]


def _scaled_inputs(params, device, generator):
    """x and a scale that is a Python number, both drawn from the seed (as SOL-ExecBench draws a
    scalar input its workload line does not describe)."""
    return {"x": torch.randn(params["n"], generator=generator, device=device),
            "scale": 0.5 + float(torch.rand((), generator=generator))}


def _scaled(x, scale):
    return x * scale


def test_the_check_on_new_values_in_the_timed_inputs_gives_the_call_the_new_scalars_too():
    """After timing, new values are written into the tensors the call was timed on and checked
    against the reference of a fresh input set; a Python number among the inputs kept the timed
    set's value while the reference had the fresh one, so the reference itself read as a cached
    result (reward_hack)."""
    from solbench.measure.worker import MeasureSettings, Task, WorkerState, execute
    from solbench.workload.cases import build_case
    from solbench.workload.schema import WorkloadSpec

    spec = WorkloadSpec.model_validate({
        "name": "w", "parameters": {"n": [64]}, "dtypes": ["float32"], "inputs": {"x": {"shape": ["n"]}},
        "outputs": {"y": {"shape": ["n"]}}, "input_generator": {"fn": "tests.unit.test_input_check:_scaled_inputs"},
        "reference": "tests.unit.test_input_check:_scaled",
        "implementations": {"baseline": {"fn": "tests.unit.test_input_check:_scaled"}}})
    settings = MeasureSettings(timer="cpu", warmup=1, min_samples=3, max_samples=5, budget_s=0.05)
    task = Task(spec, build_case(spec, {"n": 64}, "float32"), "baseline", None, "cpu", settings)
    result, _ = execute(task, WorkerState())
    assert result.status == "ok", result.message


def _bounds(spec_dtype_tolerance=None):
    from types import SimpleNamespace

    spec = SimpleNamespace(case_tolerances=[], tolerances=spec_dtype_tolerance or {})
    return SimpleNamespace(tolerance=None), spec


def _one_output(dtype, n):
    from types import SimpleNamespace

    from solbench.workload.cases import TensorShape

    return SimpleNamespace(outputs=(TensorShape("y", (n,), dtype),))


@pytest.mark.parametrize(("case_dtype", "out_dtype"), [("int32", "int32"), ("bfloat16", "int64"),
                                                       ("float32", "int64"), ("bool", "bool")])
def test_integer_outputs_are_exact_under_the_default_tolerance(case_dtype, out_dtype):
    """rtol 1e-2 (the fallback for an int32 case) passed an int32 result of 100 or more off by one, and
    a bfloat16 case's 2e-2 passed argmax indices of 50 and more off by one."""
    impl, spec = _bounds()
    tol = tolerance_for(spec, impl, case_dtype)
    ref = torch.arange(200, dtype=getattr(torch, out_dtype)) if out_dtype != "bool" else torch.arange(200) % 3 == 0
    out = ref.clone()
    out[150] = 151 if out_dtype != "bool" else not bool(ref[150])
    result = tensors.compare([out], [ref], _one_output(out_dtype, 200), tol.rtol, tol.atol, None, tol)
    assert not result.passed
    assert "y: 1 of 200 elements outside atol=0 rtol=0" in result.detail
    same = tensors.compare([ref.clone()], [ref], _one_output(out_dtype, 200), tol.rtol, tol.atol, None, tol)
    assert same.passed


def test_a_declared_tolerance_applies_to_integer_outputs_as_written():
    from solbench.workload.schema import Tolerance

    impl, spec = _bounds({"bfloat16": Tolerance(atol=2.0, rtol=1e-9)})
    tol = tolerance_for(spec, impl, "bfloat16")
    ref = torch.arange(200)
    out = ref + 1
    assert tensors.compare([out], [ref], _one_output("int64", 200), tol.rtol, tol.atol, None, tol).passed


def test_floating_outputs_keep_the_dtype_default():
    impl, spec = _bounds()
    tol = tolerance_for(spec, impl, "bfloat16")
    ref = torch.ones(10)
    assert (tol.atol, tol.rtol) == (2e-2, 2e-2)
    assert tensors.compare([ref + 0.03], [ref], _one_output("float32", 10), tol.rtol, tol.atol, None, tol).passed


@pytest.mark.parametrize("chunk", [1 << 24, 7])
def test_the_message_names_the_element_farthest_outside_its_bound(monkeypatch, chunk):
    """The largest error can be an element within its bound (a large reference value): the message
    names, by its index, the element whose error most exceeds atol + rtol * |ref|, with both values."""
    monkeypatch.setattr(tensors, "CHUNK", chunk)
    ref = torch.ones(6, 5, dtype=torch.float32)
    ref[0, 1] = 1000.0
    out = ref.clone()
    out[0, 1] += 0.05  # the largest error, within 1e-4 + 1e-4 * 1000
    out[4, 3] += 0.01  # outside 2e-4: the worst
    out[5, 0] += 0.001  # outside too, by less
    result = tensors.compare([out], [ref], _shaped((6, 5)),
                             1e-4, 1e-4, None)
    assert not result.passed
    assert result.detail.startswith("y: 2 of 30 elements outside atol=0.0001 rtol=0.0001 (max abs err 0.05; ")
    assert "worst y[4, 3] = 1.01 where the reference has 1, off by 0.01 > 0.0002 allowed" in result.detail


def _shaped(shape):
    from types import SimpleNamespace

    from solbench.workload.cases import TensorShape

    return SimpleNamespace(outputs=(TensorShape("y", shape, "float32"),))


def test_an_output_on_another_device_is_incorrect():
    """The reference was moved to the output's device before comparing, so a CPU result of a GPU
    run passed. Here the reference stands on the meta device for the GPU (this machine has none)."""
    ref = torch.ones(4, device="meta")
    result = tensors.compare([torch.ones(4)], [ref], _shaped((4,)), 1e-4, 1e-4, None)
    assert not result.passed
    assert result.detail == "y: on device cpu, the inputs' and the reference's is meta"


def test_the_readme_gives_the_seed_each_rank_draws_from():
    """It said 'seed + rank': rank 1 would then draw what input set 1 of rank 0 draws."""
    from pathlib import Path

    from solbench.measure.rank import RANK_SEED_STRIDE, rank_seed

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert f"seed + k + {RANK_SEED_STRIDE} × rank" in readme
    assert rank_seed(7 + 1, 2) == 7 + 1 + RANK_SEED_STRIDE * 2
