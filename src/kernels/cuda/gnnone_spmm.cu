// GNNOne SpMM (HPDC'24, §4) on the row-sorted COO graph.
//
// Stage 1: warp w owns the CACHE consecutive non-zeros [w*CACHE, (w+1)*CACHE) — an edge-balanced
//   split that ignores row lengths — and loads their (row, col, edge value) into its slice of
//   shared memory with coalesced loads (nze_cache=0 skips this and reads them in stage 2).
// Stage 2: the warp splits into thread groups of G lanes; a lane owns V consecutive features
//   (float4 / float2 / float), so a group covers a feature row with one coalesced load per
//   non-zero. Each group walks CACHE/(32/G) CONSECUTIVE cached non-zeros (consecutive=0:
//   round-robin), keeping a running per-row sum in registers and flushing it when the row
//   changes. Features wider than one group (16 vectors = 64 floats by default) are split into
//   chunks, one per gridDim.y, each re-reading the (small) stage-1 data.
// Writes: a run whose row lies wholly inside the group's sub-slice is the only contribution to
//   that row and is stored plainly; a run of a row cut by a sub-slice boundary is added with one
//   vector atomic (red.global.add.v4.f32 on sm_90). Rows with no edges and the targets of those
//   atomics need zeros first: a small kernel on the caller's stream reads rowptr and zeroes just
//   those rows, instead of a memset of the whole output (docs/GPU_NOTES.md has the numbers).
// mean: each flushed partial is scaled by 1/deg(row) (rowptr), so split rows still sum right.
//
// float16/bfloat16 features (elem.cuh: 16-byte loads of 8 halves kept packed until the add,
// float32 accumulation): rows inside one sub-slice are rounded once and stored. The cut rows
// cannot take atomics on a half output without a rounding per partial (cuSPARSE's half SpMM
// shows the cost: relative error 4e-2 in bfloat16 on R-MAT), so their partials go with float32
// vector atomics to a scratch row per cut row (a compact slot, listed once per graph and
// sub-slice length), and a small kernel rounds each scratch row once into the output. Rows
// without edges are zeroed in the main kernel by the group that holds the next non-zero (runs
// of up to kInlineZeroRun rows; the fix-up kernel zeroes longer runs). On
// R-MAT scale 21 a sixth of the non-empty rows are cut at the default L = 64 (256 non-zeros per
// warp; scratch ~47 MB at F = 64). Half needs the stage-1 cache and consecutive groups (the
// ablations stay float32). docs/GPU_NOTES.md has the measurements.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "dispatch/registry.hpp"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/elem.cuh"
#include "kernels/cuda/gnnone_common.cuh"
#include "kernels/cuda/spmm_message.cuh"

namespace spgnn::detail {

namespace {

using gnnone::kUnroll;

// Half: a run of at most this many rows without edges is zeroed inside the main kernel by one
// thread group (bounded serial work); longer runs (a block of isolated nodes, the rows after
// the last edge of a bipartite graph) are zeroed by the fix-up kernel, a warp per row.
constexpr int64_t kInlineZeroRun = 64;

// The message modes (a broadcast edge value is cached in stage 1) and u_op_e's binary op, a
// run-time switch uniform across the warp: spmm_message.cuh, shared with the row-parallel kernels.
using namespace rowpar;

template <class IndexT, class T>
struct SpmmArgs {
  const IndexT* __restrict__ row;
  const IndexT* __restrict__ col;
  const IndexT* __restrict__ rowptr;
  const T* __restrict__ u;
  const T* __restrict__ e;  // edge rows [nnz, F] (copy_e, u_op_e with wide e)
  const void* w;            // scalar edge weights [nnz]: float32, or T when w_is_t
  T* __restrict__ out;
  float* __restrict__ part;          // half: float32 scratch rows of the cut rows
  const int32_t* __restrict__ slot;  // half: row -> its scratch row (cut rows only)
  int64_t nnz;
  int64_t n_rows;
  int64_t F;
  int row_bytes;   // F * sizeof(T)
  int nv;          // vectors per feature row
  int g_log2;      // log2(thread-group size)
  int passes;      // passes of 32 vectors when nv > 32
  int cache;       // non-zeros per warp
  int skew_shift;  // non-zero k is cached at k + (k >> skew_shift); 31: unskewed
  int skew_words;  // cache >> skew_shift: the spare words per array
  int warp_bytes;  // shared bytes per warp
  int binop;
  bool mean;
  bool consecutive;
  bool w_is_t;
};

// At most 64 registers (2 blocks of 512 threads per SM), for the occupancy the gathers need to
// hide their latency (see the note on elem::Packed); float32 edge rows (wide u_op_e) keep
// their ~80 registers rather than spill.
template <class IndexT, class T, int V, int kMode, bool kCache>
__global__ void __launch_bounds__(gnnone::kMaxThreads,
                                  elem::kIsHalf<T> || kMode != kUOpEWide ? 2 : 1)
    gnnone_spmm_kernel(const SpmmArgs<IndexT, T> p) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t s = (static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + warp) * p.cache;
  if (s >= p.nnz) return;  // whole warps only: no block-level barrier below
  const int cnt = static_cast<int>(min(static_cast<int64_t>(p.cache), p.nnz - s));

