// NOTE: ops.gemv_residual now runs gemv_stream.cu; this file keeps the scalar fallback
// (any K, any alignment) and the earlier register-pipelined kernel, for benchmarks only
// (ops._gemv_residual_registers; 17.2 us at 16 tokens against 16.0 us for gemv_stream).
//
// Decode-time o_proj: out[t, n] = sum_k x[t, k] * weight[n, k] + residual[t, n]
// for a few tokens (T <= 64 per launch), weight [N, K] row-major (torch.nn.Linear).
//
// Memory-bound on the weight (4096 x 4096 bf16 = 33.5 MB against 128 KB of x at
// T = 16), so the kernel is built to stream the weight once at HBM speed:
//
// * A block owns 32 weight rows (outputs n) and all T tokens; its 8 warps split
//   K in interleaved 32-wide steps (warp w takes steps w, w + 8, ...), so each
//   block reads whole 512-byte runs of every row it owns; blocks start the
//   sweep at staggered k offsets.
// * Every thread issues 16-byte loads of the weight (ld.global.nc, no L1
//   allocation, L2 evict-first: read once, it must not push live or dirty lines
//   out of L2) and of x (small, L2-resident), U steps ahead of the math, so
//   each SM keeps tens of KB of loads in flight.
// * The products run on the tensor cores (mma.sync m16n8k16, fp32 accumulate)
//   with the weight as the 16 x 16 A operand and x^T as the 16 x 8 B operand.
//   mma sums over its 16 k slots in any order, so each lane's 16-byte chunk
//   (8 consecutive k of one row) is used as is: for half h of the chunk, k
//   slots {2q, 2q+1} hold k = 8q + 4h + {0, 1} and slots {2q+8, 2q+9} hold
//   k = 8q + 4h + {2, 3}, in A and in B alike (q = lane % 4). No shuffles, no
//   shared-memory staging of the weight.
// * The 8 warps' partial sums meet in shared memory; each output is then summed
//   over warps, the residual added in fp32, and the result rounded once.
//
// Needs K % 8 == 0 and 16-byte aligned x and weight; gemv_residual_scalar_kernel
// is the slow fallback for anything else.
//
// Measured (H200, T = 16, N = K = 4096 bf16, cold L2, 2026-11-30): 17.5 us
// against 21.6 us for torch.addmm; ncu: 15.8 us, DRAM at 46 % of peak, 12 % of
// warp slots active (one 8-warp block per SM). Pipeline depth 2..6, the L2 hint,
// the staggered start and 4-step warp groups (SB_GEMV_GROUP) all moved it by
// less than the noise, so the limit looks like too few warps issuing loads per
// SM; more warps (split-K over a cluster, fewer registers per warp) is next.
// Tried since (2026-11-30, bench results in results/h200/gemv_splitk.txt, code in git
// history at e904e56): split-K over 2-8 blocks per column tile with a last-block reduction,
// also with a 128-register cap for 2 blocks per SM: slower at 1, 16 and 64 tokens.
//
// Launch: block = 256 threads, grid = ceil(N / 32); NT = ceil(T / 8) token tiles.
// solbench: min_cc 8.0
#include "common.cu"

#define SB_GEMV_WARPS 8
#define SB_GEMV_ROWS 32
#define SB_GEMV_RED_STRIDE 36  // 32 outputs + 4 pad: conflict-free fragment stores
#ifndef SB_GEMV_GROUP
#define SB_GEMV_GROUP 1  // consecutive 32-wide k steps per warp (a power of 2)
#endif

template <int KIND>
__device__ __forceinline__ void sb_mma16816(float (&d)[4], u32 a0, u32 a1, u32 a2, u32 a3,
                                            u32 b0, u32 b1);

