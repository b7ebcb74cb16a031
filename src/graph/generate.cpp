// Synthetic graphs: R-MAT (Graph500 Kronecker), Erdős–Rényi G(n, m) and a labelled planted
// partition dataset.
//
// Determinism: random edges are produced in fixed chunks of kEdgesPerChunk, and each chunk owns
// a splitmix64 stream keyed by (seed, generator, chunk id). Threads only decide who runs which
// chunk, so the output is bit-identical for any thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <vector>

#include "graph/graph_internal.hpp"
#include "io/io_internal.hpp"
#include "spgnn/graph.hpp"

namespace spgnn {
namespace {

using graph_detail::EdgeArrays;

constexpr int64_t kEdgesPerChunk = int64_t{1} << 16;
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
// Stream ids keep the generators (and the parts of one generator) statistically independent
// even when they share a seed.
enum Stream : uint64_t {
  kRmatEdges = 1,
  kRmatPermutation,
  kErdosRenyiEdges,
  kPlantedClasses,
  kPlantedEdges,
  kPlantedMeans,
  kPlantedFeatures,
  kPlantedSplit,
};

__extension__ typedef unsigned __int128 U128;

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// splitmix64: tiny state, statistically strong enough for graph generation, and trivially
// seeded per chunk, which is what makes chunked generation reproducible.
struct Rng {
  uint64_t state;
  Rng(uint64_t seed, uint64_t stream, uint64_t chunk = 0)
      : state(mix64(seed ^ mix64(stream * kGolden ^ mix64(chunk + kGolden)))) {}
  uint64_t next() { return mix64(state += kGolden); }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform in [0, n) by multiply-high (Lemire); the bias is below 2^-64 * n, far under noise.
  uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<U128>(next()) * n) >> 64); }
  // Standard normal by Box-Muller (one of the pair; simplicity beats the 2x speed here).
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1], so the log is finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

// A keyed bijection on k-bit integers, used to relabel R-MAT vertices without an n-sized table
// or an O(n) random-access shuffle (which takes seconds at 2^27 vertices). Each step is
// invertible on k bits: xor with a key, multiply by an odd constant (spreads low bits up), and
// xor-shift right (spreads high bits down). Four rounds scatter the hubs well; it is not a
// uniform draw over all n! permutations, which R-MAT does not need.
struct BitPermutation {
  int k = 0;
  uint64_t mask = 0;
  uint64_t key[4] = {0, 0, 0, 0};
  uint64_t mul[4] = {0, 0, 0, 0};
  BitPermutation(int bits, uint64_t seed) : k(bits) {
    mask = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
    Rng rng(seed, kRmatPermutation);
    for (int i = 0; i < 4; ++i) {
      key[i] = rng.next();
      mul[i] = rng.next() | 1;
    }
  }
  uint64_t operator()(uint64_t x) const {
    if (k == 0) return 0;
    const int shift = (k + 1) / 2;
    for (int i = 0; i < 4; ++i) {
      x = ((x ^ key[i]) * mul[i]) & mask;
      x ^= x >> shift;
    }
    return x;
  }
};

// Runs fn(rng, begin, end) over fixed chunks of [0, m) in parallel.
template <class Fn>
void for_each_chunk(int64_t m, uint64_t seed, uint64_t stream, Fn&& fn) {
  const int64_t chunks = (m + kEdgesPerChunk - 1) / kEdgesPerChunk;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    Rng rng(seed, stream, static_cast<uint64_t>(ch));
    const int64_t b = ch * kEdgesPerChunk;
    fn(rng, b, std::min(m, b + kEdgesPerChunk));
  }
}

// Raw edge storage: int32 when ids fit, halving the largest temporary of a 100M-edge generation.
template <class InT>
struct RawEdges {
  std::unique_ptr<InT[]> rows, cols;
  int64_t m;
  explicit RawEdges(int64_t count)
      : rows(new InT[static_cast<size_t>(count)]), cols(new InT[static_cast<size_t>(count)]),
        m(count) {}
  Graph build(int64_t n, const BuildOptions& options) const {
    EdgeArrays<InT> e;
    e.rows = rows.get();
    e.cols = cols.get();
    e.m = m;
    return graph_detail::build_graph(n, n, e, options);
  }
};

