"""How far o_proj's static FP8 path drifts when its activation scale, calibrated in set-up on one input set,
is applied to new values of x (the check after timing writes new values into x without running set-up):
relative L2 error of x @ w.T + residual against the fp32 result, with the stale scale and with x's own.
CPU only (torch's float8_e4m3fn casts), hidden 4096, w ~ N(0, 1/64), per-tensor scales, values clamped to
±448 as solbench.kernels.fp8_quant does. Run: python3 bench/fp8_stale_scale.py"""

import torch

FP8_MAX = 448.0


def quantized(t: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return (t / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).float() * scale


def main() -> None:
    torch.manual_seed(0)
    hidden = 4096
    w = torch.randn(hidden, hidden) / 64
    w8 = quantized(w, w.abs().amax() / FP8_MAX)
    print("tokens  amax(set-up x)  amax(new x)  rel L2 stale scale  rel L2 own scale")
    for tokens in (16, 32, 2048):
        for _ in range(5):
            x0, x1 = (torch.randn(tokens, hidden).bfloat16().float() for _ in range(2))
            residual = torch.randn(tokens, hidden)
            ref = x1 @ w.T + residual
            errors = [((quantized(x1, x.abs().amax() / FP8_MAX) @ w8.T + residual - ref).norm() / ref.norm()).item()
                      for x in (x0, x1)]
            amax = [x.abs().amax().item() for x in (x0, x1)]
            print(f"{tokens:6d}  {amax[0]:14.2f}  {amax[1]:11.2f}  {errors[0]:18.4f}  {errors[1]:16.4f}")


if __name__ == "__main__":
    main()
