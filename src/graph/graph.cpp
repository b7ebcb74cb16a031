// Graph construction and invariants: the edge-list builder (sort, dedupe, self loops, symmetrize),
// index-width selection and validate().
//
// The builder is a counting sort by row (O(nnz); per-thread histograms, or atomics when there
// are too many rows for those) followed by a comparison sort of each row's columns. Each edge
// travels as one packed integer key (col << kbits | k), where k is the edge's position in the
// input; sorting keys orders a row by (col, input position), so the result is identical whatever
// order the bucket fill produced, and "drop keeps the first value" means the smallest position. Peak extra memory is the key
// array (8 bytes per edge in practice) plus the output arrays; the caller's edge list is read in
// place and never copied.
#include "spgnn/graph.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <new>
#include <vector>

#include "graph/graph_internal.hpp"
#include "io/io_internal.hpp"

namespace spgnn {

namespace graph_detail {
void require_host(const Graph& g, const char* what) {
  SPGNN_CHECK(!g.device().is_cuda(), InvalidArgument, what, ": the graph is on ",
              g.device().str(), ", but this runs on the host (copy it with .to(Device::cpu()))");
}
}  // namespace graph_detail

namespace {

using graph_detail::kRowsPerTask;

using graph_detail::EdgeArrays;

// Largest value an int32 index array may need to hold. rowptr stores nnz itself, so a graph is
// int32 only when both n and nnz stay strictly below this.
constexpr int64_t kIndex32Limit = std::numeric_limits<int32_t>::max();

__extension__ typedef unsigned __int128 U128;

// Number of bits needed to write values 0..max_value.
int bits_for(uint64_t max_value) {
  int b = 0;
  while (b < 64 && (max_value >> b) != 0) ++b;
  return b;
}

// The edge list the builder sees: the input, plus (when symmetrizing) its mirror at positions
// [m, 2m). A self loop is its own mirror, so its mirrored copy is skipped rather than doubled.
template <class InT>
struct VirtualEdges {
  EdgeArrays<InT> e;
  bool mirror = false;
  bool drop_loops = false;

  int64_t size() const { return mirror ? 2 * e.m : e.m; }
  // False when virtual edge k is not part of the graph.
  bool get(int64_t k, int64_t& r, int64_t& c) const {
    if (k < e.m) {
      r = static_cast<int64_t>(e.rows[k]);
      c = static_cast<int64_t>(e.cols[k]);
      return !(drop_loops && r == c);
    }
    r = static_cast<int64_t>(e.cols[k - e.m]);
    c = static_cast<int64_t>(e.rows[k - e.m]);
    return r != c;
  }
  float val(int64_t k) const { return e.vals[k < e.m ? k : k - e.m]; }
};

template <class InT>
void check_ids(int64_t n_rows, int64_t n_cols, const EdgeArrays<InT>& e) {
  int64_t first_bad = e.m;
#pragma omp parallel for schedule(static) reduction(min : first_bad)
  for (int64_t k = 0; k < e.m; ++k) {
    const int64_t r = static_cast<int64_t>(e.rows[k]), c = static_cast<int64_t>(e.cols[k]);
    if (r < 0 || r >= n_rows || c < 0 || c >= n_cols) first_bad = std::min(first_bad, k);
  }
  if (first_bad == e.m) return;
  const int64_t r = static_cast<int64_t>(e.rows[first_bad]);
  const int64_t c = static_cast<int64_t>(e.cols[first_bad]);
  if (r < 0 || r >= n_rows)
    throw InvalidArgument(detail::concat("edge list position ", first_bad, ": row id ", r,
                                         " is out of range [0, ", n_rows, ")"));
  throw InvalidArgument(detail::concat("edge list position ", first_bad, ": col id ", c,
                                       " is out of range [0, ", n_cols, ")"));
}

// Phase 1: bucket the kept virtual edges by row. offsets[r]..offsets[r+1] is row r's bucket.
template <class KeyT, class InT>
std::unique_ptr<KeyT[]> bucket_by_row(const VirtualEdges<InT>& ve, int64_t n_rows, int kbits,
                                      std::vector<int64_t>& offsets) {
  const int64_t mv = ve.size();
  std::unique_ptr<KeyT[]> keys;
  KeyT* out = nullptr;
  auto key_of = [&](int64_t k, int64_t c) {
    return (static_cast<KeyT>(c) << kbits) | static_cast<KeyT>(k);
  };
  const bool stable = graph_detail::stable_bucket_scatter(
      mv, n_rows, offsets,
      [&](int64_t k) -> int64_t {
        int64_t r, c;
        return ve.get(k, r, c) ? r : -1;
      },
      [&](int64_t total) {
        // new[] without () leaves the keys uninitialised: every slot is written once.
        keys.reset(new KeyT[static_cast<size_t>(total)]);
        out = keys.get();
      },
      [&](int64_t k, int64_t pos) {
        int64_t r, c;
        ve.get(k, r, c);
        out[pos] = key_of(k, c);
      });
  if (stable) return keys;

  // Too many rows for per-thread histograms: fill buckets with atomics instead. The bucket
  // order is then arbitrary, which the per-row sort by (col, input position) undoes.
  offsets.assign(static_cast<size_t>(n_rows) + 1, 0);
  int64_t* count = offsets.data() + 1;
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < mv; ++k) {
    int64_t r, c;
    if (!ve.get(k, r, c)) continue;
#pragma omp atomic
    count[r]++;
  }
  for (int64_t r = 0; r < n_rows; ++r) offsets[r + 1] += offsets[r];
  std::vector<int64_t> cursor(offsets.begin(), offsets.end() - 1);
  keys.reset(new KeyT[static_cast<size_t>(offsets[n_rows])]);
  out = keys.get();
  int64_t* cur = cursor.data();
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < mv; ++k) {
    int64_t r, c, pos;
    if (!ve.get(k, r, c)) continue;
#pragma omp atomic capture
    pos = cur[r]++;
    out[pos] = key_of(k, c);
  }
  return keys;
}

