// What every GPU test binary shares: the quick switch, a cache of host/device graph pairs, and
// device tensors: copies of host ones and NaN-poisoned outputs.
// SPGNN_TEST_QUICK=1 (set by scripts/gpu-check.sh for the compute-sanitizer runs) asks for
// smaller graphs and sweeps. Included once per test binary (anonymous namespace).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "test_util.hpp"

namespace spgnn::test {
namespace {

[[maybe_unused]] bool quick() {
  const char* q = std::getenv("SPGNN_TEST_QUICK");
  return q && *q && std::string(q) != "0";
}

// t copied to the GPU.
[[maybe_unused]] Tensor dev(const Tensor& t) { return t.to(Device::cuda()); }

// An output on the GPU filled with NaN on `stream` (the stream the op under test runs on, so the
// fill is ordered before it), so an element the op does not write fails the comparison.
[[maybe_unused]] Tensor poisoned(std::vector<int64_t> shape, void* stream = nullptr,
                                DType dtype = DType::f32) {
  Tensor t = Tensor::empty(std::move(shape), dtype, Device::cuda());
  t.fill_(NAN, stream);
  return t;
}

struct Graphs {
  Graph host, dev;
};

// A host graph and its device copy.
[[maybe_unused]] Graphs with_device_copy(Graph host) {
  Graphs g;
  g.host = std::move(host);
  g.dev = g.host.to(Device::cuda());
  return g;
}

// The two shapes `auto`'s rules are tested on: regular long rows (Erdős–Rényi, 3000 vertices of
// average degree 96, CV ~0.1, ~288K edges: the Reddit rules) and R-MAT scale 12 (4096 vertices,
// ~60K edges: above the tiny-graph rule, average degree < 64).
[[maybe_unused]] Graphs regular_long_rows(uint64_t seed) {
  return with_device_copy(generate_erdos_renyi(3000, 96, seed));
}
[[maybe_unused]] Graphs rmat_past_tiny(uint64_t seed) {
  RmatParams rp;
  rp.scale = 12;
  rp.seed = seed;
  return with_device_copy(generate_rmat(rp));
}
// One random graph of `kind` (n vertices, seeded by seed_base + kind) with `idx` indices and its
// device copy, built on first use and kept for the process.
[[maybe_unused]] const Graphs& cached_graphs(GraphKind kind, DType idx, int64_t n,
                                             uint64_t seed_base) {
  static std::map<std::tuple<int, int, int64_t, uint64_t>, Graphs> cache;
  const auto key = std::make_tuple(static_cast<int>(kind), static_cast<int>(idx), n, seed_base);
  auto it = cache.find(key);
  if (it == cache.end()) {
    it = cache.emplace(key, with_device_copy(with_index(
                                random_graph(kind, n, seed_for(seed_base + static_cast<int>(kind))), idx)))
             .first;
  }
  return it->second;
}

}  // namespace
}  // namespace spgnn::test
