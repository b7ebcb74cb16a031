// Internal: CPU strategies. cpu_ref accumulates in float64 and is the oracle of every test;
// cpu_mergepath (SpMM) and cpu_edge (SDDMM) are the fast OpenMP kernels.
#pragma once
#include <cstdint>
#include <type_traits>

#include "dispatch/problem.hpp"

namespace spgnn::detail {

// Below this many elements of work (a kernel's own measure) a CPU loop runs on the calling
// thread: the fork/join of a parallel region costs more than the work.
constexpr int64_t kMinParallelWork = int64_t{1} << 14;

// One SpMM message u[src] op e[edge], in T (float, or double where a kernel accumulates in
// float64). The op is a template parameter so that a kernel's feature loop carries no branch.
template <SpmmOp Op, class T>
inline T spmm_message(T x, T w) {
  if constexpr (Op == SpmmOp::copy_u) return x;
  else if constexpr (Op == SpmmOp::copy_e) return w;
  else if constexpr (Op == SpmmOp::u_mul_e) return x * w;
  else if constexpr (Op == SpmmOp::u_add_e) return x + w;
  else if constexpr (Op == SpmmOp::u_sub_e) return x - w;
  else return x / w;
}

// f(std::integral_constant<SpmmOp, op>{}): a runtime op to a kernel instantiated for it.
template <class Fn>
void with_spmm_op(SpmmOp op, Fn&& f) {
  switch (op) {
    case SpmmOp::copy_u: return f(std::integral_constant<SpmmOp, SpmmOp::copy_u>{});
    case SpmmOp::copy_e: return f(std::integral_constant<SpmmOp, SpmmOp::copy_e>{});
    case SpmmOp::u_mul_e: return f(std::integral_constant<SpmmOp, SpmmOp::u_mul_e>{});
    case SpmmOp::u_add_e: return f(std::integral_constant<SpmmOp, SpmmOp::u_add_e>{});
    case SpmmOp::u_sub_e: return f(std::integral_constant<SpmmOp, SpmmOp::u_sub_e>{});
    case SpmmOp::u_div_e: return f(std::integral_constant<SpmmOp, SpmmOp::u_div_e>{});
  }
}

void cpu_ref_spmm(const SpmmProblem& p, const Schedule& s);
void cpu_ref_sddmm(const SddmmProblem& p, const Schedule& s);

// Merge-path partition of (rowptr x non-zeros) into equal shares of rows+non-zeros, one share
// per thread chunk; rows cut by a boundary are combined without a serial fix-up.
void cpu_mergepath_spmm(const SpmmProblem& p, const Schedule& s);
// Edge-parallel SDDMM, rows reused while unchanged.
void cpu_edge_sddmm(const SddmmProblem& p, const Schedule& s);

}  // namespace spgnn::detail