  auto weight = [&](int64_t k) -> float {
    if constexpr (elem::kIsHalf<T>) {
      if (p.w_is_t) return elem::ldg1(static_cast<const T*>(p.w) + k);
    }
    return __ldg(static_cast<const float*>(p.w) + k);
  };
  // Skewed sub-slices (gnnone::sub_slice_skew): unskewed, on the Reddit shape in bfloat16, 73% of
  // the kernel's shared-memory wavefronts were bank conflicts and L1 was its busiest unit.
  const int sk = p.skew_shift;
  IndexT* s_row = reinterpret_cast<IndexT*>(smem + warp * p.warp_bytes);  // [cache + 2 + skew]
  IndexT* s_col = s_row + p.cache + 2 + p.skew_words;                       // [cache + skew]
  float* s_val = reinterpret_cast<float*>(s_col + p.cache + p.skew_words);  // [cache + skew]

  // ---- stage 1: coalesced load of the warp's non-zeros into shared memory ----
  // The non-zeros are read once a pass and never fit L2 (8-12 bytes each: 0.9-1.4 GB on the
  // Reddit shape). Streaming loads (evict-first) leave L2 to the gathered rows where that
  // measured faster (H100: GIN's bfloat16 copy_u 4.4% an epoch, float32 u_mul_e on kron21
  // 1.6%); bfloat16 u_mul_e ran 1-5% slower with them and keeps plain loads.
  constexpr bool kScalarE = kMode == kUOpEScalar || kMode == kUMulEScalar;  // a weight an edge
  constexpr bool kStream = kMode == kCopyU || (!elem::kIsHalf<T> && kScalarE);
  auto nz_index = [&](const IndexT* arr, int k) -> IndexT {
    if constexpr (kStream) return __ldcs(arr + s + k);
    else return arr[s + k];
  };
  if constexpr (kCache) {
    // Half: every load of an unrolled batch is issued before any store. A lane past the slice's
    // end reads the slice's first non-zero (always there) and stores the padding; the rows just
    // outside the slice (lanes 0 and 1) are loaded before the loop and stored after it; and the
    // weight's dtype is a template argument, not a test around each load. With the run-time
    // test inside the loop nvcc issued each half weight load only after the previous one's
    // store, and a quarter of the bfloat16 kernel's stall samples sat in this loop (R-MAT scale
    // 21, u_mul_e, F = 64). float32 keeps its loop: it streams its weights unconditionally, and
    // the same changes cost it registers (56 -> 59 at V = 4: one block fewer an SM).
    constexpr bool kBatch = elem::kIsHalf<T>;
    IndexT edge_row = IndexT(-1);
    if constexpr (kBatch) {
      const int64_t at = lane == 0 ? s - 1 : s + p.cache;
      if (lane < 2 && at >= 0 && at < p.nnz) edge_row = p.row[at];
    }
    auto fill = [&](auto half_w) {
      [[maybe_unused]] constexpr bool kHalfW = decltype(half_w)::value;
#pragma unroll 4
      for (int k = lane; k < p.cache; k += 32) {
        const bool ok = k < cnt;
        const int pk = k + (k >> sk);
        if constexpr (kBatch) {
          const int kk = ok ? k : 0;
          const IndexT r = nz_index(p.row, kk);
          const IndexT c = nz_index(p.col, kk);
          [[maybe_unused]] float v = 0.f;
          if constexpr (kScalarE) {
            if constexpr (kHalfW) v = elem::ldg1(static_cast<const T*>(p.w) + s + kk);
            else v = __ldg(static_cast<const float*>(p.w) + s + kk);
          }
          s_row[pk + 1] = ok ? r : IndexT(-1);
          s_col[pk] = ok ? c : IndexT(0);
          if constexpr (kScalarE) s_val[pk] = ok ? v : 0.f;
        } else {
          s_row[pk + 1] = ok ? nz_index(p.row, k) : IndexT(-1);
          s_col[pk] = ok ? nz_index(p.col, k) : IndexT(0);
          if constexpr (kScalarE)  // float32 weights, streamed (kStream)
            s_val[pk] = ok ? __ldcs(static_cast<const float*>(p.w) + s + k) : 0.f;
        }
      }
    };
    if constexpr (kBatch && kScalarE) {
      if (p.w_is_t) fill(std::true_type{});
      else fill(std::false_type{});
    } else {
      fill(std::false_type{});
    }
    if constexpr (kBatch) {
      if (lane < 2) s_row[lane == 0 ? 0 : p.cache + p.skew_words + 1] = edge_row;
    } else {
      if (lane == 0) s_row[0] = s > 0 ? p.row[s - 1] : IndexT(-1);
      if (lane == 1)
        s_row[p.cache + p.skew_words + 1] = s + p.cache < p.nnz ? p.row[s + p.cache] : IndexT(-1);
    }
    __syncwarp();
  }
  // Row of local non-zero k in [-1, cache]; -1 outside the graph.
  auto row_any = [&](int k) -> IndexT {
    if constexpr (kCache) {
      return s_row[(k < 0 ? k : k + (k >> sk)) + 1];
    } else {
      const int64_t gk = s + k;
      return (gk >= 0 && gk < p.nnz) ? __ldg(p.row + gk) : IndexT(-1);
    }
  };

