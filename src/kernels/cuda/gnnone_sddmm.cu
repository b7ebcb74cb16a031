// GNNOne SDDMM (HPDC'24, §4) on the row-sorted COO graph: out[e] = op(lhs[t_l(e)], rhs[t_r(e)]).
//
// Stage 1 is SpMM's: warp w caches the (row, col) of its CACHE consecutive non-zeros in shared
// memory (nze_cache=0 reads them in stage 2 instead).
// Stage 2: thread groups of G lanes, V features per lane, each group walking consecutive cached
//   non-zeros. Rows wider than one group (64 floats by default) are split into feature chunks,
//   one per gridDim.y; a dot adds its chunk partials into the zeroed output with atomics. An operand indexed by the destination (target v) is the same for every edge of a
//   row, so it stays in registers until the row changes (consecutive scheduling makes that the
//   common case: one load per row, not per edge). The other operand is gathered per edge, a
//   batch of kUnroll edges' loads in flight before the first use. dot: each lane sums its V
//   products, then log2(G) __shfl_xor_sync rounds reduce within the group; the group leader
//   stages the result in shared memory and the warp writes its CACHE outputs coalesced at the
//   end. Element-wise ops store a V-wide vector per lane and edge.
// The stage-2 loop runs the same trip count on every lane of a warp (edges past the graph's end
// are masked, not skipped) so the full-warp shuffles stay converged.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/gnnone_common.cuh"

namespace spgnn::detail {

namespace {

using gnnone::kUnroll;

enum OperandKind : int { kByCol = 0, kByRow = 1, kByEdge = 2 };  // targets u, v, e

template <class IndexT>
struct SddmmArgs {
  const IndexT* __restrict__ row;
  const IndexT* __restrict__ col;
  const float* __restrict__ a;  // the reused operand when kReuseA (target v)
  const float* __restrict__ b;  // gathered per edge; nullptr when the op ignores it
  float* __restrict__ out;
  int64_t nnz;
  int64_t F;
  int a_kind, b_kind;
  int op;      // SddmmOp
  bool swap;   // lhs is b and rhs is a
  int nv;
  int g_log2;
  int passes;
  int cache;
  int skew_shift;  // gnnone::sub_slice_skew
  int skew_words;
  int row_bytes;   // F * 4
  int warp_bytes;
  bool consecutive;
  bool dot_atomic;  // dot over several feature chunks: out was zeroed, chunks add into it
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

template <class IndexT, int V, bool kReuseA, bool kDot, bool kCache>
__global__ void __launch_bounds__(gnnone::kMaxThreads)
    gnnone_sddmm_kernel(const SddmmArgs<IndexT> p) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t s = (static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + warp) * p.cache;
  if (s >= p.nnz) return;  // whole warps only
  const int cnt = static_cast<int>(min(static_cast<int64_t>(p.cache), p.nnz - s));

  // Non-zero k sits at k + (k >> sk) (gnnone::sub_slice_skew: no bank conflicts between the
  // groups' sub-slices).
  const int sk = p.skew_shift;
  IndexT* s_row = reinterpret_cast<IndexT*>(smem + warp * p.warp_bytes);  // [cache + 2 + skew]
  IndexT* s_col = s_row + p.cache + 2 + p.skew_words;                       // [cache + skew]
  float* s_dot = reinterpret_cast<float*>(s_col + p.cache + p.skew_words);  // [cache + skew]

  if constexpr (kCache) {
#pragma unroll 4
    for (int k = lane; k < p.cache; k += 32) {
      const bool ok = k < cnt;
      const int pk = k + (k >> sk);
      s_row[pk + 1] = ok ? p.row[s + k] : IndexT(-1);
      s_col[pk] = ok ? p.col[s + k] : IndexT(0);
    }
    __syncwarp();
  }