template <>
__device__ __forceinline__ void sb_mma16816<SB_KIND_BF16>(float (&d)[4], u32 a0, u32 a1, u32 a2,
                                                          u32 a3, u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void sb_mma16816<SB_KIND_F16>(float (&d)[4], u32 a0, u32 a1, u32 a2,
                                                         u32 a3, u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Pipeline depth (k steps in flight per warp): fewer for many tokens, whose x
// fragments and accumulators take the registers. -DSB_GEMV_DEPTH=n overrides it
// (benchmark variants).
template <int NT>
struct SbGemvDepth {
#ifdef SB_GEMV_DEPTH
  static constexpr int value = SB_GEMV_DEPTH;
#else
  static constexpr int value = NT <= 2 ? 4 : (NT <= 4 ? 3 : 2);
#endif
};

// One k step's operands: 4 weight rows (g, g+8, g+16, g+24) and NT token rows,
// 16 bytes each; zeros where the row, token or k chunk is out of range.
template <int NT>
__device__ __forceinline__ void sb_gemv_load(u32 (&wb)[4][4], u32 (&xb)[NT][4],
                                             const u16* const (&wp)[4], const bool (&wok)[4],
                                             const u16* const (&xp)[NT], const bool (&xok)[NT],
                                             long long k, bool k_ok, unsigned long long pol) {
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    if (k_ok && wok[r]) {
      sb_ldg128_once(wp[r] + k, wb[r], pol);
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) wb[r][i] = 0u;
    }
  }
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    if (k_ok && xok[j]) {
      sb_ldg128(xp[j] + k, xb[j]);
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) xb[j][i] = 0u;
    }
  }
}

template <int KIND, int NT>
__global__ void __launch_bounds__(256, 1) gemv_residual_kernel(
    const u16* __restrict__ x, const u16* __restrict__ weight,
    const u16* __restrict__ residual, u16* __restrict__ out, int T, int N, int K) {
  constexpr int U = SbGemvDepth<NT>::value;
  __shared__ float red[SB_GEMV_WARPS][32][SB_GEMV_RED_STRIDE];

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;  // mma groupID
  const int q = lane & 3;   // mma thread-in-group
  const int n0 = blockIdx.x * SB_GEMV_ROWS;

  const u16* wp[4];
  bool wok[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int n = n0 + g + 8 * r;
    wok[r] = n < N;
    wp[r] = weight + (long long)(wok[r] ? n : 0) * K + q * 8;
  }
  const u16* xp[NT];
  bool xok[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int t = 8 * j + g;
    xok[j] = t < T;
    xp[j] = x + (long long)(xok[j] ? t : 0) * K + q * 8;
  }

  // K is swept in 32-wide steps. Warp w takes G consecutive steps out of every
  // 8 G (steps G w .. G w + G - 1, then + 8 G, ...), and each block starts its
  // sweep at its own offset `rot` (a rotation of the step index, so every step
  // is still taken exactly once): without it all 128 blocks read the same
  // column window of 4096 rows 8 KB apart at the same moment.
  const int nsteps = (K + 31) >> 5;
  const int rounds = nsteps / (SB_GEMV_WARPS * SB_GEMV_GROUP);
  int tail = nsteps - rounds * SB_GEMV_WARPS * SB_GEMV_GROUP - SB_GEMV_GROUP * warp;
  tail = tail < 0 ? 0 : (tail > SB_GEMV_GROUP ? SB_GEMV_GROUP : tail);
  const int niter = rounds * SB_GEMV_GROUP + tail;
#ifdef SB_GEMV_NO_ROTATE
  const int rot = 0;
#else
  const int rot = nsteps > 0 ? (int)((blockIdx.x * 17u) % (unsigned)nsteps) : 0;
#endif
  // k offset (in elements) of this lane's chunk at iteration `it` (it < niter)
#define SB_GEMV_STEP(it) \
  ((it) % SB_GEMV_GROUP + SB_GEMV_GROUP * warp + SB_GEMV_WARPS * SB_GEMV_GROUP * ((it) / SB_GEMV_GROUP) + rot)
#define SB_GEMV_K(it) \
  ((long long)(SB_GEMV_STEP(it) >= nsteps ? SB_GEMV_STEP(it) - nsteps : SB_GEMV_STEP(it)) * 32)
#define SB_GEMV_OK(it) ((it) < niter && SB_GEMV_K(it) + q * 8 < K)

  float acc[2][NT][4];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[m][j][i] = 0.f;

  const unsigned long long pol = sb_policy_evict_first();  // the weight is read once
  u32 wb[U][4][4];
  u32 xb[U][NT][4];
#pragma unroll
  for (int u = 0; u < U; ++u) sb_gemv_load<NT>(wb[u], xb[u], wp, wok, xp, xok, SB_GEMV_K(u), SB_GEMV_OK(u), pol);

  for (int it = 0; it < niter; it += U) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int m = 0; m < 2; ++m) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            sb_mma16816<KIND>(acc[m][j], wb[u][2 * m][2 * h], wb[u][2 * m + 1][2 * h],
                              wb[u][2 * m][2 * h + 1], wb[u][2 * m + 1][2 * h + 1],
                              xb[u][j][2 * h], xb[u][j][2 * h + 1]);
          }
        }
      }
      const int nxt = it + U + u;
      sb_gemv_load<NT>(wb[u], xb[u], wp, wok, xp, xok, SB_GEMV_K(nxt), SB_GEMV_OK(nxt), pol);
    }
  }
