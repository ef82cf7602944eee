"""Inputs a case draws and the check of an implementation's outputs against the reference: the
reference at least as precise as the case, and the check's verdicts and messages honest."""

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
