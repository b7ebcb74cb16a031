// Graph convolutions: forward, backward and the derived graphs they aggregate over.
#include "spgnn/nn/layers.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "dispatch/registry.hpp"
#include "nn/layers_internal.hpp"
#include "nn/profile.hpp"

namespace spgnn::nn {

// ---- aggregation width ---------------------------------------------------------------------------

namespace detail {
namespace {
bool g_force_padding = false;
}  // namespace

// The GPU SpMM strategies load features as float4 only when F % 4 == 0. On the Reddit-shaped
// graph, SAGE's output layer aggregated at F = 41 took 7.3 ms forward and 9.0 ms backward
// (`spgnn train --profile`, H100), more than a whole F = 64 SpMM in the suite (4.4 ms); zero
// columns up to 44 cost one narrow copy each way.
// Under half aggregations 16-byte half rows need a multiple of 8: SAGE's 41-class layer on the
// Reddit shape aggregates in float32 at 44 (2.42 ms, H200; bfloat16 at 44 takes 2.95) or in
// bfloat16 at 48 (1.58).
int64_t aggregation_width(int64_t f, const Tensor& x, const Graph* g) {
  if (g && x.dtype() == DType::f32 && aggregation_dtype() != DType::f32) {
    const int64_t m = spgnn::detail::kHalfSpmmWidthMultiple;
    const int64_t f8 = (f + m - 1) / m * m;
    if (spgnn::detail::half_spmm_pays(*g, f8)) return f8;
  }
  return pads_widths(x) && f % 4 != 0 ? (f + 3) / 4 * 4 : f;
}
void force_aggregation_padding(bool on) { g_force_padding = on; }
bool pads_widths(const Tensor& x) { return x.device().is_cuda() || g_force_padding; }
Tensor& keep(Tensor& buf, const std::vector<int64_t>& shape, DType dt, Device dev) {
  if (!buf.defined() || buf.shape() != shape || buf.dtype() != dt || buf.device() != dev)
    buf = Tensor::empty(shape, dt, dev);
  return buf;
}

Cbsr& keep_cbsr(Cbsr& c, const Tensor& x, int64_t k) {
  const bool fits = c.data.defined() && c.F == x.dim(1) && c.k == k &&
                    c.data.dim(0) == x.dim(0) && c.data.device() == x.device();
  if (!fits) c = Cbsr{};
  return c;
}

}  // namespace detail

// ---- GraphContext --------------------------------------------------------------------------------

namespace {
enum GraphKindId {
  kPlain = 0, kGcn = 1, kMean = 2, kGin = 3, kLoops = 4, kIdentity = 5, kInvDegree = 6
};

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

// The n x n diagonal, with `values` on it (none: the identity pattern).
Graph diagonal_graph(int64_t n, const std::vector<float>& values) {
  std::vector<int64_t> r(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) r[size_t(i)] = i;
  return graph_from_edges(n, n, r, r, values, BuildOptions{});
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
  std::unique_ptr<Graph>& slot = transposed ? p.bwd : p.fwd;
  if (!slot) {
    Graph h;
    switch (kind) {
      case kPlain: h = host_; break;
      case kGcn: h = gcn_normalize(host_); break;
      case kMean: h = mean_normalize(host_); break;
      case kGin: {
        h = with_diagonal(host_, 1.0 + gin_eps_);
        // MaxK-GIN's graph (GIN without MaxK adds eps after a plain sum). eps = 0 on a graph
        // without self loops: every weight is 1, so the CBSR products read no weight array
        // (4 bytes a non-zero).
        const float* v = h.val.data<float>();
        if (std::all_of(v, v + h.nnz(), [](float w) { return w == 1.f; })) h.val = Tensor();
        break;
      }
      case kIdentity: h = diagonal_graph(n_, {}); break;
      case kInvDegree: h = diagonal_graph(n_, inverse_degree(host_).to_vector<float>()); break;
      default: {
        BuildOptions b;
        b.self_loops = SelfLoopPolicy::add;
        h = canonicalize(host_, b);
        h.val = Tensor();
      }
    }
    // The transposed graph carries the values in its own order, so backward aggregations read
    // them contiguously instead of through the permutation. Each direction is built on its first
    // use only (SAGE's forward reads the pattern, its backward the transposed 1/deg weights).
    if (transposed) h = transpose(h).graph;
    slot = std::make_unique<Graph>(device_.is_cuda() ? h.to(device_) : h);
  }
  return *slot;
}

const Graph& GraphContext::plain(bool t) { return get(plain_, t, kPlain); }
const Graph& GraphContext::gcn(bool t) { return get(gcn_, t, kGcn); }
const Graph& GraphContext::mean(bool t) { return get(mean_, t, kMean); }
const Graph& GraphContext::loops(bool t) { return get(loops_, t, kLoops); }
const Graph& GraphContext::identity() { return get(identity_, false, kIdentity); }
const Graph& GraphContext::inv_degree() { return get(inv_degree_, false, kInvDegree); }
const Graph& GraphContext::gin(double eps, bool t) {
  if ((gin_.fwd || gin_.bwd) && eps != gin_eps_) gin_ = Pair{};
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
// PyG's Linear (SAGEConv's lin_l and lin_r, the torch Linear layers of GINConv's MLP) draws
// weights and biases from U(-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform with a = sqrt(5)): glorot's
// bound sqrt(6 / (fan_in + fan_out)) with fan_in = fan_out = 3 in. GCNConv and GATConv use
// glorot, as here. With glorot for SAGE too, the first steps on Amazon Computers' raw features
// pushed every hidden ReLU negative (docs/BENCHMARKS.md, "Mixed precision").
Parameter make_linear_weight(const std::string& name, int64_t in, int64_t out, uint64_t seed,
                             DType dt, Device dev) {
  Parameter p;
  p.name = name;
  p.value = glorot({in, out}, 3 * in, 3 * in, seed, dt, dev);
  return p;
}
Parameter make_linear_bias(const std::string& name, int64_t in, int64_t n, uint64_t seed, DType dt,
                           Device dev) {
  Parameter p;
  p.name = name;
  p.value = glorot({n}, 3 * in, 3 * in, seed, dt, dev);
  p.decay = false;
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
// GIN's trainable eps: a scalar offset like a bias, so no weight decay (spgnn decays weights only).
Parameter make_scalar(const std::string& name, double value, DType dt, Device dev) {
  Parameter p;
  p.name = name;
  p.value = Tensor::full({1}, dt, value, dev);
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

using detail::keep;
using detail::keep_cbsr;
// The same, zero-filled when (re)allocated: padding columns that no one writes stay zero.
Tensor& keep_zeroed(Tensor& buf, const std::vector<int64_t>& shape, DType dt, Device dev) {
  if (!buf.defined() || buf.shape() != shape || buf.dtype() != dt || buf.device() != dev)
    buf = Tensor::zeros(shape, dt, dev);
  return buf;
}
// The result tensor of a call that escapes to the caller: the kept buffer when the caller allows
// reuse and it has the expected shape, else undefined (the op writing it allocates a fresh one).
Tensor& result(Tensor& buf, bool reuse, const std::vector<int64_t>& shape) {
  if (!reuse || (buf.defined() && buf.shape() != shape)) buf = Tensor();
  return buf;
}

// Weight gradient g = a^T b into p.grad (allocating once).
void weight_grad(Parameter& p, const Tensor& a, const Tensor& b) { gemm(a, true, b, false, p.grad, 0); }
void bias_grad(Parameter& p, const Tensor& dy) { column_sum(dy, p.grad, 0); }

// A linear transform followed by an optional MaxK and an aggregation over one graph with edge
// weights: the shared core of GCN, SAGE's neighbour branch and GIN's first layer.
//   transform-first: out = A (x W);  aggregate-first: out = (A x) W  (the narrower side is
//   aggregated); MaxK: out = A maxk(x W) with A applied by cbsr_spgemm (sampled back by
//   cbsr_sspmm: the backward never builds the transposed graph).
// Transform-first runs at detail::aggregation_width(out): with padding, W is copied into a
// zero-padded [in, Fp] buffer, so x W has zero columns, and the result is narrowed to out.
// With an `eps` parameter (GIN) A is the plain adjacency and (1 + eps) times the aggregated
// operand is added to the aggregation; when eps trains, d eps = <d aggregation, aggregated
// operand>.
class AggregatedLinear {
 public:
  enum class Graphs { gcn, mean, gin, sum };
  AggregatedLinear(Graphs graphs, double gin_eps, int64_t in, int64_t out, int64_t maxk,
                   Parameter* weight, Parameter* eps, bool eps_grad = true)
      : graphs_(graphs), eps_(gin_eps), in_(in), out_(out), maxk_(maxk), w_(weight), eps_param_(eps),
        eps_grad_(eps != nullptr && eps_grad) {}

  Tensor forward(GraphContext& ctx, const Tensor& x, bool reuse) {
    x_ = x;
    const int64_t n = x.dim(0);
    const DType dt = x.dtype();
    const Device dev = x.device();
    Tensor& out = result(out_buf_, reuse, {ctx.n(), out_});
    if (maxk_ > 0) {
      Tensor& h = keep(h_, {n, out_}, dt, dev);
      gemm(x, false, w_->value, false, h, 0);
      if (dt == DType::f64) {
        mask_ = maxk_mask_f64(h, maxk_);
        mul_(h, mask_);
        aggregate_forward(ctx, h, out);
        if (eps_param_) add_scaled_(out, h, eps_param_->value, 1.0);
        return out;
      }
      const Graph& g = weighted(ctx);
      {
        detail::ProfileScope prof(Phase::maxk_cbsr);
        maxk(h, maxk_, keep_cbsr(kept_, h, maxk_), auto_options(ctx));
        cbsr_spgemm(g, kept_, g.val, out, auto_options(ctx));
      }
      if (eps_param_) {
        // maxk(h) as a dense matrix, written over h (maxk has read it; the backward uses kept_)
        {
          detail::ProfileScope prof(Phase::maxk_cbsr);
          maxk_backward(kept_, kept_.data, h, auto_options(ctx));
        }
        add_scaled_(out, h, eps_param_->value, 1.0);
      }
      return out;
    }
    transform_first_ = out_ <= in_;
    if (transform_first_) {
      width_ = detail::aggregation_width(out_, x, &forward_graph(ctx));
      Tensor& h = keep(h_, {n, width_}, dt, dev);
      gemm(x, false, transform_weight(), false, h, 0);
      Tensor& agg = width_ == out_ ? out : keep(agg_, {n, width_}, dt, dev);
      aggregate_forward(ctx, h, agg);
      if (eps_param_) add_scaled_(agg, h, eps_param_->value, 1.0);
      if (width_ == out_) return out;
      if (!out.defined()) out = Tensor::empty({n, out_}, dt, dev);
      copy_columns(agg, out, out_);
      return out;
    }
    Tensor& z = keep(z_, {ctx.n(), in_}, dt, dev);
    aggregate_forward(ctx, x, z);
    if (eps_param_) add_scaled_(z, x, eps_param_->value, 1.0);
    gemm(z, false, w_->value, false, out, 0);
    return out;
  }

  // Sets the weight's grad (and eps's); returns d x when asked.
  Tensor backward(GraphContext& ctx, const Tensor& dy, bool need_dx, bool reuse) {
    const int64_t n = dy.dim(0);
    const DType dt = dy.dtype();
    const Device dev = dy.device();
    Tensor* dh = nullptr;
    if (maxk_ > 0 && dt == DType::f32) {
      const Graph& g = weighted(ctx);
      {
        detail::ProfileScope prof(Phase::maxk_cbsr);
        cbsr_sspmm(g, g.val, dy, kept_, keep(d_data_, {n, maxk_}, dt, dev), auto_options(ctx));
      }
      if (eps_param_) {
        Tensor& self = keep(g_self_, {n, maxk_}, dt, dev);
        {
          detail::ProfileScope prof(Phase::maxk_cbsr);
          cbsr_sspmm(ctx.identity(), Tensor(), dy, kept_, self, auto_options(ctx));  // dy at kept
        }
        if (eps_grad_) dot(self, kept_.data, eps_param_->grad, 0);
        add_scaled_(d_data_, self, eps_param_->value, 1.0);
      }
      {
        detail::ProfileScope prof(Phase::maxk_cbsr);
        maxk_backward(kept_, d_data_, keep(dh_, {n, out_}, dt, dev), auto_options(ctx));
      }
      dh = &dh_;
    } else if (maxk_ > 0 || transform_first_) {
      const bool padded = maxk_ == 0 && width_ != out_;
      const Tensor* g = &dy;
      if (padded) {
        Tensor& dyp = keep_zeroed(dy_pad_, {n, width_}, dt, dev);
        copy_columns(dy, dyp, out_);
        g = &dyp;
      }
      aggregate_backward(ctx, *g, keep(dh_, {ctx.n(), padded ? width_ : out_}, dt, dev));
      if (eps_param_) {
        if (eps_grad_) dot(*g, h_, eps_param_->grad, 0);
        add_scaled_(dh_, *g, eps_param_->value, 1.0);
      }
      if (maxk_ > 0) mul_(dh_, mask_);
      dh = &dh_;
    }
    if (dh) {
      const bool padded = dh->dim(1) != out_;
      if (padded) {  // the padded columns' gradient is dropped
        gemm(x_, true, *dh, false, keep(gw_pad_, {in_, width_}, dt, dev), 0);
        copy_columns(gw_pad_, keep(w_->grad, {in_, out_}, dt, dev), out_);
      } else {
        weight_grad(*w_, x_, *dh);
      }
      if (!need_dx) return Tensor();
      Tensor& dx = result(dx_buf_, reuse, {n, in_});
      gemm(*dh, false, padded ? w_pad_ : w_->value, true, dx, 0);
      return dx;
    }
    weight_grad(*w_, z_, dy);
    if (!need_dx && !eps_grad_) return Tensor();
    Tensor& dz = keep(dz_, {n, in_}, dt, dev);
    gemm(dy, false, w_->value, true, dz, 0);
    if (eps_grad_) dot(dz, x_, eps_param_->grad, 0);
    if (!need_dx) return Tensor();
    Tensor& dx = result(dx_buf_, reuse, {ctx.n(), in_});
    aggregate_backward(ctx, dz, dx);
    if (eps_param_) add_scaled_(dx, dz, eps_param_->value, 1.0);
    return dx;
  }

 private:
  // Forward aggregation: SAGE's mean and the plain sum (GIN) read the bare pattern (copy_u), the
  // others their weighted graph; the backward one runs over the transposed weighted graph (sum).
  bool plain_forward() const { return graphs_ == Graphs::mean || graphs_ == Graphs::sum; }
  // The graph the forward aggregation runs over (also what the aggregation width is chosen for:
  // a variant the layer never aggregates over is not built for it).
  const Graph& forward_graph(GraphContext& ctx) {
    return plain_forward() ? ctx.plain(false) : weighted(ctx);
  }
  void aggregate_forward(GraphContext& ctx, const Tensor& x, Tensor& out) {
    const Graph& g = forward_graph(ctx);
    aggregate(g, plain_forward() ? Tensor() : g.val,
              graphs_ == Graphs::mean ? Reduce::mean : Reduce::sum, x, out, ctx.options());
  }
  void aggregate_backward(GraphContext& ctx, const Tensor& dy, Tensor& out) {
    if (graphs_ == Graphs::mean) {
      // A^T D^-1 dy: dy's rows scaled by 1 / deg (a diagonal SpMM), then summed over the plain
      // transpose. The transposed 1/deg weights cost the SpMM a weight per edge: 14.7 against
      // 12.8 ms at F = 256 on the Reddit shape (H200), the gap between SAGE's backward and
      // forward aggregations.
      const Graph& d = ctx.inv_degree();
      Tensor& scaled = keep(dy_scaled_, {dy.dim(0), dy.dim(1)}, dy.dtype(), dy.device());
      aggregate(d, d.val, Reduce::sum, dy, scaled, ctx.options());
      return aggregate(ctx.plain(true), Tensor(), Reduce::sum, scaled, out, ctx.options());
    }
    const Graph& gt = graph(ctx, true);
    aggregate(gt, gt.val, Reduce::sum, dy, out, ctx.options());
  }
  const Graph& weighted(GraphContext& ctx) { return graph(ctx, false); }
  // W, or its copy in a zero-padded [in, width_] buffer (refreshed every forward: W changes
  // with every optimiser step).
  const Tensor& transform_weight() {
    if (width_ == out_) return w_->value;
    copy_columns(w_->value, keep_zeroed(w_pad_, {in_, width_}, w_->value.dtype(), w_->value.device()), out_);
    return w_pad_;
  }
  const Graph& graph(GraphContext& ctx, bool t) {
    switch (graphs_) {
      case Graphs::gcn: return ctx.gcn(t);
      case Graphs::mean: return ctx.mean(t);
      case Graphs::gin: return ctx.gin(eps_, t);
      case Graphs::sum: return ctx.plain(t);
    }
    return ctx.gcn(t);
  }
  Graphs graphs_;
  double eps_;
  int64_t in_, out_, maxk_;
  Parameter* w_;
  Parameter* eps_param_;  // eps applied here (GIN), trainable or not
  bool eps_grad_;
  bool transform_first_ = false;
  int64_t width_ = 0;                 // transform-first: the (padded) aggregation width
  Tensor x_, h_, z_, mask_;           // saved by forward
  Tensor w_pad_, agg_, dy_pad_, gw_pad_;  // the padded transform-first path
  Tensor out_buf_, dx_buf_;           // results (reused when the owner allows)
  Tensor dh_, dz_, d_data_, g_self_;  // backward workspaces
  Tensor dy_scaled_;                  // the mean's backward: d out / deg
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
  SPGNN_CHECK(!s.train_eps || s.kind == ConvKind::gin, InvalidArgument, conv_name(s.kind),
              " layer: 'train_eps' applies to gin only");
}

class GcnConv : public Layer {
 public:
  GcnConv(const ConvSpec& s, DType dt, Device dev)
      : s_(s),
        w_(make_weight("weight", s.in, s.out, s.seed, dt, dev)),
        b_(make_zeros("bias", s.out, dt, dev)),
        agg_(AggregatedLinear::Graphs::gcn, 0, s.in, s.out, s.maxk, &w_, nullptr) {}
  Tensor forward(GraphContext& ctx, const Tensor& x, bool, uint64_t) override {
    Tensor out = agg_.forward(ctx, x, reuse_out_);
    add_bias_(out, b_.value);
    return out;
  }
  Tensor backward(GraphContext& ctx, const Tensor& dy, bool need_dx) override {
    bias_grad(b_, dy);
    return agg_.backward(ctx, dy, need_dx, reuse_dx_);
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
        wn_(make_linear_weight("weight_neigh", s.in, s.out, s.seed, dt, dev)),
        wr_(make_linear_weight("weight_root", s.in, s.out, s.seed + 7919, dt, dev)),
        b_(make_linear_bias("bias", s.in, s.out, s.seed + 104729, dt, dev)),
        agg_(AggregatedLinear::Graphs::mean, 0, s.in, s.out, s.maxk, &wn_, nullptr) {}
  Tensor forward(GraphContext& ctx, const Tensor& x, bool, uint64_t) override {
    x_ = x;
    Tensor out = agg_.forward(ctx, x, reuse_out_);
    gemm(x, false, wr_.value, false, out, 1.0);
    add_bias_(out, b_.value);
    return out;
  }
  Tensor backward(GraphContext& ctx, const Tensor& dy, bool need_dx) override {
    bias_grad(b_, dy);
    weight_grad(wr_, x_, dy);
    Tensor dx = agg_.backward(ctx, dy, need_dx, reuse_dx_);
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
// maxk(x W1) and the MLP's ReLU is dropped (MaxK is the nonlinearity). Without MaxK, eps (fixed
// or trainable) is applied by AggregatedLinear after a plain sum: the sum then runs as copy_u,
// with no weight to read per non-zero. Riding on the graph's diagonal, eps made every weight
// 1 + eps or 1 (2 on a self loop), a u_mul_e SpMM: H200, the directed Reddit shape, GIN 5 x 64,
// 19.3 ms of forward aggregation an epoch against 15.8 (docs/BENCHMARKS.md). With MaxK a fixed
// eps stays on the diagonal (the CBSR product reads the weights anyway; adding (1 + eps) maxk(h)
// would cost two more kernels).
class GinConv : public Layer {
 public:
  GinConv(const ConvSpec& s, DType dt, Device dev)
      : s_(s),
        hid_(s.gin_hidden > 0 ? s.gin_hidden : s.out),
        w1_(make_linear_weight("mlp.0.weight", s.in, hid_, s.seed, dt, dev)),
        b1_(make_linear_bias("mlp.0.bias", s.in, hid_, s.seed + 104729, dt, dev)),
        w2_(make_linear_weight("mlp.2.weight", hid_, s.out, s.seed + 7919, dt, dev)),
        b2_(make_linear_bias("mlp.2.bias", hid_, s.out, s.seed + 224737, dt, dev)),
        eps_(make_scalar("eps", s.gin_eps, dt, dev)),
        agg_(s.train_eps || s.maxk == 0 ? AggregatedLinear::Graphs::sum
                                         : AggregatedLinear::Graphs::gin,
             s.gin_eps, s.in, hid_, s.maxk, &w1_, s.train_eps || s.maxk == 0 ? &eps_ : nullptr,
             s.train_eps) {
    SPGNN_CHECK(s.maxk <= hid_, InvalidArgument, "gin layer: 'maxk' ", s.maxk,
                " exceeds the MLP hidden width ", hid_);
  }
  Tensor forward(GraphContext& ctx, const Tensor& x, bool, uint64_t) override {
    // h stays inside the layer (the backward reads it), so its buffer is always reused.
    h_ = agg_.forward(ctx, x, true);
    add_bias_(h_, b1_.value);
    if (s_.maxk == 0) activation_(h_, Activation::relu);
    Tensor& out = result(out_buf_, reuse_out_, {h_.dim(0), s_.out});
    gemm(h_, false, w2_.value, false, out, 0);
    add_bias_(out, b2_.value);
    return out;
  }
  Tensor backward(GraphContext& ctx, const Tensor& dy, bool need_dx) override {
    bias_grad(b2_, dy);
    weight_grad(w2_, h_, dy);
    Tensor& dh = keep(dh_, {dy.dim(0), hid_}, dy.dtype(), dy.device());
    gemm(dy, false, w2_.value, true, dh, 0);
    if (s_.maxk == 0) activation_backward_(dh, h_, Activation::relu);
    bias_grad(b1_, dh);
    return agg_.backward(ctx, dh, need_dx, reuse_dx_);
  }
  std::vector<Parameter*> parameters() override {
    if (s_.train_eps) return {&w1_, &b1_, &w2_, &b2_, &eps_};
    return {&w1_, &b1_, &w2_, &b2_};
  }
  int64_t out_width() const override { return s_.out; }
  std::string describe() const override {
    return "GINConv(" + std::to_string(s_.in) + " -> " + std::to_string(hid_) + " -> " +
           std::to_string(s_.out) + (s_.train_eps ? ", trainable eps" : ", eps " + std::to_string(s_.gin_eps)) +
           (s_.maxk ? ", maxk " + std::to_string(s_.maxk) : "") + ")";
  }

 private:
  ConvSpec s_;
  int64_t hid_;
  Parameter w1_, b1_, w2_, b2_, eps_;
  AggregatedLinear agg_;
  Tensor h_, dh_, out_buf_;
};

// Attention scores need every feature of a head (a_l . W x_u sums over all F of them) and the
// aggregation weights each neighbour's whole head by its score, so a k-sparse operand does not
// fit here: GAT + MaxK keeps this layer dense and uses MaxK as the nonlinearity between layers
// (Model), where ELU would be.
class GatConv : public Layer {
 public:
  GatConv(const ConvSpec& s, DType dt, Device dev)
      : s_(s),
        w_(make_weight("weight", s.in, s.heads * s.out, s.seed, dt, dev)),
        al_(make_vector("att_src", s.heads, s.out, s.seed + 1, dt, dev)),
        ar_(make_vector("att_dst", s.heads, s.out, s.seed + 2, dt, dev)),
        b_(make_zeros("bias", s.heads * s.out, dt, dev)) {
    SPGNN_CHECK(s.maxk == 0, InvalidArgument,
                "gat layer: MaxK cannot sparsify the attention operand (scores and weights need "
                "every feature of a head); a GAT model applies MaxK between layers instead, got "
                "maxk = ", s.maxk);
  }
  Tensor forward(GraphContext& ctx, const Tensor& x, bool training, uint64_t step_seed) override {
    x_ = x;
    const int64_t H = s_.heads, f = s_.out;
    // Heads whose width is not a multiple of 4 run at a zero-padded width on the GPU (as the
    // transform-first aggregations, detail::aggregation_width): W and the attention vectors get
    // zero columns, so the scores are unchanged and the padded output columns are zero. H100,
    // Reddit shape, one head: F = 41 forward 8.97 ms and backward 19.34, F = 44 6.24 and 15.27
    // (`spgnn bench gat --dim 41,44`): float4 loads instead of scalar ones.
    // Half attention (below) pads further, to a multiple of 8: its backward loads 8 halves a lane
    // only then, and 4 otherwise. H200, directed Reddit shape, one head, bfloat16: F = 44
    // backward 14.45 ms against 9.02 at 48 (forward 5.15 / 5.28), F = 12 5.91 against 4.93 at 16.
    half_ = x.dtype() == DType::f32 && aggregation_dtype() != DType::f32;
    const auto width = [&](int64_t w) {
      w = detail::aggregation_width(w, x);
      return half_ && detail::pads_widths(x) && w > 8 && w % 8 != 0 ? (w + 7) / 8 * 8 : w;
    };
    fp_ = width(f);
    params_.heads = s_.heads;
    params_.negative_slope = s_.negative_slope;
    params_.attn_dropout = training ? s_.attn_dropout : 0.f;
    params_.dropout_seed = step_seed;
    training_ = training;
    const Graph& g = ctx.loops(false);
    // One head narrower in than out (a classifier layer: 16 -> 41 in the training suite) attends
    // over x itself: the attention is linear in the features, sum_u a_uv (x_u W) = (sum_u a_uv
    // x_u) W, and the logits' el_u = (x_u W) . a_l = x_u . (W a_l). The per-edge gathers then
    // carry `in` features instead of the padded `out`: H200, the directed Reddit shape, the
    // fused kernels at F = 16 against 44 take 2.64 / 6.22 ms against 6.36 / 14.80 (forward /
    // backward, float32) and 2.38 / 4.86 against 5.12 / 14.32 (bfloat16). Several heads would
    // each need their own copy of x, so they keep the transform-first order.
    agg_first_ = H == 1 && s_.in < fp_ && width(s_.in) == s_.in;
    if (agg_first_) {
      // wl = W a_l and wr = W a_r as [in, 1] columns (GEMVs over the [in, out] weight)
      gemm(w_.value, false, al_.value.reshape({f, 1}), false,
           keep(wl_, {s_.in, 1}, x.dtype(), x.device()), 0);
      gemm(w_.value, false, ar_.value.reshape({f, 1}), false,
           keep(wr_, {s_.in, 1}, x.dtype(), x.device()), 0);
      el_ = head_dot(x, wl_, 1);
      er_ = head_dot(x, wr_, 1);
      Tensor& z = keep(z_, {g.n_rows, s_.in}, x.dtype(), x.device());
      attend(ctx, g, x, z, true);
      Tensor& out = result(out_buf_, reuse_out_, {g.n_rows, f});
      gemm(z, false, w_.value, false, out, 0);
      add_bias_(out, b_.value);
      return out;
    }
    const bool pad = fp_ != f;
    const Tensor& w = pad ? padded_heads(w_.value, w_pad_, s_.in) : w_.value;
    const Tensor& al = pad ? padded_heads(al_.value, al_pad_, 1) : al_.value;
    const Tensor& ar = pad ? padded_heads(ar_.value, ar_pad_, 1) : ar_.value;
    Tensor& feat = keep(feat_, {x.dim(0), H * fp_}, x.dtype(), x.device());
    gemm(x, false, w, false, feat, 0);
    el_ = head_dot(feat_, al, H);
    er_ = head_dot(feat_, ar, H);
    Tensor& out = result(out_buf_, reuse_out_, {g.n_rows, H * f});
    if (pad) {
      attend(ctx, g, feat_, keep(agg_pad_, {g.n_rows, H * fp_}, x.dtype(), x.device()), true);
      if (!out.defined()) out = Tensor::empty({g.n_rows, H * f}, x.dtype(), x.device());
      narrow_heads(agg_pad_, out, g.n_rows);
    } else {
      attend(ctx, g, feat_, out, false);
    }
    add_bias_(out, b_.value);
    return out;
  }
  Tensor backward(GraphContext& ctx, const Tensor& dy, bool need_dx) override {
    bias_grad(b_, dy);
    const Graph& g = ctx.loops(false);
    const DType dt = dy.dtype();
    const Device dev = dy.device();
    if (agg_first_) {
      const int64_t in = s_.in, f = s_.out;
      Tensor& dz = keep(dz_, {dy.dim(0), in}, dt, dev);
      gemm(dy, false, w_.value, true, dz, 0);  // d (sum_u a_uv x_u) = dy W^T
      weight_grad(w_, z_, dy);
      // the feature path's d x, then el's and er's shares (head_dot_backward adds them)
      Tensor& dx = result(dx_buf_, reuse_dx_, {x_.dim(0), in});
      attend_backward(ctx, g, x_, dz, dx);
      head_dot_backward(x_, wl_, 1, gel_, dx, gwl_);
      head_dot_backward(x_, wr_, 1, ger_, dx, gwr_);
      // wl = W a_l: d W += d wl a_l^T and d a_l = W^T d wl (as er's)
      gemm(gwl_, false, al_.value.reshape({1, f}), false, w_.grad, 1.0);
      gemm(gwr_, false, ar_.value.reshape({1, f}), false, w_.grad, 1.0);
      Tensor gal = keep(al_.grad, al_.value.shape(), dt, dev).reshape({f, 1});
      gemm(w_.value, true, gwl_, false, gal, 0);
      Tensor gar = keep(ar_.grad, ar_.value.shape(), dt, dev).reshape({f, 1});
      gemm(w_.value, true, gwr_, false, gar, 0);
      return need_dx ? dx : Tensor();
    }
    const int64_t H = s_.heads, f = s_.out, w = H * fp_;
    const bool pad = fp_ != f;
    const Tensor* gy = &dy;
    if (pad) {  // the padded columns' upstream gradient is zero
      Tensor& dyp = keep_zeroed(dy_pad_, {dy.dim(0), w}, dt, dev);
      Tensor dst = dyp.reshape({dy.dim(0) * H, fp_});
      copy_columns(dy.reshape({dy.dim(0) * H, f}), dst, f);
      gy = &dyp;
    }
    if (gfeat_.defined() && gfeat_.shape() != std::vector<int64_t>{g.n_cols, w}) gfeat_ = Tensor();
    attend_backward(ctx, g, feat_, *gy, gfeat_);
    if (!pad) {
      head_dot_backward(feat_, al_.value, s_.heads, gel_, gfeat_, al_.grad);
      head_dot_backward(feat_, ar_.value, s_.heads, ger_, gfeat_, ar_.grad);
      weight_grad(w_, x_, gfeat_);
    } else {  // gradients at the padded width, narrowed to the parameters' own
      head_dot_backward(feat_, al_pad_, s_.heads, gel_, gfeat_, al_gpad_);
      head_dot_backward(feat_, ar_pad_, s_.heads, ger_, gfeat_, ar_gpad_);
      narrow_heads(al_gpad_.reshape({1, w}), keep(al_.grad, al_.value.shape(), dt, dev), 1);
      narrow_heads(ar_gpad_.reshape({1, w}), keep(ar_.grad, ar_.value.shape(), dt, dev), 1);
      gemm(x_, true, gfeat_, false, keep(gw_pad_, {s_.in, w}, dt, dev), 0);
      narrow_heads(gw_pad_, keep(w_.grad, w_.value.shape(), dt, dev), s_.in);
    }
    if (!need_dx) return Tensor();
    Tensor& dx = result(dx_buf_, reuse_dx_, {x_.dim(0), s_.in});
    gemm(gfeat_, false, pad ? w_pad_ : w_.value, true, dx, 0);
    return dx;
  }
  std::vector<Parameter*> parameters() override { return {&w_, &al_, &ar_, &b_}; }
  int64_t out_width() const override { return s_.heads * s_.out; }
  std::string describe() const override {
    return "GATConv(" + std::to_string(s_.in) + " -> " + std::to_string(s_.heads) + " x " +
           std::to_string(s_.out) + ")";
  }

 private:
  // The attention aggregation of `feat` ([n, H * w]) into `agg` (allocated when undefined), with
  // attn_ and params_ as the forward set them. Half aggregations (spgnn train --dtype bf16|f16):
  // the attention runs on a half copy of feat (the fused kernels' half path: the per-edge feature
  // gathers are what halves shrink) and keeps its weights in half; el and er stay float32 (the
  // kernels read them so, and their sum is the logit), as do the layer's own values. The host
  // converts too, so CPU runs show the precision a GPU run has. The half path's out comes
  // straight into the float32 agg, unrounded. On the GPU, both paths keep each row's softmax
  // state and negative-logit sums: the backward then walks the edges once, by source
  // (GatParams::negative_logit_sums). `kept`: agg stays as written until the backward (else the
  // backward's forward_out is a copy of it).
  void attend(GraphContext& ctx, const Graph& g, const Tensor& feat, Tensor& agg, bool kept) {
    agg_out_ = nullptr;
    const std::vector<int64_t> attn_shape{g.nnz(), s_.heads};
    const Device dev = feat.device();
    if (half_) {
      detail::ProfileScope prof(Phase::aggregate_forward);
      const DType hd = aggregation_dtype();
      const OpOptions opt = auto_options(ctx);
      detail::convert_into(feat, keep(feat_h_, feat.shape(), hd, dev), opt.stream);
      if (attn_.defined() && (attn_.shape() != attn_shape || attn_.dtype() != hd)) attn_ = Tensor();
      if (!agg.defined()) agg = Tensor::empty({g.n_rows, feat.dim(1)}, DType::f32, dev);
      gat_aggregate(g, feat_h_, el_, er_, for_backward(), agg, attn_, opt);
      keep_out(agg, kept, opt);
    } else if (feat.dtype() == DType::f64) {
      SPGNN_CHECK(params_.attn_dropout == 0.f, InvalidArgument,
                  "gat layer: the float64 path has no attention dropout (use attn_dropout 0)");
      gat_aggregate_f64(g, feat, el_, er_, s_.heads, s_.negative_slope, agg, attn_);
    } else {
      detail::ProfileScope prof(Phase::aggregate_forward);
      // (a half forward before this one, under another aggregation dtype, left half weights)
      if (attn_.defined() && (attn_.shape() != attn_shape || attn_.dtype() != feat.dtype()))
        attn_ = Tensor();
      const OpOptions opt = auto_options(ctx);
      gat_aggregate(g, feat, el_, er_, for_backward(), agg, attn_, opt);
      keep_out(agg, kept, opt);
    }
  }
  // The forward's parameters, asking (when training) for what the backward's one walk by source
  // reads; an evaluation forward leaves them undefined (and costs 1-11% less on the GPU).
  GatParams for_backward() {
    GatParams fp = params_;
    if (training_) {
      fp.softmax_state = &state_;
      fp.negative_logit_sums = &neg_;
    } else {
      state_ = Tensor();
      neg_ = Tensor();
    }
    return fp;
  }
  // The forward's out as the backward reads it (only the fused GPU backward does).
  void keep_out(const Tensor& agg, bool kept, const OpOptions& opt) {
    if (!agg.device().is_cuda()) return;
    if (!kept) keep(agg_keep_, agg.shape(), agg.dtype(), agg.device()).copy_from(agg, opt.stream);
    agg_out_ = kept ? &agg : &agg_keep_;
  }
  // Its backward for the upstream gradient gy: d feat into gfeat (allocated when undefined), d el
  // and d er into gel_ and ger_. The half path takes half operands and writes float32 gradients
  // unrounded (rounded to a half, they would only be widened again for the float32 weights).
  void attend_backward(GraphContext& ctx, const Graph& g, const Tensor& feat, const Tensor& gy,
                       Tensor& gfeat) {
    const DType dt = gy.dtype();
    const Device dev = gy.device();
    const int64_t w = feat.dim(1);
    if (half_) {
      detail::ProfileScope prof(Phase::aggregate_forward);  // counted as backward in this pass
      const DType hd = feat_h_.dtype();
      const OpOptions opt = auto_options(ctx);
      detail::convert_into(gy, keep(gy_h_, gy.shape(), hd, dev), opt.stream);
      if (!gfeat.defined()) gfeat = Tensor::empty({g.n_cols, w}, dt, dev);
      GatParams bp = params_;
      bp.forward_out = agg_out_;
      bp.softmax_state = &state_;  // (undefined where the forward did not write it)
      bp.negative_logit_sums = &neg_;
      gat_aggregate_backward(g, feat_h_, el_, er_, attn_, gy_h_, bp, gfeat,
                             keep(gel_, {g.n_cols, s_.heads}, dt, dev),
                             keep(ger_, {g.n_rows, s_.heads}, dt, dev), opt);
    } else if (dt == DType::f64) {
      gat_aggregate_backward_f64(g, feat, el_, er_, attn_, gy, s_.heads, s_.negative_slope, gfeat,
                                 gel_, ger_);
    } else {
      detail::ProfileScope prof(Phase::aggregate_forward);  // counted as backward in this pass
      if (gel_.defined() && gel_.shape() != std::vector<int64_t>{g.n_cols, s_.heads}) gel_ = Tensor();
      if (ger_.defined() && ger_.shape() != std::vector<int64_t>{g.n_rows, s_.heads}) ger_ = Tensor();
      GatParams bp = params_;
      bp.forward_out = agg_out_;
      bp.softmax_state = &state_;
      bp.negative_logit_sums = &neg_;
      gat_aggregate_backward(g, feat, el_, er_, attn_, gy, bp, gfeat, gel_, ger_,
                             auto_options(ctx));
    }
  }
  // [rows, H * out] (a weight, or an attention vector as one row) into `buf`, [rows, H * fp_]
  // with each head's columns zero-padded (refreshed every forward: the values change with every
  // optimiser step; the padding columns are never written).
  const Tensor& padded_heads(const Tensor& v, Tensor& buf, int64_t rows) {
    const int64_t H = s_.heads;
    Tensor& b = keep_zeroed(buf, v.ndim() == 1 ? std::vector<int64_t>{H * fp_}
                                                 : std::vector<int64_t>{rows, H * fp_},
                            v.dtype(), v.device());
    Tensor dst = b.reshape({rows * H, fp_});
    copy_columns(v.reshape({rows * H, s_.out}), dst, s_.out);
    return b;
  }
  // The inverse: [rows, H * fp_] narrowed to [rows, H * out] (into a tensor of any shape with
  // those elements, e.g. a 1-D attention-vector gradient).
  void narrow_heads(const Tensor& padded, Tensor& out, int64_t rows) {
    const int64_t H = s_.heads;
    Tensor dst = out.reshape({rows * H, s_.out});
    copy_columns(padded.reshape({rows * H, fp_}), dst, s_.out);
  }

  ConvSpec s_;
  Parameter w_, al_, ar_, b_;
  GatParams params_;
  int64_t fp_ = 0;  // the heads' width in the last forward: s_.out, or padded to a multiple of 4
  bool half_ = false;  // the last forward ran the attention in aggregation_dtype()
  bool training_ = false;  // the last forward's
  bool agg_first_ = false;  // the last forward attended over x (one head, in < out)
  Tensor x_, feat_, el_, er_, attn_;
  Tensor wl_, wr_, z_, dz_, gwl_, gwr_;  // aggregate-first: W a_l, W a_r, the attended x
  Tensor feat_h_, gy_h_;  // half copies (half_)
  // the forward's softmax state and negative-logit sums (GatParams::softmax_state and
  // negative_logit_sums; the fused GPU forward writes them, for the backward's one walk by source)
  Tensor state_, neg_;
  // the attention's output as the backward reads it (GatParams::forward_out): z_ or agg_pad_
  // themselves, or agg_keep_, a copy of an output that the bias is added to
  const Tensor* agg_out_ = nullptr;
  Tensor agg_keep_;
  Tensor out_buf_, dx_buf_, gfeat_, gel_, ger_;
  Tensor w_pad_, al_pad_, ar_pad_, agg_pad_, dy_pad_, al_gpad_, ar_gpad_, gw_pad_;  // padded heads
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
