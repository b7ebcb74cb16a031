// Fused GAT aggregation (TLPGNN, HPDC'22, §4-6): one kernel computes, per destination vertex,
// the attention logits, their edge softmax and the weighted sum of source features, for H heads;
// plus the backward pass in two kernels.
//
// Layout (forward): one warp per destination vertex v (vertex parallelism; the hardware block
//   scheduler hands out vertices dynamically, no atomics), lanes over features (feature
//   parallelism). Heads are walked one after the other; for head h:
//   pass A: lanes over the row's edges compute s_e = leaky_relu(el[u,h] + er[v,h]) and a running
//     max + sum of exp(s - max) (online softmax), combined across lanes with shuffles;
//   pass B: the warp splits into thread groups of G lanes that cover the head's F features with
//     float4/float2/float vector loads; groups take the row's edges round-robin, recompute
//     a_e = exp(s_e - max) / sum (cheaper than storing and re-reading s: el[u] is a broadcast
//     load), write attn[e,h] (one lane per edge), and keep the running sum of a_e' * feat[u]
//     in registers (register caching); groups are combined with shuffles and the row is stored
//     once. kUnroll edges' feature loads are in flight per group.
// Nothing of size nnz x F is ever written: the unfused composition writes and re-reads logits,
// weights and (with several heads) per-head feature copies; this reads feat once per edge.
//
// Backward (attn saved by the forward pass):
//   kernel 1, warp per destination v, per head: groups compute d_a_e = grad_out[v,h]·feat[u,h]
//     (times the dropout factor) and t = sum_row a_e d_a_e; then lanes over edges compute
//     d_z_e = a_e (d_a_e - t) * leaky_relu'(z_e), store it per edge and sum it into grad_er[v,h];
//   kernel 2, warp per source u over the transposed graph (built once per graph structure by the
//     front door and cached): grad_el[u,h] = sum d_z and grad_feat[u,h] = sum a_e' grad_out[v,h]
//     over u's out-edges, read through the transpose's edge permutation. No atomics, and the
//     result does not depend on scheduling.
//   atomic = true instead scatters a_e' grad_out[v] and d_z from kernel 1 with (vector) atomics
//     (no transpose; a measured alternative, see `spgnn bench gat`).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/attention_hash.hpp"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_kernels.hpp"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/gnnone_common.cuh"

