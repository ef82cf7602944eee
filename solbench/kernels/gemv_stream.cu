// Decode-time linear layer + residual that streams the weight through shared memory:
//
//   out[t, n] = scale[n] * sum_k x[t, k] * w[n, k] + residual[t, n]     (t < T <= 64)
//
// x [T, K] and residual/out [T, N] are 16-bit (KIND 0 bf16, 1 fp16); the weight [N, K]
// (torch.nn.Linear layout) is either the same 16-bit type (W8 = 0, no scale) or FP8 e4m3
// with one fp32 scale per output row (W8 = 1: weight-only quantization, half the bytes).
//
// Memory-bound on the weight, so the kernel is built to keep HBM busy:
// * Each CTA (8 warps) owns ROWS weight rows and 1/CL of K. A stage is 512 bytes of each of
//   its rows plus the matching slice of x, copied with 16-byte cp.async (L2 only; the weight
//   with an evict-first L2 hint): every warp instruction reads 512 contiguous bytes of one
//   row, and STAGES-1 stages are in flight per CTA (tens of KB per SM) without holding
//   registers.
// * Shared memory rows are XOR-swizzled in 16-byte chunks (chunk c of row r sits at
//   c ^ (r & 7)), so the ldmatrix reads below are free of bank conflicts with no padding.
// * Products on the tensor cores: mma.sync m16n8k16, fp32 accumulate, the weight as the
//   16 x 16 A operand (ldmatrix.x4), x^T as the 16 x 8 B operand (tokens are the n side;
//   tiles past T read a zeroed 16-byte row, so they add nothing). FP8 weights are read with
//   the same ldmatrix (as pairs of bytes): each lane gets 4 consecutive k of one row and
//   turns them into two bf16x2 / f16x2 words (exact: shift the e4m3 bits into place, then
//   one packed multiply by 2^120 or 2^8). mma sums its 16 k slots in any order, so slots
//   {2q, 2q+1} take k = 4q + {0, 1} and {2q+8, 2q+9} take k = 4q + {2, 3} in A and B alike.
// * Warps split a stage WM ways along rows and WK ways along k; the WK partial sums, and
//   with CL > 1 the partial sums of the CL CTAs of a thread-block cluster (sm_90
//   distributed shared memory), meet in shared memory. Each CTA of a cluster then finishes
//   ROWS / CL rows: the sum, times the scale, plus the residual, rounded once.
//   A larger ROWS with CL > 1 reads x from L2 CL times less often for the same grid.
//
// Measured (H200, N = K = 4096, cold L2, flush write, 2026-11-30; BENCHMARKS.md): 16.0 us at
// 16 tokens bf16 (cuBLAS addmm 20.2 us; reading the 33.6 MB weight alone: 13.5 us), FP8
// weights 15.1 us (their 16.8 MB alone: 9.5 us). ncu, 16 tokens: DRAM at 50 % of peak.
//
// Needs K % 8 == 0 (W8: K % 16 == 0) and 16-byte aligned x and weight (ops.py falls back
// otherwise). Launch: block 256, grid ceil(N / ROWS) * CL, dynamic shared memory
// 128 + max(STAGES * (ROWS * 512 + T * 2 * BK), WK * 8 * NT * (ROWS + 4) * 4) bytes, with
// BK = 256 (16-bit weight) or 512 (FP8) k per stage.
//
// solbench: min_cc 8.0
// (cp.async, ldmatrix, bf16 mma and bf16x2 fma; the cluster variants need 9.0, which ops.py
// asks for when it picks one.)
#include "common.cu"

#define SBS_THREADS 256
#define SBS_WARPS 8
#define SBS_ROW_BYTES 512  // bytes of one weight row per stage: 32 chunks of 16 bytes

__device__ __forceinline__ u32 sbs_smem_addr(const void* p) {
  u32 a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}

// 16-byte copy global -> shared through L2 only; zero-fills the destination when !ok.
__device__ __forceinline__ void sbs_cp16(u32 dst, const void* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0)
               : "memory");
}

__device__ __forceinline__ void sbs_cp16_once(u32 dst, const void* src, bool ok, unsigned long long pol) {
#ifdef SB_NO_EVICT_FIRST
  (void)pol;
  sbs_cp16(dst, src, ok);
#else
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(dst), "l"(src),
               "r"(ok ? 16 : 0), "l"(pol)
               : "memory");
#endif
}

