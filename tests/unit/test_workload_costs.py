"""The analytic cost model against torch's FlopCounterMode, for every shipped workload.

Every workload in workloads/*.yaml, at its CPU-profile sizes: the reference's FLOPs as counted
by FlopCounterMode equal the cost model's tensor FLOPs exactly, and the fused bytes are the
declared inputs read once plus the declared outputs written once. Then the per-op formulas
(matmul, conv2d, attention) are checked by hand and against FlopCounterMode on small tensors.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from solbench.analysis.cost import op_cost
from solbench.api import Planned, cost_of, plan
from solbench.impls import bert
from solbench.measure import tensors
from solbench.measure.runner import prepare_case
from solbench.workload.cases import Case

WORKLOAD_DIR = Path(__file__).resolve().parents[2] / "workloads"
WORKLOAD_FILES = sorted(WORKLOAD_DIR.glob("*.yaml"))


def _cpu_cases() -> list:
    params = []
    for path in WORKLOAD_FILES:
        for p in plan([path], "cpu"):
            params.extend(pytest.param(p, case, id=f"{path.name}:{case.id}") for case in p.cases)
    return params


CPU_CASES = _cpu_cases()


def test_every_workload_file_is_covered():
    names = {p.values[0].spec.name for p in CPU_CASES}
    assert {path.name for path in WORKLOAD_FILES} >= {"attn.yaml", "bert.yaml", "resnet50.yaml"}
    assert {"o_proj", "qkv_proj", "bert_layer", "residual_layernorm", "bias_gelu_matmul",
            "conv_bn_relu", "conv_alone"} <= names


def _prepare(p: Planned, case: Case):
    """One input set and its reference; a multi-rank workload's as rank 0 sees them."""
    if p.spec.world_size == 1:
        return prepare_case(p.spec, case, "cpu", p.path.parent, input_sets=1, seed=0)
    from solbench.measure.rank import prepare_rank

    return prepare_rank(p.spec, case, "cpu", p.path.parent, input_sets=1, seed=0, rank=0, world=p.spec.world_size)


@pytest.mark.parametrize(("p", "case"), CPU_CASES)
def test_reference_flops_equal_the_cost_model(p: Planned, case: Case):
    """Per rank: a multi-rank reference computes every rank's share (world_size x the cost)."""
    with FlopCounterMode(display=False) as counter:
        _prepare(p, case)
    counted = counter.get_total_flops()
    assert cost_of(p, case).tensor_flops * p.spec.world_size == counted


@pytest.mark.parametrize(("p", "case"), CPU_CASES)
def test_fused_bytes_are_inputs_read_once_and_outputs_written_once(p: Planned, case: Case):
    cost = cost_of(p, case)
    if "bytes" in cost.overridden:
        pytest.skip("fused bytes overridden by a bytes: expression")
    prepared = _prepare(p, case)
    in_bytes = sum(t.numel() * t.element_size() for t in prepared.sets[0].values())
    out_bytes = 0
    for ref, declared in zip(prepared.references[0], case.outputs, strict=True):
        assert tuple(ref.shape) == declared.shape, f"{declared.name}: reference shape differs"
        itemsize = torch.empty((), dtype=tensors.torch_dtype(declared.dtype)).element_size()
        out_bytes += ref.numel() * itemsize
    assert cost.fused_bytes == in_bytes + out_bytes


@pytest.mark.parametrize(("p", "case"), CPU_CASES)
def test_unfused_bytes_are_at_least_the_fused_bytes(p: Planned, case: Case):
    cost = cost_of(p, case)
    assert cost.unfused_bytes >= cost.fused_bytes


