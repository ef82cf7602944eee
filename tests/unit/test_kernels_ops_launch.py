"""The launch arithmetic of solbench.kernels.ops without a GPU: the kernels and the launcher are replaced by
recorders, and the grids and pointers each launch would get are checked."""

from __future__ import annotations

import pytest
import torch

from solbench.kernels import ops

GRID_YZ_MAX = 65535  # CUDA's limit on gridDim.y and gridDim.z


@pytest.fixture
def launches(monkeypatch):
    """Every ``ops.launch`` call as (grid, args); kernels are their names (nothing is compiled)."""
    calls: list[tuple[tuple[int, ...], tuple]] = []
    monkeypatch.setattr(ops, "_get", lambda source, name, options=(): name)
    monkeypatch.setattr(ops, "launch", lambda kernel, grid, block, args, *rest, **kw: calls.append((tuple(grid), args)))
    return calls


def test_scalar_gemv_puts_at_most_65535_tokens_on_the_grids_y_axis(launches):
    """The scalar GEMV (K % 8 != 0, or misaligned x or weight) launched one y block per token: from 65536
    tokens CUDA refused the launch. Now each launch takes at most 65535 tokens, with x, residual and out
    advanced to its first token."""
    tokens, n, k = 2 * GRID_YZ_MAX + 3, 5, 3
    x = torch.zeros(tokens, k, dtype=torch.bfloat16)
    w = torch.zeros(n, k, dtype=torch.bfloat16)
    res = torch.zeros(tokens, n, dtype=torch.bfloat16)
    out = torch.empty_like(res)
    ops._gemv_scalar(x, w, res, out)
    assert [grid for grid, _ in launches] == [(1, GRID_YZ_MAX), (1, GRID_YZ_MAX), (1, 3)]
    for (grid, args), t0 in zip(launches, (0, GRID_YZ_MAX, 2 * GRID_YZ_MAX), strict=True):
        assert int(args[0]) == x.data_ptr() + t0 * k * 2
        assert int(args[1]) == w.data_ptr()
        assert int(args[2]) == res.data_ptr() + t0 * n * 2
        assert int(args[3]) == out.data_ptr() + t0 * n * 2
        assert (int(args[4]), int(args[5]), int(args[6])) == (grid[1], n, k)  # T of this launch, N, K


def test_scalar_gemv_of_few_tokens_is_one_launch(launches):
    x, w = torch.zeros(7, 3, dtype=torch.float16), torch.zeros(20, 3, dtype=torch.float16)
    res = torch.zeros(7, 20, dtype=torch.float16)
    ops._gemv_scalar(x, w, res, torch.empty_like(res))
    assert [grid for grid, _ in launches] == [(3, 7)]


@pytest.mark.parametrize(("cc", "tiles"), [((8, 0), False), ((8, 6), False), ((8, 9), True), ((9, 0), True)])
def test_fp8_weight_tiles_only_where_triton_has_the_e4m3_type(monkeypatch, cc, tiles):
    """gemv_fp8_residual sent many tokens to Triton's tiles on any GPU, but Triton has no float8e4nv before
    compute capability 8.9 and refuses to compile them: on an A100 the call failed from 17 tokens (bf16) or
    16 (fp16). There the streaming GEMV (compute capability 8.0) now serves every size."""
    monkeypatch.setattr(ops, "_has_triton", lambda: True)
    monkeypatch.setattr(ops, "device_cc", lambda device=None: cc)
    device = torch.device("cuda", 0)
    for dtype in (torch.bfloat16, torch.float16):
        assert ops._fp8_tiles(64, dtype, device) is tiles
        assert ops._fp8_tiles(1, dtype, device) is False  # few tokens: the GEMV everywhere


def test_fp8_weight_tiles_need_triton(monkeypatch):
    monkeypatch.setattr(ops, "_has_triton", lambda: False)
    monkeypatch.setattr(ops, "device_cc", lambda device=None: (9, 0))
    assert ops._fp8_tiles(64, torch.bfloat16, torch.device("cuda", 0)) is False
