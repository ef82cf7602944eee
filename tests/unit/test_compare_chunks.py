"""The tolerance check reads outputs chunk by chunk (no fp64 copy of a whole multi-GB output); it
must judge exactly as one pass over the whole tensor would. And a reference declared to run as
the suites run theirs keeps torch's default backend settings."""


import pytest
import torch

from solbench.measure import tensors
from solbench.measure.runner import prepare_case
from solbench.measure.tensors import Bounds, compare
from solbench.plan.workloads import plan
from solbench.workload.cases import TensorShape


def _case(n):
    from types import SimpleNamespace

    return SimpleNamespace(outputs=(TensorShape("y", (n,), "float32"),))


@pytest.mark.parametrize("bounds", [Bounds(1e-3, 1e-3, None), Bounds(1e-3, 1e-3, 0.5, matched_ratio=0.9, error_cap=1.0),
                                    Bounds(1e-3, 1e-3, None, allow_negative_inf=True)])
def test_chunked_errors_equal_one_pass(monkeypatch, bounds):
    g = torch.Generator().manual_seed(3)
    ref = torch.randn(1000, generator=g)
    out = ref + 2e-3 * torch.randn(1000, generator=g)
    ref[::97] = out[::97] = float("-inf") if bounds.allow_negative_inf else 1.0
    whole = compare([out], [ref], _case(1000), bounds.rtol, bounds.atol, bounds.rel_l2, bounds)
    monkeypatch.setattr(tensors, "CHUNK", 7)
    chunked = compare([out], [ref], _case(1000), bounds.rtol, bounds.atol, bounds.rel_l2, bounds)
    assert chunked.passed == whole.passed and chunked.detail == whole.detail
    assert chunked.max_abs_err == whole.max_abs_err
    assert chunked.max_rel_l2 == pytest.approx(whole.max_rel_l2, rel=1e-12)
    assert "outside" in whole.detail or whole.passed


def test_a_nan_in_any_chunk_fails_as_unwritten(monkeypatch):
    monkeypatch.setattr(tensors, "CHUNK", 16)
    ref = torch.ones(100)
    out = ref.clone()
    out[93] = float("nan")
    result = compare([out], [ref], _case(100), 1e-3, 1e-3, None)
    assert not result.passed and "1 NaN/Inf element(s)" in result.detail


DECLARED = """
workloads:
  - name: flags
    parameters: {n: [8]}
    dtypes: [float32]
    inputs:
      x: {shape: [n]}
    outputs:
      y: {shape: [n]}
    ops:
      - {op: add, numel: n}
    reference: flags_ref.py:reference
    reference_dtype: %s
    implementations:
      baseline: {fn: flags_ref.py:reference}
"""


@pytest.mark.parametrize(("declared", "tf32"), [("declared", True), ("float32", False)])
def test_a_declared_reference_keeps_the_default_backend_settings(tmp_path, declared, tf32):
    (tmp_path / "flags_ref.py").write_text(
        "import torch\nSEEN = []\n\ndef reference(x):\n"
        "    SEEN.append(torch.backends.cudnn.allow_tf32)\n    return x * 2\n")
    (tmp_path / "w.yaml").write_text(DECLARED % declared)
    [p] = plan([tmp_path / "w.yaml"], "cpu")
    assert torch.backends.cudnn.allow_tf32  # torch's default here
    prepare_case(p.spec, p.cases[0], "cpu", tmp_path, input_sets=1, seed=0)
    from solbench.impls.registry import resolve

    seen = resolve("flags_ref.py:reference", tmp_path).__globals__["SEEN"]
    assert seen[-1] is tf32