enum class ValueRule : uint8_t { first, sum, one };

// Walks one sorted row and reports each output edge as out(col, b, q, rule): the edge takes
// its value from keys [b, q) by `rule` (one: a new self loop with value 1).
template <class KeyT, class Out>
void walk_row(int64_t r, const KeyT* keys, int64_t b, int64_t e, int kbits, DuplicatePolicy dup,
              bool add_loop, Out&& out) {
  const ValueRule merge = dup == DuplicatePolicy::sum ? ValueRule::sum : ValueRule::first;
  bool loop_done = !add_loop;
  int64_t p = b;
  while (p < e) {
    const int64_t c = static_cast<int64_t>(keys[p] >> kbits);
    int64_t q = p + 1;
    while (q < e && static_cast<int64_t>(keys[q] >> kbits) == c) ++q;
    if (!loop_done && c >= r) {
      loop_done = true;
      if (c > r) {
        out(r, p, p, ValueRule::one);
      } else {
        // "add" promises exactly one loop per vertex, so parallel loops collapse even under
        // the keep policy (keeping the first value, or the sum under the sum policy).
        out(c, p, q, merge);
        p = q;
        continue;
      }
    }
    if (dup == DuplicatePolicy::keep) {
      for (int64_t i = p; i < q; ++i) out(c, i, i + 1, ValueRule::first);
    } else {
      out(c, p, q, merge);
    }
    p = q;
  }
  if (!loop_done) out(r, e, e, ValueRule::one);
}

