// Internal: a checked op problem as handed to one strategy. The front door (src/dispatch/ops.cpp)
// validates shapes, dtypes and devices once; strategies trust these fields.
#pragma once
#include <cstdint>
#include <string>

#include "spgnn/ops.hpp"

namespace spgnn::detail {

struct SpmmProblem {
  const Graph* g = nullptr;
  SpmmOp op = SpmmOp::copy_u;
  Reduce reduce = Reduce::sum;
  const Tensor* u = nullptr;   // [n_cols, F] or undefined (copy_e)
  const Tensor* e = nullptr;   // [nnz, e_width] or undefined (copy_u)
  Tensor* out = nullptr;       // [n_rows, F], allocated on the graph's device
  Tensor* arg_u = nullptr;     // [n_rows, F] i64 or nullptr
  Tensor* arg_e = nullptr;     // [n_rows, F] i64 or nullptr
  int64_t F = 0;               // feature width of out
  int64_t e_width = 0;         // 1 (broadcast) or F; 0 when e is not used
  DType dtype = DType::f32;    // of u, e and out: float32, or float64 (host, cpu_ref only)
  void* stream = nullptr;
  bool uses_u() const { return op != SpmmOp::copy_e; }
  bool uses_e() const { return op != SpmmOp::copy_u; }
};

struct SddmmProblem {
  const Graph* g = nullptr;
  SddmmOp op = SddmmOp::dot;
  const Tensor* lhs = nullptr;  // rows by lhs_target, [*, F]
  const Tensor* rhs = nullptr;  // rows by rhs_target, [*, F]
  Target lhs_target = Target::u;
  Target rhs_target = Target::v;
  Tensor* out = nullptr;        // [nnz, 1] (dot) or [nnz, F]
  int64_t F = 0;                // width of the operands
  DType dtype = DType::f32;     // of lhs, rhs and out: float32, or float64 (host, cpu_ref only)
  void* stream = nullptr;
  bool uses_lhs() const { return op != SddmmOp::copy_rhs; }
  bool uses_rhs() const { return op != SddmmOp::copy_lhs; }
  int64_t out_width() const { return op == SddmmOp::dot ? 1 : F; }
};

// A CBSR product's shape, which is all its strategies' rules and the autotuner need:
// cbsr_spgemm (out [n_rows, F] = A * X, X = the CBSR rows [n_cols, k of F]) or cbsr_sspmm
// (d_data [n_cols, k] = A^T * d_out sampled at X's columns).
struct CbsrProblem {
  const Graph* g = nullptr;
  OpKind op = OpKind::cbsr_spgemm;
  int64_t k = 0;           // values kept per row
  int64_t F = 0;           // dense width
  bool weighted = false;   // edge values e given (else every edge is 1)
  DType dtype = DType::f32;  // of the values (the tuner measures float32)
};

// Checks that a graph handed to an op front door has its arrays, one index dtype (int32 or int64)
// shared by row/col/rowptr, matching sizes and one device; InvalidArgument names `op` otherwise.
void check_graph_arrays(const Graph& g, const char* op);

// Looks up a schedule parameter, or `fallback` when the schedule does not set it (callers pass
// the registry default, or a problem-sized choice where the strategy documents one).
int64_t param(const Schedule& s, const std::string& name, int64_t fallback);

}  // namespace spgnn::detail