  const int G = 1 << p.g_log2;
  const int NG = 32 >> p.g_log2;
  const int grp = lane >> p.g_log2;
  const int gl = lane & (G - 1);
  const int L = p.cache / NG;  // edges per group (same on every lane)
  const int base = p.consecutive ? grp * L : grp;
  const int stride = p.consecutive ? 1 : NG;
  const int gsk = base >> sk;  // the group's skew, constant over its sub-slice
  auto row_at = [&](int k) -> IndexT {
    if constexpr (kCache) return s_row[k + gsk + 1];
    else return __ldg(p.row + s + k);
  };
  auto col_at = [&](int k) -> IndexT {
    if constexpr (kCache) return s_col[k + gsk];
    else return __ldg(p.col + s + k);
  };
  const bool uses_b = p.b != nullptr;

  // Feature chunks of G vectors go to gridDim.y (all blocks of chunk 0 are dispatched first, so
  // the L2 working set is one chunk wide); a dot's chunk partials meet in `out` by atomics.
  for (int pass = blockIdx.y; pass < p.passes; pass += gridDim.y) {
    const int vi = pass * G + gl;
    const bool lane_ok = vi < p.nv;
    const int64_t foff = static_cast<int64_t>(vi) * V;
    float av[V];
    gnnone::zero_vec(av);
    IndexT cur = -1;

    // Operand rows from this lane's vector, by a 32-bit row size in bytes (one IMAD.WIDE an
    // address with int32 indices, as in gnnone_spmm.cu).
    auto row_of = [&](const float* base_ptr, int kind, IndexT r, IndexT c, int k) -> const float* {
      const auto* lane_ptr = reinterpret_cast<const unsigned char*>(base_ptr + foff);
      const int64_t off = kind == kByEdge ? gnnone::row_offset(s + k, p.row_bytes)
                                          : gnnone::row_offset(kind == kByCol ? c : r, p.row_bytes);
      return reinterpret_cast<const float*>(lane_ptr + off);
    };

    // One batch of `kB` edges starting at step t: loads first, then use.
    auto batch = [&](int t, auto kB_tag) {
      constexpr int kB = decltype(kB_tag)::value;
      int kk[kB];
      bool ok[kB];
      IndexT r[kB];
      float bv[kB][V], an[kB][V];
      bool need[kB];
      [[maybe_unused]] IndexT prev = cur;
#pragma unroll
      for (int j = 0; j < kB; ++j) {
        kk[j] = base + (t + j) * stride;
        ok[j] = kk[j] < cnt;
        r[j] = ok[j] ? row_at(kk[j]) : IndexT(-1);
        const IndexT c = ok[j] ? col_at(kk[j]) : IndexT(0);
        if (uses_b && ok[j] && lane_ok)
          gnnone::ldg_vec<V>(bv[j], row_of(p.b, p.b_kind, r[j], c, kk[j]));
        else
          gnnone::zero_vec(bv[j]);
        if constexpr (kReuseA) {
          // Load the row's operand only where the row changes.
          need[j] = ok[j] && r[j] != prev;
          if (ok[j]) prev = r[j];
          if (need[j] && lane_ok) gnnone::ldg_vec<V>(an[j], row_of(p.a, kByRow, r[j], c, kk[j]));
          else gnnone::zero_vec(an[j]);
        } else {
          need[j] = false;
          if (ok[j] && lane_ok)
            gnnone::ldg_vec<V>(an[j], row_of(p.a, p.a_kind, r[j], c, kk[j]));
          else
            gnnone::zero_vec(an[j]);
        }
      }
      [[maybe_unused]] float part[kB];
#pragma unroll
      for (int j = 0; j < kB; ++j) {
        const float* av_j = an[j];
        if constexpr (kReuseA) {
          if (need[j]) {
#pragma unroll
            for (int q = 0; q < V; ++q) av[q] = an[j][q];
            cur = r[j];
          }
          av_j = av;
        }
        if constexpr (kDot) {
          float d = 0.f;
#pragma unroll
          for (int q = 0; q < V; ++q) d = fmaf(av_j[q], bv[j][q], d);
          part[j] = d;
        } else {
          float res[V];
#pragma unroll
          for (int q = 0; q < V; ++q)
            res[q] = p.swap ? combine(p.op, bv[j][q], av_j[q]) : combine(p.op, av_j[q], bv[j][q]);
          if (ok[j] && lane_ok) gnnone::st_vec(p.out + (s + kk[j]) * p.F + foff, res);
        }
      }
      if constexpr (kDot) {
        for (int off = G >> 1; off > 0; off >>= 1) {
#pragma unroll
          for (int j = 0; j < kB; ++j) part[j] += __shfl_xor_sync(0xffffffffu, part[j], off);
        }
        if (gl == 0) {
#pragma unroll
          for (int j = 0; j < kB; ++j)
            if (ok[j])
              s_dot[kk[j] + gsk] =
                  (pass == static_cast<int>(blockIdx.y) ? 0.f : s_dot[kk[j] + gsk]) + part[j];
        }
      }
    };

    int t = 0;
    for (; t + kUnroll <= L; t += kUnroll) batch(t, std::integral_constant<int, kUnroll>{});
    for (; t < L; ++t) batch(t, std::integral_constant<int, 1>{});
  }
  if constexpr (kDot) {
    __syncwarp();
    if (p.dot_atomic) {
      for (int k = lane; k < cnt; k += 32) atomicAdd(p.out + s + k, s_dot[k + (k >> sk)]);
    } else {
      for (int k = lane; k < cnt; k += 32) p.out[s + k] = s_dot[k + (k >> sk)];
    }
  }
}

template <class IndexT, int V, bool kReuseA, bool kDot>
void launch4(const SddmmArgs<IndexT>& args, bool cache, int warps, cudaStream_t st) {
  const int64_t slices = (args.nnz + args.cache - 1) / args.cache;
  const int64_t blocks = (slices + warps - 1) / warps;
  SPGNN_CHECK(blocks <= 0x7fffffff, InvalidArgument, "gnnone sddmm: graph too large for one grid");
  // The nze_cache=0 ablation keeps the same layout (its dot staging lives in it too).
  const size_t smem = static_cast<size_t>(warps) * args.warp_bytes;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(std::min(args.passes, 65535)));
  if (cache) {
    auto kernel = gnnone_sddmm_kernel<IndexT, V, kReuseA, kDot, true>;
    gnnone::allow_smem(kernel, smem);
    kernel<<<grid, warps * 32, smem, st>>>(args);
  } else {
    auto kernel = gnnone_sddmm_kernel<IndexT, V, kReuseA, kDot, false>;
    gnnone::allow_smem(kernel, smem);
    kernel<<<grid, warps * 32, smem, st>>>(args);
  }
  SPGNN_CUDA_CHECK_LAUNCH();
}

template <class IndexT, int V>
void launch_v(const SddmmArgs<IndexT>& args, bool reuse, bool dot, bool cache, int warps,
              cudaStream_t st) {
  if (reuse) {
    if (dot) launch4<IndexT, V, true, true>(args, cache, warps, st);
    else launch4<IndexT, V, true, false>(args, cache, warps, st);
  } else {
    if (dot) launch4<IndexT, V, false, true>(args, cache, warps, st);
    else launch4<IndexT, V, false, false>(args, cache, warps, st);
  }
}

int kind_of(Target t) { return t == Target::u ? kByCol : t == Target::v ? kByRow : kByEdge; }

template <class IndexT>
void run(const SddmmProblem& p, const gnnone::Params& prm, cudaStream_t st) {
  const Graph& g = *p.g;
  SddmmArgs<IndexT> a{};
  a.row = g.row.data<IndexT>();
  a.col = g.col.data<IndexT>();
  a.out = p.out->data<float>();
  a.nnz = g.nnz();
  a.F = p.F;
  a.row_bytes = gnnone::row_bytes32(p.F, 4, "gnnone sddmm");
  a.op = static_cast<int>(p.op);
  // Canonical sides: `a` is the operand kept in registers (target v) when there is one, `b` is
  // gathered per edge; `swap` remembers that lhs became b. A one-sided op (copy_*) uses only a.
  const Tensor* lhs = p.uses_lhs() ? p.lhs : nullptr;
  const Tensor* rhs = p.uses_rhs() ? p.rhs : nullptr;
  const Tensor* ta = lhs;
  const Tensor* tb = rhs;
  Target at = p.lhs_target, bt = p.rhs_target;
  bool swap = false;
  if (!lhs || (rhs && p.rhs_target == Target::v && p.lhs_target != Target::v)) {
    std::swap(ta, tb);
    std::swap(at, bt);
    swap = true;
  }
  a.a = ta->data<float>();
  a.b = tb ? tb->data<float>() : nullptr;
  a.a_kind = kind_of(at);
  a.b_kind = kind_of(bt);
  a.swap = swap;
  const bool reuse = at == Target::v;
  const bool dot = p.op == SddmmOp::dot;
  const void* ptrs[3] = {a.a, a.b, dot ? nullptr : a.out};
  const gnnone::Geometry geo =
      gnnone::make_geometry(p.F, prm.vector_loads, ptrs, 3,
                            gnnone::max_group_lanes(p.F, std::max(g.n_cols, g.n_rows),
                                                    g.device().index));
  a.nv = geo.nv;
  a.g_log2 = geo.g_log2;
  a.passes = geo.passes;
  a.cache = gnnone::launch_cache(prm, g.nnz(), g.device().index, geo.g_log2);
  const gnnone::Skew skew =
      gnnone::sub_slice_skew(a.cache, geo.g_log2, prm.nze_cache && prm.consecutive);
  a.skew_shift = skew.shift;
  a.skew_words = skew.words;
  a.warp_bytes = gnnone::warp_smem_bytes<IndexT>(a.cache, a.skew_words);
  a.consecutive = prm.consecutive;
  a.dot_atomic = dot && geo.passes > 1;
  if (a.dot_atomic)
    SPGNN_CUDA_CHECK(cudaMemsetAsync(a.out, 0, static_cast<size_t>(a.nnz) * 4, st));
  switch (geo.V) {
    case 4: launch_v<IndexT, 4>(a, reuse, dot, prm.nze_cache, prm.warps, st); break;
    case 2: launch_v<IndexT, 2>(a, reuse, dot, prm.nze_cache, prm.warps, st); break;
    default: launch_v<IndexT, 1>(a, reuse, dot, prm.nze_cache, prm.warps, st); break;
  }
}

}  // namespace

std::string gnnone_sddmm_supports(const SddmmProblem& p) {
  if (!p.g->device().is_cuda())
    return "graph and tensors are on the CPU; gnnone runs on CUDA devices";
  if (p.dtype != DType::f32)
    return std::string("gnnone reads float32 features, not ") + dtype_name(p.dtype) +
           " (float16/bfloat16: shuffle)";
  if (p.g->index_dtype() != DType::i32 && p.g->index_dtype() != DType::i64)
    return "graph index dtype must be int32 or int64";
  return "";
}

void gnnone_sddmm(const SddmmProblem& p, const Schedule& s) {
  const Graph& g = *p.g;
  const gnnone::Params prm = gnnone::read_params(OpKind::sddmm, s, g.nnz(), g.device().index);
  if (g.nnz() == 0 || p.F == 0) return;
  gnnone::DeviceGuard guard(g.device().index);
  const cudaStream_t st = as_stream(p.stream);
  if (g.index_dtype() == DType::i64) run<int64_t>(p, prm, st);
  else run<int32_t>(p, prm, st);
}

}  // namespace spgnn::detail
