// Graph convolutions: forward, backward and the derived graphs they aggregate over.
#include "spgnn/nn/layers.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace spgnn::nn {

// ---- GraphContext --------------------------------------------------------------------------------

namespace {
enum GraphKindId { kPlain = 0, kGcn = 1, kMean = 2, kGin = 3, kLoops = 4 };

template <class I>
void edges_of(const Graph& g, std::vector<int64_t>& r, std::vector<int64_t>& c) {
  const I* pr = g.row.data<I>();
  const I* pc = g.col.data<I>();
  r.assign(pr, pr + g.nnz());
  c.assign(pc, pc + g.nnz());
}

// Pattern + (1 + eps) on the diagonal; an existing self loop sums with it (A_ii + 1 + eps).
Graph with_diagonal(const Graph& g, double diag) {
  std::vector<int64_t> r, c;
  if (g.index_dtype() == DType::i64) edges_of<int64_t>(g, r, c);
  else edges_of<int32_t>(g, r, c);
  std::vector<float> v(r.size(), 1.f);
  for (int64_t i = 0; i < g.n_rows; ++i) {
    r.push_back(i);
    c.push_back(i);
    v.push_back(float(diag));
  }
  BuildOptions b;
  b.duplicates = DuplicatePolicy::sum;
  return graph_from_edges(g.n_rows, g.n_cols, r, c, v, b);
}
}  // namespace

GraphContext::GraphContext(const Graph& g, Device device, OpOptions options)
    : device_(device), options_(std::move(options)) {
  SPGNN_CHECK(g.row.defined() && g.rowptr.defined(), InvalidArgument,
              "GraphContext: graph 'g' has no arrays");
  SPGNN_CHECK(g.square(), InvalidArgument, "GraphContext: graph 'g' must be square (n_rows = ",
              g.n_rows, ", n_cols = ", g.n_cols, ")");
  host_ = g.device().is_cuda() ? g.to(Device::cpu()) : g;
  host_.val = Tensor();
  n_ = g.n_rows;
}

const Graph& GraphContext::get(Pair& p, bool transposed, int kind) {
  if (!p.fwd) {
    Graph h;
    switch (kind) {
      case kPlain: h = host_; break;
      case kGcn: h = gcn_normalize(host_); break;
      case kMean: h = mean_normalize(host_); break;
      case kGin: h = with_diagonal(host_, 1.0 + gin_eps_); break;
      default: {
        BuildOptions b;
        b.self_loops = SelfLoopPolicy::add;
        h = canonicalize(host_, b);
        h.val = Tensor();
      }
    }
    // The transposed graph carries the values in its own order, so backward aggregations read
    // them contiguously instead of through the permutation.
    Graph t = transpose(h).graph;
    p.fwd = std::make_unique<Graph>(device_.is_cuda() ? h.to(device_) : h);
    p.bwd = std::make_unique<Graph>(device_.is_cuda() ? t.to(device_) : t);
  }
  return transposed ? *p.bwd : *p.fwd;
}

const Graph& GraphContext::plain(bool t) { return get(plain_, t, kPlain); }
const Graph& GraphContext::gcn(bool t) { return get(gcn_, t, kGcn); }
const Graph& GraphContext::mean(bool t) { return get(mean_, t, kMean); }
const Graph& GraphContext::loops(bool t) { return get(loops_, t, kLoops); }
const Graph& GraphContext::gin(double eps, bool t) {
  if (gin_.fwd && eps != gin_eps_) gin_ = Pair{};
  gin_eps_ = eps;
  return get(gin_, t, kGin);
}

const char* conv_name(ConvKind k) {
  switch (k) {
    case ConvKind::gcn: return "gcn";
    case ConvKind::sage: return "sage";
    case ConvKind::gin: return "gin";
    case ConvKind::gat: return "gat";
  }
  return "?";
}

ConvKind parse_conv_kind(const std::string& s) {
  if (s == "gcn") return ConvKind::gcn;
  if (s == "sage" || s == "graphsage") return ConvKind::sage;
  if (s == "gin") return ConvKind::gin;
  if (s == "gat") return ConvKind::gat;
  throw InvalidArgument("model '" + s + "': expected gcn, sage, gin or gat");
}

