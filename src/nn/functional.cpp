// Dense and sparse building blocks of the training engine: argument checks, the host
// implementations (float32 and float64) and the dispatch to the CUDA kernels of nn_kernels.cu.
#include "spgnn/nn/functional.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>
#include <type_traits>
#include <vector>
#include <random>
#include <string>

#include "core/device.hpp"
#include "dispatch/registry.hpp"
#include "nn/nn_cuda.hpp"
#include "nn/nn_hash.hpp"
#include "nn/profile.hpp"

#include <omp.h>

#if SPGNN_HAVE_CBLAS
#include <cblas.h>
// OpenBLAS's own; declared here because a reference cblas.h found first does not declare it.
extern "C" void openblas_set_num_threads(int num_threads);
#endif

namespace spgnn::nn {

namespace {

void check_defined(const Tensor& t, const char* fn, const char* arg) {
  SPGNN_CHECK(t.defined(), InvalidArgument, fn, ": argument '", arg, "' is undefined");
  SPGNN_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64, InvalidArgument, fn,
              ": argument '", arg, "' must be float32 or float64, got ", dtype_name(t.dtype()));
  SPGNN_CHECK(!(t.device().is_cuda() && t.dtype() == DType::f64), InvalidArgument, fn,
              ": argument '", arg, "' is float64 on ", t.device().str(),
              "; float64 is supported on the host only");
}

void check_same(const Tensor& a, const Tensor& b, const char* fn, const char* arg_a,
                const char* arg_b) {
  SPGNN_CHECK(a.dtype() == b.dtype(), InvalidArgument, fn, ": '", arg_a, "' is ",
              dtype_name(a.dtype()), " but '", arg_b, "' is ", dtype_name(b.dtype()));
  SPGNN_CHECK(a.device() == b.device(), InvalidArgument, fn, ": '", arg_a, "' is on ",
              a.device().str(), " but '", arg_b, "' is on ", b.device().str());
}

void check_2d(const Tensor& t, const char* fn, const char* arg) {
  SPGNN_CHECK(t.ndim() == 2, InvalidArgument, fn, ": '", arg, "' must be 2-D, got shape ",
              t.shape_str());
}

bool on_gpu(const Tensor& t) { return t.device().is_cuda(); }

template <class T>
void gemm_host(const T* a, bool ta, const T* b, bool tb, T* c, int64_t m, int64_t n, int64_t k,
               T beta) {
#if SPGNN_HAVE_CBLAS
  // OpenBLAS's pthreads and the OpenMP team of the sparse ops both spin while waiting; on a busy
  // machine they starve each other (measured: 8 ms -> 376 ms per epoch on the built-in dataset).
  // Small GEMMs therefore run on one thread; only large ones use OpenBLAS's threads.
  const bool big = double(m) * double(n) * double(k) >= double(int64_t{1} << 27);
  static thread_local int threads_set = 0;
  const int want = big ? omp_get_max_threads() : 1;
  if (threads_set != want) {
    openblas_set_num_threads(want);
    threads_set = want;
  }
  const int lda = static_cast<int>(ta ? m : k), ldb = static_cast<int>(tb ? k : n);
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                int(m), int(n), int(k), 1.f, a, lda, b, ldb, beta, c, int(n));
  else
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                int(m), int(n), int(k), 1.0, a, lda, b, ldb, beta, c, int(n));
#else
  // Fallback when no CBLAS was found at configure time: i-k-j order keeps the inner loop
  // contiguous in b and c; correct but several times slower than OpenBLAS.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m; ++i) {
    T* ci = c + i * n;
    for (int64_t j = 0; j < n; ++j) ci[j] = beta == T(0) ? T(0) : beta * ci[j];
    for (int64_t p = 0; p < k; ++p) {
      const T av = ta ? a[p * m + i] : a[i * k + p];
      if (av == T(0)) continue;
      if (!tb) {
        const T* bp = b + p * n;
        for (int64_t j = 0; j < n; ++j) ci[j] += av * bp[j];
      } else {
        for (int64_t j = 0; j < n; ++j) ci[j] += av * b[j * k + p];
      }
    }
  }
#endif
}

// Fraction of zeros in a sample of rows of a [rows, cols]: bag-of-words inputs (Cora, CiteSeer:
// ~99% zeros, and more after dropout) make the first layer's GEMM mostly multiplications by zero.
template <class T>
double zero_fraction(const T* a, int64_t rows, int64_t cols) {
  const int64_t step = std::max<int64_t>(1, rows / 64);
  int64_t zeros = 0, seen = 0;
  for (int64_t i = 0; i < rows; i += step, seen += cols)
    for (int64_t j = 0; j < cols; ++j) zeros += a[i * cols + j] == T(0);
  return seen ? double(zeros) / double(seen) : 0.0;
}

template <class T, class F>
void for_each(int64_t n, F f) {
#pragma omp parallel for schedule(static) if (n > (1 << 18))
  for (int64_t i = 0; i < n; ++i) f(i);
}

// Rows of a [rows, cols] matrix; threads when the matrix (not the row count) is large.
template <class F>
void for_rows(int64_t rows, int64_t cols, F f) {
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 18))
  for (int64_t i = 0; i < rows; ++i) f(i);
}

// c = op(a) b + beta c skipping the zeros of a (a row-major, b not transposed): the row-sparse
// product that a dense BLAS cannot do.
template <class T>
void gemm_sparse_a(const T* a, bool ta, const T* b, T* c, int64_t m, int64_t n, int64_t k, T beta) {
  auto init_row = [&](int64_t i) {
    for (int64_t j = 0; j < n; ++j) c[i * n + j] = beta == T(0) ? T(0) : beta * c[i * n + j];
  };
  if (!ta) {
#pragma omp parallel for schedule(dynamic, 64)
    for (int64_t i = 0; i < m; ++i) {
      init_row(i);
      for (int64_t p = 0; p < k; ++p) {
        const T av = a[i * k + p];
        if (av == T(0)) continue;
        for (int64_t j = 0; j < n; ++j) c[i * n + j] += av * b[p * n + j];
      }
    }
    return;
  }
  // op(a) = a^T with a [k, m] (the first layer's weight gradient, x^T dh): slabs of rows of a
  // scatter into their own [m, n] partial sums in parallel, added in slab order afterwards. The
  // slab count depends on k only, so the result does not depend on the thread count.
  // At most 16 slabs of >= 1024 rows, and at most 2^24 values of partial sums beside c.
  const int64_t slabs =
      std::clamp<int64_t>(std::min(k / 1024, 1 + (int64_t{1} << 24) / std::max<int64_t>(1, m * n)),
                          1, 16);
  std::vector<T> part(static_cast<size_t>(slabs > 1 ? (slabs - 1) * m * n : 0), T(0));
  for (int64_t i = 0; i < m; ++i) init_row(i);
#pragma omp parallel for schedule(static, 1) if (slabs > 1)
  for (int64_t sl = 0; sl < slabs; ++sl) {
    T* acc = sl == 0 ? c : part.data() + (sl - 1) * m * n;  // slab 0 adds into c itself
    for (int64_t p = sl * k / slabs; p < (sl + 1) * k / slabs; ++p) {
      const T* ap = a + p * m;
      const T* bp = b + p * n;
      for (int64_t i = 0; i < m; ++i) {
        const T av = ap[i];
        if (av == T(0)) continue;
        for (int64_t j = 0; j < n; ++j) acc[i * n + j] += av * bp[j];
      }
    }
  }
  for (int64_t sl = 1; sl < slabs; ++sl) {
    const T* pp = part.data() + (sl - 1) * m * n;
    for_rows(m, n, [&](int64_t i) {
      for (int64_t j = 0; j < n; ++j) c[i * n + j] += pp[i * n + j];
    });
  }
}

