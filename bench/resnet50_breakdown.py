"""ResNet-50 fused forward on a GPU: do_bench cross-check and a per-kernel breakdown.

    python3 bench/resnet50_breakdown.py OUT_DIR [batch]

Times the CUDA-graph replay (``fused``) and the eager folded forward (``fused_eager``) with
``triton.testing.do_bench`` (warm L2, median), then profiles one eager folded forward with
torch.profiler and prints the GPU kernel time summed by kernel name (top 24), for the default
stem and for the fast (space-to-depth + NHWC max-pool kernel) stem.
Writes OUT_DIR/resnet50_breakdown.txt.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from solbench.impls import resnet50 as net50
from solbench.impls import resnet50_fused as fused50


def _measure(x: torch.Tensor, net: fused50.FoldedNet, flops: float, do_bench) -> list[str]:
    lines = []
    graph = fused50.GraphForward(x, net)
    for name, fn in (("graph replay", graph), ("eager", lambda: fused50.fused_forward(x, net))):
        ms = do_bench(fn, warmup=100, rep=500, return_mode="median")
        lines.append(f"do_bench {name}: {ms:.3f} ms  ({flops / ms / 1e9:.0f} TFLOP/s)")
    for _ in range(3):
        fused50.fused_forward(x, net)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fused50.fused_forward(x, net)
        torch.cuda.synchronize()
    per_name: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            per_name[ev.name] += ev.device_time_total
            count[ev.name] += 1
    total = sum(per_name.values())
    lines.append(f"profiled eager folded forward: {total / 1e3:.3f} ms of GPU kernel time, "
                 f"{sum(count.values())} kernels")
    lines.append("top kernels (total µs, calls, name):")
    for name, us in sorted(per_name.items(), key=lambda kv: -kv[1])[:24]:
        lines.append(f"  {us:9.1f} {count[name]:4d}  {name[:150]}")
    return lines


def main() -> None:
    out_dir = Path(sys.argv[1])
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    from triton.testing import do_bench

    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(batch, 3, 224, 224, generator=gen, device="cuda").to(torch.bfloat16)
    params = torch.randn(net50.PARAM_COUNT, generator=gen, device="cuda").to(torch.bfloat16)
    lines = [f"batch {batch}, bf16, {torch.cuda.get_device_name()}"]
    flops = batch * 8_178_368_512  # per 224x224 image, as solbench's cost model counts it
    for fast_stem in (False, True):
        lines.append(f"--- fast_stem={fast_stem}")
        lines += _measure(x, fused50.fold_net(params, torch.bfloat16, fast_stem), flops, do_bench)
    text = "\n".join(lines)
    print(text)
    (out_dir / "resnet50_breakdown.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
