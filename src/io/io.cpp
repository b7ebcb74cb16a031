// Front door of spgnn's file formats: format names, detection by extension, and the generic
// read_graph / write_graph that dispatch to the per-format readers in this folder.
//
// Orientation: spgnn's edge (row, col) is the adjacency-matrix entry A[row, col], "row receives
// from col". Matrix files are taken literally as that matrix; edge_index arrays follow PyG:
//   - Matrix Market entry "i j [v]"      -> row i-1, col j-1 (1-based indices)
//   - SNAP line "a b [v]"                -> row a',  col b'  (a', b': dense ids, see snap.cpp)
//   - edge_index.npy [2, E]              -> PyG's order by default: col (source) edge_index[0, e],
//                                           row (target) edge_index[1, e]; ReadOptions /
//                                           a dataset's spgnn.json can say dst,src instead
//   - .spg                               -> stores rowptr/col of exactly this matrix
// Writers use the same conventions, so write_graph -> read_graph returns the same graph. A user
// whose matrix or SNAP file lists "src dst" pairs and who wants messages to flow src -> dst gets
// A[src, dst] and should transpose (or symmetrize) explicitly.
//
// Compression is detected by magic number (gzip 1f 8b, zstd 28 b5 2f fd) in every reader; the
// extension is only used to choose the format, after stripping ".gz" / ".zst".
#include <sys/stat.h>

#include <algorithm>
#include <cctype>

#include "io/io_internal.hpp"
#include "spgnn/io.hpp"

namespace spgnn {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_directory(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Lower-cased extension (".mtx") of the file name once ".gz"/".zst" are stripped.
std::string format_extension(const std::string& path) {
  std::string name = lower(path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1));
  for (const char* z : {".gz", ".zst", ".zstd"}) {
    if (ends_with(name, z)) {
      name.resize(name.size() - std::strlen(z));
      break;
    }
  }
  const size_t dot = name.find_last_of('.');
  return dot == std::string::npos ? std::string() : name.substr(dot);
}

GraphFormat format_from_extension(const std::string& path) {
  const std::string ext = format_extension(path);
  if (ext == ".mtx") return GraphFormat::mtx;
  if (ext == ".spg") return GraphFormat::spg;
  if (ext == ".npy") return GraphFormat::npy;
  return GraphFormat::snap;
}

// Applies the parts of ReadOptions that the binary format does not apply itself.
Graph finish_spg(const std::string& path, Graph g, const ReadOptions& options) {
  if (!options.keep_values) g.val = Tensor();
  if (!options.allow_nonfinite) io::check_finite_values(path, g);
  const BuildOptions& b = options.build;
  const bool width_change =
      (b.index_width == IndexWidth::i32 && g.index_dtype() != DType::i32) ||
      (b.index_width == IndexWidth::i64 && g.index_dtype() != DType::i64);
  // A .spg graph is already canonical (sorted, as built); only requested changes rebuild it.
  if (b.symmetrize || b.self_loops != SelfLoopPolicy::keep || width_change) {
    try {
      return canonicalize(g, b);
    } catch (const InvalidArgument& ex) {
      io::throw_format(path, 0, ex.what());
    }
  }
  return g;
}

}  // namespace

GraphFormat parse_graph_format(const std::string& s) {
  const std::string l = lower(s);
  if (l == "auto" || l == "automatic") return GraphFormat::automatic;
  if (l == "mtx") return GraphFormat::mtx;
  if (l == "snap") return GraphFormat::snap;
  if (l == "spg") return GraphFormat::spg;
  if (l == "npy") return GraphFormat::npy;
  throw InvalidArgument("unknown graph format '" + s + "', expected auto, mtx, snap, spg or npy");
}

const char* graph_format_name(GraphFormat f) {
  switch (f) {
    case GraphFormat::automatic: return "auto";
    case GraphFormat::mtx: return "mtx";
    case GraphFormat::snap: return "snap";
    case GraphFormat::spg: return "spg";
    case GraphFormat::npy: return "npy";
  }
  return "?";
}

Graph read_graph(const std::string& path, const ReadOptions& options, GraphFormat format) {
  const bool dir = is_directory(path);
  if (format == GraphFormat::automatic) format = dir ? GraphFormat::npy : format_from_extension(path);
  switch (format) {
    case GraphFormat::mtx: return read_mtx(path, options);
    case GraphFormat::snap: return read_snap(path, options).graph;
    case GraphFormat::spg: return finish_spg(path, read_spg(path), options);
    case GraphFormat::npy: return dir ? io::read_dataset_graph(path, options) : io::read_edge_index(path, options, -1);
    case GraphFormat::automatic: break;
  }
  throw InvalidArgument("read_graph: bad format");
}

GraphFormat output_format(const std::string& path, GraphFormat format) {
  if (format == GraphFormat::automatic) {
    const std::string name = lower(path);
    SPGNN_CHECK(!ends_with(name, ".gz") && !ends_with(name, ".zst"), InvalidArgument,
                "write_graph('", path, "'): compressed output is not supported; write the "
                "uncompressed file and compress it afterwards (readers accept .gz/.zst)");
    const std::string ext = format_extension(path);
    if (ext == ".spg") format = GraphFormat::spg;
    else if (ext == ".mtx") format = GraphFormat::mtx;
    else if (ext == ".npy") format = GraphFormat::npy;
    else if (ext == ".txt" || ext == ".el" || ext == ".edges" || ext == ".tsv" || ext == ".snap")
      format = GraphFormat::snap;
    else {
      throw InvalidArgument("write_graph('" + path + "'): cannot tell the format from the "
                            "extension; use .spg, .mtx, .txt/.el/.edges (SNAP) or .npy, or pass "
                            "a format");
    }
  }
  return format;
}

void write_graph(const Graph& g, const std::string& path, GraphFormat format) {
  switch (output_format(path, format)) {
    case GraphFormat::spg: return write_spg(g, path);
    case GraphFormat::mtx: return write_mtx(g, path);
    case GraphFormat::snap: return write_snap(g, path);
    case GraphFormat::npy: return io::write_edge_index(g, path);
    case GraphFormat::automatic: break;
  }
  throw InvalidArgument("write_graph: bad format");
}

}  // namespace spgnn
