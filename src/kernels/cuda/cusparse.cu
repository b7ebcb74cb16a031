// cuSPARSE baseline strategies: cusparseSpMM (copy_u / u_mul_e with a broadcast edge value,
// reduce sum) and cusparseSDDMM (dot of a destination and a source feature row), both on the
// graph's own arrays (CSR = rowptr + col, COO = row + col; int32 or int64 indices) and row-major
// dense matrices, so no data is converted or copied. Features may be float16/bfloat16 (then the
// edge values are in the same dtype, as cuSPARSE requires), computed in float32
// (computeType CUDA_R_32F): the half-precision baseline.
//
// One cusparseHandle_t per device, created on first use and kept for the process (destroying it
// at exit would race the CUDA runtime's own teardown); with it a work buffer that only grows and
// a buffer of ones (the edge values of copy_u). A mutex guards handle, buffers and
// cusparseSetStream for the whole call; the calls themselves are asynchronous on the caller's
// stream. As with cuBLAS workspaces, two streams that use this strategy concurrently on one
// device share the work buffer; callers that overlap streams should use gnnone.
#include <cuda_runtime.h>
#include <cusparse.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.hpp"

namespace spgnn::detail {

[[noreturn]] inline void throw_cusparse(cusparseStatus_t st, const char* call, const char* file,
                                        int line) {
  throw DeviceError(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " +
                    cusparseGetErrorName(st) + " (" + cusparseGetErrorString(st) + ")");
}

}  // namespace spgnn::detail

