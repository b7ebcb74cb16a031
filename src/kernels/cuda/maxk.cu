// MaxK nonlinearity (MaxK-GNN, ASPLOS'24, §3 and §5.3): the k largest values of each row of
// x [n, F], in CBSR (values and u8/u16 columns, ascending column order), and its backward.
//
// Rows of F <= 1024 (maxk_reg_kernel): one warp per row, the row held in registers, F/32 values
// per lane (float4 loads when F % 4 == 0: lane l holds columns 128c + 4l + q), as order keys
// (unsigned integers that sort like the floats, maxk_order_key). Warps are persistent and load
// their next row while they select in the current one, so two rows per warp are in flight.
// The k-th largest key T is found by a pivot search over a bracket [lo, hi] that always holds T:
// a round counts the keys >= the pivot (a compare and a predicated add per register, one
// __reduce_add_sync), and then moves the bound on the losing side to the nearest key actually
// present, so both ends of the bracket are elements of the row: with d = key - pivot (mod 2^32)
// the keys >= the pivot come first in d's order, so that key is pivot + min d or pivot + max d
// (one fused add-min per register, one min/max reduction). Pivots: the first rounds
// interpolate linearly in value between the bracket's ends at the rank k wants (regula falsi,
// with the Illinois-style halving of the step when one end moved twice in a row; for k <= F/8,
// when the first count is off by more than 2x, the second pivot is the row's mean + z x its
// deviation, see select_row), later rounds halve the key interval (at most 32 more, whatever
// the data: outliers, infinities, NaNs).
// A pivot with exactly k keys at or above it ends the search early. Ties at T go to the lowest
// columns (a warp prefix count of the keys == T in column order), and the kept values are
// written at their rank among the kept (a second prefix count), so the output is already in
// ascending column order. Global traffic: one read of x, one write of the CBSR row.
//
// The paper's pivot search ((min + max) / 2 in value, < 10 rounds on typical rows) was the first
// version here, with the row in shared memory: 0.37 ms for 232,965 x 256 on the H100 (~0.65
// TB/s; floor ~0.08 ms) and 3.3 ms for 2.1M x 256 (per round a shared-memory load, a ballot and
// a popc per 32 elements; ~8 rounds; one row per warp at a time). This search: 0.22 ms and
// 1.9 ms at k = 16, issue-bound (ncu: 1.08 TB/s, SMs issuing on 75% of cycles), then 27% less
// time on the H200 (2.1M x 256, k = 8..64: 1.71-2.05 -> 1.27-1.48 ms; 232,965 x 256: 0.20-0.24 ->
// 0.15-0.17 ms) with fewer instructions a row (SASS of the F = 256 kernel: 848 -> 704): the
// snapping above, the pivot from a hardware reciprocal and bracket values kept as floats, the
// key maps in two instructions, and stores at one multiply-add from the row's base. Then,
// from ncu's per-instruction counts (2.1M x 256, k = 16: 565 warp instructions a row, 222 of
// them writing the result): predicated stores instead of a branch per register, ranks from one
// ballot per register, a pivot of lo + 1 or hi when one key is left over or missing, no column
// checks at F = 256 and no 64-bit product per input row: 457 a row, 16-19% less time (2.1M x 256,
// k = 8..64: 1.37-1.56 -> 1.14-1.27 ms uniform, 1.79-1.98 -> 1.50-1.63 normal).
// A CPU model of the search over 2,000 rows of 256 (uniform, normal, ReLU'd normal, three
// values, one 1e20 outlier; k = 1..255) needs 1.4-3.8 rounds on average on uniform rows with
// this rule (interpolation + Illinois + snapping to elements), 7.2-7.7 with value halving +
// snapping, 7.8-9.4 with plain value halving (the first version); normal rows 1.0-7.8 (worst
// k = 8..32) against 4.6-8.4 and 5.4-9.1.
// docs/GAT_NOTES.md and docs/BENCHMARKS_MAXK.md have the measurements.
//
// Wider rows (F > 1024, maxk_wide_kernel) keep the first version: the row in shared memory
// (re-read from global memory per round when F > 24576), value halving then key halving.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/cbsr_common.cuh"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/gnnone_common.cuh"
#include "kernels/cuda/maxk_kernels.hpp"

