// The dense and sparse building blocks of the training engine, one API for host and CUDA
// tensors: each function dispatches on where its tensors live. float32 everywhere; float64 on
// the host too, so that gradients can be checked by finite differences in double precision.
// All tensors of one call must share dtype and device (InvalidArgument otherwise).
#pragma once
#include <cstdint>
#include <vector>

#include "spgnn/graph.hpp"
#include "spgnn/ops.hpp"
#include "spgnn/tensor.hpp"

namespace spgnn::nn {

// c = op(a) * op(b) + beta * c for 2-D row-major tensors (op = transpose when asked). `c` is
// allocated when undefined (then beta must be 0). cuBLAS on the GPU, CBLAS (OpenBLAS) on the host
// when the build found it, else an OpenMP loop.
void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
          double beta = 0);
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
// Opt-in TF32 tensor cores for cuBLAS GEMMs (process-wide; off by default). Inputs are rounded
// to 10 mantissa bits, so results differ from FP32 by ~1e-3 relative: never on for comparisons
// with FP32 frameworks.
void set_allow_tf32(bool allow);
bool allow_tf32();
// The dtype sum/mean aggregations (nn::aggregate: GCN, SAGE, GIN, forward and backward) read and
// write (process-wide; float32 by default). bfloat16 halves their memory traffic: the float32
// operand is rounded to bfloat16, aggregated with float32 accumulation, and the result rounded
// once and widened back; weights, GEMMs, activations and Adam stay float32 (on a GPU through the
// half kernels of gspmm). float16 likewise, with more mantissa and far less range: gradients
// need loss scaling (nn::train does it when TrainConfig::aggregation_dtype is float16).
void set_aggregation_dtype(DType dtype);
DType aggregation_dtype();

// x[i, j] += bias[j].
void add_bias_(Tensor& x, const Tensor& bias);
// out[j] = sum_i x[i, j] (+ beta * out[j]); the gradient of a bias.
void column_sum(const Tensor& x, Tensor& out, double beta = 0);
// y += alpha * x (same shape).
void axpy_(Tensor& y, double alpha, const Tensor& x);
// dst[i, j] = src[i, j] for j < cols, between row-major matrices of the same row count and any
// widths >= cols (padding a width with columns that stay as they are, or narrowing it).
void copy_columns(const Tensor& src, Tensor& dst, int64_t cols);
// y += (offset + s[0]) * x, with the scalar s ([1]) read where it lives: a trainable scalar
// (GIN's epsilon) scales a tensor without a copy to the host.
void add_scaled_(Tensor& y, const Tensor& x, const Tensor& s, double offset);
// out[0] = sum_i a[i] * b[i] (+ beta * out[0]); `out` is [1] on the operands' device (allocated
// when undefined, then beta must be 0).
void dot(const Tensor& a, const Tensor& b, Tensor& out, double beta = 0);

enum class Activation : uint8_t { none, relu, elu };
// In place; the backward reads the activation's output y (both are invertible from y).
void activation_(Tensor& x, Activation act);
void activation_backward_(Tensor& grad, const Tensor& y, Activation act);

// Inverted dropout with a counter-based mask: element i is kept when hash(seed, i) >= p, so the
// backward recomputes the mask instead of storing it, and host and GPU drop the same elements.
Tensor dropout(const Tensor& x, double p, uint64_t seed);
// The same into `out` (allocated when undefined or of another shape): a buffer kept across epochs.
// On the GPU it runs on `stream` (a cudaStream_t; null: the legacy default stream). Its own
// backward: dropout of the gradient with the same p and seed (a zero stays zero either way).
// device_seed (x on a CUDA device only): the kernel reads the seed from this device address as it
// runs, and `seed` is ignored; a CUDA graph that rewrites the address draws a new mask per replay.
void dropout(const Tensor& x, double p, uint64_t seed, Tensor& out, void* stream = nullptr,
             const uint64_t* device_seed = nullptr);
void dropout_backward_(Tensor& grad, double p, uint64_t seed);