#define SPGNN_CUSPARSE_CHECK(call)                                                   \
  do {                                                                               \
    cusparseStatus_t spgnn_st_ = (call);                                             \
    if (spgnn_st_ != CUSPARSE_STATUS_SUCCESS)                                        \
      ::spgnn::detail::throw_cusparse(spgnn_st_, #call, __FILE__, __LINE__);         \
  } while (0)

namespace spgnn::detail {

namespace {

// The `alg` parameter's values (registry.cpp documents them). All four accept row-major B and C.
cusparseSpMMAlg_t spmm_alg(int64_t alg) {
  switch (alg) {
    case 0: return CUSPARSE_SPMM_CSR_ALG2;  // CSR, best for row-major per the cuSPARSE docs
    case 1: return CUSPARSE_SPMM_CSR_ALG1;  // CSR
    case 2: return CUSPARSE_SPMM_COO_ALG4;  // COO, row-major variant
    default: return CUSPARSE_SPMM_CSR_ALG3;  // CSR, deterministic
  }
}
bool spmm_alg_is_coo(int64_t alg) { return alg == 2; }

struct DeviceState {
  cusparseHandle_t handle = nullptr;
  DeviceBuffer work;
  DeviceBuffer ones;
  int64_t ones_count = 0;
  DeviceBuffer ones16[2];  // float16, bfloat16 ones
  int64_t ones16_count[2] = {0, 0};
};

std::mutex& state_mutex() {
  static std::mutex m;
  return m;
}

// Caller holds state_mutex().
DeviceState& state_for(int device) {
  static std::map<int, DeviceState>* states = new std::map<int, DeviceState>();  // never freed
  DeviceState& s = (*states)[device];
  if (!s.handle) SPGNN_CUSPARSE_CHECK(cusparseCreate(&s.handle));
  return s;
}


__global__ void fill_ones(float* p, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    p[i] = 1.f;
}

// A device buffer of at least n ones. Growing it synchronises once (never on the steady path).
const float* ones(DeviceState& s, int64_t n, cudaStream_t st) {
  if (n > s.ones_count) {
    s.ones.reserve(static_cast<size_t>(n) * 4);
    const int64_t blocks = std::min<int64_t>((n + 255) / 256, 65535);
    fill_ones<<<static_cast<unsigned>(blocks), 256, 0, st>>>(static_cast<float*>(s.ones.get()), n);
    SPGNN_CUDA_CHECK_LAUNCH();
    SPGNN_CUDA_CHECK(cudaStreamSynchronize(st));
    s.ones_count = n;
  }
  return static_cast<const float*>(s.ones.get());
}

__global__ void fill_bits16(uint16_t* p, int64_t n, uint16_t bits) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    p[i] = bits;
}

// n ones in a half dtype (the edge values of copy_u in half precision).
const void* ones16(DeviceState& s, DType t, int64_t n, cudaStream_t st) {
  const int k = t == DType::f16 ? 0 : 1;
  if (n > s.ones16_count[k]) {
    s.ones16[k].reserve(static_cast<size_t>(n) * 2);
    const int64_t blocks = std::min<int64_t>((n + 255) / 256, 65535);
    fill_bits16<<<static_cast<unsigned>(blocks), 256, 0, st>>>(
        static_cast<uint16_t*>(s.ones16[k].get()), n, k == 0 ? 0x3c00 : 0x3f80);
    SPGNN_CUDA_CHECK_LAUNCH();
    SPGNN_CUDA_CHECK(cudaStreamSynchronize(st));
    s.ones16_count[k] = n;
  }
  return s.ones16[k].get();
}

cudaDataType_t cuda_type(DType t) {
  return t == DType::f16 ? CUDA_R_16F : t == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
}

cusparseIndexType_t index_type(const Graph& g) {
  return g.index_dtype() == DType::i64 ? CUSPARSE_INDEX_64I : CUSPARSE_INDEX_32I;
}

// RAII for descriptors so a throwing status check leaks nothing.
struct SpMat {
  cusparseSpMatDescr_t d = nullptr;
  ~SpMat() {
    if (d) cusparseDestroySpMat(d);
  }
};
struct ConstSpMat {
  cusparseConstSpMatDescr_t d = nullptr;
  ~ConstSpMat() {
    if (d) cusparseDestroySpMat(d);
  }
};
struct DnMat {
  cusparseDnMatDescr_t d = nullptr;
  ~DnMat() {
    if (d) cusparseDestroyDnMat(d);
  }
};
struct ConstDnMat {
  cusparseConstDnMatDescr_t d = nullptr;
  ~ConstDnMat() {
    if (d) cusparseDestroyDnMat(d);
  }
};

}  // namespace

// cuSPARSE refuses (CUSPARSE_STATUS_INVALID_VALUE) a matrix with more stored entries than
// rows x columns, which a graph with parallel edges can have (3 self loops on 1 vertex).
static std::string cusparse_shape_supports(const Graph& g) {
  if (g.nnz() > g.n_rows * g.n_cols)
    return "cuSPARSE refuses a matrix with more entries (" + std::to_string(g.nnz()) +
           ", parallel edges) than rows x columns (" + std::to_string(g.n_rows * g.n_cols) + ")";
  return "";
}

std::string cusparse_spmm_supports(const SpmmProblem& p) {
  if (!p.g->device().is_cuda())
    return "graph and tensors are on the CPU; cusparse runs on CUDA devices";
  if (p.dtype != DType::f32 && !is_half(p.dtype))
    return std::string("cusparseSpMM takes float32, float16 or bfloat16, not ") +
           dtype_name(p.dtype);
  if (std::string why = cusparse_shape_supports(*p.g); !why.empty()) return why;
  // (p.e is absent when `auto` is resolved before any tensor exists.)
  if (p.uses_e() && p.e && p.e->dtype() != p.dtype)
    return std::string("cusparseSpMM takes edge values in the features' dtype (") +
           dtype_name(p.dtype) + "), got " + dtype_name(p.e->dtype());
  if (p.reduce != Reduce::sum)
    return std::string("cusparseSpMM computes sums only, not '") + name(p.reduce) + "'";
  if (p.op != SpmmOp::copy_u && p.op != SpmmOp::u_mul_e)
    return std::string("cusparseSpMM multiplies by edge values: copy_u and u_mul_e only, not '") +
           name(p.op) + "'";
  if (p.op == SpmmOp::u_mul_e && p.e_width != 1)
    return "cusparseSpMM takes one value per edge: u_mul_e needs e of width 1, got width " +
           std::to_string(p.e_width);
  return "";
}

void cusparse_spmm(const SpmmProblem& p, const Schedule& s) {
  const int64_t alg = param(s, "alg", 0);
  const Graph& g = *p.g;
  DeviceGuard guard(g.device().index);
  const cudaStream_t st = as_stream(p.stream);
  const int64_t n = g.n_rows, m = g.n_cols, nnz = g.nnz(), F = p.F;
  void* out = p.out->raw();
  const cudaDataType_t dt = cuda_type(p.dtype);
  if (n == 0 || F == 0) return;
  if (nnz == 0) {  // cuSPARSE rejects some empty matrices; the answer is all zeros
    SPGNN_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<size_t>(n * F) * dtype_size(p.dtype), st));
    return;
  }
  std::lock_guard<std::mutex> lock(state_mutex());
  DeviceState& ds = state_for(g.device().index);
  SPGNN_CUSPARSE_CHECK(cusparseSetStream(ds.handle, st));
  const void* vals = p.op != SpmmOp::copy_u   ? p.e->raw()
                     : is_half(p.dtype)        ? ones16(ds, p.dtype, nnz, st)
                                               : static_cast<const void*>(ones(ds, nnz, st));
  const cusparseIndexType_t it = index_type(g);

  ConstSpMat A;
  if (spmm_alg_is_coo(alg))
    SPGNN_CUSPARSE_CHECK(cusparseCreateConstCoo(&A.d, n, m, nnz, g.row.raw(), g.col.raw(), vals,
                                                it, CUSPARSE_INDEX_BASE_ZERO, dt));
  else
    SPGNN_CUSPARSE_CHECK(cusparseCreateConstCsr(&A.d, n, m, nnz, g.rowptr.raw(), g.col.raw(),
                                                vals, it, it, CUSPARSE_INDEX_BASE_ZERO, dt));
  ConstDnMat B;
  SPGNN_CUSPARSE_CHECK(
      cusparseCreateConstDnMat(&B.d, m, F, F, p.u->raw(), dt, CUSPARSE_ORDER_ROW));
  DnMat C;
  SPGNN_CUSPARSE_CHECK(cusparseCreateDnMat(&C.d, n, F, F, out, dt, CUSPARSE_ORDER_ROW));
  const float alpha = 1.f, beta = 0.f;
  const cusparseSpMMAlg_t a = spmm_alg(alg);
  size_t bytes = 0;
  SPGNN_CUSPARSE_CHECK(cusparseSpMM_bufferSize(ds.handle, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                               CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, A.d, B.d,
                                               &beta, C.d, CUDA_R_32F, a, &bytes));
  ds.work.reserve(bytes);
  SPGNN_CUSPARSE_CHECK(cusparseSpMM(ds.handle, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                    CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, A.d, B.d, &beta,
                                    C.d, CUDA_R_32F, a, ds.work.get()));
}

