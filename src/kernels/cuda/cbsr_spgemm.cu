// MaxK-GNN forward (ASPLOS'24, §4.1): out = A * X with X in CBSR (k kept values per row), a
// row-wise product with a shared-memory accumulation buffer.
//
// One warp per segment (<= S edges of one row; cbsr_common.cuh). Its lane groups (L lanes each,
// V values per lane) take the segment's edges round-robin, load the source row's k values and k
// column indices with coalesced vector loads (k * 5 bytes per edge with u8 indices instead of
// F * 4 for a dense row: the traffic saving the paper builds on) and add w_e * value at the
// indices into an F-float buffer in shared memory. In the private-row form outside lean
// launches, the warp loads the segment's columns (and weights) 32 edges at a time, a chunk
// ahead, and the groups take theirs by shuffle: each edge then waits on one load (its CBSR row),
// not two in a chain (8-13% on the Reddit shape, docs/BENCHMARKS_MAXK.md). Two forms:
//   private rows (default): each group has its own buffer row and adds with plain
//     read-add-writes (cbsr_spgemm_private_kernel below explains why that is safe);
//   one row per warp (private_rows=0, or when the groups' rows do not fit): shared-memory
//     atomics, which compile to compare-and-swap loops for floats (1.2-1.9x slower on the H100).
// The buffer is the warp's own, so no block barrier is needed. Then the warp writes the buffer
// (the sum of its groups' rows) to the output row with coalesced float4 accesses: a plain store
// when the segment is the whole row (rows without edges store zeros this way too), a vector
// atomic when the row was split. Only split rows are zeroed beforehand. F too wide for the
// buffer (or smem_buffer=0): every product goes straight to global memory with atomics after a
// memset of the output.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda/cbsr_common.cuh"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/maxk_kernels.hpp"

