"""cuBLASLt choices reused across workers, on a GPU: a later plan of the same problem takes the
algorithm the first one measured fastest, times nothing, and computes the same result."""

import functools

import pytest
import torch

from solbench.device.timer import make_timer

pytestmark = pytest.mark.gpu


def test_a_reused_choice_runs_the_chosen_algorithm(tmp_path, monkeypatch):
    pytest.importorskip("nvmath")
    from solbench.impls import bert_lt, cublaslt

    monkeypatch.setenv(cublaslt.CHOICES_ENV, str(tmp_path))
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(512, 768, device="cuda", dtype=torch.bfloat16, generator=g)
    w = torch.randn(3072, 768, device="cuda", dtype=torch.bfloat16, generator=g) * 768 ** -0.5
    bias = torch.randn(3072, device="cuda", dtype=torch.bfloat16, generator=g)
    start, _ = cublaslt.plans_since(0)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    with cublaslt.tuning(functools.partial(make_timer, "cuda", "cold", l2_bytes=l2)):  # as in a measuring worker
        first = bert_lt.EpilogueGemm(x, w, bias, gelu=True)
        later = bert_lt.EpilogueGemm(x, w, bias, gelu=True)
    _, added = cublaslt.plans_since(start)
    labels = added.get("cublaslt_algorithms", "")
    if labels:  # both plans run one algorithm, recorded as "algorithm id:config hash"
        assert "," not in labels and labels.split(":")[0].isdigit()
    assert added.get("cublaslt_tuned", 0) <= 1  # one algorithm offered: nothing to reuse
    assert added.get("cublaslt_tuned", 0) == added.get("cublaslt_reused", 0)  # the second plan took the first's
    chosen = first._mm.algorithms[0].as_numpy().tobytes()
    if added.get("cublaslt_reused", 0):
        assert [a.as_numpy().tobytes() for a in later._mm.algorithms] == [chosen]
    assert torch.equal(first(x), later(x))  # same algorithm, same operands: the same bits
    ref = torch.nn.functional.gelu(x.float() @ w.float().T + bias.float(), approximate="tanh")
    assert torch.allclose(later(x).float(), ref, rtol=2e-2, atol=2e-2)
