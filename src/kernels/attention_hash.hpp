// Internal: the attention-dropout mask, one definition for the CPU and CUDA kernels. The mask of
// edge e, head h is a pure function of (seed, e * H + h), so the backward pass regenerates
// exactly the forward pass's mask instead of storing it, and a CPU run keeps exactly the edges a
// GPU run keeps (tests compare the two bit for bit on the mask).
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define SPGNN_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define SPGNN_HOST_DEVICE inline
#endif

namespace spgnn::detail {

// splitmix64's finaliser: every input bit affects every output bit.
SPGNN_HOST_DEVICE uint64_t attention_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The key of one dropout mask: the seed mixed once per call (or per kernel), so that each
// element costs one mix.
SPGNN_HOST_DEVICE uint64_t attention_key(uint64_t seed) {
  return attention_mix(seed ^ 0xD6E8FEB86659FD93ULL);
}

// Uniform in [0, 1) with 24 bits for element i = edge * H + head of the [nnz, H] weights:
// SplitMix64's output number i + 1 from state `key` (one 64-bit mix; the masks are a SplitMix64
// stream per seed). The kernels are bound by instructions per edge, and this takes about half
// of what mixing the seed and the index separately for every element did (docs/GAT_NOTES.md,
// "A cheaper dropout mask"). An integer below 2^24 times 2^-24 is exact in float, so the
// comparison with p below gives the same answer on every device and compiler.
SPGNN_HOST_DEVICE float attention_uniform(uint64_t key, uint64_t i) {
  const uint64_t z = attention_mix(key + (i + 1) * 0x9E3779B97F4A7C15ULL);
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

// The factor the softmax weight of element i (= edge * H + head) is multiplied by: 0 when
// dropped, else scale = 1 / (1 - p) (computed once by the caller, so every kernel uses the same
// float). key = attention_key(seed).
SPGNN_HOST_DEVICE float attention_dropout_factor(uint64_t key, uint64_t i, float p, float scale) {
  return attention_uniform(key, i) >= p ? scale : 0.f;
}

}  // namespace spgnn::detail
