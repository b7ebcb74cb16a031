// Internal: checked attention problems as handed to one strategy (CPU or CUDA). The front door
// (src/dispatch/attention_ops.cpp) validates shapes, dtypes and devices once; kernels trust these
// fields. Plain C++ (no CUDA types).
#pragma once
#include <cstdint>

#include "spgnn/graph.hpp"
#include "spgnn/tensor.hpp"

namespace spgnn {
struct GatParams;  // spgnn/ops.hpp
}

namespace spgnn::detail {

// edge_softmax: scores, out [nnz, H] (or [nnz] when H = 1).
struct SoftmaxProblem {
  const Graph* g = nullptr;
  const Tensor* scores = nullptr;
  Tensor* out = nullptr;
  int64_t H = 1;
  void* stream = nullptr;
};
// edge_softmax_backward: out, grad_out, grad_scores [nnz, H].
struct SoftmaxBwdProblem {
  const Graph* g = nullptr;
  const Tensor* out = nullptr;
  const Tensor* grad_out = nullptr;
  Tensor* grad_scores = nullptr;
  int64_t H = 1;
  void* stream = nullptr;
};

// gat_aggregate (forward and backward). Widths: feat / out / grad rows hold H heads of F floats.
struct GatProblem {
  const Graph* g = nullptr;
  const Tensor* feat = nullptr;    // [n_cols, H*F]
  const Tensor* el = nullptr;      // [n_cols, H], indexed by the source u = col[e]
  const Tensor* er = nullptr;      // [n_rows, H], indexed by the destination v = row[e]
  Tensor* out = nullptr;           // forward: [n_rows, H*F]
  Tensor* attn = nullptr;          // forward: written [nnz, H]; backward: read
  const Tensor* grad_out = nullptr;  // backward: [n_rows, H*F]
  // backward, optional: the forward's out for these inputs ([n_rows, H*F], float32); the fused
  // GPU backward then takes each row's t = grad_out[v]·out[v] from it (GatParams::forward_out).
  // Half rows use it only with `state`.
  const Tensor* fwd_out = nullptr;
  // optional [n_rows, H, 2] float32, each row's softmax (max, sum) (GatParams::softmax_state):
  // written by the fused GPU forward, read by its half backward with fwd_out
  Tensor* state = nullptr;
  // optional [n_rows, H*F] float32 (GatParams::negative_logit_sums): written by the fused GPU
  // forward; with fwd_out and state, the fused backward's grad_er and its one walk by source
  Tensor* neg = nullptr;
  Tensor* grad_feat = nullptr;     // backward: [n_cols, H*F]
  Tensor* grad_el = nullptr;       // backward: [n_cols, H]
  Tensor* grad_er = nullptr;       // backward: [n_rows, H]
  // Backward on the GPU / OpenMP: the transposed graph (same device) and its edge permutation,
  // so that gradients of sources are gathered per source instead of scattered with atomics.
  const Graph* gt = nullptr;
  const Tensor* perm = nullptr;
  // cpu_ref and cpu only: int64 [nnz] on the host, the edge index each edge's dropout mask is
  // drawn for (null: its own). A row sample of a graph reproduces the whole graph's masks with
  // it (spgnn bench gat checks sampled rows of a dropped-out run this way).
  const Tensor* edge_ids = nullptr;
  int64_t H = 1;
  int64_t F = 0;
  float negative_slope = 0.2f;
  float dropout = 0.f;             // p; 0 = off
  float dropout_scale = 1.f;       // 1 / (1 - p)
  uint64_t seed = 0;
  const uint64_t* seed_ptr = nullptr;  // CUDA: read the seed here when the kernel runs (GatParams)
  void* stream = nullptr;
};

// The float64 oracle (cpu_ref) of gat_aggregate and, when grad_out is defined, of its backward,
// on host float32 tensors, with each edge's dropout mask drawn for edge_ids[e] (int64 [nnz])
// instead of e: a row sample of a graph then sees exactly the masks of a run on the whole graph.
// Applies the front door's checks (src/dispatch/attention_ops.cpp, where it is defined); for
// `spgnn bench gat --attn-dropout`.
void gat_reference_with_edge_ids(const Graph& g, const Tensor& edge_ids, const Tensor& feat,
                                 const Tensor& el, const Tensor& er, const Tensor& grad_out,
                                 const GatParams& params, Tensor& out, Tensor& attn,
                                 Tensor& grad_feat, Tensor& grad_el, Tensor& grad_er);

}  // namespace spgnn::detail
