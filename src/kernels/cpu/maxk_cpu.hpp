// Internal: CPU MaxK-GNN kernels (maxk_cpu.cpp). `reference` selects the serial oracle (float64
// accumulation, obviously-correct selection by full sort) instead of the OpenMP version. Arguments
// arrive checked by src/dispatch/maxk_ops.cpp, including index entries < F.
#pragma once
#include <cstdint>

#include "spgnn/graph.hpp"
#include "spgnn/ops.hpp"
#include "spgnn/tensor.hpp"

namespace spgnn::detail {

// The total order maxk ranks by: the IEEE-754 bits mapped to an unsigned key that sorts like the
// floats (-inf < ... < -0 < +0 < ... < +inf; NaNs beyond the infinities by sign). CPU and GPU use
// the same key, so both keep the same k positions on every input, ties included.
inline uint32_t maxk_order_key(uint32_t bits) {
  return bits ^ ((bits & 0x80000000u) ? 0xffffffffu : 0x80000000u);
}

void cpu_maxk(const Tensor& x, int64_t k, Tensor& data, Tensor& index, bool reference);
void cpu_maxk_backward(const Tensor& d_data, const Tensor& index, int64_t F, Tensor& dx);
void cpu_cbsr_spgemm(const Graph& g, const float* w, const Cbsr& x, Tensor& out, bool reference);
void cpu_cbsr_sspmm(const Graph& g, const float* w, const Tensor& d_out, const Cbsr& x,
                    Tensor& d_data, bool reference);

}  // namespace spgnn::detail
