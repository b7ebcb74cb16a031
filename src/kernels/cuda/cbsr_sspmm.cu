// MaxK-GNN backward (ASPLOS'24, §4.2): d_data = (A^T * d_out) sampled at the CBSR pattern of X,
// in the outer-product form: A is read in its stored row order (A^T is the same storage read the
// other way, no second copy of the graph). Two forms split the edges among warps:
//
// Segments (flat=0; by default at k > 16 on graphs of average degree >= 64, e.g. Reddit's ~490,
// where staging the row pays; cbsr_shape.hpp has the measurements): one warp
// per segment (<= S edges of row v; cbsr_common.cuh; rows without edges have none). A segment
// that gathers at least F values prefetches the dense row d_out[v, :] into shared memory with
// coalesced float4 loads, once for all its edges; a shorter one reads the values it needs from
// global memory. F too wide for the buffer (or smem_buffer=0): every gather reads global memory.
//
// Flat (flat=1; by default below average degree 64, e.g. kron21's 16 with half the rows empty,
// and at k <= 16 everywhere):
// warp w takes the edges [w * C, (w + 1) * C) of the row-sorted COO list (C = `segment`, default
// cbsr::flat_chunk: 64 edges on short rows, 256 on long, shorter on graphs too small to fill the
// card), whatever rows they belong to, and reads each edge's row from g.row. On such graphs most
// rows have a few edges: a warp per segment would leave most of its lane groups idle and pay a
// chain of dependent loads (segment -> row -> rowptr) for 1-3 edges, while a chunk keeps every
// group busy and needs no segment table (no host preprocessing). Gathers read d_out through the
// read-only cache, where consecutive edges of one row hit the same sectors. Each edge is a chain of
// three dependent loads (its column, the column's CBSR indices, the gathers), so the flat form is a
// three-stage pipeline over batches of edges (cbsr_sspmm_flat_kernel).
//
// In both, the lane groups take the edges (v, u) round-robin: each lane loads V consecutive
// CBSR column indices of u (one coalesced load per group), gathers d_out[v, index] (from the
// staged row where there is one, the irregular access on chip), multiplies by w_e and adds the V
// products into d_data[u] with one vector atomic (red.global.add.v4.f32 on sm_90); a group's
// atomics cover d_data[u]'s k contiguous floats, so they coalesce too. d_data is zeroed first
// (n_cols * k floats, small next to the edge work).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/cbsr_common.cuh"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/gnnone_common.cuh"
#include "kernels/cuda/maxk_kernels.hpp"

namespace spgnn::detail {

namespace {

using cbsr::kUnroll;

template <class I, class IdxT>
struct SspmmArgs {
  const I* __restrict__ rowptr;
  const I* __restrict__ row;        // the flat form: each edge's row
  const I* __restrict__ col;
  const I* __restrict__ seg_row;    // the segment form: the segment table
  const I* __restrict__ seg_begin;
  const float* __restrict__ w;      // nullptr: every weight is 1
  const float* __restrict__ d_out;  // [n_rows, F]
  const IdxT* __restrict__ xi;      // [n_cols, k]
  float* __restrict__ d_data;       // [n_cols, k]
  int64_t F, k, nnz;
  int64_t segment, nseg;            // edges per segment or chunk; segments or chunks
  int nv, l_log2, passes;
  int row_bytes;
  int f_bytes, k_bytes, k_idx_bytes;  // F * 4, k * 4, k * sizeof(IdxT)
  bool vec4_in;                     // F % 4 == 0 and d_out 16-byte aligned
  bool stream_edges;                // the flat form: edge list read with streaming loads
};

// The segment form. kSmem: the staged row lives in shared memory (else the gathers read d_out).
template <class I, class IdxT, int V, bool kSmem, int kRegs>
__global__ void __launch_bounds__(cbsr::lean_threads(kRegs), cbsr::lean_min_blocks(kRegs))
    cbsr_sspmm_kernel(const SspmmArgs<I, IdxT> a) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int L = 1 << a.l_log2;
  const int G = 32 >> a.l_log2;
  const int grp = lane >> a.l_log2;
  const int gl = lane & (L - 1);
  const int64_t s = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + warp;
  if (s >= a.nseg) return;  // whole warps only: no block-level barrier below
  const int F = static_cast<int>(a.F);
  const int64_t r = a.seg_row[s];
  const int64_t e_begin = a.seg_begin[s];
  const int64_t e_end = min(e_begin + a.segment, static_cast<int64_t>(a.rowptr[r + 1]));
  if (e_begin >= e_end) return;  // a row without edges contributes nothing
  const float* drow = a.d_out + r * a.F;
  // A short segment gathers fewer values than the row holds: it reads them where they are
  // instead of staging the whole row (on skewed graphs most rows are short).
  const bool stage = kSmem && (e_end - e_begin) * a.k >= a.F;
  const float* buf = nullptr;
  if constexpr (kSmem) {
    if (stage) {
      float* b = reinterpret_cast<float*>(smem + static_cast<size_t>(warp) * a.row_bytes);
      if (a.vec4_in) {
        const float4* d4 = reinterpret_cast<const float4*>(drow);
        float4* b4 = reinterpret_cast<float4*>(b);
        for (int f = lane; f < F / 4; f += 32) b4[f] = __ldg(d4 + f);
      } else {
        for (int f = lane; f < F; f += 32) b[f] = __ldg(drow + f);
      }
      __syncwarp();
      buf = b;
    }
  }
  auto gather = [&](const float* src, int c) -> float {
    if (c >= F) return 0.f;  // entries >= F: skipped
    if (kSmem && stage) return buf[c];
    return __ldg(src + c);
  };

