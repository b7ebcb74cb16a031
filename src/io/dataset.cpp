// Dataset directories of .npy files (the layout of ../shared/data and of one-line PyG/DGL
// exports): edge_index.npy [2, E] (PyG's order unless spgnn.json says otherwise: row 0 =
// source, row 1 = target, the receiving vertex, a row of A), x.npy [n, d] features, y.npy [n]
// labels, train_idx/val_idx/test_idx.npy [k]. Each file may also be gzip/zstd-compressed as
// "<name>.gz" / "<name>.zst". spgnn.json (optional) describes the directory:
//   {"edge_index_rows": ["src", "dst"]}   or   ["dst", "src"]
//
// n is the row count of x (or y) when present, because vertices without edges exist (citeseer
// has isolated ones); only without either is it the largest edge id + 1.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "io/io_internal.hpp"
#include "spgnn/io.hpp"

namespace spgnn {
namespace {

bool exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

// First of dir/name, dir/name.gz, dir/name.zst that exists, or "".
std::string find_in_dir(const std::string& dir, const std::string& name) {
  for (const char* z : {"", ".gz", ".zst"}) {
    const std::string p = dir + "/" + name + z;
    if (exists(p)) return p;
  }
  return {};
}

std::string edge_index_path(const std::string& dir) {
  const std::string ei = find_in_dir(dir, "edge_index.npy");
  if (ei.empty()) {
    io::throw_format(dir, 0, "directory has no edge_index.npy (expected a dataset directory "
                             "holding edge_index.npy of shape [2, E], optionally x.npy, y.npy "
                             "and train/val/test_idx.npy)");
  }
  return ei;
}

// 1-D integer array as int64, every value checked to lie in [lo, hi).
Tensor read_index_array(const std::string& path, int64_t lo, int64_t hi, const char* what) {
  Tensor t = read_npy(path);
  if ((t.dtype() != DType::i64 && t.dtype() != DType::i32) || t.ndim() != 1) {
    io::throw_format(path, 0, std::string(what) + " must be a 1-D int64 (or int32) array, found " +
                                  dtype_name(t.dtype()) + " " + t.shape_str());
  }
  if (t.dtype() != DType::i64) t = t.astype(DType::i64);
  const int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (p[i] < lo || p[i] >= hi) {
      io::throw_format(path, 0, std::string(what) + "[" + std::to_string(i) + "] = " +
                                    std::to_string(p[i]) + " is outside [" + std::to_string(lo) +
                                    ", " + std::to_string(hi) + ")");
    }
  }
  return t;
}

constexpr const char* kMetaFile = "spgnn.json";
constexpr int64_t kMaxClasses = int64_t{1} << 31;

// The order a directory's spgnn.json declares, or src_dst (PyG's) without one.
EdgeIndexRows dir_edge_index_rows(const std::string& dir) {
  const std::string path = dir + "/" + kMetaFile;
  if (!exists(path)) return EdgeIndexRows::src_dst;
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(read_file_decompressed(path));
  } catch (const nlohmann::json::exception& ex) {
    io::throw_format(path, 0, std::string("not valid JSON: ") + ex.what());
  }
  if (!meta.is_object()) io::throw_format(path, 0, "expected a JSON object");
  if (!meta.contains("edge_index_rows")) return EdgeIndexRows::src_dst;
  const auto& r = meta["edge_index_rows"];
  if (r == nlohmann::json::array({"src", "dst"})) return EdgeIndexRows::src_dst;
  if (r == nlohmann::json::array({"dst", "src"})) return EdgeIndexRows::dst_src;
  io::throw_format(path, 0, "\"edge_index_rows\" must be [\"src\", \"dst\"] or [\"dst\", "
                            "\"src\"], found " + r.dump());
}

EdgeIndexRows resolve_rows(EdgeIndexRows requested, const std::string& dir) {
  if (requested != EdgeIndexRows::automatic) return requested;
  return dir.empty() ? EdgeIndexRows::src_dst : dir_edge_index_rows(dir);
}

void make_dirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string part = dir.substr(0, pos);
    if (::mkdir(part.c_str(), 0777) != 0 && errno != EEXIST) {
      const int err = errno;
      throw Error("cannot create directory '" + part + "': " + std::strerror(err));
    }
  }
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw Error("cannot write dataset to '" + dir + "': not a directory");
  }
}

}  // namespace

EdgeIndexRows parse_edge_index_rows(const std::string& s) {
  if (s == "auto") return EdgeIndexRows::automatic;
  if (s == "src,dst") return EdgeIndexRows::src_dst;
  if (s == "dst,src") return EdgeIndexRows::dst_src;
  throw InvalidArgument("edge_index rows '" + s + "': expected auto, src,dst (PyG's order: row 0 "
                        "= source) or dst,src (row 0 = target)");
}

