// Internal: half precision (float16/bfloat16) at the ops' front doors. The kernels take float32;
// on the host an op with half operands converts them to float32, runs the float32 op (which
// accumulates in float32 or wider) and rounds each result once into the half dtype. The GPU
// refuses half operands by name until kernels that read half exist.
#pragma once
#include <initializer_list>
#include <utility>

#include "spgnn/tensor.hpp"

namespace spgnn::detail {

// The half dtype of an op's defined operands, or f32 when none is half; a half operand beside an
// operand of another float dtype is refused by name. On a CUDA device half is Unsupported unless
// `gpu` (the op has GPU kernels for it: gspmm's warp_vertex, gsddmm's shuffle).
DType half_operands(const char* op, std::initializer_list<std::pair<const Tensor*, const char*>> ts,
                    bool gpu = false);

// t converted to float32 (undefined stays undefined).
Tensor as_f32(const Tensor& t);

// Rounds the float32 result r into `out` of dtype `half`: allocated when undefined, else checked
// (dtype, device, shape) and overwritten.
void store_half(const Tensor& r, Tensor& out, DType half, const char* op, const char* arg);

}  // namespace spgnn::detail
