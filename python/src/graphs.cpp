#include "graphs.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <unordered_map>
#include <vector>

namespace spgnn::py {

namespace {

// ---- registry -----------------------------------------------------------------------------------

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_map<int64_t, std::weak_ptr<GraphEntry>>& registry() {
  static auto* r = new std::unordered_map<int64_t, std::weak_ptr<GraphEntry>>();
  return *r;
}

// Ids start far from small integers so that a tensor that is not a handle (whose first element
// is often 0, 1, ...) is not mistaken for one.
std::shared_ptr<GraphEntry> register_entry(std::unique_ptr<GraphEntry> raw) {
  static std::atomic<int64_t> next{0x5367'6e6e'0000'0001};
  raw->id = next++;
  const int64_t id = raw->id;
  std::shared_ptr<GraphEntry> e(raw.release(), [](GraphEntry* p) {
    {
      std::lock_guard<std::mutex> lock(registry_mutex());
      registry().erase(p->id);
    }
    delete p;
  });
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry()[id] = e;
  return e;
}

std::shared_ptr<GraphEntry> make_entry(Graph host, Tensor edge_source, Device device,
                                       std::string kind) {
  auto e = std::make_unique<GraphEntry>();
  e->kind = std::move(kind);
  e->edge_source = std::move(edge_source);
  if (device.is_cuda()) {
    e->g = host.to(device);
    e->set_host(std::move(host));
  } else {
    e->g = std::move(host);
  }
  return register_entry(std::move(e));
}

template <class I>
void check_range(const I* ids, int64_t m, int64_t limit, const std::string& name) {
  int64_t first_bad = m;
#pragma omp parallel for schedule(static) reduction(min : first_bad)
  for (int64_t k = 0; k < m; ++k)
    if (ids[k] < 0 || static_cast<int64_t>(ids[k]) >= limit) first_bad = std::min(first_bad, k);
  if (first_bad < m)
    throw InvalidArgument(detail::concat(name, "[", first_bad, "] = ",
                                         static_cast<int64_t>(ids[first_bad]),
                                         " is out of range: node ids must lie in [0, ", limit,
                                         ")"));
}

// t on the host: t itself, or a copy ordered after `stream` (a GPU array's writer).
Tensor host_copy(const Tensor& t, void* stream) {
  if (!t.defined() || !t.device().is_cuda()) return t;
  Tensor h = Tensor::empty(t.shape(), t.dtype());
  h.copy_from(t, stream);  // device -> pageable host: returns once the copy is done
  return h;
}

// Drops an edge_source that is the identity (the input was already in canonical order).
Tensor unless_identity(Tensor pos) {
  const int64_t n = pos.numel();
  const int64_t* p = pos.data<int64_t>();
  bool identity = true;
#pragma omp parallel for schedule(static) reduction(&& : identity)
  for (int64_t i = 0; i < n; ++i) identity = identity && p[i] == i;
  return identity ? Tensor() : pos;
}

// PyG's gcn_norm on a canonical host graph: with `add_loops`, every existing self loop is
// removed and one loop per vertex added (add_remaining_self_loops), whose weight is that of the
// vertex's last existing loop, or `fill`; deg[v] = the sum of v's incoming weights (loop
// included), and edge (v <- u) gets deg[u]^-1/2 * w * deg[v]^-1/2 (0 where a degree is 0).
// Weights are the graph's values, or 1. `source` receives each edge's position in `g` (-1:
// a created loop).
template <class I, class O>
Graph gcn_impl(const Graph& g, bool add_loops, float fill, Tensor& source) {
  const int64_t n = g.n_rows;
  const I* rp = g.rowptr.data<I>();
  const I* col = g.nnz() ? g.col.data<I>() : nullptr;
  const float* w = g.has_values() ? g.val.data<float>() : nullptr;
  // Output row lengths: a row keeps its non-loop edges and gets exactly one loop.
  std::vector<int64_t> off(static_cast<size_t>(n) + 1, 0);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    int64_t len = rp[r + 1] - rp[r];
    if (add_loops) {
      const I* lo = std::lower_bound(col + rp[r], col + rp[r + 1], static_cast<I>(r));
      const I* hi = std::upper_bound(lo, col + rp[r + 1], static_cast<I>(r));
      len += 1 - (hi - lo);
    }
    off[static_cast<size_t>(r) + 1] = len;
  }
  for (int64_t r = 0; r < n; ++r) off[r + 1] += off[r];
  const int64_t nnz = off[static_cast<size_t>(n)];
  Graph out;
  out.n_rows = n;
  out.n_cols = g.n_cols;
  const DType it = dtype_of<O>();
  out.rowptr = Tensor::empty({n + 1}, it);
  out.row = Tensor::empty({nnz}, it);
  out.col = Tensor::empty({nnz}, it);
  out.val = Tensor::empty({nnz}, DType::f32);
  source = Tensor::empty({nnz}, DType::i64);
  O* orp = out.rowptr.data<O>();
  O* orow = out.row.data<O>();
  O* ocol = out.col.data<O>();
  float* oval = out.val.data<float>();
  int64_t* osrc = source.data<int64_t>();
  std::vector<double> deg(static_cast<size_t>(n), 0.0);
#pragma omp parallel for schedule(dynamic, 512)
  for (int64_t r = 0; r < n; ++r) {
    int64_t pos = off[static_cast<size_t>(r)];
    orp[r] = static_cast<O>(pos);
    const int64_t b = rp[r], e = rp[r + 1];
    int64_t lo = e, hi = e;
    if (add_loops) {
      lo = std::lower_bound(col + b, col + e, static_cast<I>(r)) - col;
      hi = std::upper_bound(col + lo, col + e, static_cast<I>(r)) - col;
    }
    double d = 0;
    auto put = [&](int64_t c, int64_t src, float weight) {
      ocol[pos] = static_cast<O>(c);
      orow[pos] = static_cast<O>(r);
      osrc[pos] = src;
      oval[pos] = weight;
      d += weight;
      ++pos;
    };
    for (int64_t k = b; k < lo; ++k) put(col[k], k, w ? w[k] : 1.f);
    if (add_loops) {
      // Parallel loops sit in input order within the row, so hi - 1 is the last one given.
      const int64_t last = hi > lo ? hi - 1 : -1;
      put(r, last, last >= 0 ? (w ? w[last] : 1.f) : fill);
    }
    for (int64_t k = hi; k < e; ++k) put(col[k], k, w ? w[k] : 1.f);
    deg[static_cast<size_t>(r)] = d;
  }
  orp[n] = static_cast<O>(nnz);
  std::vector<double> dinv(static_cast<size_t>(std::max(n, g.n_cols)), 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t v = 0; v < n; ++v) {
    const double d = deg[static_cast<size_t>(v)];
    dinv[static_cast<size_t>(v)] = d > 0 ? 1.0 / std::sqrt(d) : 0.0;
  }
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < nnz; ++k)
    oval[k] = static_cast<float>(dinv[static_cast<size_t>(orow[k])] * oval[k] *
                                 dinv[static_cast<size_t>(ocol[k])]);
  return out;
}

Graph gcn_variant(const Graph& g, bool add_loops, float fill, Tensor& source) {
  SPGNN_CHECK(g.square(), InvalidArgument, "GCN normalisation needs a square graph, got ",
              g.n_rows, " x ", g.n_cols);
  int64_t upper = g.nnz() + (add_loops ? g.n_rows : 0);
  const DType out_t = pick_index_dtype(g.n_rows, upper);
  if (g.index_dtype() == DType::i32) {
    return out_t == DType::i32 ? gcn_impl<int32_t, int32_t>(g, add_loops, fill, source)
                               : gcn_impl<int32_t, int64_t>(g, add_loops, fill, source);
  }
  return out_t == DType::i32 ? gcn_impl<int64_t, int32_t>(g, add_loops, fill, source)
                             : gcn_impl<int64_t, int64_t>(g, add_loops, fill, source);
}

Tensor as_i64(const Tensor& t) { return t.dtype() == DType::i64 ? t : t.astype(DType::i64); }

Tensor iota(int64_t n) {
  Tensor t = Tensor::empty({n}, DType::i64);
  int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  return t;
}

// The host-side content of graph_tensor(name).
Tensor host_tensor(const GraphEntry& e, const std::string& name) {
  const Graph& h = e.host_graph();
  if (name == "row") return h.nnz() ? as_i64(h.row) : Tensor::empty({0}, DType::i64);
  if (name == "col") return h.nnz() ? as_i64(h.col) : Tensor::empty({0}, DType::i64);
  if (name == "edge_source")
    return e.edge_source.defined() ? host_copy(e.edge_source, e.stream) : iota(h.nnz());
  if (name == "values") return h.has_values() ? h.val : Tensor::full({h.nnz()}, DType::f32, 1.0);
  if (name == "inv_degree") return inverse_degree(h);
  throw InvalidArgument("graph_tensor: unknown name '" + name +
                        "' (row, col, edge_source, values, inv_degree)");
}

}  // namespace

