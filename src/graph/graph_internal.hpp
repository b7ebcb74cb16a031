// Internal to src/graph: the edge-list builder shared by graph_from_edges, canonicalize and the
// generators, plus index-dtype dispatch. Not part of the public API.
#pragma once
#include <omp.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "spgnn/error.hpp"
#include "spgnn/graph.hpp"

namespace spgnn::graph_detail {

// Rows per OpenMP task in the per-row passes: large enough to amortise scheduling, small enough
// that one hub row does not leave the other threads idle for long.
constexpr int64_t kRowsPerTask = 512;

// A borrowed edge list. Generators store raw edges as int32 when ids fit, which halves the
// memory of the biggest temporary on 100M-edge graphs; hence two input widths.
template <class InT>
struct EdgeArrays {
  const InT* rows = nullptr;
  const InT* cols = nullptr;
  const float* vals = nullptr;  // nullptr: no edge values
  int64_t m = 0;
};

// Validates ids (InvalidArgument naming the first bad position) and builds the canonical graph;
// `input_pos` as in graph_from_edge_tensors.
Graph build_graph(int64_t n_rows, int64_t n_cols, const EdgeArrays<int32_t>& e,
                  const BuildOptions& options, Tensor* input_pos = nullptr);
Graph build_graph(int64_t n_rows, int64_t n_cols, const EdgeArrays<int64_t>& e,
                  const BuildOptions& options, Tensor* input_pos = nullptr);

// Throws std::bad_alloc, before anything is allocated, when building a graph of `n_rows` rows
// and `nnz` edges cannot fit in this machine's memory (graph.cpp explains why the allocator
// cannot be left to refuse it).
void require_build_memory(int64_t n_rows, int64_t nnz);

// Calls f(IndexT{}) with IndexT = int32_t or int64_t matching `t`.
template <class F>
decltype(auto) dispatch_index(DType t, F&& f) {
  if (t == DType::i32) return f(int32_t{});
  if (t == DType::i64) return f(int64_t{});
  throw InvalidArgument(detail::concat("graph index dtype is ", dtype_name(t),
                                       ", expected int32 or int64"));
}

// Stable counting sort of items 0..m-1 into n_buckets buckets without atomics: item k with
// bucket_of(k) = b >= 0 gets position offsets[b] + (number of earlier items in bucket b), passed
// to place(k, pos); bucket_of(k) < 0 drops the item. Each thread counts a contiguous item range
// into its own histogram, so the order is the input order for any thread count and no bucket
// needs sorting afterwards. Returns false without doing anything when the per-thread histograms
// would cost more than one int64 per item (many buckets, few items, many threads); callers then
// fall back to an atomic fill. `offsets` gets n_buckets + 1 entries; `ready(total)` runs once
// between counting and placing (to allocate the output).
template <class BucketOf, class Ready, class Place>
bool stable_bucket_scatter(int64_t m, int64_t n_buckets, std::vector<int64_t>& offsets,
                           BucketOf&& bucket_of, Ready&& ready, Place&& place) {
  const int64_t max_threads = omp_get_max_threads();
  if ((max_threads - 1) * n_buckets > m) return false;
  std::vector<int64_t> hist(static_cast<size_t>(max_threads * n_buckets), 0);
  int64_t nt = 1;
#pragma omp parallel
  {
    const int64_t t = omp_get_thread_num();
#pragma omp single
    nt = omp_get_num_threads();
    int64_t* h = hist.data() + t * n_buckets;
    for (int64_t k = m * t / nt, e = m * (t + 1) / nt; k < e; ++k) {
      const int64_t b = bucket_of(k);
      if (b >= 0) ++h[b];
    }
  }
  offsets.assign(static_cast<size_t>(n_buckets) + 1, 0);
  // hist[t][b] becomes the first position of thread t's items in bucket b.
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < n_buckets; ++b) {
    int64_t total = 0;
    for (int64_t t = 0; t < nt; ++t) total += hist[static_cast<size_t>(t * n_buckets + b)];
    offsets[static_cast<size_t>(b) + 1] = total;
  }
  for (int64_t b = 0; b < n_buckets; ++b)
    offsets[static_cast<size_t>(b) + 1] += offsets[static_cast<size_t>(b)];
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < n_buckets; ++b) {
    int64_t running = offsets[static_cast<size_t>(b)];
    for (int64_t t = 0; t < nt; ++t) {
      int64_t& slot = hist[static_cast<size_t>(t * n_buckets + b)];
      const int64_t count = slot;
      slot = running;
      running += count;
    }
  }
  ready(offsets[static_cast<size_t>(n_buckets)]);
  // The ranges are those of the counting pass; a smaller team just takes several of them.
#pragma omp parallel
  {
    const int64_t team = omp_get_num_threads();
    for (int64_t t = omp_get_thread_num(); t < nt; t += team) {
      int64_t* h = hist.data() + t * n_buckets;
      for (int64_t k = m * t / nt, e = m * (t + 1) / nt; k < e; ++k) {
        const int64_t b = bucket_of(k);
        if (b >= 0) place(k, h[b]++);
      }
    }
  }
  return true;
}

// Throws InvalidArgument unless `g` lives on the host (the CPU-side graph algorithms read the
// arrays directly).
void require_host(const Graph& g, const char* what);

}  // namespace spgnn::graph_detail