namespace {

Parameter make_weight(const std::string& name, int64_t in, int64_t out, uint64_t seed, DType dt,
                      Device dev) {
  Parameter p;
  p.name = name;
  p.value = glorot({in, out}, in, out, seed, dt, dev);
  return p;
}
Parameter make_zeros(const std::string& name, int64_t n, DType dt, Device dev) {
  Parameter p;
  p.name = name;
  p.value = Tensor::zeros({n}, dt, dev);
  p.decay = false;
  return p;
}
Parameter make_vector(const std::string& name, int64_t heads, int64_t f, uint64_t seed, DType dt,
                      Device dev) {
  Parameter p;
  p.name = name;
  // PyG initialises the attention vectors with Glorot over (heads, F) viewed as [1, H*F].
  p.value = glorot({heads * f}, 1, f, seed, dt, dev);
  p.decay = false;
  return p;
}

// Options for the MaxK and attention ops: the same stream, but their own `auto` schedule (the
// context's schedule names an SpMM strategy, e.g. --strategy gnnone, which they do not have).
OpOptions auto_options(const GraphContext& ctx) {
  OpOptions o;
  o.stream = ctx.options().stream;
  return o;
}

// Weight gradient g = a^T b into p.grad (allocating once).
void weight_grad(Parameter& p, const Tensor& a, const Tensor& b) { gemm(a, true, b, false, p.grad, 0); }
void bias_grad(Parameter& p, const Tensor& dy) { column_sum(dy, p.grad, 0); }

// The MaxK nonlinearity on the engine's float64 path: the same top-k rule as spgnn::maxk (ties
// to the lower column), as a dense 0/1 mask.
Tensor topk_mask_f64(const Tensor& h, int64_t k) {
  const int64_t n = h.dim(0), f = h.dim(1);
  Tensor m = Tensor::zeros({n, f}, DType::f64);
  const double* ph = h.data<double>();
  double* pm = m.data<double>();
  std::vector<int64_t> order(static_cast<size_t>(f));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < f; ++j) order[size_t(j)] = j;
    const double* row = ph + i * f;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return row[a] > row[b]; });
    for (int64_t j = 0; j < k; ++j) pm[i * f + order[size_t(j)]] = 1.0;
  }
  return m;
}
void mul_(Tensor& x, const Tensor& mask) {
  double* px = x.data<double>();
  const double* pm = mask.data<double>();
  for (int64_t i = 0; i < x.numel(); ++i) px[i] *= pm[i];
}

// A linear transform followed by an optional MaxK and an aggregation over one graph with edge
// weights: the shared core of GCN, SAGE's neighbour branch and GIN's first layer.
//   transform-first: out = A (x W);  aggregate-first: out = (A x) W  (the narrower side is
//   aggregated); MaxK: out = A maxk(x W) with A applied by cbsr_spgemm.
class AggregatedLinear {
 public:
  enum class Graphs { gcn, mean, gin };
  AggregatedLinear(Graphs graphs, double gin_eps, int64_t in, int64_t out, int64_t maxk,
                   Parameter* weight)
      : graphs_(graphs), eps_(gin_eps), in_(in), out_(out), maxk_(maxk), w_(weight) {}

  Tensor forward(GraphContext& ctx, const Tensor& x) {
    x_ = x;
    const Graph& g = graph(ctx, false);
    const Reduce red = graphs_ == Graphs::mean ? Reduce::mean : Reduce::sum;
    const Tensor& w = graphs_ == Graphs::mean ? Tensor() : g.val;
    const Graph& ga = graphs_ == Graphs::mean ? ctx.plain(false) : g;
    if (maxk_ > 0) {
      Tensor h = matmul(x, w_->value);
      if (h.dtype() == DType::f64) {
        mask_ = topk_mask_f64(h, maxk_);
        mul_(h, mask_);
        return aggregate(ga, w, red, h, ctx.options());
      }
      kept_ = maxk(h, maxk_, auto_options(ctx));
      Tensor out;
      cbsr_spgemm(g, kept_, g.val, out, auto_options(ctx));
      return out;
    }
    transform_first_ = out_ <= in_;
    if (transform_first_) return aggregate(ga, w, red, matmul(x, w_->value), ctx.options());
    z_ = aggregate(ga, w, red, x, ctx.options());
    return matmul(z_, w_->value);
  }

