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
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/gnnone_common.cuh"
#include "kernels/cuda/spmm_message.cuh"

namespace spgnn::detail {

namespace {

using gnnone::kUnroll;

// The message modes (a broadcast edge value is cached in stage 1) and u_op_e's binary op, a
// run-time switch uniform across the warp: spmm_message.cuh, shared with the row-parallel kernels.
using namespace rowpar;

template <class IndexT>
struct SpmmArgs {
  const IndexT* __restrict__ row;
  const IndexT* __restrict__ col;
  const IndexT* __restrict__ rowptr;
  const float* __restrict__ u;
  const float* __restrict__ e;
  float* __restrict__ out;
  int64_t nnz;
  int64_t F;
  int nv;          // vectors per feature row
  int g_log2;      // log2(thread-group size)
  int passes;      // passes of 32 vectors when nv > 32
  int cache;       // non-zeros per warp
  int warp_bytes;  // shared bytes per warp
  int binop;
  bool mean;
  bool consecutive;
};

template <class IndexT, int V, int kMode, bool kCache>
__global__ void __launch_bounds__(gnnone::kMaxThreads)
    gnnone_spmm_kernel(const SpmmArgs<IndexT> p) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t s = (static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + warp) * p.cache;
  if (s >= p.nnz) return;  // whole warps only: no block-level barrier below
  const int cnt = static_cast<int>(min(static_cast<int64_t>(p.cache), p.nnz - s));

  IndexT* s_row = reinterpret_cast<IndexT*>(smem + warp * p.warp_bytes);  // [cache + 2]
  IndexT* s_col = s_row + p.cache + 2;                                      // [cache]
  float* s_val = reinterpret_cast<float*>(s_col + p.cache);                // [cache]

