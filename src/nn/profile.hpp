// Internal: the phase profiler behind `spgnn train --profile`. Engine entry points open a
// ProfileScope; with no active profiler (the normal path) that is one thread-local load and a
// branch. Scopes do not nest in time: only the outermost scope records, so a layer can claim a
// whole sequence of calls for one phase.
#pragma once
#include <chrono>
#include <cstddef>
#include <vector>

#include "spgnn/nn/profile.hpp"
#include "spgnn/tensor.hpp"

namespace spgnn::nn::detail {

class Profiler {
 public:
  explicit Profiler(Device device);
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  void begin_epoch();
  // Call after the device was synchronised; total_ms is the epoch's measured wall time.
  PhaseTimes end_epoch(double total_ms);
  void enter(Phase p);
  void leave();
  // Aggregations are attributed to the forward or the backward phase by the pass in progress.
  void set_backward(bool b) { backward_ = b; }
  bool backward() const { return backward_; }

 private:
  struct Span {
    Phase phase;
    void* begin;  // CUDA events (GPU) ...
    void* end;
    double ms;    // ... or the measured host time
  };
  void* event();
  Device device_;
  int depth_ = 0;
  bool backward_ = false;
  Phase current_ = Phase::elementwise;
  std::chrono::steady_clock::time_point t0_;
  void* open_ = nullptr;
  std::vector<Span> spans_;
  std::vector<void*> events_;  // pool, reused every epoch
  size_t used_ = 0;
};

// The profiler of the training step in progress on this thread (nullptr: not profiling).
Profiler* active_profiler();

// Makes `p` the active profiler for a scope.
class ProfilerActivation {
 public:
  explicit ProfilerActivation(Profiler* p);
  ~ProfilerActivation();
  ProfilerActivation(const ProfilerActivation&) = delete;
  ProfilerActivation& operator=(const ProfilerActivation&) = delete;

 private:
  Profiler* prev_;
};

class ProfileScope {
 public:
  // Phase::aggregate_forward becomes aggregate_backward during the backward pass.
  explicit ProfileScope(Phase p) : prof_(active_profiler()) {
    if (prof_) {
      if (p == Phase::aggregate_forward && prof_->backward()) p = Phase::aggregate_backward;
      prof_->enter(p);
    }
  }
  ~ProfileScope() {
    if (prof_) prof_->leave();
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  Profiler* prof_;
};

// Marks the pass (forward / backward) for the active profiler, if any, for a scope.
class ProfilePass {
 public:
  explicit ProfilePass(bool backward) : prof_(active_profiler()) {
    if (prof_) {
      prev_ = prof_->backward();
      prof_->set_backward(backward);
    }
  }
  ~ProfilePass() {
    if (prof_) prof_->set_backward(prev_);
  }
  ProfilePass(const ProfilePass&) = delete;
  ProfilePass& operator=(const ProfilePass&) = delete;

 private:
  Profiler* prof_;
  bool prev_ = false;
};

}  // namespace spgnn::nn::detail
