// Datasets for training: the built-in planted partition, dataset directories (splits as index
// files or masks), OGB raw directories and any graph with synthetic features and labels.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "io/io_internal.hpp"
#include "spgnn/io.hpp"
#include "spgnn/nn/model.hpp"

namespace spgnn::nn {

namespace {

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}
bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
// `base` + ".csv.gz", or the uncompressed ".csv" when only that one exists.
std::string csv_path(const std::string& base) {
  if (exists(base + ".csv.gz")) return base + ".csv.gz";
  if (exists(base + ".csv")) return base + ".csv";
  return "";
}

// Labels of an OGB directory are class ids below this (io's bound for a dataset directory's y.npy).
constexpr int64_t kMaxClasses = int64_t{1} << 31;

// Parses a CSV of numbers into rows of exactly `width` values (width < 0: learnt from line 1).
struct Csv {
  std::vector<double> values;
  int64_t rows = 0, width = 0;
};
Csv read_csv_numbers(const std::string& path, int64_t width) {
  const std::string text = read_file_decompressed(path);
  Csv out;
  out.width = width;
  const char* p = text.c_str();
  const char* end = p + text.size();
  int64_t line = 0;
  while (p < end) {
    ++line;
    const char* eol = static_cast<const char*>(std::memchr(p, '\n', size_t(end - p)));
    if (!eol) eol = end;
    int64_t count = 0;
    const char* q = p;
    while (q < eol && (*q == ' ' || *q == '\r')) ++q;
    if (q == eol) {  // blank line (a trailing newline)
      p = eol + 1;
      continue;
    }
    for (;;) {
      // Each field is parsed from its own copy: strtod skips leading whitespace, newlines
      // included, so on the buffer itself a blank field ("1,\t") read the next line's number and
      // shifted every value after it; an empty field (a trailing comma) is an error too.
      const char* comma = static_cast<const char*>(std::memchr(q, ',', size_t(eol - q)));
      const char* field_end = comma ? comma : eol;
      std::string field(q, field_end);
      while (!field.empty() && (field.back() == ' ' || field.back() == '\r')) field.pop_back();
      char* stop = nullptr;
      errno = 0;
      const double v = std::strtod(field.c_str(), &stop);
      SPGNN_CHECK(!field.empty() && stop == field.c_str() + field.size() && errno != ERANGE,
                  FormatError, path, ":", line, ": expected a number at column ", count + 1,
                  ", found '", field.substr(0, 20), "'");
      out.values.push_back(v);
      ++count;
      if (!comma) break;
      q = comma + 1;
    }
    if (out.width < 0) out.width = count;
    SPGNN_CHECK(count == out.width, FormatError, path, ":", line, ": found ", count,
                " columns, expected ", out.width);
    ++out.rows;
    p = eol + 1;
  }
  return out;
}

// First of dir/name, dir/name.gz, dir/name.zst that exists, or "" (io's rule for dataset files).
std::string find_file(const std::string& dir, const std::string& name) {
  for (const char* z : {"", ".gz", ".zst"})
    if (exists(dir + "/" + name + z)) return dir + "/" + name + z;
  return "";
}

// The value of `key` in a .npy header dict, as the raw text up to the next top-level comma.
std::string header_field(const std::string& h, const std::string& key, const std::string& path) {
  const size_t k = h.find("'" + key + "'");
  SPGNN_CHECK(k != std::string::npos, FormatError, path, ": the .npy header has no '", key, "'");
  size_t p = h.find(':', k);
  SPGNN_CHECK(p != std::string::npos, FormatError, path, ": malformed .npy header");
  ++p;
  while (p < h.size() && h[p] == ' ') ++p;
  size_t e = p;
  if (p < h.size() && (h[p] == '\'' || h[p] == '"')) {
    e = h.find(h[p], p + 1);
    SPGNN_CHECK(e != std::string::npos, FormatError, path, ": malformed .npy header");
    return h.substr(p + 1, e - p - 1);
  }
  if (p < h.size() && h[p] == '(') {
    e = h.find(')', p);
    SPGNN_CHECK(e != std::string::npos, FormatError, path, ": malformed .npy header");
    return h.substr(p, e - p + 1);
  }
  while (e < h.size() && h[e] != ',' && h[e] != '}') ++e;
  return h.substr(p, e - p);
}

// A split mask: a 1-D .npy of n bool ('|b1') or uint8 values, each 0 or 1; returns the ids of
// the set entries. Parsed here rather than by io::read_npy, which refuses bool arrays (a bool is
// not a number there); only these two one-byte dtypes are accepted, so the layout is fixed.
Tensor read_mask(const std::string& path, int64_t n) {
  const std::string buf = read_file_decompressed(path);
  SPGNN_CHECK(buf.size() >= 10 && buf.compare(0, 6, "\x93NUMPY") == 0, FormatError, path,
              ": not a .npy file (bad magic)");
  const unsigned major = static_cast<unsigned char>(buf[6]);
  size_t hlen = 0, off = 0;
  if (major == 1) {
    hlen = size_t(static_cast<unsigned char>(buf[8])) | size_t(static_cast<unsigned char>(buf[9])) << 8;
    off = 10;
  } else if ((major == 2 || major == 3) && buf.size() >= 12) {
    for (int b = 0; b < 4; ++b) hlen |= size_t(static_cast<unsigned char>(buf[size_t(8 + b)])) << (8 * b);
    off = 12;
  } else {
    throw FormatError(path + ": unsupported .npy format version " + std::to_string(major));
  }
  SPGNN_CHECK(off + hlen <= buf.size(), FormatError, path, ": the .npy header is truncated");
  const std::string h = buf.substr(off, hlen);
  std::string descr = header_field(h, "descr", path);
  const std::string code = !descr.empty() && std::strchr("<>|=", descr[0]) ? descr.substr(1) : descr;
  SPGNN_CHECK(code == "b1" || code == "u1", FormatError, path, ": a split mask must be bool or "
              "uint8, found dtype '", descr, "'");
  const std::string shape = header_field(h, "shape", path);
  std::vector<int64_t> dims;
  for (size_t p = 1; p < shape.size();) {
    while (p < shape.size() && (shape[p] == ' ' || shape[p] == ',')) ++p;
    if (p >= shape.size() || shape[p] == ')') break;
    char* stop = nullptr;
    const long long v = std::strtoll(shape.c_str() + p, &stop, 10);
    SPGNN_CHECK(stop != shape.c_str() + p, FormatError, path, ": malformed shape ", shape);
    dims.push_back(v);
    p = size_t(stop - shape.c_str());
  }
  SPGNN_CHECK(dims.size() == 1, FormatError, path, ": a split mask must be 1-D [n], found shape ",
              shape);
  SPGNN_CHECK(dims[0] == n, FormatError, path, ": the mask has ", dims[0],
              " entries, but the dataset has n = ", n, " vertices");
  SPGNN_CHECK(buf.size() - off - hlen >= size_t(n), FormatError, path, ": the data is truncated (",
              buf.size() - off - hlen, " bytes for ", n, " entries)");
  const unsigned char* v = reinterpret_cast<const unsigned char*>(buf.data() + off + hlen);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) {
    SPGNN_CHECK(v[i] <= 1, FormatError, path, ": entry ", i, " is ", int(v[i]),
                " (a mask holds 0 or 1)");
    if (v[i]) ids.push_back(i);
  }
  return ids.empty() ? Tensor::empty({0}, DType::i64) : Tensor::from_vector(ids);
}

