// Internal: host entry points of the CUDA strategies. Plain C++ (no CUDA types) so that the
// registry, compiled by the host compiler, can list them.
#pragma once
#include <string>

#include "dispatch/problem.hpp"

namespace spgnn::detail {

// GNNOne two-stage COO kernels (gnnone_spmm.cu, gnnone_sddmm.cu).
std::string gnnone_spmm_supports(const SpmmProblem& p);
void gnnone_spmm(const SpmmProblem& p, const Schedule& s);
std::string gnnone_sddmm_supports(const SddmmProblem& p);
void gnnone_sddmm(const SddmmProblem& p, const Schedule& s);

// cuSPARSE baseline (cusparse.cu).
std::string cusparse_spmm_supports(const SpmmProblem& p);
void cusparse_spmm(const SpmmProblem& p, const Schedule& s);
std::string cusparse_sddmm_supports(const SddmmProblem& p);
void cusparse_sddmm(const SddmmProblem& p, const Schedule& s);

// Synchronises the device and rethrows any pending error (for tests and benchmarks).
void cuda_synchronize();

}  // namespace spgnn::detail
