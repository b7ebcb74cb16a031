// G-Sparse g-SpMM (§III-B), strategy `rowtile`, on the CSR view.
//
// A block computes an output tile of m_tile rows x n_tile features (grid: rows x feature tiles).
// Each row of the tile belongs to a team of T = n_tile / reg_tile lanes inside one warp; lane t
// of the team owns the reg_tile features t, t + T, t + 2T, ... of the tile (1-D *strided*
// register tiling: the team's loads of one neighbour row stay contiguous and coalesced, and the
// column index read once into a register serves reg_tile loads).
// Non-zero tiles: the team stages nnz_tile column indices (and scalar edge values) of its row in
// shared memory with coalesced loads, then every lane walks them from shared memory (2-D shared
// memory tiling with the buffer bound nnz_tile, not the whole row).
// Row swizzle (Sputnik's load balancing): blocks take rows in order of decreasing length, so the
// longest rows start first and the rows of one block have similar lengths (little intra-warp
// imbalance). The order is computed once per graph on the host (a stable sort of the degrees)
// and cached in Graph::cache; swizzle=0 keeps the natural order (ablation).
// Every output element is written exactly once with a plain store: no atomics, no zero-fill.
// Lanes are limited to 32 per team (teams synchronise with __syncwarp): when
// n_tile / reg_tile > 32, the register tile grows to n_tile / 32.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/gnnone_common.cuh"
#include "kernels/cuda/spmm_message.cuh"

namespace spgnn::detail {

namespace {

using namespace rowpar;

template <class IndexT>
struct RtArgs {
  const IndexT* __restrict__ rowptr;
  const IndexT* __restrict__ col;
  const IndexT* __restrict__ order;  // swizzled row order, or nullptr for the natural one
  const float* __restrict__ u;
  const float* __restrict__ e;
  float* __restrict__ out;
  int64_t n;
  int64_t F;
  int m_tile;
  int n_tile;
  int nnz_tile;
  int lanes_log2;  // log2(T)
  int binop;
  bool mean;
};

template <class IndexT, int R, int kMode>
__global__ void __launch_bounds__(1024) rowtile_spmm_kernel(const RtArgs<IndexT> p) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int T = 1 << p.lanes_log2;
  const int team = threadIdx.x >> p.lanes_log2;
  const int tl = threadIdx.x & (T - 1);
  const int64_t slot = static_cast<int64_t>(blockIdx.x) * p.m_tile + team;
  if (slot >= p.n) return;  // whole teams only; teams never wait for each other
  const int64_t row = p.order ? static_cast<int64_t>(p.order[slot]) : slot;
  const int lane = threadIdx.x & 31;
  const unsigned tmask = T == 32 ? 0xffffffffu : ((1u << T) - 1u) << (lane & ~(T - 1));
  IndexT* s_col = reinterpret_cast<IndexT*>(smem) + team * p.nnz_tile;
  float* s_val = reinterpret_cast<float*>(reinterpret_cast<IndexT*>(smem) +
                                          static_cast<int64_t>(p.m_tile) * p.nnz_tile) +
                 team * p.nnz_tile;

  const int64_t f0 = static_cast<int64_t>(blockIdx.y) * p.n_tile + tl;
  const int64_t beg = __ldg(p.rowptr + row), end = __ldg(p.rowptr + row + 1);
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;

  for (int64_t base = beg; base < end; base += p.nnz_tile) {
    const int cnt = static_cast<int>(min(static_cast<int64_t>(p.nnz_tile), end - base));
    __syncwarp(tmask);  // the previous tile has been read by every lane of the team
    for (int k = tl; k < cnt; k += T) {
      s_col[k] = __ldg(p.col + base + k);
      if constexpr (kMode == kUOpEScalar) s_val[k] = __ldg(p.e + base + k);
    }
    __syncwarp(tmask);
#pragma unroll 2
    for (int k = 0; k < cnt; ++k) {
      const int64_t c = static_cast<int64_t>(s_col[k]);
      float w = 0.f;
      if constexpr (kMode == kUOpEScalar) w = s_val[k];
      const float* urow = p.u + c * p.F;
      const float* erow = p.e + (base + k) * p.F;
      float x[R], y[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int64_t f = f0 + static_cast<int64_t>(r) * T;
        const bool ok = f < p.F;
        if constexpr (kMode != kCopyE) x[r] = ok ? __ldg(urow + f) : 0.f;
        if constexpr (kMode == kCopyE || kMode == kUOpEWide) y[r] = ok ? __ldg(erow + f) : 0.f;
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if constexpr (kMode == kCopyU) acc[r] += x[r];
        else if constexpr (kMode == kCopyE) acc[r] += y[r];
        else if constexpr (kMode == kUOpEScalar) acc[r] += apply(p.binop, x[r], w);
        else acc[r] += apply(p.binop, x[r], y[r]);
      }
    }
  }
  const float scale = (p.mean && end > beg) ? 1.f / static_cast<float>(end - beg) : 1.f;
  float* orow = p.out + row * p.F;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t f = f0 + static_cast<int64_t>(r) * T;
    if (f < p.F) orow[f] = acc[r] * scale;
  }
}

// The swizzled row order of a graph: row ids sorted by decreasing degree (ties by id).
struct RowOrder : BuiltOn {
  DeviceBuffer order;
};

