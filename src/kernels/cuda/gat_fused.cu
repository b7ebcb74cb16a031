// Fused GAT aggregation (TLPGNN, HPDC'22, §4-6): one kernel computes, per destination vertex,
// the attention logits, their edge softmax and the weighted sum of source features, for H heads;
// plus the backward pass in two kernels.
//
// Forward (the "forward" section below has the details): rows in order of decreasing degree; a
//   row is walked by a team (a group of G lanes for short rows, so 32 / G rows share a warp; a
//   whole warp for long rows; several warps for heavy rows, whose partial softmax states are
//   merged by small second kernels). All heads of a column chunk are handled in one pass over
//   the row's edges with an online softmax: each edge's logit is computed once per head and its
//   weight shuffled to the lanes that gather the source's feature vector; the attention weights
//   are normalised at the end of the row. Column chunks (gridDim.y) keep the gathered feature
//   columns within L2. Version history and H100 numbers: docs/GAT_NOTES.md.
// Nothing of size nnz x F is ever written: the unfused composition writes and re-reads logits,
// weights and (with several heads) per-head feature copies; this reads feat once per edge.
//
// Backward (attn saved by the forward pass):
//   kernel 1, warp per destination v, in groups of lanes over edges that each take several heads
//     (bwd_heads_log2): groups compute d_a_e = grad_out[v,h]·feat[u,h]
//     (times the dropout factor) and t = sum_row a_e d_a_e; then lanes over edges compute
//     d_z_e = a_e (d_a_e - t) * leaky_relu'(z_e), store it per edge (paired with a_e' = a_e times
//     its dropout factor) and sum it into grad_er[v,h];
//   kernel 2, warp per source u over the transposed graph (built once per graph structure by the
//     front door and cached): grad_el[u,h] = sum d_z and grad_feat[u,h] = sum a_e' grad_out[v,h]
//     over u's out-edges, each pair read with one load through the transpose's edge permutation.
//   Rows (of either side) with more than heavy_deg edges are cut into segments, a warp each,
//     whose sums are added with atomics (the "backward" section below); every other row's
//     result is stored by one warp and does not depend on scheduling.
//   atomic = true instead scatters a_e' grad_out[v] and d_z from kernel 1 with (vector) atomics
//     (no transpose; a measured alternative, see `spgnn bench gat`).
#include <cub/device/device_radix_sort.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "core/device.hpp"
#include "kernels/attention_hash.hpp"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_kernels.hpp"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/elem.cuh"
#include "kernels/cuda/gnnone_common.cuh"
#include "kernels/cuda/spmm_message.cuh"
#include "dispatch/registry.hpp"

