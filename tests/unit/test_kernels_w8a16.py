"""The FP8-weight tensor-core path (solbench.kernels.w8a16) without a GPU: its launch arithmetic, and its
fp16 kernels under Triton's interpreter (not bf16: the interpreter gets bf16 dots wrong)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from solbench.errors import DeviceError
from solbench.kernels import w8a16


@pytest.mark.parametrize(("tokens", "slots"), [(0, 16), (1, 16), (16, 16), (17, 32), (33, 64), (64, 64), (500, 64)])
def test_token_slots_are_a_tensor_core_tile_of_at_most_64(tokens, slots):
    assert w8a16.block_t(tokens) == slots


@pytest.mark.parametrize(("k", "block_k", "split", "expected"),
                         [(4096, 256, 2, 2), (4096, 128, 4, 4), (256, 256, 2, 1), (300, 256, 8, 2), (1, 128, 4, 1)])
def test_k_is_split_only_where_it_has_steps_for_every_part(k, block_k, split, expected):
    config = w8a16.Config(64, block_k, split)
    got = w8a16.split_for(config, k)
    assert got == expected
    assert got * block_k >= min(k, block_k) and (got - 1) * block_k < k  # no part without a step of K


def test_the_switch_covers_both_16_bit_types_and_lies_within_one_launch_of_tokens():
    assert set(w8a16.MIN_TOKENS) == {torch.bfloat16, torch.float16}
    assert all(1 < t <= 64 for t in w8a16.MIN_TOKENS.values())


def test_without_triton_the_path_is_a_device_error_not_a_crash(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)  # import triton raises ImportError
    w8a16._kernels.cache_clear()
    try:
        with pytest.raises(DeviceError, match="Triton"):
            w8a16._kernels()
    finally:
        w8a16._kernels.cache_clear()


def test_tiles_and_finishing_kernel_match_fp64_math_under_the_interpreter():
    """Under Triton's interpreter (set before Triton is imported, so in a process of its own): ragged
    rows, tokens and K, one, two and three K parts (the partial sums finished by the second kernel),
    against fp64 math, every output written."""
    pytest.importorskip("triton")
    script = Path(__file__).parents[1] / "data" / "w8a16_interpreted.py"
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(Path(__file__).parents[2])}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.split()
    assert lines.count("ok") == 3, done.stdout


class _Recorder:
    """A stand-in for a Triton kernel: ``kernel[grid](*args, **meta)`` records (grid, args, meta)."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[int, ...], tuple, dict]] = []

    def __getitem__(self, grid):
        return lambda *args, **meta: self.calls.append((tuple(grid), args, meta))


def test_token_tiles_beyond_the_grids_z_axis_run_in_slices(monkeypatch):
    """Token tiles are the grid's z axis, which CUDA caps at 65535: from 65535 * 64 + 1 tokens the launch
    was refused. Now each launch takes at most 65535 tiles of 64 tokens, x, residual and out advanced to
    its first token."""
    partial, finish = _Recorder(), _Recorder()
    monkeypatch.setattr(w8a16, "_kernels", lambda: (partial, finish, lambda a, b: -(-a // b)))
    step = 65535 * 64
    tokens, n, k = 2 * step + 100, 1, 16
    x = torch.empty(tokens, k, dtype=torch.bfloat16)
    w8 = torch.empty(n, k, dtype=torch.float8_e4m3fn)
    scale = torch.ones(n)
    res = torch.empty(tokens, n, dtype=torch.bfloat16)
    out = torch.empty_like(res)
    assert w8a16.linear_residual(x, w8, scale, res, out) is out
    assert [grid for grid, _, _ in partial.calls] == [(1, 1, 65535), (1, 1, 65535), (1, 1, 2)]
    assert finish.calls == []  # K of one BLOCK_K step: the tile kernel finishes the rows
    for (_, args, _), t0, t in zip(partial.calls, (0, step, 2 * step), (step, step, 100), strict=True):
        xs, ws, ss, rs, os_, part, t_arg, n_arg, k_arg = args[:9]
        assert xs.data_ptr() == x.data_ptr() + t0 * k * 2 and xs.shape == (t, k)
        assert rs.data_ptr() == res.data_ptr() + t0 * n * 2 and os_.data_ptr() == out.data_ptr() + t0 * n * 2
        assert part is os_ and ws is w8 and ss is scale
        assert (t_arg, n_arg, k_arg) == (t, n, k)


def test_a_few_tokens_are_one_launch(monkeypatch):
    partial, finish = _Recorder(), _Recorder()
    monkeypatch.setattr(w8a16, "_kernels", lambda: (partial, finish, lambda a, b: -(-a // b)))
    x, res = torch.empty(100, 512, dtype=torch.float16), torch.empty(100, 200, dtype=torch.float16)
    w8, scale = torch.empty(200, 512, dtype=torch.float8_e4m3fn), torch.ones(200)
    w8a16.linear_residual(x, w8, scale, res, torch.empty_like(res))
    assert [grid for grid, _, _ in partial.calls] == [(4, 2, 2)]  # 64-row tiles, K split in two, 64-token tiles
    assert [grid for grid, _, _ in finish.calls] == [(-(-100 * 200 // w8a16.FINISH_BLOCK),)]
