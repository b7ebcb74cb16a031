// MaxK nonlinearity (MaxK-GNN, ASPLOS'24, §3 and §5.3): the k largest values of each row of
// x [n, F], in CBSR (values and u8/u16 columns, ascending column order), and its backward.
//
// One warp per row. The row is loaded once (coalesced float4) into the warp's slice of shared
// memory as order keys (maxk_order_key: unsigned integers that sort like the floats), and the
// warp's min and max keys bound the k-th largest value T. Pivot search: count the elements >= a
// pivot with one ballot + popc per 32 elements; the first rounds take the pivot halfway between
// the bounds' float values (the paper's (min + max) / 2, which converges in < 10 rounds on
// typical rows), later rounds halve the key interval, which ends in at most 32 more rounds
// whatever the data (outliers make value halving slow). A pivot with exactly k elements >= it
// ends the search early; otherwise the search ends at T itself. Selection then walks the row
// in column order once: every element > T is kept, plus the lowest-column elements == T until
// k are kept (the deterministic tie rule), each written at its rank among the kept — so the
// output is already in ascending column order. Global traffic is one read of x and one write of
// the CBSR row, like an element-wise op.
// Rows too wide for shared memory (F > 24576) re-read x from global memory (L1/L2) per round.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/cbsr_common.cuh"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/maxk_kernels.hpp"

namespace spgnn::detail {

namespace {

// Value-halving rounds before switching to key halving (see above).
constexpr int kValueRounds = 12;
constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ uint32_t to_key(float v) {
  const uint32_t b = __float_as_uint(v);
  return b ^ ((b & 0x80000000u) ? 0xffffffffu : 0x80000000u);
}
__device__ __forceinline__ float from_key(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k ^ 0x80000000u) : ~k);
}

template <class IdxT, bool kSmem, bool kVec4>
__global__ void __launch_bounds__(cbsr::kMaxWarps * 32)
    maxk_kernel(const float* __restrict__ x, int64_t n, int F, int k, float* __restrict__ data,
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

template <class IdxT>
void launch_maxk(const Tensor& x, int64_t k, Tensor& data, Tensor& index, cudaStream_t st) {
  const int64_t n = x.dim(0), F = x.dim(1);
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
  if (!bs.smem) go(maxk_kernel<IdxT, false, false>, 0);
  else if (vec4) go(maxk_kernel<IdxT, true, true>, bs.smem_bytes);
  else go(maxk_kernel<IdxT, true, false>, bs.smem_bytes);
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
