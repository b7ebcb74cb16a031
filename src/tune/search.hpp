// Internal: the search core of the autotuner, independent of what is being timed. It takes the
// measurement as a function (tests inject synthetic landscapes; the tuner times real runs) and an
// optional score per point (the cost model's prediction; lower = more promising).
#pragma once
#include <cstddef>
#include <functional>
#include <vector>

#include "spgnn/tune.hpp"
#include "tune/space.hpp"

namespace spgnn::tune {

// Median milliseconds of one schedule; throws when the schedule cannot run (the candidate is
// then recorded with its error and fitness 0, and the search goes on).
using MeasureFn = std::function<double(const Schedule&)>;
// Predicted cost of a valid point (any monotone scale; lower is better).
using ScoreFn = std::function<double(size_t index)>;

struct SearchOptions {
  TuneMode mode = TuneMode::genetic;
  double budget_s = 0;        // 0 = none
  size_t max_measurements = 0;  // 0 = none (tests use it as a deterministic budget)
  uint64_t seed = 1;
  int top_k = 16;             // pruned-space size = genetic population
  int elite = 6;
  int generations = 3;
  double mutation = 0.2;      // per-parameter probability of moving to a neighbouring value
  int random_samples = 3;
  std::vector<Schedule> baselines;  // timed first (strategy defaults, the heuristic's choice)
  std::function<void(const TuneProgress&)> progress;
};

struct SearchOutcome {
  std::vector<TuneCandidate> candidates;  // in measurement order
  long best = -1;                         // index into candidates; -1 when none succeeded
  bool budget_exhausted = false;
  double seconds = 0;
};

// Valid points, most promising first: by score when given, else by the prior (each strategy's
// default point first, then by distance from the default, strategies interleaved at equal
// distance). Ties keep index order.
std::vector<size_t> rank_space(const Space& space, const ScoreFn& score);

SearchOutcome run_search(const Space& space, const MeasureFn& measure, const ScoreFn& score,
                         const SearchOptions& options);

}  // namespace spgnn::tune
