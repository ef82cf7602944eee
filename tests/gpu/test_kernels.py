"""solbench.kernels.ops against float64 references on a real GPU (skipped without CUDA or CuPy).

Every output is checked on fresh random data (never zeros) after the allocator's cached
memory was filled with NaN, so an element the kernel forgot to write reads NaN and fails.
"""

import warnings
import zlib

import pytest
import torch
import torch.nn.functional as F

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
with warnings.catch_warnings():  # CuPy's own environment notices are not under test here
    warnings.simplefilter("ignore")
    pytest.importorskip("cupy")

from solbench.kernels import gemv_plan, loader, ops, w8a16  # after the skips: needs CUDA and CuPy

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.filterwarnings("ignore::Warning:cupy.*"),
    pytest.mark.filterwarnings("ignore::Warning:cupy_backends.*"),
]

DTYPES = [torch.bfloat16, torch.float16]
ROWS = [1, 3, 17, 1000]
HIDDEN = [768, 4096, 1000, 777]  # 777: not a multiple of 8 -> scalar path
TOKENS = [1, 5, 16, 33, 64]
GEMV_SHAPES = [(4096, 4096), (1000, 768), (777, 1000), (96, 777)]  # (N, K); K=777 -> scalar
# (relative error norm, elementwise atol/rtol) per dtype: a few roundings of the output
TOL = {torch.bfloat16: (1e-2, 2e-2), torch.float16: (2e-3, 4e-3)}


def _needs(source: str) -> None:
    """Skip, with the loader's own reason, where this GPU is older than the source declares."""
    reason = loader.unsupported_reason(source)
    if reason is not None:
        pytest.skip(reason)


def _gen(*key) -> torch.Generator:
    g = torch.Generator(device="cuda")
    g.manual_seed(zlib.crc32(repr(key).encode()))
    return g


def _randn(shape, dtype, g, scale=1.0, shift=0.0):
    return (torch.randn(shape, generator=g, device="cuda", dtype=torch.float32) * scale
            + shift).to(dtype)


def _poison() -> None:
    """Leave NaN (0x7fff: NaN in bf16, fp16 and, paired, fp32) in free allocator blocks of every size
    class the tests allocate, so an element a kernel leaves unwritten reads NaN.

    The caching allocator gives a request its best-fitting cached block, but does not always split a
    much larger one: on an H200 (torch 2.11) an 8 MB request after one freed 256 MB block got fresh,
    zeroed memory. So blocks of many sizes are filled: the small pool (512 B to 1 MB) and the large
    pool (2 MB to 256 MB), two of each.
    """
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    sizes = [512 << k for k in range(12)]  # 512 B .. 1 MB: the small pool
    sizes += [mb << 20 for mb in (2, 4, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64, 96, 128, 192, 256)]
    blocks = [torch.empty(size, dtype=torch.uint8, device="cuda") for size in sizes for _ in range(2)]
    for t in blocks:
        t.view(torch.int16).fill_(0x7FFF)
    del blocks


def _close(name, got, ref, dtype):
    """Finite, relative error norm and elementwise closeness against a float64 reference."""
    rel_norm, tol = TOL[dtype]
    got = got.double()
    assert torch.isfinite(got).all(), f"{name}: non-finite output (unwritten element?)"
    err = (got - ref).norm() / ref.norm()
    assert err <= rel_norm, f"{name}: relative error norm {err:.2e} > {rel_norm:.0e}"
    torch.testing.assert_close(got, ref, atol=tol, rtol=tol, msg=lambda m: f"{name}: {m}")


def test_poison_makes_unwritten_memory_nan():
    _poison()
    small = torch.empty(1000, dtype=torch.bfloat16, device="cuda")
    large = torch.empty(4 << 20, dtype=torch.float16, device="cuda")
    assert torch.isnan(small).all() and torch.isnan(large).all()


# ----------------------------------------------------------------- residual + LayerNorm

def _ln_inputs(rows, hidden, dtype):
    g = _gen("ln", rows, hidden, dtype)
    return (_randn((rows, hidden), dtype, g), _randn((rows, hidden), dtype, g),
            _randn(hidden, dtype, g, 0.2, 1.0), _randn(hidden, dtype, g, 0.2))