namespace spgnn::detail {

namespace {

using attention::kFullMask;
using gnnone::atomic_add_f32;
using gnnone::ldg_vec;
using gnnone::st_f32;

// V floats into registers (p aligned to min(V, 4) floats): one or two 16-byte loads.
template <int V>
__device__ __forceinline__ void ld_f32(float (&d)[V], const float* __restrict__ p) {
  if constexpr (V == 8) {
    float lo[4], hi[4];
    gnnone::ldg_vec<4>(lo, p);
    gnnone::ldg_vec<4>(hi, p + 4);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      d[q] = lo[q];
      d[q + 4] = hi[q];
    }
  } else {
    gnnone::ldg_vec<V>(d, p);
  }
}
using gnnone::st_vec;
using gnnone::zero_vec;

constexpr int kUnroll = 4;
constexpr int kMaxWarps = 16;

// Half precision (T = __half or __nv_bfloat16): feat, attn, grad_out and out are T, el and er
// are read as float32 (the front door takes them in float32 or T; logit_inputs). Rows are
// loaded 8 or 4 elements to a 16- or 8-byte word and unpacked to float; every sum is float32 and
// each result is rounded once. The backward's gradients are summed into float32 scratch (split
// rows add with atomics) and rounded into the outputs at the end. A head row of F % 4 != 0
// halves, or the atomic backward, takes the front door's float32 copy instead.
template <class T> constexpr bool kHalf = elem::kIsHalf<T>;

// acc[c][q] += w * x[c][q] over a lane's K packed vectors of V elements (float or half words,
// unpacked to float): the forward's and the backward's gathered rows alike.
template <int V, int K, class P>
__device__ __forceinline__ void fma_packed(float w, const P (&x)[K], float (&acc)[K][V]) {
#pragma unroll
  for (int c = 0; c < K; ++c) {
    float xf[V];
    elem::unpack<V>(xf, x[c]);
#pragma unroll
    for (int q = 0; q < V; ++q) acc[c][q] = fmaf(w, xf[q], acc[c][q]);
  }
}

template <class I, class T>
struct GatArgs {
  const I* __restrict__ rowptr;  // rows walked by the kernel (graph, or transpose in kernel 2)
  const I* __restrict__ col;
  const int64_t* __restrict__ perm;  // kernel 2: transposed edge -> edge
  const T* __restrict__ feat;
  const float* __restrict__ el;  // float32 for every T (see logit_inputs)
  const float* __restrict__ er;
  const T* __restrict__ attn_in;  // backward
  const T* __restrict__ grad_out;
  // backward, optional: the forward's out in float32 (GatProblem::fwd_out); the destination pass
  // then takes t from it and walks each row once (bwd_dst_range's kOut). Halves also need
  // `state`, the forward's softmax state (max, sum) per row and head, and recompute each a_e
  // from it in float32: t and the edges' terms are then one rounding of one sum.
  const float* __restrict__ fwd_out;
  const float2* __restrict__ state;
  // backward, optional with both of those (GatProblem::neg): the one walk by source
  // (gat_backward_sources_kernel's kRecompute), which reads each destination's (er, t, max,
  // 1 / sum) from dtab [n_rows, H], written by gat_backward_prep_kernel with grad_er.
  const float* __restrict__ neg;
  float4* dtab;
  float* grad_feat;
  float* grad_el;
  float* grad_er;
  // Backward scratch [nnz, H], per edge and head: .y = d_a, then d_z; .x = a_e times its dropout
  // factor (written with d_z). The source pass reads both with one 8-byte load through perm.
  float2* dz;
  float* tbuf;  // backward scratch [n_rows, H]: t of the split rows
  // Split rows (backward): rows with more than heavy_deg edges, cut into n_seg segments of
  // seg_len edges (bwd_segments of the graph walked).
  const int64_t* __restrict__ seg_row;
  const int64_t* __restrict__ seg_begin;
  int64_t n_seg, seg_len, heavy_deg;
  int64_t n;  // rows walked
  int64_t H, F, W;
  int nv;      // vectors per head row (F / V)
  int g_log2;   // log2(lanes per head row)
  int hc_log2;  // log2(heads per thread group; > 0 only with K = 1, bwd_heads)
  int passes;   // passes of G * K vectors (head_lanes)
  float slope;
  float p_drop;
  float scale;
  uint64_t seed;
  const uint64_t* seed_ptr;  // when set, the seed is read here (GatParams::dropout_seed_device)
  bool dropout;
  bool e2;  // destination pass: two edges a group, two a lane (bwd_e2)
};

// The dropout mask's key (attention_key), read and mixed once per row walk; 0 without dropout.
template <class A>
__device__ __forceinline__ uint64_t drop_key(const A& a) {
  return a.dropout ? attention_key(a.seed_ptr ? *a.seed_ptr : a.seed) : 0;
}

template <class I, class T>
__device__ __forceinline__ float drop_factor(const GatArgs<I, T>& a, uint64_t key, int64_t j,
                                             int64_t h) {
  return a.dropout ? attention_dropout_factor(key, static_cast<uint64_t>(j * a.H + h), a.p_drop,
                                              a.scale)
                   : 1.f;
}

// ---- forward ---------------------------------------------------------------------------------
// Rows are walked in order of decreasing degree (FwdSchedule::order, computed once per graph
// structure), so the rows that share a warp have about the same length. Three kinds of rows:
//   heavy (deg > heavy_deg): cut into segments of seg_len edges, a warp each
//     (gat_segment_kernel), whose partial states are merged by gat_merge_kernel;
//   long (kLongDeg < deg <= heavy_deg): a warp each, its groups splitting the row's edges;
//   short (the rest, empty rows included): one group of G lanes each, 32 / G rows per warp.
// The "team" of a row is the warp (heavy, long) or the group (short). Columns: a chunk of the
// H*F output columns is gridDim.y's unit: HC heads (HC in {1, 2, 4}; G = next_pow2(HC * F / V)
// lanes of V floats) or, when a head is wider than 32 vectors, 32 vectors of one head. All
// blocks of chunk 0 are dispatched before chunk 1, so the gathered feature columns' L2 working
// set is n_cols * chunk * 4 bytes; by default HC is as large as it goes (see fwd_geometry).
// A team walks its row once (fwd_row: online softmax, lanes over (edge, head) pairs for the
// logits, groups over feature vectors for the gathers); the attention weights of all but the last
// batch are stored raw and normalised at the end of the row (fwd_finish_attn, a coalesced re-read
// of what the same lanes just wrote). No nnz x F intermediate is ever written.
constexpr int kMaxHc = 8;          // heads per chunk at most (a logit lane per head)
constexpr int64_t kLongDeg = 32;   // rows above this many edges get a whole warp
constexpr int kUnrollB = 8;        // feature loads in flight per lane

template <class I, class T>
struct FwdArgs {
  const I* __restrict__ rowptr;
  const I* __restrict__ col;
  const I* __restrict__ order;        // rows by decreasing degree (heavy, long, short)
  const int64_t* __restrict__ seg_row;    // [n_seg] row of each heavy segment
  const int64_t* __restrict__ seg_begin;  // [n_seg] its first edge
  const int64_t* __restrict__ seg_start;  // [n_heavy + 1] first segment of each heavy row
  const T* __restrict__ feat;
  const float* __restrict__ el;  // float32 for every T (see logit_inputs)
  const float* __restrict__ er;
  T* out;
  float* out32;  // instead of out, when the caller takes a half forward's out in float32
  float2* state;  // optional [n_rows, H]: each row's softmax (max, sum) (GatProblem::state)
  T* attn;
  // [nnz, H] raw logits of a row until its (max, sum) is known, then normalised into attn: attn
  // itself for float32, float32 scratch for halves (a logit rounded to a half would shift its
  // weight by up to |s| * 2^-8). Recomputing the logits from el instead (no scratch) cost the
  // half forward 25% on the Reddit shape at F = 16 (a random el gather per edge, H200).
  float* raw;
  float* pstat;  // [n_seg, H, 2] segment (max, sum of exp)
  float* pacc;   // [n_seg, W] segment sum of exp(s - max) * feat, unnormalised
  // optional [n_rows, W] (GatProblem::neg): sum over the edges of negative pre-activation logit
  // of a_e (mask_e feat[u] - out[v]); the segments' partials: pnacc [n_seg, W] as pacc (negated,
  // those edges only) and pzn [n_seg, H] their sum of exp(s - max) (unmasked)
  float* neg;
  float* pnacc;
  float* pzn;
  int64_t n_heavy, n_long, n_short;  // order[0, n_heavy) heavy, then long, then short
  int64_t n_seg, seg_len;
  int64_t H, F, W;
  int nv;       // vectors of V elements per head row
  int g_log2;   // lanes per group
  int hc_log2;  // heads per chunk
  int subs;     // chunks per head (1 unless a head is wider than 32 * K vectors)
  float slope;
  float p_drop;
  float scale;
  uint64_t seed;
  const uint64_t* seed_ptr;  // when set, the seed is read here (GatParams::dropout_seed_device)
  bool dropout;
  int e;  // edges per logit lane and batch: fwd_row's E, 1, 2 or (halves) 4 (fwd_edges)
};

// A lane's place in its team and chunk (see above).
struct FwdLane {
  unsigned mask;  // the team's lanes
  int base;       // first lane of the team
  int tl_log2;    // log2(team lanes)
  int tg;         // this lane's group within the team
  int tg_log2;    // log2(groups in the team)
  // logits: lane = (edge slot t, head i)
  int t, i;
  int64_t h;      // head of (t, i)
  bool hv;        // h < H
  // features: this lane's K vectors of V columns, kstride columns apart
  int64_t colg;   // first column in the [*, W] rows
  int64_t kstride;
  int nvk;        // how many of the K vectors exist (a prefix)
  int hl;         // their head, relative to the chunk's first head
  bool writer;    // this chunk writes attn (first chunk of its heads)
};

template <class A>
__device__ __forceinline__ FwdLane fwd_lane(const A& a, int lane, bool warp_team, int V, int K) {
  FwdLane L;
  const int G = 1 << a.g_log2;
  const int grp = lane >> a.g_log2;
  if (warp_team) {
    L.mask = kFullMask;
    L.base = 0;
    L.tl_log2 = 5;
    L.tg = grp;
    L.tg_log2 = 5 - a.g_log2;
  } else {
    L.mask = G == 32 ? kFullMask : ((1u << G) - 1u) << (grp * G);
    L.base = grp * G;
    L.tl_log2 = a.g_log2;
    L.tg = 0;
    L.tg_log2 = 0;
  }
  const int tl = lane - L.base;
  L.t = tl >> a.hc_log2;
  L.i = tl & ((1 << a.hc_log2) - 1);
  const int64_t hchunk = blockIdx.y / a.subs, sub = blockIdx.y % a.subs;
  const int64_t h0 = hchunk << a.hc_log2;
  L.h = h0 + L.i;
  L.hv = L.h < a.H;
  L.writer = sub == 0;
  if (K == 1) {
    const int64_t q = sub * 32 * V + static_cast<int64_t>(lane & (G - 1)) * V;  // from h0 * F
    L.hl = static_cast<int>(q / a.F);
    L.colg = h0 * a.F + q;
    L.kstride = 0;
    L.nvk = L.hl < (1 << a.hc_log2) && h0 + L.hl < a.H ? 1 : 0;
  } else {  // one head per chunk: this lane's vectors are first, first + G, ... (< nv)
    const int64_t first = sub * G * K + (lane & (G - 1));
    L.hl = 0;
    L.nvk = first < a.nv ? static_cast<int>(min(int64_t{K}, (a.nv - first + G - 1) / G)) : 0;
    L.colg = h0 * a.F + first * V;
    L.kstride = static_cast<int64_t>(G) * V;
  }
  return L;
}

// The row (or heavy-row segment) [b, e) in one pass, online softmax. The team walks the edges in
// batches of E * step (step = team lanes / HC): lane (t, i) takes edges base + t + x * step
// (x < E), head h0 + i, computes their logits and keeps head i's running max M and its partial
// sum z of exp(s - M); a batch's new max is a shuffle reduction over the head's lanes, and when
// it grows, z and the feature sums are rescaled by exp(M_old - M_new) (rare after the first
// batches). Each group then receives (source, weight) of its share of the batch by shuffles and
// gathers the feature vectors.
// Latency: the next batch's sources are loaded one batch ahead, and the feature loads of a batch
// are issued before its logits are needed, so a batch costs about one gather round trip. E = 2
// (narrow heads, fwd_edges) puts twice the edges, and twice the gathers, in flight per round
// trip; E = 4 (narrow half heads) four times.
// attn: the raw logits of every batch but the last are stored and normalised by fwd_finish_attn
// (the last batch's are still in registers); kPartial stores every batch's raw logits (the split
// rows' kernels normalise them once the row's max and sum are known).
// On return: lane (t, i) holds head i's M and total z (reduced over the team); acc holds this
// lane's V feature sums (over the team's groups), relative to M, not divided by z; s_last[x] is
// lane (t, i)'s logit of edge t + x * step in the last batch.
template <class I, class T, int V, int K, int E, bool kPartial, bool kNeg>
__device__ __forceinline__ void fwd_row(const FwdArgs<I, T>& a, const FwdLane& L, int64_t b,
                                        int64_t e, float erv, float& M, float& z,
                                        float (&s_last)[E], float (&acc)[K][V], float& zn,
                                        float (&nacc)[K][V]) {
  // Gathers in flight per lane: kUnrollB vectors, fewer when a lane holds more than 16 bytes of
  // them (the registers per gather; halves stay packed until they are used).
  constexpr int kUB = K * V * int(sizeof(T)) > 16 ? 4 : kUnrollB;
  using P = elem::Packed<T, V>;
#pragma unroll
  for (int c = 0; c < K; ++c) {
    zero_vec(acc[c]);
    zero_vec(nacc[c]);
  }
  M = -INFINITY;
  z = 0.f;
  zn = 0.f;
  // kNeg (a.neg set): zn and nacc also sum the edges whose logit is negative before the
  // LeakyReLU (z <= 0: the slope's side of leaky_relu'); their weights travel to the gathering
  // lanes negated. A template parameter: nacc's registers would otherwise cost every forward
  // (ptxas: 98 -> 120 registers a thread for bfloat16 rows of 4 halves a lane).
  constexpr bool neg = kNeg;
#pragma unroll
  for (int x = 0; x < E; ++x) s_last[x] = -INFINITY;
  const uint64_t key = drop_key(a);
  const int hc = 1 << a.hc_log2;
  const int step = 1 << (L.tl_log2 - a.hc_log2);  // edges per logit slot
  const int bstep = E * step;                      // edges per batch
  const int per_group = bstep >> L.tg_log2;        // of which each group gathers
  const int wsrc = L.hl & (hc - 1);               // head lane of this lane's feature columns
  // The K vectors of source u's row that this lane gathers (those that exist).
  auto gather = [&](P (&x)[K], I u, bool ok) {
    const T* row = a.feat + static_cast<int64_t>(u) * a.W + L.colg;
#pragma unroll
    for (int c = 0; c < K; ++c) {
      if (ok && c < L.nvk) elem::load_packed<V>(x[c], row + c * L.kstride);
      else elem::zero_packed<V>(x[c]);
    }
  };
  const int step_log2 = L.tl_log2 - a.hc_log2;
  // Gather k of a group takes slot (k << tg_log2) + tg of the batch, which lane
  // ((slot % step) << hc_log2) + head computed the logit of, as its x-th edge: x = slot / step
  // is the same for the whole team (the team's groups take consecutive slots and their count
  // divides step), so the lane that is read from offers r[x] with its own x.
  auto pick = [step_log2](const auto (&r)[E], int k, int tg_log2) {
    const int x = (k << tg_log2) >> step_log2;
    auto v = r[0];
#pragma unroll
    for (int i = 1; i < E; ++i)
      if (x == i) v = r[i];
    return v;
  };
  I u_next[E];
#pragma unroll
  for (int x = 0; x < E; ++x) {
    u_next[x] = 0;
    if (x * step + L.t < e - b) u_next[x] = __ldg(a.col + b + x * step + L.t);
  }
  for (int64_t base = b; base < e; base += bstep) {
    const int cnt = static_cast<int>(min(static_cast<int64_t>(bstep), e - base));
    const bool last = base + bstep >= e;
    I u_reg[E];
    bool has[E];
    float el_u[E];
#pragma unroll
    for (int x = 0; x < E; ++x) {
      u_reg[x] = u_next[x];
      const int64_t nx = base + bstep + x * step + L.t;
      if (!last && nx < e) u_next[x] = __ldg(a.col + nx);
      has[x] = x * step + L.t < cnt && L.hv;
      el_u[x] = has[x] ? elem::ldg1(a.el + static_cast<int64_t>(u_reg[x]) * a.H + L.h) : 0.f;
    }
    // First kUB gathers of the batch: in flight while the logits arrive.
    I u[kUB];
    P xg[kUB][K];
#pragma unroll
    for (int k = 0; k < kUB; ++k) {
      if (k < per_group) {  // the same for the whole team
        const int slot = (k << L.tg_log2) + L.tg;
        const bool ok = slot < cnt;
        const int src = L.base + (((ok ? slot : 0) & (step - 1)) << a.hc_log2);
        u[k] = __shfl_sync(L.mask, pick(u_reg, k, L.tg_log2), src);
        gather(xg[k], u[k], ok);
      }
    }
    float s[E];
    float bm = -INFINITY;
#pragma unroll
    for (int x = 0; x < E; ++x) {
      s[x] = has[x] ? attention::leaky(el_u[x] + erv, a.slope) : -INFINITY;
      bm = fmaxf(bm, s[x]);
    }
    for (int off = (1 << L.tl_log2) >> 1; off >= hc; off >>= 1)
      bm = fmaxf(bm, __shfl_xor_sync(L.mask, bm, off));
    const bool grew = bm > M;
    if (__any_sync(L.mask, grew)) {  // rescale z and the sums to the new max
      const float r = grew ? expf(M - bm) : 1.f;
      if (grew) M = bm;
      z *= r;
      zn *= r;
      const float rf = __shfl_sync(L.mask, r, L.base + wsrc);
#pragma unroll
      for (int c = 0; c < K; ++c)
#pragma unroll
        for (int q = 0; q < V; ++q) acc[c][q] *= rf;
      if (neg)
#pragma unroll
        for (int c = 0; c < K; ++c)
#pragma unroll
          for (int q = 0; q < V; ++q) nacc[c][q] *= rf;
    }
    float wd[E];
#pragma unroll
    for (int x = 0; x < E; ++x) {
      wd[x] = 0.f;
      if (has[x]) {
        const int64_t j = base + x * step + L.t;
        const float w = expf(s[x] - M);
        z += w;
        if (L.writer && (kPartial || !last)) a.raw[j * a.H + L.h] = s[x];
        wd[x] = a.dropout ? w * attention_dropout_factor(
                                    key, static_cast<uint64_t>(j * a.H + L.h), a.p_drop, a.scale)
                          : w;
        if (neg && !(el_u[x] + erv > 0.f)) {
          zn += w;
          wd[x] = -wd[x];
        }
      }
      if (last) s_last[x] = s[x];
    }
#pragma unroll
    for (int k = 0; k < kUB; ++k) {
      if (k < per_group) {
        const int slot = (k << L.tg_log2) + L.tg;
        const int src = L.base + (((slot < cnt ? slot : 0) & (step - 1)) << a.hc_log2) + wsrc;
        float w = __shfl_sync(L.mask, pick(wd, k, L.tg_log2), src);
        if (slot >= cnt) w = 0.f;
        fma_packed(neg ? fabsf(w) : w, xg[k], acc);
        if (neg) fma_packed(fminf(w, 0.f), xg[k], nacc);
      }
    }
    // Batches of more than kUB edges per group (wide heads, few heads per chunk): the rest.
    for (int s0 = kUB; s0 < per_group; s0 += kUB) {
      float w2[kUB];
#pragma unroll
      for (int k = 0; k < kUB; ++k) {
        const int slot = ((s0 + k) << L.tg_log2) + L.tg;
        const bool ok = s0 + k < per_group && slot < cnt;
        const int src = L.base + (((ok ? slot : 0) & (step - 1)) << a.hc_log2);
        u[k] = __shfl_sync(L.mask, pick(u_reg, s0 + k, L.tg_log2), src);
        w2[k] = __shfl_sync(L.mask, pick(wd, s0 + k, L.tg_log2), src + wsrc);
        if (!ok) w2[k] = 0.f;
        gather(xg[k], u[k], ok);
      }
#pragma unroll
      for (int k = 0; k < kUB; ++k) {
        fma_packed(neg ? fabsf(w2[k]) : w2[k], xg[k], acc);
        if (neg) fma_packed(fminf(w2[k], 0.f), xg[k], nacc);
      }
    }
  }
  // z over the head's lanes (all at the same M); the groups' sums (same M too).
  for (int off = (1 << L.tl_log2) >> 1; off >= hc; off >>= 1) {
    z += __shfl_xor_sync(L.mask, z, off);
    zn += __shfl_xor_sync(L.mask, zn, off);
  }
  for (int off = 16; off >= (32 >> L.tg_log2) && L.tg_log2 > 0; off >>= 1)
#pragma unroll
    for (int c = 0; c < K; ++c)
#pragma unroll
      for (int q = 0; q < V; ++q) {
        acc[c][q] += __shfl_xor_sync(L.mask, acc[c][q], off);
        if (neg) nacc[c][q] += __shfl_xor_sync(L.mask, nacc[c][q], off);
      }
}

// attn of a whole row walked by fwd_row: exp(s - M) / z, from the stored raw logits of the
// earlier batches and from s_last for the last one.
template <class I, class T, int E>
__device__ __forceinline__ void fwd_finish_attn(const FwdArgs<I, T>& a, const FwdLane& L,
                                                int64_t b, int64_t e, float M, float z,
                                                const float (&s_last)[E]) {
  if (!L.writer || !L.hv || b == e) return;
  const int64_t step = int64_t{1} << (L.tl_log2 - a.hc_log2);
  const int64_t bstep = E * step;
  const int64_t last_base = b + (e - 1 - b) / bstep * bstep;
  const float inv_z = 1.f / z;
  constexpr int kU = 4;
  int64_t j = b + L.t;
  for (; j + (kU - 1) * step < last_base; j += kU * step) {
    float s[kU];
#pragma unroll
    for (int k = 0; k < kU; ++k) s[k] = a.raw[(j + k * step) * a.H + L.h];
#pragma unroll
    for (int k = 0; k < kU; ++k)
      a.attn[(j + k * step) * a.H + L.h] = elem::from_float<T>(expf(s[k] - M) * inv_z);
  }
  for (; j < last_base; j += step)
    a.attn[j * a.H + L.h] = elem::from_float<T>(expf(a.raw[j * a.H + L.h] - M) * inv_z);
#pragma unroll
  for (int x = 0; x < E; ++x)
    if (last_base + x * step + L.t < e)
      a.attn[(last_base + x * step + L.t) * a.H + L.h] =
          elem::from_float<T>(expf(s_last[x] - M) * inv_z);
}

// A whole row (long or short) of a rows-kernel team: out, then attn.
template <class I, class T, int V, int K, int E, bool kNeg>
__device__ __forceinline__ void fwd_whole_row(const FwdArgs<I, T>& a, const FwdLane& L, int64_t v) {
  const int64_t b = a.rowptr[v], e = a.rowptr[v + 1];
  const float erv = L.hv ? elem::ldg1(a.er + v * a.H + L.h) : 0.f;
  float M, z, s_last[E], acc[K][V], zn, nacc[K][V];
  fwd_row<I, T, V, K, E, false, kNeg>(a, L, b, e, erv, M, z, s_last, acc, zn, nacc);  // empty: 0
  const int zlane = L.base + (L.hl & ((1 << a.hc_log2) - 1));
  const float zf = __shfl_sync(L.mask, z, zlane);
  const float znf = __shfl_sync(L.mask, zn, zlane);
  if (L.tg == 0) {
    const float inv = b == e ? 0.f : 1.f / zf;
#pragma unroll
    for (int c = 0; c < K; ++c) {
      if (c < L.nvk) {
#pragma unroll
        for (int q = 0; q < V; ++q) acc[c][q] *= inv;
        const int64_t o = v * a.W + L.colg + c * L.kstride;
        if (kHalf<T> && a.out32) st_f32<V>(a.out32 + o, acc[c]);
        else elem::store<V>(a.out + o, acc[c]);
        if constexpr (kNeg) {  // sum_neg a_e mask_e feat[u] - (sum_neg a_e) out[v]
          const float cn = znf * inv;
#pragma unroll
          for (int q = 0; q < V; ++q) nacc[c][q] = -nacc[c][q] * inv - cn * acc[c][q];
          st_f32<V>(a.neg + o, nacc[c]);
        }
      }
    }
  }
  if (a.state && L.writer && L.t == 0 && L.hv) a.state[v * a.H + L.h] = make_float2(M, z);
  fwd_finish_attn(a, L, b, e, M, z, s_last);
}

// Long rows (a warp each) then short rows (a group each), in degree order. E = 4 (fwd_edges) is
// a kernel of its own, so that its registers do not cost E = 1 and 2 occupancy; those two share
// one kernel, as a branch (float32 at F = 16 ran 1.5-2% slower with a kernel for each).
template <class I, class T, int V, int K, bool kE4, bool kNeg>
__global__ void __launch_bounds__(kMaxWarps * 32) gat_rows_kernel(const FwdArgs<I, T> a) {
  const int lane = threadIdx.x & 31;
  const int64_t w = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const bool warp_team = w < a.n_long;
  int64_t idx;
  if (warp_team) {
    idx = a.n_heavy + w;
  } else {
    const int64_t g = ((w - a.n_long) << (5 - a.g_log2)) + (lane >> a.g_log2);
    if (g >= a.n_short) return;  // a whole group: groups do not shuffle with each other
    idx = a.n_heavy + a.n_long + g;
  }
  const FwdLane L = fwd_lane(a, lane, warp_team, V, K);
  const int64_t v = static_cast<int64_t>(__ldg(a.order + idx));
  if constexpr (kE4) {
    fwd_whole_row<I, T, V, K, 4, kNeg>(a, L, v);
  } else {
    if constexpr (K == 1)
      if (a.e == 2) return fwd_whole_row<I, T, V, K, 2, kNeg>(a, L, v);
    fwd_whole_row<I, T, V, K, 1, kNeg>(a, L, v);
  }
}

// A heavy segment: its partial state (raw logits in attn or raw).
template <class I, class T, int V, int K, int E, bool kNeg>
__device__ __forceinline__ void fwd_segment(const FwdArgs<I, T>& a, const FwdLane& L, int64_t sg) {
  const int64_t v = a.seg_row[sg];
  const int64_t b = a.seg_begin[sg];
  const int64_t e = min(b + a.seg_len, static_cast<int64_t>(a.rowptr[v + 1]));
  const float erv = L.hv ? elem::ldg1(a.er + v * a.H + L.h) : 0.f;
  float M, z, s_last[E], acc[K][V], zn, nacc[K][V];
  fwd_row<I, T, V, K, E, true, kNeg>(a, L, b, e, erv, M, z, s_last, acc, zn, nacc);
  if (L.tg == 0)
#pragma unroll
    for (int c = 0; c < K; ++c)
      if (c < L.nvk) {
        st_f32<V>(a.pacc + sg * a.W + L.colg + c * L.kstride, acc[c]);
        if constexpr (kNeg) st_f32<V>(a.pnacc + sg * a.W + L.colg + c * L.kstride, nacc[c]);
      }
  if (L.writer && L.t == 0 && L.hv) {
    a.pstat[(sg * a.H + L.h) * 2] = M;
    a.pstat[(sg * a.H + L.h) * 2 + 1] = z;
    if constexpr (kNeg) a.pzn[sg * a.H + L.h] = zn;
  }
}

// Heavy rows: a warp per segment writes its partial state (E as in gat_rows_kernel).
template <class I, class T, int V, int K, bool kE4, bool kNeg>
__global__ void __launch_bounds__(kMaxWarps * 32) gat_segment_kernel(const FwdArgs<I, T> a) {
  const int lane = threadIdx.x & 31;
  const int64_t sg = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (sg >= a.n_seg) return;
  const FwdLane L = fwd_lane(a, lane, true, V, K);
  if constexpr (kE4) {
    fwd_segment<I, T, V, K, 4, kNeg>(a, L, sg);
  } else {
    if constexpr (K == 1)
      if (a.e == 2) return fwd_segment<I, T, V, K, 2, kNeg>(a, L, sg);
    fwd_segment<I, T, V, K, 1, kNeg>(a, L, sg);
  }
}

// A warp per heavy row: per head, (M, z) = the segments' states combined; out = sum_s pacc_s
// e^(M_s - M) / z; then every segment's state is replaced by the row's (M, z) for
// gat_segment_attn_kernel.
template <class I, class T>
__global__ void __launch_bounds__(kMaxWarps * 32) gat_merge_kernel(const FwdArgs<I, T> a) {
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (r >= a.n_heavy) return;
  const int64_t v = static_cast<int64_t>(__ldg(a.order + r));
  const int64_t s0 = a.seg_start[r], s1 = a.seg_start[r + 1];
  for (int64_t h = 0; h < a.H; ++h) {
    float m = -INFINITY, z = 0.f;
    for (int64_t s = s0 + lane; s < s1; s += 32)
      attention::softmax_combine(m, z, a.pstat[(s * a.H + h) * 2], a.pstat[(s * a.H + h) * 2 + 1]);
#pragma unroll
    for (int off = 16; off; off >>= 1) {
      const float m2 = __shfl_xor_sync(kFullMask, m, off);
      const float z2 = __shfl_xor_sync(kFullMask, z, off);
      attention::softmax_combine(m, z, m2, z2);
    }
    const float inv_z = 1.f / z;
    float cn = 0.f;  // the negative logits' share of the weights (a.neg)
    if (a.neg) {
      for (int64_t s = s0 + lane; s < s1; s += 32)
        cn = fmaf(a.pzn[s * a.H + h], expf(a.pstat[(s * a.H + h) * 2] - m), cn);
      cn = attention::warp_sum(cn) * inv_z;
    }
    for (int64_t f = lane; f < a.F; f += 32) {
      float acc = 0.f, nacc = 0.f;
      for (int64_t s = s0; s < s1; ++s) {
        const float r = expf(a.pstat[(s * a.H + h) * 2] - m);
        acc = fmaf(a.pacc[s * a.W + h * a.F + f], r, acc);
        if (a.neg) nacc = fmaf(a.pnacc[s * a.W + h * a.F + f], r, nacc);
      }
      if (kHalf<T> && a.out32) a.out32[v * a.W + h * a.F + f] = acc * inv_z;
      else a.out[v * a.W + h * a.F + f] = elem::from_float<T>(acc * inv_z);
      if (a.neg) a.neg[v * a.W + h * a.F + f] = -nacc * inv_z - cn * (acc * inv_z);
    }
    if (a.state && lane == 0) a.state[v * a.H + h] = make_float2(m, z);
    __syncwarp();  // every lane has read the segments' maxima before they are overwritten
    for (int64_t s = s0 + lane; s < s1; s += 32) {
      a.pstat[(s * a.H + h) * 2] = m;
      a.pstat[(s * a.H + h) * 2 + 1] = z;
    }
  }
}

// A warp per heavy segment: attn = exp(s - M) / z with its row's (M, z), lanes over the
// segment's (edge, head) entries (contiguous in attn).
template <class I, class T>
__global__ void __launch_bounds__(kMaxWarps * 32) gat_segment_attn_kernel(const FwdArgs<I, T> a) {
  const int lane = threadIdx.x & 31;
  const int64_t sg = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (sg >= a.n_seg) return;
  const int64_t v = a.seg_row[sg];
  const int64_t b = a.seg_begin[sg];
  const int64_t e = min(b + a.seg_len, static_cast<int64_t>(a.rowptr[v + 1]));
  for (int64_t i = b * a.H + lane; i < e * a.H; i += 32) {
    const int64_t h = i % a.H;
    a.attn[i] = elem::from_float<T>(expf(a.raw[i] - a.pstat[(sg * a.H + h) * 2]) /
                                    a.pstat[(sg * a.H + h) * 2 + 1]);
  }
}

// ---- backward ------------------------------------------------------------------------------
// Rows with more than heavy_deg edges are cut into segments as in the forward (bwd_segments,
// seg_len edges each, a warp per segment) on both sides. One warp walking a whole row serialises
// it: on kron21 (max degree 62,045) a hub's warp took ~15,500 dependent steps of 4 edges while the
// rest of the grid had long finished (backward 24.7 ms at H = 1 against a 1.9 ms forward; 5.9 ms
// split, H100). The threshold: attention_kernels.hpp. A split row's sums (t, grad_er,
// and on the source side grad_el and grad_feat) are added with atomics into zeros that the
// row's own warp in the rows pass wrote first; whole rows store theirs and stay deterministic.
//
// Destination side, per head h of row v: d_a_e = grad_out[v,h]·feat[u,h] (times the dropout
// factor), t = sum_row a_e d_a_e, then d_z_e = a_e (d_a_e - t) * leaky_relu'(z_e) and
// grad_er[v,h] = sum_row d_z_e. `part` (uniform over the grid):
//   kRows      a warp per row; heavy (and empty) rows only zero their grad_er;
//   kSegSums   a warp per heavy segment: d_a stored, its share of t added into tbuf[v,h];
//   kSegGrads  a warp per heavy segment: d_z from the row's whole t, its share of grad_er added.
constexpr int kRows = 0, kSegSums = 1, kSegGrads = 2;

// A group of G lanes per edge, one edge at a time, or two (bwd_e2, K = 1 and the gather
// variant): batching kUnroll = 4 edges per group (their feature loads in flight together) was
// slower on the H100 at F = 32 (kron21 H = 1 gather 8.3 vs 6.0 ms, Reddit-shaped 12.2 vs 10.0 ms):
// the registers it takes cost more warps than it hides; two edges gain on the H200 (bwd_e2).
template <class I, class T, int V, int K, bool kAtomic, bool kOut>
__device__ __forceinline__ void bwd_dst_range(const GatArgs<I, T>& a, int part, int64_t v,
                                              int64_t b, int64_t e, int lane) {
  // A group is HC heads of GH lanes each (bwd_heads); lane (grp, hi, gl) works on head
  // h0 + hi of the chunk of heads h0. Lanes of a head past H (H not a multiple of HC) load
  // nothing and store nothing.
  const int gh_log2 = a.g_log2, hc_log2 = a.hc_log2, grp_log2 = gh_log2 + hc_log2;
  const int GH = 1 << gh_log2, HC = 1 << hc_log2, G = 1 << grp_log2, NG = 32 >> grp_log2;
  const int grp = lane >> grp_log2, gl = lane & (GH - 1), hi = (lane >> gh_log2) & (HC - 1);
  // The lanes of one group walk the same edges, so group-wide shuffles need only their mask.
  const unsigned gmask = G == 32 ? kFullMask : ((1u << G) - 1u) << (grp * G);
  const T* gv = a.grad_out + v * a.W;
  // d_a of entry i = (edge, head): the .y of its pair, which the source pass reads with the
  // weight; the atomic variant has no source pass and keeps d_a in a dense float array (the
  // pairs' doubled footprint cost it 9.6 -> 12.7 ms on the Reddit shape, H = 1, F = 32).
  // The pair's .x holds the edge's dropout factor until d_z's loop replaces it with the dropped
  // weight, so that loop does not hash the edge again.
  auto store_da = [&a](int64_t i, float mk, float d) {
    if constexpr (kAtomic) reinterpret_cast<float*>(a.dz)[i] = d;
    else a.dz[i] = make_float2(mk, d);
  };
  const uint64_t key = drop_key(a);
  // f(foff) for each of this lane's vectors of head h: passes x K vectors, GH lanes apart.
  auto each_vector = [&a, GH, gl](int64_t h, auto&& f) {
    for (int pass = 0; pass < a.passes; ++pass)
#pragma unroll
      for (int c = 0; c < K; ++c) {
        const int vi = (pass * K + c) * GH + gl;
        if (vi < a.nv) f(h * a.F + static_cast<int64_t>(vi) * V);
      }
  };
  // The d_z loop's lanes: (x, hj), head h0 + hj of the edges b + x, b + x + XS, ... so that
  // consecutive lanes store consecutive (edge, head) pairs.
  const int hj = lane & (HC - 1), x = lane >> hc_log2, XS = 32 >> hc_log2;
  // bwd_e2: E = 2 edges at once, j and j + NG a group (the dot products) and j and j + XS a lane
  // (d_z), every load of the step before its stores; else E = 1. The last step's second edge
  // may not exist (ok[1]): it re-reads edge j's source and stores nothing.
  constexpr bool kPairable = !kAtomic && K == 1;
  const bool paired = kPairable && a.e2;
  // The destination pass's dot products of head h (t: the lane's share of sum a_e d_a_e).
  auto dots = [&](auto e_count, int64_t h, bool hv, float& t) {
    constexpr int E = decltype(e_count)::value;
    for (int64_t j = b + grp; j < e; j += E * NG) {
      int64_t jx[E], u[E];
      bool ok[E];
#pragma unroll
      for (int xe = 0; xe < E; ++xe) {
        jx[xe] = j + xe * NG;
        ok[xe] = xe == 0 || jx[xe] < e;
        u[xe] = __ldg(a.col + (ok[xe] ? jx[xe] : j));
      }
      float d[E];
#pragma unroll
      for (int xe = 0; xe < E; ++xe) d[xe] = 0.f;
      if (hv)
        each_vector(h, [&](int64_t foff) {
          float xs[E][V], y[V];
#pragma unroll
          for (int xe = 0; xe < E; ++xe) elem::load<V>(xs[xe], a.feat + u[xe] * a.W + foff);
          elem::load<V>(y, gv + foff);
#pragma unroll
          for (int xe = 0; xe < E; ++xe)
#pragma unroll
            for (int q = 0; q < V; ++q) d[xe] = fmaf(xs[xe][q], y[q], d[xe]);
        });
      for (int off = GH >> 1; off; off >>= 1)
#pragma unroll
        for (int xe = 0; xe < E; ++xe) d[xe] += __shfl_xor_sync(gmask, d[xe], off);
      if (!hv) continue;
#pragma unroll
      for (int xe = 0; xe < E; ++xe) {
        if (!ok[xe]) continue;
        const float mask = drop_factor(a, key, jx[xe], h);
        d[xe] *= mask;
        const float aj = elem::ldg1(a.attn_in + jx[xe] * a.H + h);
        t = fmaf(aj, d[xe], t);
        if (gl == 0) store_da(jx[xe] * a.H + h, mask, d[xe]);
        if constexpr (kAtomic) {
          const float w = aj * mask;
          if (w != 0.f)
            each_vector(h, [&](int64_t foff) {
              float y[V];
              elem::load<V>(y, gv + foff);
#pragma unroll
              for (int q = 0; q < V; ++q) y[q] *= w;
              atomic_add_f32<V>(a.grad_feat + u[xe] * a.W + foff, y);
            });
        }
      }
    }
  };
  // d_z of head hd's edges (from the row's t), stored with the dropped weight, summed into ger.
  auto dzs = [&](auto e_count, int64_t hd, float t, float erv, float& ger) {
    constexpr int E = decltype(e_count)::value;
    for (int64_t j = b + x; j < e; j += E * XS) {
      int64_t jx[E], u[E];
      bool ok[E];
      float aj[E], dj[E], mk[E], elu[E];
#pragma unroll
      for (int xe = 0; xe < E; ++xe) {
        jx[xe] = j + xe * XS;
        ok[xe] = xe == 0 || jx[xe] < e;
        u[xe] = __ldg(a.col + (ok[xe] ? jx[xe] : j));
        aj[xe] = ok[xe] ? elem::ldg1(a.attn_in + jx[xe] * a.H + hd) : 0.f;
        if constexpr (kAtomic) {
          dj[xe] = ok[xe] ? reinterpret_cast<const float*>(a.dz)[jx[xe] * a.H + hd] : 0.f;
          mk[xe] = 0.f;  // unused: the atomic variant stores no pairs
        } else {
          const float2 pr = ok[xe] ? a.dz[jx[xe] * a.H + hd] : make_float2(0.f, 0.f);
          mk[xe] = pr.x;
          dj[xe] = pr.y;
        }
      }
#pragma unroll
      for (int xe = 0; xe < E; ++xe) elu[xe] = elem::ldg1(a.el + u[xe] * a.H + hd);
#pragma unroll
      for (int xe = 0; xe < E; ++xe) {
        if (!ok[xe]) continue;
        const float ds = aj[xe] * (dj[xe] - t);
        const float dzv = elu[xe] + erv > 0.f ? ds : ds * a.slope;
        ger += dzv;
        if constexpr (kAtomic) atomicAdd(a.grad_el + u[xe] * a.H + hd, dzv);
        else a.dz[jx[xe] * a.H + hd] = make_float2(aj[xe] * mk[xe], dzv);
      }
    }
  };
  // kOut: t = grad_out[v, h]·out[v, h] (the forward's out is sum_e a_e mask_e feat[u, h], so
  // this is sum_e a_e d_a_e), known before the edges are walked: one walk gives each edge's d_z,
  // and no d_a is stored and read back. Each group's lane gl = 0 stores the edge's pair and sums
  // its d_z into ger.
  // Halves: a_e = exp(s_e - max) / sum from the forward's state (sm, inv_sum), in float32.
  auto dots_dz = [&](auto e_count, int64_t h, bool hv, float t, float erv, float sm,
                     float inv_sum, float& ger) {
    constexpr int E = decltype(e_count)::value;
    for (int64_t j = b + grp; j < e; j += E * NG) {
      int64_t jx[E], u[E];
      bool ok[E];
      float aj[E], elu[E];
#pragma unroll
      for (int xe = 0; xe < E; ++xe) {
        jx[xe] = j + xe * NG;
        ok[xe] = xe == 0 || jx[xe] < e;
        u[xe] = __ldg(a.col + (ok[xe] ? jx[xe] : j));
        if constexpr (!kHalf<T>)
          aj[xe] = ok[xe] && hv ? elem::ldg1(a.attn_in + jx[xe] * a.H + h) : 0.f;
      }
#pragma unroll
      for (int xe = 0; xe < E; ++xe) elu[xe] = hv ? elem::ldg1(a.el + u[xe] * a.H + h) : 0.f;
      if constexpr (kHalf<T>)  // the forward's expression, so the forward's value
#pragma unroll
        for (int xe = 0; xe < E; ++xe)
          aj[xe] = ok[xe] && hv ? expf(attention::leaky(elu[xe] + erv, a.slope) - sm) * inv_sum
                                : 0.f;
      float d[E];
#pragma unroll
      for (int xe = 0; xe < E; ++xe) d[xe] = 0.f;
      if (hv)
        each_vector(h, [&](int64_t foff) {
          float xs[E][V], y[V];
#pragma unroll
          for (int xe = 0; xe < E; ++xe) elem::load<V>(xs[xe], a.feat + u[xe] * a.W + foff);
          elem::load<V>(y, gv + foff);
#pragma unroll
          for (int xe = 0; xe < E; ++xe)
#pragma unroll
            for (int q = 0; q < V; ++q) d[xe] = fmaf(xs[xe][q], y[q], d[xe]);
        });
      for (int off = GH >> 1; off; off >>= 1)
#pragma unroll
        for (int xe = 0; xe < E; ++xe) d[xe] += __shfl_xor_sync(gmask, d[xe], off);
      if (!hv || gl != 0) continue;
#pragma unroll
      for (int xe = 0; xe < E; ++xe) {
        if (!ok[xe]) continue;
        const float mask = drop_factor(a, key, jx[xe], h);
        const float ds = aj[xe] * (d[xe] * mask - t);
        const float dzv = elu[xe] + erv > 0.f ? ds : ds * a.slope;
        ger += dzv;
        a.dz[jx[xe] * a.H + h] = make_float2(aj[xe] * mask, dzv);
      }
    }
  };
  using One = std::integral_constant<int, 1>;
  using Two = std::integral_constant<int, 2>;
  for (int64_t h0 = 0; h0 < a.H; h0 += HC) {
    const int64_t h = h0 + hi;
    const bool hv = h < a.H;
    if constexpr (kOut) {  // any part but kSegGrads (not launched): the whole walk
      float t = 0.f;
      if (hv)
        each_vector(h, [&](int64_t foff) {
          float y[V], o[V];
          elem::load<V>(y, gv + foff);
          ld_f32<V>(o, a.fwd_out + v * a.W + foff);
#pragma unroll
          for (int q = 0; q < V; ++q) t = fmaf(y[q], o[q], t);
        });
      for (int off = GH >> 1; off; off >>= 1) t += __shfl_xor_sync(gmask, t, off);
      const float erv = hv ? elem::ldg1(a.er + v * a.H + h) : 0.f;
      float sm = 0.f, inv_sum = 0.f;
      if constexpr (kHalf<T>)
        if (hv) {
          const float2 st = a.state[v * a.H + h];
          sm = st.x;
          inv_sum = 1.f / st.y;  // as the forward's inv_z
        }
      float ger = 0.f;
      if (paired) dots_dz(Two{}, h, hv, t, erv, sm, inv_sum, ger);
      else dots_dz(One{}, h, hv, t, erv, sm, inv_sum, ger);
      // Over the groups (lane gl = 0 of each holds its edges' sum).
      for (int off = 16; off >= G; off >>= 1) ger += __shfl_xor_sync(kFullMask, ger, off);
      if (grp == 0 && gl == 0 && hv) {
        if (part == kRows) a.grad_er[v * a.H + h] = ger;
        else atomicAdd(a.grad_er + v * a.H + h, ger);
      }
      continue;
    }
    float t = 0.f;
    if (part != kSegGrads) {
      if constexpr (kPairable) {
        if (paired) dots(Two{}, h, hv, t);
        else dots(One{}, h, hv, t);
      } else {
        dots(One{}, h, hv, t);
      }
      // Every lane of a head holds its group's t; summing across groups counts each edge once.
      for (int off = 16; off >= G; off >>= 1) t += __shfl_xor_sync(kFullMask, t, off);
      if (part == kSegSums) {
        if (grp == 0 && gl == 0 && hv) atomicAdd(a.tbuf + v * a.H + h, t);
        continue;
      }
      __syncwarp();  // d_a stored by one lane per group is read below by another lane
    } else if (hv) {
      t = a.tbuf[v * a.H + h];  // the whole row's, summed by the previous launch
    }
    // Head h0 + hj's t, from the lane of group 0 that holds it.
    t = __shfl_sync(kFullMask, t, hj << gh_log2);
    const int64_t hd = h0 + hj;
    const bool hdv = hd < a.H;
    const float erv = hdv ? elem::ldg1(a.er + v * a.H + hd) : 0.f;
    float ger = 0.f;
    if (hdv) {
      if constexpr (kPairable) {
        if (paired) dzs(Two{}, hd, t, erv, ger);
        else dzs(One{}, hd, t, erv, ger);
      } else {
        dzs(One{}, hd, t, erv, ger);
      }
    }
    for (int off = 16; off >= HC; off >>= 1) ger += __shfl_xor_sync(kFullMask, ger, off);
    if (x == 0 && hdv) {
      if (part == kRows) a.grad_er[v * a.H + hd] = ger;
      else atomicAdd(a.grad_er + v * a.H + hd, ger);
    }
  }
}

// Backward kernel 1 (destination side, see above). kAtomic also scatters grad_feat and grad_el
// (which the launcher zeroed first).
template <class I, class T, int V, int K, bool kAtomic, bool kOut = false>
__global__ void __launch_bounds__(kMaxWarps * 32) gat_backward_rows_kernel(const GatArgs<I, T> a,
                                                                           int part) {
  const int lane = threadIdx.x & 31;
  const int64_t w = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  int64_t v, b, e;
  if (part == kRows) {
    if (w >= a.n) return;
    v = w;
    b = a.rowptr[v];
    e = a.rowptr[v + 1];
    if (b == e || e - b > a.heavy_deg) {  // empty: zero gradient; heavy: its segments add
      for (int64_t h = lane; h < a.H; h += 32) a.grad_er[v * a.H + h] = 0.f;
      return;
    }
  } else {
    if (w >= a.n_seg) return;
    v = a.seg_row[w];
    b = a.seg_begin[w];
    e = min(b + a.seg_len, static_cast<int64_t>(a.rowptr[v + 1]));
  }
  bwd_dst_range<I, T, V, K, kAtomic, kOut>(a, part, v, b, e, lane);
}

// Backward kernel 2 (per source u, over the transposed graph): gathers grad_el and grad_feat.
// Here rowptr/col are the transpose's and col[t] is the destination v of edge perm[t]. `split`:
// a warp per heavy segment of the transpose, adding into the zeros its row's warp wrote.
// kRecompute (the one walk by source, GatProblem::neg): no destination pass and no pairs. Each
// edge's weight is recomputed from its destination's dtab entry as the forward computed it,
// a_e = exp(leaky(el[u] + er[v]) - max_v) / sum_v, and grad_el[u] = sum_e lambda_e a_e (mask_e
// d_a_e - t_v) (lambda_e = leaky_relu'(z_e)) is summed as feat[u]·(sum_e lambda_e w_e
// grad_out[v]) - sum_e lambda_e a_e t_v: a second vector sum beside grad_feat's, no dot product
// an edge. The pairs' reads through perm were random 8-byte reads of an [nnz, H] array (the
// Reddit shape: 0.9 GB) and the destination pass a walk of its own.
template <class I, class T, int V, int K, bool kRecompute = false>
__global__ void __launch_bounds__(kMaxWarps * 32) gat_backward_sources_kernel(const GatArgs<I, T> a,
                                                                              bool split) {
  const int lane = threadIdx.x & 31;
  const int64_t w = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  int64_t u, b, e;
  if (!split) {
    if (w >= a.n) return;
    u = w;
    b = a.rowptr[u];
    e = a.rowptr[u + 1];
  } else {
    if (w >= a.n_seg) return;
    u = a.seg_row[w];
    b = a.seg_begin[w];
    e = min(b + a.seg_len, static_cast<int64_t>(a.rowptr[u + 1]));
  }
  float* gfu = a.grad_feat + u * a.W;
  // A vertex that is no one's source gets zero gradients; a heavy one starts from zero.
  if (!split && (b == e || e - b > a.heavy_deg)) {
    for (int64_t c = lane; c < a.W; c += 32) gfu[c] = 0.f;
    for (int64_t h = lane; h < a.H; h += 32) a.grad_el[u * a.H + h] = 0.f;
    return;
  }
  // Groups of HC heads of GH lanes, as in the destination pass (bwd_dst_range).
  const int gh_log2 = a.g_log2, grp_log2 = gh_log2 + a.hc_log2;
  const int GH = 1 << gh_log2, G = 1 << grp_log2, NG = 32 >> grp_log2;
  const int grp = lane >> grp_log2, gl = lane & (GH - 1);
  const int hi = (lane >> gh_log2) & ((1 << a.hc_log2) - 1);
  // Edges in flight per group: kUnroll, fewer when a lane holds more than 16 bytes of them
  // (or, recomputing, half rows: 2 then ran 1.68 against 1.97 ms, float32 rows 1.87 against 1.81,
  // one head of 16 on the Reddit shape, H200).
  constexpr int kU =
      K * V * int(sizeof(T)) > 16 || (kRecompute && kHalf<T>) ? 2 : kUnroll;
  using P = elem::Packed<T, V>;
  const uint64_t key = kRecompute ? drop_key(a) : 0;
  for (int64_t h0 = 0; h0 < a.H; h0 += int64_t{1} << a.hc_log2) {
    // A lane of a head past H reads the last head's pairs and stores nothing.
    const bool hv = h0 + hi < a.H;
    const int64_t h = hv ? h0 + hi : a.H - 1;
    const float elu = kRecompute ? a.el[u * a.H + h] : 0.f;
    // grad_el's sum of d_z rides in the first feature pass: each group adds the d_z of its
    // edges (every lane of a group the same), instead of a separate walk over the edges
    // (H100, F = 32, H = 1: kron21 6.13 -> 5.99 ms, Reddit-shaped 10.79 -> 10.02 ms).
    float s = 0.f;
    for (int pass = 0; pass < a.passes; ++pass) {
      // This lane's K vectors of the pass: vi(c) = (pass * K + c) * G + gl, those below nv.
      const int vi0 = pass * K * GH + gl;
      const int nvk = hv && vi0 < a.nv ? min(K, (a.nv - vi0 + GH - 1) / GH) : 0;
      const bool first = pass == 0;
      const int64_t foff = h * a.F + static_cast<int64_t>(vi0) * V;
      const int64_t kstride = static_cast<int64_t>(GH) * V;
      auto gather = [&](P (&y)[K], int64_t dst) {
        const T* row = a.grad_out + dst * a.W + foff;
#pragma unroll
        for (int c = 0; c < K; ++c) {
          if (c < nvk) elem::load_packed<V>(y[c], row + c * kstride);
          else elem::zero_packed<V>(y[c]);
        }
      };
      float acc[K][V], qacc[kRecompute ? K : 1][V];
#pragma unroll
      for (int c = 0; c < K; ++c) zero_vec(acc[c]);
      if constexpr (kRecompute)
#pragma unroll
        for (int c = 0; c < K; ++c) zero_vec(qacc[c]);
      // Recomputing: edge j (forward index) into destination dst, its table entry D.
      auto recompute = [&](int64_t j, const float4 D, const P (&y)[K]) {
        if constexpr (kRecompute) {
          const float zl = elu + D.x;
          const float aw = expf(attention::leaky(zl, a.slope) - D.z) * D.w;
          const float w = aw * drop_factor(a, key, j, h);
          const float lam = zl > 0.f ? 1.f : a.slope;
          if (first && gl == 0) s = fmaf(-lam * aw, D.y, s);  // once a group
          fma_packed(w, y, acc);
          fma_packed(lam * w, y, qacc);
        }
      };
      int64_t t = b + grp;
      for (; t + (kU - 1) * NG < e; t += kU * NG) {
        int64_t j[kU], dst[kU];
        P y[kU][K];
        float wt[kU], dzv[kU];
        float4 D[kU];
#pragma unroll
        for (int k = 0; k < kU; ++k) {
          j[k] = __ldg(a.perm + t + k * NG);
          dst[k] = __ldg(a.col + t + k * NG);
        }
#pragma unroll
        for (int k = 0; k < kU; ++k) {
          gather(y[k], dst[k]);
          if constexpr (kRecompute) {
            D[k] = a.dtab[dst[k] * a.H + h];
          } else {
            const float2 wz = __ldg(a.dz + j[k] * a.H + h);
            wt[k] = wz.x;
            dzv[k] = first ? wz.y : 0.f;
          }
        }
#pragma unroll
        for (int k = 0; k < kU; ++k) {
          if constexpr (kRecompute) {
            recompute(j[k], D[k], y[k]);
          } else {
            s += dzv[k];
            fma_packed(wt[k], y[k], acc);
          }
        }
      }
      for (; t < e; t += NG) {
        const int64_t j = __ldg(a.perm + t), dst = __ldg(a.col + t);
        P y[K];
        gather(y, dst);
        if constexpr (kRecompute) {
          recompute(j, a.dtab[dst * a.H + h], y);
        } else {
          const float2 wz = __ldg(a.dz + j * a.H + h);
          if (first) s += wz.y;
          fma_packed(wz.x, y, acc);
        }
      }
      if constexpr (kRecompute) {  // this lane's share of feat[u]·q (the groups' sum is below)
        const T* fu = a.feat + u * a.W + foff;
#pragma unroll
        for (int c = 0; c < K; ++c) {
          if (c < nvk) {
            float x[V];
            elem::load<V>(x, fu + c * kstride);
#pragma unroll
            for (int q = 0; q < V; ++q) s = fmaf(x[q], qacc[c][q], s);
          }
        }
      }
#pragma unroll
      for (int c = 0; c < K; ++c)
#pragma unroll
        for (int q = 0; q < V; ++q)
          for (int off = 16; off >= G; off >>= 1)
            acc[c][q] += __shfl_xor_sync(kFullMask, acc[c][q], off);
      if (grp == 0)
#pragma unroll
        for (int c = 0; c < K; ++c) {
          if (c < nvk) {
            if (split) atomic_add_f32<V>(gfu + foff + c * kstride, acc[c]);
            else st_f32<V>(gfu + foff + c * kstride, acc[c]);
          }
        }
    }
    // The groups' sums (each group's lanes agree) add to the row's. Recomputing, each lane holds
    // its own share of the dot products (and lane gl = 0 its group's t terms): the head's lanes
    // are summed first.
    if constexpr (kRecompute)
      for (int off = GH >> 1; off; off >>= 1) s += __shfl_xor_sync(kFullMask, s, off);
    for (int off = 16; off >= G; off >>= 1) s += __shfl_xor_sync(kFullMask, s, off);
    if (grp == 0 && gl == 0 && hv) {
      if (split) atomicAdd(a.grad_el + u * a.H + h, s);
      else a.grad_el[u * a.H + h] = s;
    }
  }
}

// The one walk by source's table and grad_er (GatArgs::neg), a warp per destination row v and
// head h: t = grad_out[v, h]·out[v, h]; dtab = (er, t, max, 1 / sum) (1 / sum as the forward's
// inv_z, so that the recomputed weights are the forward's); grad_er = sum_e lambda_e a_e (mask_e
// d_a_e - t) = (slope - 1) grad_out[v, h]·neg[v, h], the sum over the edges at lambda = 1 being
// t - t sum_e a_e = 0.
template <class I, class T>
__global__ void __launch_bounds__(kMaxWarps * 32) gat_backward_prep_kernel(const GatArgs<I, T> a) {
  const int lane = threadIdx.x & 31;
  const int64_t v = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (v >= a.n) return;
  for (int64_t h = 0; h < a.H; ++h) {
    const int64_t o = v * a.W + h * a.F;
    float t = 0.f, r = 0.f;
    for (int64_t f = lane; f < a.F; f += 32) {
      const float g = elem::ldg1(a.grad_out + o + f);
      t = fmaf(g, a.fwd_out[o + f], t);
      r = fmaf(g, a.neg[o + f], r);
    }
    t = attention::warp_sum(t);
    r = attention::warp_sum(r);
    if (lane == 0) {
      const float2 st = a.state[v * a.H + h];
      a.dtab[v * a.H + h] = make_float4(a.er[v * a.H + h], t, st.x, 1.f / st.y);
      a.grad_er[v * a.H + h] = (a.slope - 1.f) * r;
    }
  }
}

template <class I, class T>
GatArgs<I, T> make_args(const GatProblem& p, int nv) {
  GatArgs<I, T> a{};
  const Graph& g = *p.g;
  a.rowptr = g.rowptr.data<I>();
  a.col = g.col.data<I>();
  a.feat = static_cast<const T*>(p.feat->raw());
  a.el = p.el->data<float>();
  a.er = p.er->data<float>();
  a.n = g.n_rows;
  a.H = p.H;
  a.F = p.F;
  a.W = p.H * p.F;
  a.nv = nv;
  a.slope = p.negative_slope;
  a.dropout = p.dropout > 0.f;
  a.p_drop = p.dropout;
  a.scale = p.dropout_scale;
  a.seed = p.seed;
  a.seed_ptr = p.seed_ptr;
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

// ---- forward: schedule and launch ----------------------------------------------------------

// The heavy rows' segments (rows with more than heavy_deg edges, cut into seg_len edges each).
struct Segments {
  Tensor seg_row, seg_begin, seg_start;  // int64, on the graph's device
  int64_t n_heavy = 0, n_seg = 0, seg_len = 1;
};

// Segments of the heavy rows among `rows`, in that order; seg_start[r] is the first segment of
// the r-th heavy row met.
template <class I>
void build_segments(Segments& s, const std::vector<I>& rp, const std::vector<I>& rows,
                    int64_t heavy_deg, const Device& dev) {
  s.seg_len = std::max<int64_t>(heavy_deg / 4, 1);
  std::vector<int64_t> seg_row, seg_begin, seg_start{0};
  for (const I row : rows) {
    const int64_t v = static_cast<int64_t>(row);
    const int64_t d = static_cast<int64_t>(rp[size_t(v) + 1]) - static_cast<int64_t>(rp[size_t(v)]);
    if (d <= heavy_deg) continue;
    ++s.n_heavy;
    for (int64_t b = 0; b < d; b += s.seg_len) {
      seg_row.push_back(v);
      seg_begin.push_back(static_cast<int64_t>(rp[size_t(v)]) + b);
    }
    seg_start.push_back(static_cast<int64_t>(seg_row.size()));
  }
  s.n_seg = static_cast<int64_t>(seg_row.size());
  if (s.n_heavy) {
    s.seg_row = Tensor::from_vector(seg_row).to(dev);
    s.seg_begin = Tensor::from_vector(seg_begin).to(dev);
    s.seg_start = Tensor::from_vector(seg_start).to(dev);
  }
}

// Rows by decreasing degree and the heavy rows' segments in that order, on the graph's device:
// a function of rowptr only, computed once per graph structure (and heavy_deg) and kept in
// Graph::cache.
struct FwdSchedule : Segments {
  Tensor order;  // graph index type
  int64_t n_long = 0, n_short = 0;
  // Set when `order` was sorted on the GPU: a call on another stream waits for the sort.
  rowpar::BuiltOn built;
};

// Sort keys of the GPU degree order: max_deg - degree (ascending = decreasing degree), with the
// rows as values (a stable radix sort keeps ties by row, as the host's counting sort does).
template <class I>
__global__ void degree_keys_kernel(const I* __restrict__ rowptr, int64_t n, int64_t max_deg,
                                   uint8_t* __restrict__ keys, I* __restrict__ rows) {
  const int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= n) return;
  keys[v] = static_cast<uint8_t>(max_deg - (static_cast<int64_t>(rowptr[v + 1]) -
                                            static_cast<int64_t>(rowptr[v])));
  rows[v] = static_cast<I>(v);
}

// The order of rows by decreasing degree, ties by row, written to `order` on stream st. Only
// for max_deg <= kLongDeg (the keys fit a byte).
template <class I>
void gpu_degree_order(const Graph& g, int64_t max_deg, Tensor& order, cudaStream_t st) {
  const int64_t n = g.n_rows;
  int end_bit = 1;
  while ((int64_t{1} << end_bit) <= max_deg) ++end_bit;
  // Scratch: keys in, keys out, rows in, then CUB's own.
  size_t cub_bytes = 0;
  SPGNN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, cub_bytes, static_cast<const uint8_t*>(nullptr), static_cast<uint8_t*>(nullptr),
      static_cast<const I*>(nullptr), static_cast<I*>(nullptr), n, 0, end_bit, st));
  const size_t align = 256, keys_bytes = (static_cast<size_t>(n) + align - 1) / align * align;
  const size_t rows_bytes = (static_cast<size_t>(n) * sizeof(I) + align - 1) / align * align;
  StreamScratch scratch(2 * keys_bytes + rows_bytes + cub_bytes, st);
  auto* base = reinterpret_cast<unsigned char*>(scratch.get());
  auto* keys_in = reinterpret_cast<uint8_t*>(base);
  auto* keys_out = reinterpret_cast<uint8_t*>(base + keys_bytes);
  auto* rows_in = reinterpret_cast<I*>(base + 2 * keys_bytes);
  void* cub_tmp = base + 2 * keys_bytes + rows_bytes;
  degree_keys_kernel<I><<<static_cast<unsigned>((n + 255) / 256), 256, 0, st>>>(
      g.rowptr.data<I>(), n, max_deg, keys_in, rows_in);
  SPGNN_CUDA_CHECK_LAUNCH();
  SPGNN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(cub_tmp, cub_bytes, keys_in, keys_out,
                                                   rows_in, order.data<I>(), n, 0, end_bit, st));
}