template <class IndexT, class KeyT, class InT>
Graph emit_graph(int64_t n_rows, int64_t n_cols, const VirtualEdges<InT>& ve,
                 std::unique_ptr<KeyT[]> keys, const std::vector<int64_t>& in_off,
                 const std::vector<int64_t>& out_off, int kbits, const BuildOptions& opt,
                 Tensor* input_pos) {
  const int64_t nnz = out_off[static_cast<size_t>(n_rows)];
  const DType it = dtype_of<IndexT>();
  const bool add_loops = opt.self_loops == SelfLoopPolicy::add;
  const KeyT kmask = (static_cast<KeyT>(1) << kbits) - 1;
  Graph g;
  g.n_rows = n_rows;
  g.n_cols = n_cols;
  g.rowptr = Tensor::empty({n_rows + 1}, it);
  g.row = Tensor::empty({nnz}, it);
  g.col = Tensor::empty({nnz}, it);
  if (ve.e.vals) g.val = Tensor::empty({nnz}, DType::f32);
  IndexT* rp = g.rowptr.data<IndexT>();
  IndexT* row = g.row.data<IndexT>();
  IndexT* col = g.col.data<IndexT>();
  float* val = ve.e.vals ? g.val.data<float>() : nullptr;
  int64_t* ipos = nullptr;
  if (input_pos) {
    *input_pos = Tensor::empty({nnz}, DType::i64);
    ipos = input_pos->data<int64_t>();
  }
  const KeyT* kp = keys.get();

#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r <= n_rows; ++r) rp[r] = static_cast<IndexT>(out_off[static_cast<size_t>(r)]);

#pragma omp parallel for schedule(dynamic, kRowsPerTask)
  for (int64_t r = 0; r < n_rows; ++r) {
    int64_t pos = out_off[static_cast<size_t>(r)];
    walk_row(r, kp, in_off[static_cast<size_t>(r)], in_off[static_cast<size_t>(r) + 1], kbits,
             opt.duplicates, add_loops, [&](int64_t c, int64_t b, int64_t q, ValueRule rule) {
               col[pos] = static_cast<IndexT>(c);
               // Under keep (checked by the caller) every edge but a created loop is one key.
               if (ipos)
                 ipos[pos] = rule == ValueRule::one ? -1 : static_cast<int64_t>(kp[b] & kmask);
               if (val) {
                 if (rule == ValueRule::one) {
                   val[pos] = 1.0f;
                 } else if (rule == ValueRule::first) {
                   val[pos] = ve.val(static_cast<int64_t>(kp[b] & kmask));
                 } else {
                   // Keys are in input order within a run, so the sum is deterministic.
                   double s = 0;
                   for (int64_t i = b; i < q; ++i) s += ve.val(static_cast<int64_t>(kp[i] & kmask));
                   val[pos] = static_cast<float>(s);
                 }
               }
               ++pos;
             });
  }
  keys.reset();  // release before touching the row array, to keep the peak low

#pragma omp parallel for schedule(dynamic, kRowsPerTask)
  for (int64_t r = 0; r < n_rows; ++r)
    std::fill(row + out_off[static_cast<size_t>(r)], row + out_off[static_cast<size_t>(r) + 1],
              static_cast<IndexT>(r));
  return g;
}

template <class KeyT, class InT>
Graph build_keyed(int64_t n_rows, int64_t n_cols, const VirtualEdges<InT>& ve, int kbits,
                  const BuildOptions& opt, Tensor* input_pos) {
  std::vector<int64_t> in_off;
  std::unique_ptr<KeyT[]> keys = bucket_by_row<KeyT>(ve, n_rows, kbits, in_off);
  KeyT* kp = keys.get();
#pragma omp parallel for schedule(dynamic, kRowsPerTask)
  for (int64_t r = 0; r < n_rows; ++r)
    std::sort(kp + in_off[static_cast<size_t>(r)], kp + in_off[static_cast<size_t>(r) + 1]);

  const bool add_loops = opt.self_loops == SelfLoopPolicy::add;
  std::vector<int64_t> out_off(static_cast<size_t>(n_rows) + 1, 0);
#pragma omp parallel for schedule(dynamic, kRowsPerTask)
  for (int64_t r = 0; r < n_rows; ++r) {
    int64_t cnt = 0;
    walk_row(r, kp, in_off[static_cast<size_t>(r)], in_off[static_cast<size_t>(r) + 1], kbits,
             opt.duplicates, add_loops, [&](int64_t, int64_t, int64_t, ValueRule) { ++cnt; });
    out_off[static_cast<size_t>(r) + 1] = cnt;
  }
  for (int64_t r = 0; r < n_rows; ++r)
    out_off[static_cast<size_t>(r) + 1] += out_off[static_cast<size_t>(r)];

  const DType it = pick_index_dtype(std::max(n_rows, n_cols), out_off.back(), opt.index_width);
  if (it == DType::i32)
    return emit_graph<int32_t>(n_rows, n_cols, ve, std::move(keys), in_off, out_off, kbits, opt,
                               input_pos);
  return emit_graph<int64_t>(n_rows, n_cols, ve, std::move(keys), in_off, out_off, kbits, opt,
                             input_pos);
}

