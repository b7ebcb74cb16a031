// Internal: the counter-based hash behind dropout masks, compiled identically for host and
// device so that a CPU run and a GPU run with the same seed drop the same elements.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define SPGNN_NN_HD __host__ __device__ __forceinline__
#else
#define SPGNN_NN_HD inline
#endif

namespace spgnn::nn::detail {

// splitmix64 of (seed, i): statistically independent streams per seed without any state.
SPGNN_NN_HD uint64_t mix_hash(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ULL + i + 0xD1B54A32D192ED03ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
// Kept when the top 24 bits reach threshold = p * 2^24: an integer compare, so the decision is
// bit-identical on host and device.
SPGNN_NN_HD bool dropout_keep(uint64_t seed, uint64_t i, uint32_t threshold) {
  return static_cast<uint32_t>(mix_hash(seed, i) >> 40) >= threshold;
}

}  // namespace spgnn::nn::detail
