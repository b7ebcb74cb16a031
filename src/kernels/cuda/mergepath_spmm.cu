// MergePath-SpMM (ISPASS'23, §III), strategy `mergepath`, on the CSR view.
//
// The merge path walks rowptr[1..n] (row ends) against the non-zero indices 0..nnz-1: state
// (x, y) means rows < x are finished and non-zeros < y are consumed, rowptr[x] <= y <=
// rowptr[x+1]. The path has n + nnz items (finishing a row is an item, so runs of empty rows
// cost work too); merge-path "thread" t gets items [t*cost, (t+1)*cost), its start and end
// states found by a binary search along the diagonals (Algorithm 1). Every thread does the same
// amount of work however skewed the degrees are: a hub row is cut into many threads.
//
// Writes, without any serial fix-up: a thread stores each row it both starts and finishes with a
// plain store; the rows cut by its start or end state (at most two per thread) are added with
// atomics. Exactly the cut rows receive atomics only, so a small kernel zeroes just those rows
// (from the schedule) instead of the whole output.
//
// Thread to lane mapping (§III-B): a merge-path thread needs G = next_pow2(F/V) lanes (V floats
// per lane, float4 when F % 4 == 0): when G < 32, 32/G threads share a warp; when F/V > 32, the
// thread is replicated across ceil(F/V / 32) warps, each owning 32 vectors of the row.
//
// Cost: `cost` items per thread (the paper's tunable: low = more parallelism and more atomics,
// high = fewer atomics). When n + nnz is too small to fill the GPU at that cost, the cost is
// lowered until the grid has kMinWarps warps (the paper's minimum thread count).
//
// Schedule (§III-C "offline vs online"): the T+1 boundary states are computed on the GPU by one
// search kernel and cached in Graph::cache per (index type, effective cost), so later calls on
// the same graph launch only the zero and SpMM kernels (offline). `online=1` re-runs the search
// on every call, which is the paper's online setting; comparing the two in `spgnn bench` gives
// the scheduling cost.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/gnnone_common.cuh"
#include "kernels/cuda/spmm_message.cuh"

namespace spgnn::detail {

namespace {

using namespace rowpar;

constexpr int kUnroll = 4;
// Fewest warps worth launching (about two waves of one warp per SM scheduler slot on an H100):
// below it the cost is lowered, trading atomics for parallelism.
constexpr int64_t kMinWarps = 8192;
constexpr int kWarps = 4;  // warps per block of the SpMM kernel

// ---- schedule -----------------------------------------------------------------------------------

template <class IndexT>
__global__ void merge_path_search_kernel(const IndexT* __restrict__ rowptr, int64_t n,
                                         int64_t nnz, int64_t cost, int64_t threads,
                                         IndexT* __restrict__ xs, IndexT* __restrict__ ys) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b > threads) return;
  const int64_t total = n + nnz;
  const int64_t d = min(b * cost, total);
  // First x on diagonal d whose row end lies beyond the non-zero at d - x - 1 (CUB's
  // MergePathSearch with A = rowptr + 1, B = counting iterator).
  int64_t lo = max(d - nnz, int64_t{0}), hi = min(d, n);
  while (lo < hi) {
    const int64_t mid = (lo + hi) >> 1;
    if (static_cast<int64_t>(rowptr[mid + 1]) <= d - mid - 1) lo = mid + 1;
    else hi = mid;
  }
  xs[b] = static_cast<IndexT>(lo);
  ys[b] = static_cast<IndexT>(d - lo);
}

struct MergePathPlan : BuiltOn {
  DeviceBuffer states;  // IndexT xs[threads + 1], then IndexT ys[threads + 1]
  int64_t threads = 0;
  int64_t cost = 0;
};

template <class IndexT>
void compute_schedule(const Graph& g, MergePathPlan& s, cudaStream_t st) {
  const int64_t n1 = s.threads + 1;
  IndexT* xs = static_cast<IndexT*>(s.states.get());
  const int blocks = static_cast<int>(ceil_div<int64_t>(n1, 256));
  merge_path_search_kernel<IndexT><<<blocks, 256, 0, st>>>(
      g.rowptr.data<IndexT>(), g.n_rows, g.nnz(), s.cost, s.threads, xs, xs + n1);
  SPGNN_CUDA_CHECK_LAUNCH();
}

// ---- zero-fill of the cut rows ------------------------------------------------------------------

