// Internal: pieces shared by the CBSR SpGEMM (cbsr_spgemm.cu) and SSpMM (cbsr_sspmm.cu) kernels:
// the warp-segment table of a graph (cached in Graph::cache), the lane geometry over the k kept
// values of a row, vector loads / atomics and the block shape. Included by .cu files only.
//
// Work unit: a segment = at most S consecutive edges of one row (the paper's edge groups: a row
// longer than S is split, so a hub row never serialises one warp). One warp per segment; rows
// with no edges get one empty segment so the forward kernel writes their zeros with plain stores.
// Inside a warp, a CBSR row of k values is covered by L lanes holding V consecutive values each
// (float4/float2/float by k's divisibility); the warp's 32 / L lane groups take different edges of
// the segment (MaxK-GNN: floor(32/k) edge groups share a warp when k <= 16, else a warp walks one
// edge group), and when k / V > 32 a group walks the row in passes of 32 vectors. The backward's
// flat form (cbsr_sspmm.cu) keeps the lanes but gives each warp a fixed chunk of the edge list
// instead of a segment.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cbsr_shape.hpp"
#include "kernels/cuda/cuda_check.cuh"
#include "spgnn/graph.hpp"
#include "spgnn/ops.hpp"

namespace spgnn::detail::cbsr {

constexpr int lean_min_blocks(int regs) { return regs == kLeanRegs ? 6 : 2; }
constexpr int lean_threads(int regs) { return regs ? kLeanWarps * 32 : kMaxWarps * 32; }
// Edge batches: a lane group issues the loads of kUnroll edges before using any of them.
constexpr int kUnroll = 4;

// The segment table (see above), device arrays of the graph's index type.
struct Segments {
  int64_t segment = 0;     // S: edges per segment
  int64_t count = 0;       // segments
  int64_t n_split = 0;     // rows longer than S (their output rows are summed with atomics)
  const void* row = nullptr;         // [count] row of each segment
  const void* begin = nullptr;       // [count] first edge of each segment
  const void* split_rows = nullptr;  // [n_split]
};
// Built on the host from rowptr at the first call for (graph structure, S), then reused.
// skip_empty: no segments for rows without edges (the backward has nothing to do there; the
// forward needs them to store the rows' zeros).
Segments segments_for(const Graph& g, int64_t segment, bool skip_empty = false);
// S when the schedule does not set it (cbsr_shape.hpp, from the graph's average degree).
int64_t default_segment(const Graph& g);

struct Geometry {
  int V = 1;       // values per lane
  int nv = 0;      // vectors per CBSR row (k / V)
  int l_log2 = 0;  // log2(lanes per edge group), at most 5
  int passes = 1;  // passes of 32 vectors when nv > 32
};
inline bool aligned_to(const void* p, int bytes) {
  return p == nullptr || reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0;
}
// `ptrs[i]` must be aligned to `bytes_per_value[i] * V` for vector width V.
// max_v (1, 2 or 4) caps the vector width.
inline Geometry make_geometry(int64_t k, const void* const* ptrs, const int* bytes_per_value,
                              int nptrs, int max_v = 4) {
  Geometry g;
  int V = vector_width(k, max_v);
  for (int i = 0; i < nptrs; ++i)
    while (V > 1 && !aligned_to(ptrs[i], bytes_per_value[i] * V)) V /= 2;
  g.V = V;
  g.nv = static_cast<int>(k / V);
  g.l_log2 = lanes_log2(k, V);
  g.passes = (g.nv + 31) / 32;
  return g;
}

using detail::DeviceGuard;  // cuda_check.cuh
using detail::allow_smem;

// ---- device helpers --------------------------------------------------------------------------
template <int V>
__device__ __forceinline__ void ldg_vec(float (&d)[V], const float* __restrict__ p) {
  if constexpr (V == 4) {
    const float4 t = __ldg(reinterpret_cast<const float4*>(p));
    d[0] = t.x; d[1] = t.y; d[2] = t.z; d[3] = t.w;
  } else if constexpr (V == 2) {
    const float2 t = __ldg(reinterpret_cast<const float2*>(p));
    d[0] = t.x; d[1] = t.y;
  } else {
    d[0] = __ldg(p);
  }
}

// V consecutive CBSR column indices as one load word (4 u8 = 4 bytes, 4 u16 = 8 bytes), kept
// packed until used (the backward's flat form holds a batch of them across a pipeline stage).
template <class IdxT, int V>
struct IdxWord;
template <> struct IdxWord<uint8_t, 4> { using type = uchar4; };
template <> struct IdxWord<uint8_t, 2> { using type = uchar2; };
template <> struct IdxWord<uint8_t, 1> { using type = uint8_t; };
template <> struct IdxWord<uint16_t, 4> { using type = ushort4; };
template <> struct IdxWord<uint16_t, 2> { using type = ushort2; };
template <> struct IdxWord<uint16_t, 1> { using type = uint16_t; };
template <class IdxT, int V>
using idx_word_t = typename IdxWord<IdxT, V>::type;

template <class IdxT, int V>
__device__ __forceinline__ idx_word_t<IdxT, V> ldg_idx_word(const IdxT* __restrict__ p) {
  return __ldg(reinterpret_cast<const idx_word_t<IdxT, V>*>(p));
}
template <int V, class W>
__device__ __forceinline__ void unpack_idx(int (&c)[V], const W& t) {
  if constexpr (V == 4) {
    c[0] = t.x; c[1] = t.y; c[2] = t.z; c[3] = t.w;
  } else if constexpr (V == 2) {
    c[0] = t.x; c[1] = t.y;
  } else {
    c[0] = t;
  }
}
template <class IdxT, int V>
__device__ __forceinline__ void ldg_idx(int (&c)[V], const IdxT* __restrict__ p) {
  unpack_idx<V>(c, ldg_idx_word<IdxT, V>(p));
}

// A segment's edges [begin, e_end), a warp-wide chunk of 32 at a time: each lane holds one edge's
// column and weight (1 without weights), and the next chunk's are loaded while the current one is
// used, so an edge's column is there before its CBSR row is needed. Lane groups take their edges
// of the current chunk by shuffle; every lane of the warp calls these together.
template <class I>
struct EdgeChunks {
  const I* __restrict__ col;
  const float* __restrict__ w;  // nullptr: every weight is 1
  int64_t e_end;
  int lane;
  I u = 0, u_next = 0;
  float wt = 1.f, w_next = 1.f;