  // ---- stage 2: thread groups over consecutive (or round-robin) cached non-zeros ----
  const int G = 1 << p.g_log2;
  const int NG = 32 >> p.g_log2;
  const int grp = lane >> p.g_log2;
  const int gl = lane & (G - 1);
  int a, b, stride;
  if (p.consecutive) {
    const int L = p.cache / NG;
    a = grp * L;
    b = min(a + L, cnt);
    stride = 1;
  } else {
    a = grp;
    b = cnt;
    stride = NG;
  }
  if (a >= b) return;  // no shuffles below: idle groups may leave
  // Inside its own sub-slice [a, b) a group's skew is one constant (consecutive groups only:
  // round-robin ones run unskewed).
  const int gsk = a >> sk;
  auto row_at = [&](int k) -> IndexT {
    if constexpr (kCache) return s_row[k + gsk + 1];
    else return row_any(k);
  };
  auto col_at = [&](int k) -> IndexT {
    if constexpr (kCache) return s_col[k + gsk];
    else return __ldg(p.col + s + k);
  };
  auto val_at = [&](int k) -> float {
    if constexpr (kCache) return s_val[k + gsk];
    else return weight(s + k);
  };
  // Is the row at the sub-slice's start (end) continued before (after) it? Round-robin groups
  // never own a row, so every flush there is atomic.
  bool head_split = true, tail_split = true;
  if (p.consecutive) {
    head_split = row_any(a - 1) == row_any(a);
    tail_split = row_any(b) == row_any(b - 1);
  }
  const bool all_atomic = !p.consecutive;

