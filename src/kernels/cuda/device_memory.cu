// Device-memory primitives behind Tensor and Storage (see src/core/device.hpp).
#include <cstdint>

#include "core/device.hpp"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/elem.cuh"

namespace spgnn::detail {

namespace {

template <class T>
__global__ void fill_kernel(T* p, int64_t n, T v) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    p[i] = v;
}

template <class T>
void launch_fill(void* p, int64_t n, double v, cudaStream_t s) {
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>(ceil_div<int64_t>(n, threads), 65535);
  fill_kernel<T><<<static_cast<unsigned>(blocks), threads, 0, s>>>(static_cast<T*>(p), n,
                                                                  static_cast<T>(v));
  SPGNN_CUDA_CHECK_LAUNCH();
}
template <class From, class To>
__global__ void convert_kernel(const From* __restrict__ src, To* __restrict__ dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = elem::from_float<To>(elem::to_float(src[i]));
}

template <class From, class To>
void launch_convert(const void* src, void* dst, int64_t n, cudaStream_t s) {
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>(ceil_div<int64_t>(n, threads), 65535);
  convert_kernel<From, To><<<static_cast<unsigned>(blocks), threads, 0, s>>>(
      static_cast<const From*>(src), static_cast<To*>(dst), n);
  SPGNN_CUDA_CHECK_LAUNCH();
}
}  // namespace

void cuda_convert(const void* src, DType from, void* dst, DType to, int64_t n, int device,
                  void* stream) {
  if (n == 0) return;
  DeviceGuard guard(device);
  const cudaStream_t s = as_stream(stream);
  if (from == DType::f32 && to == DType::f16) return launch_convert<float, __half>(src, dst, n, s);
  if (from == DType::f32 && to == DType::bf16)
    return launch_convert<float, __nv_bfloat16>(src, dst, n, s);
  if (from == DType::f16 && to == DType::f32) return launch_convert<__half, float>(src, dst, n, s);
  if (from == DType::bf16 && to == DType::f32)
    return launch_convert<__nv_bfloat16, float>(src, dst, n, s);
  throw InvalidArgument(std::string("cuda_convert: ") + dtype_name(from) + " to " +
                        dtype_name(to) + " is not a float32 <-> float16/bfloat16 conversion");
}

void cuda_stream_sync(int device, void* stream) {
  DeviceGuard guard(device);
  SPGNN_CUDA_CHECK(cudaStreamSynchronize(as_stream(stream)));
}

void* cuda_alloc(size_t bytes, int device) {
  DeviceGuard g(device);
  void* p = nullptr;
  SPGNN_CUDA_CHECK(cudaMalloc(&p, bytes));
  return p;
}

void cuda_free(void* p, int) noexcept { cudaFree(p); }

void cuda_copy(void* dst, const void* src, size_t bytes, int dir) {
  const cudaMemcpyKind kind = dir == 0   ? cudaMemcpyHostToDevice
                              : dir == 1 ? cudaMemcpyDeviceToHost
                                         : cudaMemcpyDeviceToDevice;
  SPGNN_CUDA_CHECK(cudaMemcpy(dst, src, bytes, kind));
}

void cuda_copy_async(void* dst, const void* src, size_t bytes, int dir, void* stream) {
  const cudaMemcpyKind kind = dir == 0   ? cudaMemcpyHostToDevice
                              : dir == 1 ? cudaMemcpyDeviceToHost
                              : dir == 2 ? cudaMemcpyDeviceToDevice
                                         : cudaMemcpyDefault;
  SPGNN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, as_stream(stream)));
}

void cuda_fill(void* p, DType dtype, int64_t n, double value, void* stream) {
  cudaStream_t s = as_stream(stream);
  switch (dtype) {
    case DType::f32: launch_fill<float>(p, n, value, s); break;
    case DType::f64: launch_fill<double>(p, n, value, s); break;
    case DType::i32: launch_fill<int32_t>(p, n, value, s); break;
    case DType::i64: launch_fill<int64_t>(p, n, value, s); break;
    case DType::u8: launch_fill<uint8_t>(p, n, value, s); break;
    case DType::u16: launch_fill<uint16_t>(p, n, value, s); break;
    // The half types: the value's bit pattern, converted once on the host.
    case DType::f16: launch_fill<uint16_t>(p, n, float_to_half(float(value)).bits, s); break;
    case DType::bf16: launch_fill<uint16_t>(p, n, float_to_bf16(float(value)).bits, s); break;
  }
}

int cuda_device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

void cuda_synchronize() { SPGNN_CUDA_CHECK(cudaDeviceSynchronize()); }

}  // namespace spgnn::detail
