// Internal: the layers' aggregation-width padding (src/nn/layers.cpp), exposed for tests, and
// the buffers that layers and the model keep across epochs.
#pragma once
#include <cstdint>
#include <vector>

#include "spgnn/ops.hpp"
#include "spgnn/tensor.hpp"

namespace spgnn::nn::detail {

// The width a transform-first aggregation of width f runs at for operands like x: f rounded up
// to a multiple of 4 on the GPU (zero columns), f itself on the host. With half aggregations
// (aggregation_dtype() != f32) and a graph `g`, f rounded up to a multiple of 8 instead where the
// half SpMM pays at that width over g (spgnn::detail::half_spmm_pays).
int64_t aggregation_width(int64_t f, const Tensor& x, const Graph* g = nullptr);
// Tests: pad on the host too, so the padded path can be checked against the float64 reference.
void force_aggregation_padding(bool on);
// Whether aggregation widths are padded for operands like x (the GPU, or forced on the host).
bool pads_widths(const Tensor& x);

// A buffer kept across calls: reallocated only when shape, dtype or device change.
Tensor& keep(Tensor& buf, const std::vector<int64_t>& shape, DType dt, Device dev);
// A CBSR buffer that maxk(x, k, c) can write again: emptied when x's shape or device changed.
Cbsr& keep_cbsr(Cbsr& c, const Tensor& x, int64_t k);
// dst = src converted (float32 <-> float16/bfloat16, same shape), on src's device and `stream`.
void convert_into(const Tensor& src, Tensor& dst, void* stream);

}  // namespace spgnn::nn::detail
