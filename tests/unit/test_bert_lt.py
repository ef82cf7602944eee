"""The cuBLASLt (nvmath-python) implementations refuse what they cannot run, with a reason.

Their numbers and correctness are measured on a GPU (BENCHMARKS.md, issue 9); here: without
nvmath-python or without CUDA tensors they raise DeviceError (reported as ``skipped``), and a
misspelt SDPA backend is a ValueError before anything is planned.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

from solbench.errors import DeviceError
from solbench.impls import attn, bert_lt

HAS_NVMATH = importlib.util.find_spec("nvmath") is not None


def _layer_inputs(hidden: int = 16, ffn: int = 32) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g)

    return {"x": r(2, 4, hidden), "w_qkv": r(3 * hidden, hidden), "b_qkv": r(3 * hidden),
            "w_o": r(hidden, hidden), "b_o": r(hidden), "ln1_w": r(hidden), "ln1_b": r(hidden),
            "w_1": r(ffn, hidden), "b_1": r(ffn), "w_2": r(hidden, ffn), "b_2": r(hidden),
            "ln2_w": r(hidden), "ln2_b": r(hidden)}


def test_unknown_sdpa_backend_is_rejected():
    with pytest.raises(ValueError, match="sdpa must be one of flash, cudnn, efficient"):
        bert_lt.bert_layer_lt_setup(**_layer_inputs(), heads=2, sdpa="fast")


def test_cpu_tensors_are_refused_with_a_reason():
    with pytest.raises(DeviceError, match="needs"):
        bert_lt.bert_layer_lt_setup(**_layer_inputs(), heads=2)


@pytest.mark.skipif(HAS_NVMATH, reason="nvmath-python is installed here")
def test_without_nvmath_the_gemm_says_how_to_install_it():
    x, w, b = torch.randn(4, 8), torch.randn(16, 8), torch.randn(16)
    with pytest.raises(DeviceError, match=r"needs nvmath-python \(pip install 'solbench\[nvmath\]'\)"):
        bert_lt.EpilogueGemm(x, w, b)
    with pytest.raises(DeviceError, match="nvmath-python"):
        bert_lt.bias_gelu_matmul_lt_setup(x, w, b)


def test_qkv_lt_refuses_cpu_tensors():
    x, wq, wkv = torch.randn(4, 8), torch.randn(8, 8), torch.randn(4, 8)
    with pytest.raises(DeviceError, match="needs"):
        attn.qkv_fused_lt_setup(x, wq, wkv, wkv)
