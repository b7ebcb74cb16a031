// spgnn._C: the extension behind the Python package. It exchanges arrays through DLPack only,
// so it links no framework: one build serves every PyTorch (and NumPy/CuPy). Every op writes
// into outputs the caller allocated (PyTorch's caching allocator, not cudaMalloc per call) and
// runs on the stream the caller passes (its current CUDA stream). Thin by design: parse, call the
// public C++ API, return.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>

#include "arrays.hpp"
#include "graphs.hpp"
#include "spgnn/io.hpp"
#include "spgnn/nn/functional.hpp"
#include "spgnn/ops.hpp"
#include "spgnn/partition.hpp"
#include "spgnn/schedule.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace spgnn::py {
namespace {

using OptArray = std::optional<Array>;
using OptSummary = std::optional<std::tuple<int64_t, int64_t, double>>;

void* as_stream(uintptr_t s) { return reinterpret_cast<void*>(s); }

OpOptions options_for(uintptr_t stream, const std::string& strategy) {
  OpOptions o;
  o.stream = as_stream(stream);
  if (!strategy.empty()) o.schedule = parse_schedule(strategy);
  return o;
}

Cbsr cbsr_of(const Tensor& data, const Tensor& index, int64_t F) {
  Cbsr c;
  c.data = data;
  c.index = index;
  c.F = F;
  c.k = index.ndim() == 2 ? index.dim(1) : (data.ndim() == 2 ? data.dim(1) : 0);
  return c;
}

// Undefined edge operands mean "the graph's own values" to the C++ ops.
Tensor edge_operand(const OptArray& e) { return view(e, "e"); }

// A dropout seed the kernels read on the device (one int64 on `like`'s CUDA device), so that a
// captured CUDA graph draws a new mask on each replay; None: the host value `seed` is used.
const uint64_t* device_seed_of(const OptArray& s, const Tensor& like, const char* op) {
  if (!s) return nullptr;
  const Tensor t = view(*s, "device_seed");
  SPGNN_CHECK(t.dtype() == DType::i64 && t.numel() == 1 && like.device().is_cuda() &&
                  t.device() == like.device(),
              InvalidArgument, op, ": 'device_seed' must be one int64 on the input's CUDA device (",
              like.device().str(), "), got ", dtype_name(t.dtype()), " ", t.shape_str(), " on ",
              t.device().str());
  return static_cast<const uint64_t*>(t.raw());
}

GatParams gat_params(int64_t heads, float slope, float dropout, uint64_t seed,
                     const OptArray& device_seed, const Tensor& like, const char* op) {
  GatParams p;
  p.heads = heads;
  p.negative_slope = slope;
  p.attn_dropout = dropout;
  p.dropout_seed = seed;
  p.dropout_seed_device = device_seed_of(device_seed, like, op);
  return p;
}

nb::dict graph_info(uintptr_t h) {
  auto e = lookup(h);
  const Graph& g = e->g;
  nb::dict d;
  d["n_rows"] = g.n_rows;
  d["n_cols"] = g.n_cols;
  d["nnz"] = g.nnz();
  d["device"] = g.device().str();
  d["index_dtype"] = std::string(dtype_name(g.index_dtype()));
  d["has_values"] = g.has_values();
  d["kind"] = e->kind;
  d["identity_order"] = !e->edge_source.defined();
  d["device_built"] = e->device_built;
  d["bytes"] = g.bytes();
  return d;
}

// A host graph's edges as PyG's edge_index: [2, E] int64, sources first, then targets, in
// spgnn's (target-sorted) order.
Tensor pyg_edge_index(const Graph& g) {
  const int64_t e = g.nnz();
  Tensor ei = Tensor::empty({2, e}, DType::i64);
  if (e) {
    const Tensor r = g.row.astype(DType::i64), c = g.col.astype(DType::i64);
    std::copy(c.data<int64_t>(), c.data<int64_t>() + e, ei.data<int64_t>());
    std::copy(r.data<int64_t>(), r.data<int64_t>() + e, ei.data<int64_t>() + e);
  }
  return ei;
}

}  // namespace
}  // namespace spgnn::py