namespace spgnn::detail {

namespace {

// Wide path: value-halving rounds before switching to key halving (see above).
constexpr int kValueRounds = 12;
// Register path: interpolation rounds before switching to key halving; warps per block.
constexpr int kInterpRounds = 12;
constexpr int kRegWarps = 8;
// Widest row of the register path (32 values per lane).
constexpr int64_t kMaxRegF = 1024;
constexpr unsigned kFull = 0xffffffffu;

// Float bits <-> order key: negative floats have every bit flipped, the others the sign bit.
// Two instructions each (an arithmetic shift spreads the sign bit).
__device__ __forceinline__ uint32_t key_bits(uint32_t b) {
  return b ^ (static_cast<uint32_t>(static_cast<int32_t>(b) >> 31) | 0x80000000u);
}
__device__ __forceinline__ uint32_t float_bits(uint32_t k) {
  const uint32_t s = static_cast<uint32_t>(static_cast<int32_t>(k) >> 31);
  uint32_t b;  // k ^ (~s | 0x80000000) in one LOP3 (the compiler emits two)
  asm("lop3.b32 %0, %1, %2, %3, 0x4B;" : "=r"(b) : "r"(k), "r"(s), "r"(0x80000000u));
  return b;
}
__device__ __forceinline__ uint32_t to_key(float v) { return key_bits(__float_as_uint(v)); }
__device__ __forceinline__ float from_key(uint32_t k) { return __uint_as_float(float_bits(k)); }
// c + (v >= p), as a compare and a predicated add.
__device__ __forceinline__ uint32_t add_if_ge(uint32_t c, uint32_t v, uint32_t p) {
  asm("{\n\t.reg .pred q;\n\tsetp.ge.u32 q, %1, %2;\n\t@q add.u32 %0, %0, 1;\n\t}"
      : "+r"(c)
      : "r"(v), "r"(p));
  return c;
}
// Stores under a predicate. Written as `if (keep) asm volatile(store)`, each register's stores
// were a branch of their own (a convergence barrier, the address and both stores, ~15 warp
// instructions whenever any lane kept that register: 8 of them a row at F = 256, k = 16, about a
// fifth of the kernel's instructions in ncu's source counters); predicated, ~5. The packed-scan
// layouts (F > 256 with float4 loads) keep the branches: there, computing every register's
// address up front took 16 more registers (F = 1024: 144 instead of 128, one block an SM fewer).
__device__ __forceinline__ void store_if(uint32_t on, float* a, uint32_t bits) {
  asm volatile("{\n\t.reg .pred q;\n\tsetp.ne.u32 q, %0, 0;\n\t@q st.global.b32 [%1], %2;\n\t}"
               ::"r"(on), "l"(a), "r"(bits) : "memory");
}
__device__ __forceinline__ void store_if(uint32_t on, uint8_t* a, uint16_t c) {
  asm volatile("{\n\t.reg .pred q;\n\tsetp.ne.u32 q, %0, 0;\n\t@q st.global.u8 [%1], %2;\n\t}"
               ::"r"(on), "l"(a), "h"(c) : "memory");
}
__device__ __forceinline__ void store_if(uint32_t on, uint16_t* a, uint16_t c) {
  asm volatile("{\n\t.reg .pred q;\n\tsetp.ne.u32 q, %0, 0;\n\t@q st.global.u16 [%1], %2;\n\t}"
               ::"r"(on), "l"(a), "h"(c) : "memory");
}
__device__ __forceinline__ float rcp_approx(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

// Warp-wide unsigned min / max / sum (one REDUX instruction on sm_80+).
__device__ __forceinline__ uint32_t warp_min(uint32_t v) {
#if __CUDA_ARCH__ >= 800
  return __reduce_min_sync(kFull, v);
#else
  for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(kFull, v, o));
  return v;
#endif
}
__device__ __forceinline__ uint32_t warp_max(uint32_t v) {
#if __CUDA_ARCH__ >= 800
  return __reduce_max_sync(kFull, v);
#else
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(kFull, v, o));
  return v;
#endif
}
__device__ __forceinline__ uint32_t warp_add(uint32_t v) {
#if __CUDA_ARCH__ >= 800
  return __reduce_add_sync(kFull, v);
#else
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
#endif
}

// ---- register path (F <= kMaxRegF) ----------------------------------------------------------
// Register i of a lane holds column col_of(i): VW consecutive columns per load, chunk c = i / VW
// covering 32 * VW columns. Column order is (chunk, lane, i % VW), which the tie rule and the
// output order follow.
template <int VW>
__device__ __forceinline__ int col_of(int i, int lane) {
  return (i / VW) * 32 * VW + lane * VW + i % VW;
}

// Raw float bits of the row; columns >= F get 0xffffffff, whose order key is 0, below every
// pivot (pivots are > lo >= 0), so padding is never counted; selection masks it explicitly.
template <int VW, int CH>
__device__ __forceinline__ void load_row(const float* __restrict__ xr, int F, int lane,
                                         uint32_t (&v)[VW * CH]) {
#pragma unroll
  for (int c = 0; c < CH; ++c) {
    const int col0 = c * 32 * VW + lane * VW;
    if constexpr (VW == 4) {
      // F % 4 == 0 on this path, so a vector is wholly inside or wholly outside the row.
      uint4 t = make_uint4(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);
      if (col0 < F) t = __ldcs(reinterpret_cast<const uint4*>(xr + col0));
      v[4 * c] = t.x;
      v[4 * c + 1] = t.y;
      v[4 * c + 2] = t.z;
      v[4 * c + 3] = t.w;
    } else {
      v[c] = col0 < F ? __float_as_uint(__ldcs(xr + col0)) : 0xffffffffu;
    }
  }
}

// rank[i] = the number of flagged registers of the warp in lower columns (column order above),
// and on[i] != 0 where f[i] is set. One ballot per register when there are at most two chunks
// (or one value a lane): a lane's flags then live as its bit of each ballot, and the ranks are
// popcounts of the lower lanes' bits. Each stays a predicate only until its ballot: kept as
// bools until the stores, eight flags overflowed the predicate registers and moved through bit
// masks (P2R and LOP3 on every use, SASS). More chunks: each lane's count per chunk (0..4) is
// packed into 8-bit fields (a chunk totals at most 128, so fields never carry), four chunks a
// word, one warp scan per word.
template <int VW, int CH>
constexpr bool ballot_ranks() {
  return VW == 1 || CH <= 2;
}
// A flag as the ranks hand it to the stores: the lane's ballot bit, or the flag itself.
template <int VW, int CH>
using FlagT = std::conditional_t<ballot_ranks<VW, CH>(), uint32_t, bool>;
template <int VW, int CH>
__device__ __forceinline__ void prefix_ranks(const bool (&f)[VW * CH], int (&rank)[VW * CH],
                                             FlagT<VW, CH> (&on)[VW * CH], int lane) {
  const unsigned lt = (1u << lane) - 1u;
  int base = 0;
  if constexpr (ballot_ranks<VW, CH>()) {
    const unsigned me = 1u << lane;
#pragma unroll
    for (int c = 0; c < CH; ++c) {
      unsigned m[VW];
      int run = base;
#pragma unroll
      for (int q = 0; q < VW; ++q) {
        m[q] = __ballot_sync(kFull, f[c * VW + q]);
        run += __popc(m[q] & lt);
      }
#pragma unroll
      for (int q = 0; q < VW; ++q) {
        rank[c * VW + q] = run;
        on[c * VW + q] = m[q] & me;
        run += on[c * VW + q] ? 1 : 0;
        if (c + 1 < CH) base += __popc(m[q]);
      }
    }
  } else {
#pragma unroll
    for (int w = 0; w < (CH + 3) / 4; ++w) {
      uint32_t own = 0;
#pragma unroll
      for (int c = 4 * w; c < CH && c < 4 * w + 4; ++c) {
        uint32_t cnt = 0;
#pragma unroll
        for (int q = 0; q < VW; ++q) cnt += f[c * VW + q] ? 1u : 0u;
        own |= cnt << (8 * (c - 4 * w));
      }
      uint32_t incl = own;
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const uint32_t t = __shfl_up_sync(kFull, incl, d);
        if (lane >= d) incl += t;
      }
      const uint32_t excl = incl - own;
      const uint32_t total = __shfl_sync(kFull, incl, 31);
#pragma unroll
      for (int c = 4 * w; c < CH && c < 4 * w + 4; ++c) {
        int run = base + static_cast<int>((excl >> (8 * (c - 4 * w))) & 0xffu);
#pragma unroll
        for (int q = 0; q < VW; ++q) {
          rank[c * VW + q] = run;
          on[c * VW + q] = f[c * VW + q];
          run += f[c * VW + q] ? 1 : 0;
        }
        base += static_cast<int>((total >> (8 * (c - 4 * w))) & 0xffu);
      }
    }
  }
}

