"""The byte floor on a GPU (solbench.impls.floor; skipped without CUDA)."""

import json

import pytest
import torch
from click.testing import CliRunner

pytestmark = pytest.mark.gpu


def test_the_floor_kernel_writes_every_word_and_no_faster_than_the_datasheet():
    from solbench.device.timer import CudaColdTimer
    from solbench.impls import floor
    from solbench.measure.criteria import CIWidth
    from solbench.measure.loop import measure

    read, write = 4096 * 4096 * 2, 16 * 4096 * 2  # o_proj at 16 tokens: the bf16 weight, the output
    src, dst = floor.buffers(read, write, "cuda", seed=0)
    assert (src.nbytes, dst.nbytes) == (read, write) and float(src.min()) >= 0.5
    dst.zero_()
    floor.read(src, dst)
    torch.cuda.synchronize()
    # word j is written by thread j mod (grid x 512) with (w, w^1, w^2, w^3), w = thread * 2654435761 + 1
    threads = torch.cuda.get_device_properties(0).multi_processor_count * floor.BLOCKS_PER_SM * 512
    j = torch.arange(dst.nbytes // floor.WORD, device="cuda", dtype=torch.int64)
    w = ((j % threads) * 2654435761 + 1) % (1 << 32)
    expected = torch.stack([w, w ^ 1, w ^ 2, w ^ 3], dim=1)
    assert torch.equal(dst.view(torch.int32).view(-1, 4).to(torch.int64) % (1 << 32), expected)
    timer = CudaColdTimer(torch, torch.cuda.get_device_properties(0).L2_cache_size)
    t = measure(timer, [lambda: floor.read(src, dst)], CIWidth(0.01, 10, 500, 1.0))
    assert (src.nbytes + dst.nbytes) / t.median < 5.5e12  # faster than any HBM3e datasheet: bytes skipped


def test_o_proj_decode_reports_each_implementations_fraction_of_the_floor(tmp_path):
    from solbench.cli import main

    out = tmp_path / "run.json"
    result = CliRunner().invoke(main, ["run", "workloads/attn.yaml", "-w", "o_proj", "-i", "fused", "--case",
                                       "tokens=16,bfloat16", "--repeat", "1", "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    (case,) = json.loads(out.read_text())["cases"]
    by = {r["name"]: r for r in case["impls"]}
    assert by["floor"]["status"] == "ok" and by["floor"]["score"] is None
    # its worker ran no checks: the timer's own kernels were loaded before its turn (CudaColdTimer.warm),
    # not under the gate, whose timeout made the first sample a dry one taken again
    assert by["floor"]["protocol"]["samples_redone"] == 0
    t_memory = case["cost"]["fused_bytes"] / case["peaks"]["bandwidth"]
    assert by["floor"]["timing"]["median"] > t_memory  # a real kernel never beats the datasheet's bandwidth
    t_floor = by["floor"]["timing"]["median"] * by["floor"]["protocol"]["floor_scale"]
    assert by["floor"]["protocol"]["floor_scale"] == pytest.approx(1.0, abs=0.01)  # the weight dominates: ~exact
    for name in ("baseline", "fused"):
        assert by[name]["score"]["floor_fraction"] == pytest.approx(t_floor / by[name]["timing"]["median"])