namespace io {

Graph read_edge_index(const std::string& path, const ReadOptions& options, int64_t n,
                      const std::string& dataset_dir) {
  const Tensor t = read_npy(path);
  if ((t.dtype() != DType::i32 && t.dtype() != DType::i64) || t.ndim() != 2 || t.dim(0) != 2) {
    throw_format(path, 0, std::string("edge_index must be int32 or int64 of shape [2, E], found ") +
                              dtype_name(t.dtype()) + " " + t.shape_str());
  }
  const int64_t e = t.dim(1);
  // spgnn's rows are the receiving vertices: edge_index[1] in PyG's order, [0] in the other.
  const bool dst_first = resolve_rows(options.edge_index_rows, dataset_dir) == EdgeIndexRows::dst_src;
  const int64_t row_off = dst_first ? 0 : e, col_off = dst_first ? e : 0;
  std::vector<int64_t> rows(static_cast<size_t>(e)), cols(static_cast<size_t>(e));
  if (t.dtype() == DType::i32) {
    const int32_t* p = t.data<int32_t>();
    std::copy(p + row_off, p + row_off + e, rows.begin());
    std::copy(p + col_off, p + col_off + e, cols.begin());
  } else {
    const int64_t* p = t.data<int64_t>();
    std::copy(p + row_off, p + row_off + e, rows.begin());
    std::copy(p + col_off, p + col_off + e, cols.begin());
  }
  int64_t max_id = -1;
  for (size_t k = 0; k < rows.size(); ++k) {
    if (rows[k] < 0 || cols[k] < 0) {
      const bool first_row = (rows[k] < 0) == dst_first;
      throw_format(path, 0, "edge_index[" + std::string(first_row ? "0" : "1") + ", " +
                                std::to_string(k) + "] = " +
                                std::to_string(std::min(rows[k], cols[k])) +
                                " is negative; vertex ids must be >= 0");
    }
    max_id = std::max(max_id, std::max(rows[k], cols[k]));
  }
  if (n < 0) {
    // No x.npy / y.npy says how many vertices there are: the largest id does, so one corrupt id
    // must not make the graph's per-vertex arrays unallocatable.
    if (max_id == INT64_MAX) {
      throw_format(path, 0, "edge_index holds vertex id " + std::to_string(max_id) +
                                ", which leaves no room for a vertex count");
    }
    check_graph_fits(path, 0, max_id + 1, e,
                     "edge_index's largest vertex id is " + std::to_string(max_id));
    n = max_id + 1;
  } else {
    check_graph_fits(path, 0, n, e, "the dataset's vertex count");
  }
  if (max_id >= n) {
    throw_format(path, 0, "edge_index references vertex " + std::to_string(max_id) +
                              " but the dataset has only " + std::to_string(n) +
                              " vertices (rows of x.npy / y.npy)");
  }
  try {
    return graph_from_edges(n, n, rows, cols, {}, options.build);
  } catch (const InvalidArgument& ex) {
    throw_format(path, 0, ex.what());
  }
}

Graph read_dataset_graph(const std::string& dir, const ReadOptions& options) {
  const std::string ei = edge_index_path(dir);
  int64_t n = -1;
  std::string n_from;
  for (const char* name : {"x.npy", "y.npy"}) {
    const std::string p = find_in_dir(dir, name);
    if (p.empty()) continue;
    const InputFile f(p);
    const NpyInfo info = read_npy_info(f, p);
    // Only the header is needed here, but a file whose data does not match it is as corrupt
    // as it would be to read_dataset_dir; say so now rather than accept it.
    check_npy_data_size(f, info, p);
    if (info.shape.empty()) throw_format(p, 0, "expected an array with one row per vertex, found a scalar");
    if (n >= 0 && info.shape[0] != n) {
      throw_format(p, 0, std::to_string(info.shape[0]) + " rows, but " + n_from + " has " +
                             std::to_string(n));
    }
    n = info.shape[0];
    n_from = p;
  }
  return read_edge_index(ei, options, n, dir);
}

void write_edge_index(const Graph& graph, const std::string& path) {
  const Graph g = host_graph(graph);
  const int64_t e = g.nnz();
  Tensor t = Tensor::empty({2, e}, DType::i64);
  if (e > 0) {
    // PyG's order: sources (A's columns) first, then targets (A's rows).
    int64_t* p = t.data<int64_t>();
    const Tensor r = g.row.dtype() == DType::i64 ? g.row : g.row.astype(DType::i64);
    const Tensor c = g.col.dtype() == DType::i64 ? g.col : g.col.astype(DType::i64);
    std::copy(c.data<int64_t>(), c.data<int64_t>() + e, p);
    std::copy(r.data<int64_t>(), r.data<int64_t>() + e, p + e);
  }
  write_npy(t, path);
}

}  // namespace io