template <class T>
T* ptr(Tensor& t) { return t.data<T>(); }
template <class T>
const T* ptr(const Tensor& t) { return t.data<T>(); }

// Runs fn<float> or fn<double> by the tensor's dtype.
template <class Fn>
void by_dtype(const Tensor& t, Fn&& fn) {
  if (t.dtype() == DType::f64) fn(double{});
  else fn(float{});
}

}  // namespace

namespace {
std::atomic<bool> g_allow_tf32{false};
}  // namespace

void set_allow_tf32(bool allow) { g_allow_tf32 = allow; }
bool allow_tf32() { return g_allow_tf32; }

namespace detail {
void convert_into(const Tensor& src, Tensor& dst, void* stream) {
  if (src.device().is_cuda()) {
    spgnn::detail::cuda_convert(src.raw(), src.dtype(), dst.raw(), dst.dtype(), src.numel(),
                                src.device().index, stream);
    return;
  }
  const int64_t n = src.numel();
  if (src.dtype() == DType::f32 && dst.dtype() == DType::f16) {
    const float* s = src.data<float>();
    Half* d = dst.data<Half>();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) d[i] = float_to_half(s[i]);
  } else if (src.dtype() == DType::f16) {
    const Half* s = src.data<Half>();
    float* d = dst.data<float>();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) d[i] = half_to_float(s[i]);
  } else if (src.dtype() == DType::f32) {
    const float* s = src.data<float>();
    BFloat16* d = dst.data<BFloat16>();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(s[i]);
  } else {
    const BFloat16* s = src.data<BFloat16>();
    float* d = dst.data<float>();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) d[i] = bf16_to_float(s[i]);
  }
}
}  // namespace detail

namespace {
std::atomic<DType> g_aggregation_dtype{DType::f32};
using detail::convert_into;

// Reused bfloat16 buffers of the aggregations (one per role, device and shape): allocating and
// freeing device memory every call would cost more than the conversions.
Tensor& half_buffer(int role, const std::vector<int64_t>& shape, DType dtype, Device dev) {
  thread_local std::map<std::tuple<int, int, std::vector<int64_t>>, Tensor> buffers;
  Tensor& t = buffers[{role, dev.is_cuda() ? dev.index : -1, shape}];
  if (!t.defined() || t.dtype() != dtype || t.device() != dev)
    t = Tensor::empty(shape, dtype, dev);
  return t;
}
}  // namespace

void set_aggregation_dtype(DType dtype) {
  SPGNN_CHECK(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16, InvalidArgument,
              "nn::set_aggregation_dtype: float32, bfloat16 or float16, got ", dtype_name(dtype));
  g_aggregation_dtype = dtype;
}
DType aggregation_dtype() { return g_aggregation_dtype; }

void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, double beta) {
  constexpr const char* kFn = "nn::gemm";
  detail::ProfileScope prof(Phase::dense_gemm);
  check_defined(a, kFn, "a");
  check_defined(b, kFn, "b");
  check_2d(a, kFn, "a");
  check_2d(b, kFn, "b");
  check_same(a, b, kFn, "a", "b");
  const int64_t m = trans_a ? a.dim(1) : a.dim(0), k = trans_a ? a.dim(0) : a.dim(1);
  const int64_t kb = trans_b ? b.dim(1) : b.dim(0), n = trans_b ? b.dim(0) : b.dim(1);
  SPGNN_CHECK(k == kb, InvalidArgument, kFn, ": inner dimensions differ: op(a) is [", m, ", ", k,
              "] and op(b) is [", kb, ", ", n, "]");
  SPGNN_CHECK(k < (int64_t{1} << 31) && m < (int64_t{1} << 31) && n < (int64_t{1} << 31),
              InvalidArgument, kFn, ": dimensions must stay below 2^31");
  if (!c.defined()) {
    SPGNN_CHECK(beta == 0, InvalidArgument, kFn, ": 'c' is undefined but beta = ", beta);
    c = Tensor::empty({m, n}, a.dtype(), a.device());
  }
  check_same(a, c, kFn, "a", "c");
  SPGNN_CHECK(c.ndim() == 2 && c.dim(0) == m && c.dim(1) == n, InvalidArgument, kFn,
              ": 'c' has shape ", c.shape_str(), ", expected [", m, ", ", n, "]");
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (beta == 0) c.fill_(0);
    else if (beta != 1) axpy_(c, beta - 1, c);
    return;
  }
  if (on_gpu(a)) {
    detail::cuda_gemm(ptr<float>(a), trans_a, ptr<float>(b), trans_b, ptr<float>(c), m, n, k,
                      static_cast<float>(beta), g_allow_tf32);
    return;
  }
  by_dtype(a, [&](auto z) {
    using T = decltype(z);
    if (!trans_b && a.numel() >= (int64_t{1} << 16) &&
        zero_fraction(ptr<T>(a), a.dim(0), a.dim(1)) > 0.9)
      gemm_sparse_a<T>(ptr<T>(a), trans_a, ptr<T>(b), ptr<T>(c), m, n, k, T(beta));
    else
      gemm_host<T>(ptr<T>(a), trans_a, ptr<T>(b), trans_b, ptr<T>(c), m, n, k, T(beta));
  });
}

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  Tensor c;
  gemm(a, trans_a, b, trans_b, c, 0);
  return c;
}

void add_bias_(Tensor& x, const Tensor& bias) {
  constexpr const char* kFn = "nn::add_bias_";
  detail::ProfileScope prof(Phase::elementwise);
  check_defined(x, kFn, "x");
  check_defined(bias, kFn, "bias");
  check_2d(x, kFn, "x");
  check_same(x, bias, kFn, "x", "bias");
  SPGNN_CHECK(bias.numel() == x.dim(1), InvalidArgument, kFn, ": 'bias' has ", bias.numel(),
              " values, expected the width of x = ", x.dim(1));
  const int64_t rows = x.dim(0), cols = x.dim(1);
  if (on_gpu(x)) return detail::cuda_add_bias(ptr<float>(x), ptr<float>(bias), rows, cols);
  by_dtype(x, [&](auto z) {
    using T = decltype(z);
    T* p = ptr<T>(x);
    const T* b = ptr<T>(bias);
    for_rows(rows, cols, [&](int64_t i) {
      for (int64_t j = 0; j < cols; ++j) p[i * cols + j] += b[j];
    });
  });
}