std::shared_ptr<GraphEntry> build_entry(const Tensor& rows_in, const Tensor& cols_in,
                                        const Tensor& values_in, int64_t n_rows, int64_t n_cols,
                                        const std::string& rows_name,
                                        const std::string& cols_name, void* stream) {
  SPGNN_CHECK(n_rows >= 0 && n_cols >= 0, InvalidArgument, "the number of nodes must be >= 0, got ",
              n_rows, " x ", n_cols);
  const Device device = rows_in.device();
  SPGNN_CHECK(cols_in.device() == device, InvalidArgument, cols_name, " is on ",
              cols_in.device().str(), " but ", rows_name, " is on ", device.str());
  SPGNN_CHECK(!values_in.defined() || values_in.device() == device, InvalidArgument,
              "edge values are on ", values_in.defined() ? values_in.device().str() : "",
              " but the edges are on ", device.str());
  const Tensor rows = host_copy(rows_in, stream), cols = host_copy(cols_in, stream),
               values = host_copy(values_in, stream);
  const int64_t m = rows.numel();
  if (rows.dtype() == DType::i64) {
    check_range(rows.data<int64_t>(), m, n_rows, rows_name);
    check_range(cols.data<int64_t>(), m, n_cols, cols_name);
  } else if (rows.dtype() == DType::i32) {
    check_range(rows.data<int32_t>(), m, n_rows, rows_name);
    check_range(cols.data<int32_t>(), m, n_cols, cols_name);
  }
  BuildOptions opt;
  opt.duplicates = DuplicatePolicy::keep;
  opt.self_loops = SelfLoopPolicy::keep;
  Tensor pos;
  Graph host = graph_from_edge_tensors(n_rows, n_cols, rows, cols, values, opt, &pos);
  return make_entry(std::move(host), unless_identity(std::move(pos)), device, "base");
}

