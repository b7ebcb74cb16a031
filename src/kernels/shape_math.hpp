// Internal: integer helpers of the launch-shape rules, shared by the CUDA launchers, the
// registry's validity rules and the cost model (plain C++, compiled in every build).
#pragma once
#include <cstdint>

namespace spgnn::detail {

// Smallest l with 2^l >= x (0 for x <= 1).
inline int log2_ceil(int64_t x) {
  int l = 0;
  while (l < 62 && (int64_t{1} << l) < x) ++l;
  return l;
}

}  // namespace spgnn::detail
