// Vertex-to-part assignment (METIS, LDG streaming, random, range) and the local parts of an
// edge-cut partition (include/spgnn/partition.hpp).
#include "spgnn/partition.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>

#include "graph/graph_internal.hpp"
#include "spgnn/error.hpp"

#if SPGNN_HAVE_METIS
#include <metis.h>
#endif

namespace spgnn {

using graph_detail::dispatch_index;

PartitionMethod parse_partition_method(const std::string& s) {
  if (s == "metis") return PartitionMethod::metis;
  if (s == "ldg") return PartitionMethod::ldg;
  if (s == "random") return PartitionMethod::random;
  if (s == "range") return PartitionMethod::range;
  throw InvalidArgument("partition method '" + s + "': expected metis, ldg, random or range");
}

const char* partition_method_name(PartitionMethod m) {
  switch (m) {
    case PartitionMethod::metis: return "metis";
    case PartitionMethod::ldg: return "ldg";
    case PartitionMethod::random: return "random";
    case PartitionMethod::range: return "range";
  }
  return "?";
}

bool have_metis() { return SPGNN_HAVE_METIS != 0; }

namespace {

// The graph's arrays as int64 on the host.
struct HostEdges {
  std::vector<int64_t> rowptr, col;
};
HostEdges host_edges(const Graph& g) {
  SPGNN_CHECK(!g.device().is_cuda(), InvalidArgument, "partition: the graph must be on the host");
  HostEdges h;
  h.rowptr.resize(static_cast<size_t>(g.n_rows) + 1, 0);
  h.col.resize(static_cast<size_t>(g.nnz()));
  if (g.nnz() == 0) return h;
  dispatch_index(g.index_dtype(), [&](auto tag) {
    using I = decltype(tag);
    const I* rp = g.rowptr.data<I>();
    const I* c = g.col.data<I>();
    for (int64_t i = 0; i <= g.n_rows; ++i) h.rowptr[static_cast<size_t>(i)] = rp[i];
    for (int64_t k = 0; k < g.nnz(); ++k) h.col[static_cast<size_t>(k)] = c[k];
  });
  return h;
}

// Vertex loads: 1 + in-degree * n / nnz, so vertices and edges weigh the same in total (a part
// holds the edges into its vertices).
std::vector<double> vertex_loads(const HostEdges& h, int64_t n) {
  const int64_t nnz = static_cast<int64_t>(h.col.size());
  const double scale = nnz > 0 ? double(n) / double(nnz) : 0.0;
  std::vector<double> w(static_cast<size_t>(n));
  for (int64_t v = 0; v < n; ++v)
    w[static_cast<size_t>(v)] =
        1.0 + scale * double(h.rowptr[static_cast<size_t>(v) + 1] - h.rowptr[static_cast<size_t>(v)]);
  return w;
}

// The undirected pattern without loops or repeats, as CSR over int32 ids (METIS's idx_t).
struct SymAdjacency {
  std::vector<int64_t> offsets;
  std::vector<int32_t> nbr;
};
SymAdjacency symmetric_adjacency(const HostEdges& h, int64_t n) {
  SymAdjacency a;
  std::vector<int64_t> deg(static_cast<size_t>(n) + 1, 0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t k = h.rowptr[static_cast<size_t>(r)]; k < h.rowptr[static_cast<size_t>(r) + 1]; ++k) {
      const int64_t c = h.col[static_cast<size_t>(k)];
      if (c == r) continue;
      ++deg[static_cast<size_t>(r) + 1];
      ++deg[static_cast<size_t>(c) + 1];
    }
  std::partial_sum(deg.begin(), deg.end(), deg.begin());
  std::vector<int32_t> nbr(static_cast<size_t>(deg.back()));
  std::vector<int64_t> fill(deg.begin(), deg.end() - 1);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t k = h.rowptr[static_cast<size_t>(r)]; k < h.rowptr[static_cast<size_t>(r) + 1]; ++k) {
      const int64_t c = h.col[static_cast<size_t>(k)];
      if (c == r) continue;
      nbr[static_cast<size_t>(fill[static_cast<size_t>(r)]++)] = static_cast<int32_t>(c);
      nbr[static_cast<size_t>(fill[static_cast<size_t>(c)]++)] = static_cast<int32_t>(r);
    }
  a.offsets.assign(static_cast<size_t>(n) + 1, 0);
  int64_t out = 0;
  for (int64_t v = 0; v < n; ++v) {
    auto b = nbr.begin() + deg[static_cast<size_t>(v)], e = nbr.begin() + deg[static_cast<size_t>(v) + 1];
    std::sort(b, e);
    auto u = std::unique(b, e);
    for (auto it = b; it != u; ++it) nbr[static_cast<size_t>(out++)] = *it;
    a.offsets[static_cast<size_t>(v) + 1] = out;
  }
  nbr.resize(static_cast<size_t>(out));
  a.nbr = std::move(nbr);
  return a;
}

std::vector<int32_t> assign_range(const HostEdges& h, int64_t n, int64_t parts) {
  const std::vector<double> w = vertex_loads(h, n);
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  std::vector<int32_t> owner(static_cast<size_t>(n));
  double before = 0;
  int64_t prev = -1;
  for (int64_t v = 0; v < n; ++v) {
    // The part whose share of the total load holds this vertex's midpoint, never skipping a part
    // (p <= prev + 1) and leaving a vertex for every part after it (p >= parts - (n - v)).
    const double mid = before + 0.5 * w[static_cast<size_t>(v)];
    int64_t p = std::min<int64_t>(parts - 1, static_cast<int64_t>(mid * double(parts) / total));
    p = std::max(std::min(std::max(p, prev), prev + 1), parts - (n - v));
    owner[static_cast<size_t>(v)] = static_cast<int32_t>(p);
    prev = p;
    before += w[static_cast<size_t>(v)];
  }
  return owner;
}

std::vector<int32_t> assign_random(int64_t n, int64_t parts, uint64_t seed) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> owner(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) owner[static_cast<size_t>(perm[static_cast<size_t>(i)])] = static_cast<int32_t>(i % parts);
  return owner;
}

