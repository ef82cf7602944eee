// The byte floor of a case (solbench.impls.floor): read `n_read` 16-byte words of src once and write
// `n_write` 16-byte words of dst once, in one launch, as fast as plain loads and stores go: 16-byte
// accesses, loads that skip L1 and several in flight per thread, grid-stride loops over both. The
// loads are kept by a sink written only when their XOR hits one value in 2^32; the stores write a
// word derived from the thread's index (no dependence on the loads, so the two streams overlap).
//
// solbench: min_cc 8.0

#define UNROLL 8

extern "C" __global__ void __launch_bounds__(512) move_floor(const uint4* __restrict__ src, long long n_read,
                                                             uint4* __restrict__ dst, long long n_write,
                                                             unsigned* __restrict__ sink) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  unsigned acc = 0u;
  long long i = first;
  for (; i + (UNROLL - 1) * stride < n_read; i += UNROLL * stride) {
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
  for (; i < n_read; i += stride) {
    const uint4 v = src[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  const unsigned w = (unsigned)first * 2654435761u + 1u;
  for (long long j = first; j < n_write; j += stride) dst[j] = make_uint4(w, w ^ 1u, w ^ 2u, w ^ 3u);
  if (acc == 0x9E3779B9u) sink[blockIdx.x] = acc;  // keeps the loads; almost never stores
}
