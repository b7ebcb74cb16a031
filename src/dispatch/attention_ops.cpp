// The front door of the attention ops (edge_softmax and GAT aggregation): checks every argument,
// allocates outputs, picks the strategy and hands a trusted problem to one kernel.
//
// Strategies (OpOptions::schedule.strategy):
//   edge_softmax[_backward]: auto (cuda on GPU data, cpu on CPU data), cuda, cpu (OpenMP),
//     cpu_ref (float64 oracle).
//   gat_aggregate[_backward]: auto (gat_fused on GPU data, cpu on CPU data), gat_fused (GPU;
//     parameters warps = warps per block, heavy_deg = rows with more edges are split over several
//     warps (forward and backward; unset: 1024 forward; backward 256 or 4x the average
//     degree, attention_kernels.hpp), heads_per_chunk = heads sharing one pass over the edges
//     (forward; 0 = as many as one warp pass holds, up to 8), bwd_atomic = 1 to scatter
//     source gradients with atomics instead of gathering them over the cached transpose, 0 to
//     gather; unset, float32 picks by graph and width, gat_bwd_prefers_atomic in
//     attention_kernels.hpp), unfused (forward only: spgnn's own gsddmm -> LeakyReLU ->
//     edge_softmax -> [dropout] -> gspmm, on either device), cpu, cpu_ref.
// These ops are not in the spmm/sddmm registry (their problems differ); the names above are the
// whole list, and an unknown name or parameter is an InvalidArgument that lists them.
#include <cmath>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/half.hpp"
#include "kernels/attention_problem.hpp"
#include "kernels/cpu/attention_cpu.hpp"
#include "dispatch/problem.hpp"
#include "spgnn/ops.hpp"
#if SPGNN_WITH_CUDA
#include "kernels/cuda/attention_kernels.hpp"
#endif

