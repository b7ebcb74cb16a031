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

// Row-parallel SpMM strategies and the warp-shuffle SDDMM (docs/STRATEGIES.md):
// mergepath_spmm.cu, warp_vertex.cu, rowtile_spmm.cu, shuffle_sddmm.cu.
std::string mergepath_spmm_supports(const SpmmProblem& p);
void mergepath_spmm(const SpmmProblem& p, const Schedule& s);
std::string warp_vertex_spmm_supports(const SpmmProblem& p);
void warp_vertex_spmm(const SpmmProblem& p, const Schedule& s);
std::string rowtile_spmm_supports(const SpmmProblem& p);
void rowtile_spmm(const SpmmProblem& p, const Schedule& s);
std::string shuffle_sddmm_supports(const SddmmProblem& p);
void shuffle_sddmm(const SddmmProblem& p, const Schedule& s);

// Synchronises the device and rethrows any pending error (for tests and benchmarks).
void cuda_synchronize();

}  // namespace spgnn::detail