template <class I>
std::shared_ptr<FwdSchedule> fwd_schedule(const Graph& g, int64_t heavy_deg, cudaStream_t st) {
  const std::string key = std::string("gat_fused.fwd.") + dtype_name(g.index_dtype()) + "." +
                          g.device().str() + "." + std::to_string(heavy_deg);
  // Read before the cache's lock, which degree_stats takes too (see bwd_segments).
  const int64_t stats_max = degree_stats(g)->max_deg;
  std::lock_guard<std::mutex> lock(g.cache->mutex);
  std::shared_ptr<void>& item = g.cache->items[key];
  if (item) return std::static_pointer_cast<FwdSchedule>(item);
  if (g.n_rows > 0 && stats_max <= std::min(kLongDeg, heavy_deg)) {
    // Every row is short: the counts are known without reading rowptr, and the degree order is
    // sorted on the GPU. The degree statistics cost no wait when the graph's builder handed them
    // in (the Python package's GPU build does, for each new graph of a mini-batch loop).
    auto s = std::make_shared<FwdSchedule>();
    s->seg_len = std::max<int64_t>(heavy_deg / 4, 1);  // as build_segments sets it
    s->n_short = g.n_rows;
    s->order = Tensor::empty({g.n_rows}, g.index_dtype(), g.device());
    gpu_degree_order<I>(g, stats_max, s->order, st);
    s->built.record(st);
    item = s;
    return s;
  }
  const std::vector<I> rp = g.rowptr.to_vector<I>();
  const int64_t n = g.n_rows;
  std::vector<int64_t> deg(static_cast<size_t>(n));
  int64_t max_deg = 0;
  for (int64_t v = 0; v < n; ++v) {
    deg[size_t(v)] = static_cast<int64_t>(rp[size_t(v) + 1]) - static_cast<int64_t>(rp[size_t(v)]);
    max_deg = std::max(max_deg, deg[size_t(v)]);
  }
  // Counting sort, decreasing degree, ties by row (deterministic).
  std::vector<int64_t> first(static_cast<size_t>(max_deg) + 2, 0);
  for (int64_t v = 0; v < n; ++v) ++first[size_t(max_deg - deg[size_t(v)]) + 1];
  for (size_t d = 1; d < first.size(); ++d) first[d] += first[d - 1];
  std::vector<I> order(static_cast<size_t>(n));
  for (int64_t v = 0; v < n; ++v)
    order[size_t(first[size_t(max_deg - deg[size_t(v)])]++)] = static_cast<I>(v);
  auto s = std::make_shared<FwdSchedule>();
  build_segments(*s, rp, order, heavy_deg, g.device());
  for (int64_t v = 0; v < n; ++v)
    s->n_long += deg[size_t(v)] > kLongDeg && deg[size_t(v)] <= heavy_deg;
  s->n_short = n - s->n_heavy - s->n_long;
  s->order = Tensor::from_vector(order).to(g.device());
  item = s;
  return s;
}

