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

// gnnone's feature chunk: the most lanes of 16 bytes (4 floats or 8 halves) a thread group spans,
// i.e. the slice of each feature row one grid row (blockIdx.y) gathers. `F` elements of
// `elem_bytes`, `V` of them per lane (a lane then holds V * elem_bytes <= 16 bytes), `n_cols`
// gathered rows, `l2` bytes of L2.
//  - The widest chunk of 32, 16 or 8 lanes whose working set (n_cols x chunk bytes) fits in 60%
//    of L2, 16 lanes when none fits: R-MAT 21 (2M vertices, nothing fits) SpMM F = 128 2.80 ms
//    with 16 lanes, 3.21 with 32, 2.95 with 8.
//  - SpMM (`whole_row_if_fits`): twice that chunk where it then holds the whole row in one pass
//    and the whole feature matrix fits in L2. A second, partly filled pass costs nearly a full
//    one. H100, float32, Reddit-shaped graphs (233K vertices): F = 40 / 44 / 48 / 56 took 3.11 /
//    3.64 / 3.73 / 5.00 ms in one pass of 16 lanes against 3.88 / 4.74 / 3.84 / 5.55 in two of 8.
//    At F = 64 (60 MB, more than L2) two passes win: 3.99 against 5.14 ms.
inline int gnnone_max_group(int64_t F, int V, int elem_bytes, int64_t n_cols, double l2,
                            bool whole_row_if_fits) {
  const double lane_bytes = double(V) * elem_bytes;
  int lanes = 16;
  for (int l : {32, 16, 8})
    if (double(n_cols) * l * lane_bytes <= 0.6 * l2) {
      lanes = l;
      break;
    }
  const double row_bytes = double(F) * elem_bytes;
  if (whole_row_if_fits && lanes < 32 && row_bytes > lanes * lane_bytes &&
      row_bytes <= 2 * lanes * lane_bytes && double(n_cols) * row_bytes <= l2)
    lanes *= 2;
  return lanes;
}

}  // namespace spgnn::detail