namespace spgnn::detail {

// ---- the segment table (shared with cbsr_sspmm.cu through cbsr_common.cuh) -------------------
namespace cbsr {

namespace {
struct SegmentsOwner {
  Segments view;
  DeviceBuffer row, begin, split;
};

template <class I>
std::shared_ptr<SegmentsOwner> build_segments(const Graph& g, int64_t S, bool skip_empty) {
  const std::vector<I> rp = g.rowptr.to_vector<I>();
  std::vector<I> seg_row, seg_begin, split;
  seg_row.reserve(static_cast<size_t>(g.n_rows));
  seg_begin.reserve(static_cast<size_t>(g.n_rows));
  for (int64_t r = 0; r < g.n_rows; ++r) {
    const int64_t b = rp[size_t(r)], deg = int64_t(rp[size_t(r) + 1]) - b;
    if (deg > S) split.push_back(static_cast<I>(r));
    if (deg == 0 && skip_empty) continue;
    const int64_t pieces = deg == 0 ? 1 : (deg + S - 1) / S;
    for (int64_t q = 0; q < pieces; ++q) {
      seg_row.push_back(static_cast<I>(r));
      seg_begin.push_back(static_cast<I>(b + q * S));
    }
  }
  auto o = std::make_shared<SegmentsOwner>();
  auto upload = [](DeviceBuffer& buf, const std::vector<I>& v) {
    buf.resize(v.size() * sizeof(I));
    if (!v.empty())
      SPGNN_CUDA_CHECK(cudaMemcpy(buf.get(), v.data(), v.size() * sizeof(I),
                                  cudaMemcpyHostToDevice));
  };
  upload(o->row, seg_row);
  upload(o->begin, seg_begin);
  upload(o->split, split);
  o->view.segment = S;
  o->view.count = static_cast<int64_t>(seg_row.size());
  o->view.n_split = static_cast<int64_t>(split.size());
  o->view.row = o->row.get();
  o->view.begin = o->begin.get();
  o->view.split_rows = o->split.get();
  return o;
}
}  // namespace

Segments segments_for(const Graph& g, int64_t segment, bool skip_empty) {
  // Keyed by index dtype too: a copy of a Graph with its arrays re-typed shares the cache.
  const std::string key = "cbsr:segments:" + std::to_string(segment) + ":" +
                          dtype_name(g.index_dtype()) + (skip_empty ? ":nonempty" : "");
  std::lock_guard<std::mutex> lock(g.cache->mutex);
  auto it = g.cache->items.find(key);
  if (it != g.cache->items.end()) return std::static_pointer_cast<SegmentsOwner>(it->second)->view;
  std::shared_ptr<SegmentsOwner> o = g.index_dtype() == DType::i64
                                         ? build_segments<int64_t>(g, segment, skip_empty)
                                         : build_segments<int32_t>(g, segment, skip_empty);
  g.cache->items[key] = o;
  return o->view;
}

int64_t default_segment(const Graph& g) {
  return default_segment(g.n_rows > 0 ? double(g.nnz()) / double(g.n_rows) : 0.0);
}

}  // namespace cbsr

namespace {

using cbsr::kUnroll;

template <class I, class IdxT>
struct SpgemmArgs {
  const I* __restrict__ rowptr;
  const I* __restrict__ col;
  const I* __restrict__ seg_row;
  const I* __restrict__ seg_begin;
  const float* __restrict__ w;   // nullptr: every weight is 1
  const float* __restrict__ xd;  // [n_cols, k]
  const IdxT* __restrict__ xi;   // [n_cols, k]
  float* __restrict__ out;       // [n_rows, F]
  int64_t F, k, segment, nseg;
  int nv, l_log2, passes;
  int row_bytes;                 // shared bytes of one F-float row (a multiple of 16)
  bool vec4_out;                 // F % 4 == 0 and out 16-byte aligned
};

// Loads a batch of kUnroll edges for one lane group, edge j at e0 + j * G: its weight, and the V
// values and column indices of its CBSR row at this lane's offset voff. Edges past e_end (or a
// lane without values) are marked !ok; kSentinel also gives them columns that compare above any
// real one (the private-row kernel's ascending check reads them).
template <bool kSentinel, class I, class IdxT, int V>
__device__ __forceinline__ void load_edge_batch(const SpgemmArgs<I, IdxT>& a, int64_t e0, int G,
                                                int64_t e_end, bool lane_ok, int64_t voff,
                                                float (&d)[kUnroll][V], int (&c)[kUnroll][V],
                                                float (&wt)[kUnroll], bool (&ok)[kUnroll]) {
#pragma unroll
  for (int j = 0; j < kUnroll; ++j) {
    const int64_t ej = e0 + static_cast<int64_t>(j) * G;
    ok[j] = lane_ok && ej < e_end;
    if (ok[j]) {
      const int64_t u = __ldg(a.col + ej);
      wt[j] = a.w ? __ldg(a.w + ej) : 1.f;
      cbsr::ldg_vec<V>(d[j], a.xd + u * a.k + voff);
      cbsr::ldg_idx<IdxT, V>(c[j], a.xi + u * a.k + voff);
    } else if constexpr (kSentinel) {
#pragma unroll
      for (int q = 0; q < V; ++q) c[j][q] = 0x7fffffff;
    }
  }
}

template <class I, class IdxT, int V, bool kSmem>
__global__ void __launch_bounds__(cbsr::kMaxWarps * 32)
    cbsr_spgemm_kernel(const SpgemmArgs<I, IdxT> a) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t s = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + warp;
  if (s >= a.nseg) return;  // whole warps only: no block-level barrier below
  const int64_t r = a.seg_row[s];
  const int64_t row_begin = a.rowptr[r], row_end = a.rowptr[r + 1];
  const int64_t e_begin = a.seg_begin[s];
  const int64_t e_end = min(e_begin + a.segment, row_end);
  const bool split = row_end - row_begin > a.segment;
  const int F = static_cast<int>(a.F);
  float* orow = a.out + r * a.F;

  float* acc = orow;  // buffer-less path: the (zeroed) output row itself
  if constexpr (kSmem) {
    acc = reinterpret_cast<float*>(smem + warp * a.row_bytes);
    for (int f = lane; f < F; f += 32) acc[f] = 0.f;
    __syncwarp();
  }