  // A batch of kUnroll edges per group, their CBSR indices loaded: gather, scale, add.
  auto add_batch = [&](unsigned char* dd_lane, const I (&u)[kUnroll],
                       const float (&wt)[kUnroll], const int (&c)[kUnroll][V],
                       const bool (&ok)[kUnroll]) {
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      if (!ok[j]) continue;
      float v[V];
#pragma unroll
      for (int q = 0; q < V; ++q) v[q] = wt[j] * gather(drow, c[j][q]);
      cbsr::atomic_add_vec<V>(
          reinterpret_cast<float*>(dd_lane + gnnone::row_offset(u[j], a.k_bytes)), v);
    }
  };

  for (int pass = 0; pass < a.passes; ++pass) {
    const int vi = pass * L + gl;
    const int64_t voff = static_cast<int64_t>(vi) * V;
    // Rows by 32-bit byte strides: one IMAD.WIDE an address with int32 indices
    // (gnnone::row_offset), not a 64-bit product.
    const auto* xi_lane = reinterpret_cast<const unsigned char*>(a.xi + voff);
    auto* dd_lane = reinterpret_cast<unsigned char*>(a.d_data + voff);
    if constexpr (kRegs == 0) {
      // As in the forward (cbsr_spgemm.cu): the segment's columns and weights a 32-edge chunk
      // at a time, loaded a chunk ahead, taken by shuffle, so an edge's chain is its CBSR
      // indices, then the gather. Every lane stays for the shuffles; idle lanes only skip work.
      const bool lane_ok = vi < a.nv;
      cbsr::EdgeChunks<I> edges(a.col, a.w, e_begin, e_end, lane);
      for (int64_t c0 = e_begin; c0 < e_end; c0 += 32) {
        edges.prefetch(c0 + 32);
        const int n_chunk = edges.count(c0);
        const int j_end = (n_chunk + G - 1) >> (5 - a.l_log2);  // G = 2^(5 - l_log2)
        for (int j0 = 0; j0 < j_end; j0 += kUnroll) {
          I u[kUnroll];
          float wt[kUnroll];
          int c[kUnroll][V];
          bool ok[kUnroll];
#pragma unroll
          for (int j = 0; j < kUnroll; ++j) {
            const int at = (j0 + j) * G + grp;
            u[j] = edges.col_at(at);
            wt[j] = edges.w_at(at);
            ok[j] = lane_ok && at < n_chunk;
            if (ok[j])
              cbsr::ldg_idx<IdxT, V>(c[j], reinterpret_cast<const IdxT*>(
                                                xi_lane + gnnone::row_offset(u[j], a.k_idx_bytes)));
          }
          add_batch(dd_lane, u, wt, c, ok);
        }
        edges.advance();
      }
    } else {
      if (vi >= a.nv) break;  // no shuffles in this loop: idle lanes may leave
      const int64_t step = static_cast<int64_t>(G) * kUnroll;
      for (int64_t e0 = e_begin + grp; e0 < e_end; e0 += step) {
        I u[kUnroll];
        float wt[kUnroll];
        int c[kUnroll][V];
        bool ok[kUnroll];
#pragma unroll
        for (int j = 0; j < kUnroll; ++j) {
          const int64_t ej = e0 + static_cast<int64_t>(j) * G;
          ok[j] = ej < e_end;
          if (ok[j]) {
            u[j] = __ldg(a.col + ej);
            wt[j] = a.w ? __ldg(a.w + ej) : 1.f;
            cbsr::ldg_idx<IdxT, V>(c[j], reinterpret_cast<const IdxT*>(
                                              xi_lane + gnnone::row_offset(u[j], a.k_idx_bytes)));
          }
        }
        add_batch(dd_lane, u, wt, c, ok);
      }
    }
  }
}