  // Sets the weight's grad; returns d x when asked.
  Tensor backward(GraphContext& ctx, const Tensor& dy, bool need_dx) {
    const Graph& gt = graph(ctx, true);
    Tensor dh;
    if (maxk_ > 0 && dy.dtype() == DType::f32) {
      Tensor d_data;
      const Graph& g = graph(ctx, false);
      cbsr_sspmm(g, g.val, dy, kept_, d_data, auto_options(ctx));
      dh = maxk_backward(kept_, d_data, auto_options(ctx));
    } else if (maxk_ > 0 || transform_first_) {
      dh = aggregate(gt, gt.val, Reduce::sum, dy, ctx.options());
      if (maxk_ > 0) mul_(dh, mask_);
    }
    if (dh.defined()) {
      weight_grad(*w_, x_, dh);
      return need_dx ? matmul(dh, w_->value, false, true) : Tensor();
    }
    weight_grad(*w_, z_, dy);
    if (!need_dx) return Tensor();
    return aggregate(gt, gt.val, Reduce::sum, matmul(dy, w_->value, false, true), ctx.options());
  }

 private:
  const Graph& graph(GraphContext& ctx, bool t) {
    switch (graphs_) {
      case Graphs::gcn: return ctx.gcn(t);
      case Graphs::mean: return ctx.mean(t);
      case Graphs::gin: return ctx.gin(eps_, t);
    }
    return ctx.gcn(t);
  }
  Graphs graphs_;
  double eps_;
  int64_t in_, out_, maxk_;
  Parameter* w_;
  bool transform_first_ = false;
  Tensor x_, z_, mask_;
  Cbsr kept_;
};

void check_spec(const ConvSpec& s) {
  SPGNN_CHECK(s.in > 0 && s.out > 0, InvalidArgument, conv_name(s.kind),
              " layer: widths 'in' and 'out' must be positive, got ", s.in, " and ", s.out);
  SPGNN_CHECK(s.maxk >= 0 && s.maxk <= s.out, InvalidArgument, conv_name(s.kind),
              " layer: 'maxk' must be in [0, out = ", s.out, "], got ", s.maxk);
  SPGNN_CHECK(s.heads >= 1, InvalidArgument, "gat layer: 'heads' must be >= 1, got ", s.heads);
  SPGNN_CHECK(s.attn_dropout >= 0 && s.attn_dropout < 1, InvalidArgument,
              "gat layer: 'attn_dropout' must be in [0, 1), got ", s.attn_dropout);
}

class GcnConv : public Layer {
 public:
  GcnConv(const ConvSpec& s, DType dt, Device dev)
      : s_(s),
        w_(make_weight("weight", s.in, s.out, s.seed, dt, dev)),
        b_(make_zeros("bias", s.out, dt, dev)),
        agg_(AggregatedLinear::Graphs::gcn, 0, s.in, s.out, s.maxk, &w_) {}
  Tensor forward(GraphContext& ctx, const Tensor& x, bool, uint64_t) override {
    Tensor out = agg_.forward(ctx, x);
    add_bias_(out, b_.value);
    return out;
  }
  Tensor backward(GraphContext& ctx, const Tensor& dy, bool need_dx) override {
    bias_grad(b_, dy);
    return agg_.backward(ctx, dy, need_dx);
  }
  std::vector<Parameter*> parameters() override { return {&w_, &b_}; }
  int64_t out_width() const override { return s_.out; }
  std::string describe() const override {
    return "GCNConv(" + std::to_string(s_.in) + " -> " + std::to_string(s_.out) +
           (s_.maxk ? ", maxk " + std::to_string(s_.maxk) : "") + ")";
  }

 private:
  ConvSpec s_;
  Parameter w_, b_;
  AggregatedLinear agg_;
};