  // Feature chunks are spread over gridDim.y, not looped inside the warp: every block of chunk 0
  // is dispatched before those of chunk 1, so the feature columns in flight at any time (and
  // the L2 working set) are one chunk wide.
  for (int pass = blockIdx.y; pass < p.passes; pass += gridDim.y) {
    const int vi = pass * G + gl;
    const bool lane_ok = vi < p.nv;
    const int64_t foff = static_cast<int64_t>(vi) * V;
    // u's rows from this lane's vector, stepped in bytes by a 32-bit row size (host-checked):
    // with int32 indices the address of a gather is one wide multiply-add, not a 64-bit product.
    // A lane past the row's last vector gathers the pass's first vector instead (a line its
    // group reads anyway; the row's first vector is not, past pass 0) and never stores: no
    // predicated loads and no zeroed registers in the hot loop.
    const int64_t idle_off = static_cast<int64_t>(pass) * G * V;
    const auto* u_lane = reinterpret_cast<const unsigned char*>(p.u + (lane_ok ? foff : idle_off));
    float acc[V];
    gnnone::zero_vec(acc);
    IndexT cur = -1;
    bool first_run = true;
    // Half: the rows without edges are zeroed here, each by the group that holds the first
    // non-zero after it (rows past the last non-zero: the last group), runs of up to
    // kInlineZeroRun rows; cut_rows lists the longer runs for the fix-up kernel. `last` is the
    // row of the non-zero before the current run.
    IndexT last = elem::kIsHalf<T> ? row_any(a - 1) : IndexT(-1);
    auto zero_between = [&](int64_t from, int64_t to) {  // rows (from, to)
      if (!lane_ok || to - from - 1 > kInlineZeroRun) return;
      float z[V];
      gnnone::zero_vec(z);
      for (int64_t r = from + 1; r < to; ++r) elem::store<V>(p.out + r * p.F + foff, z);
    };

    auto flush = [&](IndexT r, bool atomic) {
      if (lane_ok) {
        float v[V];
#pragma unroll
        for (int q = 0; q < V; ++q) v[q] = acc[q];
        if (p.mean) {  // sum skips the multiplies
          const float scale =
              1.f / static_cast<float>(__ldg(p.rowptr + r + 1) - __ldg(p.rowptr + r));
#pragma unroll
          for (int q = 0; q < V; ++q) v[q] *= scale;
        }
        if constexpr (elem::kIsHalf<T>) {
          if (atomic) gnnone::atomic_add_f32(p.part + static_cast<int64_t>(p.slot[r]) * p.F + foff, v);
          else elem::store<V>(p.out + static_cast<int64_t>(r) * p.F + foff, v);
        } else {
          float* o = p.out + static_cast<int64_t>(r) * p.F + foff;
          if (atomic) gnnone::atomic_add_vec(o, v);
          else gnnone::st_vec(o, v);
        }
      }
    };
    // Folds non-zero contributions x (and the edge operand y / w) into the running row sum.
    // The features arrive packed (elem::Packed: halves stay in their load words until here).
    using Vec = elem::Packed<T, V>;
    auto step = [&](IndexT r, const Vec& xp, const Vec& yp, float w) {
      if (r != cur) {
        if (cur >= 0) {
          flush(cur, all_atomic || (first_run && head_split));
          first_run = false;
        }
        if constexpr (elem::kIsHalf<T>) {
          // Most row changes skip no row: a 32-bit test before zero_between's 64-bit bounds.
          const IndexT prev = cur >= 0 ? cur : last;
          if (r - prev > 1) zero_between(prev, r);
        }
        cur = r;
        gnnone::zero_vec(acc);
      }
      float x[V], y[V];
      if constexpr (kMode != kCopyE) elem::unpack<V>(x, xp);
      if constexpr (kMode == kCopyE || kMode == kUOpEWide) elem::unpack<V>(y, yp);
      add_message<kMode>(acc, x, y, w, p.binop);
    };
    // Issues the loads of non-zero k (all of a batch before any use).
    auto load = [&](int k, IndexT& r, Vec& x, Vec& y, float& w) {
      r = row_at(k);
      if constexpr (kMode != kCopyE) {
        const IndexT c = col_at(k);
        const unsigned char* xr = u_lane + gnnone::row_offset(c, p.row_bytes);
        elem::load_packed<V>(x, reinterpret_cast<const T*>(xr));
      }
      if constexpr (kMode == kCopyE || kMode == kUOpEWide) {
        if (lane_ok) elem::load_packed<V>(y, p.e + (s + k) * p.F + foff);
        else elem::zero_packed<V>(y);
      }
      // kUMulEScalar reads its weight when the non-zero is added (below): four fewer live
      // registers a batch, the difference between spilling and not at 8 halves a lane.
      if constexpr (kMode == kUOpEScalar) w = val_at(k);
      else w = 0.f;
    };

    int k = a;
    for (; k + (kUnroll - 1) * stride < b; k += kUnroll * stride) {
      IndexT r[kUnroll];
      Vec x[kUnroll], y[kUnroll];
      float w[kUnroll];
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) load(k + j * stride, r[j], x[j], y[j], w[j]);
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) {
        if constexpr (kMode == kUMulEScalar) step(r[j], x[j], y[j], val_at(k + j * stride));
        else step(r[j], x[j], y[j], w[j]);
      }
    }
    for (; k < b; k += stride) {
      IndexT r;
      Vec x, y;
      float w;
      load(k, r, x, y, w);
      if constexpr (kMode == kUMulEScalar) step(r, x, y, val_at(k));
      else step(r, x, y, w);
    }
    flush(cur, all_atomic || (first_run && head_split) || tail_split);
    if constexpr (elem::kIsHalf<T>) {
      if (s + b == p.nnz) zero_between(cur, p.n_rows);
    }
  }
}

// Writes zeros to the output rows the main kernel will not store plainly: rows without edges and
// rows that span more than one thread-group sub-slice of L non-zeros (summed with atomics).
// One warp checks 32 rows (two coalesced rowptr loads) and zeroes the ones that need it together.
template <class IndexT>
__global__ void zero_rows_kernel(const IndexT* __restrict__ rowptr, int64_t n, float* out,
                                 int64_t F, int64_t L, bool vec4) {
  const int lane = threadIdx.x & 31;
  const int64_t base = (static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5)) * 32;
  if (base >= n) return;
  const int64_t r = base + lane;
  bool need = false;
  if (r < n) {
    const int64_t b0 = rowptr[r], b1 = rowptr[r + 1];
    need = b0 == b1 || b0 / L != (b1 - 1) / L;
  }
  unsigned mask = __ballot_sync(0xffffffffu, need);
  while (mask) {
    const int j = __ffs(mask) - 1;
    mask &= mask - 1;
    float* o = out + (base + j) * F;
    if (vec4) {
      for (int64_t f = lane * 4; f < F; f += 128)
        *reinterpret_cast<float4*>(o + f) = make_float4(0.f, 0.f, 0.f, 0.f);
    } else {
      for (int64_t f = lane; f < F; f += 32) o[f] = 0.f;
    }
  }
}