// Edges per lane group and pipeline stage in the flat form. At 4 the three stages' registers
// spill (ptxas: 350-700 bytes of stack at the 64-register bound); at 2 nothing spills.
constexpr int kFlatBatch = 2;

// The flat form as a three-stage software pipeline. Each edge is a chain of three dependent
// loads: its column u (with its row and weight), u's CBSR indices, then the gathers from d_out's
// row. Issued batch by batch, a warp waits out all three in turn (ncu, kron21 at k = 16: 90% of
// its stall cycles on L1TEX scoreboards, at 75% of L2 and 50% of DRAM throughput). Here a lane
// group holds three batches of B edges at different stages: while batch b gathers, batch b + 1
// loads its indices and batch b + 2 its columns, so one wait covers three batches' loads.
template <class I, class IdxT, int V, int B, int kRegs>
__global__ void __launch_bounds__(cbsr::lean_threads(kRegs), cbsr::lean_min_blocks(kRegs))
    cbsr_sspmm_flat_kernel(const SspmmArgs<I, IdxT> a) {
  using Word = cbsr::idx_word_t<IdxT, V>;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int L = 1 << a.l_log2;
  const int G = 32 >> a.l_log2;
  const int grp = lane >> a.l_log2;
  const int gl = lane & (L - 1);
  const int64_t s = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + warp;
  if (s >= a.nseg) return;
  const int F = static_cast<int>(a.F);
  // Batch b of this group: edges first + (b * B + j) * G, j < B (the warp's groups interleave,
  // so each load of a batch is coalesced across the warp).
  const int64_t first = s * a.segment + grp;
  const int64_t e_end = min(s * a.segment + a.segment, a.nnz);
  const int64_t span = int64_t{G} * B;
  const int nb = static_cast<int>((e_end - s * a.segment + span - 1) / span);
  const auto* dout = reinterpret_cast<const unsigned char*>(a.d_out);
  // kron21's d_data (134 MB at k = 16) outgrows L2: the reductions keep their lines, the
  // gathered d_out rows (read by one row's consecutive edges, then never) leave first: kron21
  // k = 16 / 64 5% / 3% faster, nothing either way where d_data fits (docs/BENCHMARKS_MAXK.md).
  const uint64_t keep = cbsr::l2_policy_evict_last();
  const uint64_t pass_through = cbsr::l2_policy_evict_first();
  struct Edge {
    I u;  // -1: no edge (past the chunk)
    I r;
    float w;
  };
  for (int pass = 0; pass < a.passes; ++pass) {
    const int vi = pass * L + gl;
    if (vi >= a.nv) break;  // no shuffles below: idle lanes may leave
    const int64_t voff = static_cast<int64_t>(vi) * V;
    const auto* xi_lane = reinterpret_cast<const unsigned char*>(a.xi + voff);
    auto* dd_lane = reinterpret_cast<unsigned char*>(a.d_data + voff);
    auto load_edges = [&](int b, Edge (&E)[B]) {
#pragma unroll
      for (int j = 0; j < B; ++j) {
        const int64_t e = first + (static_cast<int64_t>(b) * B + j) * G;
        E[j].u = I(-1);
        if (b < nb && e < e_end) {
          if (a.stream_edges) {  // cbsr::flat_stream_edges
            E[j].u = __ldcs(a.col + e);
            E[j].r = __ldcs(a.row + e);
            E[j].w = a.w ? __ldcs(a.w + e) : 1.f;
          } else {
            E[j].u = __ldg(a.col + e);
            E[j].r = __ldg(a.row + e);
            E[j].w = a.w ? __ldg(a.w + e) : 1.f;
          }
        }
      }
    };
    auto load_idx = [&](const Edge (&E)[B], Word (&X)[B]) {
#pragma unroll
      for (int j = 0; j < B; ++j)
        if (E[j].u >= 0)
          X[j] = cbsr::ldg_idx_word<IdxT, V>(reinterpret_cast<const IdxT*>(
              xi_lane + gnnone::row_offset(E[j].u, a.k_idx_bytes)));
    };
    auto scatter = [&](const Edge (&E)[B], const Word (&X)[B]) {
      float v[B][V];
#pragma unroll
      for (int j = 0; j < B; ++j) {
        if (E[j].u < 0) continue;
        int c[V];
        cbsr::unpack_idx<V>(c, X[j]);
        const auto* src =
            reinterpret_cast<const float*>(dout + gnnone::row_offset(E[j].r, a.f_bytes));
#pragma unroll
        for (int q = 0; q < V; ++q)  // entries >= F: skipped
          v[j][q] = c[q] < F ? E[j].w * cbsr::ldg_l2(src + c[q], pass_through) : 0.f;
      }
#pragma unroll
      for (int j = 0; j < B; ++j)
        if (E[j].u >= 0)
          cbsr::atomic_add_vec_l2<V>(
              reinterpret_cast<float*>(dd_lane + gnnone::row_offset(E[j].u, a.k_bytes)), v[j],
              keep);
    };
    Edge e0[B], e1[B], e2[B];
    Word x0[B], x1[B];
    load_edges(0, e0);
    load_edges(1, e1);
    load_idx(e0, x0);
    for (int b = 0; b < nb; ++b) {
      load_edges(b + 2, e2);
      load_idx(e1, x1);
      scatter(e0, x0);
#pragma unroll
      for (int j = 0; j < B; ++j) {
        e0[j] = e1[j];
        x0[j] = x1[j];
        e1[j] = e2[j];
      }
    }
  }
}