void column_sum(const Tensor& x, Tensor& out, double beta) {
  constexpr const char* kFn = "nn::column_sum";
  detail::ProfileScope prof(Phase::elementwise);
  check_defined(x, kFn, "x");
  check_2d(x, kFn, "x");
  const int64_t rows = x.dim(0), cols = x.dim(1);
  if (!out.defined()) {
    out = Tensor::empty({cols}, x.dtype(), x.device());
    beta = 0;
  }
  check_same(x, out, kFn, "x", "out");
  SPGNN_CHECK(out.numel() == cols, InvalidArgument, kFn, ": 'out' has ", out.numel(),
              " values, expected ", cols);
  if (on_gpu(x))
    return detail::cuda_column_sum(ptr<float>(x), ptr<float>(out), rows, cols, float(beta));
  by_dtype(x, [&](auto z) {
    using T = decltype(z);
    const T* p = ptr<T>(x);
    T* o = ptr<T>(out);
    // Slabs of a fixed number of rows, summed in parallel and then in slab order: the result
    // does not depend on the thread count.
    constexpr int64_t kSlab = 2048;
    const int64_t slabs = (rows + kSlab - 1) / kSlab;
    std::vector<double> part(static_cast<size_t>(slabs * cols), 0.0);
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 18))
    for (int64_t sl = 0; sl < slabs; ++sl) {
      double* acc = part.data() + sl * cols;
      for (int64_t i = sl * kSlab; i < std::min(rows, (sl + 1) * kSlab); ++i)
        for (int64_t j = 0; j < cols; ++j) acc[j] += p[i * cols + j];
    }
    for (int64_t j = 0; j < cols; ++j) {
      double sum = 0;
      for (int64_t sl = 0; sl < slabs; ++sl) sum += part[size_t(sl * cols + j)];
      o[j] = T(sum + (beta == 0 ? 0.0 : beta * double(o[j])));
    }
  });
}

void axpy_(Tensor& y, double alpha, const Tensor& x) {
  constexpr const char* kFn = "nn::axpy_";
  detail::ProfileScope prof(Phase::elementwise);
  check_defined(y, kFn, "y");
  check_defined(x, kFn, "x");
  check_same(y, x, kFn, "y", "x");
  SPGNN_CHECK(y.numel() == x.numel(), InvalidArgument, kFn, ": 'x' has shape ", x.shape_str(),
              " but 'y' has shape ", y.shape_str());
  const int64_t n = y.numel();
  if (on_gpu(y)) return detail::cuda_axpy(ptr<float>(y), float(alpha), ptr<float>(x), n);
  by_dtype(y, [&](auto z) {
    using T = decltype(z);
    T* py = ptr<T>(y);
    const T* px = ptr<T>(x);
    for_each<T>(n, [&](int64_t i) { py[i] += T(alpha) * px[i]; });
  });
}

namespace {
void check_scalar(const Tensor& s, const Tensor& like, const char* fn, const char* arg) {
  check_defined(s, fn, arg);
  check_same(like, s, fn, "x", arg);
  SPGNN_CHECK(s.numel() == 1, InvalidArgument, fn, ": '", arg, "' must hold one value, got shape ",
              s.shape_str());
}
}  // namespace

void copy_columns(const Tensor& src, Tensor& dst, int64_t cols) {
  constexpr const char* kFn = "nn::copy_columns";
  check_defined(src, kFn, "src");
  check_defined(dst, kFn, "dst");
  check_2d(src, kFn, "src");
  check_2d(dst, kFn, "dst");
  check_same(src, dst, kFn, "src", "dst");
  SPGNN_CHECK(src.dim(0) == dst.dim(0) && cols >= 0 && cols <= src.dim(1) && cols <= dst.dim(1),
              InvalidArgument, kFn, ": cannot copy ", cols, " columns from ", src.shape_str(),
              " to ", dst.shape_str());
  detail::ProfileScope prof(Phase::elementwise);
  const int64_t rows = src.dim(0), ls = src.dim(1), ld = dst.dim(1);
  if (on_gpu(src))
    return detail::cuda_copy_columns(ptr<float>(src), ls, ptr<float>(dst), ld, rows, cols);
  by_dtype(src, [&](auto z) {
    using T = decltype(z);
    const T* ps = ptr<T>(src);
    T* pd = ptr<T>(dst);
    for_rows(rows, cols, [&](int64_t i) { std::copy(ps + i * ls, ps + i * ls + cols, pd + i * ld); });
  });
}

void add_scaled_(Tensor& y, const Tensor& x, const Tensor& s, double offset) {
  constexpr const char* kFn = "nn::add_scaled_";
  check_defined(y, kFn, "y");
  check_defined(x, kFn, "x");
  check_same(y, x, kFn, "y", "x");
  check_scalar(s, x, kFn, "s");
  SPGNN_CHECK(y.numel() == x.numel(), InvalidArgument, kFn, ": 'x' has shape ", x.shape_str(),
              " but 'y' has shape ", y.shape_str());
  detail::ProfileScope prof(Phase::elementwise);
  const int64_t n = y.numel();
  if (on_gpu(y))
    return detail::cuda_add_scaled(ptr<float>(y), ptr<float>(x), ptr<float>(s), float(offset), n);
  by_dtype(y, [&](auto z) {
    using T = decltype(z);
    const T a = T(offset + double(ptr<T>(s)[0]));
    T* py = ptr<T>(y);
    const T* px = ptr<T>(x);
    for_each<T>(n, [&](int64_t i) { py[i] += a * px[i]; });
  });
}

void dot(const Tensor& a, const Tensor& b, Tensor& out, double beta) {
  constexpr const char* kFn = "nn::dot";
  check_defined(a, kFn, "a");
  check_defined(b, kFn, "b");
  check_same(a, b, kFn, "a", "b");
  SPGNN_CHECK(a.numel() == b.numel(), InvalidArgument, kFn, ": 'a' has shape ", a.shape_str(),
              " but 'b' has shape ", b.shape_str());
  if (!out.defined()) {
    SPGNN_CHECK(beta == 0, InvalidArgument, kFn, ": 'out' is undefined but beta = ", beta);
    out = Tensor::empty({1}, a.dtype(), a.device());
  }
  check_scalar(out, a, kFn, "out");
  detail::ProfileScope prof(Phase::elementwise);
  const int64_t n = a.numel();
  if (on_gpu(a)) return detail::cuda_dot(ptr<float>(a), ptr<float>(b), n, ptr<float>(out), float(beta));
  by_dtype(a, [&](auto z) {
    using T = decltype(z);
    const T* pa = ptr<T>(a);
    const T* pb = ptr<T>(b);
    double acc = 0;
#pragma omp parallel for reduction(+ : acc) schedule(static) if (n > (1 << 18))
    for (int64_t i = 0; i < n; ++i) acc += double(pa[i]) * double(pb[i]);
    T& o = ptr<T>(out)[0];
    o = T(acc + (beta == 0 ? 0.0 : beta * double(o)));
  });
}

void activation_(Tensor& x, Activation act) {
  check_defined(x, "nn::activation_", "x");
  detail::ProfileScope prof(Phase::elementwise);
  if (act == Activation::none) return;
  const int64_t n = x.numel();
  if (on_gpu(x)) return detail::cuda_activation(ptr<float>(x), n, int(act));
  by_dtype(x, [&](auto z) {
    using T = decltype(z);
    T* p = ptr<T>(x);
    if (act == Activation::relu) for_each<T>(n, [&](int64_t i) { p[i] = p[i] > T(0) ? p[i] : T(0); });
    else for_each<T>(n, [&](int64_t i) { p[i] = p[i] > T(0) ? p[i] : std::expm1(p[i]); });
  });
}

