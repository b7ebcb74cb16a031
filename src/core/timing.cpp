#include "core/timing.hpp"

#include <algorithm>
#include <chrono>
#include <string>

#if SPGNN_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace spgnn::detail {

namespace {
void summarise(TimingStats& t) {
  if (t.ms.empty()) return;
  std::vector<double> s = t.ms;
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  t.median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  t.min = s.front();
  t.max = s.back();
}

#if SPGNN_WITH_CUDA
void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw DeviceError(std::string("timing: ") + what + " failed: " + cudaGetErrorString(e));
}
#endif
}  // namespace

void synchronize(Device device) {
#if SPGNN_WITH_CUDA
  if (device.is_cuda()) cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
#else
  (void)device;
#endif
}

TimingStats time_runs(const std::function<void()>& fn, Device device, int warmup, int reps,
                      void* stream) {
  SPGNN_CHECK(reps >= 1 && warmup >= 0, InvalidArgument, "time_runs: reps must be >= 1 (got ",
              reps, ") and warmup >= 0 (got ", warmup, ")");
  TimingStats t;
  for (int i = 0; i < warmup; ++i) fn();
  synchronize(device);
  if (device.is_cuda()) {
#if SPGNN_WITH_CUDA
    // One event pair per run, all recorded on the stream and read after a single sync, so the
    // timed loop never waits on the host.
    auto s = static_cast<cudaStream_t>(stream);
    std::vector<cudaEvent_t> ev(2 * static_cast<size_t>(reps));
    for (auto& e : ev) cuda_check(cudaEventCreate(&e), "cudaEventCreate");
    for (int i = 0; i < reps; ++i) {
      cuda_check(cudaEventRecord(ev[2 * i], s), "cudaEventRecord");
      fn();
      cuda_check(cudaEventRecord(ev[2 * i + 1], s), "cudaEventRecord");
    }
    cuda_check(cudaEventSynchronize(ev.back()), "cudaEventSynchronize");
    for (int i = 0; i < reps; ++i) {
      float ms = 0;
      cuda_check(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]), "cudaEventElapsedTime");
      t.ms.push_back(ms);
    }
    for (auto& e : ev) cudaEventDestroy(e);
#else
    (void)stream;
    throw Unsupported("time_runs: this spgnn was built without CUDA");
#endif
  } else {
    for (int i = 0; i < reps; ++i) {
      auto a = std::chrono::steady_clock::now();
      fn();
      auto b = std::chrono::steady_clock::now();
      t.ms.push_back(std::chrono::duration<double, std::milli>(b - a).count());
    }
  }
  summarise(t);
  return t;
}

}  // namespace spgnn::detail
