// Edge softmax on the GPU (forward and backward), plus the elementwise kernels of the unfused
// GAT composition (LeakyReLU, dropout on the weights, head column copies).
//
// One warp per destination row (rows are short on average and the per-row statistics are warp
// reductions); per head: lanes walk the row's edges once for the max and the sum of exponentials
// (online, rescaled), then once more to write exp(s - max) / sum. No atomics, no shared memory.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/attention_hash.hpp"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_kernels.hpp"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/gnnone_common.cuh"

namespace spgnn::detail {

namespace {

using attention::kFullMask;

constexpr int kWarpsPerBlock = 8;

template <class I>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    edge_softmax_kernel(const I* __restrict__ rowptr, const float* __restrict__ s,
                        float* __restrict__ o, int64_t n, int64_t H) {
  const int lane = threadIdx.x & 31;
  const int64_t v = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (v >= n) return;
  const int64_t b = rowptr[v], e = rowptr[v + 1];
  if (b == e) return;
  for (int64_t h = 0; h < H; ++h) {
    float m, z;
    attention::row_softmax_stats(b, e, lane, [&](int64_t j) { return __ldg(s + j * H + h); }, m, z);
    const float inv_z = 1.f / z;
    for (int64_t j = b + lane; j < e; j += 32) o[j * H + h] = expf(__ldg(s + j * H + h) - m) * inv_z;
  }
}

template <class I>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    edge_softmax_backward_kernel(const I* __restrict__ rowptr, const float* __restrict__ y,
                                 const float* __restrict__ dy, float* __restrict__ dx, int64_t n,
                                 int64_t H) {
  const int lane = threadIdx.x & 31;
  const int64_t v = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (v >= n) return;
  const int64_t b = rowptr[v], e = rowptr[v + 1];
  if (b == e) return;
  for (int64_t h = 0; h < H; ++h) {
    float t = 0.f;
    for (int64_t j = b + lane; j < e; j += 32) t += __ldg(y + j * H + h) * __ldg(dy + j * H + h);
    t = attention::warp_sum(t);
    for (int64_t j = b + lane; j < e; j += 32)
      dx[j * H + h] = __ldg(y + j * H + h) * (__ldg(dy + j * H + h) - t);
  }
}

__global__ void leaky_relu_kernel(float* x, int64_t n, float slope) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] = attention::leaky(x[i], slope);
}

__global__ void dropout_kernel(const float* __restrict__ a, float* __restrict__ out, int64_t n,
                               uint64_t seed, const uint64_t* seed_ptr, float p, float scale) {
  const uint64_t key = attention_key(seed_ptr ? *seed_ptr : seed);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = a[i] * attention_dropout_factor(key, static_cast<uint64_t>(i), p, scale);
}

__global__ void copy_cols_kernel(const float* __restrict__ src, int64_t sld, int64_t soff,
                                 float* __restrict__ dst, int64_t dld, int64_t doff, int64_t rows,
                                 int64_t width) {
  const int64_t total = rows * width;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / width, k = i % width;
    dst[r * dld + doff + k] = src[r * sld + soff + k];
  }
}

unsigned elementwise_blocks(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>(ceil_div<int64_t>(n, 256), 65535));
}

unsigned row_blocks(int64_t n) {
  const int64_t blocks = ceil_div<int64_t>(n, kWarpsPerBlock);
  SPGNN_CHECK(blocks <= 0x7fffffff, InvalidArgument, "edge_softmax: graph has too many rows");
  return static_cast<unsigned>(blocks);
}

}  // namespace

void cuda_edge_softmax(const SoftmaxProblem& p) {
  const Graph& g = *p.g;
  if (g.n_rows == 0 || g.nnz() == 0 || p.H == 0) return;
  gnnone::DeviceGuard guard(g.device().index);
  const cudaStream_t st = as_stream(p.stream);
  const float* s = p.scores->data<float>();
  float* o = p.out->data<float>();
  if (g.index_dtype() == DType::i64)
    edge_softmax_kernel<int64_t><<<row_blocks(g.n_rows), kWarpsPerBlock * 32, 0, st>>>(
        g.rowptr.data<int64_t>(), s, o, g.n_rows, p.H);
  else
    edge_softmax_kernel<int32_t><<<row_blocks(g.n_rows), kWarpsPerBlock * 32, 0, st>>>(
        g.rowptr.data<int32_t>(), s, o, g.n_rows, p.H);
  SPGNN_CUDA_CHECK_LAUNCH();
}

void cuda_edge_softmax_backward(const SoftmaxBwdProblem& p) {
  const Graph& g = *p.g;
  if (g.n_rows == 0 || g.nnz() == 0 || p.H == 0) return;
  gnnone::DeviceGuard guard(g.device().index);
  const cudaStream_t st = as_stream(p.stream);
  const float* y = p.out->data<float>();
  const float* dy = p.grad_out->data<float>();
  float* dx = p.grad_scores->data<float>();
  if (g.index_dtype() == DType::i64)
    edge_softmax_backward_kernel<int64_t><<<row_blocks(g.n_rows), kWarpsPerBlock * 32, 0, st>>>(
        g.rowptr.data<int64_t>(), y, dy, dx, g.n_rows, p.H);
  else
    edge_softmax_backward_kernel<int32_t><<<row_blocks(g.n_rows), kWarpsPerBlock * 32, 0, st>>>(
        g.rowptr.data<int32_t>(), y, dy, dx, g.n_rows, p.H);
  SPGNN_CUDA_CHECK_LAUNCH();
}

void cuda_leaky_relu_(Tensor& x, float negative_slope, void* stream) {
  const int64_t n = x.numel();
  if (n == 0) return;
  gnnone::DeviceGuard guard(x.device().index);
  leaky_relu_kernel<<<elementwise_blocks(n), 256, 0, as_stream(stream)>>>(x.data<float>(), n,
                                                                          negative_slope);
  SPGNN_CUDA_CHECK_LAUNCH();
}

void cuda_apply_dropout(const Tensor& a, Tensor& out, uint64_t seed, const uint64_t* seed_ptr,
                        float p, float scale, void* stream) {
  const int64_t n = a.numel();
  if (n == 0) return;
  gnnone::DeviceGuard guard(a.device().index);
  dropout_kernel<<<elementwise_blocks(n), 256, 0, as_stream(stream)>>>(
      a.data<float>(), out.data<float>(), n, seed, seed_ptr, p, scale);
  SPGNN_CUDA_CHECK_LAUNCH();
}

void cuda_copy_cols(const Tensor& src, int64_t src_off, Tensor& dst, int64_t dst_off,
                    int64_t width, void* stream) {
  const int64_t rows = src.ndim() == 0 ? 0 : src.dim(0);
  if (rows == 0 || width == 0) return;
  gnnone::DeviceGuard guard(src.device().index);
  copy_cols_kernel<<<elementwise_blocks(rows * width), 256, 0, as_stream(stream)>>>(
      src.data<float>(), src.numel() / rows, src_off, dst.data<float>(), dst.numel() / rows,
      dst_off, rows, width);
  SPGNN_CUDA_CHECK_LAUNCH();
}

}  // namespace spgnn::detail