// Column col_of(i, lane) < F. With float4 loads F % 4 == 0, so one compare a chunk.
template <int VW>
__device__ __forceinline__ bool in_row(int i, int lane, int F) {
  if constexpr (VW == 4) return (i / 4) * 128 + lane * 4 < F;
  else return col_of<VW>(i, lane) < F;
}

// mean + zk * standard deviation of the row (v: order keys between vmin < vmax), the same in
// every lane; only a pivot, which the caller checks against its bracket (with infinities in
// the row it is not finite, and the caller interpolates instead). The sums are integer
// reductions of fixed-point values (u = (x - c) / h in [-1, 1] scaled to 2^21, 1024 of them at
// most): warp shuffles of floats here made the compiler guard every reduction of the search
// loop with a divergence check (SASS), ~7%.
template <int VW, int CH>
__device__ __forceinline__ float moment_pivot(const uint32_t (&v)[VW * CH], int F, int lane,
                                              float vmin, float vmax, float zk) {
  const float c = 0.5f * vmin + 0.5f * vmax, h = 0.5f * vmax - 0.5f * vmin;
  const float to_fixed = 2097152.f * rcp_approx(h);  // 2^21 / h
  uint32_t s = 0, s2 = 0;  // wrap-around sums: a row with infinities gives a pivot, not UB
#pragma unroll
  for (int i = 0; i < VW * CH; ++i) {
    if (!in_row<VW>(i, lane, F)) continue;
    const float u = (__uint_as_float(float_bits(v[i])) - c) * to_fixed;  // in [-2^21, 2^21]
    s += static_cast<uint32_t>(__float2int_rn(u));
    s2 += static_cast<uint32_t>(__float2int_rn(u * u * (1.f / 2097152.f)));
  }
  const float per_value = rcp_approx(static_cast<float>(F)) * (1.f / 2097152.f);
  const float mean = static_cast<float>(static_cast<int32_t>(warp_add(s))) * per_value;
  const float m2 = static_cast<float>(warp_add(s2)) * per_value;
  const float sd = sqrtf(fmaxf(m2 - mean * mean, 0.f));
  return c + h * (mean + zk * sd);
}