template <class InT>
Graph build_impl(int64_t n_rows, int64_t n_cols, const EdgeArrays<InT>& e,
                 const BuildOptions& opt, Tensor* input_pos) {
  SPGNN_CHECK(n_rows >= 0 && n_cols >= 0, InvalidArgument, "graph size ", n_rows, " x ", n_cols,
              " is negative");
  SPGNN_CHECK(e.m >= 0, InvalidArgument, "negative edge count ", e.m);
  SPGNN_CHECK(!opt.symmetrize || n_rows == n_cols, InvalidArgument,
              "symmetrize needs a square graph, got ", n_rows, " x ", n_cols);
  // Target i's loop comes from source i: every target must also be a source, as in a square
  // graph or a partition's local graph (owned vertices first among the sources; a DGL block).
  SPGNN_CHECK(opt.self_loops != SelfLoopPolicy::add || n_rows <= n_cols, InvalidArgument,
              "self_loops=add needs every target to be a source too (n_rows <= n_cols), got ",
              n_rows, " x ", n_cols);
  SPGNN_CHECK(!input_pos || (opt.duplicates == DuplicatePolicy::keep && !opt.symmetrize),
              InvalidArgument,
              "input positions exist only when every edge comes from one input edge: "
              "duplicates=keep and no symmetrize");
  // Fail before the expensive part when int32 was requested for too many vertices.
  pick_index_dtype(std::max(n_rows, n_cols), 0, opt.index_width);
  check_ids(n_rows, n_cols, e);

  VirtualEdges<InT> ve;
  ve.e = e;
  ve.mirror = opt.symmetrize;
  ve.drop_loops = opt.self_loops == SelfLoopPolicy::remove;
  const int64_t mv = ve.size();
  graph_detail::require_build_memory(n_rows, mv);
  const int kbits = bits_for(static_cast<uint64_t>(mv > 0 ? mv - 1 : 0));
  const int cbits = bits_for(static_cast<uint64_t>(n_cols > 0 ? n_cols - 1 : 0));
  // 64-bit keys cover every graph that fits in memory today (2^27 vertices x 2^30 edges uses
  // 57 bits); the 128-bit path only keeps absurd sizes correct instead of truncating.
  if (kbits + cbits <= 64)
    return build_keyed<uint64_t>(n_rows, n_cols, ve, kbits, opt, input_pos);
  return build_keyed<U128>(n_rows, n_cols, ve, kbits, opt, input_pos);
}

template <class IndexT>
std::string check_edge(const Graph& g, const IndexT* row, const IndexT* col, const IndexT* rp,
                       const float* val, int64_t e) {
  const int64_t r = row[e], c = col[e];
  if (r < 0 || r >= g.n_rows)
    return detail::concat("edge ", e, ": row ", r, " is out of range [0, ", g.n_rows, ")");
  if (c < 0 || c >= g.n_cols)
    return detail::concat("edge ", e, ": row ", r, " col ", c, " is out of range [0, ", g.n_cols,
                          ")");
  if (e > 0) {
    const int64_t pr = row[e - 1], pc = col[e - 1];
    if (pr > r)
      return detail::concat("edge ", e, ": row ", r, " col ", c, " comes after row ", pr, " col ",
                            pc, " (rows must be sorted ascending)");
    if (pr == r && pc > c)
      return detail::concat("edge ", e, ": row ", r, " col ", c, " comes after row ", pr, " col ",
                            pc, " (columns must be sorted within a row)");
  }
  if (!(static_cast<int64_t>(rp[r]) <= e && e < static_cast<int64_t>(rp[r + 1])))
    return detail::concat("edge ", e, ": row ", r, " col ", c, " lies outside rowptr's range [",
                          static_cast<int64_t>(rp[r]), ", ", static_cast<int64_t>(rp[r + 1]),
                          ") for row ", r, " (rowptr disagrees with row[])");
  if (val && !std::isfinite(val[e]))
    return detail::concat("edge ", e, ": row ", r, " col ", c, " has value ", val[e],
                          " (values must be finite)");
  return {};
}

