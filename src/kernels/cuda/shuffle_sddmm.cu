// G-Sparse g-SDDMM (§III-C), strategy `shuffle`, edge-parallel on the row-sorted COO graph.
//
// A block owns `edges_per_block` consecutive edges; a warp works on 32/L edges at a time, each
// edge handled by L lanes (the adaptive lane width, a power of two in 2..32). Lane j of an edge
// reads the vectors j, j + L, j + 2L, ... of both operand rows (V = 4/2/1 floats per vector, so
// the L lanes read one contiguous, coalesced stretch per step). dot: each lane sums its products
// in a register, then log2(L) __shfl_xor_sync rounds reduce the edge's L partial sums without
// shared memory; element-wise ops (add, sub, mul, div, copy_lhs, copy_rhs) store their vectors
// directly. lanes=0 picks L adaptively: the smallest power of two giving each lane at most two
// vectors (G-Sparse's Table IV: 32 lanes is not always best — narrow rows waste lanes and
// shuffle rounds, so small F gets small L and more edges per warp); 16-byte half vectors take up
// to four a lane (kernels/shuffle_shape.hpp says why).
// The loop over a warp's edge steps has the same trip count on every lane (edges past the end
// are masked), so the full-warp shuffles stay converged.
// Operands may be float32, float16 or bfloat16 (elem.cuh: 16-byte loads, float32 arithmetic, one
// rounding per stored value).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/elem.cuh"
#include "kernels/cuda/gnnone_common.cuh"
#include "kernels/cuda/spmm_message.cuh"
#include "kernels/shuffle_shape.hpp"

