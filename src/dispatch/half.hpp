// Internal: half precision (float16/bfloat16) at the ops' front doors. gspmm and gsddmm have GPU
// kernels that read half operands; every other op (and every op on the host) converts its half
// operands to float32, runs the float32 op (which accumulates in float32 or wider) and rounds each
// result once into the half dtype. On a CUDA device both conversions are kernels ordered on the
// op's stream (no host round trip, no synchronisation).
#pragma once
#include <initializer_list>
#include <utility>

#include "spgnn/tensor.hpp"

namespace spgnn::detail {

// The half dtype of an op's defined operands, or f32 when none is half; a half operand beside an
// operand of another float dtype is refused by name.
DType half_operands(const char* op, std::initializer_list<std::pair<const Tensor*, const char*>> ts);

// t converted to float32 (undefined stays undefined); on a CUDA device ordered on `stream`.
Tensor as_f32(const Tensor& t, void* stream = nullptr);

// Rounds the float32 result r into `out` of dtype `half`: allocated when undefined, else checked
// (dtype, device, shape) and overwritten; on a CUDA device ordered on `stream`.
void store_half(const Tensor& r, Tensor& out, DType half, const char* op, const char* arg,
                void* stream = nullptr);

}  // namespace spgnn::detail