class _BytesMoved(TorchDispatchMode):
    """Bytes every op that is not a view reads and writes (``_unsafe_view`` aliases its input, and the
    mean and rstd that layer_norm also returns are not read again: neither counted)."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.is_view or func is torch.ops.aten._unsafe_view.default:
            return out
        ins = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        outs = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
        if func is torch.ops.aten.native_layer_norm.default:
            outs = outs[:1]
        self.total += sum(t.numel() * t.element_size() for t in ins + outs if t.dim())
        return out


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_bert_layer_unfused_bytes_are_what_its_eager_baseline_moves(device: str):
    """The op list models the baseline kernel by kernel, scores materialized: QK^T writes the [b, heads,
    s, s] scores and PV reads the probabilities back (an ``attention`` op counted only q, k, v and the
    context, 2.48 GB at seq 512 where the chain moves 2.88 GB)."""
    (p,) = [q for q in plan([WORKLOAD_DIR / "bert.yaml"], device) if q.spec.name == "bert_layer"]
    for case in p.cases:
        inputs = {t.name: torch.empty(t.shape, dtype=tensors.torch_dtype(t.dtype), device="meta")
                  for t in case.inputs}
        with _BytesMoved() as moved:
            bert.bert_layer_baseline(**inputs, heads=case.params["heads"])
        assert cost_of(p, case).unfused_bytes == moved.total, case.id


# -------------------------------------------------------------------- per-op formulas by hand


def _count(fn, *args, **kwargs) -> int:
    with FlopCounterMode(display=False) as counter:
        fn(*args, **kwargs)
    return counter.get_total_flops()


@pytest.mark.parametrize(("batch", "m", "n", "k"), [(1, 5, 7, 3), (3, 4, 9, 6), (2, 1, 16, 32)])
def test_matmul_is_2mnk_per_batch(batch: int, m: int, n: int, k: int):
    a, b = torch.randn(batch, m, k), torch.randn(batch, k, n)
    expected = 2 * batch * m * n * k
    assert _count(torch.bmm, a, b) == expected
    op = {"op": "matmul", "m": "m", "n": "n", "k": "k", "batch": "batch"}
    assert op_cost(op, {"batch": batch, "m": m, "n": n, "k": k}, "float32").tensor_flops == expected


def test_matmul_bias_adds_no_tensor_flops():
    x, w, bias = torch.randn(5, 3), torch.randn(7, 3), torch.randn(7)
    assert _count(torch.addmm, bias, x, w.t()) == 2 * 5 * 7 * 3
    with_bias = op_cost({"op": "matmul", "m": 5, "n": 7, "k": 3, "bias": 1}, {}, "float32")
    assert with_bias.tensor_flops == 2 * 5 * 7 * 3
    assert with_bias.bytes == 4 * (5 * 3 + 3 * 7 + 5 * 7 + 7)


CONV_SHAPES = [
    # n, c, h, w, k, r, s, stride, pad, dilation, groups
    (2, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1),
    (2, 4, 9, 7, 6, 3, 3, 2, 1, 1, 1),  # stride 2, odd and unequal sizes
    (1, 8, 10, 10, 8, 1, 1, 1, 0, 1, 1),  # 1x1
    (1, 6, 11, 11, 4, 5, 3, 3, 2, 1, 2),  # rectangular filter, stride 3, groups 2
    (2, 4, 12, 12, 4, 3, 3, 1, 2, 2, 1),  # dilation 2
]


@pytest.mark.parametrize(("n", "c", "h", "w", "k", "r", "s", "stride", "pad", "dil", "groups"),
                         CONV_SHAPES)
def test_conv2d_is_2nkpq_crs(n, c, h, w, k, r, s, stride, pad, dil, groups):
    p = (h + 2 * pad - dil * (r - 1) - 1) // stride + 1
    q = (w + 2 * pad - dil * (s - 1) - 1) // stride + 1
    x, weight = torch.randn(n, c, h, w), torch.randn(k, c // groups, r, s)
    out = F.conv2d(x, weight, None, stride, pad, dil, groups)
    assert tuple(out.shape) == (n, k, p, q)
    expected = 2 * n * k * p * q * (c // groups) * r * s
    assert _count(F.conv2d, x, weight, None, stride, pad, dil, groups) == expected
    op = {"op": "conv2d", "n": n, "c": c, "h": h, "w": w, "k": k, "r": r, "s": s,
          "stride": stride, "pad": pad, "dilation": dil, "groups": groups}
    assert op_cost(op, {}, "float32").tensor_flops == expected


def _explicit_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return torch.matmul(torch.softmax(scores, dim=-1), v)


@pytest.mark.parametrize(("b", "h", "sq", "sk", "d", "dv"),
                         [(2, 3, 5, 7, 4, 4), (1, 4, 16, 16, 8, 8), (2, 2, 3, 9, 4, 6)])
def test_attention_is_4bhsqskd(b, h, sq, sk, d, dv):
    q, k, v = torch.randn(b, h, sq, d), torch.randn(b, h, sk, d), torch.randn(b, h, sk, dv)
    expected = 2 * b * h * sq * sk * d + 2 * b * h * sq * sk * dv  # QK^T, then PV
    if d == dv:
        assert expected == 4 * b * h * sq * sk * d
    assert _count(_explicit_attention, q, k, v) == expected
    op = {"op": "attention", "b": b, "h": h, "sq": sq, "sk": sk, "d": d}
    if dv != d:
        op["dv"] = dv
    assert op_cost(op, {}, "float32").tensor_flops == expected


def test_causal_attention_is_half():
    b, h, s, d = 2, 3, 8, 4
    op = {"op": "attention", "b": b, "h": h, "sq": s, "sk": s, "d": d}
    full = op_cost(op, {}, "float32").tensor_flops
    causal = op_cost({**op, "causal": 1}, {}, "float32").tensor_flops
    assert full == 4 * b * h * s * s * d
    assert causal == 2 * b * h * s * s * d


@pytest.mark.parametrize("kind", ["add", "bias_add", "relu", "gelu", "softmax", "layernorm",
                                  "batchnorm", "elementwise", "copy"])
def test_vector_ops_add_no_tensor_flops(kind: str):
    cost = op_cost({"op": kind, "rows": 4, "cols": 8}, {}, "float32")
    assert cost.tensor_flops == 0 and cost.bytes > 0


def test_flop_counter_counts_no_pointwise_or_normalization():
    x = torch.randn(4, 8, 6, 6)
    assert _count(F.gelu, x) == 0
    assert _count(torch.softmax, x, -1) == 0
    assert _count(F.layer_norm, x, (6,)) == 0
    assert _count(F.batch_norm, x, torch.zeros(8), torch.ones(8), None, None, False) == 0


# ------------------------------------------------------- op field sets match what the model reads


class _Recording(dict):
    """An op mapping that records which keys the cost model looks at."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.read: set[str] = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self.read.add(key)
        return super().__contains__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)


