// The sparse ops, DGL-style. Inputs are checked (shapes, dtypes, devices) and a mismatch is an
// InvalidArgument naming the argument. The schedule in OpOptions picks the strategy; `auto`
// chooses one for the graph, op, width and device.
#pragma once
#include <string>

#include "spgnn/graph.hpp"
#include "spgnn/schedule.hpp"
#include "spgnn/tensor.hpp"

namespace spgnn {

enum class SpmmOp : uint8_t { copy_u, copy_e, u_mul_e, u_add_e, u_sub_e, u_div_e };
enum class Reduce : uint8_t { sum, mean, max, min };
enum class SddmmOp : uint8_t { dot, add, sub, mul, div, copy_lhs, copy_rhs };
enum class Target : uint8_t { u, v, e };  // u = source (col), v = destination (row), e = edge

const char* name(SpmmOp op);
const char* name(Reduce r);
const char* name(SddmmOp op);
const char* name(Target t);
SpmmOp parse_spmm_op(const std::string& s);
Reduce parse_reduce(const std::string& s);
SddmmOp parse_sddmm_op(const std::string& s);
Target parse_target(const std::string& s);

struct OpOptions {
  Schedule schedule;       // strategy "auto" by default
  void* stream = nullptr;  // cudaStream_t for CUDA strategies; nullptr = default stream
};

// g-SpMM: out[v, f] = reduce over edges e = (v, w) of op(u[w, f], e[e, f or 0]).
//   u:   [n_cols, F] float32, float16 or bfloat16 (float64 on the host; undefined for copy_e)
//   e:   [nnz] or [nnz, 1] (broadcast over F) or [nnz, F] in u's dtype; scalar weights may be
//        float32 beside half u (undefined for copy_u; then the graph's own values are used if
//        the op needs e and the graph has them)
//   out: [n_rows, F] in u's dtype, allocated if undefined, on the graph's device; half math
//        accumulates in float32 and rounds each result once
//   arg_u, arg_e (max/min only; pass undefined to skip): [n_rows, F] i64, the source vertex and
//        edge that produced each output; -1 for rows without edges (whose output is 0).
//        Ties keep the first edge in row order; a NaN message wins, and the first NaN stays
//        (as torch.max and scatter_reduce("amax")).
// mean divides by the row's edge count; rows with no edges get 0 for every reduce.
void gspmm(const Graph& g, SpmmOp op, Reduce reduce, const Tensor& u, const Tensor& e,
           Tensor& out, const OpOptions& options = {});
void gspmm(const Graph& g, SpmmOp op, Reduce reduce, const Tensor& u, const Tensor& e,
           Tensor& out, Tensor& arg_u, Tensor& arg_e, const OpOptions& options = {});

// g-SDDMM: out[e, f] = op(lhs[target(e), f], rhs[target(e), f]) for each edge e = (v, u).
//   lhs/rhs rows are indexed by the edge's source (Target::u, [n_cols, F]), destination
//   (Target::v, [n_rows, F]) or the edge itself (Target::e, [nnz, F]).
//   out: [nnz, 1] for dot (the sum over f), else [nnz, F]; allocated if undefined.
//   copy_lhs ignores rhs and copy_rhs ignores lhs (either may be undefined then).
void gsddmm(const Graph& g, SddmmOp op, const Tensor& lhs, const Tensor& rhs, Tensor& out,
            Target lhs_target = Target::u, Target rhs_target = Target::v,
            const OpOptions& options = {});

// ---- attention (GAT) ----------------------------------------------------------------------------
// Softmax over each destination row's incoming edges, per head: scores [nnz, H] -> out [nnz, H]
// (max-subtracted; rows without edges produce nothing).
void edge_softmax(const Graph& g, const Tensor& scores, Tensor& out, const OpOptions& options = {});
// grad_scores = out * (grad_out - sum_row(grad_out * out)), per head.
void edge_softmax_backward(const Graph& g, const Tensor& out, const Tensor& grad_out,
                           Tensor& grad_scores, const OpOptions& options = {});

struct GatParams {
  int64_t heads = 1;
  float negative_slope = 0.2f;   // LeakyReLU of the logits
  float attn_dropout = 0.f;      // dropout on the softmax weights (training), 0 = off
  uint64_t dropout_seed = 0;     // mask: a hash of (seed, edge * H + head), same in backward
  // CUDA only: when set, the kernels read the seed from this device address as they run, and
  // dropout_seed is ignored. A CUDA graph captured once then draws a new mask on every replay,
  // provided the graph itself rewrites that address (torch.randint on the device inside it).
  const uint64_t* dropout_seed_device = nullptr;
  // gat_aggregate_backward only, optional: the out that gat_aggregate returned for the same
  // inputs and params, unmodified ([n_rows, H*F], feat's dtype, or float32 with half feat). The
  // fused GPU backward then takes each row's sum_e a_e d_a_e as grad_out[v]·out[v] and walks
  // each row's edges once (float32: 1.2-1.4x faster at heads of 8-16 features on the Reddit
  // shape, about even at 64). Half feat: used only as a float32 out together with
  // softmax_state (t from a rounded out, or against rounded weights, raised grad_er's error 4x);
  // otherwise checked and ignored. The CPU strategies ignore it.
  const Tensor* forward_out = nullptr;
  // Optional, [n_rows, H, 2] float32: each row's softmax state (the logits' max, the sum of
  // exp(s_e - max)). gat_aggregate writes it when the fused GPU kernels run on the given
  // tensors (allocating it when undefined), and leaves it undefined on every other path (CPU,
  // unfused, half rows the kernels take through a float32 copy); gat_aggregate_backward with
  // half feat then recomputes each weight from it in float32 (with a float32 forward_out).
  Tensor* softmax_state = nullptr;
  // Optional, [n_rows, H*F] float32: per row and head, the sum over the edges whose logit is
  // negative before the LeakyReLU of a_e (mask_e feat[u] - out[v]), the part of out that the
  // slope scales in d er: grad_er[v, h] = (slope - 1) grad_out[v, h]·this. Written and left
  // undefined as softmax_state is. gat_aggregate_backward given all three (forward_out,
  // softmax_state and this) takes grad_er from it and walks the edges once, by source,
  // recomputing each weight from the softmax state: no pass over the destination rows and no
  // per-edge scratch (docs/GAT_NOTES.md, "One walk by source").
  Tensor* negative_logit_sums = nullptr;
};
// GAT aggregation, TLPGNN-style fusion when the strategy is gat_fused. For destination v, head h:
//   s_e = leaky_relu(el[u, h] + er[v, h]);  a_e = softmax over v's edges of s_e (dropped out);
//   out[v, h*F:(h+1)*F] = sum_e a_e * feat[u, h*F:(h+1)*F]
// feat [n_cols, H*F], el [n_cols, H], er [n_rows, H]; out [n_rows, H*F]; attn [nnz, H] receives
// the softmax weights before dropout (for backward; pass undefined to let it be allocated).
// float32, or float16/bfloat16 feat (float32 sums, one rounding per result; the fused GPU kernels
// read half rows of F % 4 == 0 themselves) with el and er in float32 (used unrounded) or feat's
// dtype. With half feat, a float32 `out` takes the sums unrounded. The backward's gradients come
// out in feat's dtype, or unrounded where the caller passes float32 outputs (all three) with
// half inputs.
void gat_aggregate(const Graph& g, const Tensor& feat, const Tensor& el, const Tensor& er,
                   const GatParams& params, Tensor& out, Tensor& attn,
                   const OpOptions& options = {});
void gat_aggregate_backward(const Graph& g, const Tensor& feat, const Tensor& el,
                            const Tensor& er, const Tensor& attn, const Tensor& grad_out,
                            const GatParams& params, Tensor& grad_feat, Tensor& grad_el,
                            Tensor& grad_er, const OpOptions& options = {});
// Hands gat_aggregate_backward the transpose of g's structure that it otherwise builds through
// the host on first use and caches with g: `transposed` (values ignored) with perm (int64 [nnz]:
// its edge e is g's edge perm[e]), both on g's device in g's index dtype. For callers that built
// it on the GPU already (the Python package does, for graphs of a CUDA edge_index); a no-op when
// the cache holds one. The arrays must be the true transpose: only shapes and devices are checked.
void provide_attention_transpose(const Graph& g, const Graph& transposed, const Tensor& perm);

// ---- MaxK (MaxK-GNN) -------------------------------------------------------------------------------
// CBSR: the k largest values of each row of an n x F matrix, compactly.
struct Cbsr {
  Tensor data;   // [n, k] f32, in ascending column order within a row
  Tensor index;  // [n, k] u8 when F <= 256, else u16: the column of each kept value
  int64_t F = 0;
  int64_t k = 0;
};
// Keeps exactly k values per row (ties broken by lower column index); k in [1, F].
Cbsr maxk(const Tensor& x, int64_t k, const OpOptions& options = {});
// Gradient w.r.t. x: d_data scattered to the kept positions, zeros elsewhere ([n, F]).
Tensor maxk_backward(const Cbsr& kept, const Tensor& d_data, const OpOptions& options = {});
// The same two into caller-owned outputs, so a training loop reuses its buffers (a GPU tensor's
// allocation and free cost more than these kernels): an undefined output (out.data / dx) is
// allocated; a defined one must already have the result's shape, dtype and device.
void maxk(const Tensor& x, int64_t k, Cbsr& out, const OpOptions& options = {});
void maxk_backward(const Cbsr& kept, const Tensor& d_data, Tensor& dx,
                   const OpOptions& options = {});
// out = A * X with X in CBSR ([n_cols x F] logically); dense out [n_rows, F]. Edge weights from
// `e` ([nnz] or [nnz, 1]); undefined e uses the graph's values, or 1 when it has none.
void cbsr_spgemm(const Graph& g, const Cbsr& x, const Tensor& e, Tensor& out,
                 const OpOptions& options = {});
// d_data = (A^T * d_out) sampled at x.index: d_data[u, j] = sum over edges (v, u) of
// w_e * d_out[v, x.index[u, j]]; d_data [n_cols, k]. Reads A in its stored (row) order.
void cbsr_sspmm(const Graph& g, const Tensor& e, const Tensor& d_out, const Cbsr& x,
                Tensor& d_data, const OpOptions& options = {});

// Floating-point work and minimum bytes moved, as reported by benchmarks.
double spmm_flops(const Graph& g, SpmmOp op, int64_t F);
double sddmm_flops(const Graph& g, SddmmOp op, int64_t F);
// `value_bytes`: bytes per feature and edge value (4 for float32, 2 for float16/bfloat16).
double spmm_bytes(const Graph& g, SpmmOp op, int64_t F, bool edge_feature_wide = false,
                  int value_bytes = 4);
double sddmm_bytes(const Graph& g, SddmmOp op, int64_t F, Target lhs, Target rhs,
                   int value_bytes = 4);

// The schedule `auto` resolves to for this problem (for reports and `spgnn bench`); `dtype` is
// the features' (float32, float16, bfloat16).
Schedule resolve_spmm_schedule(const Graph& g, SpmmOp op, Reduce reduce, int64_t F,
                               const Schedule& requested, DType dtype = DType::f32);
Schedule resolve_sddmm_schedule(const Graph& g, SddmmOp op, int64_t F, const Schedule& requested,
                                DType dtype = DType::f32);

}  // namespace spgnn
