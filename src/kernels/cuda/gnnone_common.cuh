// Internal: pieces shared by the GNNOne SpMM and SDDMM kernels (gnnone_spmm.cu, gnnone_sddmm.cu):
// vector load/store helpers, the per-warp geometry of stage 2 (thread groups, vector width,
// feature passes), the stage-1 shared-memory layout and a device guard. Included by .cu only.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

#include "dispatch/problem.hpp"
#include "spgnn/schedule.hpp"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/shape_math.hpp"

namespace spgnn::detail::gnnone {

// Non-zeros a thread group walks per batch: the batch's feature loads are all issued before the
// first of them is used, so each lane keeps kUnroll vector loads in flight.
constexpr int kUnroll = 4;
constexpr int kMaxWarps = 16;
constexpr int kMaxThreads = kMaxWarps * 32;

// ---- vector helpers ------------------------------------------------------------------------
// A lane owns V consecutive features; V = 4 (float4, 16-byte loads), 2 (float2) or 1.
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

template <int V>
__device__ __forceinline__ void st_vec(float* p, const float (&d)[V]) {
  if constexpr (V == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(d[0], d[1], d[2], d[3]);
  } else if constexpr (V == 2) {
    *reinterpret_cast<float2*>(p) = make_float2(d[0], d[1]);
  } else {
    *p = d[0];
  }
}

// One vector red.global.add on Hopper (sm_90 has float2/float4 atomicAdd), scalars elsewhere.
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
  for (int k = 0; k < V; ++k) atomicAdd(p + k, d[k]);
#endif
}

// Float32 sums of up to 8 features (a half vector's) stored or added to float32 memory: 8 as two
// float4 stores or vector atomics, fewer as st_vec / atomic_add_vec.
template <int V>
__device__ __forceinline__ void st_f32(float* p, const float (&d)[V]) {
  if constexpr (V == 8) {
    const float lo[4] = {d[0], d[1], d[2], d[3]}, hi[4] = {d[4], d[5], d[6], d[7]};
    st_vec<4>(p, lo);
    st_vec<4>(p + 4, hi);
  } else {
    st_vec<V>(p, d);
  }
}
template <int V>
__device__ __forceinline__ void atomic_add_f32(float* p, const float (&d)[V]) {
  if constexpr (V == 8) {
    const float lo[4] = {d[0], d[1], d[2], d[3]}, hi[4] = {d[4], d[5], d[6], d[7]};
    atomic_add_vec<4>(p, lo);
    atomic_add_vec<4>(p + 4, hi);
  } else {
    atomic_add_vec<V>(p, d);
  }
}

// Byte offset of row c of a matrix whose rows are `row_bytes` long. For 32-bit indices this is
// one signed 32 x 32 -> 64 multiply (IMAD.WIDE, fused with the base address): written as an
// int64 product, nvcc 13 built it from an unsigned wide multiply and two sign corrections.
__device__ __forceinline__ int64_t row_offset(int32_t c, int32_t row_bytes) {
  int64_t r;
  asm("mul.wide.s32 %0, %1, %2;" : "=l"(r) : "r"(c), "r"(row_bytes));
  return r;
}
__device__ __forceinline__ int64_t row_offset(int64_t c, int32_t row_bytes) {
  return c * row_bytes;
}
// The 32-bit row size row_offset takes: `F` elements of `elem_bytes` each, checked to stay
// under 2 GiB (`what` names the kernel in the error).
inline int row_bytes32(int64_t F, int64_t elem_bytes, const char* what) {
  SPGNN_CHECK(F <= std::numeric_limits<int>::max() / elem_bytes, InvalidArgument, what,
              ": feature rows of ", F, " elements exceed 2 GiB");
  return static_cast<int>(F * elem_bytes);
}

template <int V>
__device__ __forceinline__ void zero_vec(float (&d)[V]) {
#pragma unroll
  for (int k = 0; k < V; ++k) d[k] = 0.f;
}

// ---- stage-2 geometry (host side) ------------------------------------------------------------
// F features = NV vectors of V floats. A thread group has G = next_pow2(NV) lanes (at most
// max_group <= 32); a warp holds 32 / G groups. Rows wider than G vectors are walked in `passes`
// of G vectors (128 floats with float4 and G = 32).
struct Geometry {
  int V = 1;
  int nv = 0;       // vectors per feature row
  int g_log2 = 0;   // log2(G)
  int passes = 1;
};