// The backward's segments: only the heavy rows, in row order (its split kernels add with atomics,
// so the order of the segments does not matter). Neither the forward's degree order nor its sort
// is needed, and the backward's threshold usually differs from the forward's.
template <class I>
std::shared_ptr<Segments> bwd_segments(const Graph& g, int64_t heavy_deg) {
  const std::string key = std::string("gat_fused.bwd.") + dtype_name(g.index_dtype()) + "." +
                          g.device().str() + "." + std::to_string(heavy_deg);
  // No row over heavy_deg: no segments, and no copy of rowptr to find that out. The degree
  // statistics cost no wait when the graph's builder handed them in (the Python package's GPU
  // build does, for each new graph of a mini-batch loop). Otherwise they read rowptr once (and
  // are kept for `auto`), so a graph with heavy rows reads it twice on its first backward, not
  // once: left so, as it happens once per graph. Read before the cache's lock, which
  // degree_stats takes too.
  const bool none_heavy = degree_stats(g)->max_deg <= heavy_deg;
  std::lock_guard<std::mutex> lock(g.cache->mutex);
  std::shared_ptr<void>& item = g.cache->items[key];
  if (item) return std::static_pointer_cast<Segments>(item);
  if (none_heavy) {
    auto s = std::make_shared<Segments>();
    s->seg_len = std::max<int64_t>(heavy_deg / 4, 1);  // as build_segments sets it
    item = s;
    return s;
  }
  const std::vector<I> rp = g.rowptr.to_vector<I>();
  std::vector<I> heavy;
  for (int64_t v = 0; v < g.n_rows; ++v)
    if (static_cast<int64_t>(rp[size_t(v) + 1]) - static_cast<int64_t>(rp[size_t(v)]) > heavy_deg)
      heavy.push_back(static_cast<I>(v));
  auto s = std::make_shared<Segments>();
  build_segments(*s, rp, heavy, heavy_deg, g.device());
  item = s;
  return s;
}

