// The phase profiler: CUDA events around each phase's launches on the GPU (their elapsed times
// are read once per epoch, after the epoch's synchronisation), a steady clock on the host.
#include "nn/profile.hpp"

#include <algorithm>

#include "nn/nn_cuda.hpp"
#include "spgnn/error.hpp"

namespace spgnn::nn {

namespace {
struct PhaseNames {
  const char* key;
  const char* label;
};
constexpr PhaseNames kPhaseNames[kNumPhases] = {
    {"aggregate_forward", "aggregation forward"},
    {"aggregate_backward", "aggregation backward"},
    {"dense_gemm", "dense GEMM"},
    {"maxk_cbsr", "MaxK + CBSR kernels"},
    {"elementwise", "elementwise"},
    {"loss", "loss (log-softmax + NLL)"},
    {"optimizer", "optimizer (Adam)"},
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(mid), v.end());
  return v[mid];
}
}  // namespace

const char* phase_name(Phase p) { return kPhaseNames[static_cast<size_t>(p)].key; }
const char* phase_label(Phase p) { return kPhaseNames[static_cast<size_t>(p)].label; }

PhaseTimes median_phase_times(const std::vector<PhaseTimes>& epochs) {
  PhaseTimes m;
  std::vector<double> v(epochs.size());
  for (size_t k = 0; k < kNumPhases; ++k) {
    for (size_t e = 0; e < epochs.size(); ++e) v[e] = epochs[e].ms[k];
    m.ms[k] = median(v);
  }
  for (size_t e = 0; e < epochs.size(); ++e) v[e] = epochs[e].other_ms;
  m.other_ms = median(v);
  for (size_t e = 0; e < epochs.size(); ++e) v[e] = epochs[e].total_ms;
  m.total_ms = median(v);
  return m;
}

namespace detail {

namespace {
thread_local Profiler* t_active = nullptr;
}  // namespace

Profiler* active_profiler() { return t_active; }

ProfilerActivation::ProfilerActivation(Profiler* p) : prev_(t_active) { t_active = p; }
ProfilerActivation::~ProfilerActivation() { t_active = prev_; }

Profiler::Profiler(Device device) : device_(device) {}

Profiler::~Profiler() {
  for (void* e : events_) cuda_event_destroy(e);
}

void* Profiler::event() {
  if (used_ == events_.size()) events_.push_back(cuda_event_create());
  return events_[used_++];
}

void Profiler::begin_epoch() {
  spans_.clear();
  used_ = 0;
  depth_ = 0;
  backward_ = false;
}

void Profiler::enter(Phase p) {
  if (depth_++ > 0) return;
  current_ = p;
  if (device_.is_cuda()) {
    open_ = event();
    cuda_event_record(open_);
  } else {
    t0_ = std::chrono::steady_clock::now();
  }
}

void Profiler::leave() {
  if (depth_ == 0 || --depth_ > 0) return;
  if (device_.is_cuda()) {
    void* end = event();
    cuda_event_record(end);
    spans_.push_back({current_, open_, end, 0});
  } else {
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
    spans_.push_back({current_, nullptr, nullptr, ms});
  }
}

PhaseTimes Profiler::end_epoch(double total_ms) {
  SPGNN_CHECK(depth_ == 0, InvalidArgument, "profiler: epoch ended inside a phase");
  PhaseTimes t;
  for (const Span& s : spans_)
    t.ms[static_cast<size_t>(s.phase)] +=
        device_.is_cuda() ? double(cuda_event_elapsed_ms(s.begin, s.end)) : s.ms;
  double covered = 0;
  for (double v : t.ms) covered += v;
  t.total_ms = total_ms;
  t.other_ms = std::max(0.0, total_ms - covered);
  spans_.clear();
  used_ = 0;
  return t;
}

}  // namespace detail
}  // namespace spgnn::nn