template <class IndexT>
void validate_arrays(const Graph& g) {
  const int64_t nnz = g.row.numel();
  const IndexT* row = g.row.data<IndexT>();
  const IndexT* col = g.col.data<IndexT>();
  const IndexT* rp = g.rowptr.data<IndexT>();
  const float* val = g.val.defined() ? g.val.data<float>() : nullptr;

  SPGNN_CHECK(rp[0] == 0, FormatError, "rowptr[0] is ", static_cast<int64_t>(rp[0]),
              ", expected 0");
  int64_t bad_row = g.n_rows;
#pragma omp parallel for schedule(static) reduction(min : bad_row)
  for (int64_t i = 0; i < g.n_rows; ++i)
    if (rp[i] > rp[i + 1]) bad_row = std::min(bad_row, i);
  SPGNN_CHECK(bad_row == g.n_rows, FormatError, "rowptr[", bad_row, "] = ",
              static_cast<int64_t>(rp[bad_row]), " > rowptr[", bad_row + 1, "] = ",
              static_cast<int64_t>(rp[bad_row + 1]), " (rowptr must be non-decreasing)");
  SPGNN_CHECK(static_cast<int64_t>(rp[g.n_rows]) == nnz, FormatError, "rowptr[", g.n_rows,
              "] is ", static_cast<int64_t>(rp[g.n_rows]), ", expected nnz = ", nnz);

  // Scan in parallel for a bad edge, then describe only the first one.
  int64_t bad = nnz;
#pragma omp parallel for schedule(static) reduction(min : bad)
  for (int64_t e = 0; e < nnz; ++e) {
    const int64_t r = row[e], c = col[e];
    bool ok = r >= 0 && r < g.n_rows && c >= 0 && c < g.n_cols;
    if (ok && e > 0) ok = row[e - 1] < r || (row[e - 1] == r && col[e - 1] <= c);
    if (ok) ok = rp[r] <= e && e < rp[r + 1];
    if (ok && val) ok = std::isfinite(val[e]);
    if (!ok) bad = std::min(bad, e);
  }
  if (bad < nnz) throw FormatError(check_edge(g, row, col, rp, val, bad));
}

void check_index_tensor(const Tensor& t, const char* name, DType want, int64_t numel) {
  SPGNN_CHECK(t.dtype() == want, FormatError, "graph ", name, " has dtype ", dtype_name(t.dtype()),
              ", expected ", dtype_name(want), " like row");
  SPGNN_CHECK(t.ndim() == 1 && t.numel() == numel, FormatError, "graph ", name, " has shape ",
              t.shape_str(), ", expected [", numel, "]");
}

}  // namespace

namespace graph_detail {
Graph build_graph(int64_t n_rows, int64_t n_cols, const EdgeArrays<int32_t>& e,
                  const BuildOptions& options, Tensor* input_pos) {
  return build_impl(n_rows, n_cols, e, options, input_pos);
}

Graph build_graph(int64_t n_rows, int64_t n_cols, const EdgeArrays<int64_t>& e,
                  const BuildOptions& options, Tensor* input_pos) {
  return build_impl(n_rows, n_cols, e, options, input_pos);
}

void require_build_memory(int64_t n_rows, int64_t nnz) {
  // A build (or a transpose) fills per-row arrays (offsets, counts, rowptr) from the start. On
  // a machine that overcommits memory (vm.overcommit_memory = 1, as on the GPU machine) the
  // allocator does not refuse an impossible row count: the fill touches page after page until
  // the kernel's OOM killer ends the process (a Python spgnn.Graph with num_nodes = 2^40 did
  // that). Refuse what cannot fit in this machine's memory up front, with the exception a
  // failed allocation gives elsewhere (the Python Graph names num_nodes; file readers check
  // sizes before this, with the same model).
  if (io::graph_build_bytes(static_cast<double>(n_rows), static_cast<double>(nnz)) >
      static_cast<double>(io::physical_memory_bytes()))
    throw std::bad_alloc();
}
}  // namespace graph_detail