  const int L = 1 << a.l_log2;
  const int G = 32 >> a.l_log2;
  const int grp = lane >> a.l_log2;
  const int gl = lane & (L - 1);
  for (int pass = 0; pass < a.passes; ++pass) {
    const int vi = pass * L + gl;
    const bool lane_ok = vi < a.nv;
    const int64_t voff = static_cast<int64_t>(vi) * V;
    for (int64_t e = e_begin + grp; e < e_end; e += static_cast<int64_t>(G) * kUnroll) {
      float d[kUnroll][V], wt[kUnroll];
      int c[kUnroll][V];
      bool ok[kUnroll];
      load_edge_batch<false>(a, e, G, e_end, lane_ok, voff, d, c, wt, ok);
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) {
        if (!ok[j]) continue;
#pragma unroll
        for (int q = 0; q < V; ++q)
          if (c[j][q] < F) atomicAdd(acc + c[j][q], wt[j] * d[j][q]);  // entries >= F: skipped
      }
    }
  }
  if constexpr (kSmem) {
    __syncwarp();
    if (a.vec4_out) {
      const float4* b4 = reinterpret_cast<const float4*>(acc);
      float4* o4 = reinterpret_cast<float4*>(orow);
      for (int f = lane; f < F / 4; f += 32) {
        const float4 v = b4[f];
        if (split) {
          const float t[4] = {v.x, v.y, v.z, v.w};
          cbsr::atomic_add_vec<4>(orow + 4 * f, t);
        } else {
          o4[f] = v;
        }
      }
    } else {
      for (int f = lane; f < F; f += 32) {
        if (split) atomicAdd(orow + f, acc[f]);
        else orow[f] = acc[f];
      }
    }
  }
}