template <class IndexT>
RowOrder* make_row_order(const Graph& g, cudaStream_t st) {
  const std::vector<IndexT> rp = g.rowptr.to_vector<IndexT>();
  std::vector<IndexT> idx(static_cast<size_t>(g.n_rows));
  std::iota(idx.begin(), idx.end(), IndexT(0));
  std::stable_sort(idx.begin(), idx.end(), [&](IndexT a, IndexT b) {
    return rp[a + 1] - rp[a] > rp[b + 1] - rp[b];
  });
  auto* o = new RowOrder();
  o->order = DeviceBuffer(idx.size() * sizeof(IndexT));
  // `idx` dies with this function: a synchronous copy (this runs once per graph).
  SPGNN_CUDA_CHECK(cudaMemcpy(o->order.get(), idx.data(), idx.size() * sizeof(IndexT),
                              cudaMemcpyHostToDevice));
  o->record(st);
  return o;
}

template <class IndexT, int R>
void launch_mode(const RtArgs<IndexT>& a, int mode, cudaStream_t st) {
  const dim3 grid(static_cast<unsigned>(ceil_div<int64_t>(a.n, a.m_tile)),
                  static_cast<unsigned>(ceil_div<int64_t>(a.F, a.n_tile)));
  const unsigned threads = static_cast<unsigned>(a.m_tile) << a.lanes_log2;
  const size_t smem = static_cast<size_t>(a.m_tile) * a.nnz_tile * (sizeof(IndexT) + sizeof(float));
  auto go = [&](auto kernel) {
    gnnone::allow_smem(kernel, smem);
    kernel<<<grid, threads, smem, st>>>(a);
    SPGNN_CUDA_CHECK_LAUNCH();
  };
  switch (mode) {
    case kCopyU: go(rowtile_spmm_kernel<IndexT, R, kCopyU>); break;
    case kCopyE: go(rowtile_spmm_kernel<IndexT, R, kCopyE>); break;
    case kUOpEScalar: go(rowtile_spmm_kernel<IndexT, R, kUOpEScalar>); break;
    default: go(rowtile_spmm_kernel<IndexT, R, kUOpEWide>); break;
  }
}

template <class IndexT>
void run(const SpmmProblem& p, const Schedule& s, cudaStream_t st) {
  const Graph& g = *p.g;
  auto prm = [&](const char* k) { return param_or_default(OpKind::spmm, "rowtile", s, k); };
  const int64_t m_tile = prm("m_tile"), n_tile = prm("n_tile"), nnz_tile = prm("nnz_tile");
  int64_t reg_tile = prm("reg_tile");
  const bool swizzle = prm("swizzle") != 0;
  auto pow2 = [](int64_t v) { return v > 0 && (v & (v - 1)) == 0; };
  SPGNN_CHECK(pow2(n_tile) && n_tile <= 1024, InvalidArgument,
              "rowtile: n_tile must be a power of two <= 1024, got ", n_tile);
  SPGNN_CHECK(reg_tile == 1 || reg_tile == 2 || reg_tile == 4 || reg_tile == 8, InvalidArgument,
              "rowtile: reg_tile must be 1, 2, 4 or 8, got ", reg_tile);
  SPGNN_CHECK(nnz_tile >= 1 && nnz_tile <= 4096, InvalidArgument,
              "rowtile: nnz_tile must be in 1..4096, got ", nnz_tile);
  reg_tile = std::max(reg_tile, n_tile / 32);
  SPGNN_CHECK(reg_tile <= 8, InvalidArgument, "rowtile: n_tile ", n_tile,
              " needs more than 8 registers per lane at 32 lanes; use n_tile <= 256");
  const int64_t lanes = std::max<int64_t>(1, n_tile / reg_tile);
  SPGNN_CHECK(m_tile >= 1 && m_tile * lanes <= 1024, InvalidArgument, "rowtile: m_tile ", m_tile,
              " x ", lanes, " lanes exceeds 1024 threads per block");
  RtArgs<IndexT> a{};
  a.rowptr = g.rowptr.data<IndexT>();
  a.col = g.col.data<IndexT>();
  a.u = p.uses_u() ? p.u->data<float>() : nullptr;
  a.e = p.uses_e() ? p.e->data<float>() : nullptr;
  a.out = p.out->data<float>();
  a.n = g.n_rows;
  a.F = p.F;
  a.m_tile = static_cast<int>(m_tile);
  a.n_tile = static_cast<int>(lanes * reg_tile);
  a.nnz_tile = static_cast<int>(nnz_tile);
  a.lanes_log2 = log2_ceil(lanes);
  a.binop = binop_of(p.op);
  a.mean = p.reduce == Reduce::mean;
  SPGNN_CHECK(ceil_div<int64_t>(a.n, a.m_tile) <= 0x7fffffff &&
                  ceil_div<int64_t>(a.F, a.n_tile) <= 65535,
              InvalidArgument, "rowtile: problem too large for one grid");
  if (swizzle && g.nnz() > 0) {
    auto order = cached<RowOrder>(g, cache_key(g, "rowtile.order"),
                                  [&] { return make_row_order<IndexT>(g, st); });
    order->wait(st);
    a.order = static_cast<const IndexT*>(order->order.get());
  }
  const int mode = mode_of(p);
  switch (reg_tile) {
    case 1: launch_mode<IndexT, 1>(a, mode, st); break;
    case 2: launch_mode<IndexT, 2>(a, mode, st); break;
    case 4: launch_mode<IndexT, 4>(a, mode, st); break;
    default: launch_mode<IndexT, 8>(a, mode, st); break;
  }
}

}  // namespace

std::string rowtile_spmm_supports(const SpmmProblem& p) { return spmm_supports(p, "rowtile"); }

void rowtile_spmm(const SpmmProblem& p, const Schedule& s) {
  const Graph& g = *p.g;
  gnnone::DeviceGuard guard(g.device().index);
  const cudaStream_t st = as_stream(p.stream);
  if (g.n_rows == 0 || p.F == 0) return;
  if (g.index_dtype() == DType::i64) run<int64_t>(p, s, st);
  else run<int32_t>(p, s, st);
}

}  // namespace spgnn::detail