// The vector width of a head row: for float32 what gnnone's geometry picks (4, 2 or 1 floats);
// for halves 8 (at most `max_half`) or 4 elements, 0 when F % 4 != 0 or a row pointer is not
// aligned to 4 halves (the front door then runs the float32 kernels on a converted copy).
// `f32_out` is a float32 array written with the same vectors (grad_feat), which needs 16 bytes.
// The forward takes 8 halves a load only for heads narrow enough to take more edges a logit
// lane with them (fwd_half_vector): at one edge a lane (Reddit shape, H200, bfloat16, H = 1) 8
// halves took 1.24x the time of 4 at F = 16 and 1.11x at F = 32, its batches bound by the
// logits' latency chain, and 4 halves a lane put twice the lanes on a row's gathers. The
// backward gains from 8 (0.80x the time of 4 at F = 16, 0.73x at F = 32).
int row_vector(const GatProblem& p, std::initializer_list<const void*> ptrs,
               const void* f32_out = nullptr, int max_half = 8) {
  std::vector<const void*> v(ptrs);
  if (!is_half(p.feat->dtype())) {
    if (f32_out) v.push_back(f32_out);
    return gnnone::make_geometry(p.F, true, v.data(), static_cast<int>(v.size())).V;
  }
  const int V =
      std::min(max_half, elem::vector_width(p.F, 2, v.data(), static_cast<int>(v.size())));
  return V >= 4 && (!f32_out || gnnone::aligned_to(f32_out, 16)) ? V : 0;
}

