// Max pooling of an NHWC (channels_last) tensor: out[n, i, j, c] = max over the window
// x[n, i*S - P + u, j*S - P + v, c], 0 <= u, v < R, positions outside the input skipped
// (torch's implicit -inf padding). NaN propagates, as in torch.
//
// One thread per output pixel and VEC channels: VEC = 8 reads and writes 16 bytes at a time
// (channels % 8 == 0 and both pointers 16-byte aligned), VEC = 1 is the scalar path. Threads
// of a warp cover consecutive channel packs, then consecutive output pixels, so every load of
// a window row is one contiguous run of the input; the overlap of neighbouring windows (3x3,
// stride 2: each input read 2.25 times) is served by L1/L2. The max is taken on the 16-bit
// values converted to fp32, which is exact.
//
// Launch: block = 256 threads, grid = ceil(n * p * q * channels / VEC / 256).
// solbench: min_cc 8.0
#include "common.cu"

template <int KIND>
__device__ __forceinline__ float sb_max_nan(float m, float v) {
  return (v > m || v != v) ? v : m;  // keeps a NaN once seen (m != m: nothing is > NaN)
}

template <int KIND, int VEC>
__global__ void __launch_bounds__(256) maxpool_nhwc_kernel(
    const u16* __restrict__ x, u16* __restrict__ out, long long total_packs, int h, int w, int c,
    int p, int q, int r, int s, int stride, int pad) {
  typedef SbPack<KIND, VEC> Pack;
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= total_packs) return;
  const int cpacks = c / VEC;
  const int cp = (int)(t % cpacks);
  long long pix = t / cpacks;
  const int j = (int)(pix % q);
  pix /= q;
  const int i = (int)(pix % p);
  const long long n = pix / p;
  float m[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) m[e] = -__int_as_float(0x7f800000);  // -inf
  const int y0 = i * stride - pad, x0 = j * stride - pad;
  for (int u = 0; u < r; ++u) {
    const int y = y0 + u;
    if (y < 0 || y >= h) continue;
    for (int v = 0; v < s; ++v) {
      const int xx = x0 + v;
      if (xx < 0 || xx >= w) continue;
      float f[VEC];
      Pack::load(x + ((n * h + y) * (long long)w + xx) * c + (long long)cp * VEC, f);
#pragma unroll
      for (int e = 0; e < VEC; ++e) m[e] = sb_max_nan<KIND>(m[e], f[e]);
    }
  }
  u16 o[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) o[e] = sb_from_float<KIND>(m[e]);
  Pack::store(out + t * VEC, o);
}