constexpr int kLdgPasses = 8;

std::vector<int32_t> assign_ldg(const HostEdges& h, const SymAdjacency& a, int64_t n,
                                int64_t parts, double imbalance) {
  const std::vector<double> w = vertex_loads(h, n);
  const double cap = imbalance * std::accumulate(w.begin(), w.end(), 0.0) / double(parts);
  std::vector<double> load(static_cast<size_t>(parts), 0.0);
  std::vector<int64_t> shared(static_cast<size_t>(parts), 0);
  std::vector<int32_t> owner(static_cast<size_t>(n), -1);
  // Streamed in breadth-first order (from each unvisited vertex in id order): a vertex then
  // arrives after some of its neighbours, which is what the greedy rule feeds on (in id order a
  // graph whose ids carry no locality gives it little to go on).
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(n));
  std::vector<char> queued(static_cast<size_t>(n), 0);
  for (int64_t s = 0; s < n; ++s) {
    if (queued[static_cast<size_t>(s)]) continue;
    queued[static_cast<size_t>(s)] = 1;
    for (size_t head = order.size(), tail = (order.push_back(s), order.size()); head < tail;
         ++head, tail = order.size()) {
      const int64_t u = order[head];
      for (int64_t k = a.offsets[static_cast<size_t>(u)]; k < a.offsets[static_cast<size_t>(u) + 1]; ++k) {
        const int32_t x = a.nbr[static_cast<size_t>(k)];
        if (!queued[static_cast<size_t>(x)]) {
          queued[static_cast<size_t>(x)] = 1;
          order.push_back(x);
        }
      }
    }
  }
  // Restreamed (Nishimura & Ugander, KDD 2013): later passes see every neighbour's part from the
  // pass before, which the first pass sees only for neighbours already streamed.
  for (int pass = 0; pass < kLdgPasses; ++pass)
    for (int64_t v : order) {
      const double wv = w[static_cast<size_t>(v)];
      if (owner[static_cast<size_t>(v)] >= 0) {
        load[static_cast<size_t>(owner[static_cast<size_t>(v)])] -= wv;
        owner[static_cast<size_t>(v)] = -1;
      }
      std::fill(shared.begin(), shared.end(), 0);
      for (int64_t k = a.offsets[static_cast<size_t>(v)]; k < a.offsets[static_cast<size_t>(v) + 1]; ++k) {
        const int32_t o = owner[static_cast<size_t>(a.nbr[static_cast<size_t>(k)])];
        if (o >= 0) ++shared[static_cast<size_t>(o)];
      }
      int64_t best = -1;
      double best_score = -1;
      for (int64_t p = 0; p < parts; ++p) {
        const double l = load[static_cast<size_t>(p)];
        if (l + wv > cap && l > 0) continue;  // full (an empty part always takes a vertex)
        const double score = double(shared[static_cast<size_t>(p)]) * (1.0 - l / cap);
        if (best < 0 || score > best_score ||
            (score == best_score && l < load[static_cast<size_t>(best)])) {
          best = p;
          best_score = score;
        }
      }
      if (best < 0)  // every part full: the least loaded
        best = std::min_element(load.begin(), load.end()) - load.begin();
      owner[static_cast<size_t>(v)] = static_cast<int32_t>(best);
      load[static_cast<size_t>(best)] += wv;
    }
  return owner;
}