__device__ __forceinline__ void sbs_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// Wait until at most n committed groups are still in flight (n is a run-time value).
__device__ __forceinline__ void sbs_wait(int n) {
  switch (n) {
    case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
    case 3: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
    case 4: asm volatile("cp.async.wait_group 4;" ::: "memory"); break;
    case 5: asm volatile("cp.async.wait_group 5;" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 6;" ::: "memory"); break;
  }
}

__device__ __forceinline__ void sbs_ldsm4(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

__device__ __forceinline__ void sbs_lds64(u32 (&r)[2], u32 addr) {
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(addr) : "memory");
}

template <int KIND>
__device__ __forceinline__ void sbs_mma(float (&d)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1);

template <>
__device__ __forceinline__ void sbs_mma<SB_KIND_BF16>(float (&d)[4], u32 a0, u32 a1, u32 a2, u32 a3,
                                                      u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void sbs_mma<SB_KIND_F16>(float (&d)[4], u32 a0, u32 a1, u32 a2, u32 a3,
                                                     u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Four e4m3 bytes -> two packed 16-bit words: lo = (byte0, byte1), hi = (byte2, byte3),
// the lower byte in the lower half. Exact: prmt's sign mode puts each byte in the low half of its
// 16-bit lane with its sign filling the high half; a shift moves the 7 exponent+mantissa bits into
// the 16-bit layout (bf16: up 4, to bits 10..4; fp16: up 7, to bits 13..7) and the sign fill across
// bit 15; one AND keeps bit 15 and those 7 bits (a value 2^-120 times too small in bf16, 2^-8 in
// fp16, subnormals included); one packed fma scales by the power of two. Four instructions a pair
// (prmt, shl, and, fma); moving the byte to the high half first and the sign apart took five.
template <int KIND>
struct SbsWiden;

template <>
struct SbsWiden<SB_KIND_BF16> {
  static constexpr int SHIFT = 4;
  static constexpr u32 KEEP = 0x87F087F0u;
  static constexpr u32 POW2 = 0x7B807B80u;  // 2^120, twice
};

template <>
struct SbsWiden<SB_KIND_F16> {
  static constexpr int SHIFT = 7;
  static constexpr u32 KEEP = 0xBF80BF80u;
  static constexpr u32 POW2 = 0x5C005C00u;  // 2^8, twice
};

template <int KIND>
__device__ __forceinline__ u32 sbs_e4m3x2(u32 sign_extended) {
  const u32 v = (sign_extended << SbsWiden<KIND>::SHIFT) & SbsWiden<KIND>::KEEP;
  u32 d;
  if constexpr (KIND == SB_KIND_BF16) {
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(v), "r"(SbsWiden<KIND>::POW2), "r"(0x80008000u));
  } else {
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(v), "r"(SbsWiden<KIND>::POW2), "r"(0x80008000u));
  }
  return d;
}

template <int KIND>
__device__ __forceinline__ void sbs_dequant4(u32 four, u32& lo, u32& hi) {
  u32 a, b;
  asm("prmt.b32 %0, %1, %2, 0x9180;" : "=r"(a) : "r"(four), "r"(0u));  // byte0, byte1, sign-extended
  asm("prmt.b32 %0, %1, %2, 0xB3A2;" : "=r"(b) : "r"(four), "r"(0u));  // byte2, byte3
  lo = sbs_e4m3x2<KIND>(a);
  hi = sbs_e4m3x2<KIND>(b);
}

__device__ __forceinline__ int sbs_cluster_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return (int)r;
}

__device__ __forceinline__ void sbs_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// A float in the shared memory of CTA `rank` of this cluster, at the address `p` has here.
__device__ __forceinline__ float sbs_ld_cluster(const float* p, int rank) {
  u32 ra;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(sbs_smem_addr(p)), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(ra) : "memory");
  return v;
}

