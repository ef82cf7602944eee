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