// Top-k of one row held by the warp (v: raw bits, see load_row) into drow / irow.
template <int VW, int CH, class IdxT>
__device__ __forceinline__ void select_row(uint32_t (&v)[VW * CH], int F, int k, float zk,
                                           int lane, float* __restrict__ drow,
                                           IdxT* __restrict__ irow) {
  constexpr int N = VW * CH;
  uint32_t kmin = 0xffffffffu, kmax = 0u;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    v[i] = key_bits(v[i]);
    kmin = min(kmin, in_row<VW>(i, lane, F) ? v[i] : 0xffffffffu);
    kmax = max(kmax, v[i]);
  }
  kmin = warp_min(kmin);
  kmax = warp_max(kmax);

  // Bracket: lo <= T <= hi, clo = count(>= lo) > k, chi = count(> hi) < k (T = k-th largest);
  // vlo, vhi: the floats of lo and hi.
  uint32_t lo = kmin, hi = kmax;
  float vlo = __uint_as_float(float_bits(lo)), vhi = __uint_as_float(float_bits(hi));
  int clo = F, chi = 0;
  bool exact = k == F;  // keep every key >= t_ge
  uint32_t t_ge = kmin;
  // Which end moved last (+1 lo, -1 hi) and how many times in a row; the last round's count.
  int side = 0, streak = 0, last = k;
  auto lin_pivot = [&](int round) {  // in (lo, hi]
    // One key off: count(>= lo + 1) is clo less lo's copies and count(>= hi) is chi plus hi's,
    // so without ties at that key this round is the last, and with them lo meets hi. Cheaper
    // than interpolating, which may step past the neighbouring key.
    if (clo == k + 1) return lo + 1u;
    if (chi == k - 1) return hi;
    uint32_t p = lo + ((hi - lo) >> 1) + 1u;
    if (round < kInterpRounds) {
      // Linear in value: the pivot where count(>= pivot) would be k + 1/2.
      float fr = (static_cast<float>(k - chi) + 0.5f) * rcp_approx(static_cast<float>(clo - chi));
      if (streak >= 2) fr = side > 0 ? 0.5f * fr : 0.5f + 0.5f * fr;
      const float pv = vhi - fr * (vhi - vlo);
      const uint32_t pk = key_bits(__float_as_uint(pv));
      if (fabsf(pv) < INFINITY && pk > lo && pk <= hi) p = pk;
    }
    return p;
  };
  auto round_at = [&](uint32_t p) {  // count at pivot p, then exact or a narrower bracket
    uint32_t c = 0;
#pragma unroll
    for (int i = 0; i < N; ++i) c = add_if_ge(c, v[i], p);
    const int cnt = static_cast<int>(warp_add(c));
    last = cnt;
    if (cnt == k) {
      exact = true;
      t_ge = p;
      return;
    }
    // v - p (mod 2^32) orders the keys >= p below the keys < p, each set in key order, so the
    // smallest key >= p is p + min(v - p) and the largest key < p is p + max(v - p).
    if (cnt > k) {
      uint32_t m = 0xffffffffu;
#pragma unroll
      for (int i = 0; i < N; ++i) m = min(m, v[i] - p);
      lo = p + warp_min(m);
      vlo = __uint_as_float(float_bits(lo));
      clo = cnt;
      streak = side > 0 ? streak + 1 : 1;
      side = 1;
    } else {
      uint32_t m = 0u;
#pragma unroll
      for (int i = 0; i < N; ++i) m = max(m, v[i] - p);
      hi = p + warp_max(m);
      vhi = __uint_as_float(float_bits(hi));
      chi = cnt;
      streak = side < 0 ? streak + 1 : 1;
      side = -1;
    }
  };
  int round = 0;
  if (!exact && lo < hi) {
    round_at(lin_pivot(0));
    round = 1;
    // Interpolating between the row's ends fits uniform rows (the first count lands near k) but
    // not bell-shaped ones, whose tails are thin: when the first count is off by more than 2x,
    // the second pivot is mean + zk * deviation, zk the normal quantile at rank k + 1/2 of F
    // (NaN: off). A CPU model of the search, rows of 256, k = 8..32: normal rows 6.6-8.0 ->
    // 4.0-4.5 rounds on average, ReLU'd normal 6.3-7.0 -> 5.1-5.5, uniform rows the same (the
    // pivot is taken on 0-3.5% of them). Measured on 2.1M x 256, k = 8 / 16 / 32: normal rows
    // 2.12 / 2.41 / 2.28 -> 1.79 / 1.90 / 1.98 ms, uniform 1-2% slower.
    if (!exact && lo < hi && zk == zk && (4 * last < 2 * k + 1 || last > 2 * k + 1)) {
      const float pm = moment_pivot<VW, CH>(v, F, lane, from_key(kmin), from_key(kmax), zk);
      const uint32_t pk = key_bits(__float_as_uint(pm));
      round_at(fabsf(pm) < INFINITY && pk > lo && pk <= hi ? pk : lin_pivot(1));
      round = 2;
    }
  }
  for (; !exact && lo < hi; ++round) round_at(lin_pivot(round));

  // Not exact: T = lo = hi; chi keys are > T, and the k - chi lowest-column keys == T are kept.
  auto keep_with_ties = [&](bool (&keep)[N]) {
    const uint32_t t = lo;
    const int eq_left = k - chi;
    bool eq[N];
    int eq_rank[N];
    FlagT<VW, CH> eq_on[N];
#pragma unroll
    for (int i = 0; i < N; ++i) eq[i] = v[i] == t && in_row<VW>(i, lane, F);
    prefix_ranks<VW, CH>(eq, eq_rank, eq_on, lane);
#pragma unroll
    for (int i = 0; i < N; ++i)
      keep[i] = (v[i] > t && in_row<VW>(i, lane, F)) || (eq_on[i] && eq_rank[i] < eq_left);
  };
  int pos[N];
  FlagT<VW, CH> on[N];
  bool keep[N];
  if constexpr (ballot_ranks<VW, CH>()) {
    // Ranks inside each branch: merged after it, the flags crossed the branch as bits (SASS).
    if (exact) {
#pragma unroll
      for (int i = 0; i < N; ++i) keep[i] = v[i] >= t_ge && in_row<VW>(i, lane, F);
      prefix_ranks<VW, CH>(keep, pos, on, lane);
    } else {
      keep_with_ties(keep);
      prefix_ranks<VW, CH>(keep, pos, on, lane);
    }
  } else {  // the packed scan: once, after the branch (inside each: 24 more registers at F = 1024)
    if (exact) {
#pragma unroll
      for (int i = 0; i < N; ++i) keep[i] = v[i] >= t_ge && in_row<VW>(i, lane, F);
    } else {
      keep_with_ties(keep);
    }
    prefix_ranks<VW, CH>(keep, pos, on, lane);
  }
  // Opaque to the compiler, so each store's address is one multiply-add from the row's base
  // rather than the whole 64-bit (r * k + pos) * size again (then the stores must say global).
  asm("" : "+l"(drow), "+l"(irow));
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const auto at = static_cast<uint32_t>(pos[i]);  // unsigned: no sign extension a store
    if constexpr (ballot_ranks<VW, CH>()) {
      store_if(on[i], drow + at, float_bits(v[i]));
      store_if(on[i], irow + at, static_cast<uint16_t>(col_of<VW>(i, lane)));
    } else if (on[i]) {
      store_if(1u, drow + at, float_bits(v[i]));
      store_if(1u, irow + at, static_cast<uint16_t>(col_of<VW>(i, lane)));
    }
  }
}

