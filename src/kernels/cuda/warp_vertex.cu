// TLPGNN vertex-parallel SpMM (HPDC'22, §4-6), strategy `warp_vertex`, on the CSR view.
//
// One warp per destination vertex, lanes over features ("feature parallelism": consecutive
// lanes read consecutive features of one neighbour, so every gather is one coalesced row). The
// row bounds and the running result live in registers for the whole row, so each output row is
// written once, with a plain store: no atomics, no zero-fill pass. When F needs fewer than 32
// lanes (F/V < 32 vectors of V floats), a warp is split into groups of G = next_pow2(F/V) lanes
// and each group owns one vertex — otherwise 32 - G lanes would idle on every load. Rows wider
// than 32 vectors are walked in passes of 32 vectors; the row's column indices are re-read per
// pass (from L1), which costs far less than holding 8 accumulators per lane at F = 1024.
// The group loads G column indices (and scalar edge values) of its row at once, coalesced, and
// broadcasts them lane by lane with __shfl_sync, so the gathers of 4 neighbours are in flight
// together.
//
// Work assignment (§6), `assign`: hardware = one group per vertex, a grid as large as the graph,
// the block scheduler balancing; software = a persistent grid whose warps take `step` warp-tasks
// (32/G vertices each) at a time from a global atomic counter until the pool is empty. auto
// (assign=0) follows the paper's discriminant: software when n > 1M (hardware would launch too
// many blocks) or the average degree is > 50 (a vertex's work dwarfs the atomic). (An
// edge-balanced third assignment, each group taking the whole rows that start in its slice of
// ~L non-zeros, was tried twice and measured slower: on R-MAT scale 21 in float16, 3.39 vs 2.73
// ms at F = 64; and with gnnone's stage 1 (128 non-zeros cached per warp, the last row finished
// through global loads) in bfloat16 on the H200, 5.0 vs 2.7 ms at F = 64 and 9.4 vs 6.2 at F =
// 256 (kron21, heavy rows split at 128 in both), 7.5 vs 4.0 ms on er:232965:489 at F = 64. A
// group idles while another in its warp walks a row that crosses the sub-slices, and a warp's
// loads wait for the longest; docs/GPU_NOTES.md.)
//
// Heavy rows (`split`): a row with more non-zeros than `split` would keep one group busy long after
// the rest of the grid is done (on R-MAT scale 21 one hub row made a float16 SpMM at F = 64 take
// 21 ms against gnnone's 1.4 ms in float32). Such rows go to a second kernel, one block per row:
// its groups walk equal slices of the row, and the block sums their float32 partials through
// shared memory in a fixed order before one rounding to the output (deterministic, no atomics).
// The heavy rows are listed once per graph and threshold (host side, longest first, cached with
// the graph). split = 0 (auto): a quarter of one group's average share of the non-zeros under
// the persistent grid, or 8 times the average degree when that is less, at least 128; split = -1
// never splits. The degree bound matters on skewed graphs of low average degree, where the share
// is large and rows of a few hundred non-zeros still stall their warp. On kron21 (average 15.5,
// bound 128; H200, one run) against split 512 and 2048: bfloat16 F = 64 2.05 / 2.69 / 3.48 ms,
// F = 256 4.96 / 5.74 / 6.83 ms; on the products shape (average 54, bound 436) 6.11 / 6.12 /
// 8.45 ms at F = 64. On er:232965:246 symmetrised (average 491) 128 was slower than the share
// (4.50 vs 3.98 ms, bfloat16 F = 64), and the bound leaves the share there. docs/GPU_NOTES.md.
//
// max and min (with the arg outputs the backward needs) run in a separate, simpler kernel below.
//
// Features may be float32, float16 or bfloat16 (elem.cuh): a lane loads V elements at once (16
// bytes: 4 floats or 8 halves), accumulates in float32 and rounds once when it stores the row.
// Scalar edge weights are float32 (the graph's own values) or the features' dtype.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/elem.cuh"
#include "kernels/cuda/gnnone_common.cuh"
#include "kernels/cuda/spmm_message.cuh"
#include "dispatch/registry.hpp"

