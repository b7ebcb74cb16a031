// CUDA side of the training engine: cuBLAS GEMM and the elementwise / row-wise kernels (bias,
// activations, dropout, log-softmax + NLL, accuracy, Adam, per-head attention dots). They are
// all memory-bound one-pass kernels, so one file keeps nvcc time low and a grid-stride loop with
// 256 threads is enough: the sparse aggregation dominates an epoch, not these.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/cuda/cuda_check.cuh"
#include "nn/nn_cuda.hpp"
#include "nn/nn_hash.hpp"

namespace spgnn::nn::detail {

using spgnn::detail::ceil_div;

namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;

// Grid for a grid-stride loop over n elements: enough blocks to fill the GPU, never more than n
// needs.
unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(ceil_div<int64_t>(n, kThreads), 8192)));
}

#define SPGNN_CUBLAS_CHECK(call)                                                          \
  do {                                                                                    \
    cublasStatus_t st_ = (call);                                                          \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                     \
      throw DeviceError(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " +   \
                        #call " failed: " + cublasGetStatusString(st_));                  \
  } while (0)

// One handle per host thread and device, created on first use and kept for the process: handle
// creation costs milliseconds, a training epoch calls GEMM dozens of times.
cublasHandle_t handle() {
  thread_local cublasHandle_t h[16] = {};
  int dev = 0;
  SPGNN_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= 16) throw DeviceError("cuBLAS handle cache holds devices 0..15");
  if (!h[dev]) SPGNN_CUBLAS_CHECK(cublasCreate(&h[dev]));
  return h[dev];
}

__global__ void add_bias_kernel(float* x, const float* b, int64_t n, int64_t cols) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] += b[i % cols];
}

// One thread per column, rows walked in a strided loop by the block's y dimension; partial sums
// meet in shared memory. Coalesced: consecutive threads read consecutive columns of one row.
__global__ void column_sum_kernel(const float* x, float* out, int64_t rows, int64_t cols, float beta) {
  __shared__ float part[8][32];
  const int64_t c = blockIdx.x * 32 + threadIdx.x;
  float s = 0.f;
  if (c < cols)
    for (int64_t r = threadIdx.y; r < rows; r += 8) s += x[r * cols + c];
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float t = 0.f;
    for (int k = 0; k < 8; ++k) t += part[k][threadIdx.x];
    out[c] = t + (beta == 0.f ? 0.f : beta * out[c]);
  }
}

__global__ void axpy_kernel(float* y, float alpha, const float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] += alpha * x[i];
}

__global__ void activation_kernel(float* x, int64_t n, int act) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = x[i];
    x[i] = v > 0.f ? v : (act == 1 ? 0.f : expm1f(v));
  }
}

__global__ void activation_backward_kernel(float* g, const float* y, int64_t n, int act) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = y[i];
    if (!(v > 0.f)) g[i] = act == 1 ? 0.f : g[i] * (v + 1.f);
  }
}

__global__ void dropout_kernel(const float* x, float* y, int64_t n, uint32_t thr, float scale, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = dropout_keep(seed, uint64_t(i), thr) ? x[i] * scale : 0.f;
}

__global__ void dropout_backward_kernel(float* g, int64_t n, uint32_t thr, float scale, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    g[i] = dropout_keep(seed, uint64_t(i), thr) ? g[i] * scale : 0.f;
}

__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// One warp per selected row: max, log-sum-exp, loss and the unscaled gradient softmax - onehot
// (the host scales by 1 / counted once the count is known).
__global__ void nll_kernel(const float* logits, int64_t classes, const int64_t* y, const int64_t* idx,
                           int64_t m, float* grad, double* loss, unsigned long long* counted) {
  const int64_t k = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (k >= m) return;
  const int64_t i = idx[k], label = y[i];
  if (label < 0) return;
  const float* row = logits + i * classes;
  float mx = -INFINITY;
  for (int64_t j = lane; j < classes; j += kWarp) mx = fmaxf(mx, row[j]);
  mx = warp_max(mx);
  float s = 0.f;
  for (int64_t j = lane; j < classes; j += kWarp) s += expf(row[j] - mx);
  s = warp_sum(s);
  const float lse = mx + logf(s);
  if (grad)
    for (int64_t j = lane; j < classes; j += kWarp)
      grad[i * classes + j] = expf(row[j] - lse) - (j == label ? 1.f : 0.f);
  if (lane == 0) {
    atomicAdd(loss, double(lse - row[label]));
    atomicAdd(counted, 1ull);
  }
}

__global__ void scale_rows_kernel(float* grad, int64_t classes, const int64_t* idx, int64_t m, float s) {
  const int64_t total = m * classes;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x)
    grad[idx[t / classes] * classes + t % classes] *= s;
}