template <class InT>
Graph rmat_impl(const RmatParams& p, int64_t m, const BuildOptions& options) {
  RawEdges<InT> raw(m);
  // Quadrant thresholds on 32-bit uniforms: each 64-bit draw serves two recursion levels.
  constexpr double kTwo32 = 4294967296.0;
  const uint64_t ta = static_cast<uint64_t>(p.a * kTwo32);
  const uint64_t tab = static_cast<uint64_t>((p.a + p.b) * kTwo32);
  const uint64_t tabc = static_cast<uint64_t>((p.a + p.b + p.c) * kTwo32);
  const BitPermutation relabel(p.scale, p.seed);
  const int scale = p.scale;
  const bool permute = p.permute;
  InT* rows = raw.rows.get();
  InT* cols = raw.cols.get();
  for_each_chunk(m, p.seed, kRmatEdges, [&](Rng& rng, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      uint64_t r = 0, c = 0, bits = 0;
      for (int level = 0; level < scale; ++level) {
        if ((level & 1) == 0) bits = rng.next();
        const uint64_t u = (level & 1) ? (bits >> 32) : (bits & 0xFFFFFFFFULL);
        // Graph500 quadrants: a = (0,0), b = (0,1), c = (1,0), d = (1,1). Written without
        // branches: the quadrant is random, so a branch would mispredict at every level.
        const uint64_t ge_a = u >= ta, ge_ab = u >= tab, ge_abc = u >= tabc;
        const uint64_t rb = ge_ab;
        const uint64_t cb = ge_a ^ ge_ab ^ ge_abc;
        r = (r << 1) | rb;
        c = (c << 1) | cb;
      }
      if (permute) {
        r = relabel(r);
        c = relabel(c);
      }
      rows[i] = static_cast<InT>(r);
      cols[i] = static_cast<InT>(c);
    }
  });
  return raw.build(int64_t{1} << p.scale, options);
}

template <class InT>
Graph erdos_renyi_impl(int64_t n, int64_t m, uint64_t seed, const BuildOptions& options) {
  RawEdges<InT> raw(m);
  InT* rows = raw.rows.get();
  InT* cols = raw.cols.get();
  const uint64_t un = static_cast<uint64_t>(n);
  for_each_chunk(m, seed, kErdosRenyiEdges, [&](Rng& rng, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      rows[i] = static_cast<InT>(rng.below(un));
      cols[i] = static_cast<InT>(rng.below(un));
    }
  });
  return raw.build(n, options);
}

// Fisher-Yates driven by a seeded stream (sequential: the result must not depend on threads).
template <class T>
void shuffle(std::vector<T>& v, Rng& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
}

Tensor sorted_index_tensor(std::vector<int64_t>::const_iterator b,
                           std::vector<int64_t>::const_iterator e) {
  std::vector<int64_t> v(b, e);
  std::sort(v.begin(), v.end());
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::i64);
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

}  // namespace

namespace {
// A generator's sizes come from flags or specs (er:N:DEG, --n), not from bytes on disk, so
// nothing bounds them: refuse, naming the generator, what cannot be built in memory instead of
// failing inside an allocation with a bare "out of memory". The model is check_graph_fits's
// (four 8-byte arrays per row while building, the edge arrays and their sort buffers).
void check_generated_fits(const std::string& what, double n_rows, double nnz, double extra = 0) {
  io::require_memory(io::graph_build_bytes(n_rows, nnz) + extra, what);
}
}  // namespace

Graph generate_rmat(const RmatParams& p, const BuildOptions& options) {
  SPGNN_CHECK(p.scale >= 0 && p.scale <= 40, InvalidArgument, "rmat scale ", p.scale,
              " is outside [0, 40]");
  SPGNN_CHECK(p.edge_factor >= 0 && p.edge_factor <= (std::numeric_limits<int64_t>::max() >> 41),
              InvalidArgument, "rmat edge_factor ", p.edge_factor, " is negative or too large");
  const double d = 1.0 - p.a - p.b - p.c;
  SPGNN_CHECK(p.a >= 0 && p.b >= 0 && p.c >= 0 && d >= -1e-9, InvalidArgument,
              "rmat probabilities a=", p.a, " b=", p.b, " c=", p.c,
              " must be non-negative with a + b + c <= 1");
  const int64_t m = p.edge_factor << p.scale;
  check_generated_fits("rmat scale " + std::to_string(p.scale) + " (" + std::to_string(m) + " edges)",
                       std::ldexp(1.0, p.scale), static_cast<double>(m));
  if (p.scale <= 31) return rmat_impl<int32_t>(p, m, options);
  return rmat_impl<int64_t>(p, m, options);
}