enum class Form { global, shared, flat };

template <class I, class IdxT, int V>
void launch(Form form, int regs, const SspmmArgs<I, IdxT>& a, const cbsr::BlockShape& bs,
            cudaStream_t st) {
  const int64_t blocks = (a.nseg + bs.warps - 1) / bs.warps;
  SPGNN_CHECK(blocks <= 0x7fffffff, InvalidArgument, "cbsr_sspmm: graph too large for one grid");
  constexpr int kLean = cbsr::kLeanRegs;
  auto kernel = form == Form::flat   ? (regs ? cbsr_sspmm_flat_kernel<I, IdxT, V, kFlatBatch, kLean>
                                             : cbsr_sspmm_flat_kernel<I, IdxT, V, kFlatBatch, 0>)
                : form == Form::global ? cbsr_sspmm_kernel<I, IdxT, V, false, 0>
                : regs                 ? cbsr_sspmm_kernel<I, IdxT, V, true, kLean>
                                       : cbsr_sspmm_kernel<I, IdxT, V, true, 0>;
  const size_t bytes = form == Form::shared ? bs.smem_bytes : 0;
  cbsr::allow_smem(kernel, bytes);
  kernel<<<static_cast<unsigned>(blocks), bs.warps * 32, bytes, st>>>(a);
  SPGNN_CUDA_CHECK_LAUNCH();
}