namespace spgnn::detail {

namespace {

using namespace rowpar;

// The paper's discriminant between hardware and software assignment.
constexpr int64_t kSoftwareMinVertices = 1000000;
constexpr double kSoftwareMinAvgDegree = 50.0;
// Resident warps per SM on sm_80/sm_90: the persistent grid of software assignment fills them.
constexpr int kWarpsPerSm = 64;
constexpr int kUnroll = 4;
// Threads per block of the heavy-row kernel, the smallest automatic split threshold, and the
// average degrees above which the automatic threshold splits a row (see "Heavy rows").
constexpr int kHeavyThreads = 256;
constexpr int64_t kMinAutoSplit = 128;
constexpr double kAutoSplitAvgDegrees = 8.0;

// A scalar edge weight: float32, or the features' dtype (a warp-uniform branch).
template <class T>
__device__ __forceinline__ float weight(const void* w, bool w_is_t, int64_t k) {
  return w_is_t ? elem::ldg1(static_cast<const T*>(w) + k) : __ldg(static_cast<const float*>(w) + k);
}

template <class IndexT, class T>
struct WvArgs {
  const IndexT* __restrict__ rowptr;
  const IndexT* __restrict__ col;
  const T* __restrict__ u;
  const T* __restrict__ e;  // edge rows [nnz, F] (copy_e, u_op_e with wide e)
  const void* w;            // scalar edge weights [nnz] (u_op_e with e of width 1)
  T* __restrict__ out;
  unsigned long long* counter;  // software assignment: next free warp-task
  int64_t n;
  int64_t F;
  int64_t n_tasks;  // warp-tasks = ceil(n / groups per warp)
  const int64_t* __restrict__ heavy;  // rows with more than `split` non-zeros (split > 0)
  int64_t split;    // 0: no row is skipped by the vertex kernel
  int nv;
  int g_log2;
  int passes;
  int binop;
  int step;
  bool mean;
  bool software;
  bool w_is_t;  // w holds T, else float
};

// Adds the messages of non-zeros [beg, end) of one row to acc (the group's V features at foff):
// the group loads G column indices (and scalar weights) at once and broadcasts them lane by lane.
template <class IndexT, class T, int V, int kMode>
__device__ __forceinline__ void gather(const WvArgs<IndexT, T>& p, int64_t beg, int64_t end, bool ok,
                                       int64_t foff, int gl, int G, unsigned gmask,
                                       float (&acc)[V]) {
  auto fold = [&](IndexT c, float w, int64_t edge) {
    if (!ok) return;
    float x[V], y[V];
    if constexpr (kMode != kCopyE) elem::load<V>(x, p.u + static_cast<int64_t>(c) * p.F + foff);
    if constexpr (kMode == kCopyE || kMode == kUOpEWide) elem::load<V>(y, p.e + edge * p.F + foff);
    add_message<kMode>(acc, x, y, w, p.binop);
  };
  for (int64_t base = beg; base < end; base += G) {
    const int cnt = static_cast<int>(min(static_cast<int64_t>(G), end - base));
    const IndexT my_c = gl < cnt ? __ldg(p.col + base + gl) : IndexT(0);
    float my_w = 0.f;
    if constexpr (kMode == kUOpEScalar) my_w = gl < cnt ? weight<T>(p.w, p.w_is_t, base + gl) : 0.f;
    int j = 0;
    for (; j + kUnroll <= cnt; j += kUnroll) {
      IndexT c[kUnroll];
      float w[kUnroll];
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        c[k] = __shfl_sync(gmask, my_c, j + k, G);
        w[k] = kMode == kUOpEScalar ? __shfl_sync(gmask, my_w, j + k, G) : 0.f;
      }
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) fold(c[k], w[k], base + j + k);
    }
    for (; j < cnt; ++j) {
      const IndexT c = __shfl_sync(gmask, my_c, j, G);
      const float w = kMode == kUOpEScalar ? __shfl_sync(gmask, my_w, j, G) : 0.f;
      fold(c, w, base + j);
    }
  }
}