namespace spgnn::detail {

namespace {

using attention::kFullMask;
using gnnone::ldg_vec;
using gnnone::st_vec;
using gnnone::zero_vec;

constexpr int kUnroll = 4;
constexpr int kMaxWarps = 16;

// Scratch memory (backward d_a / d_z, forward chunk partials), allocated and freed in stream order (cudaMallocAsync's pool):
// unlike cudaFree, the free does not synchronise the device, so a backward call stays
// asynchronous; the memory is returned once the kernels queued before the free have run.
class StreamScratch {
 public:
  StreamScratch(size_t bytes, cudaStream_t st) : st_(st) {
    SPGNN_CUDA_CHECK(cudaMallocAsync(&ptr_, bytes, st_));
  }
  ~StreamScratch() { cudaFreeAsync(ptr_, st_); }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  float* get() const { return static_cast<float*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  cudaStream_t st_;
};


template <class I>
struct GatArgs {
  const I* __restrict__ rowptr;  // rows walked by the kernel (graph, or transpose in kernel 2)
  const I* __restrict__ col;
  const int64_t* __restrict__ perm;  // kernel 2: transposed edge -> edge
  const float* __restrict__ feat;
  const float* __restrict__ el;
  const float* __restrict__ er;
  const float* __restrict__ attn_in;  // backward
  const float* __restrict__ grad_out;
  float* out;
  float* attn;
  float* grad_feat;
  float* grad_el;
  float* grad_er;
  float* dz;  // backward scratch [nnz, H]: d_a, then d_z
  int64_t n;  // rows walked
  int64_t heavy_deg;  // forward: rows with more edges are left to the chunk kernels
  int64_t H, F, W;
  int nv;      // vectors per head row (F / V)
  int g_log2;  // log2(thread-group size)
  int passes;  // passes of 32 vectors when nv > 32
  float slope;
  float p_drop;
  float scale;
  uint64_t seed;
  bool dropout;
};

template <class I>
__device__ __forceinline__ float drop_factor(const GatArgs<I>& a, int64_t j, int64_t h) {
  return a.dropout ? attention_dropout_factor(a.seed, j, h, a.p_drop, a.scale) : 1.f;
}

template <class I, int V>
__global__ void __launch_bounds__(kMaxWarps * 32) gat_forward_kernel(const GatArgs<I> a) {
  const int lane = threadIdx.x & 31;
  const int64_t v = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (v >= a.n) return;
  const int64_t b = a.rowptr[v], e = a.rowptr[v + 1];
  if (e - b > a.heavy_deg) return;  // split into chunks: gat_chunk_*_kernel
  float* ov = a.out + v * a.W;
  if (b == e) {  // no edges: a zero row, no weights
    for (int64_t c = lane; c < a.W; c += 32) ov[c] = 0.f;
    return;
  }
  const int G = 1 << a.g_log2, NG = 32 >> a.g_log2;
  const int grp = lane >> a.g_log2, gl = lane & (G - 1);
  for (int64_t h = 0; h < a.H; ++h) {
    const float erv = __ldg(a.er + v * a.H + h);
    auto logit_of = [&](int64_t u) {
      return attention::leaky(__ldg(a.el + u * a.H + h) + erv, a.slope);
    };
    float m, z;
    attention::row_softmax_stats(
        b, e, lane, [&](int64_t j) { return logit_of(static_cast<int64_t>(__ldg(a.col + j))); },
        m, z);
    const float inv_z = 1.f / z;
    for (int pass = 0; pass < a.passes; ++pass) {
      const int vi = pass * G + gl;
      const bool ok = vi < a.nv;
      const int64_t foff = h * a.F + static_cast<int64_t>(vi) * V;
      const bool writer = pass == 0 && gl == 0;  // one lane per edge stores its weight
      auto weight = [&](int64_t j, int64_t u) {
        const float w = expf(logit_of(u) - m) * inv_z;
        if (writer) a.attn[j * a.H + h] = w;
        return w * drop_factor(a, j, h);
      };
      float acc[V];
      zero_vec(acc);
      int64_t j = b + grp;
      for (; j + (kUnroll - 1) * NG < e; j += kUnroll * NG) {
        int64_t u[kUnroll];
        float x[kUnroll][V], w[kUnroll];
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) u[k] = __ldg(a.col + j + k * NG);
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) {
          if (ok) ldg_vec<V>(x[k], a.feat + u[k] * a.W + foff);
          else zero_vec(x[k]);
        }
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) w[k] = weight(j + k * NG, u[k]);
#pragma unroll
        for (int k = 0; k < kUnroll; ++k)
#pragma unroll
          for (int q = 0; q < V; ++q) acc[q] = fmaf(w[k], x[k][q], acc[q]);
      }
      for (; j < e; j += NG) {
        const int64_t u = __ldg(a.col + j);
        float x[V];
        if (ok) ldg_vec<V>(x, a.feat + u * a.W + foff);
        else zero_vec(x);
        const float w = weight(j, u);
#pragma unroll
        for (int q = 0; q < V; ++q) acc[q] = fmaf(w, x[q], acc[q]);
      }
#pragma unroll
      for (int q = 0; q < V; ++q)
        for (int off = 16; off >= G; off >>= 1) acc[q] += __shfl_xor_sync(kFullMask, acc[q], off);
      if (grp == 0 && ok) st_vec<V>(ov + foff, acc);
    }
  }
}

// ---- heavy rows (forward) ------------------------------------------------------------------
// A warp per vertex leaves a hub row of 10^5 edges to one warp while the rest of the GPU idles
// (R-MAT / Kronecker graphs). Rows with more than heavy_deg edges are therefore cut into chunks
// of `chunk` edges, a warp each, which write partial softmax states (max m_c, sum z_c and the
// unnormalised sum acc_c relative to m_c, per head); one warp per heavy row then merges them
// (out = sum_c acc_c e^(m_c - m) / sum_c z_c e^(m_c - m)) and writes the row's weights.
// Partial layout per chunk: [m_0, z_0, ..., m_{H-1}, z_{H-1}, acc (H*F)].
struct HeavyRows {
  const int64_t* __restrict__ row;          // [nh] the heavy rows
  const int64_t* __restrict__ chunk_start;  // [nh + 1] first chunk of each heavy row
  const int64_t* __restrict__ chunk_row;    // [nc] heavy-row index of each chunk
  int64_t nh = 0, nc = 0, chunk = 0;
  float* part = nullptr;                    // [nc, 2H + H*F]
};