// x = dropout(act(x), p, seed) in one pass, in place (p = 0: the activation only).
void activation_dropout_(Tensor& x, Activation act, double p, uint64_t seed);
// The gradient through activation_dropout_, from its output y: grad = d loss / d y on entry,
// d loss / d x on return. ReLU needs no mask (y > 0 exactly where the element was kept and
// positive); ELU recomputes the mask from the seed.
void activation_dropout_backward_(Tensor& grad, const Tensor& y, Activation act, double p,
                                  uint64_t seed);

// Mean negative log-likelihood of log_softmax(logits) over the rows `idx` (int64, on the
// logits' device) with labels `y` ([n] int64; rows with label < 0 are skipped). When `grad` is
// not null it receives d loss / d logits ([n, C], zero outside idx).
double log_softmax_nll(const Tensor& logits, const Tensor& y, const Tensor& idx, Tensor* grad);
// Fraction of rows in idx (with label >= 0) whose arg-max equals the label.
double accuracy(const Tensor& logits, const Tensor& y, const Tensor& idx);

struct AdamParams {
  double lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0;  // L2 term added to the gradient (PyTorch Adam's weight_decay)
};
// One Adam update of `param` (step counts from 1); m and v are the moment buffers.
void adam_step(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, int64_t step,
               const AdamParams& a);

// Glorot/Xavier uniform values in [-s, s], s = sqrt(6 / (fan_in + fan_out)), drawn on the host
// from `seed` (so every device starts from the same weights).
Tensor glorot(std::vector<int64_t> shape, int64_t fan_in, int64_t fan_out, uint64_t seed,
              DType dtype, Device device);

// Per-head dot product of a row with an attention vector: out[i, h] = sum_f x[i, h*F + f] *
// a[h*F + f] for x [n, H*F], a [H*F]; out [n, H].
Tensor head_dot(const Tensor& x, const Tensor& a, int64_t heads);
// grad_x += grad_out[i, h] * a[h*F + f];  grad_a = sum_i grad_out[i, h] * x[i, h*F + f].
void head_dot_backward(const Tensor& x, const Tensor& a, int64_t heads, const Tensor& grad_out,
                       Tensor& grad_x, Tensor& grad_a);

// out[v] = sum (or mean) over edges (v, u) of w_e * x[u]. `w` undefined means 1. float32 goes
// through gspmm (the op's strategies, `options.schedule`); float64 (host only) uses a plain loop.
Tensor aggregate(const Graph& g, const Tensor& w, Reduce reduce, const Tensor& x,
                 const OpOptions& options = {});
// The same into `out` ([n_rows, F]; allocated when undefined or of another shape).
void aggregate(const Graph& g, const Tensor& w, Reduce reduce, const Tensor& x, Tensor& out,
               const OpOptions& options = {});

// MaxK on the engine's float64 path (host): a 0/1 mask of the k largest entries of each row of
// x, ties to the lower column as in spgnn::maxk; and x *= mask elementwise (host tensors).
Tensor maxk_mask_f64(const Tensor& x, int64_t k);
void mul_(Tensor& x, const Tensor& mask);

// float64 reference of GAT aggregation (host only; no attention dropout), with the semantics of
// spgnn::gat_aggregate: the engine's double-precision path for gradient checks.
void gat_aggregate_f64(const Graph& g, const Tensor& feat, const Tensor& el, const Tensor& er,
                       int64_t heads, double slope, Tensor& out, Tensor& attn);
void gat_aggregate_backward_f64(const Graph& g, const Tensor& feat, const Tensor& el,
                                const Tensor& er, const Tensor& attn, const Tensor& grad_out,
                                int64_t heads, double slope, Tensor& grad_feat, Tensor& grad_el,
                                Tensor& grad_er);

// Device memory in use (total - free) now, in bytes; 0 on the host.
size_t device_memory_used(Device device);
// Waits for the device's queued work (before taking a time stamp); no-op on the host.
void synchronize(Device device);

}  // namespace spgnn::nn
