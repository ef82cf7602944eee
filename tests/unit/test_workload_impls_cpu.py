"""Every shipped implementation that can run on the CPU matches its reference there.

For each workload in workloads/*.yaml at its CPU-profile sizes, each implementation goes
through the runner (set-up, correctness on two input sets, a few CPU-timer samples): those
that need nothing the CPU lacks must come back "ok"; those that need CUDA, torch.compile
on CUDA or FP8 must come back "skipped" with the runner's reason. No timing is asserted.
"""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest
import torch
import torch.nn.functional as F

from solbench.api import Planned, plan
from solbench.impls import bert, resnet
from solbench.measure import tensors
from solbench.measure.runner import CaseInputs, prepare_case
from solbench.measure.worker import MeasureSettings, Task, WorkerState, execute
from solbench.results.model import ImplResult
from solbench.workload.cases import Case, build_case, parameter_sets
from solbench.workload.schema import Implementation

WORKLOAD_DIR = Path(__file__).resolve().parents[2] / "workloads"
WORKLOAD_FILES = sorted(WORKLOAD_DIR.glob("*.yaml"))

# Implementations of the BERT and ResNet-50 files that must run (and be checked) on the CPU.
RUNS_ON_CPU = {
    "bert_layer": {"baseline", "fused", "torch_encoder"},
    "residual_layernorm": {"baseline"},
    "bias_gelu_matmul": {"baseline", "fused"},
    "conv_bn_relu": {"baseline", "fused", "im2col", "conv_only"},
    "conv_alone": {"baseline", "nhwc"},
    "resnet50": {"baseline", "channels_last", "fused_eager", "fused", "fused_stem"},
}


def _cupy_missing() -> bool:
    try:
        import cupy  # noqa: F401
    except ImportError:
        return True
    return False


def expected_skip(impl: Implementation) -> str | None:
    """The reason the runner must give for skipping ``impl`` on the CPU, or None."""
    for need in impl.requires:
        if need in ("cuda", "compile"):
            return f"needs CUDA ({need})"
        if need == "fp8":
            return "needs FP8 tensor cores (compute capability 8.9+)"
        if need == "cupy" and _cupy_missing():
            return "needs CuPy"
    return None


_SETTINGS = MeasureSettings(timer="cpu", warmup=1, min_samples=3, max_samples=5, budget_s=0.05)


def _run(name: str, impl: Implementation, p: Planned, case: Case, inputs: CaseInputs) -> ImplResult:
    result, fatal = execute(Task(p.spec, case, name, str(p.path.parent), "cpu", _SETTINGS), WorkerState())
    assert not fatal
    return result


def _check_all(p: Planned, case: Case) -> None:
    inputs = prepare_case(p.spec, case, "cpu", p.path.parent, input_sets=2, seed=0)
    ran = set()
    for name, impl in p.spec.implementations.items():
        result = _run(name, impl, p, case, inputs)
        reason = expected_skip(impl)
        if impl.part == "floor":  # the byte floor: timed, never checked (solbench.impls.floor)
            assert result.status == "ok" and result.correctness is None, f"{case.id} {name}: {result.message}"
            assert result.protocol["part"] == "floor" and result.timing is not None and result.timing.n >= 3
        elif reason is None:
            assert result.status == "ok", f"{case.id} {name}: {result.status}: {result.message}"
            assert result.correctness is not None and result.correctness.passed
            assert result.timing is not None and result.timing.n >= 3
            ran.add(name)
        else:
            assert result.status == "skipped", f"{case.id} {name}: {result.status}"
            assert result.message.startswith(reason), f"{case.id} {name}: {result.message!r}"
    assert p.spec.baseline in ran, f"{case.id}: the baseline must run on the CPU"
    if p.spec.name in RUNS_ON_CPU:
        assert ran == RUNS_ON_CPU[p.spec.name]


def _cpu_cases() -> list:
    """Single-process workloads (multi-rank ones run as process groups: tests/unit/test_group.py)."""
    return [pytest.param(p, case, id=f"{path.name}:{case.id}")
            for path in WORKLOAD_FILES for p in plan([path], "cpu") if p.spec.world_size == 1 for case in p.cases]