__global__ void accuracy_kernel(const float* logits, int64_t classes, const int64_t* y, const int64_t* idx,
                                int64_t m, unsigned long long* correct, unsigned long long* counted) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < m; k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = idx[k], label = y[i];
    if (label < 0) continue;
    const float* row = logits + i * classes;
    int64_t best = 0;
    for (int64_t j = 1; j < classes; ++j) if (row[j] > row[best]) best = j;
    atomicAdd(counted, 1ull);
    if (best == label) atomicAdd(correct, 1ull);
  }
}

__global__ void adam_kernel(float* p, const float* g, float* m, float* v, int64_t n, float lr, float b1,
                            float b2, float eps, float wd, float c1, float c2) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float gi = g[i] + wd * p[i];
    const float mi = b1 * m[i] + (1.f - b1) * gi;
    const float vi = b2 * v[i] + (1.f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= lr * (mi / c1) / (sqrtf(vi / c2) + eps);
  }
}

// One thread per (row, head): F is small for GAT (8..64), so a serial dot per thread is fine.
__global__ void head_dot_kernel(const float* x, const float* a, float* out, int64_t n, int64_t heads, int64_t f) {
  const int64_t total = n * heads;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t h = t % heads;
    const float* xr = x + t * f;  // row i, head h starts at (i*heads + h) * f
    float s = 0.f;
    for (int64_t j = 0; j < f; ++j) s += xr[j] * a[h * f + j];
    out[t] = s;
  }
}

__global__ void head_dot_grad_x_kernel(const float* a, const float* gout, float* gx, int64_t n, int64_t heads, int64_t f) {
  const int64_t total = n * heads * f;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x)
    gx[t] += gout[t / f] * a[t % (heads * f)];
}

// grad_a[c] = sum_i gout[i, c / f] * x[i, c]: a column sum like the bias gradient.
__global__ void head_dot_grad_a_kernel(const float* x, const float* gout, float* ga, int64_t n, int64_t heads, int64_t f) {
  __shared__ float part[8][32];
  const int64_t cols = heads * f;
  const int64_t c = blockIdx.x * 32 + threadIdx.x;
  float s = 0.f;
  if (c < cols)
    for (int64_t r = threadIdx.y; r < n; r += 8) s += gout[r * heads + c / f] * x[r * cols + c];
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float t = 0.f;
    for (int k = 0; k < 8; ++k) t += part[k][threadIdx.x];
    ga[c] = t;
  }
}

}  // namespace