void activation_backward_(Tensor& grad, const Tensor& y, Activation act) {
  constexpr const char* kFn = "nn::activation_backward_";
  check_defined(grad, kFn, "grad");
  check_defined(y, kFn, "y");
  check_same(grad, y, kFn, "grad", "y");
  SPGNN_CHECK(grad.numel() == y.numel(), InvalidArgument, kFn, ": 'grad' has shape ",
              grad.shape_str(), " but 'y' has shape ", y.shape_str());
  if (act == Activation::none) return;
  detail::ProfileScope prof(Phase::elementwise);
  const int64_t n = y.numel();
  if (on_gpu(y)) return detail::cuda_activation_backward(ptr<float>(grad), ptr<float>(y), n, int(act));
  by_dtype(y, [&](auto z) {
    using T = decltype(z);
    T* g = ptr<T>(grad);
    const T* p = ptr<T>(y);
    // elu: y = e^x - 1 for x <= 0, so dy/dx = e^x = y + 1.
    if (act == Activation::relu) for_each<T>(n, [&](int64_t i) { if (!(p[i] > T(0))) g[i] = T(0); });
    else for_each<T>(n, [&](int64_t i) { if (!(p[i] > T(0))) g[i] *= p[i] + T(1); });
  });
}

namespace {
uint32_t dropout_threshold(double p) {
  return static_cast<uint32_t>(std::llround(p * double(1u << 24)));
}
// v where keep, else exactly +0 (also for a NaN or inf), without a branch: the mask is a coin
// flip per element, and a branch on it mispredicts about half the time. Branchy, the dropout
// loop took 6 ns an element on one core (Cora's 2708 x 1433 input: 24 ms); branch-free, 1.3 ns.
template <class T>
T keep_or_zero(T v, bool keep) {
  using U = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
  static_assert(sizeof(T) == sizeof(U));
  U bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits &= U(0) - U(keep);
  std::memcpy(&v, &bits, sizeof bits);
  return v;
}
// Element i of an inverted dropout.
template <class T>
T drop_value(T v, uint64_t seed, int64_t i, uint32_t thr, double scale) {
  return keep_or_zero(T(v * scale), detail::dropout_keep(seed, uint64_t(i), thr));
}
// y[i] = drop_value(x[i]) for n elements (y may be x), in chunks of 64. A chunk with at most 1/8
// non-zeros (bag-of-words inputs: Cora 1.3%, CiteSeer 0.9% non-zero) hashes only its non-zeros,
// on branches that its zeros make predictable; the others hash every element branch-free.
// One core, 12.3M floats (CiteSeer's input size): dense 17.6 ms, ReLU rows 17.5, 0.9% non-zero
// 9.3; branching on the mask with zeros skipped (the loop before): 74.6, 88.7 and 8.1;
// branch-free on every element: 16.5 whatever the input.
template <class T>
void drop_elements(const T* x, T* y, int64_t n, uint64_t seed, uint32_t thr, double scale) {
  constexpr int64_t kChunk = 64;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > (1 << 18))
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = c * kChunk, e = std::min(n, b + kChunk);
    int64_t nonzero = 0;
    for (int64_t i = b; i < e; ++i) nonzero += x[i] != T(0);
    if (nonzero * 8 <= e - b) {
      for (int64_t i = b; i < e; ++i) {
        const T v = x[i];
        y[i] = v == T(0) ? v : drop_value(v, seed, i, thr, scale);
      }
    } else {
      for (int64_t i = b; i < e; ++i) y[i] = drop_value(x[i], seed, i, thr, scale);
    }
  }
}
void check_p(double p, const char* fn) {
  SPGNN_CHECK(p >= 0 && p < 1, InvalidArgument, fn, ": dropout probability 'p' must be in [0, 1), got ", p);
}
}  // namespace

Tensor dropout(const Tensor& x, double p, uint64_t seed) {
  check_defined(x, "nn::dropout", "x");
  check_p(p, "nn::dropout");
  if (p == 0) return x;
  Tensor y;
  dropout(x, p, seed, y);
  return y;
}

void dropout(const Tensor& x, double p, uint64_t seed, Tensor& out, void* stream,
             const uint64_t* device_seed) {
  check_defined(x, "nn::dropout", "x");
  check_p(p, "nn::dropout");
  SPGNN_CHECK(!device_seed || on_gpu(x), InvalidArgument,
              "nn::dropout: device_seed is a device address, for x on a CUDA device; x is on ",
              x.device().str(), " (pass seed)");
  if (!out.defined() || out.shape() != x.shape() || out.dtype() != x.dtype() ||
      out.device() != x.device())
    out = Tensor::empty(x.shape(), x.dtype(), x.device());
  SPGNN_CHECK(out.raw() != x.raw() || x.numel() == 0, InvalidArgument,
              "nn::dropout: 'out' must not be 'x' (use activation_dropout_ to drop in place)");
  detail::ProfileScope prof(Phase::elementwise);
  const uint32_t thr = dropout_threshold(p);
  const double scale = 1.0 / (1.0 - p);
  const int64_t n = x.numel();
  if (on_gpu(x)) {
    detail::cuda_dropout(ptr<float>(x), ptr<float>(out), n, thr, float(scale), seed, stream,
                         device_seed);
    return;
  }
  by_dtype(x, [&](auto z) {
    using T = decltype(z);
    const T* px = ptr<T>(x);
    T* py = ptr<T>(out);
    drop_elements(px, py, n, seed, thr, scale);
  });
}

void dropout_backward_(Tensor& grad, double p, uint64_t seed) {
  check_defined(grad, "nn::dropout_backward_", "grad");
  check_p(p, "nn::dropout_backward_");
  if (p == 0) return;
  detail::ProfileScope prof(Phase::elementwise);
  const uint32_t thr = dropout_threshold(p);
  const double scale = 1.0 / (1.0 - p);
  const int64_t n = grad.numel();
  if (on_gpu(grad)) return detail::cuda_dropout_backward(ptr<float>(grad), n, thr, float(scale), seed);
  by_dtype(grad, [&](auto z) {
    using T = decltype(z);
    T* g = ptr<T>(grad);
    drop_elements(g, g, n, seed, thr, scale);
  });
}

void activation_dropout_(Tensor& x, Activation act, double p, uint64_t seed) {
  check_defined(x, "nn::activation_dropout_", "x");
  check_p(p, "nn::activation_dropout_");
  if (act == Activation::none && p == 0) return;
  detail::ProfileScope prof(Phase::elementwise);
  const bool drop = p > 0;
  const uint32_t thr = dropout_threshold(p);
  const double scale = 1.0 / (1.0 - p);
  const int64_t n = x.numel();
  if (on_gpu(x))
    return detail::cuda_activation_dropout(ptr<float>(x), n, int(act), drop, thr, float(scale), seed);
  by_dtype(x, [&](auto z) {
    using T = decltype(z);
    T* px = ptr<T>(x);
    for_each<T>(n, [&](int64_t i) {
      T v = px[i];
      if (act == Activation::relu) v = v > T(0) ? v : T(0);
      else if (act == Activation::elu) v = v > T(0) ? v : std::expm1(v);
      px[i] = drop ? drop_value(v, seed, i, thr, scale) : v;
    });
  });
}

