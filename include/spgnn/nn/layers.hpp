// Graph convolution layers with explicit forward and backward passes (no autograd tape): each
// layer keeps what its backward needs from the last forward. The sparse work goes through
// spgnn's ops; backward passes aggregate over the transposed graph, built once per GraphContext.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "spgnn/graph.hpp"
#include "spgnn/nn/functional.hpp"
#include "spgnn/ops.hpp"
#include "spgnn/tensor.hpp"

namespace spgnn::nn {

// A trainable tensor with its gradient and Adam moments.
struct Parameter {
  std::string name;
  Tensor value, grad, m, v;
  bool decay = true;  // weight decay applies (weights: yes; biases and attention vectors: no)
};

// The graph of one training run on one device and the normalised / transposed variants the
// layers need, each built on first use and kept (transposes are the expensive part: a sort, and
// a copy of the graph in device memory, so a direction nobody asks for is never built).
class GraphContext {
 public:
  // `g` is used as a pattern (its values are ignored); it must be square.
  GraphContext(const Graph& g, Device device, OpOptions options = {});
  Device device() const { return device_; }
  const OpOptions& options() const { return options_; }
  int64_t n() const { return n_; }
  // Pattern graph (no values): sum / mean aggregation, GAT, MaxK with unit weights.
  const Graph& plain(bool transposed);
  // D^-1/2 (A + I) D^-1/2 (GCN).
  const Graph& gcn(bool transposed);
  // 1 / deg(v) as edge values (the mean as a weighted sum: MaxK's CBSR products).
  const Graph& mean(bool transposed);
  // The n x n diagonal of 1 / deg(v) (0 for rows without edges), deg over the forward rows: the
  // mean's backward scales d out by it and sums over plain(true), which reads no weight array.
  const Graph& inv_degree();
  // A + (1 + eps) I as edge values (GIN: the self term rides along with the neighbour sum, so a
  // MaxK layer aggregates both with one CBSR SpGEMM). One eps per context.
  const Graph& gin(double eps, bool transposed);
  // Pattern with exactly one self loop per vertex (GAT attends to itself too, as in PyG).
  const Graph& loops(bool transposed);
  // The n x n identity pattern: cbsr_sspmm over it gathers a dense matrix at a CBSR's kept
  // positions (the backward of MaxK used as a plain nonlinearity, and of GIN's self term).
  const Graph& identity();

 private:
  struct Pair {
    std::unique_ptr<Graph> fwd, bwd;
  };
  const Graph& get(Pair& p, bool transposed, int kind);
  Graph host_;
  Device device_;
  OpOptions options_;
  int64_t n_ = 0;
  Pair plain_, gcn_, mean_, gin_, loops_, identity_, inv_degree_;
  double gin_eps_ = 0;
};

enum class ConvKind : uint8_t { gcn, sage, gin, gat };
const char* conv_name(ConvKind k);
ConvKind parse_conv_kind(const std::string& s);

struct ConvSpec {
  ConvKind kind = ConvKind::gcn;
  int64_t in = 0, out = 0;    // out is per head for GAT (the layer emits heads * out)
  int64_t heads = 1;          // GAT
  float attn_dropout = 0.f;   // GAT, on the softmax weights while training
  float negative_slope = 0.2f;
  int64_t gin_hidden = 0;     // GIN's MLP hidden width (0: out)
  double gin_eps = 0;         // GIN: (1 + eps) * x + sum of neighbours (the initial eps when trained)
  bool train_eps = false;     // GIN: eps is a trainable parameter (PyG's GINConv(train_eps=True))
  int64_t maxk = 0;           // > 0: keep the k largest hidden features (MaxK) before aggregation
  uint64_t seed = 1;          // initialisation
};

class Layer {
 public:
  virtual ~Layer() = default;
  // `step_seed` varies per call (attention dropout masks).
  virtual Tensor forward(GraphContext& ctx, const Tensor& x, bool training, uint64_t step_seed) = 0;
  // Sets every parameter's grad; returns d loss / d x when need_input_grad (else undefined).
  virtual Tensor backward(GraphContext& ctx, const Tensor& grad_out, bool need_input_grad) = 0;
  virtual std::vector<Parameter*> parameters() = 0;
  virtual int64_t out_width() const = 0;
  virtual std::string describe() const = 0;
  // When set, forward writes its output (backward: its input gradient) into a buffer the layer
  // keeps and overwrites on the next call instead of allocating a tensor per call (on the GPU a
  // cudaMalloc, and a cudaFree that synchronises the device). For callers that consume each
  // result before the next call, as Model does; off by default.
  void reuse_buffers(bool output, bool input_grad) {
    reuse_out_ = output;
    reuse_dx_ = input_grad;
  }

 protected:
  bool reuse_out_ = false, reuse_dx_ = false;
};

// GCNConv: A_hat (x W) + b with A_hat = D^-1/2 (A + I) D^-1/2 (transform first when it narrows).
// SAGEConv: mean_{u in N(v)} x_u W_n + x_v W_r + b.
// GINConv: MLP((1 + eps) x_v + sum_{u in N(v)} x_u), MLP = Linear, ReLU, Linear; eps fixed (on
// the graph's diagonal) or, with train_eps, a parameter "eps" (the self term added separately).
// GATConv: heads of softmax_u(LeakyReLU(a_l . W x_u + a_r . W x_v)) W x_u, concatenated, + b.
// With spec.maxk > 0 the transformed features pass through MaxK (top-k per row, CBSR) and are
// aggregated by cbsr_spgemm; the layer then has no other nonlinearity (MaxK replaces ReLU).
std::unique_ptr<Layer> make_conv(const ConvSpec& spec, DType dtype, Device device);

}  // namespace spgnn::nn