template <class IndexT, class T, int V, int kMode>
__device__ __forceinline__ void vertex(const WvArgs<IndexT, T>& p, int64_t v, int gl, int G,
                                       unsigned gmask) {
  // Row bounds in registers for the whole row (TLPGNN's "register caching").
  const int64_t beg = __ldg(p.rowptr + v), end = __ldg(p.rowptr + v + 1);
  if (p.split > 0 && end - beg > p.split) return;  // warp_vertex_heavy_kernel's row
  const float scale = (p.mean && end > beg) ? 1.f / static_cast<float>(end - beg) : 1.f;
  T* orow = p.out + v * p.F;
  for (int pass = 0; pass < p.passes; ++pass) {
    const int vi = pass * G + gl;
    const bool ok = vi < p.nv;
    const int64_t foff = static_cast<int64_t>(vi) * V;
    float acc[V];
    gnnone::zero_vec(acc);
    gather<IndexT, T, V, kMode>(p, beg, end, ok, foff, gl, G, gmask, acc);
    if (ok) {
#pragma unroll
      for (int q = 0; q < V; ++q) acc[q] *= scale;
      elem::store<V>(orow + foff, acc);
    }
  }
}

// One block per heavy row (p.heavy[blockIdx.x]): group i of the block's B = blockDim / G groups
// walks the i-th of B equal slices of the row; the partial sums meet in shared memory
// (part[group][G * V], float32) and are added in group order, then rounded once.
template <class IndexT, class T, int V, int kMode>
__global__ void __launch_bounds__(kHeavyThreads) warp_vertex_heavy_kernel(const WvArgs<IndexT, T> p) {
  extern __shared__ __align__(16) float part[];
  const int64_t v = p.heavy[blockIdx.x];
  const int G = 1 << p.g_log2;
  const int groups = static_cast<int>(blockDim.x) >> p.g_log2;
  const int gi = static_cast<int>(threadIdx.x) >> p.g_log2;
  const int gl = static_cast<int>(threadIdx.x) & (G - 1);
  const int grp_in_warp = (static_cast<int>(threadIdx.x) & 31) >> p.g_log2;
  const unsigned gmask = G == 32 ? 0xffffffffu : ((1u << G) - 1u) << (grp_in_warp * G);
  const int64_t beg = __ldg(p.rowptr + v), end = __ldg(p.rowptr + v + 1);
  const int64_t per = (end - beg + groups - 1) / groups;
  const int64_t b0 = min(end, beg + gi * per), b1 = min(end, b0 + per);
  const float scale = p.mean ? 1.f / static_cast<float>(end - beg) : 1.f;
  const int width = G * V;  // features of one pass
  for (int pass = 0; pass < p.passes; ++pass) {
    const int vi = pass * G + gl;
    const bool ok = vi < p.nv;
    const int64_t foff = static_cast<int64_t>(vi) * V;
    float acc[V];
    gnnone::zero_vec(acc);
    gather<IndexT, T, V, kMode>(p, b0, b1, ok, foff, gl, G, gmask, acc);
#pragma unroll
    for (int q = 0; q < V; ++q) part[gi * width + gl * V + q] = acc[q];
    __syncthreads();
    for (int f = static_cast<int>(threadIdx.x); f < width; f += static_cast<int>(blockDim.x)) {
      const int64_t feat = static_cast<int64_t>(pass) * width + f;
      if (feat >= p.F) continue;
      float sum = 0.f;
      for (int i = 0; i < groups; ++i) sum += part[i * width + f];
      p.out[v * p.F + feat] = elem::from_float<T>(sum * scale);
    }
    __syncthreads();
  }
}