std::shared_ptr<GraphEntry> derive(const std::shared_ptr<GraphEntry>& e, const std::string& kind) {
  std::lock_guard<std::mutex> lock(e->mutex);
  std::shared_ptr<GraphEntry>& slot = e->derived[kind];
  if (slot) return slot;
  const Graph& h = e->host_graph();
  const Device dev = e->g.device();
  Tensor source;
  Graph out;
  if (kind == "gcn" || kind == "gcn_improved" || kind == "gcn_noloops") {
    out = gcn_variant(h, kind != "gcn_noloops", kind == "gcn_improved" ? 2.f : 1.f, source);
  } else if (kind == "mean") {
    out = mean_normalize(h);
  } else if (kind == "loops") {
    SPGNN_CHECK(h.n_rows <= h.n_cols, InvalidArgument,
                "self loops need every target to be a source too (target i = source i), got ",
                h.n_rows, " targets and ", h.n_cols, " sources");
    BuildOptions b;
    b.duplicates = DuplicatePolicy::keep;
    b.self_loops = SelfLoopPolicy::add;
    out = graph_from_edge_tensors(h.n_rows, h.n_cols, h.row, h.col, Tensor(), b, &source);
  } else if (kind == "pattern") {
    if (!h.has_values()) {
      e->derived.erase(kind);  // already a pattern: a copy would only double its memory
      return e;
    }
    out = h;
    out.val = Tensor();
  } else if (kind == "transpose") {
    Transposed t = transpose(h);
    out = std::move(t.graph);
    source = std::move(t.perm);
  } else if (kind.rfind("to:", 0) == 0) {
    const Device to = parse_device(kind.substr(3));
    if (to == dev) {
      e->derived.erase(kind);  // never store a reference to itself: the entry would never die
      return e;
    }
    auto c = std::make_unique<GraphEntry>();
    c->kind = e->kind;
    c->edge_source = host_copy(e->edge_source, e->stream);  // host (or the graph's device)
    c->g = h.to(to);
    if (to.is_cuda()) c->set_host(h);
    return slot = register_entry(std::move(c));
  } else {
    throw InvalidArgument("unknown graph derivation '" + kind +
                          "' (gcn, gcn_improved, gcn_noloops, mean, loops, pattern, transpose, "
                          "to:<device>)");
  }
  if (source.defined()) source = unless_identity(std::move(source));
  return slot = make_entry(std::move(out), std::move(source), dev, kind);
}

std::shared_ptr<GraphEntry> make_entry_for(Graph host, Device device, const std::string& kind) {
  return make_entry(std::move(host), Tensor(), device, kind);
}

const Graph& GraphEntry::host_graph() const {
  if (!g.device().is_cuda()) return g;
  std::call_once(host_once_, [this] {
    if (host_ready_) return;
    // Ordered on the stream that wrote the arrays (a copy to pageable memory returns when done).
    auto down = [this](const Tensor& t) { return host_copy(t, stream); };
    Graph h;
    h.n_rows = g.n_rows;
    h.n_cols = g.n_cols;
    h.row = down(g.row);
    h.col = down(g.col);
    h.rowptr = down(g.rowptr);
    h.val = down(g.val);
    host_ = std::move(h);
    host_ready_ = true;
  });
  return host_;
}