// float4 rows of up to 256 values: five blocks an SM (at most 51 registers; unbounded, the
// search code takes more and four blocks fit). kWhole: F == 32 * VW * CH, passed on as a
// constant, so the column checks (in_row, load_row) fold away: ~20 instructions a row at F = 256.
// The input row is reached by a pointer advanced a stride at a time (a 64-bit product a row
// fewer; the output pointers too cost registers enough to spill at F = 256).
template <int VW, int CH, class IdxT, bool kWhole>
__global__ void __launch_bounds__(kRegWarps * 32, VW == 4 && CH <= 2 ? 5 : 1)
    maxk_reg_kernel(const float* __restrict__ x, int64_t n, int F_arg, int k, float zk,
                    float* __restrict__ data, IdxT* __restrict__ index) {
  constexpr int N = VW * CH;
  const int F = kWhole ? 32 * VW * CH : F_arg;
  const int lane = threadIdx.x & 31;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (r >= n) return;  // whole warps only
  const float* xr = x + r * F;
  const int64_t x_step = stride * F;
  uint32_t cur[N];
  load_row<VW, CH>(xr, F, lane, cur);
  for (; r < n; r += stride, xr += x_step) {
    // In flight while this row is selected. A warp's last row reloads itself (unused): no
    // predicated load, whose destination registers each needed a fill.
    uint32_t nxt[N];
    load_row<VW, CH>(r + stride < n ? xr + x_step : xr, F, lane, nxt);
    select_row<VW, CH, IdxT>(cur, F, k, zk, lane, data + r * k, index + r * k);
#pragma unroll
    for (int i = 0; i < N; ++i) cur[i] = nxt[i];
  }
}

