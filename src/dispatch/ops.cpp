// The front door of the sparse ops: checks every argument once, allocates outputs, resolves the
// schedule (auto -> heuristic) and hands a trusted problem to one strategy.
#include <initializer_list>
#include <string>
#include <utility>

#include "dispatch/half.hpp"
#include "dispatch/registry.hpp"
#include "spgnn/ops.hpp"

namespace spgnn {

namespace {

using detail::SddmmProblem;
using detail::SpmmProblem;


// float32 everywhere; float64 on the host too, computed by cpu_ref (the float64 oracle), so that
// gradients of code built on these ops can be checked by finite differences in double precision;
// float16/bfloat16 on the host, computed in float32 (half_on_host below), and on a CUDA device
// by the strategies that read them (warp_vertex, shuffle; the others say they read float32).
void check_operand(const Tensor& t, const char* arg, const char* op, const Graph& g,
                   int64_t rows, const char* rows_name) {
  SPGNN_CHECK(t.defined(), InvalidArgument, op, ": argument '", arg, "' is required");
  SPGNN_CHECK(t.dtype() == DType::f32 || is_half(t.dtype()) ||
                  (t.dtype() == DType::f64 && !t.device().is_cuda()),
              InvalidArgument, op, ": '", arg, "' must be float32, float16 or bfloat16 (or "
              "float64 on the CPU), got ", dtype_name(t.dtype()),
              t.device().is_cuda() ? " on a CUDA device" : "");
  SPGNN_CHECK(t.device() == g.device(), InvalidArgument, op, ": '", arg, "' is on ",
              t.device().str(), " but the graph is on ", g.device().str());
  SPGNN_CHECK(t.ndim() == 2 || (t.ndim() == 1 && std::string(arg) == "e"), InvalidArgument, op,
              ": '", arg, "' must be 2-D [", rows_name, ", F], got shape ", t.shape_str());
  SPGNN_CHECK(t.dim(0) == rows, InvalidArgument, op, ": '", arg, "' has ", t.dim(0),
              " rows, expected ", rows_name, " = ", rows, " (shape ", t.shape_str(), ")");
}

// The value dtype of an op: every operand's, which must agree.
DType value_dtype(const char* op, std::initializer_list<std::pair<const Tensor*, const char*>> ts) {
  const Tensor* first = nullptr;
  const char* first_name = "";
  for (auto [t, name] : ts) {
    if (!t) continue;
    if (!first) {
      first = t;
      first_name = name;
      continue;
    }
    SPGNN_CHECK(t->dtype() == first->dtype(), InvalidArgument, op, ": '", name, "' is ",
                dtype_name(t->dtype()), " but '", first_name, "' is ", dtype_name(first->dtype()));
  }
  return first ? first->dtype() : DType::f32;
}

// float64 runs only on cpu_ref: `auto` resolves to it, any other strategy is refused.
Schedule f64_schedule(const Schedule& s, const char* op) {
  SPGNN_CHECK(s.strategy == "auto" || s.strategy == "cpu_ref", Unsupported, op, ": strategy '",
              s.strategy, "' takes float32 only; float64 runs on cpu_ref (the float64 oracle)");
  Schedule r;
  r.strategy = "cpu_ref";
  return r;
}

void prepare_output(Tensor& out, const char* arg, const char* op, std::vector<int64_t> shape,
                    DType dtype, Device device) {
  if (!out.defined()) {
    out = Tensor::empty(shape, dtype, device);
    return;
  }
  SPGNN_CHECK(out.dtype() == dtype, InvalidArgument, op, ": output '", arg, "' must be ",
              dtype_name(dtype), ", got ", dtype_name(out.dtype()));
  SPGNN_CHECK(out.device() == device, InvalidArgument, op, ": output '", arg, "' is on ",
              out.device().str(), ", expected ", device.str());
  SPGNN_CHECK(out.shape() == shape, InvalidArgument, op, ": output '", arg, "' has shape ",
              out.shape_str(), ", expected [", shape[0], ", ", shape[1], "]");
}

int64_t e_width_of(const Tensor& e) { return e.ndim() == 1 ? 1 : e.dim(1); }

void run_spmm(SpmmProblem& p, const OpOptions& options) {
  const Schedule s = p.dtype == DType::f64              ? f64_schedule(options.schedule, "gspmm")
                     : options.schedule.strategy == "auto" ? detail::auto_spmm_schedule(p)
                                                           : options.schedule;
  const auto& entry = detail::spmm_entry(s.strategy);
  const std::string why = entry.supports(p);
  SPGNN_CHECK(why.empty(), Unsupported, "gspmm(", name(p.op), ", ", name(p.reduce),
              "): strategy '", s.strategy, "' cannot run this problem: ", why);
  if (p.F == 0 || p.g->n_rows == 0) return;
  entry.run(p, s);
}

// Half precision on the host: the float32 op on converted operands, the result rounded once.
template <class Run>
void half_on_host(const char* op, DType half, Tensor& out, Run&& run) {
  Tensor out32;
  run(out32);
  detail::store_half(out32, out, half, op, "out");
}

void gspmm_impl(const Graph& g, SpmmOp op, Reduce reduce, const Tensor& u, const Tensor& e_in,
                Tensor& out, Tensor* arg_u, Tensor* arg_e, const OpOptions& options) {
  constexpr const char* kOp = "gspmm";
  // The graph's own values (float32) stay as they are: only given operands set the dtype (float64
  // features on the host take them widened, exactly). Half features may also be weighted by
  // given float32 scalar edge weights ([nnz] or [nnz, 1]).
  const bool f32_weights = u.defined() && is_half(u.dtype()) && e_in.defined() &&
                           e_in.dtype() == DType::f32 &&
                           (e_in.ndim() == 1 || (e_in.ndim() == 2 && e_in.dim(1) == 1));
  const Tensor none;
  if (const DType half = detail::half_operands(kOp, {{&u, "u"}, {f32_weights ? &none : &e_in, "e"}});
      is_half(half) && !g.device().is_cuda()) {
    half_on_host(kOp, half, out, [&](Tensor& o) {
      gspmm_impl(g, op, reduce, detail::as_f32(u), detail::as_f32(e_in), o, arg_u, arg_e, options);
    });
    return;
  }
  detail::check_graph_arrays(g, kOp);
  check_schedule(OpKind::spmm, options.schedule);
  SpmmProblem p;
  p.g = &g;
  p.op = op;
  p.reduce = reduce;
  p.stream = options.stream;
  Tensor e = e_in;
  if (op != SpmmOp::copy_u) {
    if (!e.defined() && g.has_values()) {
      e = g.val;
      // A float64 model (finite-difference checks, PyG's .double()) aggregates over a graph
      // whose normalised or mean weights spgnn built in float32.
      if (u.defined() && u.dtype() == DType::f64 && e.dtype() == DType::f32 &&
          !g.device().is_cuda())
        e = e.astype(DType::f64);
    }
    SPGNN_CHECK(e.defined(), InvalidArgument, kOp, "(", name(op),
                "): needs edge values 'e' and the graph has none");
    check_operand(e, "e", kOp, g, g.nnz(), "nnz");
    p.e = &e;
    p.e_width = e_width_of(e);
  }
  if (op != SpmmOp::copy_e) {
    check_operand(u, "u", kOp, g, g.n_cols, "n_cols");
    p.u = &u;
    p.F = u.dim(1);
    SPGNN_CHECK(p.e == nullptr || p.e_width == 1 || p.e_width == p.F, InvalidArgument, kOp, "(",
                name(op), "): 'e' width ", p.e_width, " must be 1 (broadcast) or F = ", p.F);
  } else {
    p.F = p.e_width;
  }
  // Scalar float32 edge weights (given, or the graph's) may weigh half features.
  const bool scalar_f32 = p.u && is_half(p.u->dtype()) && p.e && p.e_width == 1 &&
                          p.e->dtype() == DType::f32;
  p.dtype = value_dtype(kOp, {{p.u, "u"}, {scalar_f32 ? nullptr : p.e, "e"}});
  prepare_output(out, "out", kOp, {g.n_rows, p.F}, p.dtype, g.device());
  p.out = &out;
  if (reduce == Reduce::max || reduce == Reduce::min) {
    if (arg_u) {
      prepare_output(*arg_u, "arg_u", kOp, {g.n_rows, p.F}, DType::i64, g.device());
      p.arg_u = arg_u;
    }
    if (arg_e) {
      prepare_output(*arg_e, "arg_e", kOp, {g.n_rows, p.F}, DType::i64, g.device());
      p.arg_e = arg_e;
    }
  }
  run_spmm(p, options);
}

}  // namespace

void gspmm(const Graph& g, SpmmOp op, Reduce reduce, const Tensor& u, const Tensor& e,
           Tensor& out, const OpOptions& options) {
  gspmm_impl(g, op, reduce, u, e, out, nullptr, nullptr, options);
}

void gspmm(const Graph& g, SpmmOp op, Reduce reduce, const Tensor& u, const Tensor& e,
           Tensor& out, Tensor& arg_u, Tensor& arg_e, const OpOptions& options) {
  SPGNN_CHECK(reduce == Reduce::max || reduce == Reduce::min, InvalidArgument,
              "gspmm: arg_u/arg_e exist only for max and min, not ", name(reduce));
  gspmm_impl(g, op, reduce, u, e, out, &arg_u, &arg_e, options);
}

void gsddmm(const Graph& g, SddmmOp op, const Tensor& lhs, const Tensor& rhs, Tensor& out,
            Target lhs_target, Target rhs_target, const OpOptions& options) {
  constexpr const char* kOp = "gsddmm";
  if (const DType half = detail::half_operands(kOp, {{&lhs, "lhs"}, {&rhs, "rhs"}});
      is_half(half) && !g.device().is_cuda()) {
    half_on_host(kOp, half, out, [&](Tensor& o) {
      gsddmm(g, op, detail::as_f32(lhs), detail::as_f32(rhs), o, lhs_target, rhs_target, options);
    });
    return;
  }
  detail::check_graph_arrays(g, kOp);
  check_schedule(OpKind::sddmm, options.schedule);
  auto rows_of = [&](Target t) {
    return t == Target::u ? g.n_cols : t == Target::v ? g.n_rows : g.nnz();
  };
  auto rows_name = [](Target t) {
    return t == Target::u ? "n_cols (target u)" : t == Target::v ? "n_rows (target v)"
                                                                 : "nnz (target e)";
  };
  SddmmProblem p;
  p.g = &g;
  p.op = op;
  p.lhs_target = lhs_target;
  p.rhs_target = rhs_target;
  p.stream = options.stream;
  if (p.uses_lhs()) {
    check_operand(lhs, "lhs", kOp, g, rows_of(lhs_target), rows_name(lhs_target));
    p.lhs = &lhs;
    p.F = lhs.dim(1);
  }
  if (p.uses_rhs()) {
    check_operand(rhs, "rhs", kOp, g, rows_of(rhs_target), rows_name(rhs_target));
    p.rhs = &rhs;
    SPGNN_CHECK(!p.uses_lhs() || rhs.dim(1) == p.F, InvalidArgument, kOp, "(", name(op),
                "): 'lhs' has width ", p.F, " but 'rhs' has width ", rhs.dim(1));
    p.F = rhs.dim(1);
  }
  p.dtype = value_dtype(kOp, {{p.lhs, "lhs"}, {p.rhs, "rhs"}});
  prepare_output(out, "out", kOp, {g.nnz(), p.out_width()}, p.dtype, g.device());
  p.out = &out;
  const Schedule s = p.dtype == DType::f64              ? f64_schedule(options.schedule, kOp)
                     : options.schedule.strategy == "auto" ? detail::auto_sddmm_schedule(p)
                                                           : options.schedule;
  const auto& entry = detail::sddmm_entry(s.strategy);
  const std::string why = entry.supports(p);
  SPGNN_CHECK(why.empty(), Unsupported, "gsddmm(", name(op), "): strategy '", s.strategy,
              "' cannot run this problem: ", why);
  if (g.nnz() == 0) return;
  if (p.F == 0) {
    if (op == SddmmOp::dot) out.fill_(0.0, options.stream);  // an empty dot product is 0
    return;
  }
  entry.run(p, s);
}

Schedule resolve_spmm_schedule(const Graph& g, SpmmOp op, Reduce reduce, int64_t F,
                               const Schedule& requested, DType dtype) {
  check_schedule(OpKind::spmm, requested);
  if (requested.strategy != "auto") return requested;
  SpmmProblem p;
  p.g = &g;
  p.op = op;
  p.reduce = reduce;
  p.F = F;
  p.e_width = op == SpmmOp::copy_u ? 0 : 1;
  p.dtype = dtype;
  return detail::auto_spmm_schedule(p);
}

Schedule resolve_sddmm_schedule(const Graph& g, SddmmOp op, int64_t F, const Schedule& requested,
                                DType dtype) {
  check_schedule(OpKind::sddmm, requested);
  if (requested.strategy != "auto") return requested;
  SddmmProblem p;
  p.g = &g;
  p.op = op;
  p.F = F;
  p.dtype = dtype;
  return detail::auto_sddmm_schedule(p);
}

// Work counts: one flop per combine and one per reduce step; "effective bytes" are what an
// uncached kernel touches: indices and edge values once, one gathered feature row per edge and
// each output row once. This is the convention of the GNN-kernel papers' GB/s figures.
double spmm_flops(const Graph& g, SpmmOp op, int64_t F) {
  const double per = (op == SpmmOp::copy_u || op == SpmmOp::copy_e) ? 1.0 : 2.0;
  return per * double(g.nnz()) * double(F);
}
double sddmm_flops(const Graph& g, SddmmOp op, int64_t F) {
  const double per = op == SddmmOp::dot ? 2.0 : 1.0;
  return per * double(g.nnz()) * double(F);
}
double spmm_bytes(const Graph& g, SpmmOp op, int64_t F, bool edge_feature_wide, int value_bytes) {
  const double idx = double(dtype_size(g.index_dtype())), vb = value_bytes;
  double b = double(g.nnz()) * 2 * idx + double(g.n_rows) * double(F) * vb;
  if (op != SpmmOp::copy_u) b += double(g.nnz()) * vb * (edge_feature_wide ? double(F) : 1.0);
  if (op != SpmmOp::copy_e) b += double(g.nnz()) * double(F) * vb;
  return b;
}
double sddmm_bytes(const Graph& g, SddmmOp op, int64_t F, Target lhs, Target rhs,
                   int value_bytes) {
  const double idx = double(dtype_size(g.index_dtype())), vb = value_bytes;
  const double nnz = double(g.nnz());
  double b = nnz * 2 * idx + nnz * vb * (op == SddmmOp::dot ? 1.0 : double(F));
  auto side = [&](Target t) {
    // A destination row's features are read once per row (edges are row-sorted); sources and
    // edge operands once per edge.
    return t == Target::v ? double(g.n_rows) * F * vb : nnz * F * vb;
  };
  if (op != SddmmOp::copy_rhs) b += side(lhs);
  if (op != SddmmOp::copy_lhs) b += side(rhs);
  return b;
}

namespace detail {
void check_graph_arrays(const Graph& g, const char* op) {
  SPGNN_CHECK(g.row.defined() && g.col.defined() && g.rowptr.defined(), InvalidArgument, op,
              ": graph has no arrays (build it with graph_from_edges or read_graph)");
  SPGNN_CHECK(g.index_dtype() == DType::i32 || g.index_dtype() == DType::i64, InvalidArgument, op,
              ": graph index dtype must be int32 or int64, got ", dtype_name(g.index_dtype()));
  SPGNN_CHECK(g.col.dtype() == g.row.dtype() && g.rowptr.dtype() == g.row.dtype(),
              InvalidArgument, op, ": graph row/col/rowptr must share one index dtype (row ",
              dtype_name(g.row.dtype()), ", col ", dtype_name(g.col.dtype()), ", rowptr ",
              dtype_name(g.rowptr.dtype()), ")");
  SPGNN_CHECK(g.col.numel() == g.row.numel(), InvalidArgument, op, ": graph has ",
              g.row.numel(), " row indices but ", g.col.numel(), " col indices");
  SPGNN_CHECK(g.rowptr.numel() == g.n_rows + 1, InvalidArgument, op, ": graph rowptr has ",
              g.rowptr.numel(), " entries, expected n_rows + 1 = ", g.n_rows + 1);
  SPGNN_CHECK(g.col.device() == g.row.device() && g.rowptr.device() == g.row.device(),
              InvalidArgument, op, ": graph arrays are on different devices");
}
}  // namespace detail

}  // namespace spgnn
