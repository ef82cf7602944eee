"""FP8 o_proj (issue 20 item 1) on one GPU: which recipe beats bf16, before one is shipped.

Written in the fourth session, which had no device: nothing here has run yet. Run from the repository
root on an FP8 GPU (compute capability 8.9+) with nvmath-python (Triton optional)::

    PYTHONPATH=. python3 bench/fp8_probe.py [OUT_DIR]        # JSON to OUT_DIR/fp8_probe.json

out = x @ w.T + residual, hidden 4096, bf16 x and residual, the weight quantized to FP8 (e4m3) once with
a per-tensor scale. Variants, each checked against an fp32 result (relative L2 error printed) and then
timed with solbench's cold timer (spin, 2 x L2 zeroed and read back, events around one call, two input
sets rotated, median of SAMPLES):

    bf16 addmm            torch.addmm: the 16-bit baseline
    bf16 lt               nvmath cuBLASLt, C != D (the shipped bf16 'fused' above 16 tokens)
    fp8 today             the shipped 'fp8': amax, scale and cast, _scaled_mm, add (four kernels)
    fp8 lt static         x scaled and cast by torch (two kernels) with a scale fixed at set-up, then one
                          FP8 cuBLASLt GEMM with the residual as C (scales a and b on the device)
    fp8 lt triton         the same GEMM after one Triton kernel that scales and casts x in one pass
    fp8 lt delayed        that kernel also folds amax(x) into a device buffer the next call's scale is
                          taken from (delayed scaling, as production FP8 inference does); no host sync
    fp8 gemm only         the FP8 GEMM alone on an x already in FP8 (the previous layer's epilogue
                          would emit it): the lower bound of every recipe above
"""

from __future__ import annotations

import json
import statistics
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import torch

from solbench.device.timer import CudaColdTimer
from solbench.impls import attn

SAMPLES = 60
HIDDEN = 4096
TOKENS = (1, 16, 64, 2048, 16384)
FP8_MAX = 448.0
ROWS: list[dict] = []


def _time(label: str, tokens: int, launches: list[Callable[[], object]]) -> float:
    timer = CudaColdTimer(torch, torch.cuda.get_device_properties(0).L2_cache_size, clean=True)
    timer.prepare(launches)
    for i in range(3):
        timer.sample(i)
    med = statistics.median(timer.sample(i) for i in range(SAMPLES)) * 1e6
    ROWS.append({"tokens": tokens, "variant": label, "median_us": med})
    return med


