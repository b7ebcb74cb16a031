// Internal: device pieces shared by the attention kernels (edge_softmax.cu, gat_fused.cu):
// LeakyReLU, warp reductions and the per-row softmax statistics. Included by .cu files only.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace spgnn::detail::attention {

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float leaky(float z, float slope) { return z > 0.f ? z : z * slope; }

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int off = 16; off; off >>= 1) x += __shfl_xor_sync(kFullMask, x, off);
  return x;
}

// Folds the online-softmax state (m2, z2) into (m, z): z is the sum of exp(s - m) over the
// logits seen so far. -inf marks a lane that saw no logit.
__device__ __forceinline__ void softmax_combine(float& m, float& z, float m2, float z2) {
  const float mx = fmaxf(m, m2);
  if (mx == -INFINITY) return;
  z = (m == -INFINITY ? 0.f : z * expf(m - mx)) + (m2 == -INFINITY ? 0.f : z2 * expf(m2 - mx));
  m = mx;
}

// Max and sum(exp(s - max)) of the logits of edges [b, e), for the whole warp (every lane
// must call it; [b, e) must not be empty). One pass: each lane keeps a running max
// and rescales its running sum when the max grows (rare after the first few edges), then the
// 32 partial states are combined with shuffles.
template <class Logit>
__device__ __forceinline__ void row_softmax_stats(int64_t b, int64_t e, int lane, Logit logit,
                                                  float& m, float& z_out) {
  float mm = -INFINITY, z = 0.f;
  for (int64_t j = b + lane; j < e; j += 32) {
    const float s = logit(j);
    if (s > mm) {
      z = z * expf(mm - s) + 1.f;
      mm = s;
    } else {
      z += expf(s - mm);
    }
  }
#pragma unroll
  for (int off = 16; off; off >>= 1) {
    const float m2 = __shfl_xor_sync(kFullMask, mm, off);
    const float z2 = __shfl_xor_sync(kFullMask, z, off);
    softmax_combine(mm, z, m2, z2);
  }
  m = mm;
  z_out = z;
}

}  // namespace spgnn::detail::attention