std::shared_ptr<GraphEntry> entry_from_arrays(Graph g, Tensor edge_source, const std::string& kind,
                                              void* stream,
                                              const std::shared_ptr<GraphEntry>& parent) {
  const int64_t nnz = g.row.defined() ? g.row.numel() : -1;
  const Device dev = g.rowptr.defined() ? g.rowptr.device() : Device::cpu();
  const DType it = g.rowptr.defined() ? g.rowptr.dtype() : DType::f32;
  auto index_ok = [&](const Tensor& t, int64_t n) {
    return t.defined() && t.ndim() == 1 && t.numel() == n && t.dtype() == it &&
           t.device() == dev;
  };
  SPGNN_CHECK(dev.is_cuda() && (it == DType::i32 || it == DType::i64) && g.n_rows >= 0 &&
                  g.n_cols >= 0 && nnz >= 0 && index_ok(g.rowptr, g.n_rows + 1) &&
                  index_ok(g.row, nnz) && index_ok(g.col, nnz) &&
                  (!g.val.defined() || (g.val.dtype() == DType::f32 && g.val.ndim() == 1 &&
                                        g.val.numel() == nnz && g.val.device() == dev)) &&
                  (!edge_source.defined() ||
                   (edge_source.dtype() == DType::i64 && edge_source.ndim() == 1 &&
                    edge_source.numel() == nnz && edge_source.device() == dev)),
              InvalidArgument,
              "graph_from_arrays: expected contiguous int32/int64 row, col [nnz] and rowptr "
              "[n_rows + 1], float32 values [nnz] and int64 edge_source [nnz], all on one GPU");
  auto raw = std::make_unique<GraphEntry>();
  raw->kind = kind;
  raw->g = std::move(g);
  raw->edge_source = std::move(edge_source);
  raw->stream = stream;
  raw->device_built = true;
  if (!parent) return register_entry(std::move(raw));
  SPGNN_CHECK(parent->g.device() == dev, InvalidArgument, "graph_from_arrays: a variant on ",
              dev.str(), " of a graph on ", parent->g.device().str());
  std::lock_guard<std::mutex> lock(parent->mutex);
  std::shared_ptr<GraphEntry>& slot = parent->derived[kind];
  if (!slot) slot = register_entry(std::move(raw));
  return slot;
}

std::shared_ptr<GraphEntry> lookup(uintptr_t address) {
  SPGNN_CHECK(address != 0, InvalidArgument, "not a spgnn graph handle (null address)");
  const int64_t id = *reinterpret_cast<const int64_t*>(address);
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().find(id);
  std::shared_ptr<GraphEntry> e = it == registry().end() ? nullptr : it->second.lock();
  SPGNN_CHECK(e != nullptr, InvalidArgument,
              "not a live spgnn graph handle (build graphs with spgnn.Graph or pass an "
              "edge_index; handles are internal)");
  return e;
}

// Each handle owns a fresh copy of the id: torch.compile may recycle the storage of a handle it
// has finished with for another buffer (an int64 scalar of the same size, say), which must never
// be the entry's own memory or that of a handle still in use.
struct HandleBox {
  int64_t id;
  std::shared_ptr<GraphEntry> entry;
};

nb::object handle_of(const std::shared_ptr<GraphEntry>& e) {
  auto* box = new HandleBox{e->id, e};
  nb::capsule owner(box, [](void* p) noexcept { delete static_cast<HandleBox*>(p); });
  const size_t shape[1] = {1};
  nb::ndarray<int64_t> a(&box->id, 1, shape, owner);
  return a.cast();
}

std::vector<int64_t> graph_tensor_shape(const GraphEntry& e, const std::string& name) {
  const Graph& g = e.g;
  if (name == "inv_degree") return {g.n_rows};
  return {g.nnz()};
}

DType graph_tensor_dtype(const std::string& name) {
  return name == "values" || name == "inv_degree" ? DType::f32 : DType::i64;
}

void graph_tensor(const std::shared_ptr<GraphEntry>& e, const std::string& name, Tensor& out,
                  void* stream) {
  Tensor src;
  {
    std::lock_guard<std::mutex> lock(e->mutex);
    Tensor& cached = e->device_tensors[name];
    if (!cached.defined()) {
      Tensor h = host_tensor(*e, name);
      cached = e->g.device().is_cuda() ? h.to(e->g.device()) : h;
    }
    src = cached;
  }
  SPGNN_CHECK(out.shape() == src.shape() && out.dtype() == src.dtype() &&
                  out.device() == src.device(),
              InvalidArgument, "graph_tensor(", name, "): output must be ", dtype_name(src.dtype()),
              src.shape_str(), " on ", src.device().str(), ", got ", dtype_name(out.dtype()),
              out.shape_str(), " on ", out.device().str());
  out.copy_from(src, stream);
}

size_t live_graph_count() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  size_t n = 0;
  for (auto& [id, w] : registry()) n += !w.expired();
  return n;
}

}  // namespace spgnn::py