NB_MODULE(_C, m) {
  using namespace spgnn;
  using namespace spgnn::py;
  m.doc() = "spgnn's compiled core (internal; use the spgnn package)";
  m.attr("with_cuda") = bool(SPGNN_WITH_CUDA);
#ifdef SPGNN_VERSION
  m.attr("__version__") = SPGNN_VERSION;
#endif

  // spgnn errors become the Python exceptions a user expects for each kind of fault.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const FormatError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const Unsupported& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what());
    } catch (const DeviceError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  m.def("cuda_available", &cuda_available);
  m.def("half_spmm_width_pays", &half_spmm_width_pays, "width"_a);

  // ---- graphs ---------------------------------------------------------------------------------
  m.def(
      "build_graph",
      [](const Array& rows, const Array& cols, const OptArray& values, int64_t n_rows,
         int64_t n_cols, const std::string& rows_name, const std::string& cols_name,
         uintptr_t stream) {
        Tensor r = view(rows, rows_name), c = view(cols, cols_name), v = view(values, "values");
        std::shared_ptr<GraphEntry> e;
        {
          nb::gil_scoped_release unlocked;
          SPGNN_CHECK(r.ndim() == 1 && c.ndim() == 1 && r.numel() == c.numel(), InvalidArgument,
                      rows_name, " ", r.shape_str(), " and ", cols_name, " ", c.shape_str(),
                      " must be 1-D of one length");
          SPGNN_CHECK(r.dtype() == c.dtype() && (r.dtype() == DType::i64 || r.dtype() == DType::i32),
                      InvalidArgument, "node ids must be int64 (or int32), got ",
                      dtype_name(r.dtype()), " and ", dtype_name(c.dtype()));
          SPGNN_CHECK(!v.defined() || (v.dtype() == DType::f32 && v.ndim() == 1 &&
                                       v.numel() == r.numel()),
                      InvalidArgument, "edge values must be float32 [", r.numel(), "], got ",
                      v.defined() ? dtype_name(v.dtype()) : "", v.defined() ? v.shape_str() : "");
          e = build_entry(r, c, v, n_rows, n_cols, rows_name, cols_name, as_stream(stream));
        }
        return std::make_tuple(handle_of(e), e->g.nnz());
      },
      "rows"_a.noconvert(), "cols"_a.noconvert(), "values"_a.noconvert().none(), "n_rows"_a,
      "n_cols"_a, "rows_name"_a, "cols_name"_a, "stream"_a);
  m.def(
      "derive",
      [](uintptr_t h, const std::string& kind) {
        auto e = lookup(h);
        std::shared_ptr<GraphEntry> d;
        {
          nb::gil_scoped_release unlocked;
          d = derive(e, kind);
        }
        return std::make_tuple(handle_of(d), d->g.nnz());
      },
      "handle"_a, "kind"_a);
  m.def("graph_info", &graph_info, "handle"_a);
  // A graph (or, with a parent handle, a variant of it) over canonical arrays built on a GPU by
  // spgnn.graph in torch; the arrays are viewed, not copied.
  m.def(
      "graph_from_arrays",
      [](const Array& row, const Array& col, const Array& rowptr, const OptArray& values,
         const OptArray& edge_source, int64_t n_rows, int64_t n_cols, const std::string& kind,
         uintptr_t parent, uintptr_t stream, const OptSummary& rows, const OptSummary& cols) {
        Graph g;
        g.n_rows = n_rows;
        g.n_cols = n_cols;
        g.row = view(row, "row");
        g.col = view(col, "col");
        g.rowptr = view(rowptr, "rowptr");
        g.val = view(values, "values");
        Tensor src = view(edge_source, "edge_source");
        std::shared_ptr<GraphEntry> p = parent ? lookup(parent) : nullptr;
        auto e = entry_from_arrays(std::move(g), std::move(src), kind, as_stream(stream), p);
        auto summary = [](const OptSummary& t) -> std::optional<DegreeSummary> {
          if (!t) return std::nullopt;
          return DegreeSummary{std::get<0>(*t), std::get<1>(*t), std::get<2>(*t)};
        };
        const auto rs = summary(rows), cs = summary(cols);
        // checked against g's sizes there (the columns' when the transpose is handed them)
        if (rs) provide_degree_summary(e->g, *rs);
        std::lock_guard<std::mutex> lock(e->mutex);
        if (!e->row_summary) e->row_summary = rs;
        if (!e->col_summary) e->col_summary = cs;
        return std::make_tuple(handle_of(e), e->g.nnz());
      },
      "row"_a.noconvert(), "col"_a.noconvert(), "rowptr"_a.noconvert(),
      "values"_a.noconvert().none(), "edge_source"_a.noconvert().none(), "n_rows"_a, "n_cols"_a,
      "kind"_a, "parent"_a, "stream"_a, "rows"_a.none(), "cols"_a.none());
  // The degree statistics a GPU build handed in for a graph's rows and columns, each
  // (max degree, empty rows, sum of squared degrees) or None.
  m.def(
      "degree_summaries",
      [](uintptr_t h) {
        auto e = lookup(h);
        std::lock_guard<std::mutex> lock(e->mutex);
        auto out = [](const std::optional<DegreeSummary>& s) -> nb::object {
          if (!s) return nb::none();
          return nb::make_tuple(s->max_degree, s->empty_rows, s->sum_sq);
        };
        return nb::make_tuple(out(e->row_summary), out(e->col_summary));
      },
      "handle"_a);
  // The degree statistics `auto` reads for a graph's rows (computed on first use unless they
  // were handed in): (max degree, empty rows, sum of squared degrees).
  m.def(
      "auto_degree_summary",
      [](uintptr_t h) {
        const DegreeSummary s = degree_summary(lookup(h)->g);
        return std::make_tuple(s.max_degree, s.empty_rows, s.sum_sq);
      },
      "handle"_a);
  // The arrays of a graph on its device as torch tensors, zero-copy: (row, col, rowptr, values
  // or None, edge_source or None when the identity). Read-only by contract.
  m.def(
      "graph_arrays",
      [](uintptr_t h) {
        auto e = lookup(h);
        const Graph& g = e->g;
        auto opt = [](const Tensor& t) { return t.defined() ? to_array(t, true) : nb::none(); };
        Tensor src = e->edge_source;
        if (src.defined() && src.device() != g.device()) src = src.to(g.device());
        return nb::make_tuple(opt(g.row), opt(g.col), opt(g.rowptr), opt(g.val), opt(src));
      },
      "handle"_a);
  // Owner part of every vertex (into `out`, int32 [n] on the host); returns (method run, note).
  m.def(
      "partition",
      [](uintptr_t h, int64_t parts, const std::string& method, uint64_t seed, double imbalance,
         const Array& out) {
        auto e = lookup(h);
        Tensor o = view(out, "out");
        SPGNN_CHECK(o.dtype() == DType::i32 && !o.device().is_cuda() && o.ndim() == 1 &&
                        o.dim(0) == e->g.n_rows,
                    InvalidArgument, "partition: out must be int32 [", e->g.n_rows,
                    "] on the host, got ", dtype_name(o.dtype()), " ", o.shape_str());
        PartitionOptions po;
        po.parts = parts;
        po.method = parse_partition_method(method);
        po.seed = seed;
        po.imbalance = imbalance;
        PartitionAssignment a;
        {
          nb::gil_scoped_release unlocked;
          a = assign_parts(e->host_graph(), po);
        }
        std::copy(a.owner.begin(), a.owner.end(), o.data<int32_t>());
        return std::make_tuple(std::string(partition_method_name(a.method_used)), a.note);
      },
      "handle"_a, "parts"_a, "method"_a, "seed"_a, "imbalance"_a, "out"_a.noconvert());
  m.attr("have_metis") = have_metis();
  // A new handle (fresh storage) of the same graph.
  m.def(
      "rehandle",
      [](uintptr_t h) {
        auto e = lookup(h);
        return std::make_tuple(handle_of(e), e->g.nnz());
      },
      "handle"_a);
  m.def(
      "graph_tensor_spec",
      [](uintptr_t h, const std::string& name) {
        auto e = lookup(h);
        return std::make_tuple(graph_tensor_shape(*e, name),
                               std::string(dtype_name(graph_tensor_dtype(name))),
                               e->device_built);
      },
      "handle"_a, "name"_a);
  // Gives a graph's GAT backward the transpose the caller built on the GPU (its "transpose"
  // variant), so the backward does not build one through the host.
  m.def(
      "provide_attention_transpose",
      [](uintptr_t h, uintptr_t ht) {
        auto e = lookup(h), t = lookup(ht);
        if (!t->edge_source.defined() || t->edge_source.device() != e->g.device()) return false;
        provide_attention_transpose(e->g, t->g, t->edge_source);
        return true;
      },
      "handle"_a, "transposed"_a);
  // The variant `kind` of a graph when it has been built, else None (derive builds it). The
  // pattern of a graph without values is the graph (SAGE and GIN ask for it every call).
  m.def(
      "cached_variant",
      [](uintptr_t h, const std::string& kind) -> nb::object {
        auto e = lookup(h);
        if (kind == "pattern" && !e->g.has_values())
          return nb::make_tuple(handle_of(e), e->g.nnz());
        std::lock_guard<std::mutex> lock(e->mutex);
        auto it = e->derived.find(kind);
        if (it == e->derived.end() || !it->second) return nb::none();
        return nb::make_tuple(handle_of(it->second), it->second->g.nnz());
      },
      "handle"_a, "kind"_a);
  m.def(
      "graph_tensor",
      [](uintptr_t h, const std::string& name, const Array& out, uintptr_t stream) {
        auto e = lookup(h);
        Tensor o = view(out, "out");
        nb::gil_scoped_release unlocked;
        graph_tensor(e, name, o, as_stream(stream));
      },
      "handle"_a, "name"_a, "out"_a.noconvert(), "stream"_a);
  m.def("live_graphs", &live_graph_count);
  m.def(
      "identity_graph",
      [](int64_t n, const std::string& device) {
        SPGNN_CHECK(n >= 0, InvalidArgument, "identity_graph: n must be >= 0, got ", n);
        std::vector<int64_t> ids(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
        Graph host = graph_from_edges(n, n, ids, ids);
        auto e = make_entry_for(std::move(host), parse_device(device), "identity");
        return std::make_tuple(handle_of(e), e->g.nnz());
      },
      "n"_a, "device"_a);

  // ---- g-SpMM / g-SDDMM -----------------------------------------------------------------------
  m.def(
      "gspmm",
      [](uintptr_t h, const std::string& op, const std::string& reduce, const OptArray& u,
         const OptArray& e, const Array& out, const OptArray& arg_u, const OptArray& arg_e,
         uintptr_t stream, const std::string& strategy) {
        auto g = lookup(h);
        Tensor tu = view(u, "u"), te = edge_operand(e), to = view(out, "out");
        Tensor au = view(arg_u, "arg_u"), ae = view(arg_e, "arg_e");
        const SpmmOp sop = parse_spmm_op(op);
        const Reduce r = parse_reduce(reduce);
        const OpOptions o = options_for(stream, strategy);
        nb::gil_scoped_release unlocked;
        if (au.defined() || ae.defined()) gspmm(g->g, sop, r, tu, te, to, au, ae, o);
        else gspmm(g->g, sop, r, tu, te, to, o);
      },
      "handle"_a, "op"_a, "reduce"_a, "u"_a.noconvert().none(), "e"_a.noconvert().none(),
      "out"_a.noconvert(), "arg_u"_a.noconvert().none(), "arg_e"_a.noconvert().none(),
      "stream"_a, "strategy"_a);
  m.def(
      "gsddmm",
      [](uintptr_t h, const std::string& op, const OptArray& lhs, const OptArray& rhs,
         const Array& out, const std::string& lhs_target, const std::string& rhs_target,
         uintptr_t stream, const std::string& strategy) {
        auto g = lookup(h);
        Tensor tl = view(lhs, "lhs"), tr = view(rhs, "rhs"), to = view(out, "out");
        const SddmmOp sop = parse_sddmm_op(op);
        const Target lt = parse_target(lhs_target), rt = parse_target(rhs_target);
        const OpOptions o = options_for(stream, strategy);
        nb::gil_scoped_release unlocked;
        gsddmm(g->g, sop, tl, tr, to, lt, rt, o);
      },
      "handle"_a, "op"_a, "lhs"_a.noconvert().none(), "rhs"_a.noconvert().none(),
      "out"_a.noconvert(), "lhs_target"_a, "rhs_target"_a, "stream"_a, "strategy"_a);

  // ---- attention ------------------------------------------------------------------------------
  m.def(
      "edge_softmax",
      [](uintptr_t h, const Array& scores, const Array& out, uintptr_t stream) {
        auto g = lookup(h);
        Tensor s = view(scores, "scores"), o = view(out, "out");
        const OpOptions opt = options_for(stream, "");
        nb::gil_scoped_release unlocked;
        edge_softmax(g->g, s, o, opt);
      },
      "handle"_a, "scores"_a.noconvert(), "out"_a.noconvert(), "stream"_a);
  m.def(
      "edge_softmax_backward",
      [](uintptr_t h, const Array& out, const Array& grad_out, const Array& grad_scores,
         uintptr_t stream) {
        auto g = lookup(h);
        Tensor o = view(out, "out"), go = view(grad_out, "grad_out"),
               gs = view(grad_scores, "grad_scores");
        const OpOptions opt = options_for(stream, "");
        nb::gil_scoped_release unlocked;
        edge_softmax_backward(g->g, o, go, gs, opt);
      },
      "handle"_a, "out"_a.noconvert(), "grad_out"_a.noconvert(), "grad_scores"_a.noconvert(),
      "stream"_a);
  m.def(
      "gat_aggregate",
      [](uintptr_t h, const Array& feat, const Array& el, const Array& er, int64_t heads,
         float slope, float dropout, uint64_t seed, const Array& out, const Array& attn,
         uintptr_t stream, const std::string& strategy, const OptArray& device_seed,
         const OptArray& softmax_state, const OptArray& negative_logit_sums) {
        auto g = lookup(h);
        Tensor f = view(feat, "feat"), l = view(el, "el"), r = view(er, "er"),
               o = view(out, "out"), a = view(attn, "attn");
        GatParams p = gat_params(heads, slope, dropout, seed, device_seed, f, "gat_aggregate");
        Tensor st = softmax_state ? view(*softmax_state, "softmax_state") : Tensor();
        if (softmax_state) p.softmax_state = &st;
        Tensor ng = negative_logit_sums ? view(*negative_logit_sums, "negative_logit_sums")
                                        : Tensor();
        if (negative_logit_sums) p.negative_logit_sums = &ng;
        const OpOptions opt = options_for(stream, strategy);
        nb::gil_scoped_release unlocked;
        gat_aggregate(g->g, f, l, r, p, o, a, opt);
        // Which were written (GatParams::softmax_state, negative_logit_sums). The core replaces
        // a misaligned one rather than write through it: the caller's memory then holds nothing.
        const auto same = [](const Tensor& t, const OptArray& arr) {
          return t.defined() && t.raw() == arr->data();
        };
        return std::make_tuple(softmax_state && same(st, softmax_state),
                               negative_logit_sums && same(ng, negative_logit_sums));
      },
      "handle"_a, "feat"_a.noconvert(), "el"_a.noconvert(), "er"_a.noconvert(), "heads"_a,
      "negative_slope"_a, "dropout"_a, "seed"_a, "out"_a.noconvert(), "attn"_a.noconvert(),
      "stream"_a, "strategy"_a, "device_seed"_a.noconvert() = nb::none(),
      "softmax_state"_a.noconvert() = nb::none(),
      "negative_logit_sums"_a.noconvert() = nb::none());
  m.def(
      "gat_aggregate_backward",
      [](uintptr_t h, const Array& feat, const Array& el, const Array& er, const Array& attn,
         const Array& grad_out, int64_t heads, float slope, float dropout, uint64_t seed,
         const Array& grad_feat, const Array& grad_el, const Array& grad_er, uintptr_t stream,
         const std::string& strategy, const OptArray& device_seed, const OptArray& forward_out,
         const OptArray& softmax_state, const OptArray& negative_logit_sums) {
        auto g = lookup(h);
        Tensor f = view(feat, "feat"), l = view(el, "el"), r = view(er, "er"),
               a = view(attn, "attn"), go = view(grad_out, "grad_out"),
               gf = view(grad_feat, "grad_feat"), gl = view(grad_el, "grad_el"),
               gr = view(grad_er, "grad_er");
        GatParams p = gat_params(heads, slope, dropout, seed, device_seed, f,
                                 "gat_aggregate_backward");
        const Tensor fo = forward_out ? view(*forward_out, "forward_out") : Tensor();
        if (forward_out) p.forward_out = &fo;
        Tensor st = softmax_state ? view(*softmax_state, "softmax_state") : Tensor();
        if (softmax_state) p.softmax_state = &st;
        Tensor ng = negative_logit_sums ? view(*negative_logit_sums, "negative_logit_sums")
                                        : Tensor();
        if (negative_logit_sums) p.negative_logit_sums = &ng;
        const OpOptions opt = options_for(stream, strategy);
        nb::gil_scoped_release unlocked;
        gat_aggregate_backward(g->g, f, l, r, a, go, p, gf, gl, gr, opt);
      },
      "handle"_a, "feat"_a.noconvert(), "el"_a.noconvert(), "er"_a.noconvert(),
      "attn"_a.noconvert(), "grad_out"_a.noconvert(), "heads"_a, "negative_slope"_a,
      "dropout"_a, "seed"_a, "grad_feat"_a.noconvert(), "grad_el"_a.noconvert(),
      "grad_er"_a.noconvert(), "stream"_a, "strategy"_a,
      "device_seed"_a.noconvert() = nb::none(), "forward_out"_a.noconvert() = nb::none(),
      "softmax_state"_a.noconvert() = nb::none(),
      "negative_logit_sums"_a.noconvert() = nb::none());

  // ---- dropout --------------------------------------------------------------------------------
  // Inverted dropout whose mask is a hash of (seed, element index): nothing to save for the
  // backward, which is this same call on the gradient.
  m.def(
      "dropout",
      [](const Array& x, double p, uint64_t seed, const Array& out, uintptr_t stream,
         const OptArray& device_seed) {
        const Tensor tx = view(x, "x");
        const uint64_t* dseed = device_seed_of(device_seed, tx, "dropout");
        Tensor ty = view(out, "out");
        // nn::dropout would allocate a new buffer for a mismatched one: not the caller's array.
        SPGNN_CHECK(ty.shape() == tx.shape() && ty.dtype() == tx.dtype() &&
                        ty.device() == tx.device(),
                    InvalidArgument, "dropout: 'out' must match 'x' in shape, dtype and device");
        nb::gil_scoped_release unlocked;
        nn::dropout(tx, p, seed, ty, as_stream(stream), dseed);
      },
      "x"_a.noconvert(), "p"_a, "seed"_a, "out"_a.noconvert(), "stream"_a,
      "device_seed"_a.noconvert() = nb::none());

  // ---- MaxK and CBSR --------------------------------------------------------------------------
  m.def(
      "maxk",
      [](const Array& x, int64_t k, const Array& data, const Array& index, uintptr_t stream) {
        Tensor tx = view(x, "x");
        Cbsr out;
        out.data = view(data, "data");
        out.index = view(index, "index");
        const OpOptions o = options_for(stream, "");
        nb::gil_scoped_release unlocked;
        maxk(tx, k, out, o);
      },
      "x"_a.noconvert(), "k"_a, "data"_a.noconvert(), "index"_a.noconvert(), "stream"_a);
  m.def(
      "maxk_backward",
      [](const Array& data, const Array& index, int64_t F, const Array& d_data, const Array& dx,
         uintptr_t stream) {
        const Cbsr kept = cbsr_of(view(data, "data"), view(index, "index"), F);
        Tensor dd = view(d_data, "d_data"), out = view(dx, "dx");
        const OpOptions o = options_for(stream, "");
        nb::gil_scoped_release unlocked;
        maxk_backward(kept, dd, out, o);
      },
      "data"_a.noconvert(), "index"_a.noconvert(), "F"_a, "d_data"_a.noconvert(),
      "dx"_a.noconvert(), "stream"_a);
  m.def(
      "cbsr_spgemm",
      [](uintptr_t h, const Array& data, const Array& index, int64_t F, const OptArray& e,
         const Array& out, uintptr_t stream) {
        auto g = lookup(h);
        const Cbsr x = cbsr_of(view(data, "data"), view(index, "index"), F);
        Tensor te = edge_operand(e), o = view(out, "out");
        const OpOptions opt = options_for(stream, "");
        nb::gil_scoped_release unlocked;
        cbsr_spgemm(g->g, x, te, o, opt);
      },
      "handle"_a, "data"_a.noconvert(), "index"_a.noconvert(), "F"_a, "e"_a.noconvert().none(),
      "out"_a.noconvert(), "stream"_a);
  m.def(
      "cbsr_sspmm",
      [](uintptr_t h, const OptArray& e, const Array& d_out, const Array& data,
         const Array& index, int64_t F, const Array& d_data, uintptr_t stream) {
        auto g = lookup(h);
        const Cbsr x = cbsr_of(view(data, "data"), view(index, "index"), F);
        Tensor te = edge_operand(e), go = view(d_out, "d_out"), dd = view(d_data, "d_data");
        const OpOptions opt = options_for(stream, "");
        nb::gil_scoped_release unlocked;
        cbsr_sspmm(g->g, te, go, x, dd, opt);
      },
      "handle"_a, "e"_a.noconvert().none(), "d_out"_a.noconvert(), "data"_a.noconvert(),
      "index"_a.noconvert(), "F"_a, "d_data"_a.noconvert(), "stream"_a);

  // ---- files ----------------------------------------------------------------------------------
  m.def(
      "read_npy",
      [](const std::string& path) {
        Tensor t;
        {
          nb::gil_scoped_release unlocked;
          t = read_npy(path);
        }
        return to_array(t);
      },
      "path"_a);
  m.def(
      "read_dataset",
      [](const std::string& dir, const std::string& edge_index_rows, bool allow_nonfinite) {
        ReadOptions ro;
        ro.edge_index_rows = parse_edge_index_rows(edge_index_rows);
        ro.allow_nonfinite = allow_nonfinite;
        ro.build.duplicates = DuplicatePolicy::keep;
        ro.keep_values = false;
        Dataset d;
        Tensor ei;
        {
          nb::gil_scoped_release unlocked;
          d = read_dataset_dir(dir, ro);
          ei = pyg_edge_index(d.graph);
        }
        nb::dict out;
        out["name"] = d.name;
        out["num_nodes"] = d.graph.n_rows;
        out["num_classes"] = d.num_classes;
        out["edge_index"] = to_array(ei);
        for (auto [key, t] : {std::pair<const char*, const Tensor*>{"x", &d.x}, {"y", &d.y},
                              {"train_idx", &d.train_idx}, {"val_idx", &d.val_idx},
                              {"test_idx", &d.test_idx}})
          out[key] = t->defined() ? to_array(*t) : nb::none();
        return out;
      },
      "dir"_a, "edge_index_rows"_a = "auto", "allow_nonfinite"_a = false);

  // One part of a partition directory (spgnn/partition.hpp), checked against its meta.json.
  m.def(
      "read_partition_part",
      [](const std::string& dir, int64_t part) {
        PartitionPart r;
        Tensor ei;
        {
          nb::gil_scoped_release unlocked;
          r = read_partition_part(dir, part);
          ei = pyg_edge_index(r.local.graph);  // sources: owned or halo local ids
        }
        const LocalPart& lp = r.local;
        nb::dict out;
        out["parts"] = r.meta.parts;
        out["method"] = r.meta.method;
        out["num_nodes"] = r.meta.summary.num_nodes;
        out["num_classes"] = r.meta.num_classes;
        out["num_owned"] = lp.n_owned;
        out["num_local"] = lp.n_owned + lp.n_halo();
        out["edge_index"] = to_array(ei);
        out["edge_weight"] = lp.graph.has_values() ? to_array(lp.graph.val) : nb::none();
        out["global_ids"] = to_array(Tensor::from_vector(lp.global_ids));
        out["halo_offsets"] = to_array(Tensor::from_vector(lp.halo_offsets));
        out["send_offsets"] = to_array(Tensor::from_vector(lp.send_offsets));
        out["send_ids"] = to_array(Tensor::from_vector(lp.send_ids));
        for (auto [key, t] : {std::pair<const char*, const Tensor*>{"x", &r.x}, {"y", &r.y},
                              {"train_idx", &r.train_idx}, {"val_idx", &r.val_idx},
                              {"test_idx", &r.test_idx}})
          out[key] = t->defined() ? to_array(*t) : nb::none();
        return out;
      },
      "dir"_a, "part"_a);

  // ---- introspection --------------------------------------------------------------------------
  // What the C++ side sees of an array: its address, shape, dtype and device. The package's
  // tests use it to prove that arrays are read in place.
  m.def(
      "view_info",
      [](const Array& a) {
        Tensor t = view(a, "array");
        return std::make_tuple(reinterpret_cast<uintptr_t>(t.raw()), t.shape(),
                               std::string(dtype_name(t.dtype())), t.device().str(),
                               t.is_external());
      },
      "array"_a.noconvert());
}
