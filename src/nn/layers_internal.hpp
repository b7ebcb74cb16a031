// Internal: the layers' aggregation-width padding (src/nn/layers.cpp), exposed for tests.
#pragma once
#include <cstdint>

#include "spgnn/tensor.hpp"

namespace spgnn::nn::detail {

// The width a transform-first aggregation of width f runs at for operands like x: f rounded up
// to a multiple of 4 on the GPU (zero columns), f itself on the host.
int64_t aggregation_width(int64_t f, const Tensor& x);
// Tests: pad on the host too, so the padded path can be checked against the float64 reference.
void force_aggregation_padding(bool on);

}  // namespace spgnn::nn::detail
