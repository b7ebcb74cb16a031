// Shared test helpers: seeded random graphs of the shapes every strategy must survive, random
// features, float64-aware comparisons and the GPU-skip convention.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "spgnn/graph.hpp"
#include "spgnn/tensor.hpp"

namespace spgnn::test {

// A fresh seed per process unless SPGNN_TEST_SEED is set; printed so failures can be replayed.
inline uint64_t base_seed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("SPGNN_TEST_SEED");
    uint64_t s = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    std::cerr << "[spgnn-test] SPGNN_TEST_SEED=" << s << "\n";
    return s;
  }();
  return seed;
}
inline uint64_t seed_for(uint64_t salt) { return base_seed() * 0x9E3779B97F4A7C15ULL + salt; }

enum class GraphKind { uniform, rmat, star, empty_rows, half_row, single, no_edges };
inline const char* kind_name(GraphKind k) {
  switch (k) {
    case GraphKind::uniform: return "uniform";
    case GraphKind::rmat: return "rmat";
    case GraphKind::star: return "star";
    case GraphKind::empty_rows: return "empty_rows";
    case GraphKind::half_row: return "half_row";
    case GraphKind::single: return "n1";
    case GraphKind::no_edges: return "no_edges";
  }
  return "?";
}
inline std::vector<GraphKind> all_graph_kinds() {
  return {GraphKind::uniform, GraphKind::rmat,   GraphKind::star,    GraphKind::empty_rows,
          GraphKind::half_row, GraphKind::single, GraphKind::no_edges};
}

// Random graph of the given kind with about `n` vertices and random edge values in [0.5, 1.5).
//  uniform: ~8 random neighbours per row; rmat: scale log2(n), heavy skew; star: row 0 receives
//  from everyone plus a few random edges; empty_rows: most rows empty, the rest dense-ish;
//  half_row: one row holds half of all edges (atomics stress); single: n = 1 with a self loop;
//  no_edges: n vertices, 0 edges.
inline Graph random_graph(GraphKind kind, int64_t n, uint64_t seed, bool with_values = true) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> r, c;
  auto uni = [&](int64_t hi) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(hi)); };
  BuildOptions opt;
  opt.duplicates = DuplicatePolicy::drop;
  switch (kind) {
    case GraphKind::uniform:
      for (int64_t i = 0; i < n * 8; ++i) { r.push_back(uni(n)); c.push_back(uni(n)); }
      break;
    case GraphKind::rmat: {
      RmatParams p;
      p.scale = 1;
      while ((int64_t{1} << p.scale) < n) ++p.scale;
      p.edge_factor = 8;
      p.seed = seed;
      Graph g = generate_rmat(p, opt);
      if (!with_values) g.val = Tensor();
      else {
        std::vector<float> v(static_cast<size_t>(g.nnz()));
        std::uniform_real_distribution<float> d(0.5f, 1.5f);
        for (auto& x : v) x = d(rng);
        g.val = Tensor::from_vector(v);
      }
      return g;
    }
    case GraphKind::star:
      for (int64_t i = 0; i < n; ++i) { r.push_back(0); c.push_back(i); }
      for (int64_t i = 0; i < n; ++i) { r.push_back(uni(n)); c.push_back(uni(n)); }
      break;
    case GraphKind::empty_rows:
      for (int64_t i = 0; i < n; ++i) {
        if (uni(10) != 0) continue;
        int64_t deg = 1 + uni(40);
        for (int64_t k = 0; k < deg; ++k) { r.push_back(i); c.push_back(uni(n)); }
      }
      break;
    case GraphKind::half_row:
      for (int64_t i = 0; i < n * 4; ++i) { r.push_back(uni(n)); c.push_back(uni(n)); }
      for (int64_t i = 0; i < n * 4; ++i) { r.push_back(n / 2); c.push_back(uni(n)); }
      break;
    case GraphKind::single:
      n = 1;
      r.push_back(0); c.push_back(0);
      break;
    case GraphKind::no_edges:
      break;
  }
  std::vector<float> v;
  if (with_values) {
    std::uniform_real_distribution<float> d(0.5f, 1.5f);
    v.resize(r.size());
    for (auto& x : v) x = d(rng);
  }
  return graph_from_edges(n, n, r, c, v, opt);
}

// A graph array as int64 (either index dtype; empty when undefined), values as float.
inline std::vector<int64_t> as_i64(const Tensor& t) {
  if (!t.defined()) return {};
  if (t.dtype() == DType::i32) {
    auto v = t.to_vector<int32_t>();
    return std::vector<int64_t>(v.begin(), v.end());
  }
  return t.to_vector<int64_t>();
}
inline std::vector<float> as_f32(const Tensor& t) {
  return t.defined() ? t.to_vector<float>() : std::vector<float>{};
}