#if SPGNN_HAVE_METIS
std::vector<int32_t> assign_metis(const HostEdges& h, const SymAdjacency& a, int64_t n,
                                  int64_t parts, const PartitionOptions& o) {
  idx_t nv = static_cast<idx_t>(n), np = static_cast<idx_t>(parts);
  const bool edges = !h.col.empty();
  idx_t ncon = edges ? 2 : 1;  // balance vertices and, when there are any, edges
  std::vector<idx_t> xadj(a.offsets.begin(), a.offsets.end());
  std::vector<idx_t> adjncy(a.nbr.begin(), a.nbr.end());
  std::vector<idx_t> vwgt(static_cast<size_t>(n * ncon));
  for (int64_t v = 0; v < n; ++v) {
    vwgt[static_cast<size_t>(v * ncon)] = 1;
    if (edges)
      vwgt[static_cast<size_t>(v * ncon + 1)] =
          static_cast<idx_t>(h.rowptr[static_cast<size_t>(v) + 1] - h.rowptr[static_cast<size_t>(v)]);
  }
  std::vector<real_t> ubvec(static_cast<size_t>(ncon), static_cast<real_t>(o.imbalance));
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_SEED] = static_cast<idx_t>(o.seed & 0x7fffffff);
  options[METIS_OPTION_NUMBERING] = 0;
  idx_t objval = 0;
  std::vector<idx_t> part(static_cast<size_t>(n), 0);
  const int rc = METIS_PartGraphKway(&nv, &ncon, xadj.data(), adjncy.empty() ? nullptr : adjncy.data(),
                                     vwgt.data(), nullptr, nullptr, &np, nullptr, ubvec.data(),
                                     options, &objval, part.data());
  SPGNN_CHECK(rc == METIS_OK, Error, "partition: METIS_PartGraphKway failed (",
              rc == METIS_ERROR_MEMORY ? "out of memory" : rc == METIS_ERROR_INPUT ? "bad input" : "error",
              ", code ", rc, ")");
  return std::vector<int32_t>(part.begin(), part.end());
}
#endif

}  // namespace