@pytest.mark.parametrize(("p", "case"), _cpu_cases())
def test_cpu_implementations_match_the_reference(p: Planned, case: Case):
    _check_all(p, case)


def _half_precision_cases() -> list:
    """The BERT and ResNet-50 workloads at CPU sizes, in their device dtypes (bf16, fp16)."""
    out = []
    # not resnet50_forward.yaml: bf16 convolutions on a CPU without bf16 units take seconds each
    for name in ("bert.yaml", "resnet50.yaml"):
        for p in plan([WORKLOAD_DIR / name], "cpu"):
            for params in parameter_sets(p.spec, "cpu"):
                for dtype in p.spec.dtypes:
                    case = build_case(p.spec, params, dtype)
                    out.append(pytest.param(p, case, id=f"{name}:{case.id}"))
    return out


@pytest.mark.parametrize(("p", "case"), _half_precision_cases())
def test_cpu_implementations_in_half_precision(p: Planned, case: Case):
    """Output dtypes and the bf16/fp16 tolerances hold at small sizes too."""
    _check_all(p, case)


# ------------------------------------------------------------------ the checks have teeth


def _first(name: str) -> tuple[Planned, Case]:
    for path in WORKLOAD_FILES:
        for p in plan([path], "cpu"):
            if p.spec.name == name:
                return p, p.cases[0]
    raise LookupError(name)


def _passes(p: Planned, case: Case, out: torch.Tensor, inputs: CaseInputs) -> bool:
    tol = p.spec.tolerances[case.dtype]
    return tensors.compare((out,), inputs.references[0], case, tol.rtol, tol.atol, tol.rel_l2).passed


def test_conv_without_the_relu_is_incorrect():
    p, case = _first("conv_bn_relu")
    inputs = prepare_case(p.spec, case, "cpu", p.path.parent, input_sets=1, seed=0)
    folded = resnet.conv_bn_relu_folded_nhwc_setup(**inputs.sets[0])
    stride, pad = case.params["stride"], case.params["pad"]
    with_relu = resnet.conv_bn_relu_fused(**folded, stride=stride, pad=pad)
    without = F.conv2d(folded["x"], folded["weight"], folded["bias"], stride, pad)
    assert _passes(p, case, with_relu, inputs)
    assert not _passes(p, case, without, inputs)


def test_torch_encoder_with_swapped_layernorms_is_incorrect():
    p, case = _first("bert_layer")
    inputs = prepare_case(p.spec, case, "cpu", p.path.parent, input_sets=1, seed=0)
    good = dict(inputs.sets[0])
    bad = {**good, "ln1_w": good["ln2_w"], "ln2_w": good["ln1_w"]}
    heads = case.params["heads"]
    for kwargs, ok in ((good, True), (bad, False)):
        setup = bert.bert_layer_torch_encoder_setup(**kwargs, heads=heads)
        assert _passes(p, case, bert.bert_layer_torch_encoder(**setup), inputs) is ok


def test_torch_encoder_takes_the_native_fast_path_on_the_cpu():
    p, case = _first("bert_layer")
    inputs = prepare_case(p.spec, case, "cpu", p.path.parent, input_sets=1, seed=0)
    setup = bert.bert_layer_torch_encoder_setup(**inputs.sets[0], heads=case.params["heads"])
    native = torch._transformer_encoder_layer_fwd
    with mock.patch.object(torch, "_transformer_encoder_layer_fwd", wraps=native) as fast:
        out = bert.bert_layer_torch_encoder(**setup)
    assert fast.call_count == 1
    assert _passes(p, case, out, inputs)


def test_addmm_activation_gelu_is_the_erf_form_on_the_cpu():
    """On CUDA the cuBLASLt epilogue is the tanh form (the workloads' descriptions say so)."""
    gen = torch.Generator().manual_seed(0)
    x, w, b = (torch.randn(64, 32, generator=gen), torch.randn(48, 32, generator=gen),
               torch.randn(48, generator=gen))
    fused = torch._addmm_activation(b, x, w.t(), use_gelu=True)
    pre = torch.addmm(b, x, w.t())
    torch.testing.assert_close(fused, F.gelu(pre), rtol=0, atol=1e-6)
    assert (fused - F.gelu(pre, approximate="tanh")).abs().max() > 1e-5
