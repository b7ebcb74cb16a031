// Device facts for the autotuner's cache keys and validity rules. The only CUDA calls of the
// tuner live here, behind SPGNN_WITH_CUDA, so the rest of src/tune/ is plain C++.
#include "tune/device_info.hpp"

#include <omp.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <mutex>

#if SPGNN_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace spgnn::tune {

namespace {
#if SPGNN_WITH_CUDA
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw DeviceError(std::string("autotuner: ") + what + " failed: " + cudaGetErrorString(e));
  }
}
#endif

std::string cpu_model() {
  static const std::string model = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("model name", 0) != 0) continue;
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string v = line.substr(colon + 1);
      const size_t a = v.find_first_not_of(" \t");
      const size_t b = v.find_last_not_of(" \t\r");
      if (a != std::string::npos) return v.substr(a, b - a + 1);
    }
    return std::string("unknown");
  }();
  return model;
}
}  // namespace

GpuProps gpu_props(int device) {
#if SPGNN_WITH_CUDA
  static std::mutex mutex;
  static std::map<int, GpuProps> known;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find(device);
  if (it != known.end()) return it->second;
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  GpuProps p;
  p.name = prop.name;
  p.max_threads_per_block = prop.maxThreadsPerBlock;
  p.max_smem_per_block_optin =
      static_cast<int64_t>(std::max(prop.sharedMemPerBlockOptin, prop.sharedMemPerBlock));
  p.sm_count = prop.multiProcessorCount;
  int mem_khz = 0;  // cudaDeviceProp lost memoryClockRate in CUDA 13; the attribute remains
  if (cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess) {
    (void)cudaGetLastError();
    mem_khz = 0;
  }
  // double data rate: two transfers a clock over memoryBusWidth bits
  p.dram_gbps = 2.0 * mem_khz * 1e3 * (prop.memoryBusWidth / 8.0) / 1e9;
  known[device] = p;
  return p;
#else
  (void)device;
  throw Unsupported("autotuner: this spgnn was built without CUDA");
#endif
}

std::string device_name(Device d) {
  if (d.is_cuda()) return gpu_props(d.index).name;
  return "cpu:" + cpu_model() + " (" + std::to_string(std::max(1, omp_get_max_threads())) +
         " threads)";
}

std::vector<int64_t> strided_sample(const Tensor& t, int64_t stride, int64_t count) {
  SPGNN_CHECK(t.ndim() == 1 && (t.dtype() == DType::i32 || t.dtype() == DType::i64),
              InvalidArgument, "strided_sample: expected a 1-D int32/int64 tensor, got ",
              dtype_name(t.dtype()), " ", t.shape_str());
  SPGNN_CHECK(stride >= 1 && count >= 0 && (count == 0 || (count - 1) * stride < t.numel()),
              InvalidArgument, "strided_sample: ", count, " elements at stride ", stride,
              " exceed the ", t.numel(), " elements of the tensor");
  const size_t es = dtype_size(t.dtype());
  std::vector<unsigned char> raw(static_cast<size_t>(count) * es);
  if (count > 0) {
    if (t.device().is_cuda()) {
#if SPGNN_WITH_CUDA
      // Rows of one element, `stride` elements apart: a single strided copy of `count` values.
      check(cudaMemcpy2D(raw.data(), es, t.raw(), static_cast<size_t>(stride) * es, es,
                         static_cast<size_t>(count), cudaMemcpyDeviceToHost),
            "cudaMemcpy2D (fingerprint sample)");
#endif
    } else {
      const auto* src = static_cast<const unsigned char*>(t.raw());
      for (int64_t k = 0; k < count; ++k)
        std::copy_n(src + static_cast<size_t>(k * stride) * es, es, raw.data() + size_t(k) * es);
    }
  }
  std::vector<int64_t> out(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) {
    if (t.dtype() == DType::i64) {
      int64_t v = 0;
      std::copy_n(raw.data() + size_t(k) * es, es, reinterpret_cast<unsigned char*>(&v));
      out[size_t(k)] = v;
    } else {
      int32_t v = 0;
      std::copy_n(raw.data() + size_t(k) * es, es, reinterpret_cast<unsigned char*>(&v));
      out[size_t(k)] = v;
    }
  }
  return out;
}

}  // namespace spgnn::tune