template <class IndexT, class T, int V, int kMode>
__global__ void __launch_bounds__(gnnone::kMaxThreads) warp_vertex_kernel(const WvArgs<IndexT, T> p) {
  const int lane = threadIdx.x & 31;
  const int G = 1 << p.g_log2;
  const int gpw = 32 >> p.g_log2;  // vertices (groups) per warp
  const int grp = lane >> p.g_log2;
  const int gl = lane & (G - 1);
  const unsigned gmask = G == 32 ? 0xffffffffu : ((1u << G) - 1u) << (grp * G);
  if (!p.software) {
    const int64_t task = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int64_t v = task * gpw + grp;
    if (v < p.n) vertex<IndexT, T, V, kMode>(p, v, gl, G, gmask);
    return;
  }
  // Software task pool (Algorithm 1): lane 0 claims `step` warp-tasks, the warp shares them.
  for (;;) {
    unsigned long long first = 0;
    if (lane == 0) first = atomicAdd(p.counter, static_cast<unsigned long long>(p.step));
    first = __shfl_sync(0xffffffffu, first, 0);
    if (first >= static_cast<unsigned long long>(p.n_tasks)) return;
    const int64_t last = min(static_cast<int64_t>(first) + p.step, p.n_tasks);
    for (int64_t task = static_cast<int64_t>(first); task < last; ++task) {
      const int64_t v = task * gpw + grp;
      if (v < p.n) vertex<IndexT, T, V, kMode>(p, v, gl, G, gmask);
    }
    __syncwarp();
  }
}

// ---- max / min --------------------------------------------------------------------------------
// max/min with the winning edge and source (arg_e, arg_u, for the backward): one warp per row,
// lanes over features with scalar loads (the path of max/min pooling layers, not of the SpMM
// suite, so it is kept to 8 instantiations). A message replaces the running winner only when it
// is strictly better, so ties keep the first edge in row order, as in cpu_ref; a NaN message
// beats every number and the first NaN stays (torch and PyG propagate NaN); rows without
// edges get 0 and arg -1.
template <class IndexT, class T>
struct MinMaxArgs {
  const IndexT* __restrict__ rowptr;
  const IndexT* __restrict__ col;
  const T* __restrict__ u;
  const T* __restrict__ e;  // edge rows [nnz, F]
  const void* w;            // scalar edge weights [nnz]
  T* __restrict__ out;
  int64_t* __restrict__ arg_u;  // may be null
  int64_t* __restrict__ arg_e;  // may be null
  int64_t n;
  int64_t F;
  int binop;
  bool is_max;
  bool w_is_t;
};

template <class IndexT, class T, int kMode>
__global__ void __launch_bounds__(gnnone::kMaxThreads)
    warp_vertex_minmax_kernel(const MinMaxArgs<IndexT, T> p) {
  const int64_t v = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (v >= p.n) return;
  const int lane = threadIdx.x & 31;
  const int64_t beg = __ldg(p.rowptr + v), end = __ldg(p.rowptr + v + 1);
  for (int64_t f = lane; f < p.F; f += 32) {
    float best = 0.f;
    int64_t won = -1;
    for (int64_t k = beg; k < end; ++k) {
      const int64_t c = static_cast<int64_t>(__ldg(p.col + k));  // one address for the warp
      float m;
      if constexpr (kMode == kCopyU) m = elem::ldg1(p.u + c * p.F + f);
      else if constexpr (kMode == kCopyE) m = elem::ldg1(p.e + k * p.F + f);
      else if constexpr (kMode == kUOpEScalar)
        m = apply(p.binop, elem::ldg1(p.u + c * p.F + f), weight<T>(p.w, p.w_is_t, k));
      else m = apply(p.binop, elem::ldg1(p.u + c * p.F + f), elem::ldg1(p.e + k * p.F + f));
      if (k == beg || (isnan(m) && !isnan(best)) || (p.is_max ? m > best : m < best)) {
        best = m;
        won = k;
      }
    }
    const int64_t o = v * p.F + f;
    p.out[o] = elem::from_float<T>(best);
    if (p.arg_e) p.arg_e[o] = won;
    if (p.arg_u) p.arg_u[o] = won >= 0 ? static_cast<int64_t>(__ldg(p.col + won)) : -1;
  }
}

// The scalar edge weights of u_op_e with an e of width 1 (float32 or the features' dtype).
inline bool weights_are_t(const SpmmProblem& p) {
  return p.uses_e() && p.e_width == 1 && p.e->dtype() != DType::f32;
}