  // ---- stage 1: coalesced load of the warp's non-zeros into shared memory ----
  if constexpr (kCache) {
#pragma unroll 4
    for (int k = lane; k < p.cache; k += 32) {
      const bool ok = k < cnt;
      s_row[k + 1] = ok ? p.row[s + k] : IndexT(-1);
      s_col[k] = ok ? p.col[s + k] : IndexT(0);
      if constexpr (kMode == kUOpEScalar) s_val[k] = ok ? __ldg(p.e + s + k) : 0.f;
    }
    if (lane == 0) s_row[0] = s > 0 ? p.row[s - 1] : IndexT(-1);
    if (lane == 1) s_row[p.cache + 1] = s + p.cache < p.nnz ? p.row[s + p.cache] : IndexT(-1);
    __syncwarp();
  }
  // Row of local non-zero k in [-1, cache]; -1 outside the graph.
  auto row_at = [&](int k) -> IndexT {
    if constexpr (kCache) {
      return s_row[k + 1];
    } else {
      const int64_t gk = s + k;
      return (gk >= 0 && gk < p.nnz) ? __ldg(p.row + gk) : IndexT(-1);
    }
  };
  auto col_at = [&](int k) -> IndexT {
    if constexpr (kCache) return s_col[k];
    else return __ldg(p.col + s + k);
  };
  auto val_at = [&](int k) -> float {
    if constexpr (kCache) return s_val[k];
    else return __ldg(p.e + s + k);
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
  // Is the row at the sub-slice's start (end) continued before (after) it? Round-robin groups
  // never own a row, so every flush there is atomic.
  bool head_split = true, tail_split = true;
  if (p.consecutive) {
    head_split = row_at(a - 1) == row_at(a);
    tail_split = row_at(b) == row_at(b - 1);
  }
  const bool all_atomic = !p.consecutive;

  // Feature chunks are spread over gridDim.y, not looped inside the warp: every block of chunk 0
  // is dispatched before those of chunk 1, so the feature columns in flight at any time (and
  // the L2 working set) are one chunk wide.
  for (int pass = blockIdx.y; pass < p.passes; pass += gridDim.y) {
    const int vi = pass * G + gl;
    const bool lane_ok = vi < p.nv;
    const int64_t foff = static_cast<int64_t>(vi) * V;
    float acc[V];
    gnnone::zero_vec(acc);
    IndexT cur = -1;
    bool first_run = true;

    auto flush = [&](IndexT r, bool atomic) {
      float scale = 1.f;
      if (p.mean) scale = 1.f / static_cast<float>(__ldg(p.rowptr + r + 1) - __ldg(p.rowptr + r));
      if (lane_ok) {
        float v[V];
#pragma unroll
        for (int q = 0; q < V; ++q) v[q] = acc[q] * scale;
        float* o = p.out + static_cast<int64_t>(r) * p.F + foff;
        if (atomic) gnnone::atomic_add_vec(o, v);
        else gnnone::st_vec(o, v);
      }
    };
    // Folds non-zero contributions x (and the edge operand y / w) into the running row sum.
    auto step = [&](IndexT r, const float (&x)[V], const float (&y)[V], float w) {
      if (r != cur) {
        if (cur >= 0) {
          flush(cur, all_atomic || (first_run && head_split));
          first_run = false;
        }
        cur = r;
        gnnone::zero_vec(acc);
      }
      add_message<kMode>(acc, x, y, w, p.binop);
    };
    // Issues the loads of non-zero k (all of a batch before any use).
    auto load = [&](int k, IndexT& r, float (&x)[V], float (&y)[V], float& w) {
      r = row_at(k);
      if constexpr (kMode != kCopyE) {
        const IndexT c = col_at(k);
        if (lane_ok) gnnone::ldg_vec<V>(x, p.u + static_cast<int64_t>(c) * p.F + foff);
        else gnnone::zero_vec(x);
      }
      if constexpr (kMode == kCopyE || kMode == kUOpEWide) {
        if (lane_ok) gnnone::ldg_vec<V>(y, p.e + (s + k) * p.F + foff);
        else gnnone::zero_vec(y);
      }
      if constexpr (kMode == kUOpEScalar) w = val_at(k);
      else w = 0.f;
    };

    int k = a;
    for (; k + (kUnroll - 1) * stride < b; k += kUnroll * stride) {
      IndexT r[kUnroll];
      float x[kUnroll][V], y[kUnroll][V], w[kUnroll];
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) load(k + j * stride, r[j], x[j], y[j], w[j]);
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) step(r[j], x[j], y[j], w[j]);
    }
    for (; k < b; k += stride) {
      IndexT r;
      float x[V], y[V], w;
      load(k, r, x, y, w);
      step(r, x, y, w);
    }
    flush(cur, all_atomic || (first_run && head_split) || tail_split);
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

template <class IndexT, int V, int kMode>
void launch_mode(const SpmmArgs<IndexT>& args, bool cache, int warps, cudaStream_t st) {
  const int64_t slices = (args.nnz + args.cache - 1) / args.cache;
  const int64_t blocks = (slices + warps - 1) / warps;
  SPGNN_CHECK(blocks <= 0x7fffffff, InvalidArgument, "gnnone spmm: graph too large for one grid");
  const size_t smem = static_cast<size_t>(warps) * args.warp_bytes;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(std::min(args.passes, 65535)));
  if (cache) {
    auto kernel = gnnone_spmm_kernel<IndexT, V, kMode, true>;
    gnnone::allow_smem(kernel, smem);
    kernel<<<grid, warps * 32, smem, st>>>(args);
  } else {
    auto kernel = gnnone_spmm_kernel<IndexT, V, kMode, false>;
    kernel<<<grid, warps * 32, 0, st>>>(args);
  }
  SPGNN_CUDA_CHECK_LAUNCH();
}

template <class IndexT, int V>
void launch_v(const SpmmArgs<IndexT>& args, int mode, bool cache, int warps, cudaStream_t st) {
  switch (mode) {
    case kCopyU: launch_mode<IndexT, V, kCopyU>(args, cache, warps, st); break;
    case kCopyE: launch_mode<IndexT, V, kCopyE>(args, cache, warps, st); break;
    case kUOpEScalar: launch_mode<IndexT, V, kUOpEScalar>(args, cache, warps, st); break;
    default: launch_mode<IndexT, V, kUOpEWide>(args, cache, warps, st); break;
  }
}

template <class IndexT>
void run(const SpmmProblem& p, const gnnone::Params& prm, cudaStream_t st) {
  const Graph& g = *p.g;
  SpmmArgs<IndexT> a{};
  a.row = g.row.data<IndexT>();
  a.col = g.col.data<IndexT>();
  a.rowptr = g.rowptr.data<IndexT>();
  a.u = p.uses_u() ? p.u->data<float>() : nullptr;
  a.e = p.uses_e() ? p.e->data<float>() : nullptr;
  a.out = p.out->data<float>();
  a.nnz = g.nnz();
  a.F = p.F;
  const int mode = mode_of(p);
  a.binop = binop_of(p.op);
  // Vector accesses touch u, out and (wide) e rows: all must be aligned for the width.
  const void* ptrs[3] = {a.u, a.out, mode == kUOpEScalar ? nullptr : a.e};
  const gnnone::Geometry geo =
      gnnone::make_geometry(p.F, prm.vector_loads, ptrs, 3,
                            gnnone::max_group_lanes(p.F, g.n_cols, g.device().index));
  a.nv = geo.nv;
  a.g_log2 = geo.g_log2;
  a.passes = geo.passes;
  a.cache = gnnone::launch_cache(prm, g.nnz(), g.device().index, geo.g_log2);
  a.warp_bytes = gnnone::warp_smem_bytes<IndexT>(a.cache);
  a.mean = p.reduce == Reduce::mean;
  a.consecutive = prm.consecutive;
  // Zero-fill. Consecutive groups store every row that lies inside one sub-slice of
  // L = cache / groups non-zeros; only empty rows and rows cut by a sub-slice boundary need zeros
  // first (a pass over rowptr instead of a memset of the whole output). Round-robin groups own
  // no row, so there the whole output is cleared.
  const int64_t n = g.n_rows;
  if (prm.consecutive) {
    const int64_t L = a.cache / (32 >> geo.g_log2);
    const int64_t warps = (n + 31) / 32;
    const int64_t blocks = (warps + 7) / 8;
    const bool vec4 = p.F % 4 == 0 && gnnone::aligned_to(a.out, 16);
    zero_rows_kernel<IndexT><<<static_cast<unsigned>(blocks), 256, 0, st>>>(a.rowptr, n, a.out,
                                                                            p.F, L, vec4);
    SPGNN_CUDA_CHECK_LAUNCH();
  } else {
    SPGNN_CUDA_CHECK(cudaMemsetAsync(a.out, 0, static_cast<size_t>(n * p.F) * 4, st));
  }
  switch (geo.V) {
    case 4: launch_v<IndexT, 4>(a, mode, prm.nze_cache, prm.warps, st); break;
    case 2: launch_v<IndexT, 2>(a, mode, prm.nze_cache, prm.warps, st); break;
    default: launch_v<IndexT, 1>(a, mode, prm.nze_cache, prm.warps, st); break;
  }
}

}  // namespace

std::string gnnone_spmm_supports(const SpmmProblem& p) {
  if (!p.g->device().is_cuda())
    return "graph and tensors are on the CPU; gnnone runs on CUDA devices";
  if (p.dtype != DType::f32)
    return std::string("gnnone reads float32 features, not ") + dtype_name(p.dtype) +
           " (float16/bfloat16: warp_vertex)";
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
    SPGNN_CUDA_CHECK(cudaMemsetAsync(p.out->data<float>(), 0,
                                     static_cast<size_t>(n) * static_cast<size_t>(p.F) * 4, st));
    return;
  }
  if (g.index_dtype() == DType::i64) run<int64_t>(p, prm, st);
  else run<int32_t>(p, prm, st);
}

}  // namespace spgnn::detail