// train/val/test_mask.npy in a dataset directory, as an alternative to *_idx.npy: each split
// given by a mask must select someone, and no vertex may be in two splits.
void read_mask_splits(const std::string& dir, Dataset& d) {
  const int64_t n = d.graph.n_rows;
  struct Split {
    const char* name;
    Tensor* idx;
    std::string mask;
  };
  Split splits[] = {{"train", &d.train_idx, ""}, {"val", &d.val_idx, ""}, {"test", &d.test_idx, ""}};
  bool any = false;
  for (Split& s : splits) {
    s.mask = find_file(dir, std::string(s.name) + "_mask.npy");
    if (s.mask.empty()) continue;
    SPGNN_CHECK(!s.idx->defined(), FormatError, dir, ": both ", s.name, "_idx.npy and ", s.name,
                "_mask.npy are present; keep one of them");
    *s.idx = read_mask(s.mask, n);
    SPGNN_CHECK(s.idx->numel() > 0, FormatError, s.mask, ": the ", s.name,
                " mask selects no vertex");
    any = true;
  }
  if (!any) return;
  std::vector<int8_t> owner(static_cast<size_t>(n), -1);
  for (int k = 0; k < 3; ++k) {
    if (!splits[k].idx->defined()) continue;
    const int64_t* p = splits[k].idx->data<int64_t>();
    for (int64_t i = 0; i < splits[k].idx->numel(); ++i) {
      if (p[i] < 0 || p[i] >= n) continue;  // check_dataset names index files out of range
      int8_t& o = owner[size_t(p[i])];
      SPGNN_CHECK(o < 0 || o == k, FormatError, dir, ": vertex ", p[i], " is in both the ",
                  splits[o].name, " and the ", splits[k].name, " split (masks must not overlap)");
      o = int8_t(k);
    }
  }
}

