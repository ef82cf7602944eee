// Fused bias add + GELU over a [rows, hidden] tensor: out = GELU(x + bias).
//
// Flat over packs of VEC elements (VEC = 8: 16-byte accesses, hidden % 8 == 0
// and pointers 16-byte aligned; VEC = 1: scalar path for any shape). Each
// thread loads UNROLL packs before converting any, so several independent
// 16-byte loads are in flight per thread. Math in fp32. On an H200 this op is
// close to issue-bound (4 bytes of traffic per element at ~4 TB/s), so the
// instruction count per element is what sets its speed.
//
// MODE 0: exact (erf) GELU, h * Phi(h) = 0.5 * h * erfc(-h / sqrt(2)), with erfc
//         from the Chebyshev fit of Numerical Recipes in C, 2nd ed., section 6.2
//         ("erfcc", fractional error < 1.2e-7 everywhere): ~18 instructions per
//         element instead of ~30 for libdevice erff (H200, 16384 x 4096 bf16,
//         cold L2, 2026-11-30: 74.2 us with the erfc fit, 90.8 us with erff).
//         +inf -> +inf, -inf -> 0 (torch: NaN), NaN -> NaN.
// MODE 1: tanh GELU, 0.5 * h * (1 + tanh(u)), u = sqrt(2/pi) * (h + 0.044715 h^3),
//         through the identity 0.5 * (1 + tanh(u)) = 1 / (1 + exp(-2u)).
// MODE 2: exact GELU through libdevice erff (the reference variant, for benchmarks).
//
// Launch: block = SB_GELU_BLOCK (256) threads, grid = ceil(npacks / (256 * UNROLL)).
// solbench: min_cc 8.0
#include "common.cu"

#define SB_GELU_BLOCK 256
#define SB_GELU_UNROLL 4

__device__ __forceinline__ float sb_ex2(float a) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(a));
  return r;
}

__device__ __forceinline__ float sb_rcp(float a) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(a));
  return r;
}

// 0.5 * erfc(y / sqrt(log2 e)) for y >= 0: Numerical Recipes' erfcc (fractional
// error < 1.2e-7) with the change of variable y = z * sqrt(log2 e), its
// coefficients scaled by log2(e) and the 0.5 folded into the exponent, so that
//   t = 1 / (1 + 0.5 z),  0.5 erfc(z) = t * 2^(-y^2 + P(t)).
__device__ __forceinline__ float sb_half_erfc_scaled(float y) {
  const float t = sb_rcp(fmaf(0.41627730557884884f, y, 1.f));
  float p = 0.246517298f;
  p = fmaf(p, t, -1.18611495f);
  p = fmaf(p, t, 2.14747446f);
  p = fmaf(p, t, -1.63775315f);
  p = fmaf(p, t, 0.402321582f);
  p = fmaf(p, t, -0.26875686f);
  p = fmaf(p, t, 0.139630057f);
  p = fmaf(p, t, 0.539700616f);
  p = fmaf(p, t, 1.4427292f);
  p = fmaf(p, t, -2.82574822f);
  return t * sb_ex2(fmaf(-y, y, p));
}

template <int MODE>
__device__ __forceinline__ float sb_gelu(float h) {
  if (MODE == 0) {
    // Phi(h) = 0.5 erfc(-h / sqrt 2); with c = 0.5 erfc(|h| / sqrt 2):
    //   gelu = h (1 - c) for h > 0 and h c for h <= 0, i.e. max(h, 0) - |h| c.
    // min(|h|, 1e30) keeps +inf -> +inf (inf * 0 would be NaN); NaN stays NaN.
    const float c = sb_half_erfc_scaled(fabsf(h) * 0.8493218002880191f);
    return fmaf(-fminf(fabsf(h), 1e30f), c, fmaxf(h, 0.f));
  } else if (MODE == 1) {
    // exp(-2u) = 2^(h * (k1 + k2 h^2)), k1 = -2 sqrt(2/pi) log2(e), k2 = 0.044715 k1
    const float k1 = -2.3022082f;
    const float k2 = -0.10294324f;
    const float e = sb_ex2(h * fmaf(k2, h * h, k1));
    return h * sb_rcp(1.f + e);
  } else {
    return 0.5f * h * (1.f + erff(h * 0.70710678118654752f));
  }
}

// npacks packs in all, packs_per_row per row; col_step = (BLOCK % packs_per_row),
// so a thread steps its bias column without a division per pack.
template <int KIND, int VEC, int MODE>
__global__ void __launch_bounds__(SB_GELU_BLOCK) bias_gelu_kernel(
    const u16* __restrict__ x, const u16* __restrict__ bias, u16* __restrict__ out,
    unsigned int npacks, unsigned int packs_per_row, unsigned int col_step) {
  typedef SbPack<KIND, VEC> Pack;
  const unsigned int first = blockIdx.x * (SB_GELU_BLOCK * SB_GELU_UNROLL) + threadIdx.x;
  const unsigned long long pol = sb_policy_evict_first();  // x is dead after this read
  u32 xr[SB_GELU_UNROLL][Pack::kWords];
  u32 br[SB_GELU_UNROLL][Pack::kWords];
  unsigned int col = first % packs_per_row;
#pragma unroll
  for (int u = 0; u < SB_GELU_UNROLL; ++u) {
    const unsigned int p = first + u * SB_GELU_BLOCK;
    if (p < npacks) {
      Pack::load_raw_once(x + (unsigned long long)p * VEC, xr[u], pol);
      Pack::load_raw(bias + (unsigned long long)col * VEC, br[u]);
    }
    col += col_step;
    col = col >= packs_per_row ? col - packs_per_row : col;
  }
#pragma unroll
  for (int u = 0; u < SB_GELU_UNROLL; ++u) {
    const unsigned int p = first + u * SB_GELU_BLOCK;
    if (p < npacks) {
      // x + bias rounded to the input format, as torch's eager `x + bias`.
#pragma unroll
      for (int w = 0; w < Pack::kWords; ++w) xr[u][w] = sb_add2<KIND>(xr[u][w], br[u][w]);
      float f[VEC];
      u16 h[VEC];
      Pack::unpack(xr[u], f);
#pragma unroll
      for (int e = 0; e < VEC; ++e) h[e] = sb_from_float<KIND>(sb_gelu<MODE>(f[e]));
      Pack::store(out + (unsigned long long)p * VEC, h);
    }
  }
}