// Column chunks of the forward pass (see "forward" above).
struct FwdGeometry {
  int V = 1, K = 1, g_log2 = 0, hc_log2 = 0, subs = 1;
  int64_t chunks = 1;
};

int pow2_floor(int64_t x) {
  int p = 1;
  while (int64_t{p} * 2 <= x) p *= 2;
  return p;
}
int log2_of(int64_t p) {
  int l = 0;
  while ((int64_t{1} << l) < p) ++l;
  return l;
}

// The lanes of a head row of nv vectors (forward and backward alike). Up to 32 vectors: one a
// lane (K = 1), G = the power of two >= nv. Wider heads: K = 8 / V vectors a lane (8 floats),
// G lanes, G * K vectors a pass (forward: a column chunk), passes as needed. Before, a wide
// head took one vector a lane in passes of 32 lanes, so a warp walked one edge at a time and
// re-walked the row per pass: a GAT output layer of 41 classes (scalar loads, 2 passes of 32)
// took 72 of the 105 ms of a 5-layer backward on the Reddit-shaped graph (H100). wide: the
// K-vectors layout at any width (the forward's narrower heads, fwd_goes_wide).
struct HeadLanes {
  int K = 1, g_log2 = 0, passes = 1;
};
HeadLanes head_lanes(int64_t nv, int V, bool wide = false) {
  HeadLanes l;
  if (nv <= 32 && !wide) {
    l.g_log2 = log2_of(nv);
    return l;
  }
  l.K = 8 / V;
  l.g_log2 = std::min(5, log2_of(ceil_div<int64_t>(nv, l.K)));
  l.passes = static_cast<int>(ceil_div<int64_t>(nv, int64_t{l.K} << l.g_log2));
  return l;
}

// The tuning hooks below (environment variables, read once each) let one binary time a choice
// both ways in one run; unset, every default holds. env_value: the variable's value, or "".
std::string env_value(const char* name) {
  const char* env = std::getenv(name);
  return env ? env : "";
}

// SPGNN_GAT_HEADS_PER_CHUNK=1|2|4|8 in the environment replaces the default below when the
// schedule leaves heads_per_chunk at 0 (tuning hook, like SPGNN_GNNONE_MAX_GROUP).
int forced_heads_per_chunk() {
  static const int hc = [] {
    const std::string v = env_value("SPGNN_GAT_HEADS_PER_CHUNK");
    return v == "1" || v == "2" || v == "4" || v == "8" ? std::stoi(v) : 0;
  }();
  return hc;
}

// Halves a forward load, at most: 8 for heads of up to 32 (at most 4 lanes, so two or four
// edges a logit lane: fwd_edges), 4 for wider ones (row_vector's note). Reddit shape, H200,
// bfloat16 fused forward, ms, 4 halves a lane (two edges) against 8 (four): one head of 16 2.45
// -> 2.08, of 8 1.94 -> 1.84; eight heads of 16 16.9 -> 14.2, of 8 13.0 -> 11.4. At four
// halves, four edges lost everywhere (a 2.84 against 2.45 ms; 128 registers and spills).
// SPGNN_GAT_FWD_HALF_V=4|8 in the environment forces either (a tuning hook).
int fwd_half_vector(int64_t F) {
  static const std::string v = env_value("SPGNN_GAT_FWD_HALF_V");
  if (v == "4" || v == "8") return std::stoi(v);
  return F <= 32 ? 8 : 4;
}

// V: float4 / float2 / float by F's divisibility (and pointer alignment), so a vector never
// straddles two heads. Heads of at most 32 vectors: HC heads per chunk, by default the most
// (<= 8, <= H rounded up to a power of two, HC * F / V <= 32 lanes). Keeping the gathered
// columns within L2 (gnnone's rule, 60% of L2) was the first default and lost on the H100 at
// H = 4, F = 32: Reddit-shaped 19.9 / 15.0 / 14.0 ms and R-MAT 21 9.0 / 7.3 / 6.5 ms with 1 / 2 / 4
// heads per chunk (docs/GAT_NOTES.md): a chunk re-reads col and el and recomputes the logits,
// and the row's latency chain is paid once per chunk. Eight heads a chunk (four before) on the
// Reddit shape, H200, H = 8, float32 ms: F = 4 15.46 -> 11.89, F = 8 16.72 -> 13.70, F = 16
// 20.27 -> 17.94 (bfloat16 alike). Wider heads (head_lanes): one head a chunk, K vectors a
// lane, chunks of G * K vectors.
// The forward's vector width; a half forward's out may be float32 (then aligned to 16 bytes).
int fwd_row_vector(const GatProblem& p) {
  if (is_half(p.feat->dtype()) && p.out->dtype() == DType::f32)
    return row_vector(p, {p.feat->raw()}, p.out->raw(), fwd_half_vector(p.F));
  return row_vector(p, {p.feat->raw(), p.out->raw()}, nullptr, fwd_half_vector(p.F));
}

// Heads of 8 to 32 vectors (float32 F = 32..128 at float4, half F = 64..128 at 4 halves) take
// the wide layout in the forward too: K = 8 / V vectors a lane and G = nv / K lanes a row, one
// head a chunk, so that a lane keeps twice the gathers in flight and 32 / G rows share a warp.
// Packing heads into a warp instead (HC heads of nv lanes, one vector a lane) held one row a
// warp at F = 128 and left the forward behind the unfused path (kron21, H = 1, F = 128: 25%
// occupancy, 113 registers, 4x gnnone's SpMM time on the same gathers). H200, fused forward,
// ms, packed -> wide, float32: kron21 H = 1 F = 64 3.96 -> 2.79, F = 128 7.87 -> 5.09, H = 4
// F = 128 32.29 -> 21.48; Reddit shape H = 1 F = 128 14.98 -> 10.78, H = 4 F = 128 63.06 ->
// 46.72; bfloat16: kron21 H = 1 F = 128 7.15 -> 4.92, H = 4 F = 64 13.46 -> 10.35, Reddit H = 4
// F = 128 53.19 -> 48.03. Heads of 8 vectors (float32 F = 32) win alone (H = 1: kron21 2.19 ->
// 1.72) and lose packed four to a warp, where a chunk a head re-reads col and el four times
// (H = 4: 7.14 -> 7.72, Reddit 15.0 -> 18.8; H = 2 even); so heads of 8..15 vectors go wide
// only when H = 1 (docs/GAT_NOTES.md, "Wide heads"). 8-half vectors (half heads of <= 32)
// already carry 16 bytes a lane and stay packed.
// SPGNN_GAT_FWD_WIDE=0 in the environment keeps the packed layout everywhere, =N (8..32) goes
// wide from N vectors a head at every H (tuning hooks); an explicit heads_per_chunk keeps it too.
bool fwd_goes_wide(int64_t lanes_per_head, int64_t H, int V, int heads_per_chunk) {
  static const int forced = [] {
    const std::string v = env_value("SPGNN_GAT_FWD_WIDE");
    if (v.empty()) return -1;
    const int x = std::atoi(v.c_str());
    return x >= 8 && x <= 32 ? x : 0;
  }();
  if (V >= 8 || heads_per_chunk > 0 || forced_heads_per_chunk() > 0)
    return false;
  if (forced >= 0) return forced > 0 && lanes_per_head >= forced;
  return lanes_per_head >= 16 || (lanes_per_head >= 8 && H == 1);
}

