// Edge-value normalisations, the transpose with its edge permutation, and graph statistics.
// All of these read a canonical host graph (see Graph::validate) and never re-sort it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "graph/graph_internal.hpp"
#include "spgnn/graph.hpp"

namespace spgnn {
namespace {

using graph_detail::dispatch_index;

using graph_detail::kRowsPerTask;

// O(1) shape checks so the algorithms below can index rowptr and col without bounds checks.
// Full validation is O(nnz) and left to the caller (loaders and builders produce valid graphs).
void check_shapes(const Graph& g, const char* what) {
  graph_detail::require_host(g, what);
  SPGNN_CHECK(g.rowptr.defined() && g.rowptr.numel() == g.n_rows + 1, InvalidArgument, what,
              ": rowptr must have n_rows + 1 = ", g.n_rows + 1, " entries, got ",
              g.rowptr.defined() ? g.rowptr.numel() : 0);
  SPGNN_CHECK(g.rowptr.dtype() == g.index_dtype() &&
                  (g.nnz() == 0 || (g.col.defined() && g.col.dtype() == g.index_dtype() &&
                                    g.col.numel() == g.nnz())),
              InvalidArgument, what, ": row, col and rowptr must share one dtype and length");
}

// A graph whose row/col/rowptr come from rowptr offsets and a column array being written.
template <class IndexT>
Graph alloc_graph(int64_t n_rows, int64_t n_cols, int64_t nnz, bool values) {
  Graph g;
  g.n_rows = n_rows;
  g.n_cols = n_cols;
  g.rowptr = Tensor::empty({n_rows + 1}, dtype_of<IndexT>());
  g.row = Tensor::empty({nnz}, dtype_of<IndexT>());
  g.col = Tensor::empty({nnz}, dtype_of<IndexT>());
  if (values) g.val = Tensor::empty({nnz}, DType::f32);
  return g;
}

template <class IndexT>
void fill_rows(Graph& g) {
  const IndexT* rp = g.rowptr.data<IndexT>();
  IndexT* row = g.row.data<IndexT>();
#pragma omp parallel for schedule(dynamic, kRowsPerTask)
  for (int64_t r = 0; r < g.n_rows; ++r) std::fill(row + rp[r], row + rp[r + 1], static_cast<IndexT>(r));
}

// A + I with exactly one self loop per vertex, then val = deg^-1/2[row] * deg^-1/2[col] where
// deg counts each row's edges of A + I (parallel edges count with multiplicity). For a symmetric
// graph this is PyG's gcn_norm. For a directed graph PyG's convention is kept: the degree is
// taken over destinations (rows) and used on both sides, so the columns' out-degrees never
// enter.
template <class InT, class OutT>
Graph gcn_impl(const Graph& g, const std::vector<int64_t>& out_off) {
  const int64_t n = g.n_rows;
  const InT* rp = g.rowptr.data<InT>();
  const InT* col = g.nnz() ? g.col.data<InT>() : nullptr;
  Graph out = alloc_graph<OutT>(n, n, out_off[static_cast<size_t>(n)], true);
  OutT* orp = out.rowptr.data<OutT>();
  OutT* ocol = out.col.data<OutT>();
  float* oval = out.val.data<float>();
  std::vector<double> dinv(static_cast<size_t>(n));
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r <= n; ++r) {
    orp[r] = static_cast<OutT>(out_off[static_cast<size_t>(r)]);
    if (r < n) {
      const int64_t deg = out_off[static_cast<size_t>(r) + 1] - out_off[static_cast<size_t>(r)];
      dinv[static_cast<size_t>(r)] = 1.0 / std::sqrt(static_cast<double>(deg));
    }
  }
#pragma omp parallel for schedule(dynamic, kRowsPerTask)
  for (int64_t r = 0; r < n; ++r) {
    int64_t pos = out_off[static_cast<size_t>(r)];
    const InT* b = col + rp[r];
    const InT* e = col + rp[r + 1];
    const InT rr = static_cast<InT>(r);
    const InT* lo = std::lower_bound(b, e, rr);
    const InT* hi = std::upper_bound(lo, e, rr);
    const double dr = dinv[static_cast<size_t>(r)];
    auto put = [&](int64_t c) {
      ocol[pos] = static_cast<OutT>(c);
      oval[pos] = static_cast<float>(dr * dinv[static_cast<size_t>(c)]);
      ++pos;
    };
    for (const InT* p = b; p < lo; ++p) put(*p);
    put(r);
    for (const InT* p = hi; p < e; ++p) put(*p);
  }
  fill_rows<OutT>(out);
  return out;
}

template <class IndexT>
Transposed transpose_impl(const Graph& g) {
  const int64_t nnz = g.nnz();
  const int64_t nt = g.n_cols;
  // A few targets over 2^40 sources build (nothing is allocated per source), but the
  // transpose's rows are those sources.
  graph_detail::require_build_memory(nt, nnz);
  const IndexT* row = nnz ? g.row.data<IndexT>() : nullptr;
  const IndexT* col = nnz ? g.col.data<IndexT>() : nullptr;
  const float* val = g.has_values() ? g.val.data<float>() : nullptr;

  Transposed t;
  int64_t* perm = nullptr;
  std::vector<int64_t> off;
  const bool stable = graph_detail::stable_bucket_scatter(
      nnz, nt, off, [&](int64_t e) -> int64_t { return col[e]; },
      [&](int64_t total) {
        t.perm = Tensor::empty({total}, DType::i64);
        perm = t.perm.data<int64_t>();
      },
      [&](int64_t e, int64_t pos) { perm[pos] = e; });
  if (!stable) {
    // Too many columns for per-thread histograms: atomic fill, then sort each bucket by
    // original edge id to restore the stable order, which is ascending row order because the
    // input is row-sorted (parallel edges stay in input order).
    off.assign(static_cast<size_t>(nt) + 1, 0);
    int64_t* count = off.data() + 1;
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < nnz; ++e) {
#pragma omp atomic
      count[col[e]]++;
    }
    for (int64_t c = 0; c < nt; ++c)
      off[static_cast<size_t>(c) + 1] += off[static_cast<size_t>(c)];
    t.perm = Tensor::empty({nnz}, DType::i64);
    perm = t.perm.data<int64_t>();
    std::vector<int64_t> cursor(off.begin(), off.end() - 1);
    int64_t* cur = cursor.data();
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < nnz; ++e) {
      int64_t pos;
#pragma omp atomic capture
      pos = cur[col[e]]++;
      perm[pos] = e;
    }
#pragma omp parallel for schedule(dynamic, kRowsPerTask)
    for (int64_t c = 0; c < nt; ++c)
      std::sort(perm + off[static_cast<size_t>(c)], perm + off[static_cast<size_t>(c) + 1]);
  }

  // has_values, not val != nullptr: an edge-less graph's empty values have no storage, and its
  // transpose must still say it has values (a GCN backward over an edge-less graph without
  // self loops asked the transpose for them).
  t.graph = alloc_graph<IndexT>(nt, g.n_rows, nnz, g.has_values());
  IndexT* trp = t.graph.rowptr.data<IndexT>();
  IndexT* tcol = t.graph.col.data<IndexT>();
  float* tval = val ? t.graph.val.data<float>() : nullptr;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c <= nt; ++c) trp[c] = static_cast<IndexT>(off[static_cast<size_t>(c)]);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < nnz; ++i) {
    tcol[i] = row[perm[i]];
    if (tval) tval[i] = val[perm[i]];
  }
  fill_rows<IndexT>(t.graph);
  return t;
}