// Half outputs: rounds each cut row's float32 scratch row (row fix[i], scratch row i, for
// i < n_cut) into the output once, and zeroes the rows of the long empty runs (fix[i] for
// i >= n_cut). One warp per row, pairs of elements per lane when F is even (rows then start
// 4-byte aligned).
template <class T>
__global__ void gnnone_half_fixup_kernel(const int64_t* __restrict__ fix, int64_t n_fix,
                                         int64_t n_cut, const float* __restrict__ part,
                                         T* __restrict__ out, int64_t F, bool pairs) {
  const int lane = threadIdx.x & 31;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (i >= n_fix) return;
  T* o = out + fix[i] * F;
  const float* src = i < n_cut ? part + i * F : nullptr;
  if (pairs) {
    for (int64_t f = 2 * lane; f < F; f += 64) {
      const float2 v = src ? *reinterpret_cast<const float2*>(src + f) : make_float2(0.f, 0.f);
      *reinterpret_cast<uint32_t*>(o + f) = elem::pack2<T>(v.x, v.y);
    }
  } else {
    for (int64_t f = lane; f < F; f += 32) o[f] = elem::from_float<T>(src ? src[f] : 0.f);
  }
}

// The rows a half SpMM with sub-slices of L non-zeros does not finish in its main kernel: the
// cut rows (those spanning more than one sub-slice, zero_rows_kernel's test), each with a
// scratch row, then the rows of empty runs longer than kInlineZeroRun (the same runs the main
// kernel measures between consecutive non-empty rows). Listed on the host from rowptr once per
// graph and L, cached with the graph.
struct CutRows {
  Tensor slot;  // int32 [n_rows]: scratch row of a cut row, -1 otherwise
  Tensor fix;   // int64 [n_fix]: the cut rows in slot order, then the long runs' rows
  int64_t n_cut = 0;
  int64_t n_fix = 0;
};
template <class IndexT>
std::shared_ptr<const CutRows> cut_rows(const Graph& g, int64_t L) {
  return cached<CutRows>(g, cache_key(g, "gnnone.cut_rows." + std::to_string(L)), [&] {
    const std::vector<IndexT> rp = g.rowptr.to_vector<IndexT>();
    std::vector<int32_t> slot(static_cast<size_t>(g.n_rows), -1);
    std::vector<int64_t> fix, long_runs;
    int64_t prev = -1;  // the last non-empty row before r
    auto end_run = [&](int64_t r) {  // the empty rows (prev, r)
      if (r - prev - 1 > kInlineZeroRun)
        for (int64_t z = prev + 1; z < r; ++z) long_runs.push_back(z);
    };
    for (int64_t r = 0; r < g.n_rows; ++r) {
      const int64_t b0 = rp[r], b1 = rp[r + 1];
      if (b0 == b1) continue;
      end_run(r);
      prev = r;
      if (b0 / L != (b1 - 1) / L) {
        SPGNN_CHECK(fix.size() < 0x7fffffffu, InvalidArgument,
                    "gnnone: too many cut rows for one half-precision scratch");
        slot[static_cast<size_t>(r)] = static_cast<int32_t>(fix.size());
        fix.push_back(r);
      }
    }
    end_run(g.n_rows);
    auto c = new CutRows;
    c->n_cut = static_cast<int64_t>(fix.size());
    fix.insert(fix.end(), long_runs.begin(), long_runs.end());
    c->n_fix = static_cast<int64_t>(fix.size());
    if (g.n_rows > 0) c->slot = Tensor::from_vector(slot, {g.n_rows}).to(g.device());
    if (c->n_fix > 0) c->fix = Tensor::from_vector(fix, {c->n_fix}).to(g.device());
    return c;
  });
}

template <class IndexT, class T, int V, int kMode>
void launch_mode(const SpmmArgs<IndexT, T>& args, bool cache, int warps, cudaStream_t st) {
  const int64_t slices = (args.nnz + args.cache - 1) / args.cache;
  const int64_t blocks = (slices + warps - 1) / warps;
  SPGNN_CHECK(blocks <= 0x7fffffff, InvalidArgument, "gnnone spmm: graph too large for one grid");
  const size_t smem = static_cast<size_t>(warps) * args.warp_bytes;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(std::min(args.passes, 65535)));
  if (cache) {
    auto kernel = gnnone_spmm_kernel<IndexT, T, V, kMode, true>;
    gnnone::allow_smem(kernel, smem);
    kernel<<<grid, warps * 32, smem, st>>>(args);
  } else if constexpr (!elem::kIsHalf<T>) {  // the uncached ablation is float32 only
    auto kernel = gnnone_spmm_kernel<IndexT, T, V, kMode, false>;
    kernel<<<grid, warps * 32, 0, st>>>(args);
  }
  SPGNN_CUDA_CHECK_LAUNCH();
}