template <int KIND, int W8, int ROWS, int NT, int CL>
__device__ __forceinline__ void sbs_gemv(const u16* __restrict__ x, const unsigned char* __restrict__ w,
                                         const float* __restrict__ scale, const u16* __restrict__ residual,
                                         u16* __restrict__ out, int T, int N, int K, int stages) {
  constexpr int BK = W8 ? 512 : 256;  // k per stage
  constexpr int XB = 2 * BK;          // bytes of one x row per stage
  constexpr int XCH = XB / 16;        // its 16-byte chunks
  constexpr int WM = (ROWS / 16) < SBS_WARPS ? (ROWS / 16) : SBS_WARPS;  // warps along rows
  constexpr int WK = SBS_WARPS / WM;                                      // warps along k
  constexpr int MTW = ROWS / 16 / WM;                                     // m16 tiles per warp
  constexpr int KU = W8 ? 32 : 16;    // k per weight ldmatrix.x4
  constexpr int KUW = BK / KU / WK;   // ldmatrix.x4 steps per warp per stage
  constexpr int TP = 8 * NT;          // token slots
  constexpr int RS = ROWS + 4;        // row stride of the reduction buffer (conflict-free stores)
  static_assert(ROWS % 16 == 0 && (ROWS / 16) % WM == 0 && (BK / KU) % WK == 0, "tile shape");
  static_assert(SBS_WARPS % WM == 0 && ROWS % CL == 0, "warp layout");

  extern __shared__ __align__(128) unsigned char sbs_smem[];
  const u32 zero_addr = sbs_smem_addr(sbs_smem);  // 16 zero bytes: x rows of tokens >= T
  const u32 stage0 = zero_addr + 128;
  const int wstage = ROWS * SBS_ROW_BYTES;
  const int stage_bytes = wstage + T * XB;

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int wm = warp % WM;
  const int wk = warp / WM;
  const int g = lane >> 2;
  const int q = lane & 3;

  int crank = 0;
  if constexpr (CL > 1) crank = sbs_cluster_rank();
  const int n0 = (blockIdx.x / CL) * ROWS;
  const long long row_bytes = W8 ? (long long)K : 2LL * K;
  const int total = (K + BK - 1) / BK;
  const int per_cta = (total + CL - 1) / CL;
  const int s_begin = crank * per_cta;
  int nst = total - s_begin;
  nst = nst < 0 ? 0 : (nst > per_cta ? per_cta : nst);

  if (tid < 4) reinterpret_cast<u32*>(sbs_smem)[tid] = 0u;
  const unsigned long long pol = sb_policy_evict_first();  // the weight is read once

  // The outputs this thread finishes at the end: their residual (and scale) are loaded now,
  // so that no dependent DRAM round trip is left for after the weight has streamed.
  constexpr int RPC = ROWS / CL;                          // rows this CTA finishes
  constexpr int OPT = (TP * RPC + SBS_THREADS - 1) / SBS_THREADS;  // outputs per thread (at most)
  float res_pre[OPT];
  float scale_pre[OPT];
#pragma unroll
  for (int i = 0; i < OPT; ++i) {
    const int o = tid + i * SBS_THREADS;
    const int t = o / RPC;
    const int n = n0 + crank * RPC + o % RPC;
    const bool ok = t < T && n < N;
    res_pre[i] = ok ? sb_to_float<KIND>(residual[(long long)t * N + n]) : 0.f;
    scale_pre[i] = 1.f;
    if constexpr (W8 != 0) scale_pre[i] = ok ? scale[n] : 1.f;
  }

  auto load_stage = [&](int s, int buf) {
    const u32 wdst = stage0 + buf * stage_bytes;
    const u32 xdst = wdst + wstage;
    const long long kb0 = (long long)(s_begin + s) * SBS_ROW_BYTES;
#pragma unroll
    for (int i = 0; i < ROWS * 32 / SBS_THREADS; ++i) {
      const int idx = tid + i * SBS_THREADS;
      const int r = idx >> 5;
      const int c = idx & 31;
      const long long kb = kb0 + c * 16;
      const bool ok = n0 + r < N && kb < row_bytes;
      const unsigned char* src = w + (ok ? (long long)(n0 + r) * row_bytes + kb : 0);
      sbs_cp16_once(wdst + r * SBS_ROW_BYTES + ((c ^ (r & 7)) << 4), src, ok, pol);
    }
    const long long k0 = (long long)(s_begin + s) * BK;
    for (int idx = tid; idx < T * XCH; idx += SBS_THREADS) {
      const int t = idx / XCH;
      const int c = idx % XCH;
      const long long k = k0 + c * 8;
      const bool ok = k < K;
      sbs_cp16(xdst + t * XB + ((c ^ (t & 7)) << 4), x + (ok ? (long long)t * K + k : 0), ok);
    }
  };

  float acc[MTW][NT][4];
#pragma unroll
  for (int m = 0; m < MTW; ++m)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[m][j][i] = 0.f;

  auto compute_stage = [&](int buf) {
    const u32 wsm = stage0 + buf * stage_bytes;
    const u32 xsm = wsm + wstage;
#pragma unroll
    for (int u = 0; u < KUW; ++u) {
      const int ku = wk * KUW + u;
      if constexpr (!W8) {
        u32 b[(NT + 1) / 2][4];
#pragma unroll
        for (int jp = 0; jp < (NT + 1) / 2; ++jp) {
          const int tok = 16 * jp + (lane & 7) + ((lane >> 4) << 3);
          const int kc = 2 * ku + ((lane >> 3) & 1);
          sbs_ldsm4(b[jp], tok < T ? xsm + tok * XB + ((kc ^ (tok & 7)) << 4) : zero_addr);
        }
#pragma unroll
        for (int mt = 0; mt < MTW; ++mt) {
          const int row = 16 * (wm * MTW + mt) + (lane & 15);
          const int kc = 2 * ku + (lane >> 4);
          u32 a[4];
          sbs_ldsm4(a, wsm + row * SBS_ROW_BYTES + ((kc ^ (row & 7)) << 4));
#pragma unroll
          for (int j = 0; j < NT; ++j)
            sbs_mma<KIND>(acc[mt][j], a[0], a[1], a[2], a[3], b[j >> 1][2 * (j & 1)], b[j >> 1][2 * (j & 1) + 1]);
        }
      } else {
        u32 b[2][NT][2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            const int tok = 8 * j + g;
            const int ke = ku * 32 + h * 16 + 4 * q;  // first of this lane's 4 k
            const int kc = ke >> 3;
            if (tok < T) {
              sbs_lds64(b[h][j], xsm + tok * XB + ((kc ^ (tok & 7)) << 4) + ((ke & 7) << 1));
            } else {
              b[h][j][0] = 0u;
              b[h][j][1] = 0u;
            }
          }
        }
#pragma unroll
        for (int mt = 0; mt < MTW; ++mt) {
          const int row = 16 * (wm * MTW + mt) + (lane & 15);
          const int kc = 2 * ku + (lane >> 4);
          u32 r[4];
          sbs_ldsm4(r, wsm + row * SBS_ROW_BYTES + ((kc ^ (row & 7)) << 4));
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            u32 a0, a1, a2, a3;
            sbs_dequant4<KIND>(r[2 * h], a0, a2);      // rows 0-7
            sbs_dequant4<KIND>(r[2 * h + 1], a1, a3);  // rows 8-15
#pragma unroll
            for (int j = 0; j < NT; ++j) sbs_mma<KIND>(acc[mt][j], a0, a1, a2, a3, b[h][j][0], b[h][j][1]);
          }
        }
      }
    }
  };

  for (int s = 0; s < stages - 1; ++s) {
    if (s < nst) load_stage(s, s);
    sbs_commit();
  }
  for (int it = 0; it < nst; ++it) {
    sbs_wait(stages - 2);
    __syncthreads();  // stage `it` visible to all; buffer (it - 1) % stages free again
    const int nx = it + stages - 1;
    if (nx < nst) load_stage(nx, nx % stages);
    sbs_commit();
    compute_stage(it % stages);
  }
  sbs_wait(0);
  __syncthreads();  // the stage buffers become the reduction buffer

  float* red = reinterpret_cast<float*>(sbs_smem + 128);  // [WK][TP][RS]