template <class IndexT, class T>
void run_minmax(const SpmmProblem& p, const Schedule& s, cudaStream_t st) {
  const Graph& g = *p.g;
  const int warps = static_cast<int>(param_or_default(OpKind::spmm, "warp_vertex", s, "warps"));
  SPGNN_CHECK(warps >= 1 && warps <= gnnone::kMaxWarps, InvalidArgument,
              "warp_vertex: warps must be in 1..", gnnone::kMaxWarps, ", got ", warps);
  MinMaxArgs<IndexT, T> a{};
  a.rowptr = g.rowptr.data<IndexT>();
  a.col = g.col.data<IndexT>();
  a.u = p.uses_u() ? static_cast<const T*>(p.u->raw()) : nullptr;
  a.e = p.uses_e() ? static_cast<const T*>(p.e->raw()) : nullptr;
  a.w = p.uses_e() ? p.e->raw() : nullptr;
  a.w_is_t = weights_are_t(p);
  a.out = static_cast<T*>(p.out->raw());
  a.arg_u = p.arg_u ? p.arg_u->data<int64_t>() : nullptr;
  a.arg_e = p.arg_e ? p.arg_e->data<int64_t>() : nullptr;
  a.n = g.n_rows;
  a.F = p.F;
  a.binop = binop_of(p.op);
  a.is_max = p.reduce == Reduce::max;
  const int64_t blocks = ceil_div<int64_t>(a.n, warps);
  SPGNN_CHECK(blocks <= 0x7fffffff, InvalidArgument, "warp_vertex: graph too large for one grid");
  const dim3 grid(static_cast<unsigned>(blocks)), block(static_cast<unsigned>(warps * 32));
  switch (mode_of(p)) {
    case kCopyU: warp_vertex_minmax_kernel<IndexT, T, kCopyU><<<grid, block, 0, st>>>(a); break;
    case kCopyE: warp_vertex_minmax_kernel<IndexT, T, kCopyE><<<grid, block, 0, st>>>(a); break;
    case kUOpEScalar: warp_vertex_minmax_kernel<IndexT, T, kUOpEScalar><<<grid, block, 0, st>>>(a); break;
    default: warp_vertex_minmax_kernel<IndexT, T, kUOpEWide><<<grid, block, 0, st>>>(a); break;
  }
  SPGNN_CUDA_CHECK_LAUNCH();
}

// One task counter per (device, stream): launches on one stream are ordered, so the memset that
// resets the counter and the kernel that drains it never overlap another call's. Never freed
// (process lifetime; freeing at exit would race the CUDA runtime's own teardown).
unsigned long long* task_counter(int device, cudaStream_t st) {
  static std::mutex mutex;
  static auto* counters = new std::map<std::pair<int, cudaStream_t>, DeviceBuffer>();
  std::lock_guard<std::mutex> lock(mutex);
  DeviceBuffer& b = (*counters)[{device, st}];
  b.reserve(sizeof(unsigned long long));
  return static_cast<unsigned long long*>(b.get());
}

int sm_count(int device) {
  static std::mutex mutex;
  static std::map<int, int> counts;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = counts.find(device);
  if (it != counts.end()) return it->second;
  int sms = 0;
  SPGNN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  counts[device] = sms;
  return sms;
}

// The rows of g with more than `split` non-zeros, longest first (so the longest start first), on
// g's device; cached with the graph per threshold (like degree_stats, keyed by the arrays too).
struct HeavyRows {
  Tensor rows;  // int64 [count]
  int64_t count = 0;
};
template <class IndexT>
std::shared_ptr<const HeavyRows> heavy_rows(const Graph& g, int64_t split) {
  const std::string key = std::string("warp_vertex.heavy@") + dtype_name(g.index_dtype()) + ":" +
                          std::to_string(reinterpret_cast<uintptr_t>(g.rowptr.raw())) + ":" +
                          std::to_string(g.n_rows) + ":" + std::to_string(g.nnz()) + ":" +
                          std::to_string(split);
  std::lock_guard<std::mutex> lock(g.cache->mutex);
  auto& slot = g.cache->items[key];
  if (!slot) {
    const std::vector<IndexT> rp = g.rowptr.to_vector<IndexT>();
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < g.n_rows; ++i)
      if (static_cast<int64_t>(rp[i + 1] - rp[i]) > split) rows.push_back(i);
    std::stable_sort(rows.begin(), rows.end(), [&](int64_t x, int64_t y) {
      return rp[x + 1] - rp[x] > rp[y + 1] - rp[y];
    });
    auto h = std::make_shared<HeavyRows>();
    h->count = static_cast<int64_t>(rows.size());
    if (h->count > 0)
      h->rows = Tensor::from_vector(rows, {h->count}).to(g.device());
    slot = h;
  }
  return std::static_pointer_cast<const HeavyRows>(slot);
}

