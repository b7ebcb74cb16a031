// The sparse ops, DGL-style. Inputs are checked (shapes, dtypes, devices) and a mismatch is an
// InvalidArgument naming the argument. The schedule in OpOptions picks the strategy; `auto`
// chooses one for the graph, op, width and device.
#pragma once
#include <string>

#include "spgnn/graph.hpp"
#include "spgnn/schedule.hpp"
#include "spgnn/tensor.hpp"

namespace spgnn {

enum class SpmmOp : uint8_t { copy_u, copy_e, u_mul_e, u_add_e, u_sub_e, u_div_e };
enum class Reduce : uint8_t { sum, mean, max, min };
enum class SddmmOp : uint8_t { dot, add, sub, mul, div, copy_lhs, copy_rhs };
enum class Target : uint8_t { u, v, e };  // u = source (col), v = destination (row), e = edge

const char* name(SpmmOp op);
const char* name(Reduce r);
const char* name(SddmmOp op);
const char* name(Target t);
SpmmOp parse_spmm_op(const std::string& s);
Reduce parse_reduce(const std::string& s);
SddmmOp parse_sddmm_op(const std::string& s);
Target parse_target(const std::string& s);

struct OpOptions {
  Schedule schedule;       // strategy "auto" by default
  void* stream = nullptr;  // cudaStream_t for CUDA strategies; nullptr = default stream
};

// g-SpMM: out[v, f] = reduce over edges e = (v, w) of op(u[w, f], e[e, f or 0]).
//   u:   [n_cols, F] f32 (undefined for copy_e)
//   e:   [nnz] or [nnz, 1] (broadcast over F) or [nnz, F] f32 (undefined for copy_u; then the
//        graph's own values are used if the op needs e and the graph has them)
//   out: [n_rows, F] f32, allocated if undefined, on the graph's device
//   arg_u, arg_e (max/min only; pass undefined to skip): [n_rows, F] i64, the source vertex and
//        edge that produced each output; -1 for rows without edges (whose output is 0).
// mean divides by the row's edge count; rows with no edges get 0 for every reduce.
void gspmm(const Graph& g, SpmmOp op, Reduce reduce, const Tensor& u, const Tensor& e,
           Tensor& out, const OpOptions& options = {});
void gspmm(const Graph& g, SpmmOp op, Reduce reduce, const Tensor& u, const Tensor& e,
           Tensor& out, Tensor& arg_u, Tensor& arg_e, const OpOptions& options = {});

// g-SDDMM: out[e, f] = op(lhs[target(e), f], rhs[target(e), f]) for each edge e = (v, u).
//   lhs/rhs rows are indexed by the edge's source (Target::u, [n_cols, F]), destination
//   (Target::v, [n_rows, F]) or the edge itself (Target::e, [nnz, F]).
//   out: [nnz, 1] for dot (the sum over f), else [nnz, F]; allocated if undefined.
//   copy_lhs ignores rhs and copy_rhs ignores lhs (either may be undefined then).
void gsddmm(const Graph& g, SddmmOp op, const Tensor& lhs, const Tensor& rhs, Tensor& out,
            Target lhs_target = Target::u, Target rhs_target = Target::v,
            const OpOptions& options = {});

// Floating-point work and minimum bytes moved, as reported by benchmarks.
double spmm_flops(const Graph& g, SpmmOp op, int64_t F);
double sddmm_flops(const Graph& g, SddmmOp op, int64_t F);
double spmm_bytes(const Graph& g, SpmmOp op, int64_t F, bool edge_feature_wide = false);
double sddmm_bytes(const Graph& g, SddmmOp op, int64_t F, Target lhs, Target rhs);

// The schedule `auto` resolves to for this problem (for reports and `spgnn bench`).
Schedule resolve_spmm_schedule(const Graph& g, SpmmOp op, Reduce reduce, int64_t F,
                               const Schedule& requested);
Schedule resolve_sddmm_schedule(const Graph& g, SddmmOp op, int64_t F, const Schedule& requested);

}  // namespace spgnn