void activation_dropout_backward_(Tensor& grad, const Tensor& y, Activation act, double p,
                                  uint64_t seed) {
  constexpr const char* kFn = "nn::activation_dropout_backward_";
  check_defined(grad, kFn, "grad");
  check_defined(y, kFn, "y");
  check_same(grad, y, kFn, "grad", "y");
  check_p(p, kFn);
  SPGNN_CHECK(grad.numel() == y.numel(), InvalidArgument, kFn, ": 'grad' has shape ",
              grad.shape_str(), " but 'y' has shape ", y.shape_str());
  if (act == Activation::none && p == 0) return;
  detail::ProfileScope prof(Phase::elementwise);
  const bool drop = p > 0;
  const uint32_t thr = dropout_threshold(p);
  const double scale = 1.0 / (1.0 - p);
  const int64_t n = y.numel();
  if (on_gpu(y))
    return detail::cuda_activation_dropout_backward(ptr<float>(grad), ptr<float>(y), n, int(act),
                                                    drop, thr, float(scale), seed);
  by_dtype(y, [&](auto z) {
    using T = decltype(z);
    T* g = ptr<T>(grad);
    const T* py = ptr<T>(y);
    for_each<T>(n, [&](int64_t i) {
      const T v = py[i];
      // ReLU: y > 0 exactly where the element was kept and positive, so no mask is recomputed.
      if (act == Activation::relu) {
        g[i] = v > T(0) ? T(g[i] * scale) : T(0);
        return;
      }
      T d = T(g[i] * scale);
      // ELU: d act / dx = e^x = act(x) + 1 with act(x) = y / scale where kept.
      if (act == Activation::elu && !(v > T(0))) d *= T(v / scale + 1);
      g[i] = drop ? keep_or_zero(d, detail::dropout_keep(seed, uint64_t(i), thr)) : d;
    });
  });
}

namespace {
void check_labels(const Tensor& logits, const Tensor& y, const Tensor& idx, const char* fn) {
  check_defined(logits, fn, "logits");
  check_2d(logits, fn, "logits");
  SPGNN_CHECK(y.defined() && y.dtype() == DType::i64 && y.ndim() == 1 &&
                  y.dim(0) == logits.dim(0),
              InvalidArgument, fn, ": labels 'y' must be int64 [", logits.dim(0), "], got ",
              y.defined() ? dtype_name(y.dtype()) + std::string(" ") + y.shape_str() : "undefined");
  SPGNN_CHECK(idx.defined() && idx.dtype() == DType::i64 && idx.ndim() == 1, InvalidArgument, fn,
              ": 'idx' must be a 1-D int64 tensor of row ids");
  SPGNN_CHECK(y.device() == logits.device() && idx.device() == logits.device(), InvalidArgument,
              fn, ": 'y' and 'idx' must be on the logits' device ", logits.device().str());
}
}  // namespace

double log_softmax_nll(const Tensor& logits, const Tensor& y, const Tensor& idx, Tensor* grad) {
  constexpr const char* kFn = "nn::log_softmax_nll";
  detail::ProfileScope prof(Phase::loss);
  check_labels(logits, y, idx, kFn);
  const int64_t n = logits.dim(0), c = logits.dim(1), m = idx.numel();
  if (grad) {
    if (!grad->defined()) *grad = Tensor::empty(logits.shape(), logits.dtype(), logits.device());
    check_same(logits, *grad, kFn, "logits", "grad");
    SPGNN_CHECK(grad->shape() == logits.shape(), InvalidArgument, kFn, ": 'grad' has shape ",
                grad->shape_str(), ", expected ", logits.shape_str());
    grad->fill_(0);
  }
  if (on_gpu(logits)) {
    double loss = 0;
    int64_t counted = 0;
    detail::cuda_log_softmax_nll(ptr<float>(logits), c, ptr<int64_t>(y), ptr<int64_t>(idx), m,
                                 grad ? ptr<float>(*grad) : nullptr, &loss, &counted);
    return counted ? loss / double(counted) : 0.0;
  }
  const int64_t* py = y.data<int64_t>();
  const int64_t* pi = idx.data<int64_t>();
  int64_t counted = 0;
  for (int64_t k = 0; k < m; ++k) {
    SPGNN_CHECK(pi[k] >= 0 && pi[k] < n, InvalidArgument, kFn, ": idx[", k, "] = ", pi[k],
                " is outside [0, ", n, ")");
    SPGNN_CHECK(py[pi[k]] < c, InvalidArgument, kFn, ": label y[", pi[k], "] = ", py[pi[k]],
                " is not below the number of classes ", c);
    if (py[pi[k]] >= 0) ++counted;
  }
  double loss = 0;
  by_dtype(logits, [&](auto z) {
    using T = decltype(z);
    const T* pl = ptr<T>(logits);
    T* pg = grad ? ptr<T>(*grad) : nullptr;
    for (int64_t k = 0; k < m; ++k) {
      const int64_t i = pi[k], label = py[i];
      if (label < 0) continue;
      const T* row = pl + i * c;
      double mx = row[0];
      for (int64_t j = 1; j < c; ++j) mx = std::max(mx, double(row[j]));
      double s = 0;
      for (int64_t j = 0; j < c; ++j) s += std::exp(double(row[j]) - mx);
      const double lse = mx + std::log(s);
      loss -= double(row[label]) - lse;
      if (pg) {
        for (int64_t j = 0; j < c; ++j)
          pg[i * c + j] += T((std::exp(double(row[j]) - lse) - (j == label ? 1.0 : 0.0)) / double(counted));
      }
    }
  });
  return counted ? loss / double(counted) : 0.0;
}

double accuracy(const Tensor& logits, const Tensor& y, const Tensor& idx) {
  constexpr const char* kFn = "nn::accuracy";
  check_labels(logits, y, idx, kFn);
  const int64_t n = logits.dim(0), c = logits.dim(1), m = idx.numel();
  int64_t correct = 0, counted = 0;
  if (on_gpu(logits)) {
    detail::cuda_accuracy(ptr<float>(logits), c, ptr<int64_t>(y), ptr<int64_t>(idx), m, &correct,
                          &counted);
  } else {
    const int64_t* py = y.data<int64_t>();
    const int64_t* pi = idx.data<int64_t>();
    by_dtype(logits, [&](auto z) {
      using T = decltype(z);
      const T* pl = ptr<T>(logits);
      for (int64_t k = 0; k < m; ++k) {
        const int64_t i = pi[k];
        SPGNN_CHECK(i >= 0 && i < n, InvalidArgument, kFn, ": idx[", k, "] = ", i,
                    " is outside [0, ", n, ")");
        if (py[i] < 0) continue;
        ++counted;
        const T* row = pl + i * c;
        correct += (std::max_element(row, row + c) - row) == py[i];
      }
    });
  }
  return counted ? double(correct) / double(counted) : 0.0;
}