PartitionAssignment assign_parts(const Graph& g, const PartitionOptions& o) {
  SPGNN_CHECK(g.square(), InvalidArgument, "partition: the graph must be square, got ", g.n_rows,
              " x ", g.n_cols);
  const int64_t n = g.n_rows;
  SPGNN_CHECK(o.parts >= 1 && o.parts <= std::numeric_limits<int32_t>::max(), InvalidArgument,
              "partition: parts must be >= 1, got ", o.parts);
  SPGNN_CHECK(o.parts <= std::max<int64_t>(n, 1), InvalidArgument, "partition: ", o.parts,
              " parts for ", n, " vertices: every part needs a vertex");
  SPGNN_CHECK(o.imbalance >= 1.0 && o.imbalance <= 10.0, InvalidArgument,
              "partition: imbalance must be in [1, 10], got ", o.imbalance);
  PartitionAssignment r;
  r.method_used = o.method;
  if (o.parts == 1 || n == 0) {
    r.owner.assign(static_cast<size_t>(n), 0);
    return r;
  }
  const HostEdges h = host_edges(g);
  if (o.method == PartitionMethod::range) {
    r.owner = assign_range(h, n, o.parts);
    return r;
  }
  if (o.method == PartitionMethod::random) {
    r.owner = assign_random(n, o.parts, o.seed);
    return r;
  }
  SPGNN_CHECK(n <= std::numeric_limits<int32_t>::max(), Unsupported, "partition: ",
              partition_method_name(o.method), " takes at most 2^31-1 vertices, got ", n,
              "; use range or random");
  PartitionMethod m = o.method;
  // An undirected adjacency entry per direction of every non-loop edge: past 2^31 entries
  // Debian's 32-bit METIS cannot take the graph.
  if (m == PartitionMethod::metis && !have_metis()) {
    m = PartitionMethod::ldg;
    r.note = "this spgnn was built without METIS (libmetis-dev): used ldg";
  } else if (m == PartitionMethod::metis &&
             2 * g.nnz() > int64_t(std::numeric_limits<int32_t>::max())) {
    m = PartitionMethod::ldg;
    r.note = "the graph has more than 2^31 adjacency entries, past the 32-bit METIS of this "
             "build: used ldg";
  }
  const SymAdjacency a = symmetric_adjacency(h, n);
  r.method_used = m;
#if SPGNN_HAVE_METIS
  if (m == PartitionMethod::metis) {
    r.owner = assign_metis(h, a, n, o.parts, o);
    return r;
  }
#endif
  r.owner = assign_ldg(h, a, n, o.parts, o.imbalance);
  return r;
}

