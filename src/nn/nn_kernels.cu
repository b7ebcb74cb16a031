// CUDA side of the training engine: cuBLAS GEMM and the elementwise / row-wise kernels (bias,
// activations, dropout, log-softmax + NLL, accuracy, Adam, per-head attention dots, reductions).
// They are memory-bound one-pass kernels (reductions: two deterministic passes), so one file
// keeps nvcc time low and a grid-stride loop with 256 threads is enough.
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

// Column sums (bias gradients, attention-vector gradients) in two deterministic passes: blocks
// of 32 columns x 8 row lanes each reduce one slab of rows into partial[slab, col], then one
// thread per column adds its slabs in a fixed order. A single block per 32 columns left 8 blocks
// to stream a [233K, 256] gradient, latency-bound; slabs give every SM work.
constexpr int kColTile = 32;
constexpr int kRowLanes = 8;

struct PlainLoad {
  const float* x;
  int64_t cols;
  __device__ float operator()(int64_t r, int64_t c) const { return x[r * cols + c]; }
};
// grad_a[c] = sum_i gout[i, c / f] * x[i, c] (head_dot's backward).
struct HeadLoad {
  const float* x;
  const float* gout;
  int64_t heads, f, cols;
  __device__ float operator()(int64_t r, int64_t c) const {
    return gout[r * heads + c / f] * x[r * cols + c];
  }
};

template <class Load>
__global__ void column_partial_kernel(Load load, float* partial, int64_t rows, int64_t cols,
                                      int64_t slab_rows) {
  __shared__ float part[kRowLanes][kColTile + 1];
  const int64_t c = blockIdx.x * int64_t(kColTile) + threadIdx.x;
  const int64_t r0 = blockIdx.y * slab_rows;
  const int64_t r1 = r0 + slab_rows < rows ? r0 + slab_rows : rows;
  float s = 0.f;
  if (c < cols)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) s += load(r, c);
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float t = 0.f;
    for (int k = 0; k < kRowLanes; ++k) t += part[k][threadIdx.x];
    partial[blockIdx.y * cols + c] = t;
  }
}

__global__ void column_finish_kernel(const float* partial, int64_t slabs, int64_t cols, float* out,
                                     float beta) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < cols;
       c += int64_t(gridDim.x) * blockDim.x) {
    double t = 0;
    for (int64_t k = 0; k < slabs; ++k) t += partial[k * cols + c];
    out[c] = float(t) + (beta == 0.f ? 0.f : beta * out[c]);
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

__global__ void dropout_kernel(const float* x, float* y, int64_t n, uint32_t thr, float scale, uint64_t seed,
                               const uint64_t* seed_ptr) {
  if (seed_ptr) seed = *seed_ptr;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = dropout_keep(seed, uint64_t(i), thr) ? x[i] * scale : 0.f;
}

__global__ void dropout_backward_kernel(float* g, int64_t n, uint32_t thr, float scale, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    g[i] = dropout_keep(seed, uint64_t(i), thr) ? g[i] * scale : 0.f;
}

// x = dropout(act(x)) in place: one read and one write instead of three passes.
__global__ void activation_dropout_kernel(float* x, int64_t n, int act, bool drop, uint32_t thr,
                                          float scale, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float v = x[i];
    if (act == 1) v = v > 0.f ? v : 0.f;
    else if (act == 2) v = v > 0.f ? v : expm1f(v);
    if (drop) v = dropout_keep(seed, uint64_t(i), thr) ? v * scale : 0.f;
    x[i] = v;
  }
}

// From y = dropout(act(x)): ReLU's derivative is y > 0 (a dropped element is 0 too, so no mask is
// recomputed); ELU's is e^x = act(x) + 1 = y / scale + 1 where kept.
__global__ void activation_dropout_backward_kernel(float* g, const float* y, int64_t n, int act,
                                                   bool drop, uint32_t thr, float scale,
                                                   uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = y[i];
    if (act == 1) {
      g[i] = v > 0.f ? g[i] * scale : 0.f;
      continue;
    }
    if (drop && !dropout_keep(seed, uint64_t(i), thr)) {
      g[i] = 0.f;
      continue;
    }
    float d = g[i] * scale;
    if (act == 2 && !(v > 0.f)) d *= v / scale + 1.f;
    g[i] = d;
  }
}