template <class IndexT, class T, int V, int kMode>
void launch(const WvArgs<IndexT, T>& a, int64_t n_heavy, int warps, int device, cudaStream_t st) {
  if (n_heavy > 0) {  // first, so the longest rows start first
    SPGNN_CHECK(n_heavy <= 0x7fffffff, InvalidArgument, "warp_vertex: too many heavy rows");
    const size_t smem = static_cast<size_t>(kHeavyThreads) * V * sizeof(float);
    warp_vertex_heavy_kernel<IndexT, T, V, kMode>
        <<<static_cast<unsigned>(n_heavy), kHeavyThreads, smem, st>>>(a);
    SPGNN_CUDA_CHECK_LAUNCH();
  }
  int64_t blocks = 0;
  if (a.software) {
    const int64_t resident = static_cast<int64_t>(sm_count(device)) * (kWarpsPerSm / warps);
    const int64_t needed = ceil_div<int64_t>(ceil_div<int64_t>(a.n_tasks, a.step), warps);
    blocks = std::max<int64_t>(1, std::min(resident, needed));
  } else {
    blocks = ceil_div<int64_t>(a.n_tasks, warps);
  }
  SPGNN_CHECK(blocks <= 0x7fffffff, InvalidArgument, "warp_vertex: graph too large for one grid");
  warp_vertex_kernel<IndexT, T, V, kMode>
      <<<static_cast<unsigned>(blocks), warps * 32, 0, st>>>(a);
  SPGNN_CUDA_CHECK_LAUNCH();
}

template <class IndexT, class T, int V>
void launch_mode(const WvArgs<IndexT, T>& a, int mode, int64_t n_heavy, int warps, int device,
                 cudaStream_t st) {
  switch (mode) {
    case kCopyU: launch<IndexT, T, V, kCopyU>(a, n_heavy, warps, device, st); break;
    case kCopyE: launch<IndexT, T, V, kCopyE>(a, n_heavy, warps, device, st); break;
    case kUOpEScalar: launch<IndexT, T, V, kUOpEScalar>(a, n_heavy, warps, device, st); break;
    default: launch<IndexT, T, V, kUOpEWide>(a, n_heavy, warps, device, st); break;
  }
}