def _triton_quant() -> Callable[..., None] | None:
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def quant(x_ptr, y_ptr, inv_ptr, amax_ptr, n, BLOCK: tl.constexpr, AMAX: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = tl.clamp(x * tl.load(inv_ptr), -448.0, 448.0)  # FP8_MAX: a global is not visible in @jit
        tl.store(y_ptr + offs, y.to(tl.float8e4nv), mask=mask)
        if AMAX:
            tl.atomic_max(amax_ptr, tl.max(tl.abs(x), axis=0))

    def run(x: torch.Tensor, out: torch.Tensor, inv: torch.Tensor, amax: torch.Tensor | None) -> None:
        n = x.numel()
        quant[(triton.cdiv(n, 4096),)](x, out, inv, amax if amax is not None else inv, n, BLOCK=4096,
                                        AMAX=amax is not None)

    return run


class Fp8Lt:
    """x -> FP8 (a scale fixed at set-up, or delayed), then one FP8 cuBLASLt GEMM with C = residual."""

    def __init__(self, x: torch.Tensor, w8: torch.Tensor, w_scale: torch.Tensor, residual: torch.Tensor,
                 quant: str) -> None:
        from nvmath.linalg.advanced import Matmul

        self.x, self.quant = x, quant
        amax = x.abs().amax().float().reshape(1)
        self.x_scale = (amax / FP8_MAX).clamp_min(1e-12)  # set-up: as an earlier batch would have set it
        self.inv = 1.0 / self.x_scale
        self.amax = amax.clone()
        self.x8 = (x.float() * self.inv).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        stream = torch.cuda.current_stream()
        self.mm = Matmul(self.x8, w8.t(), residual, beta=1.0,
                         quantization_scales={"a": self.x_scale, "b": w_scale.reshape(1)}, stream=stream)
        self.mm.plan(stream=stream)
        self.mm.autotune(iterations=5, stream=stream)
        self.triton = _triton_quant() if quant in ("triton", "delayed") else None
        if quant in ("triton", "delayed") and self.triton is None:
            raise RuntimeError("needs Triton")

    def __call__(self) -> torch.Tensor:
        if self.quant == "torch":  # two kernels: the scaled copy of x, then the cast into x8
            self.x8.copy_(self.x * self.inv.to(self.x.dtype))
        elif self.quant == "triton":
            self.triton(self.x, self.x8, self.inv, None)
        elif self.quant == "delayed":
            torch.div(self.amax, FP8_MAX, out=self.x_scale)  # this call's scale: the last amax seen
            torch.reciprocal(self.x_scale, out=self.inv)
            self.triton(self.x, self.x8, self.inv, self.amax)
        return self.mm.execute(stream=torch.cuda.current_stream())


def _inputs(tokens: int, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(tokens, HIDDEN, device="cuda", generator=g).bfloat16()
    w = (torch.randn(HIDDEN, HIDDEN, device="cuda", generator=g) * HIDDEN ** -0.5).bfloat16()
    r = torch.randn(tokens, HIDDEN, device="cuda", generator=g).bfloat16()
    return x, w, r


def _variants(sets: list[tuple[torch.Tensor, ...]]) -> dict[str, Callable[[int], Callable[[], torch.Tensor]]]:
    """Each variant as ``make(k)``: its call on input set k, set up (untimed)."""
    from solbench.impls.cublaslt import AddmmPlan

    fp8 = [attn.o_proj_fp8_setup(*s) for s in sets]

    def lt(quant: str) -> Callable[[int], Callable[[], torch.Tensor]]:
        return lambda k: Fp8Lt(sets[k][0], fp8[k]["w_fp8"], fp8[k]["w_scale"], sets[k][2], quant)

    return {
        "bf16 addmm": lambda k: lambda: torch.addmm(sets[k][2], sets[k][0], sets[k][1].t()),
        "bf16 lt": lambda k: AddmmPlan(sets[k][0], sets[k][1], sets[k][2]),
        "fp8 today": lambda k: lambda: attn.o_proj_fp8(**fp8[k]),
        "fp8 lt static": lt("torch"),
        "fp8 lt triton": lt("triton"),
        "fp8 lt delayed": lt("delayed"),
        "fp8 gemm only": lt("none"),
    }


def _rel_l2(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.float() - ref).norm() / ref.norm())


def main() -> None:
    out_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}", flush=True)
    print(f"{'tokens':>6} {'variant':18} {'us':>9} {'vs bf16 lt':>10} {'rel L2':>9}", flush=True)
    for tokens in TOKENS:
        sets = [_inputs(tokens, s) for s in (1, 2)]
        refs = [x.float() @ w.float().t() + r.float() for x, w, r in sets]
        makers = _variants(sets)
        base = None
        for label, make in makers.items():
            try:
                launches = [make(0), make(1)]
                err = max(_rel_l2(launch(), ref) for launch, ref in zip(launches, refs, strict=True))
                med = _time(label, tokens, launches)
            except Exception as exc:  # one variant failing must not stop the probe
                print(f"{tokens:>6} {label:18} failed: {type(exc).__name__}: {str(exc)[:100]}", flush=True)
                traceback.print_exc(limit=2)
                continue
            base = med if label == "bf16 lt" else base
            ratio = f"{med / base:.3f}" if base else ""
            ROWS[-1]["rel_l2"] = err
            print(f"{tokens:>6} {label:18} {med:9.2f} {ratio:>10} {err:9.2e}", flush=True)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "fp8_probe.json").write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": ROWS},
                                                           indent=1))


if __name__ == "__main__":
    main()
