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
def test_one_pass_quantization_reaches_elements_past_two_to_the_31():
    pytest.importorskip("triton")
    from solbench.kernels.fp8_quant import quantize

    n = 2**31 + 4096 * 3 + 17  # int32 offsets wrap past 2**31: the tail would be left unwritten or written wrong
    if torch.cuda.mem_get_info()[0] < 5 * n:  # bf16 in, fp8 out, a bool mask, and room to spare
        pytest.skip("needs about 11 GB of free GPU memory")
    x = torch.empty(n, device="cuda", dtype=torch.bfloat16)
    x[:-4096 * 4].fill_(1.0)
    tail = torch.randn(4096 * 4, device="cuda", dtype=torch.bfloat16, generator=torch.Generator("cuda").manual_seed(3))
    x[-4096 * 4:] = tail
    inv = torch.tensor([2.0], device="cuda")
    out = torch.empty(n, device="cuda", dtype=torch.float8_e4m3fn)
    out.view(torch.uint8).fill_(0x7F)  # NaN in e4m3: what an unwritten element reads
    quantize(x, out, inv)
    expected = (tail.float() * 2.0).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    assert torch.equal(out[-4096 * 4:].view(torch.uint8), expected.view(torch.uint8))
    assert int((out[:-4096 * 4].view(torch.uint8) != 0x40).sum()) == 0  # 1.0 * 2 is 0x40 in e4m3


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