class SageConv : public Layer {
 public:
  SageConv(const ConvSpec& s, DType dt, Device dev)
      : s_(s),
        wn_(make_weight("weight_neigh", s.in, s.out, s.seed, dt, dev)),
        wr_(make_weight("weight_root", s.in, s.out, s.seed + 7919, dt, dev)),
        b_(make_zeros("bias", s.out, dt, dev)),
        agg_(AggregatedLinear::Graphs::mean, 0, s.in, s.out, s.maxk, &wn_) {}
  Tensor forward(GraphContext& ctx, const Tensor& x, bool, uint64_t) override {
    x_ = x;
    Tensor out = agg_.forward(ctx, x);
    gemm(x, false, wr_.value, false, out, 1.0);
    add_bias_(out, b_.value);
    return out;
  }
  Tensor backward(GraphContext& ctx, const Tensor& dy, bool need_dx) override {
    bias_grad(b_, dy);
    weight_grad(wr_, x_, dy);
    Tensor dx = agg_.backward(ctx, dy, need_dx);
    if (need_dx) gemm(dy, false, wr_.value, true, dx, 1.0);
    return dx;
  }
  std::vector<Parameter*> parameters() override { return {&wn_, &wr_, &b_}; }
  int64_t out_width() const override { return s_.out; }
  std::string describe() const override {
    return "SAGEConv(" + std::to_string(s_.in) + " -> " + std::to_string(s_.out) +
           ", mean, root weight" + (s_.maxk ? ", maxk " + std::to_string(s_.maxk) : "") + ")";
  }

 private:
  ConvSpec s_;
  Parameter wn_, wr_, b_;
  AggregatedLinear agg_;
  Tensor x_;
};

// GIN's first MLP layer commutes with the aggregation ((1+eps) x + A x) W1 = (A + (1+eps) I)(x W1),
// so it is applied on the narrower side like GCN's weight. With MaxK the hidden features are
// maxk(x W1) and the MLP's ReLU is dropped (MaxK is the nonlinearity).
class GinConv : public Layer {
 public:
  GinConv(const ConvSpec& s, DType dt, Device dev)
      : s_(s),
        hid_(s.gin_hidden > 0 ? s.gin_hidden : s.out),
        w1_(make_weight("mlp.0.weight", s.in, hid_, s.seed, dt, dev)),
        b1_(make_zeros("mlp.0.bias", hid_, dt, dev)),
        w2_(make_weight("mlp.2.weight", hid_, s.out, s.seed + 7919, dt, dev)),
        b2_(make_zeros("mlp.2.bias", s.out, dt, dev)),
        agg_(AggregatedLinear::Graphs::gin, s.gin_eps, s.in, hid_, s.maxk, &w1_) {
    SPGNN_CHECK(s.maxk <= hid_, InvalidArgument, "gin layer: 'maxk' ", s.maxk,
                " exceeds the MLP hidden width ", hid_);
  }
  Tensor forward(GraphContext& ctx, const Tensor& x, bool, uint64_t) override {
    h_ = agg_.forward(ctx, x);
    add_bias_(h_, b1_.value);
    if (s_.maxk == 0) activation_(h_, Activation::relu);
    Tensor out = matmul(h_, w2_.value);
    add_bias_(out, b2_.value);
    return out;
  }
  Tensor backward(GraphContext& ctx, const Tensor& dy, bool need_dx) override {
    bias_grad(b2_, dy);
    weight_grad(w2_, h_, dy);
    Tensor dh = matmul(dy, w2_.value, false, true);
    if (s_.maxk == 0) activation_backward_(dh, h_, Activation::relu);
    bias_grad(b1_, dh);
    return agg_.backward(ctx, dh, need_dx);
  }
  std::vector<Parameter*> parameters() override { return {&w1_, &b1_, &w2_, &b2_}; }
  int64_t out_width() const override { return s_.out; }
  std::string describe() const override {
    return "GINConv(" + std::to_string(s_.in) + " -> " + std::to_string(hid_) + " -> " +
           std::to_string(s_.out) + ", eps " + std::to_string(s_.gin_eps) +
           (s_.maxk ? ", maxk " + std::to_string(s_.maxk) : "") + ")";
  }

 private:
  ConvSpec s_;
  int64_t hid_;
  Parameter w1_, b1_, w2_, b2_;
  AggregatedLinear agg_;
  Tensor h_;
};

