// Internal: the launch shape of the CBSR products (cbsr_spgemm.cu, cbsr_sspmm.cu) as plain C++,
// so that the registry's validity rules (src/dispatch/registry.cpp), compiled in every build,
// compute exactly what the launchers compute: which parameter combinations run the same kernel
// and are therefore left out of the autotuner's space.
#pragma once
#include <cstddef>
#include <cstdint>

namespace spgnn::detail::cbsr {

constexpr int kDefaultWarps = 8;
constexpr int kMaxWarps = 16;
// Shared memory one block may use for its warps' F-float row buffers; wider rows (F > 24576)
// take the buffer-less path.
constexpr int64_t kMaxBlockSmem = 96 * 1024;
// Lean launches (the `regs` parameter, 40): blocks of at most 8 warps at 40 registers per thread,
// 48 warps per SM, more rows in flight where each row is a short chain of dependent loads
// (kron21's forward at k <= 32: 1.07-1.24x faster), at the price of some spilling (slower on
// Reddit-like rows, and at 32 registers everywhere). Otherwise 512-thread blocks at 2 per SM,
// i.e. at most 64 registers: with a minimum of 1 block ptxas took 69-90 registers and the
// products ran 1.1-1.6x slower on the H100.
constexpr int kLeanWarps = 8;
constexpr int kLeanRegs = 40;

// Edges per warp segment when the schedule does not set it: the next power of two >= 4 x the
// average degree, clamped to [64, 4096] (Reddit-like rows of ~500 edges stay whole; on kron21,
// average degree 16, hub rows split into segments of 64, which beat 128 and 256 in both products
// on the H100).
inline int64_t default_segment(double avg_degree) {
  int64_t s = 64;
  while (s < 4096 && double(s) < 4.0 * avg_degree) s *= 2;
  return s;
}

// The backward's flat form (cbsr_sspmm.cu): a warp per fixed chunk of the edge list, whatever its
// rows. By default on graphs of average degree below 64 (kron21: 16, half the rows empty), whose
// rows are mostly a few edges, too few for a warp's 8 lane groups, and each would cost a warp its
// chain of dependent loads (segment -> row -> rowptr); and at k <= 16 on any graph. H100, F = 256
// (docs/BENCHMARKS_MAXK.md): kron21 flat vs segments 1.92 / 2.80 / 5.41 vs 2.43 / 3.39 / 5.53 ms
// at k = 16 / 32 / 64; Reddit-shaped (~490 edges per row) 3.23 vs 3.56 ms at k = 16, but
// 6.63 vs 6.45 and 20.5 vs 12.5 ms at k = 32 / 64, where staging d_out's row once pays.
// flat: the parameter (1, 0, or -1 = this default).
constexpr double kFlatMaxAvgDegree = 64.0;
constexpr int64_t kFlatMaxK = 16;
inline bool sspmm_flat(int64_t flat, double avg_degree, int64_t k) {
  return flat > 0 || (flat < 0 && (avg_degree < kFlatMaxAvgDegree || k <= kFlatMaxK));
}
// Edges per warp chunk in the flat form when the schedule does not set `segment`: enough to
// amortise a warp's fixed cost (its index arithmetic, the pipeline's fill), and on short rows
// (kron21) few enough that the warps resident at once cover a narrow stretch of the edge list.
// H200 with the L2 policies, F = 256, kron21 (short rows), SSpMM ms at k = 8 / 16 / 32 / 64:
// chunks of 256: 0.982 / 1.346 / 2.099 / 4.147; of 64: 0.949 / 1.334 / 2.036 / 4.027. The
// Reddit shape (long rows, flat at k <= 16) goes the other way: k = 8 / 16 2.056 / 2.656 with
// 256, 2.078 / 2.755 with 64. On small graphs the shorter chunk also fills the card: 4x the
// warps, pubmed and coauthor-cs 1.3-2.9x faster (docs/BENCHMARKS_MAXK.md).
// A small graph's chunk halves further, down to kFlatChunkMin edges (the smallest legal
// `segment`), until the grid has kFlatFillWarpsPerSm warps per SM: pubmed's 88.6K edges make
// 1,386 chunks of 64, 10.5 warps on each of an H200's 132 SMs. H200, F = 256, SSpMM ms at
// k = 8 / 16 / 32 / 64, the faster of two runs, filled (32) against chunks of 64: pubmed 0.0103 /
// 0.0127 / 0.0165 / 0.0216 against 0.0110 / 0.0141 / 0.0199 / 0.0304; cora (10.6K edges) 0.0080 /
// 0.0084 / 0.0096 / 0.0126 against 0.0097 / 0.0106 / 0.0125 / 0.0181; citeseer 0.0087 / 0.0090 /
// 0.0101 / 0.0130 against 0.0099 / 0.0105 / 0.0134 / 0.0204. coauthor-cs (164K edges, 19 warps
// an SM at 64) was 3-8% slower in 32 at k = 32 / 64 in an earlier call, so 16 an SM is the bar.
// Long rows: a 200K-edge graph of ~100 per row takes 64 instead of 256, 0.0133 against 0.0165 at
// k = 16. nnz = 0 or fill_warps = 0: no filling (the registry, which does not see the card).
constexpr int64_t kFlatChunk = 256;
constexpr int64_t kFlatChunkShortRows = 64;
constexpr int64_t kFlatChunkMin = 32;
constexpr int64_t kFlatFillWarpsPerSm = 16;
inline int64_t flat_chunk(double avg_degree, int64_t nnz = 0, int64_t fill_warps = 0) {
  int64_t c = avg_degree < kFlatMaxAvgDegree ? kFlatChunkShortRows : kFlatChunk;
  while (c > kFlatChunkMin && (nnz + c - 1) / c < fill_warps) c /= 2;
  return c;
}

// The flat form's edge list (columns, rows, weights: read once, in order) with streaming loads
// (`ld.global.cs`, evict first), so it does not push d_data's lines out of L2. H200, F = 256,
// beside the flat kernel's L2 policies (d_data evict_last, d_out gathers evict_first), two
// alternating calls each, SSpMM ms: kron21 (d_data 67-134 MB at k = 8 / 16, past L2) k = 8 0.956
// / 0.957 cached against 0.935 / 0.933 streamed, k = 16 1.338 / 1.338 against 1.297 / 1.299; at
// k = 32 / 64 the calls disagree (2.032 / 2.032 against 2.008 / 2.068, 4.065 / 4.066 against
// 4.064 / 3.955), and an earlier session measured k = 64 4.9% slower streamed; the Reddit shape
// (d_data in L2) moves by under 0.5% (docs/BENCHMARKS_MAXK.md). stream: the parameter (1, 0,
// or -1 = this default).
constexpr int64_t kFlatStreamMaxK = 16;
inline bool flat_stream_edges(int64_t stream, int64_t k) {
  return stream > 0 || (stream < 0 && k <= kFlatStreamMaxK);
}

// Values per lane: the widest of 4, 2, 1 that divides k, capped by max_v (the launchers also
// halve it for misaligned pointers, which the CBSR buffers spgnn allocates never are).
inline int vector_width(int64_t k, int64_t max_v) {
  int V = k % 4 == 0 ? 4 : k % 2 == 0 ? 2 : 1;
  while (V > max_v) V /= 2;
  return V;
}
// log2 of the lanes that cover one CBSR row of k values at V per lane (at most 5: a warp).
inline int lanes_log2(int64_t k, int V) {
  const int64_t nv = k / V;
  int lg = 0;
  while (lg < 5 && (int64_t{1} << lg) < nv) ++lg;
  return lg;
}

// Warps per block and whether the F-float row buffer lives in shared memory.
struct BlockShape {
  int warps = kDefaultWarps;
  int warps_requested = kDefaultWarps;
  bool smem = true;
  size_t smem_bytes = 0;
};
// rows_per_warp: F-float rows each warp keeps (the forward's private rows: one per lane group).
inline BlockShape block_shape(int64_t F, int64_t requested_warps, bool smem_buffer,
                              int rows_per_warp = 1) {
  BlockShape b;
  b.warps = requested_warps > 0 ? static_cast<int>(requested_warps) : kDefaultWarps;
  b.warps_requested = b.warps;
  const int64_t row_bytes = (F * 4 + 15) / 16 * 16 * rows_per_warp;
  const int64_t fit = kMaxBlockSmem / row_bytes;
  b.smem = smem_buffer && fit >= 1;
  if (b.smem) {
    if (b.warps > fit) b.warps = static_cast<int>(fit);
    b.smem_bytes = static_cast<size_t>(b.warps * row_bytes);
  }
  return b;
}

// A lean launch: at most kLeanWarps warps, the same shared memory per warp.
inline void make_lean(BlockShape& b) {
  if (b.warps <= kLeanWarps) return;
  if (b.smem) b.smem_bytes = b.smem_bytes / static_cast<size_t>(b.warps) * kLeanWarps;
  b.warps = kLeanWarps;
}

}  // namespace spgnn::detail::cbsr