void adam_step(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, int64_t step,
               const AdamParams& a) {
  constexpr const char* kFn = "nn::adam_step";
  detail::ProfileScope prof(Phase::optimizer);
  check_defined(param, kFn, "param");
  check_defined(grad, kFn, "grad");
  check_same(param, grad, kFn, "param", "grad");
  SPGNN_CHECK(step >= 1, InvalidArgument, kFn, ": 'step' counts from 1, got ", step);
  SPGNN_CHECK(a.lr > 0 && a.weight_decay >= 0 && a.beta1 >= 0 && a.beta1 < 1 && a.beta2 >= 0 &&
                  a.beta2 < 1,
              InvalidArgument, kFn, ": Adam needs lr > 0, weight_decay >= 0, betas in [0, 1)");
  const int64_t n = param.numel();
  SPGNN_CHECK(grad.numel() == n, InvalidArgument, kFn, ": 'grad' has shape ", grad.shape_str(),
              ", expected ", param.shape_str());
  if (!m.defined()) m = Tensor::zeros(param.shape(), param.dtype(), param.device());
  if (!v.defined()) v = Tensor::zeros(param.shape(), param.dtype(), param.device());
  const double c1 = 1 - std::pow(a.beta1, double(step)), c2 = 1 - std::pow(a.beta2, double(step));
  if (on_gpu(param)) {
    return detail::cuda_adam(ptr<float>(param), ptr<float>(grad), ptr<float>(m), ptr<float>(v), n,
                             float(a.lr), float(a.beta1), float(a.beta2), float(a.eps),
                             float(a.weight_decay), float(c1), float(c2));
  }
  by_dtype(param, [&](auto z) {
    using T = decltype(z);
    T* p = ptr<T>(param);
    const T* g = ptr<T>(grad);
    T* pm = ptr<T>(m);
    T* pv = ptr<T>(v);
    for_each<T>(n, [&](int64_t i) {
      const double gi = double(g[i]) + a.weight_decay * double(p[i]);
      const double mi = a.beta1 * double(pm[i]) + (1 - a.beta1) * gi;
      const double vi = a.beta2 * double(pv[i]) + (1 - a.beta2) * gi * gi;
      pm[i] = T(mi);
      pv[i] = T(vi);
      p[i] = T(double(p[i]) - a.lr * (mi / c1) / (std::sqrt(vi / c2) + a.eps));
    });
  });
}

Tensor glorot(std::vector<int64_t> shape, int64_t fan_in, int64_t fan_out, uint64_t seed,
              DType dtype, Device device) {
  SPGNN_CHECK(fan_in > 0 && fan_out > 0, InvalidArgument, "nn::glorot: fan_in and fan_out must be "
              "positive, got ", fan_in, " and ", fan_out);
  Tensor t = Tensor::empty(std::move(shape), DType::f64);
  std::mt19937_64 rng(seed);
  const double s = std::sqrt(6.0 / double(fan_in + fan_out));
  std::uniform_real_distribution<double> d(-s, s);
  double* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = d(rng);
  if (dtype != DType::f64) t = t.astype(dtype);
  return device.is_cuda() ? t.to(device) : t;
}

Tensor head_dot(const Tensor& x, const Tensor& a, int64_t heads) {
  constexpr const char* kFn = "nn::head_dot";
  detail::ProfileScope prof(Phase::elementwise);
  check_defined(x, kFn, "x");
  check_defined(a, kFn, "a");
  check_2d(x, kFn, "x");
  check_same(x, a, kFn, "x", "a");
  SPGNN_CHECK(heads > 0 && x.dim(1) % heads == 0 && a.numel() == x.dim(1), InvalidArgument, kFn,
              ": 'x' [n, H*F] and 'a' [H*F] must agree with heads = ", heads, " (x ",
              x.shape_str(), ", a ", a.shape_str(), ")");
  const int64_t n = x.dim(0), f = x.dim(1) / heads;
  Tensor out = Tensor::empty({n, heads}, x.dtype(), x.device());
  if (on_gpu(x)) {
    detail::cuda_head_dot(ptr<float>(x), ptr<float>(a), ptr<float>(out), n, heads, f);
    return out;
  }
  by_dtype(x, [&](auto z) {
    using T = decltype(z);
    const T* px = ptr<T>(x);
    const T* pa = ptr<T>(a);
    T* po = ptr<T>(out);
    for_each<T>(n, [&](int64_t i) {
      for (int64_t h = 0; h < heads; ++h) {
        double s = 0;
        for (int64_t j = 0; j < f; ++j) s += double(px[i * heads * f + h * f + j]) * pa[h * f + j];
        po[i * heads + h] = T(s);
      }
    });
  });
  return out;
}

void head_dot_backward(const Tensor& x, const Tensor& a, int64_t heads, const Tensor& grad_out,
                       Tensor& grad_x, Tensor& grad_a) {
  constexpr const char* kFn = "nn::head_dot_backward";
  detail::ProfileScope prof(Phase::elementwise);
  check_defined(grad_out, kFn, "grad_out");
  check_defined(grad_x, kFn, "grad_x");
  check_same(x, grad_out, kFn, "x", "grad_out");
  check_same(x, grad_x, kFn, "x", "grad_x");
  SPGNN_CHECK(grad_x.shape() == x.shape() && grad_out.ndim() == 2 && grad_out.dim(0) == x.dim(0) &&
                  grad_out.dim(1) == heads,
              InvalidArgument, kFn, ": shapes disagree (x ", x.shape_str(), ", grad_x ",
              grad_x.shape_str(), ", grad_out ", grad_out.shape_str(), ")");
  const int64_t n = x.dim(0), f = x.dim(1) / heads;
  // (a kept buffer of another width, e.g. a GAT layer's padded heads after a dtype change, is
  // replaced rather than written past its end)
  if (!grad_a.defined() || grad_a.shape() != a.shape() || grad_a.dtype() != a.dtype() ||
      grad_a.device() != a.device())
    grad_a = Tensor::empty(a.shape(), a.dtype(), a.device());
  if (on_gpu(x)) {
    return detail::cuda_head_dot_backward(ptr<float>(x), ptr<float>(a), ptr<float>(grad_out),
                                          ptr<float>(grad_x), ptr<float>(grad_a), n, heads, f);
  }
  by_dtype(x, [&](auto z) {
    using T = decltype(z);
    const T* px = ptr<T>(x);
    const T* pa = ptr<T>(a);
    const T* pg = ptr<T>(grad_out);
    T* pgx = ptr<T>(grad_x);
    T* pga = ptr<T>(grad_a);
    std::vector<double> acc(size_t(heads * f), 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t h = 0; h < heads; ++h) {
        const double g = pg[i * heads + h];
        for (int64_t j = 0; j < f; ++j) {
          const int64_t col = h * f + j;
          pgx[i * heads * f + col] += T(g * pa[col]);
          acc[size_t(col)] += g * px[i * heads * f + col];
        }
      }
    for (int64_t col = 0; col < heads * f; ++col) pga[col] = T(acc[size_t(col)]);
  });
}

namespace {
template <class I>
void aggregate_f64(const Graph& g, const double* w, bool mean, const double* x, double* out,
                   int64_t f) {
  const I* rp = g.rowptr.data<I>();
  const I* col = g.col.data<I>();
#pragma omp parallel for schedule(dynamic, 64)
  for (int64_t v = 0; v < g.n_rows; ++v) {
    double* o = out + v * f;
    std::fill(o, o + f, 0.0);
    for (I e = rp[v]; e < rp[v + 1]; ++e) {
      const double we = w ? w[e] : 1.0;
      const double* xu = x + int64_t(col[e]) * f;
      for (int64_t j = 0; j < f; ++j) o[j] += we * xu[j];
    }
    const int64_t deg = int64_t(rp[v + 1] - rp[v]);
    if (mean && deg > 0)
      for (int64_t j = 0; j < f; ++j) o[j] /= double(deg);
  }
}
}  // namespace