// Gini coefficient of non-negative values: G = 2 * sum_i i * x_(i) / (n * sum x) - (n + 1) / n
// over the ascending order statistics x_(1..n). 0 for equal degrees, (n - 1) / n for a star.
double gini(std::vector<int64_t> deg, int64_t max_deg) {
  const int64_t n = static_cast<int64_t>(deg.size());
  if (n == 0) return 0;
  long double weighted = 0, total = 0;
  if (max_deg <= n) {
    // Counting instead of sorting: O(n) and the common case (max degree below n).
    std::vector<int64_t> count(static_cast<size_t>(max_deg) + 1, 0);
    for (int64_t d : deg) ++count[static_cast<size_t>(d)];
    long double rank = 0;  // vertices before this degree value
    for (int64_t d = 0; d <= max_deg; ++d) {
      const long double c = static_cast<long double>(count[static_cast<size_t>(d)]);
      // Ranks rank+1 .. rank+c all hold degree d.
      weighted += d * (c * rank + c * (c + 1) / 2);
      total += d * c;
      rank += c;
    }
  } else {
    std::sort(deg.begin(), deg.end());
    for (int64_t i = 0; i < n; ++i) {
      weighted += static_cast<long double>(i + 1) * deg[static_cast<size_t>(i)];
      total += deg[static_cast<size_t>(i)];
    }
  }
  if (total == 0) return 0;
  return static_cast<double>(2 * weighted / (n * total) - static_cast<long double>(n + 1) / n);
}