// The private-row forms: every lane group keeps its own F-float row, so its adds need no
// atomics. A group's lanes hold distinct positions of one CBSR row, and a CBSR row's columns are
// strictly ascending, hence distinct: plain read-add-writes cannot collide inside a group. A row
// that breaks the format (repeated or unsorted columns, which only a caller-built CBSR can have)
// is caught by the group's own comparison of neighbouring columns and added with atomics, so the
// sum stays exact. The warp's G groups share its segment (edges dealt round-robin, one edge per
// group per step, __syncwarp between steps, so a group's consecutive edges never race either),
// and the warp adds the G rows at the end. (Giving each group a segment of its own, as MaxK-GNN's
// edge groups do, lost on every graph of the suite: see docs/GPU_NOTES.md.)
template <class I, class IdxT, int V, int kRegs>
__global__ void __launch_bounds__(cbsr::lean_threads(kRegs), cbsr::lean_min_blocks(kRegs))
    cbsr_spgemm_private_kernel(const SpgemmArgs<I, IdxT> a) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int L = 1 << a.l_log2;
  const int G = 32 >> a.l_log2;
  const int grp = lane >> a.l_log2;
  const int gl = lane & (L - 1);
  const unsigned gmask = (L == 32 ? 0xffffffffu : ((1u << L) - 1u)) << (grp * L);
  const int64_t s = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + warp;
  if (s >= a.nseg) return;  // whole warps only: no block-level barrier below
  const int64_t r = a.seg_row[s];
  const int64_t row_begin = a.rowptr[r], row_end = a.rowptr[r + 1];
  const int64_t e_begin = a.seg_begin[s];
  const int64_t e_end = min(e_begin + a.segment, row_end);
  const bool split = row_end - row_begin > a.segment;
  const int F = static_cast<int>(a.F);
  float* orow = a.out + r * a.F;

  const int stride4 = a.row_bytes / 16;  // float4s per private row
  float4* rows4 = reinterpret_cast<float4*>(smem + static_cast<size_t>(warp) * G * a.row_bytes);
  for (int i = lane; i < G * stride4; i += 32) rows4[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  __syncwarp();
  float* acc = reinterpret_cast<float*>(rows4 + grp * stride4);

  // A batch of kUnroll edges per group, loaded: add w_e * value at each column.
  auto add_batch = [&](const float (&d)[kUnroll][V], const int (&c)[kUnroll][V],
                       const float (&wt)[kUnroll], const bool (&ok)[kUnroll]) {
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      // Strictly ascending across the group's positions of this step: within the lane, and
      // against the previous lane's last value. Only lanes that hold values compare: a row of
      // k = 96 at V = 4 leaves lanes 24..31 of the group idle, and their equal sentinels must
      // not send the group's real values to the atomic path (the lane before an active lane is
      // active too, so `prev` is always a real value).
      bool asc = true;
      if (ok[j]) {
#pragma unroll
        for (int q = 1; q < V; ++q) asc &= c[j][q - 1] < c[j][q];
      }
      const int prev = __shfl_up_sync(0xffffffffu, c[j][V - 1], 1, L);
      if (gl > 0 && ok[j]) asc &= prev < c[j][0];
      const bool plain = (__ballot_sync(0xffffffffu, !asc) & gmask) == 0;
      if (ok[j]) {
#pragma unroll
        for (int q = 0; q < V; ++q) {
          if (c[j][q] >= F) continue;  // entries >= F: skipped
          if (plain) acc[c[j][q]] += wt[j] * d[j][q];
          else atomicAdd(acc + c[j][q], wt[j] * d[j][q]);
        }
      }
      __syncwarp();
    }
  };

  for (int pass = 0; pass < a.passes; ++pass) {
    const int vi = pass * L + gl;
    const bool lane_ok = vi < a.nv;
    const int64_t voff = static_cast<int64_t>(vi) * V;
    if constexpr (kRegs == 0) {
      // The segment's columns and weights come a warp-wide chunk of 32 edges at a time, one
      // coalesced load per chunk issued a chunk ahead; each group takes its edges of the chunk
      // (c0 + jj * G + grp, jj < L) by shuffle. An edge's chain of dependent loads is then one
      // deep (its CBSR row) instead of two (its column, then the row). Not in lean launches,
      // whose short rows rarely fill a chunk and whose 40 registers have no room for it.
      cbsr::EdgeChunks<I> edges(a.col, a.w, e_begin, e_end, lane);
      for (int64_t c0 = e_begin; c0 < e_end; c0 += 32) {
        edges.prefetch(c0 + 32);
        // Per group, the chunk's edges rounded up (warp-uniform: the loop holds shuffles).
        const int n_chunk = edges.count(c0);
        const int j_end = (n_chunk + G - 1) >> (5 - a.l_log2);  // G = 2^(5 - l_log2)
        for (int j0 = 0; j0 < j_end; j0 += kUnroll) {
          float d[kUnroll][V], wt[kUnroll];
          int c[kUnroll][V];
          bool ok[kUnroll];
#pragma unroll
          for (int j = 0; j < kUnroll; ++j) {
            const int at = (j0 + j) * G + grp;
            const I u = edges.col_at(at);
            wt[j] = edges.w_at(at);
            ok[j] = lane_ok && at < n_chunk;
            if (ok[j]) {
              cbsr::ldg_vec<V>(d[j], a.xd + static_cast<int64_t>(u) * a.k + voff);
              cbsr::ldg_idx<IdxT, V>(c[j], a.xi + static_cast<int64_t>(u) * a.k + voff);
            } else {
#pragma unroll
              for (int q = 0; q < V; ++q) c[j][q] = 0x7fffffff;
            }
          }
          add_batch(d, c, wt, ok);
        }
        edges.advance();
      }
    } else {
      const int64_t step = static_cast<int64_t>(G) * kUnroll;
      for (int64_t e0 = e_begin; e0 < e_end; e0 += step) {
        float d[kUnroll][V], wt[kUnroll];
        int c[kUnroll][V];
        bool ok[kUnroll];
        load_edge_batch<true>(a, e0 + grp, G, e_end, lane_ok, voff, d, c, wt, ok);
        add_batch(d, c, wt, ok);
      }
    }
  }

  // The output row: the sum of the warp's G rows.
  if (a.vec4_out) {
    float4* o4 = reinterpret_cast<float4*>(orow);
    for (int f = lane; f < F / 4; f += 32) {
      float4 v = rows4[f];
      for (int g = 1; g < G; ++g) {
        const float4 t = rows4[g * stride4 + f];
        v.x += t.x; v.y += t.y; v.z += t.z; v.w += t.w;
      }
      if (split) {
        const float t[4] = {v.x, v.y, v.z, v.w};
        cbsr::atomic_add_vec<4>(orow + 4 * f, t);
      } else {
        o4[f] = v;
      }
    }
  } else {
    const float* src = reinterpret_cast<const float*>(rows4);
    for (int f = lane; f < F; f += 32) {
      float v = src[f];
      for (int g = 1; g < G; ++g) v += src[g * 4 * stride4 + f];
      if (split) atomicAdd(orow + f, v);
      else orow[f] = v;
    }
  }
}