template <class I, class IdxT>
void run(const Graph& g, const float* w, const Tensor& d_out, const Cbsr& x, Tensor& d_data,
         const CbsrParams& prm, cudaStream_t st) {
  SPGNN_CUDA_CHECK(cudaMemsetAsync(d_data.data<float>(), 0,
                                   static_cast<size_t>(g.n_cols) * static_cast<size_t>(x.k) * 4,
                                   st));
  if (g.nnz() == 0 || g.n_rows == 0) return;
  const double avg_degree = double(g.nnz()) / double(g.n_rows);
  const bool flat = cbsr::sspmm_flat(prm.flat, avg_degree, x.k);  // cbsr_shape.hpp
  SspmmArgs<I, IdxT> a{};
  a.rowptr = g.rowptr.data<I>();
  a.col = g.col.data<I>();
  a.w = w;
  a.d_out = d_out.data<float>();
  a.xi = x.index.data<IdxT>();
  a.d_data = d_data.data<float>();
  a.F = x.F;
  a.k = x.k;
  a.nnz = g.nnz();
  if (flat) {
    a.row = g.row.data<I>();
    const int64_t fill = cbsr::kFlatFillWarpsPerSm * gnnone::sm_count(g.device().index);
    a.segment = prm.segment > 0 ? prm.segment : cbsr::flat_chunk(avg_degree, a.nnz, fill);
    a.nseg = (a.nnz + a.segment - 1) / a.segment;
    a.stream_edges = cbsr::flat_stream_edges(prm.stream_edges, x.k);
  } else {
    const int64_t S = prm.segment > 0 ? prm.segment : cbsr::default_segment(g);
    const cbsr::Segments seg = cbsr::segments_for(g, S, /*skip_empty=*/true);
    a.seg_row = static_cast<const I*>(seg.row);
    a.seg_begin = static_cast<const I*>(seg.begin);
    a.segment = S;
    a.nseg = seg.count;
  }
  const void* ptrs[2] = {a.d_data, a.xi};
  const int bytes[2] = {4, static_cast<int>(sizeof(IdxT))};
  const cbsr::Geometry geo = cbsr::make_geometry(
      x.k, ptrs, bytes, 2, static_cast<int>(prm.vec > 0 ? std::min<int64_t>(prm.vec, 4) : 4));
  a.nv = geo.nv;
  a.l_log2 = geo.l_log2;
  a.passes = geo.passes;
  a.row_bytes = static_cast<int>((x.F * 4 + 15) / 16 * 16);
  a.f_bytes = gnnone::row_bytes32(x.F, 4, "cbsr_sspmm");
  a.k_bytes = static_cast<int>(x.k * 4);  // k <= F
  a.k_idx_bytes = static_cast<int>(x.k * static_cast<int64_t>(sizeof(IdxT)));
  a.vec4_in = x.F % 4 == 0 && cbsr::aligned_to(a.d_out, 16);
  cbsr::BlockShape bs = cbsr::block_shape(x.F, prm.warps, !flat && prm.smem_buffer);
  const Form form = flat ? Form::flat : bs.smem ? Form::shared : Form::global;
  // Lean launches (shared-row and flat forms) only when asked: the shared-row form was never
  // better lean by default, and the flat form has not been measured lean yet.
  const int regs = form != Form::global && prm.regs > 0 ? cbsr::kLeanRegs : 0;
  if (regs) cbsr::make_lean(bs);
  switch (geo.V) {
    case 4: launch<I, IdxT, 4>(form, regs, a, bs, st); break;
    case 2: launch<I, IdxT, 2>(form, regs, a, bs, st); break;
    default: launch<I, IdxT, 1>(form, regs, a, bs, st); break;
  }
}

}  // namespace

void cuda_cbsr_sspmm(const Graph& g, const float* w, const Tensor& d_out, const Cbsr& x,
                     Tensor& d_data, const CbsrParams& prm, void* stream) {
  cbsr::DeviceGuard guard(g.device().index);
  const cudaStream_t st = as_stream(stream);
  if (g.n_cols == 0) return;
  const bool i64 = g.index_dtype() == DType::i64;
  const bool u8 = x.index.dtype() == DType::u8;
  if (i64 && u8) run<int64_t, uint8_t>(g, w, d_out, x, d_data, prm, st);
  else if (i64) run<int64_t, uint16_t>(g, w, d_out, x, d_data, prm, st);
  else if (u8) run<int32_t, uint8_t>(g, w, d_out, x, d_data, prm, st);
  else run<int32_t, uint16_t>(g, w, d_out, x, d_data, prm, st);
}

}  // namespace spgnn::detail