#pragma unroll
  for (int mt = 0; mt < MTW; ++mt) {
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int row = 16 * (wm * MTW + mt) + g;
      float* p = red + (wk * TP + 8 * j + 2 * q) * RS + row;
      p[0] = acc[mt][j][0];
      p[RS] = acc[mt][j][1];
      p[8] = acc[mt][j][2];
      p[RS + 8] = acc[mt][j][3];
    }
  }
  if constexpr (CL > 1) {
    sbs_cluster_sync();
  } else {
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < OPT; ++i) {
    const int o = tid + i * SBS_THREADS;
    const int t = o / RPC;
    const int rl = crank * RPC + o % RPC;
    const int n = n0 + rl;
    if (t < T && n < N) {
      float s = 0.f;
#pragma unroll
      for (int kw = 0; kw < WK; ++kw) {
        const float* p = red + (kw * TP + t) * RS + rl;
        if constexpr (CL > 1) {
#pragma unroll
          for (int c = 0; c < CL; ++c) s += sbs_ld_cluster(p, c);
        } else {
          s += *p;
        }
      }
      out[(long long)t * N + n] = sb_from_float<KIND>(s * scale_pre[i] + res_pre[i]);
    }
  }
  if constexpr (CL > 1) sbs_cluster_sync();  // no CTA leaves while others read its shared memory
}

template <int KIND, int W8, int ROWS, int NT>
__global__ void __launch_bounds__(SBS_THREADS, 1)
    gemv_stream_kernel(const u16* __restrict__ x, const unsigned char* __restrict__ w,
                       const float* __restrict__ scale, const u16* __restrict__ residual,
                       u16* __restrict__ out, int T, int N, int K, int stages) {
  sbs_gemv<KIND, W8, ROWS, NT, 1>(x, w, scale, residual, out, T, N, K, stages);
}

// The same with CL CTAs per thread-block cluster splitting K (compute capability 9.0+).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
template <int KIND, int W8, int ROWS, int NT, int CL>
__global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(SBS_THREADS, 1)
    gemv_stream_cluster_kernel(const u16* __restrict__ x, const unsigned char* __restrict__ w,
                               const float* __restrict__ scale, const u16* __restrict__ residual,
                               u16* __restrict__ out, int T, int N, int K, int stages) {
  sbs_gemv<KIND, W8, ROWS, NT, CL>(x, w, scale, residual, out, T, N, K, stages);
}
#endif