Tensor index_tensor(const Csv& c, int64_t n, const std::string& path) {
  Tensor t = Tensor::empty({c.rows}, DType::i64);
  int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < c.rows; ++i) {
    const double v = c.values[size_t(i)];
    SPGNN_CHECK(v >= 0 && v < double(n) && v == std::floor(v), FormatError, path, ":", i + 1,
                ": vertex index ", v, " is not an integer in [0, ", n, ")");
    p[i] = int64_t(v);
  }
  return t;
}

}  // namespace

void normalize_rows_(Tensor& x) {
  SPGNN_CHECK(x.defined() && x.dtype() == DType::f32 && x.ndim() == 2 && !x.device().is_cuda(),
              InvalidArgument, "normalize_rows_: 'x' must be a host float32 [n, d] tensor");
  const int64_t n = x.dim(0), d = x.dim(1);
  float* p = x.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int64_t j = 0; j < d; ++j) s += p[i * d + j];
    if (s != 0)
      for (int64_t j = 0; j < d; ++j) p[i * d + j] = float(p[i * d + j] / s);
  }
}

void check_dataset(const Dataset& d) {
  const int64_t n = d.graph.n_rows;
  SPGNN_CHECK(d.graph.row.defined() && d.graph.square(), InvalidArgument, "dataset '", d.name,
              "': needs a square graph");
  SPGNN_CHECK(d.x.defined() && d.x.dtype() == DType::f32 && d.x.ndim() == 2 && d.x.dim(0) == n,
              InvalidArgument, "dataset '", d.name, "': features 'x' must be float32 [n = ", n,
              ", d], got ", d.x.defined() ? d.x.shape_str() : "none");
  SPGNN_CHECK(d.y.defined() && d.y.dtype() == DType::i64 && d.y.ndim() == 1 && d.y.dim(0) == n,
              InvalidArgument, "dataset '", d.name, "': labels 'y' must be int64 [n = ", n, "]");
  SPGNN_CHECK(d.num_classes >= 2, InvalidArgument, "dataset '", d.name,
              "': needs at least 2 classes, has ", d.num_classes);
  const Tensor yh = d.y.to(Device::cpu());
  const int64_t* y = yh.data<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    SPGNN_CHECK(y[i] >= -1 && y[i] < d.num_classes, InvalidArgument, "dataset '", d.name,
                "': label y[", i, "] = ", y[i], " is outside [-1, ", d.num_classes, ")");
  const std::pair<const char*, const Tensor*> splits[] = {
      {"train", &d.train_idx}, {"val", &d.val_idx}, {"test", &d.test_idx}};
  // A vertex listed twice would count twice in the loss or the accuracy, and one in two splits
  // would be evaluated on what it trained on; masks cannot express either, index files can.
  std::vector<int8_t> owner(static_cast<size_t>(n), -1);
  bool labelled_train = false;  // the loss leaves y = -1 out: with no labelled vertex, no terms
  for (int k = 0; k < 3; ++k) {
    const auto& [name, t] = splits[k];
    SPGNN_CHECK(t->defined() && t->dtype() == DType::i64 && t->ndim() == 1, InvalidArgument,
                "dataset '", d.name, "': the ", name, " split is missing (", name,
                "_idx.npy, or split/<scheme>/ in an OGB directory)");
    const Tensor h = t->to(Device::cpu());
    const int64_t* p = h.data<int64_t>();
    for (int64_t i = 0; i < h.numel(); ++i) {
      SPGNN_CHECK(p[i] >= 0 && p[i] < n, InvalidArgument, "dataset '", d.name, "': ", name,
                  " index ", p[i], " is outside [0, ", n, ")");
      int8_t& o = owner[static_cast<size_t>(p[i])];
      SPGNN_CHECK(o != k, InvalidArgument, "dataset '", d.name, "': vertex ", p[i],
                  " is listed twice in the ", name, " split");
      SPGNN_CHECK(o < 0, InvalidArgument, "dataset '", d.name, "': vertex ", p[i],
                  " is in both the ", splits[o < 0 ? 0 : o].first, " and the ", name,
                  " split (splits must not overlap)");
      o = int8_t(k);
      labelled_train |= k == 0 && y[p[i]] >= 0;
    }
  }
  SPGNN_CHECK(d.train_idx.numel() > 0, InvalidArgument, "dataset '", d.name,
              "': the train split is empty");
  SPGNN_CHECK(labelled_train, InvalidArgument, "dataset '", d.name,
              "': every vertex of the train split is unlabelled (y = -1)");
}

