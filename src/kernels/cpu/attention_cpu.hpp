// Internal: CPU strategies of the attention ops. The cpu_ref_* functions are serial and
// accumulate in float64 (the oracle of every attention test); the cpu_* ones are the OpenMP
// versions (float32 accumulation, parallel over rows; the GAT backward gathers source gradients
// over the transposed graph in p.gt / p.perm instead of scattering them).
#pragma once
#include "kernels/attention_problem.hpp"

namespace spgnn::detail {

void cpu_ref_edge_softmax(const SoftmaxProblem& p);
void cpu_edge_softmax(const SoftmaxProblem& p);
void cpu_ref_edge_softmax_backward(const SoftmaxBwdProblem& p);
void cpu_edge_softmax_backward(const SoftmaxBwdProblem& p);

void cpu_ref_gat_forward(const GatProblem& p);
void cpu_gat_forward(const GatProblem& p);
void cpu_ref_gat_backward(const GatProblem& p);
void cpu_gat_backward(const GatProblem& p);  // needs p.gt and p.perm

// Elementwise pieces of the unfused composition (host tensors).
void cpu_leaky_relu_(Tensor& x, float negative_slope);
// out[e, h] = a[e, h] * the dropout factor of element e * H + h (attention_hash.hpp).
void cpu_apply_dropout(const Tensor& a, Tensor& out, uint64_t seed, float p, float scale);
// dst[r, dst_off + k] = src[r, src_off + k] for k < width: one head's column block of a
// [rows, H*F] tensor to or from a contiguous [rows, F] tensor.
void cpu_copy_cols(const Tensor& src, int64_t src_off, Tensor& dst, int64_t dst_off,
                   int64_t width);

}  // namespace spgnn::detail
