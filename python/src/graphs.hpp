// Graphs as the Python package sees them: a canonical spgnn::Graph on one device plus the
// graphs derived from it (GCN normalisation, mean weights, self loops, transposes), each built
// once on first use and kept with its parent, like nn::GraphContext.
//
// Python refers to a graph through a handle: a one-element int64 host array holding the entry's
// id, whose owner keeps the entry alive. Ops receive the handle's address, read the id and look it
// up in a registry of live entries, so a stale or forged handle is an error, never a dangling
// pointer.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "arrays.hpp"
#include "spgnn/graph.hpp"
#include "spgnn/schedule.hpp"

namespace spgnn::py {

struct GraphEntry {
  int64_t id = 0;        // what handles hold; never reused
  std::string kind;      // "base", or the derivation that made it ("gcn", "transpose", ...)
  Graph g;               // canonical arrays on the entry's device
  // Edge i of g came from edge edge_source[i] of the parent (of the caller's edge list for a
  // base graph); -1 for a created self loop. int64 [nnz] on the host, or on g's device for a
  // graph built there (from_arrays); undefined when the identity.
  Tensor edge_source;
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<GraphEntry>> derived;
  std::map<std::string, Tensor> device_tensors;  // graph_tensor() results, built on first use

  // g on the host (g itself for a host graph). A graph built on the host and placed on a GPU
  // keeps its host arrays; one built on the GPU (from_arrays) is copied down on first use,
  // after the stream that wrote it.
  const Graph& host_graph() const;
  void set_host(Graph h) {
    host_ = std::move(h);
    host_ready_ = true;
  }
  void* stream = nullptr;       // the stream a GPU-built graph's arrays were written on
  bool device_built = false;    // built by entry_from_arrays (its arrays are the caller's)
  // The degree statistics of g's rows and of its columns (the transpose's rows) when the
  // builder handed them in (under `mutex`): its variants of the same structure reuse them.
  std::optional<DegreeSummary> row_summary, col_summary;

 private:
  mutable Graph host_;
  mutable bool host_ready_ = false;
  mutable std::once_flag host_once_;
};

// Builds the canonical graph of the edges cols[k] -> rows[k] (destination rows, source cols:
// spgnn's orientation; PyG's edge_index is [cols; rows]) with every edge kept: duplicates and
// self loops stay, as PyG's message passing counts them. `values` f32 [m] or undefined. The
// arrays may be on a GPU (they are copied to the host to sort; `stream` is synchronised
// first). `rows_name`/`cols_name` name the arrays in range errors.
std::shared_ptr<GraphEntry> build_entry(const Tensor& rows, const Tensor& cols,
                                        const Tensor& values, int64_t n_rows, int64_t n_cols,
                                        const std::string& rows_name,
                                        const std::string& cols_name, void* stream);
// A derived graph of `e` (built on the first call, then cached): "gcn", "gcn_improved" (PyG's
// gcn_norm with self loops of weight 1 or 2), "gcn_noloops" (gcn_norm without adding loops),
// "mean" (1/in-degree weights), "loops" (one self loop per vertex, no values), "pattern" (no
// values), "transpose", or "to:<device>" (the same graph on another device).
std::shared_ptr<GraphEntry> derive(const std::shared_ptr<GraphEntry>& e, const std::string& kind);
// A new entry for a canonical host graph placed on `device` (kept on the host too when that is a
// GPU), with edge_source the identity.
std::shared_ptr<GraphEntry> make_entry_for(Graph host, Device device, const std::string& kind);
// An entry over canonical arrays the caller built on a GPU (spgnn.graph builds an edge_index's
// graph and its variants with torch on the GPU): `g`'s tensors are views of the caller's memory,
// which they keep alive; `edge_source` (int64 [nnz] on the same device) or undefined. Only the
// shapes, dtypes and devices are checked here. With a `parent`, the entry becomes
// parent->derived[kind] unless that slot is filled already, in which case the earlier entry is
// returned (two threads deriving at once agree on one).
std::shared_ptr<GraphEntry> entry_from_arrays(Graph g, Tensor edge_source, const std::string& kind,
                                              void* stream,
                                              const std::shared_ptr<GraphEntry>& parent);
// The entry behind a handle's address; InvalidArgument when it is not a live graph handle.
std::shared_ptr<GraphEntry> lookup(uintptr_t handle_address);
// A new handle array for `e` (the owner keeps `e` alive).
nb::object handle_of(const std::shared_ptr<GraphEntry>& e);
// Writes a graph array into `out` (on the graph's device, ordered on `stream`): "row", "col",
// "edge_source" (int64 [nnz]), "values" (float32 [nnz], ones when the graph has none),
// "inv_degree" (float32 [n_rows], 1/in-degree, 0 for rows without edges).
void graph_tensor(const std::shared_ptr<GraphEntry>& e, const std::string& name, Tensor& out,
                  void* stream);
// Shapes graph_tensor() writes, so Python can allocate the output.
std::vector<int64_t> graph_tensor_shape(const GraphEntry& e, const std::string& name);
DType graph_tensor_dtype(const std::string& name);

// Live graph entries (for tests of lifetime).
size_t live_graph_count();

}  // namespace spgnn::py