Dataset synthetic_dataset(Graph g, int64_t features, int64_t classes, uint64_t seed) {
  SPGNN_CHECK(features >= 1 && classes >= 2, InvalidArgument, "synthetic_dataset: needs features "
              ">= 1 and classes >= 2, got ", features, " and ", classes);
  io::require_memory(static_cast<double>(g.n_rows) * static_cast<double>(features) * 4,
                     "synthetic features: " + std::to_string(g.n_rows) + " x " +
                         std::to_string(features) + " floats (--features)");
  Dataset d;
  d.name = "synthetic";
  d.synthetic = true;
  const int64_t n = g.n_rows;
  d.graph = std::move(g);
  d.num_classes = classes;
  d.x = Tensor::empty({n, features}, DType::f32);
  float* px = d.x.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n * features; ++i) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ULL + uint64_t(i) + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    px[i] = float(double((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0)) * 2.f - 1.f;
  }
  d.y = Tensor::empty({n}, DType::i64);
  std::mt19937_64 rng(seed);
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    d.y.data<int64_t>()[i] = int64_t(rng() % uint64_t(classes));
    perm[size_t(i)] = i;
  }
  std::shuffle(perm.begin(), perm.end(), rng);
  const int64_t n_train = std::max<int64_t>(1, n * 6 / 10), n_val = n * 2 / 10;
  auto slice = [&](int64_t lo, int64_t hi) {
    std::vector<int64_t> v(perm.begin() + lo, perm.begin() + std::max(lo, hi));
    std::sort(v.begin(), v.end());
    return v.empty() ? Tensor::empty({0}, DType::i64) : Tensor::from_vector(v);
  };
  d.train_idx = slice(0, n_train);
  d.val_idx = slice(n_train, std::min(n, n_train + n_val));
  d.test_idx = slice(std::min(n, n_train + n_val), n);
  return d;
}

Dataset read_ogb_dir(const std::string& dir_in, const DatasetOptions& options) {
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string edge = csv_path(dir + "/raw/edge");
  SPGNN_CHECK(!edge.empty(), FormatError, dir, ": not an OGB raw directory (raw/edge.csv.gz missing)");
  const std::string feat = csv_path(dir + "/raw/node-feat");
  const std::string label = csv_path(dir + "/raw/node-label");
  SPGNN_CHECK(!feat.empty() && !label.empty(), FormatError, dir,
              ": an OGB node dataset needs raw/node-feat.csv.gz and raw/node-label.csv.gz");
  Dataset d;
  d.name = dir.substr(dir.find_last_of('/') == std::string::npos ? 0 : dir.find_last_of('/') + 1);
  const Csv x = read_csv_numbers(feat, -1);
  const int64_t n = x.rows;
  // strtod reads "nan"/"inf" (labels use NaN for unlabelled), but a non-finite feature would be
  // trained on silently, as io refuses for a dataset directory's x.npy.
  for (size_t i = 0; i < x.values.size(); ++i) {
    SPGNN_CHECK(std::isfinite(x.values[i]), FormatError, feat, ":", int64_t(i) / x.width + 1,
                ": feature ", x.values[i], " at column ", int64_t(i) % x.width + 1,
                " is not finite");
  }
  d.x = Tensor::empty({n, x.width}, DType::f32);
  std::transform(x.values.begin(), x.values.end(), d.x.data<float>(), [](double v) { return float(v); });

  const Csv y = read_csv_numbers(label, 1);
  SPGNN_CHECK(y.rows == n, FormatError, label, ": ", y.rows, " labels, but ", feat, " has ", n,
              " rows");
  d.y = Tensor::empty({n}, DType::i64);
  int64_t max_label = -1;
  for (int64_t i = 0; i < n; ++i) {
    const double v = y.values[size_t(i)];
    // OGB marks unlabelled nodes with NaN; spgnn uses -1. The range is checked before the
    // conversion (a double beyond int64 does not convert), and it is the bound of dataset
    // directories' y.npy: the class count sizes the model's output layer, so a corrupt label
    // must not ask for billions of outputs.
    SPGNN_CHECK(std::isnan(v) || (v >= -1 && v < double(kMaxClasses) && v == std::floor(v)),
                FormatError, label, ":", i + 1, ": label ", v,
                " is not a class id (an integer in [-1, ", kMaxClasses, "), or NaN for unlabelled)");
    const int64_t l = std::isnan(v) ? -1 : int64_t(v);
    d.y.data<int64_t>()[i] = l;
    max_label = std::max(max_label, l);
  }
  d.num_classes = max_label + 1;

  const Csv e = read_csv_numbers(edge, 2);
  std::vector<int64_t> r(size_t(e.rows)), c(size_t(e.rows));
  for (int64_t i = 0; i < e.rows; ++i) {
    const double s = e.values[size_t(2 * i)], t = e.values[size_t(2 * i + 1)];
    SPGNN_CHECK(s >= 0 && t >= 0 && s < double(n) && t < double(n), FormatError, edge, ":", i + 1,
                ": edge (", s, ", ", t, ") names a vertex outside [0, ", n, ")");
    // Vertex ids are integers: "0.5,1.7" is a corrupt line, not the edge (0, 1).
    SPGNN_CHECK(s == std::floor(s) && t == std::floor(t), FormatError, edge, ":", i + 1, ": edge (",
                s, ", ", t, ") names a vertex that is not an integer");
    // OGB lists (source, target); spgnn's row is the receiving vertex.
    r[size_t(i)] = int64_t(t);
    c[size_t(i)] = int64_t(s);
  }
  BuildOptions b;
  b.symmetrize = options.symmetrize;
  b.duplicates = DuplicatePolicy::drop;
  d.graph = graph_from_edges(n, n, r, c, {}, b);

  std::string split_dir = dir + "/split/" + options.ogb_split;
  if (options.ogb_split.empty()) {
    // The one scheme present (OGB ships exactly one per dataset: time, species, sales, ...).
    for (const char* s : {"time", "sales_ranking", "species", "random", "scaffold", "area"})
      if (is_dir(dir + "/split/" + s)) split_dir = dir + "/split/" + s;
  }
  const std::pair<const char*, Tensor*> splits[] = {
      {"train", &d.train_idx}, {"valid", &d.val_idx}, {"test", &d.test_idx}};
  for (const auto& [name, out] : splits) {
    const std::string p = csv_path(split_dir + "/" + name);
    SPGNN_CHECK(!p.empty(), FormatError, split_dir, ": ", name,
                ".csv.gz missing (pass the split scheme, e.g. --split time)");
    *out = index_tensor(read_csv_numbers(p, 1), n, p);
  }
  return d;
}