Dataset read_dataset_dir(const std::string& dir, const ReadOptions& options) {
  std::string trimmed = dir;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const std::string ei = edge_index_path(trimmed);
  Dataset d;
  d.name = trimmed.substr(trimmed.find_last_of('/') == std::string::npos ? 0 : trimmed.find_last_of('/') + 1);

  int64_t n = -1;
  if (const std::string p = find_in_dir(trimmed, "x.npy"); !p.empty()) {
    d.x = read_npy(p);
    if (d.x.ndim() != 2) io::throw_format(p, 0, "features must be 2-D [n, d], found " + d.x.shape_str());
    if (d.x.dtype() == DType::f64 || d.x.dtype() == DType::f16) d.x = d.x.astype(DType::f32);
    if (d.x.dtype() != DType::f32) {
      io::throw_format(p, 0, std::string("features must be float32 (or float64, float16), found ") +
                                 dtype_name(d.x.dtype()));
    }
    // A NaN or Inf feature does not fail training: ReLU and max turn some NaNs into numbers, so
    // the run ends with an accuracy computed from garbage. Graph readers refuse non-finite edge
    // values for the same reason, and allow_nonfinite lets both through (a caller that imputes
    // missing features itself).
    const float* xv = d.x.data<float>();
    const int64_t width = d.x.dim(1);
    for (int64_t i = 0; i < d.x.numel() && !options.allow_nonfinite; ++i) {
      if (!std::isfinite(xv[i])) {
        io::throw_format(p, 0, "feature x[" + std::to_string(i / width) + ", " +
                                   std::to_string(i % width) + "] is " +
                                   (std::isnan(xv[i]) ? "NaN" : "infinite") +
                                   "; features must be finite (ReadOptions.allow_nonfinite, "
                                   "or allow_nonfinite=True in spgnn.io.read_dataset, accepts them)");
      }
    }
    n = d.x.dim(0);
  }
  if (const std::string p = find_in_dir(trimmed, "y.npy"); !p.empty()) {
    d.y = read_npy(p);
    if ((d.y.dtype() != DType::i64 && d.y.dtype() != DType::i32) || d.y.ndim() != 1) {
      io::throw_format(p, 0, std::string("labels must be a 1-D int64 (or int32) array, found ") +
                                 dtype_name(d.y.dtype()) + " " + d.y.shape_str());
    }
    if (d.y.dtype() != DType::i64) d.y = d.y.astype(DType::i64);
    if (n >= 0 && d.y.dim(0) != n) {
      io::throw_format(p, 0, std::to_string(d.y.dim(0)) + " labels, but x.npy has " +
                                 std::to_string(n) + " rows");
    }
    n = d.y.dim(0);
    const int64_t* y = d.y.data<int64_t>();
    int64_t max_label = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (y[i] < -1) {
        io::throw_format(p, 0, "label y[" + std::to_string(i) + "] = " + std::to_string(y[i]) +
                                   " is invalid (classes are >= 0, -1 means unlabelled)");
      }
      // The class count sizes the model's output layer: a corrupt label must not ask for
      // billions of outputs (or overflow the count).
      if (y[i] >= kMaxClasses) {
        io::throw_format(p, 0, "label y[" + std::to_string(i) + "] = " + std::to_string(y[i]) +
                                   " is implausibly large (classes are numbered 0..C-1, C at "
                                   "most " + std::to_string(kMaxClasses) + ")");
      }
      max_label = std::max(max_label, y[i]);
    }
    d.num_classes = max_label + 1;
  }
  d.graph = io::read_edge_index(ei, options, n, trimmed);
  n = d.graph.n_rows;
  const std::pair<const char*, Tensor*> splits[] = {
      {"train_idx.npy", &d.train_idx}, {"val_idx.npy", &d.val_idx}, {"test_idx.npy", &d.test_idx}};
  for (const auto& [name, out] : splits) {
    const std::string p = find_in_dir(trimmed, name);
    if (!p.empty()) *out = read_index_array(p, 0, n, "vertex index");
  }
  return d;
}

void write_dataset_dir(const Dataset& d, const std::string& dir) {
  make_dirs(dir);
  io::write_edge_index(d.graph, dir + "/edge_index.npy");
  const std::string meta = nlohmann::json{{"edge_index_rows", {"src", "dst"}}}.dump(2) + "\n";
  write_file_atomic(dir + "/" + kMetaFile, meta.data(), meta.size());
  const std::pair<const char*, const Tensor*> arrays[] = {
      {"x.npy", &d.x},           {"y.npy", &d.y},           {"train_idx.npy", &d.train_idx},
      {"val_idx.npy", &d.val_idx}, {"test_idx.npy", &d.test_idx}};
  for (const auto& [name, t] : arrays) {
    if (t->defined()) write_npy(*t, dir + "/" + name);
  }
}

}  // namespace spgnn
