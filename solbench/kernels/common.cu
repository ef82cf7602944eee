// Shared device helpers for solbench's fused kernels.
//
// Included textually by the other .cu files (solbench/kernels/loader.py inlines
// `#include "common.cu"` before compiling, so CuPy's on-disk cache keys on the
// full text). No system or CUDA headers: 16-bit floats are carried as raw
// `unsigned short` bits and converted with PTX `cvt` instructions, so the
// sources compile under bare NVRTC and under nvcc alike.
//
// KIND selects the 16-bit format: 0 = bfloat16, 1 = float16.
//
// solbench: min_cc 8.0
// (createpolicy, cvt.rn.bf16.f32 and bf16 mma need sm_80; the sm_90 bf16x2 add below has an
// sm_80 fallback.) Every file including this one needs at least that.
#pragma once

typedef unsigned short u16;
typedef unsigned int u32;

#define SB_KIND_BF16 0
#define SB_KIND_F16 1

// ---------------------------------------------------------------- conversions

template <int KIND>
__device__ __forceinline__ float sb_to_float(u16 h);

template <>
__device__ __forceinline__ float sb_to_float<SB_KIND_BF16>(u16 h) {
  return __uint_as_float(((u32)h) << 16);
}

template <>
__device__ __forceinline__ float sb_to_float<SB_KIND_F16>(u16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

// Round to nearest even, as torch does.
template <int KIND>
__device__ __forceinline__ u16 sb_from_float(float f);

template <>
__device__ __forceinline__ u16 sb_from_float<SB_KIND_BF16>(float f) {
  u16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

template <>
__device__ __forceinline__ u16 sb_from_float<SB_KIND_F16>(float f) {
  u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

// ------------------------------------------------------------ memory access

// 16-byte read-only load (ld.global.nc): the caller guarantees 16-byte alignment.
__device__ __forceinline__ void sb_ldg128(const void* p, u32 (&r)[4]) {
  asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "l"(p));
}

// 16-byte streaming load that skips L1 (data read exactly once).
__device__ __forceinline__ void sb_ldg128_stream(const void* p, u32 (&r)[4]) {
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "l"(p));
}

// L2 policy "evict first" for data read exactly once (a streamed weight, the
// dead inputs of an elementwise op): such lines are replaced before others, so
// the stream neither evicts data that is still live (the outputs the next
// kernel reads, activations, KV cache) nor forces dirty lines out of L2 early.
// -DSB_NO_EVICT_FIRST turns the hint off (benchmark variants). Measured on an
// H200 (2026-11-30, bench/kernels_h200.py): no difference beyond noise either
// way for the three kernels timed alone; kept for kernels running in sequence.
__device__ __forceinline__ unsigned long long sb_policy_evict_first() {
  unsigned long long pol;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}

// 16-byte streaming load of once-read data: no L1 allocation, L2 evict-first.
__device__ __forceinline__ void sb_ldg128_once(const void* p, u32 (&r)[4], unsigned long long pol) {
#ifdef SB_NO_EVICT_FIRST
  (void)pol;
  sb_ldg128_stream(p, r);
#else
  asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "l"(p), "l"(pol));
#endif
}

__device__ __forceinline__ void sb_stg128(void* p, const u32 (&r)[4]) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};"
               :
               : "l"(p), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

// VEC consecutive 16-bit elements. VEC is 8 (one 16-byte access, the pointer
// 16-byte aligned) or 1 (a scalar access, any alignment). `Raw` holds the bits
// two to a word (for VEC = 1, the element sits in the low half of raw[0]).
template <int KIND, int VEC>
struct SbPack;

template <int KIND>
struct SbPack<KIND, 8> {
  static constexpr int kWords = 4;
  static __device__ __forceinline__ void load_raw(const u16* p, u32 (&r)[4]) { sb_ldg128(p, r); }
  static __device__ __forceinline__ void load_raw_once(const u16* p, u32 (&r)[4], unsigned long long pol) {
    sb_ldg128_once(p, r, pol);
  }
  static __device__ __forceinline__ void unpack(const u32 (&r)[4], float (&f)[8]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      f[2 * i] = sb_to_float<KIND>((u16)(r[i] & 0xffffu));
      f[2 * i + 1] = sb_to_float<KIND>((u16)(r[i] >> 16));
    }
  }
  static __device__ __forceinline__ void load(const u16* p, float (&f)[8]) {
    u32 r[4];
    load_raw(p, r);
    unpack(r, f);
  }
  static __device__ __forceinline__ void store(u16* p, const u16 (&h)[8]) {
    u32 r[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) r[i] = (u32)h[2 * i] | ((u32)h[2 * i + 1] << 16);
    sb_stg128(p, r);
  }
  static __device__ __forceinline__ void store_raw(u16* p, const u32 (&r)[4]) { sb_stg128(p, r); }
};

template <int KIND>
struct SbPack<KIND, 1> {
  static constexpr int kWords = 1;
  static __device__ __forceinline__ void load_raw(const u16* p, u32 (&r)[1]) { r[0] = *p; }
  static __device__ __forceinline__ void load_raw_once(const u16* p, u32 (&r)[1], unsigned long long) {
    r[0] = *p;
  }
  static __device__ __forceinline__ void unpack(const u32 (&r)[1], float (&f)[1]) {
    f[0] = sb_to_float<KIND>((u16)(r[0] & 0xffffu));
  }
  static __device__ __forceinline__ void load(const u16* p, float (&f)[1]) {
    f[0] = sb_to_float<KIND>(*p);
  }
  static __device__ __forceinline__ void store(u16* p, const u16 (&h)[1]) { *p = h[0]; }
  static __device__ __forceinline__ void store_raw(u16* p, const u32 (&r)[1]) { *p = (u16)r[0]; }
};

// Two packed 16-bit additions, each rounded to nearest even (as torch's eager
// bf16/fp16 add). bf16x2 add needs sm_90; before it, the sum is formed in fp32 and
// rounded once to bf16, which gives the same bits: two bf16 values whose fp32 sum is
// inexact differ in exponent by more than 15, and then neither rounding can reach a
// bf16 rounding boundary (it is also what torch's eager bf16 add computes).
template <int KIND>
__device__ __forceinline__ u32 sb_add2(u32 a, u32 b);

template <>
__device__ __forceinline__ u32 sb_add2<SB_KIND_BF16>(u32 a, u32 b) {
  u32 d;
#if __CUDA_ARCH__ >= 900
  asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
#else
  const float lo = __uint_as_float(a << 16) + __uint_as_float(b << 16);
  const float hi = __uint_as_float(a & 0xffff0000u) + __uint_as_float(b & 0xffff0000u);
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
#endif
  return d;
}

template <>
__device__ __forceinline__ u32 sb_add2<SB_KIND_F16>(u32 a, u32 b) {
  u32 d;
  asm("add.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// ------------------------------------------------------------ reductions

__device__ __forceinline__ float sb_warp_sum(float v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}