// One warp per interior boundary: a boundary (x, y) with rowptr[x] < y cuts row x, which then
// receives only atomics.
template <class IndexT>
__global__ void zero_cut_rows_kernel(const IndexT* __restrict__ rowptr,
                                     const IndexT* __restrict__ xs, const IndexT* __restrict__ ys,
                                     int64_t threads, int64_t n, float* __restrict__ out,
                                     int64_t F) {
  const int lane = threadIdx.x & 31;
  const int64_t b = 1 + static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (b >= threads) return;
  const int64_t x = xs[b];
  if (x >= n || static_cast<int64_t>(rowptr[x]) >= static_cast<int64_t>(ys[b])) return;
  float* o = out + x * F;
  for (int64_t f = lane; f < F; f += 32) o[f] = 0.f;
}

// ---- the SpMM kernel ----------------------------------------------------------------------------

template <class IndexT>
struct MpArgs {
  const IndexT* __restrict__ rowptr;
  const IndexT* __restrict__ col;
  const IndexT* __restrict__ xs;
  const IndexT* __restrict__ ys;
  const float* __restrict__ u;
  const float* __restrict__ e;
  float* __restrict__ out;
  int64_t n;
  int64_t F;
  int64_t threads;  // merge-path threads T
  int nv;
  int g_log2;
  int passes;  // warps a thread is replicated over (F/V > 32)
  int binop;
  bool mean;
};

template <class IndexT, int V, int kMode>
__global__ void __launch_bounds__(kWarps * 32) mergepath_spmm_kernel(const MpArgs<IndexT> p) {
  const int lane = threadIdx.x & 31;
  const int G = 1 << p.g_log2;
  const int grp = lane >> p.g_log2;
  const int gl = lane & (G - 1);
  const int64_t w = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int64_t t = (w / p.passes) * (32 >> p.g_log2) + grp;
  if (t >= p.threads) return;  // no warp-wide collectives below
  const int pass = static_cast<int>(w % p.passes);
  const int vi = pass * G + gl;
  if (vi >= p.nv) return;
  const int64_t foff = static_cast<int64_t>(vi) * V;

  const int64_t x0 = p.xs[t], y0 = p.ys[t], x1 = p.xs[t + 1], y1 = p.ys[t + 1];
  int64_t x = x0, y = y0;
  float acc[V];
  // Folds non-zeros [y, stop) into acc, kUnroll gathers in flight.
  auto consume = [&](int64_t stop) {
    gnnone::zero_vec(acc);
    auto fold = [&](int64_t k) {
      float xv[V], yv[V];
      if constexpr (kMode != kCopyE)
        gnnone::ldg_vec<V>(xv, p.u + static_cast<int64_t>(__ldg(p.col + k)) * p.F + foff);
      if constexpr (kMode == kCopyE || kMode == kUOpEWide)
        gnnone::ldg_vec<V>(yv, p.e + k * p.F + foff);
      float wv = 0.f;
      if constexpr (kMode == kUOpEScalar) wv = __ldg(p.e + k);
      add_message<kMode>(acc, xv, yv, wv, p.binop);
    };
    for (; y + kUnroll <= stop; y += kUnroll) {
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) fold(y + k);
    }
    for (; y < stop; ++y) fold(y);
  };
  auto emit = [&](int64_t row, int64_t deg, bool atomic) {
    if (p.mean && deg > 0) {
      const float s = 1.f / static_cast<float>(deg);
#pragma unroll
      for (int q = 0; q < V; ++q) acc[q] *= s;
    }
    float* o = p.out + row * p.F + foff;
    if (atomic) gnnone::atomic_add_vec<V>(o, acc);
    else gnnone::st_vec<V>(o, acc);
  };

  // Rows this thread finishes. The first one was started by an earlier thread when y0 lies
  // inside it (a cut row: atomics, and only when this thread holds some of its non-zeros).
  IndexT row_start = __ldg(p.rowptr + x);
  for (; x < x1; ++x) {
    const IndexT row_end = __ldg(p.rowptr + x + 1);
    const bool cut = x == x0 && y0 > static_cast<int64_t>(row_start);
    const bool any = y < static_cast<int64_t>(row_end);
    consume(row_end);
    if (!cut) emit(x, row_end - row_start, false);
    else if (any) emit(x, row_end - row_start, true);
    row_start = row_end;
  }
  // The row this thread starts but a later thread finishes.
  if (x < p.n && y < y1) {
    const int64_t deg = static_cast<int64_t>(__ldg(p.rowptr + x + 1)) - row_start;
    consume(y1);
    emit(x, deg, true);
  }
}

template <class IndexT, int V, int kMode>
void launch(const MpArgs<IndexT>& a, cudaStream_t st) {
  const int64_t warps = ceil_div<int64_t>(a.threads, 32 >> a.g_log2) * a.passes;
  const int64_t blocks = ceil_div<int64_t>(warps, kWarps);
  SPGNN_CHECK(blocks <= 0x7fffffff, InvalidArgument, "mergepath: graph too large for one grid");
  mergepath_spmm_kernel<IndexT, V, kMode><<<static_cast<unsigned>(blocks), kWarps * 32, 0, st>>>(a);
  SPGNN_CUDA_CHECK_LAUNCH();
}