template <class I, int V>
__global__ void __launch_bounds__(kMaxWarps * 32)
    gat_chunk_partial_kernel(const GatArgs<I> a, const HeavyRows hr) {
  const int lane = threadIdx.x & 31;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (c >= hr.nc) return;
  const int64_t i = hr.chunk_row[c];
  const int64_t v = hr.row[i];
  const int64_t b = a.rowptr[v] + (c - hr.chunk_start[i]) * hr.chunk;
  const int64_t e = min(b + hr.chunk, static_cast<int64_t>(a.rowptr[v + 1]));
  float* part = hr.part + c * (2 * a.H + a.W);
  const int G = 1 << a.g_log2, NG = 32 >> a.g_log2;
  const int grp = lane >> a.g_log2, gl = lane & (G - 1);
  for (int64_t h = 0; h < a.H; ++h) {
    const float erv = __ldg(a.er + v * a.H + h);
    auto logit_of = [&](int64_t u) {
      return attention::leaky(__ldg(a.el + u * a.H + h) + erv, a.slope);
    };
    float m, z;
    attention::row_softmax_stats(
        b, e, lane, [&](int64_t j) { return logit_of(static_cast<int64_t>(__ldg(a.col + j))); },
        m, z);
    if (lane == 0) {
      part[2 * h] = m;
      part[2 * h + 1] = z;
    }
    for (int pass = 0; pass < a.passes; ++pass) {
      const int vi = pass * G + gl;
      const bool ok = vi < a.nv;
      const int64_t foff = h * a.F + static_cast<int64_t>(vi) * V;
      float acc[V];
      zero_vec(acc);
      int64_t j = b + grp;
      for (; j + (kUnroll - 1) * NG < e; j += kUnroll * NG) {
        int64_t u[kUnroll];
        float x[kUnroll][V], w[kUnroll];
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) u[k] = __ldg(a.col + j + k * NG);
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) {
          if (ok) ldg_vec<V>(x[k], a.feat + u[k] * a.W + foff);
          else zero_vec(x[k]);
        }
#pragma unroll
        for (int k = 0; k < kUnroll; ++k)
          w[k] = expf(logit_of(u[k]) - m) * drop_factor(a, j + k * NG, h);
#pragma unroll
        for (int k = 0; k < kUnroll; ++k)
#pragma unroll
          for (int q = 0; q < V; ++q) acc[q] = fmaf(w[k], x[k][q], acc[q]);
      }
      for (; j < e; j += NG) {
        const int64_t u = __ldg(a.col + j);
        float x[V];
        if (ok) ldg_vec<V>(x, a.feat + u * a.W + foff);
        else zero_vec(x);
        const float w = expf(logit_of(u) - m) * drop_factor(a, j, h);
#pragma unroll
        for (int q = 0; q < V; ++q) acc[q] = fmaf(w, x[q], acc[q]);
      }
#pragma unroll
      for (int q = 0; q < V; ++q)
        for (int off = 16; off >= G; off >>= 1) acc[q] += __shfl_xor_sync(kFullMask, acc[q], off);
      if (grp == 0 && ok)
#pragma unroll
        for (int q = 0; q < V; ++q) part[2 * a.H + foff + q] = acc[q];  // scalar: 2H breaks alignment
    }
  }
}

template <class I>
__global__ void __launch_bounds__(kMaxWarps * 32)
    gat_chunk_merge_kernel(const GatArgs<I> a, const HeavyRows hr) {
  const int lane = threadIdx.x & 31;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (i >= hr.nh) return;
  const int64_t v = hr.row[i];
  const int64_t c0 = hr.chunk_start[i], c1 = hr.chunk_start[i + 1];
  const int64_t stride = 2 * a.H + a.W;
  const int64_t b = a.rowptr[v], e = a.rowptr[v + 1];
  for (int64_t h = 0; h < a.H; ++h) {
    float m = -INFINITY, z = 0.f;
    for (int64_t c = c0 + lane; c < c1; c += 32)
      attention::softmax_combine(m, z, hr.part[c * stride + 2 * h], hr.part[c * stride + 2 * h + 1]);
#pragma unroll
    for (int off = 16; off; off >>= 1) {
      const float m2 = __shfl_xor_sync(kFullMask, m, off);
      const float z2 = __shfl_xor_sync(kFullMask, z, off);
      attention::softmax_combine(m, z, m2, z2);
    }
    const float inv_z = 1.f / z;
    for (int64_t f = lane; f < a.F; f += 32) {
      float acc = 0.f;
      for (int64_t c = c0; c < c1; ++c) {
        const float* pc = hr.part + c * stride;
        acc = fmaf(pc[2 * a.H + h * a.F + f], expf(pc[2 * h] - m), acc);
      }
      a.out[v * a.W + h * a.F + f] = acc * inv_z;
    }
    const float erv = __ldg(a.er + v * a.H + h);
    for (int64_t j = b + lane; j < e; j += 32) {
      const int64_t u = __ldg(a.col + j);
      a.attn[j * a.H + h] = expf(attention::leaky(__ldg(a.el + u * a.H + h) + erv, a.slope) - m) * inv_z;
    }
  }
}