std::string cusparse_sddmm_supports(const SddmmProblem& p) {
  if (!p.g->device().is_cuda())
    return "graph and tensors are on the CPU; cusparse runs on CUDA devices";
  if (p.dtype != DType::f32 && !is_half(p.dtype))
    return std::string("cusparseSDDMM takes float32, float16 or bfloat16, not ") +
           dtype_name(p.dtype);
  if (std::string why = cusparse_shape_supports(*p.g); !why.empty()) return why;
  if (p.op != SddmmOp::dot)
    return std::string("cusparseSDDMM computes dot products only, not '") + name(p.op) + "'";
  const bool vu = p.lhs_target == Target::v && p.rhs_target == Target::u;
  const bool uv = p.lhs_target == Target::u && p.rhs_target == Target::v;
  if (!vu && !uv)
    return std::string("cusparseSDDMM pairs a destination (v) with a source (u) row; targets ") +
           name(p.lhs_target) + "/" + name(p.rhs_target) + " are not supported";
  return "";
}

void cusparse_sddmm(const SddmmProblem& p, const Schedule&) {
  const Graph& g = *p.g;
  const int64_t n = g.n_rows, m = g.n_cols, nnz = g.nnz(), F = p.F;
  if (nnz == 0 || F == 0) return;
  DeviceGuard guard(g.device().index);
  const cudaStream_t st = as_stream(p.stream);
  // out[e] = x_v[row] . x_u[col]: A = the destination-side operand (n x F, row-major), B = the
  // source-side operand seen as F x m column-major (the same bytes as m x F row-major).
  const Tensor* dst = p.lhs_target == Target::v ? p.lhs : p.rhs;
  const Tensor* src = p.lhs_target == Target::v ? p.rhs : p.lhs;
  std::lock_guard<std::mutex> lock(state_mutex());
  DeviceState& ds = state_for(g.device().index);
  SPGNN_CUSPARSE_CHECK(cusparseSetStream(ds.handle, st));
  const cusparseIndexType_t it = index_type(g);
  const cudaDataType_t dt = cuda_type(p.dtype);
  ConstDnMat A, B;
  SPGNN_CUSPARSE_CHECK(
      cusparseCreateConstDnMat(&A.d, n, F, F, dst->raw(), dt, CUSPARSE_ORDER_ROW));
  SPGNN_CUSPARSE_CHECK(
      cusparseCreateConstDnMat(&B.d, F, m, F, src->raw(), dt, CUSPARSE_ORDER_COL));
  SpMat C;
  SPGNN_CUSPARSE_CHECK(cusparseCreateCsr(&C.d, n, m, nnz, const_cast<void*>(g.rowptr.raw()),
                                         const_cast<void*>(g.col.raw()), p.out->raw(), it, it,
                                         CUSPARSE_INDEX_BASE_ZERO, dt));
  const float alpha = 1.f, beta = 0.f;
  size_t bytes = 0;
  // Not every CUDA release has half-precision SDDMM: a refusal is reported as such, by name.
  const cusparseStatus_t sized = cusparseSDDMM_bufferSize(
      ds.handle, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, A.d,
      B.d, &beta, C.d, CUDA_R_32F, CUSPARSE_SDDMM_ALG_DEFAULT, &bytes);
  SPGNN_CHECK(!(is_half(p.dtype) && sized == CUSPARSE_STATUS_NOT_SUPPORTED), Unsupported,
              "cusparseSDDMM of this CUDA release does not take ", dtype_name(p.dtype));
  SPGNN_CUSPARSE_CHECK(sized);
  ds.work.reserve(bytes);
  SPGNN_CUSPARSE_CHECK(cusparseSDDMM(ds.handle, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                     CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, A.d, B.d, &beta,
                                     C.d, CUDA_R_32F, CUSPARSE_SDDMM_ALG_DEFAULT,
                                     ds.work.get()));
}

}  // namespace spgnn::detail