template <class IndexT>
void stats_impl(const Graph& g, GraphStats& s) {
  const int64_t n = g.n_rows, nnz = g.nnz();
  const IndexT* rp = g.rowptr.data<IndexT>();
  const IndexT* row = nnz ? g.row.data<IndexT>() : nullptr;
  const IndexT* col = nnz ? g.col.data<IndexT>() : nullptr;

  std::vector<int64_t> deg(static_cast<size_t>(n));
  int64_t dmin = std::numeric_limits<int64_t>::max(), dmax = 0, empty = 0;
  double sum = 0, sum2 = 0;
#pragma omp parallel for schedule(static) reduction(min : dmin) reduction(max : dmax) \
    reduction(+ : empty, sum, sum2)
  for (int64_t r = 0; r < n; ++r) {
    const int64_t d = static_cast<int64_t>(rp[r + 1]) - static_cast<int64_t>(rp[r]);
    deg[static_cast<size_t>(r)] = d;
    dmin = std::min(dmin, d);
    dmax = std::max(dmax, d);
    empty += d == 0;
    sum += static_cast<double>(d);
    sum2 += static_cast<double>(d) * static_cast<double>(d);
  }
  if (n > 0) {
    s.deg_min = dmin;
    s.deg_max = dmax;
    s.deg_mean = sum / static_cast<double>(n);
    s.deg_stddev = std::sqrt(std::max(0.0, sum2 / static_cast<double>(n) - s.deg_mean * s.deg_mean));
  }
  s.empty_rows = empty;
  s.gini = gini(std::move(deg), dmax);

  int64_t loops = 0, dups = 0;
#pragma omp parallel for schedule(static) reduction(+ : loops, dups)
  for (int64_t e = 0; e < nnz; ++e) {
    loops += row[e] == col[e];
    dups += e > 0 && row[e] == row[e - 1] && col[e] == col[e - 1];
  }
  s.self_loops = loops;
  s.duplicates = dups;

  s.symmetric = false;
  if (g.square()) {
    Graph pattern = g;
    pattern.val = Tensor();  // the pattern is all that is compared; skip carrying values
    const Transposed t = transpose(pattern);
    const IndexT* trp = t.graph.rowptr.data<IndexT>();
    const IndexT* tcol = nnz ? t.graph.col.data<IndexT>() : nullptr;
    bool same = std::equal(rp, rp + n + 1, trp);
    if (same && nnz) {
      int64_t diff = 0;
#pragma omp parallel for schedule(static) reduction(+ : diff)
      for (int64_t e = 0; e < nnz; ++e) diff += col[e] != tcol[e];
      same = diff == 0;
    }
    s.symmetric = same;
  }
}

}  // namespace

