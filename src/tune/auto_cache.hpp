// Internal: `auto`'s use of the tuning cache (called by registry.cpp's auto_*_schedule). Returns
// a cached schedule that still validates and is supported for the problem; with tune-on-miss on,
// a miss is tuned once per key and process (on the tuner's own tensors), stored and returned.
// Empty: use the heuristic. Costs nothing when no cache file exists and tune-on-miss is off.
#pragma once
#include <optional>

#include "dispatch/problem.hpp"

namespace spgnn::tune {

std::optional<Schedule> cached_spmm_schedule(const detail::SpmmProblem& p);
std::optional<Schedule> cached_sddmm_schedule(const detail::SddmmProblem& p);
std::optional<Schedule> cached_cbsr_schedule(const detail::CbsrProblem& p);

}  // namespace spgnn::tune