FwdGeometry fwd_geometry(const GatProblem& p, int heads_per_chunk) {
  FwdGeometry geo;
  geo.V = fwd_row_vector(p);
  SPGNN_CHECK(geo.V > 0, InvalidArgument, "gat_fused: half rows of F = ", p.F,
              " need F % 4 == 0 and rows aligned to 8 bytes");
  const int64_t lanes_per_head = p.F / geo.V;
  if (lanes_per_head > 32 || fwd_goes_wide(lanes_per_head, p.H, geo.V, heads_per_chunk)) {
    const HeadLanes l = head_lanes(lanes_per_head, geo.V, /*wide=*/true);
    geo.K = l.K;
    geo.g_log2 = l.g_log2;
    geo.subs = l.passes;
    geo.chunks = p.H * geo.subs;
  } else {
    const int max_hc = std::min<int64_t>(
        {kMaxHc, pow2_floor(32 / lanes_per_head), int64_t{1} << log2_of(p.H)});
    int hc = heads_per_chunk > 0 ? heads_per_chunk : forced_heads_per_chunk();
    hc = hc > 0 ? std::min(hc, max_hc) : max_hc;
    geo.hc_log2 = log2_of(hc);
    geo.g_log2 = log2_of(hc * lanes_per_head);
    geo.chunks = ceil_div<int64_t>(p.H, hc);
  }
  SPGNN_CHECK(geo.chunks <= 65535, InvalidArgument, "gat_fused: H * F = ", p.H * p.F,
              " needs ", geo.chunks, " column chunks, more than one grid holds (65535)");
  return geo;
}

// Edges per logit lane and batch (fwd_row's E) where all of a batch's gathers then still go
// out before its logits: K = 1 and E * (lanes a head) <= the gathers a lane holds (fwd_row's
// kUB). Two edges: heads of at most 4 lanes (F <= 16 floats or 4-half vectors, 32 8-half
// ones, per head). The batches are latency-bound, so twice the edges per round trip pays in
// every dtype: Reddit shape, H200, fused forward at F = 16, one head, float32 3.06 -> 2.54 ms,
// bfloat16 2.63 -> 2.35; four heads 11.25 -> 9.14 and 9.58 -> 7.98 (docs/GAT_NOTES.md, "Two
// edges a lane"). Four edges: 8 halves a lane, heads of at most 2 lanes (F <= 16), so that a
// lane's 8 gathers of 16 bytes carry what float32's E = 2 does (fwd_half_vector's numbers).
// SPGNN_GAT_FWD_E2=0 (one edge) and SPGNN_GAT_FWD_E4=0 (at most two) in the environment are
// tuning hooks, like SPGNN_GAT_HEADS_PER_CHUNK.
int fwd_edges(const FwdGeometry& geo, bool half) {
  static const bool off2 = env_value("SPGNN_GAT_FWD_E2") == "0";
  static const bool off4 = env_value("SPGNN_GAT_FWD_E4") == "0";
  if (off2 || geo.K != 1) return 1;
  const int lanes = 1 << (geo.g_log2 - geo.hc_log2);
  if (half && geo.V == 8 && !off4 && 4 * lanes <= kUnrollB) return 4;
  return 2 * lanes <= kUnrollB ? 2 : 1;
}

template <class I, class T, int V, int K, bool kE4>
void forward_ve(const FwdArgs<I, T>& a0, const FwdSchedule& s, int64_t chunks, int warps,
                cudaStream_t st) {
  FwdArgs<I, T> a = a0;
  const int64_t team_warps = s.n_long + ceil_div<int64_t>(s.n_short, int64_t{32} >> a.g_log2);
  if (team_warps > 0) {
    const dim3 grid(blocks_for(team_warps, warps), static_cast<unsigned>(chunks));
    const auto rows = a.neg ? gat_rows_kernel<I, T, V, K, kE4, true>
                            : gat_rows_kernel<I, T, V, K, kE4, false>;
    rows<<<grid, warps * 32, 0, st>>>(a);
    SPGNN_CUDA_CHECK_LAUNCH();
  }
  if (s.n_heavy == 0) return;
  // Partials: pacc (and pnacc) first, so their rows stay aligned for vector stores.
  const int64_t rows_w = a.neg ? 2 : 1;
  StreamScratch part(static_cast<size_t>(s.n_seg * (rows_w * a.W + (rows_w + 1) * a.H)) *
                         sizeof(float),
                     st);
  a.pacc = part.get();
  a.pnacc = a.neg ? a.pacc + s.n_seg * a.W : nullptr;
  a.pstat = part.get() + rows_w * s.n_seg * a.W;
  a.pzn = a.neg ? a.pstat + 2 * s.n_seg * a.H : nullptr;
  const dim3 grid(blocks_for(s.n_seg, warps), static_cast<unsigned>(chunks));
  const auto segments = a.neg ? gat_segment_kernel<I, T, V, K, kE4, true>
                              : gat_segment_kernel<I, T, V, K, kE4, false>;
  segments<<<grid, warps * 32, 0, st>>>(a);
  SPGNN_CUDA_CHECK_LAUNCH();
  gat_merge_kernel<I, T><<<blocks_for(s.n_heavy, warps), warps * 32, 0, st>>>(a);
  SPGNN_CUDA_CHECK_LAUNCH();
  gat_segment_attn_kernel<I, T><<<blocks_for(s.n_seg, warps), warps * 32, 0, st>>>(a);
  SPGNN_CUDA_CHECK_LAUNCH();
}

// fwd_edges' E = 4 kernels exist only for 8 halves a lane (K = 1).
template <class I, class T, int V, int K>
void forward_v(const FwdArgs<I, T>& a, const FwdSchedule& s, int64_t chunks, int warps,
               cudaStream_t st) {
  if constexpr (kHalf<T> && V == 8 && K == 1)
    if (a.e == 4) return forward_ve<I, T, V, K, true>(a, s, chunks, warps, st);
  forward_ve<I, T, V, K, false>(a, s, chunks, warps, st);
}

template <class I, class T>
void forward(const GatProblem& p, int warps, int64_t heavy_deg, int heads_per_chunk,
             cudaStream_t st) {
  const FwdGeometry geo = fwd_geometry(p, heads_per_chunk);
  const std::shared_ptr<FwdSchedule> s = fwd_schedule<I>(*p.g, heavy_deg, st);
  s->built.wait(st);
  const Graph& g = *p.g;
  FwdArgs<I, T> a{};
  a.rowptr = g.rowptr.data<I>();
  a.col = g.col.data<I>();
  a.order = s->order.data<I>();
  if (s->n_heavy) {
    a.seg_row = s->seg_row.data<int64_t>();
    a.seg_begin = s->seg_begin.data<int64_t>();
    a.seg_start = s->seg_start.data<int64_t>();
  }
  a.feat = static_cast<const T*>(p.feat->raw());
  a.el = p.el->data<float>();
  a.er = p.er->data<float>();
  if (kHalf<T> && p.out->dtype() == DType::f32) a.out32 = p.out->data<float>();
  else a.out = static_cast<T*>(p.out->raw());
  if (p.state) a.state = reinterpret_cast<float2*>(p.state->data<float>());
  if (p.neg) a.neg = p.neg->data<float>();
  a.attn = static_cast<T*>(p.attn->raw());
  // Halves: the raw logits in float32 scratch (see FwdArgs::raw); float32 writes them in attn.
  std::unique_ptr<StreamScratch> raw;
  if constexpr (kHalf<T>) {
    raw = std::make_unique<StreamScratch>(static_cast<size_t>(g.nnz() * p.H) * sizeof(float), st);
    a.raw = raw->get();
  } else {
    a.raw = a.attn;
  }
  a.n_heavy = s->n_heavy;
  a.n_long = s->n_long;
  a.n_short = s->n_short;
  a.n_seg = s->n_seg;
  a.seg_len = s->seg_len;
  a.H = p.H;
  a.F = p.F;
  a.W = p.H * p.F;
  a.nv = static_cast<int>(p.F / geo.V);
  a.g_log2 = geo.g_log2;
  a.hc_log2 = geo.hc_log2;
  a.subs = geo.subs;
  a.slope = p.negative_slope;
  a.dropout = p.dropout > 0.f;
  a.p_drop = p.dropout;
  a.scale = p.dropout_scale;
  a.seed = p.seed;
  a.seed_ptr = p.seed_ptr;
  a.e = fwd_edges(geo, kHalf<T>);
  const bool k1 = geo.K == 1;  // else K = 8 / V
  if constexpr (kHalf<T>) {  // V = 8 (fwd_half_vector; then K = 1) or 4
    if (geo.V == 8) forward_v<I, T, 8, 1>(a, *s, geo.chunks, warps, st);
    else (k1 ? forward_v<I, T, 4, 1> : forward_v<I, T, 4, 2>)(a, *s, geo.chunks, warps, st);
  } else {
    switch (geo.V) {
      case 4: (k1 ? forward_v<I, T, 4, 1> : forward_v<I, T, 4, 2>)(a, *s, geo.chunks, warps, st); break;
      case 2: (k1 ? forward_v<I, T, 2, 1> : forward_v<I, T, 2, 4>)(a, *s, geo.chunks, warps, st); break;
      default: (k1 ? forward_v<I, T, 1, 1> : forward_v<I, T, 1, 8>)(a, *s, geo.chunks, warps, st); break;
    }
  }
}

template <class I, class T>
void set_segments(GatArgs<I, T>& a, const Segments& s) {
  a.n_seg = s.n_seg;
  a.seg_len = s.seg_len;
  a.seg_row = s.n_heavy ? s.seg_row.data<int64_t>() : nullptr;
  a.seg_begin = s.n_heavy ? s.seg_begin.data<int64_t>() : nullptr;
}

// The source pass over the transposed graph (its heavy rows split as the destination side's).
template <class I, class T, int V, int K, bool kRecompute>
void sources_v(GatArgs<I, T> a, const GatProblem& p, int warps, int64_t heavy_deg,
               cudaStream_t st) {
  const Graph& gt = *p.gt;
  const std::shared_ptr<Segments> st_t = bwd_segments<I>(gt, heavy_deg);
  set_segments(a, *st_t);
  a.rowptr = gt.rowptr.data<I>();
  a.col = gt.col.data<I>();
  a.perm = p.perm->data<int64_t>();
  a.n = gt.n_rows;
  auto kernel = gat_backward_sources_kernel<I, T, V, K, kRecompute>;
  kernel<<<blocks_for(a.n, warps), warps * 32, 0, st>>>(a, false);
  SPGNN_CUDA_CHECK_LAUNCH();
  if (st_t->n_heavy) {
    kernel<<<blocks_for(st_t->n_seg, warps), warps * 32, 0, st>>>(a, true);
    SPGNN_CUDA_CHECK_LAUNCH();
  }
}

template <class I, class T, int V, int K>
void backward_v(GatArgs<I, T> a, const GatProblem& p, int warps, bool atomic, int64_t heavy_deg,
                cudaStream_t st) {
  if (a.neg) {  // the one walk by source: no destination pass (GatArgs::neg)
    StreamScratch dtab(static_cast<size_t>(a.n * a.H) * sizeof(float4), st);
    a.dtab = reinterpret_cast<float4*>(dtab.get());
    gat_backward_prep_kernel<I, T><<<blocks_for(a.n, warps), warps * 32, 0, st>>>(a);
    SPGNN_CUDA_CHECK_LAUNCH();
    return sources_v<I, T, V, K, true>(a, p, warps, heavy_deg, st);
  }
  const std::shared_ptr<Segments> s = bwd_segments<I>(*p.g, heavy_deg);
  set_segments(a, *s);
  auto kernel = gat_backward_rows_kernel<I, T, V, K, false>;
  if constexpr (!kHalf<T>)  // halves have no atomic variant (the front door converts)
    if (atomic) kernel = gat_backward_rows_kernel<I, T, V, K, true>;
  const bool out_t = a.fwd_out && !atomic;  // t from the forward's out: one walk a row
  if (out_t) kernel = gat_backward_rows_kernel<I, T, V, K, false, true>;
  kernel<<<blocks_for(a.n, warps), warps * 32, 0, st>>>(a, kRows);
  SPGNN_CUDA_CHECK_LAUNCH();
  if (s->n_heavy && out_t) {  // the split rows' segments need no t from each other
    kernel<<<blocks_for(s->n_seg, warps), warps * 32, 0, st>>>(a, kSegSums);
    SPGNN_CUDA_CHECK_LAUNCH();
  } else if (s->n_heavy) {
    SPGNN_CUDA_CHECK(cudaMemsetAsync(a.tbuf, 0, static_cast<size_t>(a.n * a.H) * sizeof(float),
                                     st));
    for (int part : {kSegSums, kSegGrads}) {
      kernel<<<blocks_for(s->n_seg, warps), warps * 32, 0, st>>>(a, part);
      SPGNN_CUDA_CHECK_LAUNCH();
    }
  }
  if (atomic) return;
  sources_v<I, T, V, K, false>(a, p, warps, heavy_deg, st);
}

