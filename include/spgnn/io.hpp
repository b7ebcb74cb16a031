// Reading and writing graphs and arrays. Every reader checks its input and throws FormatError
// with "path:line: what was found, what was expected"; `.gz` and `.zst` inputs are decompressed
// transparently (by magic number, not by name). Writers write a temporary file and rename it,
// so a crash never leaves a half-written file under the final name.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "spgnn/graph.hpp"
#include "spgnn/tensor.hpp"

namespace spgnn {

enum class GraphFormat : uint8_t {
  automatic,  // by extension (after stripping .gz/.zst): .mtx, .spg, .npy, else SNAP edge list;
              // a directory holding edge_index.npy is read as a dataset graph
  mtx,        // Matrix Market coordinate
  snap,       // SNAP edge list: "src dst [value]" per line, '#' comments
  spg,        // spgnn native binary
  npy,        // edge_index.npy: int32/int64 [2, E], rows ordered as EdgeIndexRows says
};

// Which row of an edge_index array holds the sources. PyG's convention, and spgnn's default, is
// src_dst: edge_index[0] = source, edge_index[1] = target (messages flow 0 -> 1).
enum class EdgeIndexRows : uint8_t {
  automatic,  // a dataset directory's spgnn.json ("edge_index_rows"), else src_dst
  src_dst,
  dst_src,    // edge_index[0] = target (the receiving vertex, a row of A), [1] = source
};
EdgeIndexRows parse_edge_index_rows(const std::string& s);  // "auto", "src,dst", "dst,src"
GraphFormat parse_graph_format(const std::string& s);
const char* graph_format_name(GraphFormat f);

struct ReadOptions {
  BuildOptions build;            // canonicalisation applied after parsing
  bool allow_nonfinite = false;  // NaN/Inf edge values (and x.npy features) are errors unless allowed
  bool keep_values = true;       // false drops edge values (pattern graph)
  EdgeIndexRows edge_index_rows = EdgeIndexRows::automatic;  // edge_index .npy inputs
  // Called with the fraction done (0..1) while parsing large inputs; may be empty.
  std::function<void(double)> progress;
};

Graph read_graph(const std::string& path, const ReadOptions& options = {},
                 GraphFormat format = GraphFormat::automatic);
// Writes .spg / .mtx / SNAP edge list / edge_index .npy (by extension when automatic),
// atomically.
void write_graph(const Graph& g, const std::string& path,
                 GraphFormat format = GraphFormat::automatic);
// The format write_graph writes to `path` (`format`, or the one its extension names).
GraphFormat output_format(const std::string& path, GraphFormat format = GraphFormat::automatic);

Graph read_mtx(const std::string& path, const ReadOptions& options = {});
void write_mtx(const Graph& g, const std::string& path);

// SNAP ids are arbitrary 64-bit integers; they are remapped to 0..n-1 in order of first
// appearance and `ids[dense] = original` is kept.
struct SnapGraph {
  Graph graph;
  std::vector<int64_t> ids;
};
SnapGraph read_snap(const std::string& path, const ReadOptions& options = {});
void write_snap(const Graph& g, const std::string& path);

// Native format: magic "SPGNNGRF", version, sizes, index width, flags, 64-bit checksum of the
// payload; arrays 64-byte aligned so the file can be mapped.
Graph read_spg(const std::string& path);
void write_spg(const Graph& g, const std::string& path);

// NumPy .npy (format 1.0-3.0), little-endian, C order; f32, f64, f16, i32, i64, u8, u16 (and
// bool/i8/u32/u64 are refused with a message naming the dtype; .npy has no bfloat16).
Tensor read_npy(const std::string& path);
void write_npy(const Tensor& t, const std::string& path);

// Dataset directories, the layout of ../shared/data (and of PyG/DGL exports): edge_index.npy
// [2, E] int64 (row 0 = source, row 1 = target, as PyG saves it; spgnn.json's
// "edge_index_rows": ["dst", "src"] says otherwise), x.npy [n, d] float32, y.npy [n] int64
// (-1 = unlabelled), train_idx.npy / val_idx.npy / test_idx.npy int64. Files other than
// edge_index.npy are optional on read; every array present is checked against n.
Dataset read_dataset_dir(const std::string& dir, const ReadOptions& options = {});
// Writes the directory (created if missing), edge_index.npy in PyG's order with an spgnn.json
// that says so; each file atomically.
void write_dataset_dir(const Dataset& d, const std::string& dir);

// Reads a whole file into memory, decompressing gzip or zstd content when its magic says so.
std::string read_file_decompressed(const std::string& path);
// Writes `bytes` to `path` through a temporary file in the same directory and a rename.
void write_file_atomic(const std::string& path, const void* bytes, size_t n);

}  // namespace spgnn