class GatConv : public Layer {
 public:
  GatConv(const ConvSpec& s, DType dt, Device dev)
      : s_(s),
        w_(make_weight("weight", s.in, s.heads * s.out, s.seed, dt, dev)),
        al_(make_vector("att_src", s.heads, s.out, s.seed + 1, dt, dev)),
        ar_(make_vector("att_dst", s.heads, s.out, s.seed + 2, dt, dev)),
        b_(make_zeros("bias", s.heads * s.out, dt, dev)) {
    SPGNN_CHECK(s.maxk == 0, InvalidArgument,
                "gat layer: MaxK is available for gcn, sage and gin (attention needs every "
                "feature of a head), got maxk = ", s.maxk);
  }
  Tensor forward(GraphContext& ctx, const Tensor& x, bool training, uint64_t step_seed) override {
    x_ = x;
    feat_ = matmul(x, w_.value);
    el_ = head_dot(feat_, al_.value, s_.heads);
    er_ = head_dot(feat_, ar_.value, s_.heads);
    const Graph& g = ctx.loops(false);
    Tensor out;
    attn_ = Tensor();
    params_.heads = s_.heads;
    params_.negative_slope = s_.negative_slope;
    params_.attn_dropout = training ? s_.attn_dropout : 0.f;
    params_.dropout_seed = step_seed;
    if (x.dtype() == DType::f64) {
      SPGNN_CHECK(params_.attn_dropout == 0.f, InvalidArgument,
                  "gat layer: the float64 path has no attention dropout (use attn_dropout 0)");
      gat_aggregate_f64(g, feat_, el_, er_, s_.heads, s_.negative_slope, out, attn_);
    } else {
      gat_aggregate(g, feat_, el_, er_, params_, out, attn_, auto_options(ctx));
    }
    add_bias_(out, b_.value);
    return out;
  }
  Tensor backward(GraphContext& ctx, const Tensor& dy, bool need_dx) override {
    bias_grad(b_, dy);
    const Graph& g = ctx.loops(false);
    Tensor gfeat, gel, ger;
    if (dy.dtype() == DType::f64)
      gat_aggregate_backward_f64(g, feat_, el_, er_, attn_, dy, s_.heads, s_.negative_slope,
                                 gfeat, gel, ger);
    else
      gat_aggregate_backward(g, feat_, el_, er_, attn_, dy, params_, gfeat, gel, ger,
                             auto_options(ctx));
    head_dot_backward(feat_, al_.value, s_.heads, gel, gfeat, al_.grad);
    head_dot_backward(feat_, ar_.value, s_.heads, ger, gfeat, ar_.grad);
    weight_grad(w_, x_, gfeat);
    return need_dx ? matmul(gfeat, w_.value, false, true) : Tensor();
  }
  std::vector<Parameter*> parameters() override { return {&w_, &al_, &ar_, &b_}; }
  int64_t out_width() const override { return s_.heads * s_.out; }
  std::string describe() const override {
    return "GATConv(" + std::to_string(s_.in) + " -> " + std::to_string(s_.heads) + " x " +
           std::to_string(s_.out) + ")";
  }

 private:
  ConvSpec s_;
  Parameter w_, al_, ar_, b_;
  GatParams params_;
  Tensor x_, feat_, el_, er_, attn_;
};

}  // namespace

std::unique_ptr<Layer> make_conv(const ConvSpec& spec, DType dtype, Device device) {
  check_spec(spec);
  SPGNN_CHECK(dtype == DType::f32 || (dtype == DType::f64 && !device.is_cuda()), InvalidArgument,
              "make_conv: 'dtype' must be float32, or float64 on the host; got ",
              dtype_name(dtype), " on ", device.str());
  switch (spec.kind) {
    case ConvKind::gcn: return std::make_unique<GcnConv>(spec, dtype, device);
    case ConvKind::sage: return std::make_unique<SageConv>(spec, dtype, device);
    case ConvKind::gin: return std::make_unique<GinConv>(spec, dtype, device);
    case ConvKind::gat: return std::make_unique<GatConv>(spec, dtype, device);
  }
  return nullptr;
}

}  // namespace spgnn::nn