template <class IndexT, class T>
void run(const SpmmProblem& p, const Schedule& s, cudaStream_t st) {
  const Graph& g = *p.g;
  const int warps = static_cast<int>(param_or_default(OpKind::spmm, "warp_vertex", s, "warps"));
  const int64_t assign = param_or_default(OpKind::spmm, "warp_vertex", s, "assign");
  const int step = static_cast<int>(param_or_default(OpKind::spmm, "warp_vertex", s, "step"));
  int64_t split = param_or_default(OpKind::spmm, "warp_vertex", s, "split");
  SPGNN_CHECK(warps >= 1 && warps <= gnnone::kMaxWarps, InvalidArgument,
              "warp_vertex: warps must be in 1..", gnnone::kMaxWarps, ", got ", warps);
  SPGNN_CHECK(step >= 1, InvalidArgument, "warp_vertex: step must be >= 1, got ", step);
  WvArgs<IndexT, T> a{};
  a.rowptr = g.rowptr.data<IndexT>();
  a.col = g.col.data<IndexT>();
  a.u = p.uses_u() ? static_cast<const T*>(p.u->raw()) : nullptr;
  a.e = p.uses_e() ? static_cast<const T*>(p.e->raw()) : nullptr;
  a.w = p.uses_e() ? p.e->raw() : nullptr;
  a.w_is_t = weights_are_t(p);
  a.out = static_cast<T*>(p.out->raw());
  a.n = g.n_rows;
  a.F = p.F;
  const int mode = mode_of(p);
  const void* ptrs[3] = {a.u, a.out, mode == kUOpEScalar ? nullptr : a.e};
  int V = elem::vector_width(p.F, sizeof(T), ptrs, 3);
  // Halves skip V = 4 (F = 4 mod 8 takes pairs): one instantiation fewer per mode.
  if (elem::kIsHalf<T> && V == 4) V = 2;
  SPGNN_CHECK(p.F / V <= (int64_t{1} << 26), InvalidArgument, "warp_vertex: feature width ", p.F,
              " is too large");
  a.nv = static_cast<int>(p.F / V);
  a.g_log2 = std::min(5, log2_ceil(a.nv));
  a.passes = static_cast<int>(ceil_div<int64_t>(a.nv, 32));
  a.n_tasks = ceil_div<int64_t>(a.n, 32 >> a.g_log2);
  a.binop = binop_of(p.op);
  a.mean = p.reduce == Reduce::mean;
  a.step = step;
  const double avg = a.n ? double(g.nnz()) / double(a.n) : 0.0;
  a.software = assign == 2 || (assign == 0 && (a.n > kSoftwareMinVertices ||
                                               avg > kSoftwareMinAvgDegree));
  const int device = g.device().index;
  // A group's share of the non-zeros when every resident group (kWarpsPerSm warps per SM) holds
  // one equal part: the scale of the automatic split.
  const int64_t share =
      g.nnz() / (static_cast<int64_t>(sm_count(device)) * kWarpsPerSm * (32 >> a.g_log2));
  if (split == 0)  // auto: see "Heavy rows" above
    split = std::max<int64_t>(
        kMinAutoSplit,
        std::min<int64_t>(share / 4, static_cast<int64_t>(kAutoSplitAvgDegrees * avg)));
  int64_t n_heavy = 0;
  if (split > 0 && degree_stats(g)->max_deg > split) {
    const auto heavy = heavy_rows<IndexT>(g, split);
    n_heavy = heavy->count;
    a.heavy = heavy->rows.template data<int64_t>();
    a.split = split;
  }
  if (a.software) {
    a.counter = task_counter(device, st);
    SPGNN_CUDA_CHECK(cudaMemsetAsync(a.counter, 0, sizeof(unsigned long long), st));
  }
  if constexpr (elem::kIsHalf<T>) {
    switch (V) {
      case 8: launch_mode<IndexT, T, 8>(a, mode, n_heavy, warps, device, st); break;
      case 2: launch_mode<IndexT, T, 2>(a, mode, n_heavy, warps, device, st); break;
      default: launch_mode<IndexT, T, 1>(a, mode, n_heavy, warps, device, st); break;
    }
  } else {
    switch (V) {
      case 4: launch_mode<IndexT, T, 4>(a, mode, n_heavy, warps, device, st); break;
      case 2: launch_mode<IndexT, T, 2>(a, mode, n_heavy, warps, device, st); break;
      default: launch_mode<IndexT, T, 1>(a, mode, n_heavy, warps, device, st); break;
    }
  }
}

}  // namespace

// Every op with sum and mean, and (the only GPU strategy that does) max and min.
std::string warp_vertex_spmm_supports(const SpmmProblem& p) {
  if (p.reduce == Reduce::max || p.reduce == Reduce::min) {
    SpmmProblem as_sum = p;
    as_sum.reduce = Reduce::sum;
    return spmm_supports(as_sum, "warp_vertex", true);
  }
  return spmm_supports(p, "warp_vertex", true);
}

void warp_vertex_spmm(const SpmmProblem& p, const Schedule& s) {
  const Graph& g = *p.g;
  gnnone::DeviceGuard guard(g.device().index);
  const cudaStream_t st = as_stream(p.stream);
  if (g.n_rows == 0 || p.F == 0) return;
  const bool minmax = p.reduce == Reduce::max || p.reduce == Reduce::min;
  elem::dispatch(p.dtype, [&](auto t) {
    using T = decltype(t);
    if (g.index_dtype() == DType::i64)
      minmax ? run_minmax<int64_t, T>(p, s, st) : run<int64_t, T>(p, s, st);
    else
      minmax ? run_minmax<int32_t, T>(p, s, st) : run<int32_t, T>(p, s, st);
  });
}

}  // namespace spgnn::detail