// ---- wide path (F > kMaxRegF) ---------------------------------------------------------------
template <class IdxT, bool kSmem, bool kVec4>
__global__ void __launch_bounds__(cbsr::kMaxWarps * 32)
    maxk_wide_kernel(const float* __restrict__ x, int64_t n, int F, int k, float* __restrict__ data,
                IdxT* __restrict__ index, int row_words) {
  extern __shared__ __align__(16) uint32_t keys_smem[];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + warp;
  if (r >= n) return;  // whole warps only: no block-level barrier below
  const float* xr = x + r * F;
  uint32_t* keys = keys_smem + static_cast<int64_t>(warp) * row_words;

  uint32_t kmin = 0xffffffffu, kmax = 0u;
  auto see = [&](uint32_t key) {
    kmin = min(kmin, key);
    kmax = max(kmax, key);
  };
  if constexpr (kSmem && kVec4) {
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    uint4* k4 = reinterpret_cast<uint4*>(keys);
    for (int j = lane; j < F / 4; j += 32) {
      const float4 t = __ldg(x4 + j);
      const uint4 q = make_uint4(to_key(t.x), to_key(t.y), to_key(t.z), to_key(t.w));
      k4[j] = q;
      see(q.x); see(q.y); see(q.z); see(q.w);
    }
  } else {
    for (int j = lane; j < F; j += 32) {
      const uint32_t q = to_key(__ldg(xr + j));
      if constexpr (kSmem) keys[j] = q;
      see(q);
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    kmin = min(kmin, __shfl_xor_sync(kFull, kmin, o));
    kmax = max(kmax, __shfl_xor_sync(kFull, kmax, o));
  }
  if constexpr (kSmem) __syncwarp();

  auto key_at = [&](int j) -> uint32_t {
    if constexpr (kSmem) return keys[j];
    else return to_key(__ldg(xr + j));
  };
  // Elements with key >= t, the same value in every lane.
  auto count_ge = [&](uint32_t t) -> int {
    int c = 0;
    for (int base = 0; base < F; base += 32) {
      const int j = base + lane;
      c += __popc(__ballot_sync(kFull, j < F && key_at(j) >= t));
    }
    return c;
  };

  // Invariant: count_ge(lo) >= k and the k-th largest key is <= hi.
  uint32_t lo = kmin, hi = kmax;
  uint32_t T = 0;       // keep keys > T ...
  int eq_left = 0;      // ... and the first eq_left keys == T
  bool exact = false;
  for (int round = 0; lo < hi; ++round) {
    const uint32_t half = lo + static_cast<uint32_t>((uint64_t{hi} - lo + 1) >> 1);
    uint32_t mid = half;
    if (round < kValueRounds) {
      const float m = 0.5f * from_key(lo) + 0.5f * from_key(hi);
      const uint32_t mk = to_key(m);
      if (mk > lo && mk <= hi) mid = mk;
    }
    const int c = count_ge(mid);
    if (c == k) {  // exactly k at or above the pivot: keep them all, no ties to break
      T = mid - 1;
      exact = true;
      break;
    }
    if (c > k) lo = mid;
    else hi = mid - 1;
  }
  if (!exact) {
    T = lo;  // the k-th largest key
    eq_left = k - (T == 0xffffffffu ? 0 : count_ge(T + 1));
  }

  const unsigned lt = (1u << lane) - 1u;
  float* drow = data + r * k;
  IdxT* irow = index + r * k;
  int pos = 0;
  for (int base = 0; base < F && pos < k; base += 32) {
    const int j = base + lane;
    const bool in = j < F;
    const uint32_t key = in ? key_at(j) : 0u;
    const bool eq = in && key == T;
    const unsigned eqm = __ballot_sync(kFull, eq);
    const bool sel = (in && key > T) || (eq && __popc(eqm & lt) < eq_left);
    const unsigned selm = __ballot_sync(kFull, sel);
    if (sel) {
      const int p = pos + __popc(selm & lt);
      drow[p] = from_key(key);
      irow[p] = static_cast<IdxT>(j);
    }
    pos += __popc(selm);
    eq_left -= min(__popc(eqm), eq_left);
  }
}

// Backward, rows of F <= kMaxRegF: each warp builds a row of dx in shared memory (zeros, then
// its k gradients added at their columns) and writes it out whole, coalesced. The element kernel
// below needs the output zeroed first and then scatters 4-byte adds into it: a second pass over
// dx, a 64-bit division an element, and partial-sector writes. MaxK-SAGE (232,965 x 256, k = 32,
// three calls an epoch, H200): its MaxK + CBSR phase 31.09 -> 30.85 ms an epoch.
constexpr int kBwdWarps = 8;
template <class IdxT, bool kVec4>
__global__ void __launch_bounds__(kBwdWarps * 32)
    maxk_backward_rows_kernel(const float* __restrict__ d, const IdxT* __restrict__ idx,
                              int64_t n, int k, int F, int row_words, float* __restrict__ dx) {
  extern __shared__ __align__(16) float bwd_rows[];
  const int lane = threadIdx.x & 31;
  float* row = bwd_rows + (threadIdx.x >> 5) * row_words;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kBwdWarps;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kBwdWarps + (threadIdx.x >> 5); r < n;
       r += stride) {
    if constexpr (kVec4) {
      for (int j = 4 * lane; j < F; j += 128)
        *reinterpret_cast<float4*>(row + j) = make_float4(0.f, 0.f, 0.f, 0.f);
    } else {
      for (int j = lane; j < F; j += 32) row[j] = 0.f;
    }
    __syncwarp();
    const int64_t at = r * k;
    for (int j = lane; j < k; j += 32) {
      const int c = idx[at + j];
      // Added, not stored: a hand-made CBSR that repeats a column gets the sum of its gradients.
      if (c < F) atomicAdd(row + c, d[at + j]);
    }
    __syncwarp();
    float* out = dx + r * F;
    if constexpr (kVec4) {
      for (int j = 4 * lane; j < F; j += 128)
        *reinterpret_cast<float4*>(out + j) = *reinterpret_cast<const float4*>(row + j);
    } else {
      for (int j = lane; j < F; j += 32) out[j] = row[j];
    }
    __syncwarp();  // the row is read before the next one zeroes it
  }
}