// Zeroes the output rows that segments add into with atomics (rows longer than S).
template <class I>
__global__ void zero_split_rows_kernel(const I* __restrict__ rows, int64_t n_split, float* out,
                                       int64_t F) {
  const int lane = threadIdx.x & 31;
  const int64_t w = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (w >= n_split) return;
  float* o = out + static_cast<int64_t>(rows[w]) * F;
  for (int64_t f = lane; f < F; f += 32) o[f] = 0.f;
}

// The kernel forms: a row per lane group (plain adds), a row per warp (shared atomics), no
// buffer (global atomics into the zeroed output).
enum class Form { private_rows, shared, global };

template <class I, class IdxT, int V>
void launch(Form form, int regs, const SpgemmArgs<I, IdxT>& a, const cbsr::BlockShape& bs,
            cudaStream_t st) {
  const int64_t blocks = (a.nseg + bs.warps - 1) / bs.warps;
  SPGNN_CHECK(blocks <= 0x7fffffff, InvalidArgument, "cbsr_spgemm: graph too large for one grid");
  auto kernel = form == Form::private_rows
                    ? (regs ? cbsr_spgemm_private_kernel<I, IdxT, V, cbsr::kLeanRegs>
                            : cbsr_spgemm_private_kernel<I, IdxT, V, 0>)
                : form == Form::shared ? cbsr_spgemm_kernel<I, IdxT, V, true>
                                       : cbsr_spgemm_kernel<I, IdxT, V, false>;
  const size_t smem = form == Form::global ? 0 : bs.smem_bytes;
  cbsr::allow_smem(kernel, smem);
  kernel<<<static_cast<unsigned>(blocks), bs.warps * 32, smem, st>>>(a);
  SPGNN_CUDA_CHECK_LAUNCH();
}