def test_op_field_sets_are_exactly_what_the_cost_model_reads():
    from solbench.analysis.cost import known_ops
    from solbench.workload.ops import COMMON_FIELDS, DTYPE_FIELDS, OP_FIELDS

    assert known_ops() == set(OP_FIELDS) >= set(DTYPE_FIELDS)
    for kind, (required, optional) in OP_FIELDS.items():
        variants = [required | optional]
        if "numel" in optional:
            variants = [(required | optional) - {"rows", "cols"}, (required | optional) - {"numel"}]
        dtypes = DTYPE_FIELDS.get(kind, frozenset())
        read: set[str] = set()
        for fields in variants:
            op = _Recording({"op": kind, **{f: 2 if f == "ranks" else 1 for f in fields},
                             **dict.fromkeys(dtypes, "float8_e4m3fn")})
            op_cost(op, {}, "float32")
            read |= op.read
        assert read <= required | optional | dtypes | COMMON_FIELDS, kind
        assert read >= required | optional | dtypes, f"{kind}: declared fields the cost model never reads"


def test_a_narrower_b_operand_counts_at_its_own_width_in_the_ops_bytes():
    """o_proj_fp8w's matmul reads an FP8 weight beside 16-bit x: its unfused bytes count the weight at
    one byte (before ``b_dtype`` they counted it at two, 33.6 MB where 16.8 MB is read)."""
    mm = {"op": "matmul", "m": 16, "n": 4096, "k": 4096}
    wide, narrow = op_cost(mm, {}, "bfloat16"), op_cost({**mm, "b_dtype": "float8_e4m3fn"}, {}, "bfloat16")
    assert wide.bytes - narrow.bytes == 4096 * 4096 and narrow.tensor_flops == wide.tensor_flops
    (p,) = plan([WORKLOAD_DIR / "attn.yaml"], "cuda", only=["o_proj_fp8w"])
    assert len(p.cases) == 6
    for case in p.cases:
        t, h = case.scope["tokens"], case.scope["hidden"]
        cost = cost_of(p, case)
        assert cost.unfused_bytes == 2 * (t * h + t * h) + h * h + 2 * 3 * t * h, case.case_id
        assert cost.unfused_bytes < cost.fused_bytes + 2 * 3 * t * h  # the chain adds only the add's own traffic


def test_flags_written_as_booleans_cost_the_same_as_numbers():
    from solbench.workload.schema import Op

    base = {"op": "attention", "b": 2, "h": 3, "sq": 8, "sk": 8, "d": 4}
    as_bool = op_cost(Op.model_validate({**base, "causal": True}).sizes(), {}, "float32")
    as_int = op_cost({**base, "causal": 1}, {}, "float32")
    assert as_bool == as_int and as_bool.tensor_flops == 2 * 2 * 3 * 8 * 8 * 4
    mm = {"op": "matmul", "m": 5, "n": 7, "k": 3}
    assert op_cost(Op.model_validate({**mm, "bias": True}).sizes(), {}, "float32") == op_cost(
        {**mm, "bias": 1}, {}, "float32")
