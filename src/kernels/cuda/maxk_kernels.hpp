// Internal: host entry points of the MaxK-GNN CUDA kernels (maxk.cu, cbsr_spgemm.cu,
// cbsr_sspmm.cu). Plain C++ (no CUDA types) so the front door, compiled by the host compiler, can
// call them. Arguments arrive checked by src/dispatch/maxk_ops.cpp (shapes, dtypes, devices).
#pragma once
#include <cstdint>

#include "spgnn/graph.hpp"
#include "spgnn/ops.hpp"
#include "spgnn/tensor.hpp"

namespace spgnn::detail {

// Tunables of the CBSR kernels, from OpOptions.schedule.params (0 = the launcher's choice).
struct CbsrParams {
  int64_t warps = 0;          // warps per block (1..16); default 8, fewer when F is wide
  int64_t segment = 0;        // edges per warp segment (a row longer than this is split);
                              // default: next power of two >= 4 * average degree, in [64, 4096];
                              // the backward's flat form: edges per warp chunk, default 256
  bool smem_buffer = true;    // false: accumulate straight into global memory (ablation and the
                              // path for F too wide for a shared-memory row buffer)
  int64_t vec = 0;            // values per lane and load (1, 2, 4); 0: the op's default
  int64_t private_rows = -1;  // forward: 1 = one shared-memory row per lane group, plain adds;
                              // 0 = one row per warp, shared-memory atomics; -1: default (1)
  int64_t regs = -1;          // 40: blocks of <= 8 warps at 40 registers per thread (48 warps per
                              // SM); 0 = up to 64; -1: default (40 for the forward on short rows
                              // with scalar lanes)
  int64_t flat = -1;          // backward: 1 = a warp per chunk of `segment` edges of the edge
                              // list, any rows, d_out read from global memory; 0 = a warp per
                              // row segment; -1: default (cbsr::sspmm_flat: 1 when the average
                              // degree is < 64 or k <= 16)
  int64_t stream_edges = -1;  // backward's flat form: 1 = the edge list (columns, rows, weights)
                              // read with streaming loads (evict first); 0 = cached loads;
                              // -1: default (cbsr::flat_stream_edges: 1 at k <= 16)
};

// Top-k of each row of x [n, F] (f32, CUDA) into data [n, k] f32 and index [n, k] (u8 / u16).
void cuda_maxk(const Tensor& x, int64_t k, Tensor& data, Tensor& index, void* stream);
// dx [n, F] = zeros with d_data scattered (added) at index.
void cuda_maxk_backward(const Tensor& d_data, const Tensor& index, int64_t F, Tensor& dx,
                        void* stream);
// out [n_rows, F] = A * X_cbsr; w = edge weights [nnz] or nullptr for 1.
void cuda_cbsr_spgemm(const Graph& g, const float* w, const Cbsr& x, Tensor& out,
                      const CbsrParams& prm, void* stream);
// d_data [n_cols, k] = (A^T * d_out) sampled at x.index; w as above.
void cuda_cbsr_sspmm(const Graph& g, const float* w, const Tensor& d_out, const Cbsr& x,
                     Tensor& d_data, const CbsrParams& prm, void* stream);

}  // namespace spgnn::detail