size_t Graph::bytes() const {
  size_t b = 0;
  for (const Tensor* t : {&row, &col, &rowptr, &val})
    if (t->defined()) b += t->nbytes();
  return b;
}

Graph Graph::to(Device device) const {
  Graph g;
  g.n_rows = n_rows;
  g.n_cols = n_cols;
  if (row.defined()) g.row = row.to(device);
  if (col.defined()) g.col = col.to(device);
  if (rowptr.defined()) g.rowptr = rowptr.to(device);
  if (val.defined()) g.val = val.to(device);
  return g;
}

void Graph::validate() const {
  SPGNN_CHECK(n_rows >= 0 && n_cols >= 0, FormatError, "graph size ", n_rows, " x ", n_cols,
              " is negative");
  SPGNN_CHECK(row.defined() && col.defined() && rowptr.defined(), FormatError,
              "graph arrays must all be defined (row: ", row.defined() ? "yes" : "no",
              ", col: ", col.defined() ? "yes" : "no", ", rowptr: ",
              rowptr.defined() ? "yes" : "no", ")");
  graph_detail::require_host(*this, "Graph::validate");
  const DType it = row.dtype();
  SPGNN_CHECK(it == DType::i32 || it == DType::i64, FormatError, "graph row has dtype ",
              dtype_name(it), ", expected int32 or int64");
  SPGNN_CHECK(row.ndim() == 1, FormatError, "graph row has shape ", row.shape_str(),
              ", expected one dimension");
  const int64_t nnz = row.numel();
  check_index_tensor(col, "col", it, nnz);
  check_index_tensor(rowptr, "rowptr", it, n_rows + 1);
  SPGNN_CHECK(col.device() == row.device() && rowptr.device() == row.device() &&
                  (!val.defined() || val.device() == row.device()),
              FormatError, "graph arrays live on different devices");
  if (it == DType::i32) {
    const int64_t n = std::max(n_rows, n_cols);
    SPGNN_CHECK(n < kIndex32Limit && nnz < kIndex32Limit, FormatError, "graph with ", n,
                " vertices and ", nnz, " edges cannot use int32 indices");
  }
  if (val.defined()) {
    SPGNN_CHECK(val.dtype() == DType::f32, FormatError, "graph val has dtype ",
                dtype_name(val.dtype()), ", expected float32");
    SPGNN_CHECK(val.ndim() == 1 && val.numel() == nnz, FormatError, "graph val has shape ",
                val.shape_str(), ", expected [", nnz, "]");
  }
  graph_detail::dispatch_index(it, [&](auto tag) { validate_arrays<decltype(tag)>(*this); });
}

DType pick_index_dtype(int64_t n, int64_t nnz, IndexWidth width) {
  SPGNN_CHECK(n >= 0 && nnz >= 0, InvalidArgument, "pick_index_dtype: negative size (n ", n,
              ", nnz ", nnz, ")");
  const bool needs64 = n >= kIndex32Limit || nnz >= kIndex32Limit;
  switch (width) {
    case IndexWidth::automatic: return needs64 ? DType::i64 : DType::i32;
    case IndexWidth::i64: return DType::i64;
    case IndexWidth::i32:
      SPGNN_CHECK(!needs64, InvalidArgument, "index width int32 was requested, but the graph has ",
                  n, " vertices and ", nnz, " edges; int32 indices allow fewer than ",
                  kIndex32Limit, " of each (use automatic or int64)");
      return DType::i32;
  }
  throw InvalidArgument("pick_index_dtype: unknown IndexWidth");
}

Graph graph_from_edges(int64_t n_rows, int64_t n_cols, const std::vector<int64_t>& rows,
                       const std::vector<int64_t>& cols, const std::vector<float>& vals,
                       const BuildOptions& options) {
  SPGNN_CHECK(rows.size() == cols.size(), InvalidArgument, "graph_from_edges: ", rows.size(),
              " row ids but ", cols.size(), " col ids");
  SPGNN_CHECK(vals.empty() || vals.size() == rows.size(), InvalidArgument,
              "graph_from_edges: ", vals.size(), " values for ", rows.size(), " edges");
  EdgeArrays<int64_t> e;
  e.rows = rows.data();
  e.cols = cols.data();
  e.vals = vals.empty() ? nullptr : vals.data();
  e.m = static_cast<int64_t>(rows.size());
  return graph_detail::build_graph(n_rows, n_cols, e, options);
}