template <class IndexT, class T, int V>
void launch_v(const SpmmArgs<IndexT, T>& args, int mode, bool cache, int warps, cudaStream_t st) {
  switch (mode) {
    case kCopyU: launch_mode<IndexT, T, V, kCopyU>(args, cache, warps, st); break;
    case kCopyE: launch_mode<IndexT, T, V, kCopyE>(args, cache, warps, st); break;
    case kUOpEScalar:
      // u_mul_e, the weighted sum of GCN-style layers, without the other ops' code
      // (docs/BENCHMARKS.md): bfloat16 4.5-8% faster (R-MAT, Reddit and products shapes,
      // F = 64-256), float32 0.4-2.8% (62 -> 56 registers at V = 4). Cached kernels only: the
      // uncached float32 ablation keeps the one u_op_e kernel.
      if (args.binop == kMul && cache) {
        launch_mode<IndexT, T, V, kUMulEScalar>(args, cache, warps, st);
        break;
      }
      launch_mode<IndexT, T, V, kUOpEScalar>(args, cache, warps, st);
      break;
    default: launch_mode<IndexT, T, V, kUOpEWide>(args, cache, warps, st); break;
  }
}

template <class IndexT, class T>
void run(const SpmmProblem& p, const gnnone::Params& prm, cudaStream_t st) {
  const Graph& g = *p.g;
  SpmmArgs<IndexT, T> a{};
  a.row = g.row.data<IndexT>();
  a.col = g.col.data<IndexT>();
  a.rowptr = g.rowptr.data<IndexT>();
  const int mode = mode_of(p);
  // Typed by the front door's checks (elem.cuh's types have no Tensor::data<T>).
  a.u = p.uses_u() ? static_cast<const T*>(p.u->raw()) : nullptr;
  if (p.uses_e()) {
    if (mode == kUOpEScalar) {  // scalar weights: float32 (the graph's own) or the features' dtype
      a.w_is_t = p.e->dtype() == p.dtype;
      a.w = p.e->raw();
    } else {
      a.e = static_cast<const T*>(p.e->raw());
    }
  }
  a.out = static_cast<T*>(p.out->raw());
  a.nnz = g.nnz();
  a.n_rows = g.n_rows;
  a.F = p.F;
  a.row_bytes = gnnone::row_bytes32(p.F, sizeof(T), "gnnone");
  a.binop = binop_of(p.op);
  // Vector accesses touch u, out and (wide) e rows: all must be aligned for the width.
  const void* ptrs[3] = {a.u, a.out, a.e};
  // A group covers at most max_group_lanes lanes of 16 bytes (4 floats or 8 halves: the same
  // L2 working set per lane).
  // float32 takes the whole row in one pass where it fits L2 (gnnone_max_group); half keeps the
  // chunk rule, and doubles an 8-lane chunk where the row would otherwise need a second, partly
  // filled pass (below).
  int max_group = gnnone::max_group_lanes(p.F, g.n_cols, g.device().index, !elem::kIsHalf<T>);
  gnnone::Geometry geo;
  if constexpr (elem::kIsHalf<T>) {
    // 8 halves per lane where F and the pointers allow, else pairs (as warp_vertex: one
    // instantiation fewer per mode), else single halves.
    int V = prm.vector_loads ? elem::vector_width(p.F, sizeof(T), ptrs, 3) : 1;
    if (V == 4) V = 2;
    SPGNN_CHECK(p.F / V <= (int64_t{1} << 26), InvalidArgument, "gnnone: feature width ", p.F,
                " is too large");
    geo.V = V;
    geo.nv = static_cast<int>(p.F / V);
    // Between one and two 8-lane chunks of 16-byte vectors (64 < F < 128, F % 8 == 0), one pass
    // of 16 lanes: the Reddit shape (233K columns, where 8 lanes is the widest chunk within 60%
    // of L2), bfloat16 copy_u, F = 72 / 80 / 96 / 104 / 112 / 120: 2.62 / 2.75 / 3.04 / 3.53 /
    // 3.79 / 4.35 ms against two passes' 4.17 / 4.42 / 4.37 / 6.90 / 6.77 / 8.05 (H200,
    // SPGNN_GNNONE_MAX_GROUP=16 against the default; float32 `auto` 3.65-5.83 there). A half
    // pass moves half the feature bytes of a float32 one, so the per-pass walk over the
    // non-zeros weighs more than the larger L2 working set: one pass won even where the matrix
    // exceeded L2 (F = 120, 56 MB). Full second passes (F = 128) keep two.
    // Likewise 128 < F < 256 (17-31 vectors) in one pass of 32 lanes: F = 136 / 152 / 184 5.95 /
    // 6.45 / 7.75 ms against three or four passes of 8, 10.08 / 10.85 / 12.66 (float32 `auto`
    // 9.99 / 10.05 / 10.24; H200, the Reddit shape, bfloat16 copy_u, SPGNN_GNNONE_MAX_GROUP=32);
    // two passes of 16 lose at F = 168 / 200 (8.24 / 9.00 against 7.10 / 8.53) and tie from
    // 232. F = 256 keeps four full passes of 8 over 128-byte-aligned slices (6.89 ms).
    if (V == 8 && max_group == 8 && !gnnone::forced_max_group() && geo.nv > 8 && geo.nv % 8 != 0 &&
        geo.nv < 32)
      max_group = geo.nv < 16 ? 16 : 32;
    while ((1 << geo.g_log2) < geo.nv && (2 << geo.g_log2) <= max_group) ++geo.g_log2;
    geo.passes = (geo.nv + (1 << geo.g_log2) - 1) >> geo.g_log2;
  } else {
    geo = gnnone::make_geometry(p.F, prm.vector_loads, ptrs, 3, max_group);
  }
  a.nv = geo.nv;
  a.g_log2 = geo.g_log2;
  a.passes = geo.passes;
  // An unset cache_size starts above the registry's 128 on large graphs; small graphs still
  // halve it (launch_cache). Half: 256 (R-MAT scale 21, bfloat16, H100: 1.16 against 1.35 ms at
  // F = 64, 3.65 against 3.87 at F = 256: longer sub-slices cut fewer rows), and 512 where a
  // warp holds four groups of 8 lanes (F = 64 with 16-byte loads, or any F under an 8-lane chunk
  // as on the Reddit shape): bfloat16, F = 64, 0.972 / 2.963 / 2.626 ms against 0.990 / 3.174 /
  // 2.678 on kron21 / products / the Reddit shape, 10.67 against 10.85 at F = 256 on the Reddit
  // shape; with two groups 512 lost (kron21, F = 128 and 256: 1.717 / 3.396 against 1.674 /
  // 3.314). float32: 256, 1.5-3.5% faster than 128 on all seven cases measured (kron21 and the
  // Reddit shape at F = 64 / 128 / 256, products at 64), 512 slower on each. 1024 lost
  // everywhere. (H100, one run, docs/BENCHMARKS.md "gnnone's cache size".) A block whose shared
  // memory would not fit the device (warps named, cache unset) halves it too. The float32
  // ablations keep the registry's start.
  gnnone::Params lp = prm;
  if (prm.auto_cache && prm.nze_cache && prm.consecutive) {
    lp.cache = elem::kIsHalf<T> && geo.V == 8 && geo.g_log2 == 3 ? 512 : 256;
    const int64_t limit = launch_limits(g.device()).max_smem_per_block;
    while (lp.cache > 32 &&
           int64_t{prm.warps} * gnnone::warp_smem_bytes<IndexT>(lp.cache, 32 >> geo.g_log2) > limit)
      lp.cache /= 2;
  }
  a.cache = gnnone::launch_cache(lp, g.nnz(), g.device().index, geo.g_log2);
  const gnnone::Skew skew =
      gnnone::sub_slice_skew(a.cache, geo.g_log2, prm.nze_cache && prm.consecutive);
  a.skew_shift = skew.shift;
  a.skew_words = skew.words;
  a.warp_bytes = gnnone::warp_smem_bytes<IndexT>(a.cache, a.skew_words);
  a.mean = p.reduce == Reduce::mean;
  a.consecutive = prm.consecutive;
  const int64_t n = g.n_rows;
  const int64_t L = a.cache / (32 >> geo.g_log2);
  std::unique_ptr<StreamScratch> scratch;
  std::shared_ptr<const CutRows> cut;
  if constexpr (elem::kIsHalf<T>) {
    // The cut rows' partials go to float32 scratch rows (zeroed here), rounded into the output
    // by the fix-up kernel after the main one (the main kernel zeroes the short empty runs, the
    // fix-up kernel the long ones).
    cut = cut_rows<IndexT>(g, L);
    a.slot = cut->slot.template data<int32_t>();
    if (cut->n_cut > 0) {
      const size_t bytes = static_cast<size_t>(cut->n_cut) * static_cast<size_t>(p.F) * 4;
      scratch = std::make_unique<StreamScratch>(bytes, st);
      a.part = scratch->get();
      SPGNN_CUDA_CHECK(cudaMemsetAsync(a.part, 0, bytes, st));
    }
  } else if (prm.consecutive) {
    // Zero-fill. Consecutive groups store every row that lies inside one sub-slice of
    // L = cache / groups non-zeros; only empty rows and rows cut by a sub-slice boundary need
    // zeros first (a pass over rowptr instead of a memset of the whole output). Round-robin
    // groups own no row, so there the whole output is cleared.
    const int64_t warps = (n + 31) / 32;
    const int64_t blocks = (warps + 7) / 8;
    const bool vec4 = p.F % 4 == 0 && gnnone::aligned_to(a.out, 16);
    zero_rows_kernel<IndexT><<<static_cast<unsigned>(blocks), 256, 0, st>>>(a.rowptr, n, a.out,
                                                                            p.F, L, vec4);
    SPGNN_CUDA_CHECK_LAUNCH();
  } else {
    SPGNN_CUDA_CHECK(cudaMemsetAsync(a.out, 0, static_cast<size_t>(n * p.F) * 4, st));
  }
  if constexpr (elem::kIsHalf<T>) {
    switch (geo.V) {
      case 8: launch_v<IndexT, T, 8>(a, mode, prm.nze_cache, prm.warps, st); break;
      case 2: launch_v<IndexT, T, 2>(a, mode, prm.nze_cache, prm.warps, st); break;
      default: launch_v<IndexT, T, 1>(a, mode, prm.nze_cache, prm.warps, st); break;
    }
    if (cut->n_fix > 0) {
      const int64_t blocks = (cut->n_fix + 7) / 8;
      SPGNN_CHECK(blocks <= 0x7fffffff, InvalidArgument, "gnnone spmm: too many rows to fix up");
      gnnone_half_fixup_kernel<T><<<static_cast<unsigned>(blocks), 256, 0, st>>>(
          cut->fix.template data<int64_t>(), cut->n_fix, cut->n_cut, a.part, a.out, p.F,
          p.F % 2 == 0 && gnnone::aligned_to(a.out, 4));
      SPGNN_CUDA_CHECK_LAUNCH();
    }
  } else {
    switch (geo.V) {
      case 4: launch_v<IndexT, T, 4>(a, mode, prm.nze_cache, prm.warps, st); break;
      case 2: launch_v<IndexT, T, 2>(a, mode, prm.nze_cache, prm.warps, st); break;
      default: launch_v<IndexT, T, 1>(a, mode, prm.nze_cache, prm.warps, st); break;
    }
  }
}

}  // namespace

