// Internal: what the row-parallel CUDA strategies (mergepath_spmm.cu, warp_vertex.cu,
// rowtile_spmm.cu), gnnone_spmm.cu and shuffle_sddmm.cu share: the message a non-zero
// contributes, schedule parameters with the registry's defaults, the feature vector width, the
// per-graph cache and the fill-in of the row-level statistics. Included by .cu files only.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "dispatch/problem.hpp"
#include "kernels/shape_math.hpp"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/gnnone_common.cuh"
#include "spgnn/schedule.hpp"

namespace spgnn::detail::rowpar {

// What a non-zero contributes: copy_u: u[col]; copy_e: e[edge] (row of width F); u_op_e with a
// broadcast edge value (e width 1) or an edge row of width F.
// kUMulEScalar: u_mul_e with a broadcast edge value, u_op_e's multiply fixed at compile time
// (gnnone's cached kernels take it where binop is kMul: without the other ops' code the half
// kernel fits 64 registers without spills; mode_of never returns it).
enum SpmmMode : int { kCopyU = 0, kCopyE = 1, kUOpEScalar = 2, kUOpEWide = 3, kUMulEScalar = 4 };
enum BinOp : int { kMul = 0, kAdd = 1, kSub = 2, kDiv = 3 };

__device__ __forceinline__ float apply(int op, float x, float w) {
  switch (op) {
    case kMul: return x * w;
    case kAdd: return x + w;
    case kSub: return x - w;
    default: return x / w;
  }
}

// acc += one non-zero's message, V features: x holds u's features (unless copy_e), y the edge's
// row (copy_e, wide u_op_e), w the edge's scalar (scalar u_op_e); operands a mode does not use are
// never read. gnnone, warp_vertex and mergepath share it; rowtile keeps its own loop, which
// nvcc 13 scheduled differently through here.
template <int kMode, int V>
__device__ __forceinline__ void add_message(float (&acc)[V], const float (&x)[V],
                                            const float (&y)[V], float w, int binop) {
  if constexpr (kMode == kCopyU || kMode == kCopyE) {
#pragma unroll
    for (int q = 0; q < V; ++q) acc[q] += kMode == kCopyU ? x[q] : y[q];
  } else if constexpr (kMode == kUMulEScalar) {
#pragma unroll
    for (int q = 0; q < V; ++q) acc[q] = fmaf(x[q], w, acc[q]);
  } else if (binop == kMul) {
    // u_mul_e (GCN's weighted sum, the common op) as one fused multiply-add a feature: through
    // apply()'s switch nvcc kept a multiply and an add.
#pragma unroll
    for (int q = 0; q < V; ++q) acc[q] = fmaf(x[q], kMode == kUOpEScalar ? w : y[q], acc[q]);
  } else {
#pragma unroll
    for (int q = 0; q < V; ++q) acc[q] += apply(binop, x[q], kMode == kUOpEScalar ? w : y[q]);
  }
}

inline int mode_of(const SpmmProblem& p) {
  switch (p.op) {
    case SpmmOp::copy_u: return kCopyU;
    case SpmmOp::copy_e: return kCopyE;
    default: return p.e_width == 1 ? kUOpEScalar : kUOpEWide;
  }
}
inline int binop_of(SpmmOp op) {
  return op == SpmmOp::u_add_e ? kAdd : op == SpmmOp::u_sub_e ? kSub
         : op == SpmmOp::u_div_e ? kDiv : kMul;
}

// The SpMM problems every row-parallel strategy accepts (sum and mean of every op; max/min with
// their arg outputs: only warp_vertex on the GPU, and cpu_ref). Never dereferences u/e/out: resolve_*_schedule
// asks before any tensor exists.
inline std::string spmm_supports(const SpmmProblem& p, const char* strategy, bool half = false) {
  if (!p.g->device().is_cuda())
    return std::string("graph and tensors are on the CPU; ") + strategy + " runs on CUDA devices";
  if (p.dtype != DType::f32 && !(half && is_half(p.dtype)))
    return std::string(strategy) + " reads float32 features, not " + dtype_name(p.dtype) +
           " (float16/bfloat16: warp_vertex)";
  if (p.reduce != Reduce::sum && p.reduce != Reduce::mean)
    return std::string("reduce '") + name(p.reduce) + "' is not implemented by " + strategy +
           " (sum and mean are; warp_vertex also runs max and min)";
  if (p.g->index_dtype() != DType::i32 && p.g->index_dtype() != DType::i64)
    return "graph index dtype must be int32 or int64";
  return "";
}

// A schedule parameter, or the default the registry declares for it (so the two never disagree).
inline int64_t param_or_default(OpKind op, const char* strategy, const Schedule& s,
                                const char* name) {
  auto it = s.params.find(name);
  if (it != s.params.end()) return it->second;
  for (const auto& spec : find_strategy(op, strategy).params)
    if (spec.name == name) return spec.default_value;
  throw InvalidArgument(std::string(strategy) + ": registry declares no parameter '" + name + "'");
}

// Widest vector (4, 2 or 1 floats) that divides F and keeps every pointer aligned.
inline int vector_width(int64_t F, const void* const* ptrs, int nptrs) {
  int V = F % 4 == 0 ? 4 : F % 2 == 0 ? 2 : 1;
  for (int i = 0; i < nptrs; ++i)
    while (V > 1 && !gnnone::aligned_to(ptrs[i], V * 4)) V /= 2;
  return V;
}


// Per-structure data cached with the graph (Graph::cache). The key carries the index dtype and
// the address of rowptr: a copy of a Graph whose arrays were replaced (astype, a new build)
// still shares the cache object, and must not see items derived from the old arrays.
inline std::string cache_key(const Graph& g, const std::string& what) {
  return what + "@" + dtype_name(g.index_dtype()) + ":" +
         std::to_string(reinterpret_cast<uintptr_t>(g.rowptr.raw())) + ":" +
         std::to_string(g.n_rows) + ":" + std::to_string(g.nnz());
}
template <class T, class Make>
std::shared_ptr<T> cached(const Graph& g, const std::string& key, Make&& make) {
  std::lock_guard<std::mutex> lock(g.cache->mutex);
  auto& slot = g.cache->items[key];
  if (!slot) slot = std::shared_ptr<T>(make());
  return std::static_pointer_cast<T>(slot);
}

// An event recorded after a cached item was built on some stream: a later call on another
// stream waits for it on the device (no host synchronisation).
struct BuiltOn {
  cudaEvent_t event = nullptr;
  BuiltOn() = default;
  BuiltOn(const BuiltOn&) = delete;
  BuiltOn& operator=(const BuiltOn&) = delete;
  ~BuiltOn() {
    if (event) cudaEventDestroy(event);
  }
  void record(cudaStream_t st) {
    SPGNN_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    SPGNN_CUDA_CHECK(cudaEventRecord(event, st));
  }
  void wait(cudaStream_t st) const {
    if (!event) return;
    if (stream_capturing(st)) {
      // A CUDA graph cannot depend on work outside its capture. The build ran before the capture
      // began (a capture follows an uncaptured warm-up step), so once it has finished there is
      // nothing to wait for; one still running becomes the graph's wait on an external event.
      CaptureRelaxed relaxed;
      const cudaError_t done = cudaEventQuery(event);
      if (done == cudaSuccess) return;
      if (done != cudaErrorNotReady) SPGNN_CUDA_CHECK(done);
      SPGNN_CUDA_CHECK(cudaStreamWaitEvent(st, event, cudaEventWaitExternal));
      return;
    }
    SPGNN_CUDA_CHECK(cudaStreamWaitEvent(st, event, 0));
  }
};

}  // namespace spgnn::detail::rowpar
