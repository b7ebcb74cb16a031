// The one graph format of spgnn: row-sorted COO (row[], col[] sorted by (row, col)) plus the
// CSR offsets rowptr[] of the same arrays. Edge e = (row[e], col[e]) means "row receives from
// col", as in an adjacency matrix A[row, col]. COO kernels read row/col, CSR kernels read
// rowptr/col; nothing is stored twice.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "spgnn/tensor.hpp"

namespace spgnn {

// Derived data that strategies compute once per graph structure (merge-path partitions, row
// orders, transposes, ...) and reuse on later calls. Keyed by a strategy-chosen string; items must
// depend only on row/col/rowptr (never on values), since copies of a Graph that change `val`
// share the cache. Graph::to() starts a fresh cache (items are device-specific).
struct GraphCache {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<void>> items;
};

// Index width of a graph's arrays. `automatic` picks int64 only when n or nnz needs it.
enum class IndexWidth : uint8_t { automatic, i32, i64 };

struct Graph {
  int64_t n_rows = 0;  // destination vertices (rows of A)
  int64_t n_cols = 0;  // source vertices (columns of A); equals n_rows for ordinary graphs
  Tensor row;          // [nnz] index dtype (i32 or i64), sorted ascending
  Tensor col;          // [nnz] index dtype, sorted ascending within each row
  Tensor rowptr;       // [n_rows + 1] index dtype
  Tensor val;          // [nnz] f32 edge values; undefined when the graph has none
  std::shared_ptr<GraphCache> cache = std::make_shared<GraphCache>();

  int64_t n() const { return n_rows; }
  int64_t nnz() const { return row.defined() ? row.numel() : 0; }
  DType index_dtype() const { return row.defined() ? row.dtype() : DType::i32; }
  Device device() const { return row.defined() ? row.device() : Device::cpu(); }
  bool has_values() const { return val.defined(); }
  bool square() const { return n_rows == n_cols; }
  // Bytes held by the arrays.
  size_t bytes() const;
  // Deep copy of all arrays to `device`.
  Graph to(Device device) const;
  // Checks every invariant (sizes, dtypes, sortedness, index ranges, rowptr consistent with row,
  // finite values). Throws FormatError naming the first offending edge. Host graphs only.
  void validate() const;
};

enum class DuplicatePolicy : uint8_t { keep, drop, sum };
enum class SelfLoopPolicy : uint8_t { keep, remove, add };

struct BuildOptions {
  DuplicatePolicy duplicates = DuplicatePolicy::sum;  // drop keeps the first value
  SelfLoopPolicy self_loops = SelfLoopPolicy::keep;   // add: exactly one loop per vertex (an
                                                      // existing loop keeps its value, new ones get 1)
  bool symmetrize = false;  // add (c, r) for every (r, c); needs a square graph
  IndexWidth index_width = IndexWidth::automatic;
};

// Builds a canonical graph from an edge list (any order). `vals` empty means no edge values.
// Throws InvalidArgument on out-of-range ids or mismatched lengths.
Graph graph_from_edges(int64_t n_rows, int64_t n_cols, const std::vector<int64_t>& rows,
                       const std::vector<int64_t>& cols, const std::vector<float>& vals = {},
                       const BuildOptions& options = {});
// graph_from_edges from host index tensors read in place (int32 or int64 [m] each; `vals` float32 [m] or
// undefined), e.g. zero-copy views of a caller's edge_index. When `input_pos` is not null it
// receives, for each edge of the result, its position in the input (int64 [nnz]; -1 for a loop
// that self_loops=add created): the map that puts edge features given in the caller's order
// into the graph's order. That needs duplicates = keep and no symmetrize, so that each edge
// comes from exactly one input edge.
Graph graph_from_edge_tensors(int64_t n_rows, int64_t n_cols, const Tensor& rows,
                              const Tensor& cols, const Tensor& vals,
                              const BuildOptions& options = {}, Tensor* input_pos = nullptr);
// Re-applies canonicalisation to an existing host graph.
Graph canonicalize(const Graph& g, const BuildOptions& options);
// Index dtype the automatic rule picks for these sizes.
DType pick_index_dtype(int64_t n, int64_t nnz, IndexWidth width = IndexWidth::automatic);

// D^-1/2 (A + I) D^-1/2 as edge values (existing values are replaced; self loops added once).
Graph gcn_normalize(const Graph& g);
// 1 / deg(row) as edge values (rows with no edges stay empty).
Graph mean_normalize(const Graph& g);
// 1 / deg(row) per row, float32 [n_rows] (0 for rows with no edges), of a host graph: the
// mean's scale as a vector (its backward scales d out by it).
Tensor inverse_degree(const Graph& g);

// Transposed graph plus `perm`: edge e of the transpose is edge perm[e] of the input (int64
// [nnz]). Values, when present, are carried in the transposed order.
struct Transposed {
  Graph graph;
  Tensor perm;
};
Transposed transpose(const Graph& g);

// Degree statistics and structure facts shown by `spgnn info`.
struct GraphStats {
  int64_t n_rows = 0, n_cols = 0, nnz = 0;
  int64_t deg_min = 0, deg_max = 0;
  double deg_mean = 0, deg_stddev = 0, gini = 0;
  int64_t empty_rows = 0, self_loops = 0, duplicates = 0;
  bool symmetric = false;
  bool has_values = false;
  std::string index_dtype;
  size_t bytes = 0;
};
GraphStats graph_stats(const Graph& g);

// ---- generators (deterministic for a given seed, whatever the thread count) --------------------
struct RmatParams {
  int scale = 16;           // n = 2^scale
  int64_t edge_factor = 16; // nnz before canonicalisation = edge_factor * n
  double a = 0.57, b = 0.19, c = 0.19;  // Graph500; d = 1 - a - b - c
  uint64_t seed = 1;
  bool permute = true;      // randomly relabel vertices so hubs are not all at low ids
};
Graph generate_rmat(const RmatParams& p, const BuildOptions& options = {});
// Uniform random directed graph: n * avg_degree (row, col) pairs drawn with replacement (self
// loops possible; duplicates merge under the build policy, so nnz ends slightly below).
Graph generate_erdos_renyi(int64_t n, double avg_degree, uint64_t seed,
                           const BuildOptions& options = {});

// A labelled node-classification dataset.
struct Dataset {
  std::string name;
  Graph graph;
  Tensor x;           // [n, d] f32 features
  Tensor y;           // [n] i64 labels, -1 = unlabelled
  Tensor train_idx, val_idx, test_idx;  // i64 vertex ids
  int64_t num_classes = 0;
  bool synthetic = false;  // x and y are random draws (nn::synthetic_dataset), not the data's own
};
struct PlantedPartitionParams {
  int64_t n = 2000;
  int64_t num_classes = 4;
  double avg_degree = 10;
  double p_in_ratio = 0.8;   // fraction of a vertex's edges that stay inside its class
  int64_t feature_dim = 32;
  double feature_signal = 1.0;  // mean shift of class-correlated features vs unit noise
  double train_frac = 0.1, val_frac = 0.2;  // rest is test
  uint64_t seed = 1;
};
// Symmetric graph with planted classes, class-correlated Gaussian features and a split.
Dataset generate_planted_partition(const PlantedPartitionParams& p);

}  // namespace spgnn
