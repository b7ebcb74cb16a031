// Internal: timing for benchmarks (never used in tests). GPU work is timed with CUDA events on
// the given stream, CPU work with a steady clock; warm-up runs are not recorded.
#pragma once
#include <functional>
#include <vector>

#include "spgnn/tensor.hpp"

namespace spgnn::detail {

struct TimingStats {
  std::vector<double> ms;  // one entry per timed run, in run order
  double median = 0, min = 0, max = 0;
};

// Runs `fn` `warmup` times, then `reps` times each bracketed by timers on `device`.
TimingStats time_runs(const std::function<void()>& fn, Device device, int warmup, int reps,
                      void* stream = nullptr);

// Blocks until all work on `device` is done and rethrows asynchronous device errors.
void synchronize(Device device);

}  // namespace spgnn::detail