template <class I, class IdxT>
void run(const Graph& g, const float* w, const Cbsr& x, Tensor& out, const CbsrParams& prm,
         cudaStream_t st) {
  const int64_t S = prm.segment > 0 ? prm.segment : cbsr::default_segment(g);
  const cbsr::Segments seg = cbsr::segments_for(g, S);
  SpgemmArgs<I, IdxT> a{};
  a.rowptr = g.rowptr.data<I>();
  a.col = g.col.data<I>();
  a.seg_row = static_cast<const I*>(seg.row);
  a.seg_begin = static_cast<const I*>(seg.begin);
  a.w = w;
  a.xd = x.data.data<float>();
  a.xi = x.index.data<IdxT>();
  a.out = out.data<float>();
  a.F = x.F;
  a.k = x.k;
  a.segment = S;
  a.nseg = seg.count;
  const bool want_private = prm.private_rows != 0;
  const double avg_degree = g.n_rows > 0 ? double(g.nnz()) / double(g.n_rows) : 0.0;
  // Values per lane (measured on the H100, docs/BENCHMARKS_MAXK.md): rows of hundreds of edges
  // take float4 lanes, i.e. the most lane groups (8 at k = 16), whose rows' zeroing and adding
  // the long rows amortise; short rows (kron21) take scalar lanes up to k = 32 (at most 2
  // groups), float4 above (no second pass over the edges). float2 lanes lost in every case.
  int64_t max_v = 4;
  if (prm.vec > 0) max_v = prm.vec;
  else if (want_private && avg_degree < 64.0 && x.k <= 32) max_v = 1;
  const void* ptrs[2] = {a.xd, a.xi};
  const int bytes[2] = {4, static_cast<int>(sizeof(IdxT))};
  const cbsr::Geometry geo =
      cbsr::make_geometry(x.k, ptrs, bytes, 2, static_cast<int>(std::min<int64_t>(max_v, 4)));
  a.nv = geo.nv;
  a.l_log2 = geo.l_log2;
  a.passes = geo.passes;
  a.row_bytes = static_cast<int>((x.F * 4 + 15) / 16 * 16);
  a.vec4_out = x.F % 4 == 0 && cbsr::aligned_to(a.out, 16);
  Form form = Form::global;
  cbsr::BlockShape bs = cbsr::block_shape(x.F, prm.warps, false);
  if (prm.smem_buffer && want_private) {
    const int groups = 32 >> geo.l_log2;
    bs = cbsr::block_shape(x.F, prm.warps, true, groups);
    // By default, not at the price of blocks under 4 warps (small k on wide rows: many groups).
    if (bs.smem && (prm.private_rows == 1 || bs.warps >= std::min(4, bs.warps_requested)))
      form = Form::private_rows;
  }
  if (prm.smem_buffer && form == Form::global) {
    bs = cbsr::block_shape(x.F, prm.warps, true);
    if (bs.smem) form = Form::shared;
  }
  const size_t out_bytes = static_cast<size_t>(g.n_rows) * static_cast<size_t>(x.F) * 4;
  if (form == Form::global) {
    SPGNN_CUDA_CHECK(cudaMemsetAsync(a.out, 0, out_bytes, st));
  } else if (seg.n_split > 0) {
    const int64_t blocks = (seg.n_split + 7) / 8;
    zero_split_rows_kernel<I><<<static_cast<unsigned>(blocks), 256, 0, st>>>(
        static_cast<const I*>(seg.split_rows), seg.n_split, a.out, x.F);
    SPGNN_CUDA_CHECK_LAUNCH();
  }
  if (a.nseg == 0) return;
  // Short rows with scalar lanes: the lean launch (more warps per SM; see cbsr_common.cuh).
  const bool lean_default = avg_degree < 64.0 && geo.V == 1;
  const int regs = form == Form::private_rows && (prm.regs > 0 || (prm.regs < 0 && lean_default))
                       ? cbsr::kLeanRegs
                       : 0;
  if (regs) cbsr::make_lean(bs);
  switch (geo.V) {
    case 4: launch<I, IdxT, 4>(form, regs, a, bs, st); break;
    case 2: launch<I, IdxT, 2>(form, regs, a, bs, st); break;
    default: launch<I, IdxT, 1>(form, regs, a, bs, st); break;
  }
}

}  // namespace

void cuda_cbsr_spgemm(const Graph& g, const float* w, const Cbsr& x, Tensor& out,
                      const CbsrParams& prm, void* stream) {
  cbsr::DeviceGuard guard(g.device().index);
  const cudaStream_t st = as_stream(stream);
  if (g.n_rows == 0) return;
  const bool i64 = g.index_dtype() == DType::i64;
  const bool u8 = x.index.dtype() == DType::u8;
  if (i64 && u8) run<int64_t, uint8_t>(g, w, x, out, prm, st);
  else if (i64) run<int64_t, uint16_t>(g, w, x, out, prm, st);
  else if (u8) run<int32_t, uint8_t>(g, w, x, out, prm, st);
  else run<int32_t, uint16_t>(g, w, x, out, prm, st);
}

}  // namespace spgnn::detail