namespace spgnn {

namespace {

using detail::GatProblem;
using detail::SoftmaxBwdProblem;
using detail::SoftmaxProblem;

std::string shape_of(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// An input of dtype `dt` (float32 unless a half kernel reads it) on the graph's device with
// exactly `shape`; `expect` names the dimensions.
void check_input(const Tensor& t, const char* arg, const char* op, const Graph& g,
                 const std::vector<int64_t>& shape, const char* expect, DType dt = DType::f32) {
  SPGNN_CHECK(t.defined(), InvalidArgument, op, ": argument '", arg, "' is required (", expect,
              ")");
  SPGNN_CHECK(t.dtype() == dt, InvalidArgument, op, ": '", arg, "' must be ", dtype_name(dt),
              ", got ", dtype_name(t.dtype()));
  SPGNN_CHECK(t.device() == g.device(), InvalidArgument, op, ": '", arg, "' is on ",
              t.device().str(), " but the graph is on ", g.device().str());
  SPGNN_CHECK(t.shape() == shape, InvalidArgument, op, ": '", arg, "' must have shape ", expect,
              " = ", shape_of(shape), ", got ", t.shape_str());
}

void prepare_output(Tensor& out, const char* arg, const char* op, const std::vector<int64_t>& shape,
                    Device device, DType dt = DType::f32) {
  if (!out.defined()) {
    out = Tensor::empty(shape, dt, device);
    return;
  }
  SPGNN_CHECK(out.dtype() == dt, InvalidArgument, op, ": output '", arg, "' must be ",
              dtype_name(dt), ", got ", dtype_name(out.dtype()));
  SPGNN_CHECK(out.device() == device, InvalidArgument, op, ": output '", arg, "' is on ",
              out.device().str(), ", expected ", device.str());
  SPGNN_CHECK(out.shape() == shape, InvalidArgument, op, ": output '", arg, "' has shape ",
              out.shape_str(), ", expected ", shape_of(shape));
}

// ---- strategies ---------------------------------------------------------------------------------

struct Resolved {
  std::string name;
  int warps = 4;
  bool bwd_atomic = false;
  bool bwd_atomic_set = false;  // else the float32 backward picks (gat_bwd_prefers_atomic)
  int64_t heavy_deg = 1024;
  bool heavy_deg_set = false;  // else the backward splits at its own default
  int heads_per_chunk = 0;
};

const std::map<std::string, std::pair<std::vector<int64_t>, int64_t>>& gat_fused_params() {
  static const std::map<std::string, std::pair<std::vector<int64_t>, int64_t>> p = {
      {"warps", {{1, 2, 4, 8, 16}, 4}},
      {"bwd_atomic", {{0, 1}, 0}},
      {"heavy_deg", {{64, 128, 256, 512, 1024, 2048, 4096}, 1024}},
      {"heads_per_chunk", {{0, 1, 2, 4, 8}, 0}}};
  return p;
}

Resolved resolve(const Schedule& s, const Graph& g, const char* op, bool gat, bool backward) {
  const bool cuda = g.device().is_cuda();
  const std::set<std::string> names = gat ? std::set<std::string>{"gat_fused", "unfused", "cpu",
                                                                   "cpu_ref"}
                                          : std::set<std::string>{"cuda", "cpu", "cpu_ref"};
  Resolved r;
  r.name = s.strategy;
  if (r.name == "auto") r.name = cuda ? (gat ? "gat_fused" : "cuda") : "cpu";
  if (!names.count(r.name)) {
    std::string known = "auto";
    for (const auto& n : names) known += ", " + n;
    throw InvalidArgument(std::string(op) + ": unknown strategy '" + s.strategy +
                          "'; the strategies of this op are: " + known);
  }
  for (const auto& [key, value] : s.params) {
    const auto& spec = gat_fused_params();
    auto it = spec.find(key);
    SPGNN_CHECK(r.name == "gat_fused" && it != spec.end(), InvalidArgument, op, ": strategy '",
                r.name, "' has no parameter '", key, "'",
                r.name == "gat_fused"
                    ? " (it has warps, bwd_atomic, heavy_deg and heads_per_chunk)"
                    : " (it has none)");
    bool legal = false;
    for (int64_t v : it->second.first) legal = legal || v == value;
    SPGNN_CHECK(legal, InvalidArgument, op, ": gat_fused parameter '", key, "' = ", value,
                " is not one of its legal values");
    if (key == "warps") {
      r.warps = static_cast<int>(value);
    } else if (key == "heavy_deg") {
      r.heavy_deg = value;
      r.heavy_deg_set = true;
    } else if (key == "heads_per_chunk") {
      r.heads_per_chunk = static_cast<int>(value);
    } else {
      r.bwd_atomic = value != 0;
      r.bwd_atomic_set = true;
    }
  }
  const bool gpu_only = r.name == "gat_fused" || r.name == "cuda";
  const bool cpu_only = r.name == "cpu" || r.name == "cpu_ref";
  SPGNN_CHECK(!(gpu_only && !cuda), Unsupported, op, ": strategy '", r.name,
              "' runs on CUDA devices; the graph and tensors are on the CPU");
  SPGNN_CHECK(!(cpu_only && cuda), Unsupported, op, ": strategy '", r.name,
              "' runs on the CPU; the graph and tensors are on ", g.device().str());
  SPGNN_CHECK(!(backward && r.name == "unfused"), Unsupported, op,
              ": the unfused composition is forward-only (it exists to compare against "
              "gat_fused); use gat_fused, cpu or cpu_ref for the backward pass");
#if !SPGNN_WITH_CUDA
  SPGNN_CHECK(!gpu_only, Unsupported, op, ": strategy '", r.name,
              "' needs a build with CUDA (SPGNN_WITH_CUDA=ON)");
#endif
  return r;
}

#if SPGNN_WITH_CUDA
// The fused backward's split threshold: the schedule's heavy_deg, else its own default for g's
// average degree (the forward's 1024 is no default for it).
int64_t bwd_heavy_deg(const Resolved& r, const Graph& g) {
  if (r.heavy_deg_set) return r.heavy_deg;
  return detail::gat_bwd_heavy_deg(g.n_rows ? double(g.nnz()) / double(g.n_rows) : 0.0);
}
#endif

// ---- shared derived data ------------------------------------------------------------------------

// The transposed structure (no values) and its edge permutation, on the graph's device, computed
// once per graph structure and kept in Graph::cache (it depends on row/col only).
struct CachedTranspose {
  Graph graph;
  Tensor perm;
};

// Keyed by index dtype and device too: a copy of a Graph whose arrays were converted to another
// index width (or moved by hand) still shares the cache of the original.
std::string transpose_key(const Graph& g) {
  return std::string("attention.transpose.") + dtype_name(g.index_dtype()) + "." +
         g.device().str();
}

std::shared_ptr<CachedTranspose> cached_transpose(const Graph& g) {
  const std::string key = transpose_key(g);
  std::lock_guard<std::mutex> lock(g.cache->mutex);
  std::shared_ptr<void>& item = g.cache->items[key];
  if (item) {
    const auto& c = *std::static_pointer_cast<CachedTranspose>(item);
    if (c.graph.n_rows != g.n_cols || c.graph.nnz() != g.nnz()) item.reset();
  }
  if (!item) {
    Graph host = g.device().is_cuda() ? g.to(Device::cpu()) : g;
    host.val = Tensor();
    Transposed t = transpose(host);
    auto c = std::make_shared<CachedTranspose>();
    if (g.device().is_cuda()) {
      c->graph = t.graph.to(g.device());
      c->perm = t.perm.to(g.device());
    } else {
      c->graph = std::move(t.graph);
      c->perm = std::move(t.perm);
    }
    item = c;
  }
  return std::static_pointer_cast<CachedTranspose>(item);
}

// Temporaries of the unfused composition, kept per (device, stream) and reused while their
// shapes match: the comparison with gat_fused should time the kernels, not cudaMalloc/cudaFree
// (whose free synchronises the device). Calls on one stream are ordered, so reuse is safe.
struct Workspace {
  std::map<std::string, Tensor> tensors;
  Tensor& get(const std::string& key, const std::vector<int64_t>& shape, Device dev) {
    Tensor& t = tensors[key];
    if (!t.defined() || t.shape() != shape || t.device() != dev)
      t = Tensor::empty(shape, DType::f32, dev);
    return t;
  }
};

Workspace& workspace(Device dev, void* stream) {
  static std::mutex mutex;
  static std::map<std::pair<int, void*>, std::unique_ptr<Workspace>> all;
  std::lock_guard<std::mutex> lock(mutex);
  const int key = dev.is_cuda() ? dev.index : -1;
  auto& w = all[{key, stream}];
  if (!w) w = std::make_unique<Workspace>();
  return *w;
}

// ---- elementwise helpers by device --------------------------------------------------------------

void leaky_relu_(Tensor& x, float slope, void* stream) {
#if SPGNN_WITH_CUDA
  if (x.device().is_cuda()) return detail::cuda_leaky_relu_(x, slope, stream);
#endif
  (void)stream;
  detail::cpu_leaky_relu_(x, slope);
}
void apply_dropout(const Tensor& a, Tensor& out, const GatProblem& p) {
#if SPGNN_WITH_CUDA
  if (a.device().is_cuda())
    return detail::cuda_apply_dropout(a, out, p.seed, p.seed_ptr, p.dropout, p.dropout_scale,
                                      p.stream);
#endif
  detail::cpu_apply_dropout(a, out, p.seed, p.dropout, p.dropout_scale);
}
void copy_cols(const Tensor& src, int64_t src_off, Tensor& dst, int64_t dst_off, int64_t width,
               void* stream) {
#if SPGNN_WITH_CUDA
  if (src.device().is_cuda())
    return detail::cuda_copy_cols(src, src_off, dst, dst_off, width, stream);
#endif
  (void)stream;
  detail::cpu_copy_cols(src, src_off, dst, dst_off, width);
}

// gsddmm(add) -> LeakyReLU -> edge_softmax -> dropout -> gspmm(u_mul_e, sum), each op with its
// own `auto` strategy. gspmm's edge operand is [nnz] or [nnz, F] per feature row, with no head
// broadcast, so with H > 1 each head runs as its own gspmm on a contiguous copy of its feature
// columns and weight column, and its result is copied into its columns of `out` (the copies are
// part of what the unfused path costs; with H = 1 there are none).
void gat_unfused_forward(const GatProblem& p) {
  const Graph& g = *p.g;
  const Device dev = g.device();
  OpOptions sub;
  sub.stream = p.stream;
  Workspace& ws = workspace(dev, p.stream);
  Tensor& s = ws.get("logits", {g.nnz(), p.H}, dev);
  gsddmm(g, SddmmOp::add, *p.el, *p.er, s, Target::u, Target::v, sub);
  leaky_relu_(s, p.negative_slope, p.stream);
  edge_softmax(g, s, *p.attn, sub);
  Tensor a = *p.attn;
  if (p.dropout > 0.f) {
    a = ws.get("dropped", {g.nnz(), p.H}, dev);
    apply_dropout(*p.attn, a, p);
  }
  if (p.H == 1) {
    gspmm(g, SpmmOp::u_mul_e, Reduce::sum, *p.feat, a, *p.out, sub);
    return;
  }
  Tensor& fh = ws.get("feat_head", {g.n_cols, p.F}, dev);
  Tensor& ah = ws.get("attn_head", {g.nnz(), 1}, dev);
  Tensor& oh = ws.get("out_head", {g.n_rows, p.F}, dev);
  for (int64_t h = 0; h < p.H; ++h) {
    copy_cols(*p.feat, h * p.F, fh, 0, p.F, p.stream);
    copy_cols(a, h, ah, 0, 1, p.stream);
    gspmm(g, SpmmOp::u_mul_e, Reduce::sum, fh, ah, oh, sub);
    copy_cols(oh, 0, *p.out, h * p.F, p.F, p.stream);
  }
}

// el and er with half rows: float32 (kept unrounded: a logit is their sum, and a half el would
// bias every edge of its vertex; the fused kernels read them as float32 either way) or the rows'
// half dtype. `dt`: the rows' dtype.
DType logit_dtype(const Tensor& t, DType dt) {
  return t.defined() && t.dtype() == DType::f32 ? DType::f32 : dt;
}

// The operands whose dtype sets a GAT op's precision (el and er follow it; logit_dtype).
DType gat_half_operands(const char* op, const Tensor& feat, const Tensor& el, const Tensor& er,
                        std::initializer_list<std::pair<const Tensor*, const char*>> rows) {
  const DType h = detail::half_operands(op, rows);
  // float32 rows: half el / er beside them are refused, named, as any other mix
  if (!is_half(h)) return detail::half_operands(op, {{&feat, "feat"}, {&el, "el"}, {&er, "er"}});
  for (auto [t, name] : {std::pair<const Tensor*, const char*>{&el, "el"}, {&er, "er"}})
    SPGNN_CHECK(!t->defined() || t->dtype() == DType::f32 || t->dtype() == h, InvalidArgument, op,
                ": '", name, "' must be float32 or ", dtype_name(h), " (the dtype of 'feat'), got ",
                dtype_name(t->dtype()));
  return h;
}

// params.forward_out of gat_aggregate_backward, checked: in `dt` (feat's dtype) or, with half
// feat, float32. Returns it where it is float32 (what the kernels read), else null.
const Tensor* forward_out(const GatParams& params, const Graph& g, int64_t W, const char* op,
                          DType dt) {
  if (!params.forward_out) return nullptr;
  const Tensor& o = *params.forward_out;
  const DType want = o.defined() && o.dtype() == DType::f32 ? DType::f32 : dt;
  check_input(o, "params.forward_out", op, g, {g.n_rows, W},
              "[n_rows, H*F] (the out gat_aggregate returned)", want);
  return want == DType::f32 ? params.forward_out : nullptr;
}

// params.softmax_state of gat_aggregate_backward, checked where defined (else null).
Tensor* softmax_state_in(const GatParams& params, const Graph& g, int64_t H, const char* op) {
  if (!params.softmax_state || !params.softmax_state->defined()) return nullptr;
  check_input(*params.softmax_state, "params.softmax_state", op, g, {g.n_rows, H, 2},
              "[n_rows, H, 2] (the state gat_aggregate wrote)");
  return params.softmax_state;
}

// params.softmax_state of gat_aggregate: prepared for the fused GPU forward to write.
Tensor* softmax_state_out(const GatParams& params, const Graph& g, int64_t H, const char* op) {
  if (!params.softmax_state) return nullptr;
  prepare_output(*params.softmax_state, "params.softmax_state", op, {g.n_rows, H, 2}, g.device());
  return params.softmax_state;
}

// params.negative_logit_sums of gat_aggregate: prepared for the fused GPU forward to write
// (with vector stores: a given tensor whose data is not 16-byte aligned is replaced).
Tensor* negative_sums_out(const GatParams& params, const Graph& g, int64_t W, const char* op) {
  Tensor* t = params.negative_logit_sums;
  if (!t) return nullptr;
  if (t->defined() && reinterpret_cast<uintptr_t>(t->raw()) % 16 != 0) *t = Tensor();
  prepare_output(*t, "params.negative_logit_sums", op, {g.n_rows, W}, g.device());
  return t;
}

// params.negative_logit_sums of gat_aggregate_backward, checked where defined (else null).
Tensor* negative_sums_in(const GatParams& params, const Graph& g, int64_t W, const char* op) {
  Tensor* t = params.negative_logit_sums;
  if (!t || !t->defined()) return nullptr;
  check_input(*t, "params.negative_logit_sums", op, g, {g.n_rows, W},
              "[n_rows, H*F] (the sums gat_aggregate wrote)");
  return t;
}

// ... and left undefined on every other path (nothing there writes them).
void no_softmax_state(const GatParams& params) {
  if (params.softmax_state) *params.softmax_state = Tensor();
  if (params.negative_logit_sums) *params.negative_logit_sums = Tensor();
}

// Checks the GAT inputs shared by forward and backward and fills the problem's sizes. They are
// float32, or `dt` (half) for the fused kernels' half path, with el and er in float32 or `dt`.
GatProblem gat_problem(const Graph& g, const Tensor& feat, const Tensor& el, const Tensor& er,
                       const GatParams& params, const OpOptions& options, const char* op,
                       DType dt = DType::f32) {
  detail::check_graph_arrays(g, op);
  SPGNN_CHECK(params.heads >= 1, InvalidArgument, op, ": params.heads must be >= 1, got ",
              params.heads);
  SPGNN_CHECK(std::isfinite(params.negative_slope), InvalidArgument, op,
              ": params.negative_slope must be finite, got ", params.negative_slope);
  SPGNN_CHECK(params.attn_dropout >= 0.f && params.attn_dropout < 1.f, InvalidArgument, op,
              ": params.attn_dropout must be in [0, 1), got ", params.attn_dropout);
  const int64_t H = params.heads;
  SPGNN_CHECK(feat.defined(), InvalidArgument, op, ": argument 'feat' is required ([n_cols, H*F])");
  SPGNN_CHECK(feat.ndim() == 2, InvalidArgument, op, ": 'feat' must be 2-D [n_cols, H*F], got ",
              feat.shape_str());
  SPGNN_CHECK(feat.dim(1) >= H && feat.dim(1) % H == 0, InvalidArgument, op, ": 'feat' width ",
              feat.dim(1), " must be a positive multiple of params.heads = ", H, " (H*F)");
  check_input(feat, "feat", op, g, {g.n_cols, feat.dim(1)}, "[n_cols, H*F]", dt);
  check_input(el, "el", op, g, {g.n_cols, H}, "[n_cols, H]", logit_dtype(el, dt));
  check_input(er, "er", op, g, {g.n_rows, H}, "[n_rows, H]", logit_dtype(er, dt));
  GatProblem p;
  p.g = &g;
  p.feat = &feat;
  p.el = &el;
  p.er = &er;
  p.H = H;
  p.F = feat.dim(1) / H;
  p.negative_slope = params.negative_slope;
  p.dropout = params.attn_dropout;
  p.dropout_scale = params.attn_dropout > 0.f ? 1.f / (1.f - params.attn_dropout) : 1.f;
  p.seed = params.dropout_seed;
  p.seed_ptr = params.dropout_seed_device;
  SPGNN_CHECK(!p.seed_ptr || g.device().is_cuda(), InvalidArgument, op,
              ": params.dropout_seed_device is a device address, for graphs on a CUDA device; "
              "this graph is on ", g.device().str(), " (pass params.dropout_seed)");
  p.stream = options.stream;
  return p;
}

// scores/out [nnz, H] or [nnz]; returns H.
int64_t softmax_heads(const Graph& g, const Tensor& t, const char* arg, const char* op) {
  SPGNN_CHECK(t.defined(), InvalidArgument, op, ": argument '", arg, "' is required ([nnz, H])");
  SPGNN_CHECK(t.ndim() == 1 || t.ndim() == 2, InvalidArgument, op, ": '", arg,
              "' must be [nnz, H] or [nnz], got ", t.shape_str());
  const int64_t H = t.ndim() == 2 ? t.dim(1) : 1;
  check_input(t, arg, op, g, t.ndim() == 2 ? std::vector<int64_t>{g.nnz(), H}
                                           : std::vector<int64_t>{g.nnz()},
              t.ndim() == 2 ? "[nnz, H]" : "[nnz]");
  return H;
}

}  // namespace

void provide_attention_transpose(const Graph& g, const Graph& transposed, const Tensor& perm) {
  const int64_t nnz = g.nnz();
  SPGNN_CHECK(transposed.n_rows == g.n_cols && transposed.n_cols == g.n_rows &&
                  transposed.nnz() == nnz && transposed.rowptr.defined() &&
                  transposed.index_dtype() == g.index_dtype() &&
                  (nnz == 0 || transposed.device() == g.device()) && perm.defined() &&
                  perm.dtype() == DType::i64 && perm.ndim() == 1 && perm.numel() == nnz &&
                  perm.device() == g.device(),
              InvalidArgument, "provide_attention_transpose: expected the ", g.n_cols, " x ",
              g.n_rows, " transpose with ", nnz, " edges in ", dtype_name(g.index_dtype()),
              " and an int64 [", nnz, "] perm on ", g.device().str());
  std::lock_guard<std::mutex> lock(g.cache->mutex);
  std::shared_ptr<void>& item = g.cache->items[transpose_key(g)];
  if (item) return;
  auto c = std::make_shared<CachedTranspose>();
  c->graph = transposed;
  c->graph.val = Tensor();
  c->perm = perm;
  item = c;
}

void edge_softmax(const Graph& g, const Tensor& scores, Tensor& out, const OpOptions& options) {
  constexpr const char* kOp = "edge_softmax";
  if (const DType h = detail::half_operands(kOp, {{&scores, "scores"}}); is_half(h)) {
    Tensor r;
    edge_softmax(g, detail::as_f32(scores, options.stream), r, options);
    return detail::store_half(r, out, h, kOp, "out", options.stream);
  }
  detail::check_graph_arrays(g, kOp);
  SoftmaxProblem p;
  p.g = &g;
  p.H = softmax_heads(g, scores, "scores", kOp);
  prepare_output(out, "out", kOp, scores.shape(), g.device());
  p.scores = &scores;
  p.out = &out;
  p.stream = options.stream;
  const Resolved r = resolve(options.schedule, g, kOp, false, false);
  if (g.nnz() == 0 || p.H == 0) return;
  if (r.name == "cpu_ref") return detail::cpu_ref_edge_softmax(p);
  if (r.name == "cpu") return detail::cpu_edge_softmax(p);
#if SPGNN_WITH_CUDA
  detail::cuda_edge_softmax(p);
#endif
}

void edge_softmax_backward(const Graph& g, const Tensor& out, const Tensor& grad_out,
                           Tensor& grad_scores, const OpOptions& options) {
  constexpr const char* kOp = "edge_softmax_backward";
  if (const DType h = detail::half_operands(kOp, {{&out, "out"}, {&grad_out, "grad_out"}});
      is_half(h)) {
    Tensor r;
    edge_softmax_backward(g, detail::as_f32(out, options.stream),
                          detail::as_f32(grad_out, options.stream), r, options);
    return detail::store_half(r, grad_scores, h, kOp, "grad_scores", options.stream);
  }
  detail::check_graph_arrays(g, kOp);
  SoftmaxBwdProblem p;
  p.g = &g;
  p.H = softmax_heads(g, out, "out", kOp);
  check_input(grad_out, "grad_out", kOp, g, out.shape(), "the shape of 'out'");
  prepare_output(grad_scores, "grad_scores", kOp, out.shape(), g.device());
  p.out = &out;
  p.grad_out = &grad_out;
  p.grad_scores = &grad_scores;
  p.stream = options.stream;
  const Resolved r = resolve(options.schedule, g, kOp, false, true);
  if (g.nnz() == 0 || p.H == 0) return;
  if (r.name == "cpu_ref") return detail::cpu_ref_edge_softmax_backward(p);
  if (r.name == "cpu") return detail::cpu_edge_softmax_backward(p);
#if SPGNN_WITH_CUDA
  detail::cuda_edge_softmax_backward(p);
#endif
}

void gat_aggregate(const Graph& g, const Tensor& feat, const Tensor& el, const Tensor& er,
                   const GatParams& params, Tensor& out, Tensor& attn, const OpOptions& options) {
  constexpr const char* kOp = "gat_aggregate";
  if (const DType h = gat_half_operands(kOp, feat, el, er, {{&feat, "feat"}}); is_half(h)) {
    const bool out32 = out.defined() && out.dtype() == DType::f32;  // the sums unrounded
#if SPGNN_WITH_CUDA
    // The fused kernels read and write halves themselves: the per-edge gathers of feat are what
    // halves shrink. No conversion and no allocation but the outputs (capturable).
    if (g.device().is_cuda() && feat.device() == g.device()) {
      GatProblem p = gat_problem(g, feat, el, er, params, options, kOp, h);
      const Resolved r = resolve(options.schedule, g, kOp, true, false);
      if (r.name == "gat_fused") {
        prepare_output(out, "out", kOp, {g.n_rows, p.H * p.F}, g.device(), out32 ? DType::f32 : h);
        prepare_output(attn, "attn", kOp, {g.nnz(), p.H}, g.device(), h);
        SPGNN_CHECK(out.raw() != feat.raw() || out.numel() == 0, InvalidArgument, kOp,
                    ": 'out' must not share memory with 'feat'");
        p.out = &out;
        p.attn = &attn;
        if (detail::gat_fused_half_width(p, false) > 0) {
          p.state = softmax_state_out(params, g, p.H, kOp);
          p.neg = negative_sums_out(params, g, p.H * p.F, kOp);
          if (g.n_rows == 0) return;
          return detail::gat_fused_forward(p, r.warps, r.heavy_deg, r.heads_per_chunk);
        }
      }
    }
#endif
    no_softmax_state(params);
    GatParams params32 = params;
    params32.softmax_state = nullptr;
    params32.negative_logit_sums = nullptr;
    Tensor o, a;
    gat_aggregate(g, detail::as_f32(feat, options.stream), detail::as_f32(el, options.stream),
                  detail::as_f32(er, options.stream), params32, out32 ? out : o, a, options);
    if (!out32) detail::store_half(o, out, h, kOp, "out", options.stream);
    return detail::store_half(a, attn, h, kOp, "attn", options.stream);
  }
  GatProblem p = gat_problem(g, feat, el, er, params, options, kOp);
  prepare_output(out, "out", kOp, {g.n_rows, p.H * p.F}, g.device());
  prepare_output(attn, "attn", kOp, {g.nnz(), p.H}, g.device());
  SPGNN_CHECK(out.raw() != feat.raw() || out.numel() == 0, InvalidArgument, kOp,
              ": 'out' must not share memory with 'feat'");
  p.out = &out;
  p.attn = &attn;
  const Resolved r = resolve(options.schedule, g, kOp, true, false);
  if (r.name == "gat_fused") {
    p.state = softmax_state_out(params, g, p.H, kOp);
    p.neg = negative_sums_out(params, g, p.H * p.F, kOp);
  } else {
    no_softmax_state(params);
  }
  if (g.n_rows == 0) return;
  if (r.name == "cpu_ref") return detail::cpu_ref_gat_forward(p);
  if (r.name == "cpu") return detail::cpu_gat_forward(p);
  if (r.name == "unfused") return gat_unfused_forward(p);
#if SPGNN_WITH_CUDA
  detail::gat_fused_forward(p, r.warps, r.heavy_deg, r.heads_per_chunk);
#endif
}

void gat_aggregate_backward(const Graph& g, const Tensor& feat, const Tensor& el,
                            const Tensor& er, const Tensor& attn, const Tensor& grad_out,
                            const GatParams& params, Tensor& grad_feat, Tensor& grad_el,
                            Tensor& grad_er, const OpOptions& options) {
  constexpr const char* kOp = "gat_aggregate_backward";
  if (const DType h = gat_half_operands(kOp, feat, el, er,
                                        {{&feat, "feat"}, {&attn, "attn"}, {&grad_out, "grad_out"}});
      is_half(h)) {
    // float32 outputs (all three) take the gradients unrounded: a caller that keeps float32
    // weights (spgnn train's GAT layer) would only widen them again.
    const bool grads_f32 = grad_feat.defined() && grad_feat.dtype() == DType::f32 &&
                           grad_el.defined() && grad_el.dtype() == DType::f32 &&
                           grad_er.defined() && grad_er.dtype() == DType::f32;
    Tensor gf, gl, gr;
#if SPGNN_WITH_CUDA
    // The fused gather kernels read the halves themselves (see gat_aggregate), sum in float32
    // scratch and round each gradient once (or write float32 outputs directly).
    if (g.device().is_cuda() && feat.device() == g.device() && g.nnz() > 0) {
      GatProblem p = gat_problem(g, feat, el, er, params, options, kOp, h);
      const Resolved r = resolve(options.schedule, g, kOp, true, true);
      if (r.name == "gat_fused" && !r.bwd_atomic) {
        const int64_t W = p.H * p.F;
        check_input(attn, "attn", kOp, g, {g.nnz(), p.H},
                    "[nnz, H] (the weights gat_aggregate returned)", h);
        check_input(grad_out, "grad_out", kOp, g, {g.n_rows, W}, "[n_rows, H*F]", h);
        p.grad_out = &grad_out;
        // Together or not at all (GatParams::forward_out).
        p.fwd_out = forward_out(params, g, W, kOp, h);
        p.state = softmax_state_in(params, g, p.H, kOp);
        p.neg = negative_sums_in(params, g, W, kOp);
        if (!p.fwd_out || !p.state) p.fwd_out = p.state = p.neg = nullptr;
        if (detail::gat_fused_half_width(p, true) > 0) {
          const DType gd = grads_f32 ? DType::f32 : h;
          prepare_output(grad_feat, "grad_feat", kOp, {g.n_cols, W}, g.device(), gd);
          prepare_output(grad_el, "grad_el", kOp, {g.n_cols, p.H}, g.device(), gd);
          prepare_output(grad_er, "grad_er", kOp, {g.n_rows, p.H}, g.device(), gd);
          p.attn = const_cast<Tensor*>(&attn);  // read-only in the backward kernels
          p.grad_feat = &grad_feat;
          p.grad_el = &grad_el;
          p.grad_er = &grad_er;
          const std::shared_ptr<CachedTranspose> t = cached_transpose(g);
          p.gt = &t->graph;
          p.perm = &t->perm;
          return detail::gat_fused_backward(p, r.warps, false, bwd_heavy_deg(r, g));
        }
      }
    }
#endif
    if (params.forward_out || params.softmax_state || params.negative_logit_sums) {
      // checked; the float32 copy takes none of them
      const GatProblem q = gat_problem(g, feat, el, er, params, options, kOp, h);
      forward_out(params, g, q.H * q.F, kOp, h);
      softmax_state_in(params, g, q.H, kOp);
      negative_sums_in(params, g, q.H * q.F, kOp);
    }
    GatParams params32 = params;
    params32.forward_out = nullptr;
    params32.softmax_state = nullptr;
    params32.negative_logit_sums = nullptr;
    gat_aggregate_backward(g, detail::as_f32(feat, options.stream),
                           detail::as_f32(el, options.stream), detail::as_f32(er, options.stream),
                           detail::as_f32(attn, options.stream),
                           detail::as_f32(grad_out, options.stream), params32,
                           grads_f32 ? grad_feat : gf, grads_f32 ? grad_el : gl,
                           grads_f32 ? grad_er : gr, options);
    if (grads_f32) return;
    detail::store_half(gf, grad_feat, h, kOp, "grad_feat", options.stream);
    detail::store_half(gl, grad_el, h, kOp, "grad_el", options.stream);
    return detail::store_half(gr, grad_er, h, kOp, "grad_er", options.stream);
  }
  GatProblem p = gat_problem(g, feat, el, er, params, options, kOp);
  const int64_t W = p.H * p.F;
  check_input(attn, "attn", kOp, g, {g.nnz(), p.H},
              "[nnz, H] (the weights gat_aggregate returned)");
  check_input(grad_out, "grad_out", kOp, g, {g.n_rows, W}, "[n_rows, H*F]");
  p.fwd_out = forward_out(params, g, W, kOp, DType::f32);
  // float32 reads attn, or with all three the softmax state and the negative-logit sums
  // (GatParams::negative_logit_sums)
  p.state = softmax_state_in(params, g, p.H, kOp);
  p.neg = negative_sums_in(params, g, W, kOp);
  if (!p.fwd_out || !p.state || !p.neg) p.state = p.neg = nullptr;
  prepare_output(grad_feat, "grad_feat", kOp, {g.n_cols, W}, g.device());
  prepare_output(grad_el, "grad_el", kOp, {g.n_cols, p.H}, g.device());
  prepare_output(grad_er, "grad_er", kOp, {g.n_rows, p.H}, g.device());
  p.attn = const_cast<Tensor*>(&attn);  // read-only in the backward kernels
  p.grad_out = &grad_out;
  p.grad_feat = &grad_feat;
  p.grad_el = &grad_el;
  p.grad_er = &grad_er;
  Resolved r = resolve(options.schedule, g, kOp, true, true);
  if (r.name == "cpu_ref") return detail::cpu_ref_gat_backward(p);
#if SPGNN_WITH_CUDA
  if (r.name == "gat_fused" && !r.bwd_atomic_set)
    r.bwd_atomic = detail::gat_bwd_prefers_atomic(g.nnz(), g.n_rows, p.H, p.F);
#endif
  std::shared_ptr<CachedTranspose> t;
  if (!(r.name == "gat_fused" && r.bwd_atomic) && g.nnz() > 0) {
    t = cached_transpose(g);
    p.gt = &t->graph;
    p.perm = &t->perm;
  }
  if (r.name == "cpu") {
    if (g.nnz() == 0) {
      grad_feat.fill_(0.0);
      grad_el.fill_(0.0);
      grad_er.fill_(0.0);
      return;
    }
    return detail::cpu_gat_backward(p);
  }
#if SPGNN_WITH_CUDA
  detail::gat_fused_backward(p, r.warps, r.bwd_atomic, bwd_heavy_deg(r, g));
#endif
}

void detail::gat_reference_with_edge_ids(const Graph& g, const Tensor& edge_ids,
                                         const Tensor& feat, const Tensor& el, const Tensor& er,
                                         const Tensor& grad_out, const GatParams& params,
                                         Tensor& out, Tensor& attn, Tensor& grad_feat,
                                         Tensor& grad_el, Tensor& grad_er) {
  constexpr const char* kOp = "gat_reference_with_edge_ids";
  SPGNN_CHECK(!g.device().is_cuda(), InvalidArgument, kOp, ": the graph must be on the host");
  GatProblem p = gat_problem(g, feat, el, er, params, OpOptions{}, kOp);
  check_input(edge_ids, "edge_ids", kOp, g, {g.nnz()}, "[nnz] (an edge index per edge)",
              DType::i64);
  p.edge_ids = &edge_ids;
  const int64_t W = p.H * p.F;
  prepare_output(out, "out", kOp, {g.n_rows, W}, g.device());
  prepare_output(attn, "attn", kOp, {g.nnz(), p.H}, g.device());
  p.out = &out;
  p.attn = &attn;
  if (g.n_rows > 0) detail::cpu_ref_gat_forward(p);
  if (!grad_out.defined()) return;
  check_input(grad_out, "grad_out", kOp, g, {g.n_rows, W}, "[n_rows, H*F]");
  prepare_output(grad_feat, "grad_feat", kOp, {g.n_cols, W}, g.device());
  prepare_output(grad_el, "grad_el", kOp, {g.n_cols, p.H}, g.device());
  prepare_output(grad_er, "grad_er", kOp, {g.n_rows, p.H}, g.device());
  p.grad_out = &grad_out;
  p.grad_feat = &grad_feat;
  p.grad_el = &grad_el;
  p.grad_er = &grad_er;
  detail::cpu_ref_gat_backward(p);
}

}  // namespace spgnn