std::vector<LocalPart> build_local_parts(const Graph& g, const std::vector<int32_t>& owner,
                                         int64_t parts, PartitionSummary* summary) {
  const int64_t n = g.n_rows;
  SPGNN_CHECK(g.square(), InvalidArgument, "partition: the graph must be square");
  SPGNN_CHECK(static_cast<int64_t>(owner.size()) == n, InvalidArgument, "partition: ",
              owner.size(), " owners for ", n, " vertices");
  SPGNN_CHECK(parts >= 1, InvalidArgument, "partition: parts must be >= 1, got ", parts);
  for (int64_t v = 0; v < n; ++v)
    SPGNN_CHECK(owner[static_cast<size_t>(v)] >= 0 && owner[static_cast<size_t>(v)] < parts,
                InvalidArgument, "partition: vertex ", v, " has owner ",
                owner[static_cast<size_t>(v)], ", expected 0..", parts - 1);
  const HostEdges h = host_edges(g);
  const float* vals = g.has_values() ? g.val.data<float>() : nullptr;

  // local id of every vertex in its owner: its rank among the owner's vertices
  std::vector<int64_t> local(static_cast<size_t>(n));
  std::vector<int64_t> count(static_cast<size_t>(parts), 0);
  for (int64_t v = 0; v < n; ++v) local[static_cast<size_t>(v)] = count[static_cast<size_t>(owner[static_cast<size_t>(v)])]++;

  std::vector<LocalPart> out(static_cast<size_t>(parts));
  for (int64_t p = 0; p < parts; ++p) out[static_cast<size_t>(p)].global_ids.reserve(
      static_cast<size_t>(count[static_cast<size_t>(p)]));
  for (int64_t v = 0; v < n; ++v)  // owned vertices, ascending, in one pass over all parts
    out[static_cast<size_t>(owner[static_cast<size_t>(v)])].global_ids.push_back(v);
  std::vector<int64_t> halo_slot(static_cast<size_t>(n), -1);  // reset after each part
  PartitionSummary s;
  s.num_nodes = n;
  s.num_edges = g.nnz();
  for (int64_t p = 0; p < parts; ++p) {
    LocalPart& lp = out[static_cast<size_t>(p)];
    lp.part = static_cast<int32_t>(p);
    lp.n_owned = count[static_cast<size_t>(p)];
    std::vector<int64_t> halo;
    for (int64_t v : lp.global_ids)
      for (int64_t k = h.rowptr[static_cast<size_t>(v)]; k < h.rowptr[static_cast<size_t>(v) + 1]; ++k) {
        const int64_t c = h.col[static_cast<size_t>(k)];
        if (owner[static_cast<size_t>(c)] != p) {
          ++s.edge_cut;
          if (halo_slot[static_cast<size_t>(c)] < 0) {
            halo_slot[static_cast<size_t>(c)] = 0;
            halo.push_back(c);
          }
        }
      }
    std::sort(halo.begin(), halo.end(), [&](int64_t a, int64_t b) {
      const int32_t oa = owner[static_cast<size_t>(a)], ob = owner[static_cast<size_t>(b)];
      return oa != ob ? oa < ob : a < b;
    });
    lp.halo_offsets.assign(static_cast<size_t>(parts) + 1, 0);
    for (size_t i = 0; i < halo.size(); ++i) {
      halo_slot[static_cast<size_t>(halo[i])] = lp.n_owned + static_cast<int64_t>(i);
      ++lp.halo_offsets[static_cast<size_t>(owner[static_cast<size_t>(halo[i])]) + 1];
    }
    std::partial_sum(lp.halo_offsets.begin(), lp.halo_offsets.end(), lp.halo_offsets.begin());
    lp.global_ids.insert(lp.global_ids.end(), halo.begin(), halo.end());
    s.halo_volume += static_cast<int64_t>(halo.size());

    std::vector<int64_t> rows, cols;
    std::vector<float> vs;
    for (int64_t i = 0; i < lp.n_owned; ++i) {
      const int64_t v = lp.global_ids[static_cast<size_t>(i)];
      for (int64_t k = h.rowptr[static_cast<size_t>(v)]; k < h.rowptr[static_cast<size_t>(v) + 1]; ++k) {
        const int64_t c = h.col[static_cast<size_t>(k)];
        rows.push_back(local[static_cast<size_t>(v)]);
        cols.push_back(owner[static_cast<size_t>(c)] == p ? local[static_cast<size_t>(c)]
                                                          : halo_slot[static_cast<size_t>(c)]);
        if (vals) vs.push_back(vals[k]);
      }
    }
    BuildOptions keep;  // the input's edges exactly: its repeats and loops stay
    keep.duplicates = DuplicatePolicy::keep;
    keep.self_loops = SelfLoopPolicy::keep;
    lp.graph = graph_from_edges(lp.n_owned, lp.n_owned + static_cast<int64_t>(halo.size()), rows,
                                cols, vs, keep);
    for (int64_t c : halo) halo_slot[static_cast<size_t>(c)] = -1;
  }
  // What each part sends: the rows its peers list in their halo, in their order.
  for (int64_t p = 0; p < parts; ++p) {
    LocalPart& lp = out[static_cast<size_t>(p)];
    lp.send_offsets.assign(static_cast<size_t>(parts) + 1, 0);
    for (int64_t q = 0; q < parts; ++q) {
      const LocalPart& peer = out[static_cast<size_t>(q)];
      const int64_t b = peer.n_owned + peer.halo_offsets[static_cast<size_t>(p)];
      const int64_t e = peer.n_owned + peer.halo_offsets[static_cast<size_t>(p) + 1];
      for (int64_t i = b; i < e; ++i)
        lp.send_ids.push_back(local[static_cast<size_t>(peer.global_ids[static_cast<size_t>(i)])]);
      lp.send_offsets[static_cast<size_t>(q) + 1] = static_cast<int64_t>(lp.send_ids.size());
    }
  }
  if (summary) *summary = s;
  return out;
}

}  // namespace spgnn
