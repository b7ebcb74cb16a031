// Internal: the adaptive lane width of the shuffle SDDMM (shuffle_sddmm.cu) as plain C++, so that
// the registry's validity rule (src/dispatch/registry.cpp), compiled in every build, computes what
// the launcher computes.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/shape_math.hpp"

namespace spgnn::detail::shuffle {

// Elements per vector where the pointers are aligned for it: 4 floats, or 8 halves (halves that
// do not fill 8 take pairs: the launcher has no 4-half instantiation), else 2, else 1.
inline int64_t vector_width(int64_t F, bool half) {
  if (half) return F % 8 == 0 ? 8 : F % 2 == 0 ? 2 : 1;
  return F % 4 == 0 ? 4 : F % 2 == 0 ? 2 : 1;
}

// log2 of the lanes per edge for `nv` vector slots per row (lanes = 0). Float32 and narrow half
// vectors: the smallest power of two giving each lane at most two vectors. 16-byte half vectors
// (8 halves, `wide_half`) from 8 slots on: at most four vectors a lane, and at least 4 lanes.
// A warp step costs about the same whatever its bytes, so fewer lanes per edge (more edges per
// step) pays until each lane's loads are too few to fill it (H200, float16, 1024 edges per block:
// F = 256 on R-MAT scale 21 2.97 ms at 8 lanes against 3.67 at 16, the Reddit shape 12.35 against
// 13.98; F = 128 on the Reddit shape 6.17 at 4 against 6.72 at 8; F = 64 3.22 at 4 against 3.30
// at 2).
inline int adaptive_lanes_log2(int64_t nv, bool wide_half) {
  if (wide_half && nv >= 8) return std::clamp(log2_ceil((nv + 3) / 4), 2, 5);
  return std::clamp(log2_ceil((nv + 1) / 2), 1, 5);
}

}  // namespace spgnn::detail::shuffle
