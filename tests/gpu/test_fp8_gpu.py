"""The FP8 o_proj (static scales, one-pass quantization, one FP8 cuBLASLt GEMM; skipped without CUDA)."""

import pytest
import torch

pytestmark = pytest.mark.gpu


def _fp8_gpu() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9)


@pytest.mark.skipif(not _fp8_gpu(), reason="needs FP8 tensor cores")
def test_one_pass_quantization_matches_torchs_two_kernels_bit_for_bit():
    pytest.importorskip("triton")
    from solbench.kernels.fp8_quant import quantize

    x = torch.randn(2048, 4096, device="cuda", dtype=torch.bfloat16) * 3
    inv = torch.tensor([448.0 / 9.0], device="cuda")
    out = quantize(x, torch.empty(x.shape, dtype=torch.float8_e4m3fn, device="cuda"), inv)
    expected = (x.float() * inv).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    assert torch.equal(out.view(torch.uint8), expected.view(torch.uint8))


@pytest.mark.skipif(not _fp8_gpu(), reason="needs FP8 tensor cores")
@pytest.mark.parametrize("tokens", [1, 16, 2048])
def test_the_fp8_o_proj_is_within_fp8_error_of_the_fp32_result(tokens):
    pytest.importorskip("nvmath")
    from solbench.impls import attn

    g = torch.Generator(device="cuda").manual_seed(tokens)
    x = torch.randn(tokens, 4096, device="cuda", generator=g).bfloat16()
    w = (torch.randn(4096, 4096, device="cuda", generator=g) * 4096 ** -0.5).bfloat16()
    r = torch.randn(tokens, 4096, device="cuda", generator=g).bfloat16()
    out = attn.o_proj_fp8_static(**attn.o_proj_fp8_static_setup(x, w, r))
    ref = x.float() @ w.float().t() + r.float()
    assert out.dtype == torch.bfloat16 and out.shape == (tokens, 4096)
    rel = float((out.float() - ref).norm() / ref.norm())
    assert 1e-3 < rel < 0.06  # FP8's error (about 2.7% at 16+ tokens), not bf16's, and within the tolerance