void cuda_gemm(const float* a, bool ta, const float* b, bool tb, float* c, int64_t m, int64_t n,
               int64_t k, float beta) {
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  const float alpha = 1.f;
  const int lda = int(ta ? m : k), ldb = int(tb ? k : n);
  SPGNN_CUBLAS_CHECK(cublasSgemm(handle(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 int(n), int(m), int(k), &alpha, b, ldb, a, lda, &beta, c, int(n)));
}

void cuda_add_bias(float* x, const float* bias, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  add_bias_kernel<<<blocks_for(n), kThreads>>>(x, bias, n, cols);
  SPGNN_CUDA_CHECK_LAUNCH();
}

void cuda_column_sum(const float* x, float* out, int64_t rows, int64_t cols, float beta) {
  if (cols == 0) return;
  column_sum_kernel<<<unsigned(ceil_div<int64_t>(cols, 32)), dim3(32, 8)>>>(x, out, rows, cols, beta);
  SPGNN_CUDA_CHECK_LAUNCH();
}

void cuda_axpy(float* y, float alpha, const float* x, int64_t n) {
  if (n == 0) return;
  axpy_kernel<<<blocks_for(n), kThreads>>>(y, alpha, x, n);
  SPGNN_CUDA_CHECK_LAUNCH();
}

void cuda_activation(float* x, int64_t n, int act) {
  if (n == 0) return;
  activation_kernel<<<blocks_for(n), kThreads>>>(x, n, act);
  SPGNN_CUDA_CHECK_LAUNCH();
}

void cuda_activation_backward(float* grad, const float* y, int64_t n, int act) {
  if (n == 0) return;
  activation_backward_kernel<<<blocks_for(n), kThreads>>>(grad, y, n, act);
  SPGNN_CUDA_CHECK_LAUNCH();
}

void cuda_dropout(const float* x, float* y, int64_t n, uint32_t thr, float scale, uint64_t seed) {
  if (n == 0) return;
  dropout_kernel<<<blocks_for(n), kThreads>>>(x, y, n, thr, scale, seed);
  SPGNN_CUDA_CHECK_LAUNCH();
}

void cuda_dropout_backward(float* grad, int64_t n, uint32_t thr, float scale, uint64_t seed) {
  if (n == 0) return;
  dropout_backward_kernel<<<blocks_for(n), kThreads>>>(grad, n, thr, scale, seed);
  SPGNN_CUDA_CHECK_LAUNCH();
}

namespace {
// Two scalars back to the host: the loss and accuracy are reported every epoch anyway.
struct Scalars {
  spgnn::detail::DeviceBuffer buf{2 * sizeof(unsigned long long)};
};
Scalars& scalars() {
  thread_local Scalars s;
  return s;
}
}  // namespace

void cuda_log_softmax_nll(const float* logits, int64_t classes, const int64_t* y, const int64_t* idx,
                          int64_t m, float* grad, double* loss_sum, int64_t* counted) {
  *loss_sum = 0;
  *counted = 0;
  if (m == 0) return;
  auto* d = static_cast<unsigned long long*>(scalars().buf.get());
  SPGNN_CUDA_CHECK(cudaMemsetAsync(d, 0, 2 * sizeof(unsigned long long)));
  const int64_t threads = m * kWarp;
  nll_kernel<<<unsigned(ceil_div<int64_t>(threads, kThreads)), kThreads>>>(
      logits, classes, y, idx, m, grad, reinterpret_cast<double*>(d), d + 1);
  SPGNN_CUDA_CHECK_LAUNCH();
  unsigned long long h[2];
  SPGNN_CUDA_CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  double l;
  static_assert(sizeof(double) == sizeof(unsigned long long));
  std::memcpy(&l, &h[0], sizeof l);
  *loss_sum = l;
  *counted = int64_t(h[1]);
  if (grad && *counted > 0) {
    scale_rows_kernel<<<blocks_for(m * classes), kThreads>>>(grad, classes, idx, m, 1.f / float(*counted));
    SPGNN_CUDA_CHECK_LAUNCH();
  }
}

void cuda_accuracy(const float* logits, int64_t classes, const int64_t* y, const int64_t* idx, int64_t m,
                   int64_t* correct, int64_t* counted) {
  *correct = *counted = 0;
  if (m == 0) return;
  auto* d = static_cast<unsigned long long*>(scalars().buf.get());
  SPGNN_CUDA_CHECK(cudaMemsetAsync(d, 0, 2 * sizeof(unsigned long long)));
  accuracy_kernel<<<blocks_for(m), kThreads>>>(logits, classes, y, idx, m, d, d + 1);
  SPGNN_CUDA_CHECK_LAUNCH();
  unsigned long long h[2];
  SPGNN_CUDA_CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  *correct = int64_t(h[0]);
  *counted = int64_t(h[1]);
}

void cuda_adam(float* p, const float* g, float* m, float* v, int64_t n, float lr, float b1, float b2,
               float eps, float wd, float c1, float c2) {
  if (n == 0) return;
  adam_kernel<<<blocks_for(n), kThreads>>>(p, g, m, v, n, lr, b1, b2, eps, wd, c1, c2);
  SPGNN_CUDA_CHECK_LAUNCH();
}

void cuda_head_dot(const float* x, const float* a, float* out, int64_t n, int64_t heads, int64_t f) {
  if (n * heads == 0) return;
  head_dot_kernel<<<blocks_for(n * heads), kThreads>>>(x, a, out, n, heads, f);
  SPGNN_CUDA_CHECK_LAUNCH();
}

void cuda_head_dot_backward(const float* x, const float* a, const float* grad_out, float* grad_x,
                            float* grad_a, int64_t n, int64_t heads, int64_t f) {
  const int64_t cols = heads * f;
  if (cols == 0) return;
  if (n > 0) {
    head_dot_grad_x_kernel<<<blocks_for(n * cols), kThreads>>>(a, grad_out, grad_x, n, heads, f);
    SPGNN_CUDA_CHECK_LAUNCH();
  }
  head_dot_grad_a_kernel<<<unsigned(ceil_div<int64_t>(cols, 32)), dim3(32, 8)>>>(x, grad_out, grad_a, n, heads, f);
  SPGNN_CUDA_CHECK_LAUNCH();
}

size_t cuda_memory_used(int device) {
  int prev = 0;
  SPGNN_CUDA_CHECK(cudaGetDevice(&prev));
  if (prev != device) SPGNN_CUDA_CHECK(cudaSetDevice(device));
  size_t free_b = 0, total_b = 0;
  const cudaError_t err = cudaMemGetInfo(&free_b, &total_b);
  if (prev != device) cudaSetDevice(prev);
  SPGNN_CUDA_CHECK(err);
  return total_b - free_b;
}

void cuda_sync() { SPGNN_CUDA_CHECK(cudaDeviceSynchronize()); }

}  // namespace spgnn::nn::detail