// Backward kernel 1 (per destination row): d_a, the softmax and LeakyReLU backward, grad_er.
// kAtomic also scatters grad_feat and grad_el (which the launcher zeroed first).
template <class I, int V, bool kAtomic>
__global__ void __launch_bounds__(kMaxWarps * 32) gat_backward_rows_kernel(const GatArgs<I> a) {
  const int lane = threadIdx.x & 31;
  const int64_t v = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (v >= a.n) return;
  const int64_t b = a.rowptr[v], e = a.rowptr[v + 1];
  if (b == e) {
    for (int64_t h = lane; h < a.H; h += 32) a.grad_er[v * a.H + h] = 0.f;
    return;
  }
  const int G = 1 << a.g_log2, NG = 32 >> a.g_log2;
  const int grp = lane >> a.g_log2, gl = lane & (G - 1);
  // The lanes of one group walk the same edges, so group-wide shuffles need only their mask.
  const unsigned gmask = G == 32 ? kFullMask : ((1u << G) - 1u) << (grp * G);
  const float* gv = a.grad_out + v * a.W;
  for (int64_t h = 0; h < a.H; ++h) {
    const float erv = __ldg(a.er + v * a.H + h);
    float t = 0.f;
    for (int64_t j = b + grp; j < e; j += NG) {
      const int64_t u = __ldg(a.col + j);
      float d = 0.f;
      for (int pass = 0; pass < a.passes; ++pass) {
        const int vi = pass * G + gl;
        if (vi < a.nv) {
          const int64_t foff = h * a.F + static_cast<int64_t>(vi) * V;
          float x[V], y[V];
          ldg_vec<V>(x, a.feat + u * a.W + foff);
          ldg_vec<V>(y, gv + foff);
#pragma unroll
          for (int q = 0; q < V; ++q) d = fmaf(x[q], y[q], d);
        }
      }
      for (int off = G >> 1; off; off >>= 1) d += __shfl_xor_sync(gmask, d, off);
      const float mask = drop_factor(a, j, h);
      d *= mask;
      const float aj = __ldg(a.attn_in + j * a.H + h);
      t = fmaf(aj, d, t);
      if (gl == 0) a.dz[j * a.H + h] = d;
      if constexpr (kAtomic) {
        const float w = aj * mask;
        if (w != 0.f)
          for (int pass = 0; pass < a.passes; ++pass) {
            const int vi = pass * G + gl;
            if (vi < a.nv) {
              const int64_t foff = h * a.F + static_cast<int64_t>(vi) * V;
              float y[V];
              ldg_vec<V>(y, gv + foff);
#pragma unroll
              for (int q = 0; q < V; ++q) y[q] *= w;
              gnnone::atomic_add_vec<V>(a.grad_feat + u * a.W + foff, y);
            }
          }
      }
    }
    // Every lane of a group holds the group's t; summing across groups counts each edge once.
    for (int off = 16; off >= G; off >>= 1) t += __shfl_xor_sync(kFullMask, t, off);
    __syncwarp();  // d_a stored by one lane per group is read below by another lane
    float ger = 0.f;
    for (int64_t j = b + lane; j < e; j += 32) {
      const int64_t u = __ldg(a.col + j);
      const float ds = __ldg(a.attn_in + j * a.H + h) * (a.dz[j * a.H + h] - t);
      const float dzv = __ldg(a.el + u * a.H + h) + erv > 0.f ? ds : ds * a.slope;
      ger += dzv;
      if constexpr (kAtomic) atomicAdd(a.grad_el + u * a.H + h, dzv);
      else a.dz[j * a.H + h] = dzv;
    }
    ger = attention::warp_sum(ger);
    if (lane == 0) a.grad_er[v * a.H + h] = ger;
  }
}