Tensor aggregate(const Graph& g, const Tensor& w, Reduce reduce, const Tensor& x,
                 const OpOptions& options) {
  Tensor out;
  aggregate(g, w, reduce, x, out, options);
  return out;
}

void aggregate(const Graph& g, const Tensor& w, Reduce reduce, const Tensor& x, Tensor& out,
               const OpOptions& options) {
  constexpr const char* kFn = "nn::aggregate";
  check_defined(x, kFn, "x");
  check_2d(x, kFn, "x");
  SPGNN_CHECK(reduce == Reduce::sum || reduce == Reduce::mean, InvalidArgument, kFn,
              ": 'reduce' must be sum or mean, got ", name(reduce));
  detail::ProfileScope prof(Phase::aggregate_forward);
  const std::vector<int64_t> shape{g.n_rows, x.dim(1)};
  if (out.defined() && (out.shape() != shape || out.dtype() != x.dtype() || out.device() != x.device()))
    out = Tensor();
  // Half traffic where the GPU's half kernel wins (detail::half_spmm_pays: wide rows of regular
  // graphs); elsewhere float32, faster there and exact. The host keeps the conversion so that
  // CPU runs show the precision a GPU run has where it does convert.
  if (x.dtype() == DType::f32 && aggregation_dtype() != DType::f32 &&
      (!g.device().is_cuda() || spgnn::detail::half_spmm_pays(g, x.dim(1)))) {
    // bfloat16 traffic, float32 accumulation; the graph's float32 weights stay as they are.
    const DType h = aggregation_dtype();
    Tensor& xh = half_buffer(0, x.shape(), h, x.device());
    Tensor& oh = half_buffer(1, shape, h, x.device());
    convert_into(x, xh, options.stream);
    if (w.defined()) gspmm(g, SpmmOp::u_mul_e, reduce, xh, w, oh, options);
    else gspmm(g, SpmmOp::copy_u, reduce, xh, Tensor(), oh, options);
    if (!out.defined()) out = Tensor::empty(shape, DType::f32, x.device());
    convert_into(oh, out, options.stream);
    return;
  }
  if (x.dtype() == DType::f32) {
    if (w.defined()) gspmm(g, SpmmOp::u_mul_e, reduce, x, w, out, options);
    else gspmm(g, SpmmOp::copy_u, reduce, x, Tensor(), out, options);
    return;
  }
  SPGNN_CHECK(!g.device().is_cuda() && !x.device().is_cuda(), InvalidArgument, kFn,
              ": float64 aggregation runs on the host only");
  SPGNN_CHECK(x.dim(0) == g.n_cols, InvalidArgument, kFn, ": 'x' has ", x.dim(0),
              " rows, expected n_cols = ", g.n_cols);
  Tensor wd;
  if (w.defined()) {
    SPGNN_CHECK(w.numel() == g.nnz(), InvalidArgument, kFn, ": 'w' has ", w.numel(),
                " values, expected nnz = ", g.nnz());
    wd = w.dtype() == DType::f64 ? w : w.astype(DType::f64);
  }
  if (!out.defined()) out = Tensor::empty(shape, DType::f64);
  const double* pw = wd.defined() ? wd.data<double>() : nullptr;
  if (g.index_dtype() == DType::i64)
    aggregate_f64<int64_t>(g, pw, reduce == Reduce::mean, x.data<double>(), out.data<double>(), x.dim(1));
  else
    aggregate_f64<int32_t>(g, pw, reduce == Reduce::mean, x.data<double>(), out.data<double>(), x.dim(1));
}

Tensor maxk_mask_f64(const Tensor& x, int64_t k) {
  constexpr const char* kFn = "nn::maxk_mask_f64";
  SPGNN_CHECK(x.defined() && x.dtype() == DType::f64 && x.ndim() == 2 && !x.device().is_cuda(),
              InvalidArgument, kFn, ": 'x' must be a host float64 [n, F] tensor");
  const int64_t n = x.dim(0), f = x.dim(1);
  SPGNN_CHECK(k >= 1 && k <= f, InvalidArgument, kFn, ": 'k' must be in [1, F = ", f, "], got ", k);
  Tensor m = Tensor::zeros({n, f}, DType::f64);
  const double* px = x.data<double>();
  double* pm = m.data<double>();
  std::vector<int64_t> order(static_cast<size_t>(f));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < f; ++j) order[size_t(j)] = j;
    const double* row = px + i * f;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return row[a] > row[b]; });
    for (int64_t j = 0; j < k; ++j) pm[i * f + order[size_t(j)]] = 1.0;
  }
  return m;
}

void mul_(Tensor& x, const Tensor& mask) {
  constexpr const char* kFn = "nn::mul_";
  check_defined(x, kFn, "x");
  check_defined(mask, kFn, "mask");
  check_same(x, mask, kFn, "x", "mask");
  SPGNN_CHECK(!x.device().is_cuda(), InvalidArgument, kFn, ": host tensors only");
  SPGNN_CHECK(x.numel() == mask.numel(), InvalidArgument, kFn, ": 'mask' has shape ",
              mask.shape_str(), " but 'x' has shape ", x.shape_str());
  detail::ProfileScope prof(Phase::elementwise);
  by_dtype(x, [&](auto z) {
    using T = decltype(z);
    T* px = ptr<T>(x);
    const T* pm = ptr<T>(mask);
    for_each<T>(x.numel(), [&](int64_t i) { px[i] *= pm[i]; });
  });
}

