// Edge-cut partitioning for full-graph training on several devices (docs/ARCHITECTURE.md,
// "Partitions"). Every vertex has one owner part; a part holds the edges into the vertices it owns
// (a row of A belongs to the row's owner), so it aggregates its rows with no exchange except
// the features of "halo" vertices: sources owned by other parts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "spgnn/graph.hpp"

namespace spgnn {

enum class PartitionMethod : uint8_t {
  metis,   // METIS k-way (libmetis), balancing vertices and edges; falls back to ldg past 2^31
           // adjacency entries (Debian's libmetis uses 32-bit indices) or without METIS
  ldg,     // linear deterministic greedy streaming (Stanton & Kliot) in breadth-first order:
           // the part holding most neighbours, penalised by its load
  random,  // a seeded random permutation dealt round robin (vertex counts differ by <= 1)
  range,   // contiguous vertex-id ranges of equal load (vertices + edges)
};
PartitionMethod parse_partition_method(const std::string& s);  // "metis", "ldg", "random", "range"
const char* partition_method_name(PartitionMethod m);
bool have_metis();  // this build links libmetis

struct PartitionOptions {
  int64_t parts = 2;
  PartitionMethod method = PartitionMethod::metis;
  uint64_t seed = 1;         // random, ldg's tie breaks, METIS's seed
  double imbalance = 1.05;   // allowed load of the heaviest part over the mean (ldg, metis)
};

// The owner of every vertex, and what was run (method_used differs from the request after a
// fallback; `note` says why).
struct PartitionAssignment {
  std::vector<int32_t> owner;  // [n] in [0, parts)
  PartitionMethod method_used = PartitionMethod::metis;
  std::string note;
};
// g must be square (n_rows == n_cols). Edge direction is ignored for the cut; the load of a
// vertex is 1 + its in-degree scaled so that vertices and edges weigh the same in total.
PartitionAssignment assign_parts(const Graph& g, const PartitionOptions& options);

// One part, in local ids: owned vertices first (ascending global id), then the halo, grouped by
// owner part (ascending) and ascending global id within a group.
struct LocalPart {
  int32_t part = 0;
  int64_t n_owned = 0;
  std::vector<int64_t> global_ids;   // [n_owned + n_halo] local -> global
  std::vector<int64_t> halo_offsets; // [parts + 1] halo of owner q: local ids
                                     //   n_owned + halo_offsets[q] .. n_owned + halo_offsets[q+1]
  std::vector<int64_t> send_offsets; // [parts + 1] rows this part sends to peer q:
  std::vector<int64_t> send_ids;     //   send_ids[send_offsets[q] .. send_offsets[q+1]] (local,
                                     //   owned), in the order q's halo lists them
  Graph graph;  // n_rows = n_owned, n_cols = n_owned + n_halo: the edges into owned vertices,
                // with the input's values
  int64_t n_halo() const { return static_cast<int64_t>(global_ids.size()) - n_owned; }
};

struct PartitionSummary {
  int64_t num_nodes = 0, num_edges = 0;
  int64_t edge_cut = 0;     // edges whose source and target have different owners
  int64_t halo_volume = 0;  // sum over parts of their halo vertices (rows exchanged per layer)
};

// The local parts of an assignment (host graph; any index width).
std::vector<LocalPart> build_local_parts(const Graph& g, const std::vector<int32_t>& owner,
                                         int64_t parts, PartitionSummary* summary = nullptr);

// A partition directory (the layout is in docs/ARCHITECTURE.md): meta.json, owner.npy [n] int32,
// local_id.npy [n] int64 (a vertex's id in its owner), and part-<p>/ with graph.spg,
// global_ids.npy, halo_offsets.npy, send_offsets.npy, send_ids.npy, and the dataset's arrays
// split by owner (x.npy, y.npy rows of owned vertices; train_idx/val_idx/test_idx.npy as local
// ids) when the dataset has them. Written under a temporary name and renamed; an existing `dir`
// is an error unless `overwrite`, and even then only an earlier partition directory that does
// not hold the input (`meta.source`) is replaced (check_partition_output).
struct PartitionMeta {
  int64_t parts = 0;
  std::string method, note, source;
  PartitionSummary summary;
  int64_t feature_dim = 0, num_classes = 0;
};
void write_partition_dir(const Dataset& d, const std::vector<int32_t>& owner,
                         const std::vector<LocalPart>& parts, const PartitionMeta& meta,
                         const std::string& dir, bool overwrite = false);
// What write_partition_dir refuses about `dir`, checked before any work (InvalidArgument):
// callers run it first so that a long partitioning does not end in that error.
void check_partition_output(const std::string& dir, const std::string& source, bool overwrite);

// One part read back, checked against meta.json and the other files (sizes, offsets, ids in
// range): a part that is missing, or files that disagree, raise FormatError naming the file.
struct PartitionPart {
  PartitionMeta meta;
  LocalPart local;
  Tensor x, y, train_idx, val_idx, test_idx;  // undefined when the directory has none
};
PartitionMeta read_partition_meta(const std::string& dir);
PartitionPart read_partition_part(const std::string& dir, int64_t part);

}  // namespace spgnn
