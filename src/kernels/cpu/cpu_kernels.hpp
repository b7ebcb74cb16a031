// Internal: CPU strategies. cpu_ref accumulates in float64 and is the oracle of every test;
// cpu_mergepath (SpMM) and cpu_edge (SDDMM) are the fast OpenMP kernels.
#pragma once
#include "dispatch/problem.hpp"

namespace spgnn::detail {

void cpu_ref_spmm(const SpmmProblem& p, const Schedule& s);
void cpu_ref_sddmm(const SddmmProblem& p, const Schedule& s);

// Merge-path partition of (rowptr x non-zeros) into equal shares of rows+non-zeros, one share
// per thread chunk; rows cut by a boundary are combined without a serial fix-up.
void cpu_mergepath_spmm(const SpmmProblem& p, const Schedule& s);
// Edge-parallel SDDMM, rows reused while unchanged.
void cpu_edge_sddmm(const SddmmProblem& p, const Schedule& s);

}  // namespace spgnn::detail