// Backward kernel 2 (per source u, over the transposed graph): gathers grad_el and grad_feat.
// Here rowptr/col are the transpose's and col[t] is the destination v of edge perm[t].
template <class I, int V>
__global__ void __launch_bounds__(kMaxWarps * 32) gat_backward_sources_kernel(const GatArgs<I> a) {
  const int lane = threadIdx.x & 31;
  const int64_t u = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (u >= a.n) return;
  const int64_t b = a.rowptr[u], e = a.rowptr[u + 1];
  float* gfu = a.grad_feat + u * a.W;
  if (b == e) {  // a vertex that is no one's source gets zero gradients
    for (int64_t c = lane; c < a.W; c += 32) gfu[c] = 0.f;
    for (int64_t h = lane; h < a.H; h += 32) a.grad_el[u * a.H + h] = 0.f;
    return;
  }
  const int G = 1 << a.g_log2, NG = 32 >> a.g_log2;
  const int grp = lane >> a.g_log2, gl = lane & (G - 1);
  for (int64_t h = 0; h < a.H; ++h) {
    float s = 0.f;
    for (int64_t t = b + lane; t < e; t += 32) s += __ldg(a.dz + __ldg(a.perm + t) * a.H + h);
    s = attention::warp_sum(s);
    if (lane == 0) a.grad_el[u * a.H + h] = s;
    for (int pass = 0; pass < a.passes; ++pass) {
      const int vi = pass * G + gl;
      const bool ok = vi < a.nv;
      const int64_t foff = h * a.F + static_cast<int64_t>(vi) * V;
      float acc[V];
      zero_vec(acc);
      int64_t t = b + grp;
      for (; t + (kUnroll - 1) * NG < e; t += kUnroll * NG) {
        int64_t j[kUnroll], dst[kUnroll];
        float y[kUnroll][V], w[kUnroll];
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) {
          j[k] = __ldg(a.perm + t + k * NG);
          dst[k] = __ldg(a.col + t + k * NG);
        }
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) {
          if (ok) ldg_vec<V>(y[k], a.grad_out + dst[k] * a.W + foff);
          else zero_vec(y[k]);
          w[k] = __ldg(a.attn_in + j[k] * a.H + h) * drop_factor(a, j[k], h);
        }
#pragma unroll
        for (int k = 0; k < kUnroll; ++k)
#pragma unroll
          for (int q = 0; q < V; ++q) acc[q] = fmaf(w[k], y[k][q], acc[q]);
      }
      for (; t < e; t += NG) {
        const int64_t j = __ldg(a.perm + t), dst = __ldg(a.col + t);
        float y[V];
        if (ok) ldg_vec<V>(y, a.grad_out + dst * a.W + foff);
        else zero_vec(y);
        const float w = __ldg(a.attn_in + j * a.H + h) * drop_factor(a, j, h);
#pragma unroll
        for (int q = 0; q < V; ++q) acc[q] = fmaf(w, y[q], acc[q]);
      }
#pragma unroll
      for (int q = 0; q < V; ++q)
        for (int off = 16; off >= G; off >>= 1) acc[q] += __shfl_xor_sync(kFullMask, acc[q], off);
      if (grp == 0 && ok) st_vec<V>(gfu + foff, acc);
    }
  }
}

template <class I>
GatArgs<I> make_args(const GatProblem& p, const gnnone::Geometry& geo) {
  GatArgs<I> a{};
  const Graph& g = *p.g;
  a.rowptr = g.rowptr.data<I>();
  a.col = g.col.data<I>();
  a.feat = p.feat->data<float>();
  a.el = p.el->data<float>();
  a.er = p.er->data<float>();
  a.n = g.n_rows;
  a.heavy_deg = INT64_MAX;
  a.H = p.H;
  a.F = p.F;
  a.W = p.H * p.F;
  a.nv = geo.nv;
  a.g_log2 = geo.g_log2;
  a.passes = geo.passes;
  a.slope = p.negative_slope;
  a.dropout = p.dropout > 0.f;
  a.p_drop = p.dropout;
  a.scale = p.dropout_scale;
  a.seed = p.seed;
  return a;
}