__global__ void copy_columns_kernel(const float* src, int64_t src_ld, float* dst, int64_t dst_ld,
                                    int64_t rows, int64_t cols) {
  const int64_t total = rows * cols;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = t / cols, j = t - i * cols;
    dst[i * dst_ld + j] = src[i * src_ld + j];
  }
}

__global__ void add_scaled_kernel(float* y, const float* x, const float* s, float offset, int64_t n) {
  const float a = offset + *s;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] += a * x[i];
}

__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Dot product in two deterministic passes: block partials, then one thread adds them in order.
// Accumulated in double: the result is one scalar (GIN's eps gradient) summing n * F products of
// both signs, where float accumulation would lose the digits that cancellation leaves.
__device__ double warp_sum_d(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void dot_partial_kernel(const float* a, const float* b, int64_t n, double* partial) {
  __shared__ double warp_part[kThreads / kWarp];
  double s = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    s += double(a[i]) * double(b[i]);
  s = warp_sum_d(s);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  if (lane == 0) warp_part[warp] = s;
  __syncthreads();
  if (warp == 0) {
    double t = lane < kThreads / kWarp ? warp_part[lane] : 0.0;
    t = warp_sum_d(t);
    if (lane == 0) partial[blockIdx.x] = t;
  }
}

__global__ void dot_finish_kernel(const double* partial, int64_t blocks, float* out, float beta) {
  double t = 0;
  for (int64_t k = 0; k < blocks; ++k) t += partial[k];
  out[0] = float(t) + (beta == 0.f ? 0.f : beta * out[0]);
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

}  // namespace

void cuda_gemm(const float* a, bool ta, const float* b, bool tb, float* c, int64_t m, int64_t n,
               int64_t k, float beta, bool tf32) {
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  const float alpha = 1.f;
  const int lda = int(ta ? m : k), ldb = int(tb ? k : n);
  cublasHandle_t h = handle();
  SPGNN_CUBLAS_CHECK(cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  SPGNN_CUBLAS_CHECK(cublasSgemm(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 int(n), int(m), int(k), &alpha, b, ldb, a, lda, &beta, c, int(n)));
}

void cuda_add_bias(float* x, const float* bias, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  add_bias_kernel<<<blocks_for(n), kThreads>>>(x, bias, n, cols);
  SPGNN_CUDA_CHECK_LAUNCH();
}

namespace {
// Grow-only scratch per device for the partial sums of the two-pass reductions. Every engine
// kernel runs on the default stream, so one buffer per device is reused in stream order.
float* scratch(size_t floats) {
  thread_local spgnn::detail::DeviceBuffer bufs[16];
  int dev = 0;
  SPGNN_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= 16) throw DeviceError("nn scratch cache holds devices 0..15");
  bufs[dev].reserve(floats * sizeof(float));
  return static_cast<float*>(bufs[dev].get());
}

template <class Load>
void column_reduce(Load load, int64_t rows, int64_t cols, float* out, float beta) {
  const int64_t tiles = ceil_div<int64_t>(cols, kColTile);
  // About 1024 blocks in all (several per SM), slabs of at least 64 rows.
  int64_t slabs = std::min<int64_t>(std::max<int64_t>(1, ceil_div<int64_t>(rows, 64)),
                                    std::max<int64_t>(1, 1024 / tiles));
  slabs = std::min<int64_t>(slabs, 65535);
  const int64_t slab_rows = std::max<int64_t>(1, ceil_div<int64_t>(rows, slabs));
  slabs = std::max<int64_t>(1, ceil_div<int64_t>(rows, slab_rows));
  float* partial = scratch(size_t(slabs * cols));
  column_partial_kernel<<<dim3(unsigned(tiles), unsigned(slabs)), dim3(kColTile, kRowLanes)>>>(
      load, partial, rows, cols, slab_rows);
  SPGNN_CUDA_CHECK_LAUNCH();
  column_finish_kernel<<<blocks_for(cols), kThreads>>>(partial, slabs, cols, out, beta);
  SPGNN_CUDA_CHECK_LAUNCH();
}
}  // namespace

void cuda_column_sum(const float* x, float* out, int64_t rows, int64_t cols, float beta) {
  if (cols == 0) return;
  column_reduce(PlainLoad{x, cols}, rows, cols, out, beta);
}

void cuda_axpy(float* y, float alpha, const float* x, int64_t n) {
  if (n == 0) return;
  axpy_kernel<<<blocks_for(n), kThreads>>>(y, alpha, x, n);
  SPGNN_CUDA_CHECK_LAUNCH();
}

void cuda_copy_columns(const float* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows,
                       int64_t cols) {
  if (rows * cols == 0) return;
  copy_columns_kernel<<<blocks_for(rows * cols), kThreads>>>(src, src_ld, dst, dst_ld, rows, cols);
  SPGNN_CUDA_CHECK_LAUNCH();
}

void cuda_add_scaled(float* y, const float* x, const float* s, float offset, int64_t n) {
  if (n == 0) return;
  add_scaled_kernel<<<blocks_for(n), kThreads>>>(y, x, s, offset, n);
  SPGNN_CUDA_CHECK_LAUNCH();
}

void cuda_dot(const float* a, const float* b, int64_t n, float* out, float beta) {
  const int64_t blocks = std::min<int64_t>(blocks_for(n), 1024);
  double* partial = reinterpret_cast<double*>(scratch(size_t(2 * blocks)));
  dot_partial_kernel<<<unsigned(blocks), kThreads>>>(a, b, n, partial);
  SPGNN_CUDA_CHECK_LAUNCH();
  dot_finish_kernel<<<1, 1>>>(partial, blocks, out, beta);
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

void cuda_dropout(const float* x, float* y, int64_t n, uint32_t thr, float scale, uint64_t seed,
                  void* stream, const uint64_t* seed_ptr) {
  if (n == 0) return;
  dropout_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      x, y, n, thr, scale, seed, seed_ptr);
  SPGNN_CUDA_CHECK_LAUNCH();
}

void cuda_dropout_backward(float* grad, int64_t n, uint32_t thr, float scale, uint64_t seed) {
  if (n == 0) return;
  dropout_backward_kernel<<<blocks_for(n), kThreads>>>(grad, n, thr, scale, seed);
  SPGNN_CUDA_CHECK_LAUNCH();
}

void cuda_activation_dropout(float* x, int64_t n, int act, bool drop, uint32_t thr, float scale,
                             uint64_t seed) {
  if (n == 0) return;
  activation_dropout_kernel<<<blocks_for(n), kThreads>>>(x, n, act, drop, thr, scale, seed);
  SPGNN_CUDA_CHECK_LAUNCH();
}

void cuda_activation_dropout_backward(float* grad, const float* y, int64_t n, int act, bool drop,
                                      uint32_t thr, float scale, uint64_t seed) {
  if (n == 0) return;
  activation_dropout_backward_kernel<<<blocks_for(n), kThreads>>>(grad, y, n, act, drop, thr,
                                                                  scale, seed);
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
  column_reduce(HeadLoad{x, grad_out, heads, f, cols}, n, cols, grad_a, 0.f);
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

void* cuda_event_create() {
  cudaEvent_t e = nullptr;
  SPGNN_CUDA_CHECK(cudaEventCreate(&e));
  return static_cast<void*>(e);
}

void cuda_event_destroy(void* e) noexcept { cudaEventDestroy(static_cast<cudaEvent_t>(e)); }

void cuda_event_record(void* e) { SPGNN_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(e), 0)); }

float cuda_event_elapsed_ms(void* begin, void* end) {
  float ms = 0.f;
  SPGNN_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(begin), static_cast<cudaEvent_t>(end)));
  return ms;
}

}  // namespace spgnn::nn::detail