Graph generate_erdos_renyi(int64_t n, double avg_degree, uint64_t seed,
                           const BuildOptions& options) {
  SPGNN_CHECK(n >= 0, InvalidArgument, "erdos_renyi: n = ", n, " is negative");
  SPGNN_CHECK(std::isfinite(avg_degree) && avg_degree >= 0, InvalidArgument,
              "erdos_renyi: avg_degree = ", avg_degree, " must be finite and non-negative");
  // Unless duplicates are kept, the draws merge into distinct edges, at most n per row: a
  // larger average cannot be built (er:10:20 gave 86 edges, not 200).
  SPGNN_CHECK(n == 0 || options.duplicates == DuplicatePolicy::keep ||
                  avg_degree <= static_cast<double>(n),
              InvalidArgument, "erdos_renyi: avg_degree = ", avg_degree, " exceeds n = ", n,
              ": a row has at most n distinct edges (keep duplicates for a multigraph)");
  const double md = std::round(static_cast<double>(n) * avg_degree);
  SPGNN_CHECK(md < 9.0e18, InvalidArgument, "erdos_renyi: ", n, " x ", avg_degree,
              " edges is too many");
  const int64_t m = n == 0 ? 0 : static_cast<int64_t>(md);
  check_generated_fits("erdos_renyi: " + std::to_string(n) + " vertices and " + std::to_string(m) +
                           " edges",
                       static_cast<double>(n), static_cast<double>(m));
  if (n <= std::numeric_limits<int32_t>::max()) return erdos_renyi_impl<int32_t>(n, m, seed, options);
  return erdos_renyi_impl<int64_t>(n, m, seed, options);
}