unsigned blocks_for(int64_t rows, int warps) {
  const int64_t blocks = ceil_div<int64_t>(rows, warps);
  SPGNN_CHECK(blocks <= 0x7fffffff, InvalidArgument, "gat_fused: graph has too many rows");
  return static_cast<unsigned>(blocks);
}

void check_warps(int warps) {
  SPGNN_CHECK(warps >= 1 && warps <= kMaxWarps, InvalidArgument,
              "gat_fused: warps must be in 1..", kMaxWarps, ", got ", warps);
}

// Rows with more than heavy_deg edges (a schedule parameter, default 1024) are cut into chunks of
// heavy_deg / 4 edges (see HeavyRows): a warp then never walks more than about heavy_deg edges.

// The heavy rows and their chunks, on the graph's device; a function of rowptr only, computed
// once per graph structure and kept in Graph::cache.
struct HeavySchedule {
  Tensor row, chunk_start, chunk_row;
  int64_t nh = 0, nc = 0;
};

template <class I>
std::shared_ptr<HeavySchedule> heavy_schedule(const Graph& g, int64_t heavy_deg, int64_t chunk) {
  const std::string key = std::string("gat_fused.heavy.") + dtype_name(g.index_dtype()) + "." +
                          g.device().str() + "." + std::to_string(heavy_deg);
  std::lock_guard<std::mutex> lock(g.cache->mutex);
  std::shared_ptr<void>& item = g.cache->items[key];
  if (item) {
    auto h = std::static_pointer_cast<HeavySchedule>(item);
    return h;
  }
  const std::vector<I> rp = g.rowptr.to_vector<I>();
  std::vector<int64_t> rows, start{0}, chunk_row;
  for (int64_t v = 0; v < g.n_rows; ++v) {
    const int64_t deg = static_cast<int64_t>(rp[v + 1]) - static_cast<int64_t>(rp[v]);
    if (deg <= heavy_deg) continue;
    const int64_t chunks = ceil_div<int64_t>(deg, chunk);
    for (int64_t c = 0; c < chunks; ++c) chunk_row.push_back(static_cast<int64_t>(rows.size()));
    rows.push_back(v);
    start.push_back(start.back() + chunks);
  }
  auto h = std::make_shared<HeavySchedule>();
  h->nh = static_cast<int64_t>(rows.size());
  h->nc = static_cast<int64_t>(chunk_row.size());
  if (h->nh) {
    h->row = Tensor::from_vector(rows).to(g.device());
    h->chunk_start = Tensor::from_vector(start).to(g.device());
    h->chunk_row = Tensor::from_vector(chunk_row).to(g.device());
  }
  item = h;
  return h;
}

template <class I, int V>
void forward_v(const GatArgs<I>& a, const HeavySchedule& hs, int64_t chunk, int warps,
               cudaStream_t st) {
  gat_forward_kernel<I, V><<<blocks_for(a.n, warps), warps * 32, 0, st>>>(a);
  SPGNN_CUDA_CHECK_LAUNCH();
  if (hs.nh == 0) return;
  HeavyRows hr;
  hr.row = hs.row.data<int64_t>();
  hr.chunk_start = hs.chunk_start.data<int64_t>();
  hr.chunk_row = hs.chunk_row.data<int64_t>();
  hr.nh = hs.nh;
  hr.nc = hs.nc;
  hr.chunk = chunk;
  StreamScratch part(static_cast<size_t>(hs.nc * (2 * a.H + a.W)) * sizeof(float), st);
  hr.part = part.get();
  gat_chunk_partial_kernel<I, V><<<blocks_for(hs.nc, warps), warps * 32, 0, st>>>(a, hr);
  SPGNN_CUDA_CHECK_LAUNCH();
  gat_chunk_merge_kernel<I><<<blocks_for(hs.nh, warps), warps * 32, 0, st>>>(a, hr);
  SPGNN_CUDA_CHECK_LAUNCH();
}

template <class I>
void forward(const GatProblem& p, int warps, int64_t heavy_deg, cudaStream_t st) {
  const void* ptrs[2] = {p.feat->data<float>(), p.out->data<float>()};
  const gnnone::Geometry geo = gnnone::make_geometry(p.F, true, ptrs, 2);
  GatArgs<I> a = make_args<I>(p, geo);
  a.out = p.out->data<float>();
  a.attn = p.attn->data<float>();
  const int64_t chunk = std::max<int64_t>(heavy_deg / 4, 1);
  const std::shared_ptr<HeavySchedule> hs = heavy_schedule<I>(*p.g, heavy_deg, chunk);
  a.heavy_deg = hs->nh ? heavy_deg : INT64_MAX;
  switch (geo.V) {
    case 4: forward_v<I, 4>(a, *hs, chunk, warps, st); break;
    case 2: forward_v<I, 2>(a, *hs, chunk, warps, st); break;
    default: forward_v<I, 1>(a, *hs, chunk, warps, st); break;
  }
}

