"""Tile choice of the streaming GEMV (pure): every plan fits, clusters only where supported."""

from __future__ import annotations

import pytest

from solbench.kernels import gemv_plan as gp

H100_SMEM = 232448  # opt-in shared memory per block, compute capability 9.0
A100_SMEM = 166912  # 8.0


@pytest.mark.parametrize("w8", [False, True])
@pytest.mark.parametrize("tokens", [1, 8, 16, 33, 64])
@pytest.mark.parametrize(("cc", "smem"), [((9, 0), H100_SMEM), ((8, 0), A100_SMEM), ((8, 9), 101376)])
def test_chosen_plan_fits_and_respects_the_device(tokens, w8, cc, smem):
    chunk = gp.chunk_tokens_for(tokens, 4096, 4096, w8, cc, smem)
    tokens = min(tokens, chunk)
    plan = gp.choose_for(tokens, 4096, 4096, w8, cc, smem)
    assert gp.shared_bytes(plan, tokens, w8) <= smem
    assert plan.stages >= 2 and plan.rows % 16 == 0
    if cc < (9, 0):
        assert plan.cluster == 1


def test_shared_bytes_counts_stages_and_the_zero_row():
    plan = gp.Plan(rows=32, cluster=1, stages=4)
    assert gp.stage_bytes(32, 16, False) == 32 * 512 + 16 * 512
    assert gp.stage_bytes(32, 16, True) == 32 * 512 + 16 * 1024  # FP8: twice the k per stage
    assert gp.shared_bytes(plan, 16, False) == 128 + 4 * (32 * 512 + 16 * 512)


def test_reduction_buffer_can_exceed_the_stages():
    # 16 rows: one warp along rows, 8 along k; 64 tokens: 8 x 64 x 20 floats
    assert gp.reduction_bytes(16, 64) == 8 * 64 * 20 * 4
    plan = gp.Plan(rows=16, cluster=1, stages=2)
    assert gp.shared_bytes(plan, 64, False) == 128 + max(2 * gp.stage_bytes(16, 64, False), 8 * 64 * 20 * 4)


def test_no_cluster_wider_than_the_k_stages():
    assert gp.fit(128, 4, 16, 512, False, H100_SMEM) is None  # 2 stages of K for 4 CTAs
    assert gp.fit(32, 1, 16, 512, False, H100_SMEM).stages == 3  # never more than needed + 1


@pytest.mark.parametrize("tokens", [0, 65])
def test_token_count_per_launch_is_bounded(tokens):
    with pytest.raises(ValueError, match="tokens per launch"):
        gp.choose_for(tokens, 4096, 4096, False, (9, 0), H100_SMEM)


def test_fewer_tokens_per_launch_where_shared_memory_is_small():
    assert gp.chunk_tokens_for(64, 4096, 4096, False, (9, 0), H100_SMEM) == 64
    assert gp.chunk_tokens_for(64, 4096, 4096, True, (8, 9), 101376) == 32


def test_nothing_fits_is_an_error():
    with pytest.raises(ValueError, match="no tile fits"):
        gp.choose_for(64, 4096, 4096, True, (8, 0), 40000)


H100_SM_SMEM = 233472  # shared memory per SM, compute capability 9.0


@pytest.mark.parametrize("tokens", [1, 8, 16])
def test_an_fp8_weight_takes_16_row_ctas_two_to_an_sm(tokens):
    plan = gp.choose_for(tokens, 4096, 4096, True, (9, 0), H100_SMEM, H100_SM_SMEM)
    assert (plan.rows, plan.cluster) == (16, 1)
    per_cta = gp.shared_bytes(plan, tokens, True) + gp.RESERVED_SMEM
    assert 2 * per_cta <= H100_SM_SMEM  # two CTAs fit on one SM
    deeper = gp.Plan(plan.rows, plan.cluster, plan.stages + 1)
    if plan.stages < gp.MAX_STAGES:  # and the pipeline is as deep as that allows
        assert 2 * (gp.shared_bytes(deeper, tokens, True) + gp.RESERVED_SMEM) > H100_SM_SMEM


def test_the_16_bit_weight_and_many_tokens_keep_their_tiles():
    assert gp.choose_for(16, 4096, 4096, False, (9, 0), H100_SMEM, H100_SM_SMEM) == gp.Plan(32, 1, 6)
    assert gp.choose_for(17, 4096, 4096, True, (9, 0), H100_SMEM, H100_SM_SMEM).rows == 64


def test_room_for_several_ctas_an_sm_cuts_the_stages():
    one = gp.fit(16, 1, 16, 4096, True, H100_SMEM)
    two = gp.fit(16, 1, 16, 4096, True, H100_SMEM, per_sm=2, sm_smem=H100_SM_SMEM)
    assert one.stages == gp.MAX_STAGES and two.stages == 4
    # by default the SM's shared memory is the per-block limit plus the driver's reserve
    assert gp.fit(16, 1, 16, 4096, True, H100_SMEM, per_sm=2) == two
    assert gp.fit(64, 1, 64, 4096, True, H100_SMEM, per_sm=4, sm_smem=H100_SM_SMEM) is None  # not even 2 stages


def test_without_cupy_the_plan_is_a_device_error(monkeypatch):
    """The GEMV asks CuPy for the shared-memory limits before it loads its kernel: without CuPy that
    raised ModuleNotFoundError, reported `error` (exit 4) where the loader's DeviceError is `skipped`."""
    import sys

    from solbench.errors import DeviceError

    monkeypatch.setitem(sys.modules, "cupy", None)
    gp._device_limits.cache_clear()
    with pytest.raises(DeviceError, match=r"^needs CuPy"):
        gp.choose(1, 4096, 4096, False, device="cuda:0")
    with pytest.raises(DeviceError, match=r"^needs CuPy"):
        gp.chunk_tokens(64, 4096, 4096, True, device="cuda:0")


@pytest.mark.parametrize(("n", "k", "what"), [(4096, 0, "K=0"), (4096, -8, "K=-8"), (0, 4096, "N=0")])
def test_an_empty_reduction_or_output_is_named_not_a_shared_memory_shortfall(n, k, what):
    """K=0 fit no tile (no stage of K for any CTA), so the plan said 'no tile fits 232448 bytes of shared
    memory', and chunk_tokens_for swallowed that error and returned 1 token per launch."""
    for call in (gp.choose_for, gp.chunk_tokens_for):
        with pytest.raises(ValueError, match=rf"^gemv_stream: {what} .*at least 1") as info:
            call(16, n, k, False, (9, 0), H100_SMEM)
        assert "shared memory" not in str(info.value)
