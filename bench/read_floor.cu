// The read floor of a decode GEMV: stream `bytes` once (16-byte loads, no L1, several in
// flight per thread) and write one word per block, so that the time is what reading the
// weight alone costs under the same timer. Loaded with solbench.kernels.load (bench only).
//
// solbench: min_cc 8.0

#define UNROLL 8

extern "C" __global__ void __launch_bounds__(512) read_floor(const uint4* __restrict__ src, long long n16,
                                                             unsigned* __restrict__ sink) {
  unsigned acc = 0u;
  const long long stride = (long long)gridDim.x * blockDim.x;
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (UNROLL - 1) * stride < n16; i += UNROLL * stride) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                   : "l"(src + i + u * stride));
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n16; i += stride) {
    const uint4 v = src[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9E3779B9u) sink[blockIdx.x] = acc;  // keeps the loads; almost never stores
}