Dataset generate_planted_partition(const PlantedPartitionParams& p) {
  SPGNN_CHECK(p.n >= 1, InvalidArgument, "planted partition: n = ", p.n, " must be positive");
  SPGNN_CHECK(p.num_classes >= 1 && p.num_classes <= p.n, InvalidArgument,
              "planted partition: num_classes = ", p.num_classes, " must be in [1, n = ", p.n, "]");
  SPGNN_CHECK(std::isfinite(p.avg_degree) && p.avg_degree >= 0, InvalidArgument,
              "planted partition: avg_degree = ", p.avg_degree, " must be finite and >= 0");
  // no loops, no duplicates: at most n - 1 neighbours (n = 10 at degree 50 gave 7.6)
  SPGNN_CHECK(p.avg_degree <= static_cast<double>(p.n - 1), InvalidArgument,
              "planted partition: avg_degree = ", p.avg_degree, " exceeds n - 1 = ", p.n - 1,
              ", the most neighbours a vertex can have");
  SPGNN_CHECK(p.p_in_ratio >= 0 && p.p_in_ratio <= 1, InvalidArgument,
              "planted partition: p_in_ratio = ", p.p_in_ratio, " must be in [0, 1]");
  SPGNN_CHECK(p.feature_dim >= 1, InvalidArgument, "planted partition: feature_dim = ",
              p.feature_dim, " must be positive");
  SPGNN_CHECK(std::isfinite(p.feature_signal), InvalidArgument,
              "planted partition: feature_signal must be finite");
  SPGNN_CHECK(p.train_frac >= 0 && p.val_frac >= 0 && p.train_frac + p.val_frac <= 1,
              InvalidArgument, "planted partition: train_frac = ", p.train_frac,
              " and val_frac = ", p.val_frac, " must be >= 0 and sum to at most 1");
  SPGNN_CHECK(p.n <= std::numeric_limits<int32_t>::max(), InvalidArgument,
              "planted partition: n = ", p.n, " is too large");
  const int64_t n = p.n, k = p.num_classes, d = p.feature_dim;
  check_generated_fits("planted partition: n = " + std::to_string(n) + " with " +
                           std::to_string(d) + " features",
                       static_cast<double>(n), static_cast<double>(n) * p.avg_degree,
                       static_cast<double>(n) * static_cast<double>(d) * 4);

  // Balanced classes (i % k), shuffled so a class is not a contiguous id range.
  std::vector<int64_t> cls(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) cls[static_cast<size_t>(i)] = i % k;
  {
    Rng rng(p.seed, kPlantedClasses);
    shuffle(cls, rng);
  }
  std::vector<std::vector<int32_t>> members(static_cast<size_t>(k));
  for (int64_t i = 0; i < n; ++i)
    members[static_cast<size_t>(cls[static_cast<size_t>(i)])].push_back(static_cast<int32_t>(i));

  // Each draw is one undirected edge, so n * avg_degree / 2 draws give ~avg_degree after
  // symmetrization. An inter-class draw picks the other class uniformly first, so every
  // inter-class pair of classes gets the same share of edges.
  const int64_t m = static_cast<int64_t>(std::round(static_cast<double>(n) * p.avg_degree / 2));
  RawEdges<int32_t> raw(m);
  int32_t* rows = raw.rows.get();
  int32_t* cols = raw.cols.get();
  for_each_chunk(m, p.seed, kPlantedEdges, [&](Rng& rng, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t u = static_cast<int64_t>(rng.below(static_cast<uint64_t>(n)));
      int64_t c = cls[static_cast<size_t>(u)];
      if (k > 1 && rng.uniform() >= p.p_in_ratio)
        c = (c + 1 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(k - 1)))) % k;
      const auto& mc = members[static_cast<size_t>(c)];
      // A drawn self loop is removed by the builder; at realistic class sizes that is rare.
      rows[i] = static_cast<int32_t>(u);
      cols[i] = mc[rng.below(mc.size())];
    }
  });
  BuildOptions opt;
  opt.symmetrize = true;
  opt.duplicates = DuplicatePolicy::drop;
  opt.self_loops = SelfLoopPolicy::remove;

  Dataset ds;
  ds.name = "planted";
  ds.num_classes = k;
  ds.graph = raw.build(n, opt);

  // Class means: random directions scaled to norm feature_signal, so the signal-to-noise ratio
  // does not depend on feature_dim (the noise is N(0, 1) per coordinate).
  std::vector<double> means(static_cast<size_t>(k * d));
  {
    Rng rng(p.seed, kPlantedMeans);
    for (int64_t c = 0; c < k; ++c) {
      double* mu = means.data() + c * d;
      double norm2 = 0;
      for (int64_t j = 0; j < d; ++j) {
        mu[j] = rng.normal();
        norm2 += mu[j] * mu[j];
      }
      const double scale = p.feature_signal / std::sqrt(std::max(norm2, 1e-300));
      for (int64_t j = 0; j < d; ++j) mu[j] *= scale;
    }
  }
  ds.x = Tensor::empty({n, d}, DType::f32);
  ds.y = Tensor::empty({n}, DType::i64);
  float* x = ds.x.data<float>();
  int64_t* y = ds.y.data<int64_t>();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    Rng rng(p.seed, kPlantedFeatures, static_cast<uint64_t>(i));
    const int64_t c = cls[static_cast<size_t>(i)];
    y[i] = c;
    const double* mu = means.data() + c * d;
    for (int64_t j = 0; j < d; ++j) x[i * d + j] = static_cast<float>(rng.normal() + mu[j]);
  }

  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  {
    Rng rng(p.seed, kPlantedSplit);
    shuffle(order, rng);
  }
  const int64_t n_train = std::min<int64_t>(n, std::llround(p.train_frac * static_cast<double>(n)));
  const int64_t n_val =
      std::min<int64_t>(n - n_train, std::llround(p.val_frac * static_cast<double>(n)));
  ds.train_idx = sorted_index_tensor(order.begin(), order.begin() + n_train);
  ds.val_idx = sorted_index_tensor(order.begin() + n_train, order.begin() + n_train + n_val);
  ds.test_idx = sorted_index_tensor(order.begin() + n_train + n_val, order.end());
  return ds;
}

}  // namespace spgnn
