// Internal CUDA plumbing: error checks that carry the call, file and line, RAII device buffers
// and small launch helpers. Included by .cu files only.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "spgnn/error.hpp"

namespace spgnn::detail {

[[noreturn]] inline void throw_cuda(cudaError_t err, const char* call, const char* file, int line) {
  throw DeviceError(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " +
                    cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

}  // namespace spgnn::detail

#define SPGNN_CUDA_CHECK(call)                                                      \
  do {                                                                              \
    cudaError_t spgnn_err_ = (call);                                                \
    if (spgnn_err_ != cudaSuccess)                                                  \
      ::spgnn::detail::throw_cuda(spgnn_err_, #call, __FILE__, __LINE__);           \
  } while (0)

// After every launch: a launch-configuration error is reported at once; asynchronous faults are
// reported at the next synchronisation point (no implicit sync on the hot path).
#define SPGNN_CUDA_CHECK_LAUNCH() SPGNN_CUDA_CHECK(cudaPeekAtLastError())

namespace spgnn::detail {

// While a stream is being captured into a CUDA graph (torch.cuda.graph, CUDA-graph trees), the
// default ("global") capture mode makes cudaMalloc and other calls that are not stream-ordered
// fail on every thread. spgnn's persistent buffers (a counter per stream, say) may first be
// needed inside a capture, on the capture's own stream: they are allocated in relaxed mode, where
// such a call is allowed and, not being stream-ordered, is simply not recorded. The previous mode
// is restored at the end of the scope.
struct CaptureRelaxed {
  cudaStreamCaptureMode prev = cudaStreamCaptureModeRelaxed;
  CaptureRelaxed() { cudaThreadExchangeStreamCaptureMode(&prev); }
  ~CaptureRelaxed() { cudaThreadExchangeStreamCaptureMode(&prev); }
  CaptureRelaxed(const CaptureRelaxed&) = delete;
  CaptureRelaxed& operator=(const CaptureRelaxed&) = delete;
};

inline bool stream_capturing(cudaStream_t st) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  SPGNN_CUDA_CHECK(cudaStreamIsCapturing(st, &status));
  return status != cudaStreamCaptureStatusNone;
}

// Owns a device allocation (for kernel scratch space; tensors own theirs through Storage).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { resize(bytes); }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  // Grows (never shrinks) so cached work buffers are reused across calls.
  void reserve(size_t bytes) {
    if (bytes > bytes_) resize(bytes);
  }
  void resize(size_t bytes) {
    CaptureRelaxed relaxed;  // (a first use inside a CUDA-graph capture)
    reset();
    if (bytes) SPGNN_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
    bytes_ = bytes;
  }
  void reset() noexcept {
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* get() const { return ptr_; }
  size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// spgnn's own stream-ordered memory pool on a device: unlike the device's default pool (release
// threshold 0), it keeps up to kScratchKeepBytes reserved across synchronisations, so a scratch
// allocated on every call (the half SpMM's cut rows: 70-280 MB on R-MAT scale 21) is not mapped
// anew each time; larger reservations are still returned at the next synchronisation. A pool of
// its own leaves the caller's (PyTorch's, the default pool's) settings alone.
constexpr uint64_t kScratchKeepBytes = uint64_t{512} << 20;
inline cudaMemPool_t scratch_pool(int device) {
  static std::mutex mutex;
  static auto* pools = new std::map<int, cudaMemPool_t>();  // process lifetime, never destroyed
  std::lock_guard<std::mutex> lock(mutex);
  auto it = pools->find(device);
  if (it != pools->end()) return it->second;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr;
  SPGNN_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
  uint64_t keep = kScratchKeepBytes;
  SPGNN_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  (*pools)[device] = pool;
  return pool;
}

// Kernel scratch allocated and freed in stream order from scratch_pool: unlike cudaFree, the
// free does not synchronise the device, so a call stays asynchronous; the memory is reusable
// once the kernels queued before the free have run. On the current device.
class StreamScratch {
 public:
  StreamScratch(size_t bytes, cudaStream_t st) : st_(st) {
    int device = 0;
    SPGNN_CUDA_CHECK(cudaGetDevice(&device));
    SPGNN_CUDA_CHECK(cudaMallocFromPoolAsync(&ptr_, bytes, scratch_pool(device), st_));
  }
  ~StreamScratch() { cudaFreeAsync(ptr_, st_); }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  float* get() const { return static_cast<float*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  cudaStream_t st_;
};

inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

template <class T>
constexpr T ceil_div(T a, T b) { return (a + b - 1) / b; }

// Makes `dev` the current device for a scope (launches, allocations, library calls on another
// GPU than the caller's) and restores the caller's device afterwards.
struct DeviceGuard {
  int prev = 0;
  bool changed = false;
  explicit DeviceGuard(int dev) {
    SPGNN_CUDA_CHECK(cudaGetDevice(&prev));
    if (prev != dev) {
      SPGNN_CUDA_CHECK(cudaSetDevice(dev));
      changed = true;
    }
  }
  ~DeviceGuard() {
    if (changed) cudaSetDevice(prev);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
};

// Raises a kernel's dynamic shared-memory limit when a launch needs more than the default 48 KB.
template <class Kernel>
inline void allow_smem(Kernel kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    SPGNN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bytes)));
}

}  // namespace spgnn::detail
