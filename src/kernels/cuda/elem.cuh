// Internal: the feature element types of the CUDA kernels: float, __half (float16) and
// __nv_bfloat16. A lane loads V consecutive elements into float registers (one 16-byte load for 4
// floats or 8 halves), computes and accumulates in float32, and rounds once (to nearest even)
// when it stores. Included by .cu files only.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/gnnone_common.cuh"
#include "spgnn/tensor.hpp"

namespace spgnn::detail::elem {

template <class T> constexpr bool kIsHalf = !std::is_same_v<T, float>;

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Two half elements in 32 bits, first element in the low half (memory order).
template <class T> __device__ __forceinline__ float2 unpack2(uint32_t bits) {
  if constexpr (std::is_same_v<T, __half>) {
    __half2 h;
    memcpy(&h, &bits, sizeof h);
    return __half22float2(h);
  } else {
    // A bfloat16 is the top half of its float: one shift or mask per element (the intrinsic
    // extracts the high element, then shifts it: one instruction more per pair, in the hot
    // loops of every half kernel).
    return make_float2(__uint_as_float(bits << 16), __uint_as_float(bits & 0xffff0000u));
  }
}
template <class T> __device__ __forceinline__ uint32_t pack2(float a, float b) {
  uint32_t bits;
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(a, b);
    memcpy(&bits, &h, sizeof bits);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    memcpy(&bits, &h, sizeof bits);
  }
  return bits;
}

// One scalar element through the read-only path.
template <class T> __device__ __forceinline__ float ldg1(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return __ldg(p);
  } else {
    const unsigned short b = __ldg(reinterpret_cast<const unsigned short*>(p));
    if constexpr (std::is_same_v<T, __half>) return __half2float(__ushort_as_half(b));
    else return __bfloat162float(__ushort_as_bfloat16(b));
  }
}

// V consecutive elements of T as loaded: the floats themselves, or for halves the 16/8/4/2-byte
// word that holds them, unpacked to float only where they are used. A kernel that keeps several
// loads in flight holds half the registers for them that way: gnnone's bfloat16 SpMM with its
// four loads of 8 halves unpacked at once used 105 registers (24% occupancy, 2.61 ms on R-MAT
// scale 21 at F = 64, H100); packed, and bounded to 64, 34% and 1.28 ms.
template <class T, int V, bool = kIsHalf<T>> struct Packed { float f[V]; };
template <class T, int V> struct Packed<T, V, true> {
  using Word = std::conditional_t<
      V == 8, uint4,
      std::conditional_t<V == 4, uint2, std::conditional_t<V == 2, uint32_t, unsigned short>>>;
  Word w;
};

// Loads V elements (p aligned to V elements). float: V = 4, 2, 1; halves: V = 8 (16 bytes), 4, 2, 1.
template <int V, class T>
__device__ __forceinline__ void load_packed(Packed<T, V>& d, const T* __restrict__ p) {
  if constexpr (std::is_same_v<T, float>) {
    static_assert(V <= 4, "float vectors are at most float4");
    gnnone::ldg_vec<V>(d.f, p);
  } else {
    d.w = __ldg(reinterpret_cast<const typename Packed<T, V>::Word*>(p));
  }
}

template <int V, class T>
__device__ __forceinline__ void unpack(float (&d)[V], const Packed<T, V>& s) {
  if constexpr (std::is_same_v<T, float>) {
#pragma unroll
    for (int k = 0; k < V; ++k) d[k] = s.f[k];
  } else if constexpr (V == 1) {
    if constexpr (std::is_same_v<T, __half>) d[0] = __half2float(__ushort_as_half(s.w));
    else d[0] = __bfloat162float(__ushort_as_bfloat16(s.w));
  } else {
    uint32_t w[V / 2];
    if constexpr (V == 8) {
      w[0] = s.w.x; w[1] = s.w.y; w[2] = s.w.z; w[3] = s.w.w;
    } else if constexpr (V == 4) {
      w[0] = s.w.x; w[1] = s.w.y;
    } else {
      w[0] = s.w;
    }
#pragma unroll
    for (int k = 0; k < V / 2; ++k) {
      const float2 f = unpack2<T>(w[k]);
      d[2 * k] = f.x;
      d[2 * k + 1] = f.y;
    }
  }
}

template <int V, class T>
__device__ __forceinline__ void zero_packed(Packed<T, V>& d) {
  if constexpr (std::is_same_v<T, float>) gnnone::zero_vec(d.f);
  else d.w = typename Packed<T, V>::Word{};
}

// V consecutive elements (p aligned to V elements) into float registers.
template <int V, class T>
__device__ __forceinline__ void load(float (&d)[V], const T* __restrict__ p) {
  Packed<T, V> t;
  load_packed<V>(t, p);
  unpack<V>(d, t);
}

// V float registers rounded to T and stored (p aligned to V elements).
template <int V, class T>
__device__ __forceinline__ void store(T* p, const float (&d)[V]) {
  if constexpr (std::is_same_v<T, float>) {
    static_assert(V <= 4, "float vectors are at most float4");
    gnnone::st_vec<V>(p, d);
  } else if constexpr (V == 8) {
    *reinterpret_cast<uint4*>(p) = make_uint4(pack2<T>(d[0], d[1]), pack2<T>(d[2], d[3]),
                                               pack2<T>(d[4], d[5]), pack2<T>(d[6], d[7]));
  } else if constexpr (V == 4) {
    *reinterpret_cast<uint2*>(p) = make_uint2(pack2<T>(d[0], d[1]), pack2<T>(d[2], d[3]));
  } else if constexpr (V == 2) {
    *reinterpret_cast<unsigned int*>(p) = pack2<T>(d[0], d[1]);
  } else {
    *p = from_float<T>(d[0]);
  }
}

// Host side: the widest vector (at most 16 bytes: 4 floats or 8 halves) that divides F and keeps
// every pointer aligned; null pointers are ignored.
inline int vector_width(int64_t F, size_t elem_bytes, const void* const* ptrs, int nptrs) {
  int V = static_cast<int>(16 / elem_bytes);
  while (V > 1 && F % V != 0) V /= 2;
  for (int i = 0; i < nptrs; ++i)
    while (V > 1 && !gnnone::aligned_to(ptrs[i], V * static_cast<int>(elem_bytes))) V /= 2;
  return V;
}

// Calls f(T{}) with the CUDA element type of a feature dtype (float32, float16, bfloat16).
template <class F> void dispatch(DType t, F&& f) {
  switch (t) {
    case DType::f16: f(__half{}); break;
    case DType::bf16: f(__nv_bfloat16{}); break;
    default: f(float{}); break;
  }
}

}  // namespace spgnn::detail::elem