Dataset load_dataset(const std::string& spec, const DatasetOptions& options) {
  if (spec == "builtin") {
    SPGNN_CHECK(options.ogb_split.empty(), InvalidArgument, "dataset 'builtin': split scheme '",
                options.ogb_split, "' (--split) applies to OGB raw directories only");
    PlantedPartitionParams p;
    p.seed = options.seed;
    Dataset d = generate_planted_partition(p);
    d.name = "builtin";
    return d;
  }
  SPGNN_CHECK(exists(spec), InvalidArgument, "dataset '", spec,
              "': no such file or directory (expected builtin, a dataset directory, an OGB "
              "directory or a graph file)");
  if (is_dir(spec) && !csv_path(spec + "/raw/edge").empty()) return read_ogb_dir(spec, options);
  SPGNN_CHECK(options.ogb_split.empty(), InvalidArgument, "dataset '", spec, "': split scheme '",
              options.ogb_split, "' (--split) applies to OGB raw directories (raw/edge.csv.gz, "
              "split/<scheme>/); this is not one");
  ReadOptions ro;
  ro.build.symmetrize = options.symmetrize;
  ro.build.duplicates = DuplicatePolicy::drop;
  ro.keep_values = false;
  ro.edge_index_rows = options.edge_index_rows;
  Dataset d;
  if (is_dir(spec)) {
    d = read_dataset_dir(spec, ro);
    read_mask_splits(spec, d);
    const bool has_labels = d.y.defined() && d.train_idx.defined() && d.val_idx.defined() &&
                            d.test_idx.defined();
    if (d.x.defined() && has_labels) return d;
    SPGNN_CHECK(!d.x.defined() && !d.y.defined(), FormatError, spec,
                ": the dataset has features or labels but not all of x.npy, y.npy and the "
                "train/val/test splits (*_idx.npy or *_mask.npy)");
  } else {
    d.graph = read_graph(spec, ro);
  }
  Dataset s = synthetic_dataset(std::move(d.graph), options.synthetic_features,
                                options.synthetic_classes, options.seed);
  s.name = spec.substr(spec.find_last_of('/') == std::string::npos ? 0 : spec.find_last_of('/') + 1) +
           " (synthetic features)";
  return s;
}

}  // namespace spgnn::nn
