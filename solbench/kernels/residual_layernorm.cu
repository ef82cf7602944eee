// Fused residual add + LayerNorm: one pass over memory per row.
//
//   summed = round(x + residual)                      (the new residual stream)
//   out    = (summed - mean) * rstd * weight + bias   (mean, var over the row)
//
// Each row is owned by `tpr` threads (a multiple of 32): one warp per row for
// small hidden sizes (several rows per block), several warps per row for large
// ones. A thread keeps VPT packs of VEC elements of its row in registers, so
// the row is read from and written to global memory exactly once; mean and
// variance come from two register passes (exact two-pass, not Welford) with
// fp32 accumulation. The add rounds to the input format, as torch's eager
// `x + residual`, so `out` is exactly LayerNorm(summed). VEC = 8 uses 16-byte
// accesses (hidden % 8 == 0 and every pointer 16-byte aligned); VEC = 1 is the
// scalar path for any other shape.
//
// MODE 0 stores `summed` too; MODE 2 adds the residual but stores only `out` (when the sum is
// not needed again); MODE 1 is a plain LayerNorm of x (residual and summed are not touched:
// the residual was already added, e.g. in a GEMM epilogue).
//
// Launch: block = tpr * rows_per_block threads, grid = ceil(rows / rows_per_block).
// solbench: min_cc 8.0
#include "common.cu"

// Sum of `v` over the `tpr` threads that own this thread's row.
__device__ __forceinline__ float sb_row_sum(float v, int tpr, int lrow, float* partial) {
  v = sb_warp_sum(v);
  if (tpr > 32) {  // uniform across the block
    const int warps_per_row = tpr >> 5;
    __syncthreads();  // `partial` may still be read by a previous call
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
    __syncthreads();
    float s = 0.f;
    for (int w = 0; w < warps_per_row; ++w) s += partial[lrow * warps_per_row + w];
    v = s;
  }
  return v;
}

// Register budget: more than 32 floats per thread (VEC = 8, VPT = 8) or more
// than 8 scalar packs (VEC = 1, VPT = 16) need the 512-thread cap to avoid spills.
template <int KIND, int VEC, int VPT, int MODE = 0>
__global__ void __launch_bounds__((VPT * VEC > 32 || (VEC == 1 && VPT > 8)) ? 512 : 1024)
residual_layernorm_kernel(
    const u16* __restrict__ x, const u16* __restrict__ residual,
    const u16* __restrict__ weight, const u16* __restrict__ bias,
    u16* __restrict__ out, u16* __restrict__ summed,
    int rows, int hidden, int tpr, float eps) {
  typedef SbPack<KIND, VEC> Pack;
  __shared__ float partial[32];
  const int lrow = threadIdx.x / tpr;
  const int ltid = threadIdx.x - lrow * tpr;
  const long long row = (long long)blockIdx.x * (blockDim.x / tpr) + lrow;
  const bool row_ok = row < rows;
  const int nvec = hidden / VEC;
  const long long base = row * (long long)hidden;

  // Pass 1: h = round(x + residual), kept in registers and stored as `summed`.
  // x and residual are dead after this read: L2 evict-first (see common.cu).
  const unsigned long long pol = sb_policy_evict_first();
  u32 xr[VPT][Pack::kWords];
  u32 rr[VPT][Pack::kWords];
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int idx = ltid + i * tpr;
    if (row_ok && idx < nvec) {
      Pack::load_raw_once(x + base + (long long)idx * VEC, xr[i], pol);
      if (MODE != 1) Pack::load_raw_once(residual + base + (long long)idx * VEC, rr[i], pol);
    }
  }
  float v[VPT][VEC];
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int idx = ltid + i * tpr;
    if (row_ok && idx < nvec) {
      if (MODE != 1) {
#pragma unroll
        for (int w = 0; w < Pack::kWords; ++w) xr[i][w] = sb_add2<KIND>(xr[i][w], rr[i][w]);
      }
      if (MODE == 0) Pack::store_raw(summed + base + (long long)idx * VEC, xr[i]);
      Pack::unpack(xr[i], v[i]);
#pragma unroll
      for (int e = 0; e < VEC; ++e) sum += v[i][e];
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[i][e] = 0.f;
    }
  }
  const float inv_h = 1.f / (float)hidden;
  const float mean = sb_row_sum(sum, tpr, lrow, partial) * inv_h;

  // Pass 2 (registers): variance about the mean.
  float sq = 0.f;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    if (row_ok && ltid + i * tpr < nvec) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float d = v[i][e] - mean;
        sq = fmaf(d, d, sq);
      }
    }
  }
  const float rstd = rsqrtf(sb_row_sum(sq, tpr, lrow, partial) * inv_h + eps);

  // Pass 3 (registers): normalise, scale, shift, store.
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int idx = ltid + i * tpr;
    if (row_ok && idx < nvec) {
      float w[VEC], b[VEC];
      u16 h[VEC];
      Pack::load(weight + (long long)idx * VEC, w);
      Pack::load(bias + (long long)idx * VEC, b);
#pragma unroll
      for (int e = 0; e < VEC; ++e) h[e] = sb_from_float<KIND>(fmaf((v[i][e] - mean) * rstd, w[e], b[e]));
      Pack::store(out + base + (long long)idx * VEC, h);
    }
  }
}