template <class I, int V>
void backward_v(GatArgs<I> a, const GatProblem& p, int warps, bool atomic, cudaStream_t st) {
  if (atomic) {
    gat_backward_rows_kernel<I, V, true><<<blocks_for(a.n, warps), warps * 32, 0, st>>>(a);
    SPGNN_CUDA_CHECK_LAUNCH();
    return;
  }
  gat_backward_rows_kernel<I, V, false><<<blocks_for(a.n, warps), warps * 32, 0, st>>>(a);
  SPGNN_CUDA_CHECK_LAUNCH();
  const Graph& gt = *p.gt;
  a.rowptr = gt.rowptr.data<I>();
  a.col = gt.col.data<I>();
  a.perm = p.perm->data<int64_t>();
  a.n = gt.n_rows;
  gat_backward_sources_kernel<I, V><<<blocks_for(a.n, warps), warps * 32, 0, st>>>(a);
  SPGNN_CUDA_CHECK_LAUNCH();
}

template <class I>
void backward(const GatProblem& p, int warps, bool atomic, float* dz, cudaStream_t st) {
  const void* ptrs[3] = {p.feat->data<float>(), p.grad_out->data<float>(),
                         p.grad_feat->data<float>()};
  const gnnone::Geometry geo = gnnone::make_geometry(p.F, true, ptrs, 3);
  GatArgs<I> a = make_args<I>(p, geo);
  a.attn_in = p.attn->data<float>();
  a.grad_out = p.grad_out->data<float>();
  a.grad_feat = p.grad_feat->data<float>();
  a.grad_el = p.grad_el->data<float>();
  a.grad_er = p.grad_er->data<float>();
  a.dz = dz;
  switch (geo.V) {
    case 4: backward_v<I, 4>(a, p, warps, atomic, st); break;
    case 2: backward_v<I, 2>(a, p, warps, atomic, st); break;
    default: backward_v<I, 1>(a, p, warps, atomic, st); break;
  }
}

void zero_async(Tensor& t, cudaStream_t st) {
  if (t.numel()) SPGNN_CUDA_CHECK(cudaMemsetAsync(t.raw(), 0, t.nbytes(), st));
}

}  // namespace

void gat_fused_forward(const GatProblem& p, int warps, int64_t heavy_deg) {
  check_warps(warps);
  SPGNN_CHECK(heavy_deg >= 4, InvalidArgument, "gat_fused: heavy_deg must be >= 4, got ",
              heavy_deg);
  const Graph& g = *p.g;
  if (g.n_rows == 0) return;
  gnnone::DeviceGuard guard(g.device().index);
  const cudaStream_t st = as_stream(p.stream);
  if (g.nnz() == 0) {  // every row is empty
    zero_async(*p.out, st);
    return;
  }
  if (g.index_dtype() == DType::i64) forward<int64_t>(p, warps, heavy_deg, st);
  else forward<int32_t>(p, warps, heavy_deg, st);
}

void gat_fused_backward(const GatProblem& p, int warps, bool atomic) {
  check_warps(warps);
  const Graph& g = *p.g;
  gnnone::DeviceGuard guard(g.device().index);
  const cudaStream_t st = as_stream(p.stream);
  if (g.nnz() == 0) {
    zero_async(*p.grad_feat, st);
    zero_async(*p.grad_el, st);
    zero_async(*p.grad_er, st);
    return;
  }
  SPGNN_CHECK(atomic || (p.gt != nullptr && p.perm != nullptr), InvalidArgument,
              "gat_fused backward: the gather variant needs the transposed graph");
  if (atomic) {
    zero_async(*p.grad_feat, st);
    zero_async(*p.grad_el, st);
  }
  StreamScratch dz(static_cast<size_t>(g.nnz() * p.H) * sizeof(float), st);
  if (g.index_dtype() == DType::i64) backward<int64_t>(p, warps, atomic, dz.get(), st);
  else backward<int32_t>(p, warps, atomic, dz.get(), st);
}

}  // namespace spgnn::detail