namespace spgnn::detail {

namespace {

using namespace rowpar;

constexpr int kMaxWarpsPerBlock = 8;

enum OperandKind : int { kByCol = 0, kByRow = 1, kByEdge = 2 };  // targets u, v, e

template <class IndexT, class T>
struct ShArgs {
  const IndexT* __restrict__ row;
  const IndexT* __restrict__ col;
  const T* __restrict__ lhs;  // nullptr for copy_rhs
  const T* __restrict__ rhs;  // nullptr for copy_lhs
  T* __restrict__ out;
  int64_t nnz;
  int64_t F;
  int row_bytes;  // F * sizeof(T)
  int64_t edges_per_block;
  int nv;
  int lanes_log2;
  int blocked;
  int lhs_kind, rhs_kind;
  int op;  // SddmmOp
};

__device__ __forceinline__ float combine(int op, float l, float r) {
  switch (op) {
    case static_cast<int>(SddmmOp::add): return l + r;
    case static_cast<int>(SddmmOp::sub): return l - r;
    case static_cast<int>(SddmmOp::mul): return l * r;
    case static_cast<int>(SddmmOp::div): return l / r;
    case static_cast<int>(SddmmOp::copy_lhs): return l;
    default: return r;  // copy_rhs
  }
}

// The operand row of edge e: with int32 indices one signed wide multiply-add of the index and
// the 32-bit row size in bytes (gnnone::row_offset), not a 64-bit product.
template <class IndexT, class T>
__device__ __forceinline__ const T* operand_row(const T* base, int kind, const ShArgs<IndexT, T>& p,
                                                int64_t e) {
  const int64_t off = kind == kByEdge ? gnnone::row_offset(e, p.row_bytes)
                      : gnnone::row_offset(__ldg((kind == kByCol ? p.col : p.row) + e), p.row_bytes);
  return reinterpret_cast<const T*>(reinterpret_cast<const unsigned char*>(base) + off);
}

template <class IndexT, class T, int V, bool kDot>
__global__ void __launch_bounds__(kMaxWarpsPerBlock * 32)
    shuffle_sddmm_kernel(const ShArgs<IndexT, T> p) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int nwarps = blockDim.x >> 5;
  const int L = 1 << p.lanes_log2;
  const int epw = 32 >> p.lanes_log2;  // edges per warp step
  const int grp = lane >> p.lanes_log2;
  const int gl = lane & (L - 1);
  const int64_t block_base = static_cast<int64_t>(blockIdx.x) * p.edges_per_block;
  const int64_t steps = (p.edges_per_block + epw - 1) / epw;
  for (int64_t b = warp; b < steps; b += nwarps) {  // same trip count on all lanes of a warp
    const int64_t k = b * epw + grp;
    const int64_t e = block_base + k;
    const bool active = k < p.edges_per_block && e < p.nnz;
    const T* lrow = nullptr;
    const T* rrow = nullptr;
    if (active) {
      if (p.lhs) lrow = operand_row(p.lhs, p.lhs_kind, p, e);
      if (p.rhs) rrow = operand_row(p.rhs, p.rhs_kind, p, e);
    }
    if constexpr (kDot) {
      float sum = 0.f;
      if (active) {
        // blocked: lane gl takes vectors gl * per .. gl * per + per - 1, so the lanes' i-th
        // loads are per vectors apart and touch every sector of the edge's row at once
        const int per = p.blocked ? (p.nv + L - 1) / L : 1;
        const int j0 = p.blocked ? gl * per : gl, dj = p.blocked ? 1 : L;
        const int j1 = p.blocked ? min(p.nv, j0 + per) : p.nv;
        for (int j = j0; j < j1; j += dj) {
          float a[V], c[V];
          elem::load<V>(a, lrow + static_cast<int64_t>(j) * V);
          elem::load<V>(c, rrow + static_cast<int64_t>(j) * V);
#pragma unroll
          for (int q = 0; q < V; ++q) sum = fmaf(a[q], c[q], sum);
        }
      }
      for (int off = L >> 1; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      if (active && gl == 0) p.out[e] = elem::from_float<T>(sum);
    } else if (active) {
      T* orow = p.out + e * p.F;
      for (int j = gl; j < p.nv; j += L) {
        float a[V], c[V], r[V];
        if (lrow) elem::load<V>(a, lrow + static_cast<int64_t>(j) * V);
        else gnnone::zero_vec(a);
        if (rrow) elem::load<V>(c, rrow + static_cast<int64_t>(j) * V);
        else gnnone::zero_vec(c);
#pragma unroll
        for (int q = 0; q < V; ++q) r[q] = combine(p.op, a[q], c[q]);
        elem::store<V>(orow + static_cast<int64_t>(j) * V, r);
      }
    }
  }
}

template <class IndexT, class T, int V>
void launch(const ShArgs<IndexT, T>& a, bool dot, cudaStream_t st) {
  const int64_t blocks = ceil_div<int64_t>(a.nnz, a.edges_per_block);
  SPGNN_CHECK(blocks <= 0x7fffffff, InvalidArgument, "shuffle sddmm: graph too large for one grid");
  const int64_t warps_needed = ceil_div<int64_t>(a.edges_per_block, 32 >> a.lanes_log2);
  const int warps = static_cast<int>(std::clamp<int64_t>(warps_needed, 1, kMaxWarpsPerBlock));
  const unsigned grid = static_cast<unsigned>(blocks);
  if (dot) shuffle_sddmm_kernel<IndexT, T, V, true><<<grid, warps * 32, 0, st>>>(a);
  else shuffle_sddmm_kernel<IndexT, T, V, false><<<grid, warps * 32, 0, st>>>(a);
  SPGNN_CUDA_CHECK_LAUNCH();
}

int kind_of(Target t) { return t == Target::u ? kByCol : t == Target::v ? kByRow : kByEdge; }

template <class IndexT, class T>
void run(const SddmmProblem& p, const Schedule& s, cudaStream_t st) {
  const Graph& g = *p.g;
  const int64_t lanes = param_or_default(OpKind::sddmm, "shuffle", s, "lanes");
  const int64_t epb = param_or_default(OpKind::sddmm, "shuffle", s, "edges_per_block");
  SPGNN_CHECK(lanes == 0 || (lanes >= 2 && lanes <= 32 && (lanes & (lanes - 1)) == 0),
              InvalidArgument, "shuffle: lanes must be 0 (adaptive) or a power of two in 2..32, got ",
              lanes);
  SPGNN_CHECK(epb >= 1, InvalidArgument, "shuffle: edges_per_block must be >= 1, got ", epb);
  ShArgs<IndexT, T> a{};
  a.row = g.row.data<IndexT>();
  a.col = g.col.data<IndexT>();
  a.lhs = p.uses_lhs() ? static_cast<const T*>(p.lhs->raw()) : nullptr;
  a.rhs = p.uses_rhs() ? static_cast<const T*>(p.rhs->raw()) : nullptr;
  a.out = static_cast<T*>(p.out->raw());
  a.nnz = g.nnz();
  a.F = p.F;
  a.row_bytes = gnnone::row_bytes32(p.F, sizeof(T), "shuffle sddmm");
  a.edges_per_block = epb;
  a.blocked = static_cast<int>(param_or_default(OpKind::sddmm, "shuffle", s, "blocked"));
  a.lhs_kind = kind_of(p.lhs_target);
  a.rhs_kind = kind_of(p.rhs_target);
  a.op = static_cast<int>(p.op);
  const bool dot = p.op == SddmmOp::dot;
  const void* ptrs[3] = {a.lhs, a.rhs, dot ? nullptr : a.out};
  int V = elem::vector_width(p.F, sizeof(T), ptrs, 3);
  if (elem::kIsHalf<T> && V == 4) V = 2;  // as in warp_vertex: one instantiation fewer
  SPGNN_CHECK(p.F / V <= (int64_t{1} << 26), InvalidArgument, "shuffle: feature width ", p.F,
              " is too large");
  a.nv = static_cast<int>(p.F / V);
  a.lanes_log2 =
      lanes ? log2_ceil(lanes) : shuffle::adaptive_lanes_log2(a.nv, elem::kIsHalf<T> && V == 8);
  if constexpr (elem::kIsHalf<T>) {
    switch (V) {
      case 8: launch<IndexT, T, 8>(a, dot, st); break;
      case 2: launch<IndexT, T, 2>(a, dot, st); break;
      default: launch<IndexT, T, 1>(a, dot, st); break;
    }
  } else {
    switch (V) {
      case 4: launch<IndexT, T, 4>(a, dot, st); break;
      case 2: launch<IndexT, T, 2>(a, dot, st); break;
      default: launch<IndexT, T, 1>(a, dot, st); break;
    }
  }
}

}  // namespace

std::string shuffle_sddmm_supports(const SddmmProblem& p) {
  if (!p.g->device().is_cuda())
    return "graph and tensors are on the CPU; shuffle runs on CUDA devices";
  if (p.dtype != DType::f32 && !is_half(p.dtype))
    return std::string("shuffle reads float32, float16 or bfloat16, not ") + dtype_name(p.dtype);
  if (p.g->index_dtype() != DType::i32 && p.g->index_dtype() != DType::i64)
    return "graph index dtype must be int32 or int64";
  return "";
}

void shuffle_sddmm(const SddmmProblem& p, const Schedule& s) {
  const Graph& g = *p.g;
  if (g.nnz() == 0 || p.F == 0) return;
  gnnone::DeviceGuard guard(g.device().index);
  const cudaStream_t st = as_stream(p.stream);
  elem::dispatch(p.dtype, [&](auto t) {
    using T = decltype(t);
    if (g.index_dtype() == DType::i64) run<int64_t, T>(p, s, st);
    else run<int32_t, T>(p, s, st);
  });
}

}  // namespace spgnn::detail
