// Internal: checked attention problems as handed to one strategy (CPU or CUDA). The front door
// (src/dispatch/attention_ops.cpp) validates shapes, dtypes and devices once; kernels trust these
// fields. Plain C++ (no CUDA types).
#pragma once
#include <cstdint>

#include "spgnn/graph.hpp"
#include "spgnn/tensor.hpp"

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
  Tensor* grad_feat = nullptr;     // backward: [n_cols, H*F]
  Tensor* grad_el = nullptr;       // backward: [n_cols, H]
  Tensor* grad_er = nullptr;       // backward: [n_rows, H]
  // Backward on the GPU / OpenMP: the transposed graph (same device) and its edge permutation,
  // so that gradients of sources are gathered per source instead of scattered with atomics.
  const Graph* gt = nullptr;
  const Tensor* perm = nullptr;
  int64_t H = 1;
  int64_t F = 0;
  float negative_slope = 0.2f;
  float dropout = 0.f;             // p; 0 = off
  float dropout_scale = 1.f;       // 1 / (1 - p)
  uint64_t seed = 0;
  const uint64_t* seed_ptr = nullptr;  // CUDA: read the seed here when the kernel runs (GatParams)
  void* stream = nullptr;
};

}  // namespace spgnn::detail