inline bool aligned_to(const void* p, int bytes) {
  return p == nullptr || (reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes)) == 0;
}

// `ptrs` are the feature base pointers the kernel reads or writes with vector accesses; a
// pointer that is not aligned for the vector width lowers V (tensors from cudaMalloc always are).
// `max_group` caps the lanes of a group (power of two, <= 32): rows of more vectors are split into
// passes of max_group vectors.
inline Geometry make_geometry(int64_t F, bool vector_loads, const void* const* ptrs, int nptrs,
                              int max_group = 32) {
  Geometry g;
  int V = 1;
  if (vector_loads) V = (F % 4 == 0) ? 4 : (F % 2 == 0) ? 2 : 1;
  for (int i = 0; i < nptrs; ++i)
    while (V > 1 && !aligned_to(ptrs[i], V * 4)) V /= 2;
  g.V = V;
  const int64_t nv = F / V;
  SPGNN_CHECK(nv <= (int64_t{1} << 26), InvalidArgument, "gnnone: feature width ", F,
              " is too large");
  g.nv = static_cast<int>(nv);
  int lg = 0;
  while ((1 << lg) < nv && (2 << lg) <= max_group) ++lg;
  g.g_log2 = lg;
  g.passes = static_cast<int>((nv + (1 << lg) - 1) >> lg);
  return g;
}

// Lanes per thread group at most (detail::gnnone_max_group has the rule and its measurements);
// SPGNN_GNNONE_MAX_GROUP=4|8|16|32 in the environment forces a value (tuning hook).
inline int forced_max_group() {
  static const int lanes = [] {
    const char* env = std::getenv("SPGNN_GNNONE_MAX_GROUP");
    const int v = env ? std::atoi(env) : 0;
    return (v == 4 || v == 8 || v == 16 || v == 32) ? v : 0;
  }();
  return lanes;
}
inline int l2_bytes(int device) {
  int b = 0;
  if (cudaDeviceGetAttribute(&b, cudaDevAttrL2CacheSize, device) != cudaSuccess || b <= 0) {
    cudaGetLastError();
    b = 50 << 20;
  }
  return b;
}
// F counts floats here; the half SpMM passes its F too (8 halves are 16 bytes as 4 floats are).
inline int max_group_lanes(int64_t F, int64_t n_cols, int device, bool whole_row_if_fits = false) {
  if (const int forced = forced_max_group()) return forced;
  const int V = F % 4 == 0 ? 4 : F % 2 == 0 ? 2 : 1;
  return gnnone_max_group(F, V, 4, n_cols, double(l2_bytes(device)), whole_row_if_fits);
}

// Per-warp shared memory: IndexT row[C + 2] (row[k + 1] = row of cached non-zero k; row[0] and
// row[C + 1] are the neighbours just outside the warp's slice, -1 past either end), IndexT col[C],
// float val[C] (SpMM edge values or SDDMM dot staging), each array `skew` words longer when the
// sub-slices are skewed (sub_slice_skew below). Rounded to 16 bytes.
template <class IndexT>
inline int warp_smem_bytes(int cache, int skew = 0) {
  const int b = (cache + 2 + skew) * int(sizeof(IndexT)) + (cache + skew) * int(sizeof(IndexT)) +
                (cache + skew) * 4;
  return (b + 15) / 16 * 16;
}

// Consecutive thread groups read their sub-slices of L = cache / groups non-zeros in lock step,
// L words apart: with L a multiple of 32 every group hits the same shared-memory bank. Non-zero
// k is therefore cached at k + (k >> shift), one spare word after each sub-slice (`words` per
// array); shift = 31 leaves the layout unskewed (round-robin groups, no stage-1 cache, L < 2).
struct Skew {
  int shift = 31;
  int words = 0;
};
inline Skew sub_slice_skew(int cache, int g_log2, bool consecutive_cached) {
  Skew k;
  const int L = cache / (32 >> g_log2);
  if (!consecutive_cached || L < 2 || (L & (L - 1)) != 0) return k;  // powers of two only
  k.shift = 0;
  while ((2 << k.shift) <= L) ++k.shift;
  k.words = cache >> k.shift;
  return k;
}

