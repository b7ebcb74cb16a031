// Internal: the few device-memory primitives that host code needs. Implemented in
// src/kernels/cuda/device_memory.cu when built with CUDA; otherwise they throw Unsupported.
#pragma once
#include <cstddef>
#include <cstdint>

#include "spgnn/tensor.hpp"

namespace spgnn::detail {

void* cuda_alloc(size_t bytes, int device);
void cuda_free(void* p, int device) noexcept;
// dir: 0 host->device, 1 device->host, 2 device->device (synchronous w.r.t. the host).
void cuda_copy(void* dst, const void* src, size_t bytes, int dir);
void cuda_fill(void* p, DType dtype, int64_t n, double value, void* stream);
// Ordered on `stream` (asynchronous w.r.t. the host when the host side is pinned or both are on
// the device); `kind` as in cuda_copy, 3 = let the runtime infer it from the pointers.
void cuda_copy_async(void* dst, const void* src, size_t bytes, int dir, void* stream);
int cuda_device_count() noexcept;
// dst[i] = src[i] converted (round to nearest even), on the device, ordered on `stream`: float32
// to or from float16/bfloat16 (the pairs half-precision code paths need).
void cuda_convert(const void* src, DType from, void* dst, DType to, int64_t n, int device,
                  void* stream);
void cuda_stream_sync(int device, void* stream);

}  // namespace spgnn::detail