template <class IndexT, int V>
void launch_mode(const MpArgs<IndexT>& a, int mode, cudaStream_t st) {
  switch (mode) {
    case kCopyU: launch<IndexT, V, kCopyU>(a, st); break;
    case kCopyE: launch<IndexT, V, kCopyE>(a, st); break;
    case kUOpEScalar: launch<IndexT, V, kUOpEScalar>(a, st); break;
    default: launch<IndexT, V, kUOpEWide>(a, st); break;
  }
}

template <class IndexT>
void run(const SpmmProblem& p, const Schedule& s, cudaStream_t st) {
  const Graph& g = *p.g;
  const int64_t cost = param_or_default(OpKind::spmm, "mergepath", s, "cost");
  const bool online = param_or_default(OpKind::spmm, "mergepath", s, "online") != 0;
  SPGNN_CHECK(cost >= 1, InvalidArgument, "mergepath: cost must be >= 1, got ", cost);
  MpArgs<IndexT> a{};
  a.rowptr = g.rowptr.data<IndexT>();
  a.col = g.col.data<IndexT>();
  a.u = p.uses_u() ? p.u->data<float>() : nullptr;
  a.e = p.uses_e() ? p.e->data<float>() : nullptr;
  a.out = p.out->data<float>();
  a.n = g.n_rows;
  a.F = p.F;
  const int mode = mode_of(p);
  const void* ptrs[3] = {a.u, a.out, mode == kUOpEScalar ? nullptr : a.e};
  const int V = vector_width(p.F, ptrs, 3);
  SPGNN_CHECK(p.F / V <= (int64_t{1} << 26), InvalidArgument, "mergepath: feature width ", p.F,
              " is too large");
  a.nv = static_cast<int>(p.F / V);
  a.g_log2 = std::min(5, log2_ceil(a.nv));
  a.passes = static_cast<int>(ceil_div<int64_t>(a.nv, 32));
  a.binop = binop_of(p.op);
  a.mean = p.reduce == Reduce::mean;

  const int64_t total = g.n_rows + g.nnz();
  const int64_t min_threads =
      std::max<int64_t>(1, kMinWarps * (32 >> a.g_log2) / a.passes);
  const int64_t eff_cost = std::clamp<int64_t>(ceil_div<int64_t>(total, min_threads), 1, cost);
  const int64_t threads = ceil_div<int64_t>(total, eff_cost);
  bool fresh = false;
  auto sched = cached<MergePathPlan>(g, cache_key(g, "mergepath.cost=" + std::to_string(eff_cost)),
                                 [&] {
                                   auto* m = new MergePathPlan();
                                   m->threads = threads;
                                   m->cost = eff_cost;
                                   m->states = DeviceBuffer(sizeof(IndexT) * 2 * (threads + 1));
                                   compute_schedule<IndexT>(g, *m, st);
                                   m->record(st);
                                   fresh = true;
                                   return m;
                                 });
  if (!fresh) {
    if (online) compute_schedule<IndexT>(g, *sched, st);  // the same bytes, recomputed
    sched->wait(st);
  }
  a.threads = sched->threads;
  a.xs = static_cast<const IndexT*>(sched->states.get());
  a.ys = a.xs + (sched->threads + 1);

  if (sched->threads > 1) {
    const int64_t zb = ceil_div<int64_t>(sched->threads - 1, 8);
    zero_cut_rows_kernel<IndexT><<<static_cast<unsigned>(zb), 256, 0, st>>>(
        a.rowptr, a.xs, a.ys, sched->threads, a.n, a.out, a.F);
    SPGNN_CUDA_CHECK_LAUNCH();
  }
  switch (V) {
    case 4: launch_mode<IndexT, 4>(a, mode, st); break;
    case 2: launch_mode<IndexT, 2>(a, mode, st); break;
    default: launch_mode<IndexT, 1>(a, mode, st); break;
  }
}

}  // namespace

std::string mergepath_spmm_supports(const SpmmProblem& p) {
  return spmm_supports(p, "mergepath");
}

void mergepath_spmm(const SpmmProblem& p, const Schedule& s) {
  const Graph& g = *p.g;
  gnnone::DeviceGuard guard(g.device().index);
  const cudaStream_t st = as_stream(p.stream);
  if (g.n_rows == 0 || p.F == 0) return;
  if (g.index_dtype() == DType::i64) run<int64_t>(p, s, st);
  else run<int32_t>(p, s, st);
}

}  // namespace spgnn::detail