std::string gnnone_spmm_supports(const SpmmProblem& p) {
  if (!p.g->device().is_cuda())
    return "graph and tensors are on the CPU; gnnone runs on CUDA devices";
  if (p.dtype != DType::f32 && !is_half(p.dtype))
    return std::string("gnnone reads float32, float16 or bfloat16 features, not ") +
           dtype_name(p.dtype);
  if (p.reduce == Reduce::max || p.reduce == Reduce::min)
    return std::string("reduce '") + name(p.reduce) +
           "' is not implemented by gnnone (sum and mean are); use cusparse-free strategies "
           "such as cpu_ref, or auto";
  if (p.g->index_dtype() != DType::i32 && p.g->index_dtype() != DType::i64)
    return "graph index dtype must be int32 or int64";
  return "";
}

void gnnone_spmm(const SpmmProblem& p, const Schedule& s) {
  const Graph& g = *p.g;
  const gnnone::Params prm = gnnone::read_params(OpKind::spmm, s, g.nnz(), g.device().index);
  gnnone::DeviceGuard guard(g.device().index);
  const cudaStream_t st = as_stream(p.stream);
  const int64_t n = g.n_rows;
  if (n == 0 || p.F == 0) return;
  if (g.nnz() == 0) {  // every row is empty: the answer is all zeros
    SPGNN_CUDA_CHECK(cudaMemsetAsync(p.out->raw(), 0,
                                     static_cast<size_t>(n) * static_cast<size_t>(p.F) *
                                         dtype_size(p.dtype), st));
    return;
  }
  SPGNN_CHECK(!is_half(p.dtype) || (prm.nze_cache && prm.consecutive), InvalidArgument,
              "gnnone: float16/bfloat16 need nze_cache=1 and consecutive=1 (the ablations are "
              "float32 only)");
  elem::dispatch(p.dtype, [&](auto t) {
    using T = decltype(t);
    if (g.index_dtype() == DType::i64) run<int64_t, T>(p, prm, st);
    else run<int32_t, T>(p, prm, st);
  });
}

}  // namespace spgnn::detail