#undef SB_GEMV_STEP
#undef SB_GEMV_K
#undef SB_GEMV_OK

  // Cross-warp reduction, 4 token tiles (32 tokens) at a time.
  constexpr int NCH = (NT + 3) / 4;
#pragma unroll
  for (int c = 0; c < NCH; ++c) {
    constexpr int kMaxTiles = 4;
    const int tiles = (NT - 4 * c) < kMaxTiles ? (NT - 4 * c) : kMaxTiles;
    if (c > 0) __syncthreads();  // previous chunk fully read
#pragma unroll
    for (int jj = 0; jj < kMaxTiles; ++jj) {
      const int j = 4 * c + jj;
      if (j < NT) {
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          const int tl = jj * 8 + 2 * q;
          const int nl = 16 * m + g;
          red[warp][tl][nl] = acc[m][j][0];
          red[warp][tl + 1][nl] = acc[m][j][1];
          red[warp][tl][nl + 8] = acc[m][j][2];
          red[warp][tl + 1][nl + 8] = acc[m][j][3];
        }
      }
    }
    __syncthreads();
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int o = threadIdx.x + 256 * e;
      const int tl = o >> 5;
      const int nl = o & 31;
      const int t = 32 * c + tl;
      const int n = n0 + nl;
      if (tl < 8 * tiles && t < T && n < N) {
        float s = 0.f;
#pragma unroll
        for (int w = 0; w < SB_GEMV_WARPS; ++w) s += red[w][tl][nl];
        const long long idx = (long long)t * N + n;
        s += sb_to_float<KIND>(residual[idx]);
        out[idx] = sb_from_float<KIND>(s);
      }
    }
  }
}

// Fallback for any shape or alignment: one warp per (token, output), scalar
// loads, fp32 accumulation. Reads the weight once per token (from L2 after the
// first): correct, not fast. Launch: block = 256, grid = (ceil(N / 8), T).
template <int KIND>
__global__ void __launch_bounds__(256) gemv_residual_scalar_kernel(
    const u16* __restrict__ x, const u16* __restrict__ weight,
    const u16* __restrict__ residual, u16* __restrict__ out, int T, int N, int K) {
  const int lane = threadIdx.x & 31;
  const int n = blockIdx.x * 8 + (threadIdx.x >> 5);
  const int t = blockIdx.y;
  if (n >= N || t >= T) return;  // uniform per warp
  const u16* xr = x + (long long)t * K;
  const u16* wr = weight + (long long)n * K;
  float s = 0.f;
  for (int k = lane; k < K; k += 32) s = fmaf(sb_to_float<KIND>(xr[k]), sb_to_float<KIND>(wr[k]), s);
  s = sb_warp_sum(s);
  if (lane == 0) {
    const long long idx = (long long)t * N + n;
    out[idx] = sb_from_float<KIND>(s + sb_to_float<KIND>(residual[idx]));
  }
}
