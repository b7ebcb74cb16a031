// Internal: host entry points of the training engine's CUDA kernels (src/nn/nn_kernels.cu).
// Plain C++ so that functional.cpp, compiled by the host compiler, can call them; without CUDA
// they are stubs that throw Unsupported. float32 only; raw pointers were checked by the caller.
#pragma once
#include <cstddef>
#include <cstdint>

namespace spgnn::nn::detail {

// Row-major c[m, n] = op(a) * op(b) + beta * c with op(a) [m, k], op(b) [k, n].
void cuda_gemm(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t m,
               int64_t n, int64_t k, float beta, bool tf32);
void cuda_add_bias(float* x, const float* bias, int64_t rows, int64_t cols);
void cuda_column_sum(const float* x, float* out, int64_t rows, int64_t cols, float beta);
void cuda_axpy(float* y, float alpha, const float* x, int64_t n);
void cuda_copy_columns(const float* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows,
                       int64_t cols);
// y += (offset + s[0]) * x with s on the device.
void cuda_add_scaled(float* y, const float* x, const float* s, float offset, int64_t n);
// out[0] = sum a*b (+ beta * out[0]).
void cuda_dot(const float* a, const float* b, int64_t n, float* out, float beta);
// act: 1 relu, 2 elu.
void cuda_activation(float* x, int64_t n, int act);
void cuda_activation_backward(float* grad, const float* y, int64_t n, int act);
// On `stream` (a cudaStream_t; null: the legacy default stream, as every nn kernel uses).
// seed_ptr: read the seed from the device instead (nn::dropout's device_seed).
void cuda_dropout(const float* x, float* y, int64_t n, uint32_t threshold, float scale,
                  uint64_t seed, void* stream = nullptr, const uint64_t* seed_ptr = nullptr);
void cuda_dropout_backward(float* grad, int64_t n, uint32_t threshold, float scale,
                           uint64_t seed);
// act: 0 none, 1 relu, 2 elu; drop: apply the dropout mask (else threshold/scale are ignored).
void cuda_activation_dropout(float* x, int64_t n, int act, bool drop, uint32_t threshold,
                             float scale, uint64_t seed);
void cuda_activation_dropout_backward(float* grad, const float* y, int64_t n, int act, bool drop,
                                      uint32_t threshold, float scale, uint64_t seed);
// Returns the summed loss and the number of counted rows (synchronises: one scalar per call).
void cuda_log_softmax_nll(const float* logits, int64_t classes, const int64_t* y,
                          const int64_t* idx, int64_t m, float* grad, double* loss_sum,
                          int64_t* counted);
void cuda_accuracy(const float* logits, int64_t classes, const int64_t* y, const int64_t* idx,
                   int64_t m, int64_t* correct, int64_t* counted);
void cuda_adam(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
               float beta2, float eps, float weight_decay, float bias_c1, float bias_c2);
void cuda_head_dot(const float* x, const float* a, float* out, int64_t n, int64_t heads,
                   int64_t f);
void cuda_head_dot_backward(const float* x, const float* a, const float* grad_out,
                            float* grad_x, float* grad_a, int64_t n, int64_t heads, int64_t f);
size_t cuda_memory_used(int device);
void cuda_sync();
// CUDA events on the default stream, for the phase profiler.
void* cuda_event_create();
void cuda_event_destroy(void* e) noexcept;
void cuda_event_record(void* e);
float cuda_event_elapsed_ms(void* begin, void* end);

}  // namespace spgnn::nn::detail
