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


@pytest.mark.parametrize("bounds", [Bounds(1e-3, 1e-3, None), Bounds(1e-3, 1e-3, 0.5, matched_ratio=0.9, error_cap=1.0)])
@pytest.mark.parametrize("same", [1.0, float("-inf"), float("inf")])
def test_chunked_errors_equal_one_pass(monkeypatch, bounds, same):
    g = torch.Generator().manual_seed(3)
    ref = torch.randn(1000, generator=g)
    out = ref + 2e-3 * torch.randn(1000, generator=g)
    ref[::97] = out[::97] = same
    whole = compare([out], [ref], _case(1000), bounds.rtol, bounds.atol, bounds.rel_l2, bounds)
    monkeypatch.setattr(tensors, "CHUNK", 7)
    chunked = compare([out], [ref], _case(1000), bounds.rtol, bounds.atol, bounds.rel_l2, bounds)
    assert chunked.passed == whole.passed and chunked.detail == whole.detail
    assert chunked.max_abs_err == whole.max_abs_err
    assert chunked.max_rel_l2 == pytest.approx(whole.max_rel_l2, rel=1e-12)
    assert "outside" in whole.detail or whole.passed


@pytest.mark.parametrize("inf", [float("inf"), float("-inf")])
def test_the_same_infinity_as_the_reference_passes(inf):
    ref = torch.randn(100, generator=torch.Generator().manual_seed(4))
    ref[[3, 50]] = inf
    result = compare([ref.clone()], [ref], _case(100), 1e-3, 1e-3, 0.5)
    assert result.passed and result.max_abs_err == 0.0


@pytest.mark.parametrize("got", [5.0, float("nan"), float("inf"), float("-inf")])
def test_anything_but_the_same_infinity_where_the_reference_has_one_fails(got):
    ref = torch.randn(100, generator=torch.Generator().manual_seed(5))
    ref[7] = float("inf") if got != float("inf") else float("-inf")
    out = ref.clone()
    out[7] = got  # a finite value passed: its bound, rtol * inf, was infinite
    result = compare([out], [ref], _case(100), 1e-3, 1e-3, None)
    assert not result.passed
    assert "worst y[7] = 5 where the reference has inf" in result.detail if got == 5.0 else \
        "1 NaN/Inf element(s)" in result.detail


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