// Shared with the other kernel files (cuda_check.cuh); the names stay reachable as gnnone::.
using detail::DeviceGuard;
using detail::allow_smem;

// The schedule's parameters (legal values already checked by the front door). A parameter the
// schedule leaves out takes the default declared in the registry (registry.cpp), so the two never
// disagree.
struct Params {
  int cache = 128;
  int warps = 4;
  bool nze_cache = true;
  bool vector_loads = true;
  bool consecutive = true;
  bool auto_cache = false;  // cache_size left to the graph (may shrink below 32, see below)
};
inline int64_t param_or_default(OpKind op, const Schedule& s, const char* name) {
  auto it = s.params.find(name);
  if (it != s.params.end()) return it->second;
  for (const auto& spec : find_strategy(op, "gnnone").params)
    if (spec.name == name) return spec.default_value;
  throw InvalidArgument(std::string("gnnone: registry declares no parameter '") + name + "'");
}
inline int sm_count(int device) {
  int n = 0;
  if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || n <= 0) {
    cudaGetLastError();
    n = 132;
  }
  return n;
}

// cache_size and warps left out of the schedule are sized to the graph: a small graph (Cora has
// ~13K non-zeros) would give 128-non-zero warps too few warps to cover the SMs and too long a
// serial walk each, so the cache shrinks (down to 32) until there are ~16 warp slices per SM,
// and blocks shrink (down to 1 warp) until there are ~4 blocks per SM. Large graphs get the
// registry defaults (128, 4). Values named in the schedule are used as given.
inline Params read_params(OpKind op, const Schedule& s, int64_t nnz, int device) {
  Params p;
  p.cache = static_cast<int>(param_or_default(op, s, "cache_size"));
  p.warps = static_cast<int>(param_or_default(op, s, "warps"));
  p.nze_cache = param_or_default(op, s, "nze_cache") != 0;
  p.vector_loads = param_or_default(op, s, "vector_loads") != 0;
  p.consecutive = param_or_default(op, s, "consecutive") != 0;
  const bool auto_cache = s.params.find("cache_size") == s.params.end();
  p.auto_cache = auto_cache;
  const bool auto_warps = s.params.find("warps") == s.params.end();
  if (auto_cache || auto_warps) {
    const int64_t sms = sm_count(device);
    if (auto_cache)
      while (p.cache > 32 && (nnz + p.cache - 1) / p.cache < sms * 16) p.cache /= 2;
    if (auto_warps) {
      const int64_t slices = (nnz + p.cache - 1) / p.cache;
      while (p.warps > 1 && (slices + p.warps - 1) / p.warps < sms * 4) p.warps /= 2;
    }
  }
  SPGNN_CHECK(p.cache >= 32 && (p.cache & (p.cache - 1)) == 0, InvalidArgument,
              "gnnone: cache_size must be a power of two >= 32, got ", p.cache);
  SPGNN_CHECK(p.warps >= 1 && p.warps <= kMaxWarps, InvalidArgument,
              "gnnone: warps must be in 1..", kMaxWarps, ", got ", p.warps);
  return p;
}

// Non-zeros per warp for the launch. A cache_size left to the graph keeps halving below 32, to
// at least one non-zero per thread group (and 8), while there are fewer than 16 warp slices per
// SM: on CiteSeer/Cora (9-13K non-zeros) 32-non-zero slices give ~300 warps that each walk their
// slice serially (ncu: SDDMM at F = 128 ran at 3% occupancy, 14 us vs cuSPARSE's 11). A named
// cache_size is used as given. Needs the geometry, hence a step after read_params.
inline int launch_cache(const Params& p, int64_t nnz, int device, int g_log2) {
  if (!p.auto_cache) return p.cache;
  const int floor = std::max(8, 32 >> g_log2);
  const int64_t sms = sm_count(device);
  int c = p.cache;
  while (c > floor && (nnz + c - 1) / c < sms * 16) c /= 2;
  return c;
}

}  // namespace spgnn::detail::gnnone