namespace {
// The value pointer of a weighted edge list without edges (a non-null pointer marks "weighted";
// nothing is read through it).
const float kNoValue = 0;
}  // namespace

Graph graph_from_edge_tensors(int64_t n_rows, int64_t n_cols, const Tensor& rows,
                              const Tensor& cols, const Tensor& vals, const BuildOptions& options,
                              Tensor* input_pos) {
  SPGNN_CHECK(rows.defined() && cols.defined(), InvalidArgument,
              "graph_from_edge_tensors: 'rows' and 'cols' are required");
  SPGNN_CHECK(!rows.device().is_cuda() && !cols.device().is_cuda() &&
                  (!vals.defined() || !vals.device().is_cuda()),
              InvalidArgument, "graph_from_edge_tensors: the edge arrays must be on the host");
  SPGNN_CHECK(rows.dtype() == cols.dtype() &&
                  (rows.dtype() == DType::i32 || rows.dtype() == DType::i64),
              InvalidArgument,
              "graph_from_edge_tensors: 'rows' and 'cols' must both be int32 or int64, got ",
              dtype_name(rows.dtype()), " and ", dtype_name(cols.dtype()));
  SPGNN_CHECK(rows.ndim() == 1 && cols.ndim() == 1 && rows.numel() == cols.numel(), InvalidArgument,
              "graph_from_edge_tensors: 'rows' ", rows.shape_str(), " and 'cols' ", cols.shape_str(),
              " must be 1-D of one length");
  SPGNN_CHECK(!vals.defined() || (vals.dtype() == DType::f32 && vals.numel() == rows.numel()),
              InvalidArgument, "graph_from_edge_tensors: 'vals' must be float32 [", rows.numel(),
              "]");
  return graph_detail::dispatch_index(rows.dtype(), [&](auto tag) {
    using I = decltype(tag);
    EdgeArrays<I> e;
    e.rows = rows.data<I>();
    e.cols = cols.data<I>();
    // Defined but empty (no edges) still means weighted: an empty array has no data pointer, and
    // the graph lost its weights (a weighted op over it then asked for edge data).
    e.vals = !vals.defined() ? nullptr : vals.numel() ? vals.data<float>() : &kNoValue;
    e.m = rows.numel();
    return graph_detail::build_graph(n_rows, n_cols, e, options, input_pos);
  });
}

Graph canonicalize(const Graph& g, const BuildOptions& options) {
  graph_detail::require_host(g, "canonicalize");
  const int64_t nnz = g.nnz();
  SPGNN_CHECK(g.col.defined() ? g.col.numel() == nnz : nnz == 0, InvalidArgument,
              "canonicalize: row has ", nnz, " entries but col has ",
              g.col.defined() ? g.col.numel() : 0);
  if (g.has_values()) {
    SPGNN_CHECK(g.val.dtype() == DType::f32 && g.val.numel() == nnz, InvalidArgument,
                "canonicalize: values must be float32 [", nnz, "], got ",
                dtype_name(g.val.dtype()), g.val.shape_str());
  }
  if (nnz == 0) {
    EdgeArrays<int64_t> e;
    // An edge-less graph keeps "has values" so callers see the same schema back.
    e.vals = g.has_values() ? &kNoValue : nullptr;
    return graph_detail::build_graph(g.n_rows, g.n_cols, e, options);
  }
  SPGNN_CHECK(g.col.dtype() == g.row.dtype(), InvalidArgument, "canonicalize: row is ",
              dtype_name(g.row.dtype()), " but col is ", dtype_name(g.col.dtype()));
  return graph_detail::dispatch_index(g.index_dtype(), [&](auto tag) {
    using I = decltype(tag);
    EdgeArrays<I> e;
    e.rows = g.row.data<I>();
    e.cols = g.col.data<I>();
    e.vals = g.has_values() ? g.val.data<float>() : nullptr;
    e.m = nnz;
    return graph_detail::build_graph(g.n_rows, g.n_cols, e, options);
  });
}

}  // namespace spgnn
