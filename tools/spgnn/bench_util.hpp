// Helpers shared by the `spgnn bench` kernels (spmm/sddmm, gat, maxk): seed-deterministic inputs,
// the row samples the float64 reference runs on, and the error measure.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "spgnn/graph.hpp"
#include "spgnn/tensor.hpp"

namespace spgnn::cli {

// The device a bench runs on: "auto" is the GPU when one is present; naming cuda without one is
// an InvalidArgument naming --device.
Device bench_device(const std::string& flag);
// --name, when given, names every --graph.
void check_bench_names(const std::vector<std::string>& graphs,
                       const std::vector<std::string>& names);

// Uniform values in [lo, hi) from a counter-based hash: fast, parallel and seed-deterministic
// (the same inputs whatever the thread count).
Tensor random_values(std::vector<int64_t> shape, uint64_t seed, float lo = -1.f, float hi = 1.f);
// Standard normal values (Box-Muller on the same hash), as seed-deterministic.
Tensor random_normal(std::vector<int64_t> shape, uint64_t seed);

// Rows of g (with all their edges) as a graph of k rows over the same columns, plus the rows and
// edge ids they came from. The largest row is always in the sample (it is where split-row
// atomics and one-warp-per-row kernels are stressed); all rows when n <= max_rows.
struct RowSample {
  Graph graph;
  std::vector<int64_t> rows, edges;
};
RowSample sample_rows(const Graph& g, int64_t max_rows, uint64_t seed);

// Rows `ids` of a 1-D or 2-D tensor of any element type (copied to the host first).
Tensor gather_rows(const Tensor& t, const std::vector<int64_t>& ids);

// ||got - ref|| / ||ref|| over float32 tensors on any device; infinite if got has a non-finite.
double rel_err(const Tensor& got, const Tensor& ref);

}  // namespace spgnn::cli
