// Internal: the strategy registry. Every strategy of every op is listed in registry.cpp with its
// parameter space, a `supports` predicate and its entry point; `auto` and the CLI read it.
#pragma once
#include <string>
#include <vector>

#include "dispatch/problem.hpp"
#include "spgnn/schedule.hpp"

namespace spgnn::detail {

// Returns "" when the strategy can run the problem, else the reason it cannot.
using SpmmSupports = std::string (*)(const SpmmProblem&);
using SddmmSupports = std::string (*)(const SddmmProblem&);
using SpmmRun = void (*)(const SpmmProblem&, const Schedule&);
using SddmmRun = void (*)(const SddmmProblem&, const Schedule&);

struct SpmmEntry {
  StrategyInfo info;
  SpmmSupports supports;
  SpmmRun run;
};
struct SddmmEntry {
  StrategyInfo info;
  SddmmSupports supports;
  SddmmRun run;
};

const std::vector<SpmmEntry>& spmm_registry();
const std::vector<SddmmEntry>& sddmm_registry();
const SpmmEntry& spmm_entry(const std::string& name);
const SddmmEntry& sddmm_entry(const std::string& name);

// The `auto` heuristic (documented in docs/ARCHITECTURE.md): picks a supported strategy and
// parameters from graph statistics, F and the device.
Schedule auto_spmm_schedule(const SpmmProblem& p);
Schedule auto_sddmm_schedule(const SddmmProblem& p);

}  // namespace spgnn::detail