def _ln_check(x, res, w, b, out, summed, dtype, eps=1e-5):
    ref_sum = x + res  # eager torch: fp32 add rounded to dtype, as the kernel does
    torch.testing.assert_close(summed, ref_sum, atol=0, rtol=2 ** -7 if dtype == torch.bfloat16
                               else 2 ** -10)
    ref = F.layer_norm(summed.double(), (x.shape[-1],), w.double(), b.double(), eps)
    _close("out", out, ref, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("hidden", HIDDEN)
@pytest.mark.parametrize("rows", ROWS)
def test_residual_layernorm(rows, hidden, dtype):
    _needs("residual_layernorm.cu")
    x, res, w, b = _ln_inputs(rows, hidden, dtype)
    _poison()
    out, summed = ops.residual_layernorm(x, res, w, b)
    assert out.shape == summed.shape == x.shape and out.dtype == summed.dtype == dtype
    _ln_check(x, res, w, b, out, summed, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("hidden", HIDDEN)
@pytest.mark.parametrize("rows", [3, 1000])
def test_residual_layernorm_out_and_plain_layernorm(rows, hidden, dtype):
    """MODE 2 (sum not stored) gives residual_layernorm's out bit for bit; MODE 1 is LayerNorm(x)."""
    _needs("residual_layernorm.cu")
    x, res, w, b = _ln_inputs(rows, hidden, dtype)
    _poison()
    expected, summed = ops.residual_layernorm(x, res, w, b)
    out = ops.residual_layernorm_out(x, res, w, b)
    assert out.shape == x.shape and out.dtype == dtype
    assert torch.equal(out, expected)
    _poison()
    plain = ops.layernorm(summed, w, b)
    assert torch.equal(plain, expected)  # LN of the stored sum: the same fp32 math on the same bits
    _close("layernorm", plain, F.layer_norm(summed.double(), (hidden,), w.double(), b.double(), 1e-5), dtype)


def test_residual_layernorm_3d_input_and_eps():
    _needs("residual_layernorm.cu")
    x, res, w, b = _ln_inputs(24, 768, torch.bfloat16)
    x3, r3 = x.view(2, 12, 768), res.view(2, 12, 768)
    _poison()
    out, summed = ops.residual_layernorm(x3, r3, w, b, eps=1e-3)
    assert out.shape == (2, 12, 768)
    _ln_check(x, res, w, b, out.view(24, 768), summed.view(24, 768), torch.bfloat16, eps=1e-3)


def test_residual_layernorm_misaligned_takes_scalar_path():
    """A view 2 bytes off a 16-byte boundary is still computed correctly (scalar loads)."""
    _needs("residual_layernorm.cu")
    rows, hidden, dtype = 17, 768, torch.float16
    x, res, w, b = _ln_inputs(rows, hidden, dtype)
    buf = torch.empty(rows * hidden + 1, dtype=dtype, device="cuda")
    xm = buf[1:].view(rows, hidden)
    xm.copy_(x)
    assert xm.is_contiguous() and xm.data_ptr() % 16 != 0
    _poison()
    out, summed = ops.residual_layernorm(xm, res, w, b)
    _ln_check(x, res, w, b, out, summed, dtype)


def test_residual_layernorm_rejects_bad_arguments():
    _needs("residual_layernorm.cu")
    x, res, w, b = _ln_inputs(8, 768, torch.bfloat16)
    with pytest.raises(ValueError, match="not contiguous"):
        ops.residual_layernorm(x.t(), res.t(), w, b)
    with pytest.raises(ValueError, match="residual shape"):
        ops.residual_layernorm(x, res[:4], w, b)
    with pytest.raises(ValueError, match="weight shape"):
        ops.residual_layernorm(x, res, w[:10], b)
    with pytest.raises(ValueError, match="dtype"):
        ops.residual_layernorm(x.float(), res.float(), w.float(), b.float())
    with pytest.raises(ValueError, match="dtype"):
        ops.residual_layernorm(x, res.half(), w, b)
    with pytest.raises(ValueError, match="CUDA"):
        ops.residual_layernorm(x.cpu(), res.cpu(), w.cpu(), b.cpu())


# ----------------------------------------------------------------- bias + GELU

def _gelu_inputs(rows, hidden, dtype):
    g = _gen("gelu", rows, hidden, dtype)
    return _randn((rows, hidden), dtype, g, 3.0), _randn(hidden, dtype, g)


def _gelu_ref(x, bias, approximate):
    return F.gelu((x + bias).double(), approximate=approximate)  # x + bias rounded, as eager


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("hidden", HIDDEN)
@pytest.mark.parametrize("rows", ROWS)
def test_bias_gelu(rows, hidden, dtype, approximate):
    _needs("bias_gelu.cu")
    x, bias = _gelu_inputs(rows, hidden, dtype)
    _poison()
    out = ops.bias_gelu(x, bias, approximate=approximate)
    assert out.shape == x.shape and out.dtype == dtype
    _close("gelu", out, _gelu_ref(x, bias, approximate), dtype)


def test_bias_gelu_matches_torch_within_one_rounding():
    """Against torch's own bf16 gelu: at most one bf16 rounding apart, rarely even that.

    Where torch's float32 ``1 + erf(h / sqrt 2)`` cancels (h < -4 or so) the erfc form is
    the more accurate one, so tiny negative outputs may differ from torch's -0.0.
    """
    _needs("bias_gelu.cu")
    x, bias = _gelu_inputs(1000, 4096, torch.bfloat16)
    ours = ops.bias_gelu(x, bias)
    theirs = F.gelu(x + bias)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=2 ** -7)
    big = theirs.abs() > 1e-3
    assert (ours != theirs)[big].float().mean().item() < 1e-2


def test_bias_gelu_misaligned_takes_scalar_path():
    _needs("bias_gelu.cu")
    rows, hidden, dtype = 17, 1000, torch.bfloat16
    x, bias = _gelu_inputs(rows, hidden, dtype)
    buf = torch.empty(rows * hidden + 3, dtype=dtype, device="cuda")
    xm = buf[3:].view(rows, hidden)
    xm.copy_(x)
    assert xm.is_contiguous() and xm.data_ptr() % 16 != 0
    _poison()
    out = ops.bias_gelu(xm, bias)
    _close("gelu", out, _gelu_ref(x, bias, "none"), dtype)


def test_bias_gelu_rejects_bad_arguments():
    _needs("bias_gelu.cu")
    x, bias = _gelu_inputs(8, 768, torch.float16)
    with pytest.raises(ValueError, match="not contiguous"):
        ops.bias_gelu(x[:, ::2], bias[::2])
    with pytest.raises(ValueError, match="bias shape"):
        ops.bias_gelu(x, bias[:5])
    with pytest.raises(ValueError, match="approximate"):
        ops.bias_gelu(x, bias, approximate="sigmoid")
    with pytest.raises(ValueError, match="dtype"):
        ops.bias_gelu(x, bias.bfloat16())


# ----------------------------------------------------------------- GEMV + residual

def _gemv_inputs(tokens, n, k, dtype):
    g = _gen("gemv", tokens, n, k, dtype)
    return (_randn((tokens, k), dtype, g), _randn((n, k), dtype, g, k ** -0.5),
            _randn((tokens, n), dtype, g))


def _gemv_ref(x, w, res):
    return x.double() @ w.double().t() + res.double()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", GEMV_SHAPES, ids=lambda s: f"N{s[0]}xK{s[1]}")
@pytest.mark.parametrize("tokens", TOKENS)
def test_gemv_residual(tokens, shape, dtype):
    _needs("gemv_stream.cu")
    n, k = shape
    x, w, res = _gemv_inputs(tokens, n, k, dtype)
    _poison()
    out = ops.gemv_residual(x, w, res)
    assert out.shape == (tokens, n) and out.dtype == dtype
    _close("gemv", out, _gemv_ref(x, w, res), dtype)


def test_gemv_residual_more_than_64_tokens_runs_in_chunks():
    _needs("gemv_stream.cu")
    x, w, res = _gemv_inputs(100, 1000, 768, torch.bfloat16)
    _poison()
    _close("gemv", ops.gemv_residual(x, w, res), _gemv_ref(x, w, res), torch.bfloat16)


def test_gemv_residual_misaligned_takes_scalar_path():
    _needs("gemv_stream.cu")
    tokens, n, k, dtype = 5, 96, 768, torch.bfloat16
    x, w, res = _gemv_inputs(tokens, n, k, dtype)
    buf = torch.empty(tokens * k + 1, dtype=dtype, device="cuda")
    xm = buf[1:].view(tokens, k)
    xm.copy_(x)
    assert xm.is_contiguous() and xm.data_ptr() % 16 != 0
    _poison()
    _close("gemv", ops.gemv_residual(xm, w, res), _gemv_ref(x, w, res), dtype)


@pytest.mark.parametrize("k", [20, 768])  # 20: K % 8 != 0; 768 with a misaligned x
def test_gemv_residual_scalar_path_beyond_65535_tokens(k):
    """The scalar kernel put one grid row (gridDim.y) per token, which CUDA caps at 65535: from 65536
    tokens its launch failed. It now runs in launches of at most 65535 tokens."""
    _needs("gemv_residual.cu")
    tokens, n, dtype = 65535 + 9, 24, torch.bfloat16
    x, w, res = _gemv_inputs(tokens, n, k, dtype)
    if k % 8 == 0:  # a view 2 bytes off a 16-byte boundary: the scalar path too
        buf = torch.empty(tokens * k + 1, dtype=dtype, device="cuda")
        xm = buf[1:].view(tokens, k)
        xm.copy_(x)
        assert xm.is_contiguous() and xm.data_ptr() % 16 != 0
    else:
        xm = x
    _poison()
    out = ops.gemv_residual(xm, w, res)
    assert out.shape == (tokens, n)
    _close("gemv", out, _gemv_ref(x, w, res), dtype)


def test_gemv_residual_rejects_bad_arguments():
    _needs("gemv_stream.cu")
    x, w, res = _gemv_inputs(4, 64, 128, torch.float16)
    with pytest.raises(ValueError, match="not contiguous"):
        ops.gemv_residual(x, w.t().contiguous().t(), res)
    with pytest.raises(ValueError, match="weight shape"):
        ops.gemv_residual(x, w[:, :64].contiguous(), res)
    with pytest.raises(ValueError, match="residual shape"):
        ops.gemv_residual(x, w, res[:, :10].contiguous())
    with pytest.raises(ValueError, match="2-D"):
        ops.gemv_residual(x.view(2, 2, 128), w, res)


def test_gemv_residual_of_an_empty_reduction_is_the_residual():
    """K=0 went to the streaming kernel's planner, which found no tile and said 'no tile fits ... bytes
    of shared memory'; the sum over no K is zero, so the output is the residual (as torch.addmm)."""
    _needs("gemv_stream.cu")
    g = _gen("gemv", 4, 64, 0)
    x, w = (torch.empty(shape, dtype=torch.bfloat16, device="cuda") for shape in ((4, 0), (64, 0)))
    res = _randn((4, 64), torch.bfloat16, g)
    assert torch.equal(ops.gemv_residual(x, w, res), res)
    scale = torch.ones(64, dtype=torch.float32, device="cuda")
    assert torch.equal(ops.gemv_fp8_residual(x, w.to(torch.float8_e4m3fn), scale, res), res)



# ----------------------------------------------------------------- streaming GEMV: every tile shape

STREAM_PLANS = [(16, 1), (32, 1), (64, 1), (64, 2), (128, 4), (128, 2)]  # (rows per CTA, cluster)
STREAM_SHAPES = [(4096, 4096), (1000, 1032), (200, 4104)]  # N not a multiple of the tile, K not of a stage


def _plan_or_skip(rows, cluster, tokens, k, w8):
    if cluster > 1 and loader.device_cc() < (9, 0):
        pytest.skip(f"needs compute capability 9.0+ for clusters; this GPU is {loader.device_cc()}")
    plan = gemv_plan.fit(rows, cluster, tokens, k, w8, gemv_plan._device_limits(torch.cuda.current_device())[1])
    if plan is None:
        pytest.skip(f"tile rows={rows} cluster={cluster} does not fit {tokens} tokens, K={k}")
    return plan


def _stream(x, w, scale, res, plan):
    out = torch.empty((x.shape[0], w.shape[0]), dtype=x.dtype, device="cuda")
    ops._stream(x, w, scale, res, out, plan=plan)
    return out


@pytest.mark.parametrize("plan", STREAM_PLANS, ids=lambda p: f"rows{p[0]}-cl{p[1]}")
@pytest.mark.parametrize("shape", STREAM_SHAPES, ids=lambda s: f"N{s[0]}xK{s[1]}")
@pytest.mark.parametrize("tokens", [1, 16, 37, 64])
def test_gemv_stream_every_plan(tokens, shape, plan):
    _needs("gemv_stream.cu")
    n, k = shape
    p = _plan_or_skip(*plan, tokens, k, False)
    for dtype in DTYPES:
        x, w, res = _gemv_inputs(tokens, n, k, dtype)
        _poison()
        _close(f"stream {p}", _stream(x, w, None, res, p), _gemv_ref(x, w, res), dtype)


def _fp8_inputs(tokens, n, k, dtype):
    x, w, res = _gemv_inputs(tokens, n, k, dtype)
    scale = (w.float().abs().amax(dim=1) / 448.0).clamp_min(1e-12)
    w8 = (w.float() / scale[:, None]).to(torch.float8_e4m3fn)
    return x, w8, scale.contiguous(), res


def _fp8_ref(x, w8, scale, res):
    return x.double() @ (w8.double() * scale.double()[:, None]).t() + res.double()


@pytest.mark.parametrize("plan", STREAM_PLANS, ids=lambda p: f"rows{p[0]}-cl{p[1]}")
@pytest.mark.parametrize("shape", [(4096, 4096), (1000, 1040), (200, 4112)], ids=lambda s: f"N{s[0]}xK{s[1]}")
@pytest.mark.parametrize("tokens", [1, 16, 37, 64])
def test_gemv_fp8_stream_every_plan(tokens, shape, plan):
    """FP8 weights widened exactly: the result matches fp64 math on the same FP8 values."""
    _needs("gemv_stream.cu")
    n, k = shape
    p = _plan_or_skip(*plan, tokens, k, True)
    for dtype in DTYPES:
        x, w8, scale, res = _fp8_inputs(tokens, n, k, dtype)
        _poison()
        _close(f"fp8 stream {p}", _stream(x, w8, scale, res, p), _fp8_ref(x, w8, scale, res), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("tokens", [1, 16, 64, 100])
def test_gemv_fp8_residual_default_plan(tokens, dtype):
    _needs("gemv_stream.cu")
    x, w8, scale, res = _fp8_inputs(tokens, 4096, 4096, dtype)
    _poison()
    out = ops.gemv_fp8_residual(x, w8, scale, res)
    assert out.shape == (tokens, 4096) and out.dtype == dtype
    _close("fp8", out, _fp8_ref(x, w8, scale, res), dtype)


W8A16_CONFIGS = [w8a16.DEFAULT, w8a16.Config(128, 128, 4, 4, 4), w8a16.Config(32, 128, 1, 4, 3),
                  w8a16.Config(64, 512, 3, 4, 2)]


@pytest.mark.parametrize("config", W8A16_CONFIGS, ids=str)
@pytest.mark.parametrize("shape", [(4096, 4096), (1000, 1040), (200, 4112)], ids=lambda s: f"N{s[0]}xK{s[1]}")
@pytest.mark.parametrize("tokens", [1, 17, 64, 100])
def test_w8a16_tiles_match_fp64_math(tokens, shape, config):
    """The Triton tensor-core path: any split of K (one kernel, or partial sums and a finishing kernel),
    ragged rows, K and token tiles; the result matches fp64 math on the same FP8 values."""
    pytest.importorskip("triton")
    if loader.device_cc() < (8, 9):
        pytest.skip("Triton has the e4m3 type from compute capability 8.9")
    n, k = shape
    for dtype in DTYPES:
        x, w8, scale, res = _fp8_inputs(tokens, n, k, dtype)
        _poison()
        out = torch.empty_like(res)
        got = w8a16.linear_residual(x, w8, scale, res, out, config)
        assert got is out
        _close(f"w8a16 {config}", out, _fp8_ref(x, w8, scale, res), dtype)


def test_w8a16_finishing_kernel_reaches_outputs_past_two_to_the_31():
    """With K split in parts, the finishing kernel indexed the T * N outputs with int32 offsets
    (program_id * BLOCK): past 2**31 outputs they wrapped around to negative offsets, so the last outputs
    were never written (and memory before the buffers was read and written)."""
    pytest.importorskip("triton")
    if loader.device_cc() < (8, 9):
        pytest.skip("Triton has the e4m3 type from compute capability 8.9")
    tokens, n, k, dtype = 32768, 65600, 272, torch.bfloat16
    assert tokens * n > 2**31 + 2**20 and w8a16.split_for(w8a16.DEFAULT, k) == 2
    need = tokens * n * (2 + 2 + 2 * 4) + (4 << 30)  # residual, out, two fp32 partial sums, and room
    if torch.cuda.mem_get_info()[0] < need:
        pytest.skip(f"needs about {need / 1e9:.0f} GB of free GPU memory")
    g = _gen("w8a16 past 2**31", tokens, n, k)
    x = _randn((tokens, k), dtype, g)
    w = _randn((n, k), dtype, g, k ** -0.5)
    scale = (w.float().abs().amax(dim=1) / 448.0).clamp_min(1e-12).contiguous()
    w8 = (w.float() / scale[:, None]).to(torch.float8_e4m3fn)
    del w
    res = torch.randn((tokens, n), generator=g, device="cuda", dtype=dtype)
    out = torch.full_like(res, float("nan"))  # what an output left unwritten reads
    assert w8a16.linear_residual(x, w8, scale, res, out) is out
    assert not torch.isnan(out).any(), "outputs left unwritten"
    first_past = 2**31 // n  # the token holding flat output 2**31
    for rows in (slice(0, 64), slice(first_past - 8, first_past + 8), slice(tokens - 64, tokens)):
        _close(f"w8a16 tokens {rows.start}:{rows.stop}", out[rows], _fp8_ref(x[rows], w8, scale, res[rows]), dtype)


@pytest.mark.parametrize("k", [32, 272])  # 32: one K part; 272: two, and the finishing kernel
def test_gemv_fp8_residual_beyond_65535_token_tiles(k):
    """The tensor-core tiles put the tokens on the grid's z axis, 64 a tile, which CUDA caps at 65535
    tiles: from 65535 * 64 + 1 tokens the launch failed. They now run in slices of at most 65535 tiles."""
    _needs("gemv_stream.cu")
    pytest.importorskip("triton")
    tokens, n, dtype = 65535 * 64 + 37, 16, torch.bfloat16
    if torch.cuda.mem_get_info()[0] < 16 * tokens * k:  # x in fp32 and bf16 while drawn, and room to spare
        pytest.skip(f"needs about {16 * tokens * k / 1e9:.0f} GB of free GPU memory")
    x, w8, scale, res = _fp8_inputs(tokens, n, k, dtype)
    _poison()
    out = ops.gemv_fp8_residual(x, w8, scale, res)
    assert out.shape == (tokens, n)
    step = 1 << 20
    for t0 in range(0, tokens, step):  # the float64 reference a slice at a time
        rows = slice(t0, t0 + step)
        _close(f"fp8 tokens {t0}+", out[rows], _fp8_ref(x[rows], w8, scale, res[rows]), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gemv_fp8_residual_agrees_on_both_sides_of_the_switch(dtype):
    """At the token count where gemv_fp8_residual moves to the tensor-core tiles, both paths give the
    same outputs to within rounding of the output type."""
    _needs("gemv_stream.cu")
    pytest.importorskip("triton")
    tokens = w8a16.MIN_TOKENS[dtype]
    x, w8, scale, res = _fp8_inputs(tokens, 4096, 4096, dtype)
    streamed = _stream(x, w8, scale, res, None)
    tiled = ops.gemv_fp8_residual(x, w8, scale, res)
    ref = _fp8_ref(x, w8, scale, res)
    _close("stream", streamed, ref, dtype)
    _close("tiles", tiled, ref, dtype)


def test_gemv_fp8_every_e4m3_value_widens_exactly():
    """One-hot tokens read single weights: each finite e4m3 code comes out exactly (x scale)."""
    _needs("gemv_stream.cu")
    codes = torch.arange(256, dtype=torch.int32)
    finite = codes[(codes != 0x7F) & (codes != 0xFF)].to(torch.uint8)
    k = 256
    w = torch.zeros((16, k), dtype=torch.uint8)
    for r in range(16):
        w[r, : finite.numel()] = finite.roll(r)
    w8 = w.view(torch.float8_e4m3fn).cuda()
    scale = torch.full((16,), 2.0**-9, dtype=torch.float32, device="cuda")  # keeps every value exact
    for dtype in DTYPES:
        x = torch.eye(k, dtype=dtype, device="cuda")  # token t reads column t of every row
        res = torch.zeros((k, 16), dtype=dtype, device="cuda")
        got = ops.gemv_fp8_residual(x, w8, scale, res)
        ref = (w8.double() * 2.0**-9).t().to(dtype)
        assert torch.equal(got, ref), f"{dtype}: {(got != ref).sum().item()} values differ"


def test_gemv_fp8_rejects_bad_arguments():
    _needs("gemv_stream.cu")
    x, w8, scale, res = _fp8_inputs(4, 64, 128, torch.bfloat16)
    with pytest.raises(ValueError, match="float8_e4m3fn"):
        ops.gemv_fp8_residual(x, w8.to(torch.bfloat16), scale, res)
    with pytest.raises(ValueError, match="float32"):
        ops.gemv_fp8_residual(x, w8, scale.half(), res)
    with pytest.raises(ValueError, match="scale shape"):
        ops.gemv_fp8_residual(x, w8, scale[:10].contiguous(), res)


# ----------------------------------------------------------------- max pooling (NHWC)

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("shape", "window"), [
    ((2, 64, 112, 112), (3, 2, 1)),  # ResNet-50's stem pool, 16-byte path
    ((3, 16, 15, 17), (3, 2, 1)),  # odd sizes
    ((2, 12, 9, 9), (3, 2, 1)),  # 12 channels: scalar path
    ((1, 8, 8, 8), (2, 2, 0)),
    ((1, 24, 7, 7), (3, 1, 1)),
])
def test_maxpool2d_nhwc_equals_torch(shape, window, dtype):
    _needs("maxpool_nhwc.cu")
    k, s, p = window
    x = _randn(shape, dtype, _gen("pool", shape, window, dtype)).contiguous(memory_format=torch.channels_last)
    _poison()
    out = ops.maxpool2d_nhwc(x, k, s, p)
    expected = F.max_pool2d(x, k, s, p)
    assert out.shape == expected.shape and out.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(out, expected)  # a max is exact


def test_maxpool2d_nhwc_propagates_nan_and_checks_layout():
    _needs("maxpool_nhwc.cu")
    x = torch.zeros(1, 8, 6, 6, dtype=torch.bfloat16, device="cuda").contiguous(memory_format=torch.channels_last)
    x[0, 3, 2, 2] = float("nan")
    out = ops.maxpool2d_nhwc(x, 3, 2, 1)
    # only the window of output (1, 1) (input rows and columns 1..3) holds the NaN
    assert torch.isnan(out).nonzero().tolist() == [[0, 3, 1, 1]]
    with pytest.raises(ValueError, match="channels_last"):
        ops.maxpool2d_nhwc(torch.zeros(1, 8, 6, 6, dtype=torch.bfloat16, device="cuda"), 3, 2, 1)