template <class IdxT>
__global__ void maxk_backward_kernel(const float* __restrict__ d, const IdxT* __restrict__ idx,
                                     int64_t total, int64_t k, int64_t F, float* __restrict__ dx) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = idx[i];
    // Added, not stored: a hand-made CBSR that repeats a column gets the sum of its gradients.
    if (c < F) atomicAdd(dx + (i / k) * F + c, d[i]);
  }
}

// Blocks of kRegWarps warps that fit on the device at once (the persistent grid's size).
template <class Kernel>
int64_t resident_blocks(Kernel kernel) {
  int dev = 0, sms = 0, per_sm = 0;
  SPGNN_CUDA_CHECK(cudaGetDevice(&dev));
  SPGNN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  SPGNN_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kRegWarps * 32, 0));
  return static_cast<int64_t>(std::max(per_sm, 1)) * sms;
}

// z with P(N(0, 1) > z) = q, for 0 < q < 1 (bisection on erfc; once a launch).
float normal_upper_quantile(double q) {
  double lo = -40.0, hi = 40.0;
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (0.5 * std::erfc(mid / std::sqrt(2.0)) > q) lo = mid;
    else hi = mid;
  }
  return static_cast<float>(0.5 * (lo + hi));
}

template <int VW, int CH, class IdxT>
void launch_reg(const Tensor& x, int64_t k, Tensor& data, Tensor& index, cudaStream_t st) {
  const int64_t n = x.dim(0), F = x.dim(1);
  // Whole rows only where they are the common width (F = 256, u8 columns; one instantiation).
  constexpr bool kHasWhole = VW == 4 && CH == 2 && sizeof(IdxT) == 1;
  const bool whole = kHasWhole && F == 32 * VW * CH;
  auto kernel = whole ? maxk_reg_kernel<VW, CH, IdxT, kHasWhole>
                      : maxk_reg_kernel<VW, CH, IdxT, false>;
  // per instantiation, first device
  static const int64_t resident[2] = {resident_blocks(maxk_reg_kernel<VW, CH, IdxT, false>),
                                      resident_blocks(maxk_reg_kernel<VW, CH, IdxT, kHasWhole>)};
  const int64_t blocks = std::min<int64_t>((n + kRegWarps - 1) / kRegWarps, resident[whole]);
  // The search's mean-and-deviation pivot (select_row) for k <= F / 8 only: at k = F / 4 it
  // saved too few rounds on normal rows to pay for itself (2.1M x 256, k = 64: 1.90 -> 2.01 ms).
  const float zk = 8 * k <= F ? normal_upper_quantile((static_cast<double>(k) + 0.5) /
                                                      static_cast<double>(F))
                              : NAN;
  kernel<<<static_cast<unsigned>(blocks), kRegWarps * 32, 0, st>>>(
      x.data<float>(), n, static_cast<int>(F), static_cast<int>(k), zk, data.data<float>(),
      index.data<IdxT>());
  SPGNN_CUDA_CHECK_LAUNCH();
}

// Registers per lane: float4 loads need F % 4 == 0 and a 16-byte aligned x (then every row is);
// chunk counts are rounded up to the instantiated ones (padding costs compares, not traffic).
// u8 columns mean F <= 256, so only those shapes are instantiated for u8.
template <class IdxT>
void launch_reg_path(const Tensor& x, int64_t k, Tensor& data, Tensor& index, cudaStream_t st) {
  const int64_t F = x.dim(1);
  const bool vec4 = F % 4 == 0 && cbsr::aligned_to(x.data<float>(), 16);
  if constexpr (sizeof(IdxT) == 1) {
    if (vec4) {
      if (F <= 128) return launch_reg<4, 1, IdxT>(x, k, data, index, st);
      return launch_reg<4, 2, IdxT>(x, k, data, index, st);
    }
    if (F <= 32) return launch_reg<1, 1, IdxT>(x, k, data, index, st);
    if (F <= 64) return launch_reg<1, 2, IdxT>(x, k, data, index, st);
    if (F <= 128) return launch_reg<1, 4, IdxT>(x, k, data, index, st);
    return launch_reg<1, 8, IdxT>(x, k, data, index, st);
  } else {
    if (vec4) {
      if (F <= 384) return launch_reg<4, 3, IdxT>(x, k, data, index, st);
      if (F <= 512) return launch_reg<4, 4, IdxT>(x, k, data, index, st);
      return launch_reg<4, 8, IdxT>(x, k, data, index, st);
    }
    if (F <= 512) return launch_reg<1, 16, IdxT>(x, k, data, index, st);
    return launch_reg<1, 32, IdxT>(x, k, data, index, st);
  }
}