Graph gcn_normalize(const Graph& g) {
  check_shapes(g, "gcn_normalize");
  SPGNN_CHECK(g.square(), InvalidArgument, "gcn_normalize needs a square graph, got ", g.n_rows,
              " x ", g.n_cols);
  const int64_t n = g.n_rows;
  return dispatch_index(g.index_dtype(), [&](auto tag) {
    using I = decltype(tag);
    const I* rp = g.rowptr.data<I>();
    const I* col = g.nnz() ? g.col.data<I>() : nullptr;
    std::vector<int64_t> out_off(static_cast<size_t>(n) + 1, 0);
#pragma omp parallel for schedule(dynamic, kRowsPerTask)
    for (int64_t r = 0; r < n; ++r) {
      const I* b = col + rp[r];
      const I* e = col + rp[r + 1];
      const auto loops = std::equal_range(b, e, static_cast<I>(r));
      out_off[static_cast<size_t>(r) + 1] = (e - b) - (loops.second - loops.first) + 1;
    }
    for (int64_t r = 0; r < n; ++r)
      out_off[static_cast<size_t>(r) + 1] += out_off[static_cast<size_t>(r)];
    // Adding n loops can push an int32 graph over the int32 limit; widen rather than truncate.
    const DType out_dt = pick_index_dtype(n, out_off.back());
    if (dtype_of<I>() == DType::i64 || out_dt == DType::i64) return gcn_impl<I, int64_t>(g, out_off);
    return gcn_impl<I, int32_t>(g, out_off);
  });
}

Graph mean_normalize(const Graph& g) {
  check_shapes(g, "mean_normalize");
  // The index arrays are shared with `g` (tensors are reference-counted): only values change.
  Graph out = g;
  out.val = Tensor::empty({g.nnz()}, DType::f32);
  float* val = out.val.data<float>();
  dispatch_index(g.index_dtype(), [&](auto tag) {
    using I = decltype(tag);
    const I* rp = g.rowptr.data<I>();
#pragma omp parallel for schedule(dynamic, kRowsPerTask)
    for (int64_t r = 0; r < g.n_rows; ++r) {
      const float v = 1.0f / static_cast<float>(rp[r + 1] - rp[r]);
      std::fill(val + rp[r], val + rp[r + 1], v);
    }
  });
  return out;
}

Tensor inverse_degree(const Graph& g) {
  check_shapes(g, "inverse_degree");
  Tensor t = Tensor::zeros({g.n_rows}, DType::f32);
  float* p = t.data<float>();
  dispatch_index(g.index_dtype(), [&](auto tag) {
    using I = decltype(tag);
    const I* rp = g.rowptr.data<I>();
    for (int64_t r = 0; r < g.n_rows; ++r)
      if (rp[r + 1] > rp[r]) p[r] = 1.0f / static_cast<float>(rp[r + 1] - rp[r]);
  });
  return t;
}

Transposed transpose(const Graph& g) {
  check_shapes(g, "transpose");
  SPGNN_CHECK(g.nnz() == 0 || (g.row.defined() && g.row.numel() == g.col.numel()),
              InvalidArgument, "transpose: row and col lengths differ");
  if (g.has_values())
    SPGNN_CHECK(g.val.dtype() == DType::f32 && g.val.numel() == g.nnz(), InvalidArgument,
                "transpose: values must be float32 [", g.nnz(), "], got ",
                dtype_name(g.val.dtype()), g.val.shape_str());
  return dispatch_index(g.index_dtype(), [&](auto tag) { return transpose_impl<decltype(tag)>(g); });
}

GraphStats graph_stats(const Graph& g) {
  check_shapes(g, "graph_stats");
  GraphStats s;
  s.n_rows = g.n_rows;
  s.n_cols = g.n_cols;
  s.nnz = g.nnz();
  s.has_values = g.has_values();
  s.index_dtype = dtype_name(g.index_dtype());
  s.bytes = g.bytes();
  dispatch_index(g.index_dtype(), [&](auto tag) { stats_impl<decltype(tag)>(g, s); });
  return s;
}

}  // namespace spgnn