// The same graph with its index arrays converted to `idx`. The copy gets a fresh GraphCache:
// derived data cached for the original index type must not be read back at another width.
inline Graph with_index(const Graph& g, DType idx) {
  if (g.index_dtype() == idx) return g;
  Graph h = g;
  h.row = g.row.astype(idx);
  h.col = g.col.astype(idx);
  h.rowptr = g.rowptr.astype(idx);
  h.cache = std::make_shared<GraphCache>();
  return h;
}

// Random f32 tensor with values in [-1, 1) (never all zeros: zeros hide unwritten outputs).
inline Tensor random_tensor(std::vector<int64_t> shape, uint64_t seed, float lo = -1.f,
                            float hi = 1.f) {
  Tensor t = Tensor::empty(std::move(shape), DType::f32);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = d(rng);
  return t;
}

// |t| of a host float32 tensor, and the L2 norm of a host tensor: for errors measured against
// the magnitudes of a result's terms (rel_error(out, ref) * norm_of(ref) / norm_of(terms)) where
// cancellation can leave a result much smaller than its float32 rounding.
inline Tensor abs_of(const Tensor& t) {
  Tensor a = t.clone();
  float* p = a.data<float>();
  for (int64_t i = 0; i < a.numel(); ++i) p[i] = std::fabs(p[i]);
  return a;
}
inline double norm_of(const Tensor& t) {
  const Tensor h = t.astype(DType::f64);
  const double* p = h.data<double>();
  double s = 0;
  for (int64_t i = 0; i < h.numel(); ++i) s += p[i] * p[i];
  return std::sqrt(s);
}

// Relative error ||a - b|| / max(||b||, tiny); NaN anywhere makes it infinite.
inline double rel_error(const Tensor& a, const Tensor& b) {
  Tensor ha = a.to(Device::cpu()), hb = b.to(Device::cpu());
  if (ha.dtype() != DType::f64) ha = ha.astype(DType::f64);
  if (hb.dtype() != DType::f64) hb = hb.astype(DType::f64);
  EXPECT_EQ(ha.numel(), hb.numel());
  const double* x = ha.data<double>();
  const double* y = hb.data<double>();
  double num = 0, den = 0;
  for (int64_t i = 0; i < ha.numel(); ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i])) {
      if (!(std::isinf(x[i]) && x[i] == y[i])) return INFINITY;
      continue;
    }
    num += (x[i] - y[i]) * (x[i] - y[i]);
    den += y[i] * y[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

// The widths every kernel must handle.
// Expects `fn` to throw `Err` whose message contains every string in `parts`.
template <class Err, class Fn>
void expect_throw(Fn&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an exception containing '" << parts.at(0) << "'";
  } catch (const Err& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

// Finite differences of loss() in one scalar v, for losses with kinks (ReLU, LeakyReLU) or jumps
// (a top-k switching members) near v. Away from them the central and one-sided differences agree to
// O(h), so a wrong gradient shows against any of them. Within h of one, the central difference
// measures a blend of two slopes, while the side that does not reach it still measures the
// derivative at v: the analytic value is scored against the closest of the three.
struct FiniteDiff {
  double central, forward, backward;
  double error_of(double analytic) const {
    return std::min({std::fabs(central - analytic), std::fabs(forward - analytic),
                     std::fabs(backward - analytic)});
  }
};
template <class Loss>
FiniteDiff finite_difference(double& v, double loss_at_v, double h, Loss&& loss) {
  const double keep = v;
  v = keep + h;
  const double lp = loss();
  v = keep - h;
  const double lm = loss();
  v = keep;
  return {(lp - lm) / (2 * h), (lp - loss_at_v) / h, (loss_at_v - lm) / h};
}

inline std::vector<int64_t> test_widths() {
  return {1, 2, 3, 4, 5, 7, 8, 16, 31, 32, 33, 64, 128, 256};
}

// GPU tests call this first. Without a CUDA device the test is skipped, and the marker line
// makes ctest report the whole executable as SKIPPED instead of passing silently.
#define SPGNN_REQUIRE_GPU()                                                              \
  do {                                                                                   \
    if (!::spgnn::cuda_available()) {                                                    \
      std::cout << "SPGNN_ALL_SKIPPED: no CUDA device in this build or machine\n";       \
      GTEST_SKIP() << "no CUDA device";                                                  \
    }                                                                                    \
  } while (0)

#ifdef SPGNN_CLI_PATH
// Runs the spgnn CLI built with the tests (`args` go through the shell) and returns its exit
// code and stdout + stderr together.
struct CliResult {
  int code = -1;
  std::string out;
};
inline CliResult run_cli(const std::string& args) {
  const std::string cmd = std::string(SPGNN_CLI_PATH) + " " + args + " 2>&1";
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}
#endif

}  // namespace spgnn::test