namespace {
template <class I>
void gat_f64(const Graph& g, const double* feat, const double* el, const double* er, int64_t heads,
             int64_t f, double slope, double* out, double* attn) {
  const I* rp = g.rowptr.data<I>();
  const I* col = g.col.data<I>();
  for (int64_t v = 0; v < g.n_rows; ++v)
    for (int64_t h = 0; h < heads; ++h) {
      double* o = out + v * heads * f + h * f;
      std::fill(o, o + f, 0.0);
      if (rp[v] == rp[v + 1]) continue;
      double mx = -INFINITY;
      for (I e = rp[v]; e < rp[v + 1]; ++e) {
        double s = el[int64_t(col[e]) * heads + h] + er[v * heads + h];
        s = s > 0 ? s : slope * s;
        attn[int64_t(e) * heads + h] = s;
        mx = std::max(mx, s);
      }
      double sum = 0;
      for (I e = rp[v]; e < rp[v + 1]; ++e) {
        double& a = attn[int64_t(e) * heads + h];
        a = std::exp(a - mx);
        sum += a;
      }
      for (I e = rp[v]; e < rp[v + 1]; ++e) {
        double& a = attn[int64_t(e) * heads + h];
        a /= sum;
        const double* fu = feat + int64_t(col[e]) * heads * f + h * f;
        for (int64_t j = 0; j < f; ++j) o[j] += a * fu[j];
      }
    }
}

template <class I>
void gat_backward_f64(const Graph& g, const double* feat, const double* el, const double* er,
                      const double* attn, const double* gout, int64_t heads, int64_t f,
                      double slope, double* gfeat, double* gel, double* ger) {
  const I* rp = g.rowptr.data<I>();
  const I* col = g.col.data<I>();
  for (int64_t v = 0; v < g.n_rows; ++v)
    for (int64_t h = 0; h < heads; ++h) {
      const double* go = gout + v * heads * f + h * f;
      // d a_e = <grad_out[v], feat[u]>; softmax backward needs sum_e a_e * d a_e.
      double dot_sum = 0;
      std::vector<double> ga;
      for (I e = rp[v]; e < rp[v + 1]; ++e) {
        const int64_t u = col[e];
        const double a = attn[int64_t(e) * heads + h];
        const double* fu = feat + u * heads * f + h * f;
        double* gfu = gfeat + u * heads * f + h * f;
        double d = 0;
        for (int64_t j = 0; j < f; ++j) {
          d += go[j] * fu[j];
          gfu[j] += a * go[j];
        }
        ga.push_back(d);
        dot_sum += a * d;
      }
      size_t k = 0;
      for (I e = rp[v]; e < rp[v + 1]; ++e, ++k) {
        const int64_t u = col[e];
        const double a = attn[int64_t(e) * heads + h];
        const double z = el[u * heads + h] + er[v * heads + h];
        const double gs = a * (ga[k] - dot_sum) * (z > 0 ? 1.0 : slope);
        gel[u * heads + h] += gs;
        ger[v * heads + h] += gs;
      }
    }
}

void check_gat_f64(const Graph& g, const Tensor& feat, const Tensor& el, const Tensor& er,
                   int64_t heads, const char* fn) {
  SPGNN_CHECK(!g.device().is_cuda(), InvalidArgument, fn, ": host graphs only");
  SPGNN_CHECK(feat.defined() && feat.dtype() == DType::f64 && feat.ndim() == 2 &&
                  feat.dim(0) == g.n_cols && heads > 0 && feat.dim(1) % heads == 0,
              InvalidArgument, fn, ": 'feat' must be float64 [n_cols, H*F]");
  SPGNN_CHECK(el.defined() && el.dtype() == DType::f64 && el.numel() == g.n_cols * heads,
              InvalidArgument, fn, ": 'el' must be float64 [n_cols, H]");
  SPGNN_CHECK(er.defined() && er.dtype() == DType::f64 && er.numel() == g.n_rows * heads,
              InvalidArgument, fn, ": 'er' must be float64 [n_rows, H]");
}
}  // namespace

void gat_aggregate_f64(const Graph& g, const Tensor& feat, const Tensor& el, const Tensor& er,
                       int64_t heads, double slope, Tensor& out, Tensor& attn) {
  check_gat_f64(g, feat, el, er, heads, "nn::gat_aggregate_f64");
  const int64_t f = feat.dim(1) / heads;
  out = Tensor::empty({g.n_rows, heads * f}, DType::f64);
  attn = Tensor::empty({g.nnz(), heads}, DType::f64);
  auto run = [&](auto z) {
    gat_f64<decltype(z)>(g, feat.data<double>(), el.data<double>(), er.data<double>(), heads, f,
                         slope, out.data<double>(), attn.data<double>());
  };
  if (g.index_dtype() == DType::i64) run(int64_t{});
  else run(int32_t{});
}

void gat_aggregate_backward_f64(const Graph& g, const Tensor& feat, const Tensor& el,
                                const Tensor& er, const Tensor& attn, const Tensor& grad_out,
                                int64_t heads, double slope, Tensor& grad_feat, Tensor& grad_el,
                                Tensor& grad_er) {
  check_gat_f64(g, feat, el, er, heads, "nn::gat_aggregate_backward_f64");
  const int64_t f = feat.dim(1) / heads;
  grad_feat = Tensor::zeros(feat.shape(), DType::f64);
  grad_el = Tensor::zeros(el.shape(), DType::f64);
  grad_er = Tensor::zeros(er.shape(), DType::f64);
  auto run = [&](auto z) {
    gat_backward_f64<decltype(z)>(g, feat.data<double>(), el.data<double>(), er.data<double>(),
                                  attn.data<double>(), grad_out.data<double>(), heads, f, slope,
                                  grad_feat.data<double>(), grad_el.data<double>(),
                                  grad_er.data<double>());
  };
  if (g.index_dtype() == DType::i64) run(int64_t{});
  else run(int32_t{});
}

size_t device_memory_used(Device device) {
  return device.is_cuda() ? detail::cuda_memory_used(device.index) : 0;
}

void synchronize(Device device) {
  if (device.is_cuda()) detail::cuda_sync();
}

#if !SPGNN_WITH_CUDA
namespace detail {
[[noreturn]] static void no_cuda() {
  throw Unsupported("this spgnn was built without CUDA: the training engine runs on the CPU only");
}
void cuda_gemm(const float*, bool, const float*, bool, float*, int64_t, int64_t, int64_t, float, bool) { no_cuda(); }
void cuda_add_bias(float*, const float*, int64_t, int64_t) { no_cuda(); }
void cuda_column_sum(const float*, float*, int64_t, int64_t, float) { no_cuda(); }
void cuda_axpy(float*, float, const float*, int64_t) { no_cuda(); }
void cuda_copy_columns(const float*, int64_t, float*, int64_t, int64_t, int64_t) { no_cuda(); }
void cuda_add_scaled(float*, const float*, const float*, float, int64_t) { no_cuda(); }
void cuda_dot(const float*, const float*, int64_t, float*, float) { no_cuda(); }
void cuda_activation(float*, int64_t, int) { no_cuda(); }
void cuda_activation_backward(float*, const float*, int64_t, int) { no_cuda(); }
void cuda_dropout(const float*, float*, int64_t, uint32_t, float, uint64_t, void*,
                  const uint64_t*) {
  no_cuda();
}
void cuda_dropout_backward(float*, int64_t, uint32_t, float, uint64_t) { no_cuda(); }
void cuda_activation_dropout(float*, int64_t, int, bool, uint32_t, float, uint64_t) { no_cuda(); }
void cuda_activation_dropout_backward(float*, const float*, int64_t, int, bool, uint32_t, float,
                                      uint64_t) { no_cuda(); }
void cuda_log_softmax_nll(const float*, int64_t, const int64_t*, const int64_t*, int64_t, float*,
                          double*, int64_t*) { no_cuda(); }
void cuda_accuracy(const float*, int64_t, const int64_t*, const int64_t*, int64_t, int64_t*,
                   int64_t*) { no_cuda(); }
void cuda_adam(float*, const float*, float*, float*, int64_t, float, float, float, float, float,
               float, float) { no_cuda(); }
void cuda_head_dot(const float*, const float*, float*, int64_t, int64_t, int64_t) { no_cuda(); }
void cuda_head_dot_backward(const float*, const float*, const float*, float*, float*, int64_t,
                            int64_t, int64_t) { no_cuda(); }
size_t cuda_memory_used(int) { return 0; }
void cuda_sync() {}
void* cuda_event_create() { no_cuda(); }
void cuda_event_destroy(void*) noexcept {}
void cuda_event_record(void*) { no_cuda(); }
float cuda_event_elapsed_ms(void*, void*) { no_cuda(); }
}  // namespace detail
#endif

}  // namespace spgnn::nn