  __device__ __forceinline__ EdgeChunks(const I* c, const float* wp, int64_t begin, int64_t end,
                                        int l)
      : col(c), w(wp), e_end(end), lane(l) {
    load(begin, u, wt);
  }
  // Loads the chunk at c0 as the next one.
  __device__ __forceinline__ void prefetch(int64_t c0) { load(c0, u_next, w_next); }
  __device__ __forceinline__ void advance() {
    u = u_next;
    wt = w_next;
  }
  // The edges of the chunk at c0 (at most 32).
  __device__ __forceinline__ int count(int64_t c0) const {
    return e_end - c0 < 32 ? static_cast<int>(e_end - c0) : 32;
  }
  // Edge `at` of the current chunk (any lane's): its column and weight.
  __device__ __forceinline__ I col_at(int at) const { return __shfl_sync(0xffffffffu, u, at & 31); }
  __device__ __forceinline__ float w_at(int at) const {
    return w ? __shfl_sync(0xffffffffu, wt, at & 31) : 1.f;
  }

 private:
  __device__ __forceinline__ void load(int64_t c0, I& u_out, float& w_out) const {
    u_out = 0;
    w_out = 1.f;
    if (c0 + lane < e_end) {
      u_out = __ldg(col + c0 + lane);
      if (w) w_out = __ldg(w + c0 + lane);
    }
  }
};

// One vector red.global.add on Hopper (float2/float4 atomicAdd), scalars elsewhere.
template <int V>
__device__ __forceinline__ void atomic_add_vec(float* p, const float (&d)[V]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (V == 4) {
    atomicAdd(reinterpret_cast<float4*>(p), make_float4(d[0], d[1], d[2], d[3]));
  } else if constexpr (V == 2) {
    atomicAdd(reinterpret_cast<float2*>(p), make_float2(d[0], d[1]));
  } else {
    atomicAdd(p, d[0]);
  }
#else
#pragma unroll
  for (int q = 0; q < V; ++q) atomicAdd(p + q, d[q]);
#endif
}

// L2 cache policies (sm_80+; createpolicy): where the product's output does not fit in L2
// (the flat SSpMM on kron21: d_data is 134 MB at k = 16), its reductions keep their lines
// (evict_last) and the gathered input rows, read once a row, leave first (evict_first).
__device__ __forceinline__ uint64_t l2_policy_evict_last() {
  uint64_t p = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
#endif
  return p;
}
__device__ __forceinline__ uint64_t l2_policy_evict_first() {
  uint64_t p = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
#endif
  return p;
}
// A read-only float load under an L2 policy.
__device__ __forceinline__ float ldg_l2(const float* p, uint64_t policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float v;
  asm volatile("ld.global.nc.L2::cache_hint.f32 %0, [%1], %2;" : "=f"(v) : "l"(p), "l"(policy));
  return v;
#else
  return __ldg(p);
#endif
}
// atomic_add_vec under an L2 policy: vector reductions on sm_90, scalar ones on sm_80.
template <int V>
__device__ __forceinline__ void atomic_add_vec_l2(float* p, const float (&d)[V], uint64_t policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (V == 4) {
    asm volatile("red.add.global.L2::cache_hint.v4.f32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(p),
                 "f"(d[0]), "f"(d[1]), "f"(d[2]), "f"(d[3]), "l"(policy)
                 : "memory");
  } else if constexpr (V == 2) {
    asm volatile("red.add.global.L2::cache_hint.v2.f32 [%0], {%1, %2}, %3;" ::"l"(p), "f"(d[0]),
                 "f"(d[1]), "l"(policy)
                 : "memory");
  } else {
    asm volatile("red.add.global.L2::cache_hint.f32 [%0], %1, %2;" ::"l"(p), "f"(d[0]),
                 "l"(policy)
                 : "memory");
  }
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#pragma unroll
  for (int q = 0; q < V; ++q)
    asm volatile("red.add.global.L2::cache_hint.f32 [%0], %1, %2;" ::"l"(p + q), "f"(d[q]),
                 "l"(policy)
                 : "memory");
#else
  (void)policy;
  atomic_add_vec<V>(p, d);
#endif
}

}  // namespace spgnn::detail::cbsr
