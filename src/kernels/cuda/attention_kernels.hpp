// Internal: host entry points of the CUDA attention kernels (edge_softmax.cu, gat_fused.cu).
// Plain C++ (no CUDA types) so that the front door, compiled by the host compiler, can call them.
#pragma once
#include <cstdint>

#include "kernels/attention_problem.hpp"

namespace spgnn::detail {

// Warp per destination row; per head, one pass for the max and the sum of exponentials (online,
// combined across lanes), one pass that writes the weights.
void cuda_edge_softmax(const SoftmaxProblem& p);
void cuda_edge_softmax_backward(const SoftmaxBwdProblem& p);

// Elementwise pieces of the unfused GAT composition (device tensors, stream-ordered).
void cuda_leaky_relu_(Tensor& x, float negative_slope, void* stream);
// out = a * the dropout factor of each element (a is [nnz, H]: element e * H + h). seed_ptr:
// read the seed from the device instead (GatParams::dropout_seed_device).
void cuda_apply_dropout(const Tensor& a, Tensor& out, uint64_t seed, const uint64_t* seed_ptr,
                        float p, float scale, void* stream);
void cuda_copy_cols(const Tensor& src, int64_t src_off, Tensor& dst, int64_t dst_off,
                    int64_t width, void* stream);

// TLPGNN-style fused GAT (gat_fused.cu). Forward: `warps` = warps per block; rows with more than
// `heavy_deg` edges are split over several warps; `heads_per_chunk` (0 = as many as one warp
// pass holds, else 1, 2, 4 or 8) heads share one pass over the edges (see gat_fused.cu). Backward,
// a warp per vertex, rows with more than `heavy_deg` edges (of the graph, and of the transpose)
// split over several warps: atomic = false gathers source gradients over p.gt / p.perm (one warp
// per source); atomic = true scatters them with atomics from the destination rows (no
// transpose needed; p.gt may be null).
// feat, attn, grad_out and out may be float16 or bfloat16 instead (all of one dtype; float32
// sums, one rounding per result), when gat_fused_half_width says the kernels take them; el and er
// are float32 or that dtype (read as float32); the backward then has no atomic variant.
void gat_fused_forward(const GatProblem& p, int warps, int64_t heavy_deg, int heads_per_chunk);
void gat_fused_backward(const GatProblem& p, int warps, bool atomic, int64_t heavy_deg);
// Whether the fused kernels take p's half rows: their vector width (8 or 4 elements; the forward
// 8 only for heads of up to 32), or 0 when
// p.feat is not half, F % 4 != 0 or a row pointer (forward: feat, out; backward: feat, grad_out)
// is not aligned to 4 elements.
int gat_fused_half_width(const GatProblem& p, bool backward);
// The backward's split threshold when the schedule sets none (the forward's is 1024): 256, or
// the next power of two >= 4x the average degree, so only rows far above the average split.
// H100, F = 32: kron21 (average 15.5, max 62,045) at 256 against 1024, H = 4: 32.2 -> 27.7 ms
// (gather), 29.1 -> 23.6 ms (atomic); Reddit-shaped (average ~490, every row ~490 edges) at 256
// took 22.0 ms at H = 1 against 12.2 unsplit (each row's sums through atomics).
constexpr int64_t kGatBwdHeavyDeg = 256;
inline int64_t gat_bwd_heavy_deg(double avg_degree) {
  int64_t d = kGatBwdHeavyDeg;
  while (double(d) < 4.0 * avg_degree) d *= 2;
  return d;
}

// Which float32 backward runs when the schedule sets no bwd_atomic: the atomic variant (scatter
// from the destination rows, no source pass, no transpose) where it measured faster than the
// one-walk gather, else the gather. `spgnn bench gat` (H200, 2026-12-02, F = 7..128, H = 1..8,
// docs/BENCHMARKS.md): atomics win on large graphs of low degree and narrow rows, by 1.2-2.5x
// (er:200000:8 H = 1 F = 8: 0.123 against 0.307 ms; kron21 H = 1 F = 16: 2.66 against 3.93),
// and lose as degree x row width (the adds per contended column) grows (er:200000:16 F = 64:
// 0.85x; Reddit shape, every width: 0.13-0.47x). Below 2^20 edges (Cora .. Coauthor CS,
// 0.02-0.04 ms) they mostly lost (0.16-1.30x), and heads of F % 4 != 0 take scalar atomics that
// lost (F = 7: 0.50-1.06x).
inline bool gat_bwd_prefers_atomic(int64_t nnz, int64_t n_rows, int64_t H, int64_t F) {
  if (nnz < (int64_t{1} << 20) || n_rows <= 0 || H <= 0 || F <= 0 || F % 4 != 0) return false;
  const double avg_degree = double(nnz) / double(n_rows);
  return avg_degree * double(H * F) <= 512.0;
}

}  // namespace spgnn::detail