// The destination pass walks two edges a group (and a lane) at once for heads of one vector a
// lane (K = 1: up to 32 vectors), the gather variant only. One edge a group at a time leaves a
// warp only 32 / G rows' worth of loads in flight; the pairs cost two more registers a vector.
// Reddit shape, H200, backward (both passes), ms: one head, F = 16, float32 6.93 -> 5.93,
// bfloat16 5.22 -> 4.59; F = 64 16.38 -> 12.83 and 9.85 -> 7.99; four heads of 16 55.88 ->
// 53.75 and 45.84 -> 44.23 (docs/GAT_NOTES.md, "Two edges a lane"). (Batching 4 edges a group
// on the H100 at F = 32 lost: it held all four rows' vectors; this holds two.)
// SPGNN_GAT_BWD_E2=0 in the environment turns it off (a tuning hook).
bool bwd_e2(const HeadLanes& l) {
  static const bool off = env_value("SPGNN_GAT_BWD_E2") == "0";
  return !off && l.K == 1 && l.passes == 1;
}

// Heads per thread group of the backward (log2): as many as fit 32 lanes (at most H rounded up
// to a power of two) for heads of one vector a lane (K = 1), else one. A group walks an edge
// once for all its heads: one read of the edge's source (and perm), the heads' (weight, d_z)
// pairs of an edge stored and loaded side by side, and the gathered row's heads contiguous.
// One head at a time walked the row H times and touched each pair's sector H times. Reddit
// shape, H200, backward (both passes), float32 / bfloat16 ms: four heads of 16 52.3 -> 20.2 /
// 42.7 -> 12.7, eight of 8 127.0 -> 28.4 / 115.8 -> 20.6; one head unchanged (docs/GAT_NOTES.md,
// "Several heads a group"). SPGNN_GAT_BWD_HEADS=1 in the environment keeps one head a group (a
// tuning hook, like SPGNN_GAT_BWD_E2).
int bwd_heads_log2(const HeadLanes& l, int64_t H) {
  static const bool off = env_value("SPGNN_GAT_BWD_HEADS") == "1";
  if (off || l.K != 1) return 0;
  int hc = 0;
  while ((int64_t{1} << hc) < H && l.g_log2 + hc < 5) ++hc;
  return hc;
}

template <class I, class T>
void backward(const GatProblem& p, int warps, bool atomic, int64_t heavy_deg, float* grad_feat,
              float* grad_el, float* grad_er, cudaStream_t st) {
  const int V = row_vector(p, {p.feat->raw(), p.grad_out->raw()},
                           kHalf<T> ? nullptr : p.grad_feat->raw());
  SPGNN_CHECK(V > 0 && !(kHalf<T> && atomic), InvalidArgument, "gat_fused backward: half rows "
              "of F = ", p.F, " need F % 4 == 0, aligned rows and the gather variant");
  const int nv = static_cast<int>(p.F / V);
  GatArgs<I, T> a = make_args<I, T>(p, nv);
  a.attn_in = static_cast<const T*>(p.attn->raw());
  a.grad_out = static_cast<const T*>(p.grad_out->raw());
  // The forward's float32 out, read with grad_out's vectors (ignored when its rows are not
  // aligned for them, or with SPGNN_GAT_BWD_OUT=0 in the environment: a tuning hook). Halves
  // take it only with the forward's softmax state: t from a rounded out, or against rounded
  // weights, is not the sum the edges' d_a_e - t cancel against (grad_er's error grew 4x,
  // GAT_NOTES, fiftieth session); the front door passes the two together or neither.
  static const bool out_off = env_value("SPGNN_GAT_BWD_OUT") == "0";
  if (p.fwd_out && !out_off && (!kHalf<T> || p.state) &&
      gnnone::aligned_to(p.fwd_out->raw(), static_cast<size_t>(std::min(V, 4)) * sizeof(float))) {
    a.fwd_out = p.fwd_out->data<float>();
    if constexpr (kHalf<T>) a.state = reinterpret_cast<const float2*>(p.state->data<float>());
  }
  // With the forward's negative-logit sums and softmax state too, the one walk by source
  // (GatArgs::neg). SPGNN_GAT_BWD_SOURCE=0 in the environment keeps the two passes (a tuning
  // hook, like SPGNN_GAT_BWD_OUT).
  static const bool source_off = env_value("SPGNN_GAT_BWD_SOURCE") == "0";
  if (a.fwd_out && p.state && p.neg && !atomic && !source_off) {
    a.state = reinterpret_cast<const float2*>(p.state->data<float>());
    a.neg = p.neg->data<float>();
  }
  a.grad_feat = grad_feat;
  a.grad_el = grad_el;
  a.grad_er = grad_er;
  // The two passes' scratch: (weight, d_a then d_z) per edge and head, then t per row (split
  // rows only).
  std::unique_ptr<StreamScratch> dz;
  if (!a.neg) {
    const int64_t nnz = p.g->nnz();
    dz = std::make_unique<StreamScratch>(
        static_cast<size_t>((2 * nnz + p.g->n_rows) * p.H) * sizeof(float), st);
    a.dz = reinterpret_cast<float2*>(dz->get());
    a.tbuf = dz->get() + 2 * nnz * p.H;
  }
  a.heavy_deg = heavy_deg;
  const HeadLanes l = head_lanes(nv, V);
  a.g_log2 = l.g_log2;
  a.hc_log2 = bwd_heads_log2(l, p.H);
  a.passes = l.passes;
  a.e2 = bwd_e2(l);
  const bool k1 = l.K == 1;  // else K = 8 / V
  if constexpr (kHalf<T>) {
    if (V == 8) backward_v<I, T, 8, 1>(a, p, warps, atomic, heavy_deg, st);
    else (k1 ? backward_v<I, T, 4, 1> : backward_v<I, T, 4, 2>)(a, p, warps, atomic, heavy_deg, st);
  } else {
    switch (V) {
      case 4: (k1 ? backward_v<I, T, 4, 1> : backward_v<I, T, 4, 2>)(a, p, warps, atomic, heavy_deg, st); break;
      case 2: (k1 ? backward_v<I, T, 2, 1> : backward_v<I, T, 2, 4>)(a, p, warps, atomic, heavy_deg, st); break;
      default: (k1 ? backward_v<I, T, 1, 1> : backward_v<I, T, 1, 8>)(a, p, warps, atomic, heavy_deg, st); break;
    }
  }
}

void zero_async(Tensor& t, cudaStream_t st) {
  if (t.numel()) SPGNN_CUDA_CHECK(cudaMemsetAsync(t.raw(), 0, t.nbytes(), st));
}

// The kernels read el and er as float32 whatever feat's dtype. A logit is el[u] + er[v]; rounded
// to a half, each would move it by up to |s| * 2^-9 on every edge of its vertex, so float32 ones
// (what `spgnn train`'s layer and autocast pass) are used as given, and half ones are widened
// into stream-ordered scratch (capturable; they are only [n, H]). H200, the Reddit shape, one
// head, bfloat16 rows: the forward went 2.62 -> 2.38 ms at F = 16 and 3.37 -> 3.25 at F = 32 (a
// 4-byte el gather costs the same sector as a 2-byte one and drops a widening from each logit's
// dependency chain), the backward 4.78 -> 4.88 and 6.14 -> 6.23 (docs/BENCHMARKS.md).
// The returned problem points at the float32 tensors; `hold` keeps the widened copies alive.
struct LogitInputs {
  GatProblem p;
  Tensor el, er;
  std::unique_ptr<StreamScratch> hold;
};
std::unique_ptr<LogitInputs> logit_inputs(const GatProblem& p, cudaStream_t st) {
  auto r = std::make_unique<LogitInputs>();
  r->p = p;
  const Tensor* src[2] = {p.el, p.er};
  int64_t widen = 0;
  for (const Tensor* t : src)
    if (t->dtype() != DType::f32) widen += t->numel();
  if (widen > 0) r->hold = std::make_unique<StreamScratch>(static_cast<size_t>(widen) * 4, st);
  float* next = widen > 0 ? r->hold->get() : nullptr;
  Tensor* dst[2] = {&r->el, &r->er};
  for (int i = 0; i < 2; ++i) {
    const Tensor& t = *src[i];
    if (t.dtype() == DType::f32) {
      *dst[i] = t;
      continue;
    }
    cuda_convert(t.raw(), t.dtype(), next, DType::f32, t.numel(), t.device().index, st);
    // `hold` owns the memory; the token only satisfies from_external's keep-alive check.
    *dst[i] = Tensor::from_external(next, t.shape(), {}, DType::f32, t.device(),
                                    std::make_shared<int>(0), "gat_fused logits");
    next += t.numel();
  }
  r->p.el = &r->el;
  r->p.er = &r->er;
  return r;
}

}  // namespace

void gat_fused_forward(const GatProblem& p, int warps, int64_t heavy_deg, int heads_per_chunk) {
  check_warps(warps);
  SPGNN_CHECK(heavy_deg >= 4, InvalidArgument, "gat_fused: heavy_deg must be >= 4, got ",
              heavy_deg);
  const Graph& g = *p.g;
  if (g.n_rows == 0) return;
  gnnone::DeviceGuard guard(g.device().index);
  const cudaStream_t st = as_stream(p.stream);
  if (g.nnz() == 0) {  // every row is empty (the state and sums only for the record: no edge
    zero_async(*p.out, st);  // reads them)
    if (p.state) zero_async(*p.state, st);
    if (p.neg) zero_async(*p.neg, st);
    return;
  }
  SPGNN_CHECK(heads_per_chunk >= 0 && heads_per_chunk <= kMaxHc, InvalidArgument,
              "gat_fused: heads_per_chunk must be in 0..", kMaxHc, ", got ", heads_per_chunk);
  const std::unique_ptr<LogitInputs> li = logit_inputs(p, st);
  elem::dispatch(p.feat->dtype(), [&](auto t) {
    using T = decltype(t);
    if (g.index_dtype() == DType::i64) forward<int64_t, T>(li->p, warps, heavy_deg, heads_per_chunk, st);
    else forward<int32_t, T>(li->p, warps, heavy_deg, heads_per_chunk, st);
  });
}

void gat_fused_backward(const GatProblem& p, int warps, bool atomic, int64_t heavy_deg) {
  check_warps(warps);
  SPGNN_CHECK(heavy_deg >= 4, InvalidArgument, "gat_fused: heavy_deg must be >= 4, got ",
              heavy_deg);
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
  const DType dt = p.feat->dtype();
  const std::unique_ptr<LogitInputs> li = logit_inputs(p, st);
  if (!is_half(dt)) {
    float *gf = p.grad_feat->data<float>(), *gl = p.grad_el->data<float>(),
          *gr = p.grad_er->data<float>();
    if (g.index_dtype() == DType::i64) backward<int64_t, float>(li->p, warps, atomic, heavy_deg, gf, gl, gr, st);
    else backward<int32_t, float>(li->p, warps, atomic, heavy_deg, gf, gl, gr, st);
    return;
  }
  // Halves: float32 sums in stream-ordered scratch (capturable in a CUDA graph, unlike a
  // cudaMalloc), rounded into the outputs once; float32 outputs (the front door allows them
  // with half inputs) take the sums directly when grad_feat's rows are aligned for the vectors.
  const int64_t nf = p.grad_feat->numel(), nl = p.grad_el->numel(), nr = p.grad_er->numel();
  const bool direct =
      p.grad_feat->dtype() == DType::f32 && gnnone::aligned_to(p.grad_feat->raw(), 16);
  std::unique_ptr<StreamScratch> sums;
  float *gf, *gl, *gr;
  if (direct) {
    gf = p.grad_feat->data<float>();
    gl = p.grad_el->data<float>();
    gr = p.grad_er->data<float>();
  } else {
    sums = std::make_unique<StreamScratch>(static_cast<size_t>(nf + nl + nr) * sizeof(float), st);
    gf = sums->get();
    gl = gf + nf;
    gr = gl + nl;
  }
  elem::dispatch(dt, [&](auto t) {
    using T = decltype(t);
    if (g.index_dtype() == DType::i64) backward<int64_t, T>(li->p, warps, atomic, heavy_deg, gf, gl, gr, st);
    else backward<int32_t, T>(li->p, warps, atomic, heavy_deg, gf, gl, gr, st);
  });
  if (direct) return;
  const int dev = g.device().index;
  const DType out_dt = p.grad_feat->dtype();
  if (out_dt == DType::f32) {  // float32 outputs whose rows the vectors could not write
    SPGNN_CUDA_CHECK(cudaMemcpyAsync(p.grad_feat->raw(), gf, nf * sizeof(float),
                                     cudaMemcpyDeviceToDevice, st));
    SPGNN_CUDA_CHECK(cudaMemcpyAsync(p.grad_el->raw(), gl, nl * sizeof(float),
                                     cudaMemcpyDeviceToDevice, st));
    SPGNN_CUDA_CHECK(cudaMemcpyAsync(p.grad_er->raw(), gr, nr * sizeof(float),
                                     cudaMemcpyDeviceToDevice, st));
    return;
  }
  cuda_convert(gf, DType::f32, p.grad_feat->raw(), out_dt, nf, dev, st);
  cuda_convert(gl, DType::f32, p.grad_el->raw(), out_dt, nl, dev, st);
  cuda_convert(gr, DType::f32, p.grad_er->raw(), out_dt, nr, dev, st);
}

int gat_fused_half_width(const GatProblem& p, bool backward) {
  if (!is_half(p.feat->dtype())) return 0;
  return backward ? row_vector(p, {p.feat->raw(), p.grad_out->raw()})
                  : fwd_row_vector(p);
}

}  // namespace spgnn::detail
