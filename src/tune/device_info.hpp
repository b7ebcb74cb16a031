// Internal: what the autotuner needs to know of a device without exposing CUDA types: the GPU's
// name and launch limits (cudaGetDeviceProperties, read once per device), the CPU's model name,
// and a strided gather of a 1-D index array to the host (the graph fingerprint's column sample).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "spgnn/tensor.hpp"

namespace spgnn::tune {

struct GpuProps {
  std::string name;
  int64_t max_threads_per_block = 1024;
  int64_t max_smem_per_block_optin = 48 * 1024;
  int64_t sm_count = 0;
  // Peak DRAM bandwidth from the memory clock and bus width (GB/s; 0 if the driver reports no
  // memory clock): 4,814 on the lent H200 (test_strategies_gpu prints it); the H100 SXM's data
  // sheet gives 3,350. `auto` keys one rule on it (registry.cpp).
  double dram_gbps = 0;
};
// Cached per device. Throws Unsupported in a build without CUDA, DeviceError on a CUDA failure.
GpuProps gpu_props(int device);

// "NVIDIA H100 80GB HBM3" for a GPU; "cpu:<model name> (<N> threads)" for the CPU, with the
// model from /proc/cpuinfo and N = omp_get_max_threads().
std::string device_name(Device d);

// Elements 0, stride, 2*stride, ... (count of them) of a 1-D int32/int64 tensor, as int64 on the
// host. A GPU tensor is read with one strided copy (cudaMemcpy2D), never copied whole.
std::vector<int64_t> strided_sample(const Tensor& t, int64_t stride, int64_t count);

}  // namespace spgnn::tune