template <class IdxT>
void launch_maxk(const Tensor& x, int64_t k, Tensor& data, Tensor& index, cudaStream_t st) {
  const int64_t n = x.dim(0), F = x.dim(1);
  // u8 columns hold F <= 256 and u16 F > 256 (the front door's rule), which launch_reg_path's
  // instantiations rely on.
  SPGNN_CHECK((sizeof(IdxT) == 1) == (F <= 256), InvalidArgument, "maxk: index dtype ",
              sizeof(IdxT) == 1 ? "u8" : "u16", " does not match F = ", F);
  if (F <= kMaxRegF) return launch_reg_path<IdxT>(x, k, data, index, st);
  const cbsr::BlockShape bs = cbsr::block_shape(F, 0, true);
  const int64_t blocks = (n + bs.warps - 1) / bs.warps;
  SPGNN_CHECK(blocks <= 0x7fffffff, InvalidArgument, "maxk: too many rows for one grid (", n, ")");
  const float* xp = x.data<float>();
  const bool vec4 = F % 4 == 0 && cbsr::aligned_to(xp, 16);
  const int row_words = static_cast<int>((F + 3) / 4 * 4);
  auto go = [&](auto kernel, size_t smem) {
    cbsr::allow_smem(kernel, smem);
    kernel<<<static_cast<unsigned>(blocks), bs.warps * 32, smem, st>>>(
        xp, n, static_cast<int>(F), static_cast<int>(k), data.data<float>(), index.data<IdxT>(),
        row_words);
    SPGNN_CUDA_CHECK_LAUNCH();
  };
  if (!bs.smem) go(maxk_wide_kernel<IdxT, false, false>, 0);
  else if (vec4) go(maxk_wide_kernel<IdxT, true, true>, bs.smem_bytes);
  else go(maxk_wide_kernel<IdxT, true, false>, bs.smem_bytes);
}

}  // namespace

void cuda_maxk(const Tensor& x, int64_t k, Tensor& data, Tensor& index, void* stream) {
  cbsr::DeviceGuard guard(x.device().index);
  const cudaStream_t st = as_stream(stream);
  if (x.dim(0) == 0) return;
  if (index.dtype() == DType::u8) launch_maxk<uint8_t>(x, k, data, index, st);
  else launch_maxk<uint16_t>(x, k, data, index, st);
}

void cuda_maxk_backward(const Tensor& d_data, const Tensor& index, int64_t F, Tensor& dx,
                        void* stream) {
  cbsr::DeviceGuard guard(d_data.device().index);
  const cudaStream_t st = as_stream(stream);
  const int64_t n = d_data.dim(0), k = d_data.dim(1);
  if (F <= kMaxRegF) {
    const bool vec4 = F % 4 == 0 && cbsr::aligned_to(dx.data<float>(), 16);
    const int row_words = static_cast<int>((F + 3) / 4 * 4);
    const size_t smem = static_cast<size_t>(kBwdWarps) * row_words * sizeof(float);
    const int64_t blocks = std::min<int64_t>(
        (n + kBwdWarps - 1) / kBwdWarps, int64_t{8} * gnnone::sm_count(d_data.device().index));
    auto run = [&](const auto* idx) {
      using IdxT = std::remove_cv_t<std::remove_pointer_t<decltype(idx)>>;
      auto go = [&](auto kernel) {
        kernel<<<static_cast<unsigned>(blocks), kBwdWarps * 32, smem, st>>>(
            d_data.data<float>(), idx, n, static_cast<int>(k), static_cast<int>(F), row_words,
            dx.data<float>());
        SPGNN_CUDA_CHECK_LAUNCH();
      };
      if (vec4) go(maxk_backward_rows_kernel<IdxT, true>);
      else go(maxk_backward_rows_kernel<IdxT, false>);
    };
    if (index.dtype() == DType::u8) run(index.data<uint8_t>());
    else run(index.data<uint16_t>());
    return;
  }
  SPGNN_CUDA_CHECK(cudaMemsetAsync(dx.data<float>(), 0,
                                   static_cast<size_t>(n) * static_cast<size_t>(F) * 4, st));
  const int64_t total = n * k;
  if (total == 0) return;
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, int64_t{1} << 20);
  auto run = [&](const auto* idx) {
    using IdxT = std::remove_cv_t<std::remove_pointer_t<decltype(idx)>>;
    maxk_backward_kernel<IdxT><<<static_cast<unsigned>(blocks), threads, 0, st>>>(
        d_data.data<float>(), idx, total, k, F, dx.data<float>());
    SPGNN_CUDA_CHECK_LAUNCH();
  };
  if (index.dtype() == DType::u8) run(index.data<uint8_t>());
  else run(index.data<uint16_t>());
}

}  // namespace spgnn::detail
