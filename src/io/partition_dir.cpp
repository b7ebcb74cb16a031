// Partition directories (include/spgnn/partition.hpp; layout in docs/ARCHITECTURE.md,
// "Partitions"): written whole under a temporary name and renamed, read back one part at a time
// with every file checked against meta.json.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <type_traits>

#include "spgnn/error.hpp"
#include "spgnn/io.hpp"
#include "spgnn/partition.hpp"

namespace spgnn {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kFormat = "spgnn-partition";
constexpr int kVersion = 1;

std::string part_dir(const std::string& dir, int64_t p) {
  return (fs::path(dir) / ("part-" + std::to_string(p))).string();
}

// Rows `ids` of a [n, ...] host tensor, in that order.
Tensor gather_rows(const Tensor& t, const std::vector<int64_t>& ids) {
  std::vector<int64_t> shape = t.shape();
  shape[0] = static_cast<int64_t>(ids.size());
  Tensor out = Tensor::empty(shape, t.dtype());
  const size_t row_bytes = t.dim(0) > 0 ? t.nbytes() / static_cast<size_t>(t.dim(0)) : 0;
  if (row_bytes == 0) return out;  // [n, 0] features: no storage, nothing to copy
  const char* src = static_cast<const char*>(t.raw());
  char* dst = static_cast<char*>(out.raw());
  for (size_t i = 0; i < ids.size(); ++i)
    std::memcpy(dst + i * row_bytes, src + static_cast<size_t>(ids[i]) * row_bytes, row_bytes);
  return out;
}

// The vertices of a split (global ids) owned by part p, as p's local ids, in the split's order.
Tensor local_split(const Tensor& idx, const std::vector<int32_t>& owner,
                   const std::vector<int64_t>& local, int64_t p) {
  std::vector<int64_t> out;
  const Tensor i64 = idx.dtype() == DType::i64 ? idx : idx.astype(DType::i64);
  const int64_t* v = i64.data<int64_t>();
  for (int64_t k = 0; k < i64.numel(); ++k)
    if (owner[static_cast<size_t>(v[k])] == p) out.push_back(local[static_cast<size_t>(v[k])]);
  return Tensor::from_vector(out);
}

json summary_json(const PartitionMeta& m, const std::vector<LocalPart>& parts) {
  json j = {{"format", kFormat},
            {"version", kVersion},
            {"parts", m.parts},
            {"method", m.method},
            {"note", m.note},
            {"source", m.source},
            {"num_nodes", m.summary.num_nodes},
            {"num_edges", m.summary.num_edges},
            {"edge_cut", m.summary.edge_cut},
            {"halo_volume", m.summary.halo_volume},
            {"feature_dim", m.feature_dim},
            {"num_classes", m.num_classes}};
  json per = json::array();
  for (const LocalPart& lp : parts)
    per.push_back({{"owned", lp.n_owned},
                   {"halo", lp.n_halo()},
                   {"edges", lp.graph.nnz()},
                   {"halo_by_owner", lp.halo_offsets},
                   {"send_by_peer", lp.send_offsets}});
  j["part"] = per;
  return j;
}

// meta.json parses and names the partition format (a cheap test; reading checks the rest).
bool looks_like_partition_dir(const fs::path& dir) {
  const fs::path meta = dir / "meta.json";
  if (!fs::is_regular_file(meta)) return false;
  try {
    const json j = json::parse(read_file_decompressed(meta.string()));
    return j.is_object() && j.contains("format") && j.at("format") == kFormat;
  } catch (const std::exception&) {
    return false;
  }
}

std::string unique_suffix() {
  std::random_device rd;
  return std::to_string(::getpid()) + "-" + std::to_string(rd());
}

}  // namespace

void check_partition_output(const std::string& dir, const std::string& source, bool overwrite) {
  const fs::path target(dir);
  SPGNN_CHECK(overwrite || !fs::exists(target), InvalidArgument, dir,
              ": already exists (remove it, or overwrite it with --force)");
  if (fs::exists(target)) {
    // Overwriting removes the old tree whole, so it must be an earlier partition and nothing
    // else: `-o . --force`, or `-o` naming the input graph file, would otherwise delete it.
    SPGNN_CHECK(fs::is_directory(target) && looks_like_partition_dir(target), InvalidArgument,
                dir, ": exists and is not a partition directory written by `spgnn partition` "
                "(no meta.json of format \"", kFormat, "\"); refusing to replace it");
    if (!source.empty() && fs::exists(source)) {
      const fs::path src = fs::weakly_canonical(source), out = fs::weakly_canonical(target);
      const auto mismatch = std::mismatch(out.begin(), out.end(), src.begin(), src.end());
      SPGNN_CHECK(mismatch.first != out.end(), InvalidArgument, dir,
                  ": the input ", source, " lies inside it; write the partition elsewhere");
    }
  }
}

void write_partition_dir(const Dataset& d, const std::vector<int32_t>& owner,
                         const std::vector<LocalPart>& parts, const PartitionMeta& meta,
                         const std::string& dir, bool overwrite) {
  const int64_t n = d.graph.n_rows;
  SPGNN_CHECK(static_cast<int64_t>(owner.size()) == n, InvalidArgument,
              "write_partition_dir: ", owner.size(), " owners for ", n, " vertices");
  SPGNN_CHECK(static_cast<int64_t>(parts.size()) == meta.parts, InvalidArgument,
              "write_partition_dir: ", parts.size(), " parts but meta says ", meta.parts);
  check_partition_output(dir, meta.source, overwrite);
  const fs::path target(dir);
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  fs::create_directories(parent);
  const fs::path tmp = parent / ("." + target.filename().string() + ".tmp-" + unique_suffix());
  try {
    fs::create_directories(tmp);
    std::vector<int64_t> local(static_cast<size_t>(n), -1);
    for (const LocalPart& lp : parts)
      for (int64_t i = 0; i < lp.n_owned; ++i)
        local[static_cast<size_t>(lp.global_ids[static_cast<size_t>(i)])] = i;
    write_npy(Tensor::from_vector(owner), (tmp / "owner.npy").string());
    write_npy(Tensor::from_vector(local), (tmp / "local_id.npy").string());
    for (const LocalPart& lp : parts) {
      const std::string pd = part_dir(tmp.string(), lp.part);
      fs::create_directories(pd);
      write_spg(lp.graph, pd + "/graph.spg");
      write_npy(Tensor::from_vector(lp.global_ids), pd + "/global_ids.npy");
      write_npy(Tensor::from_vector(lp.halo_offsets), pd + "/halo_offsets.npy");
      write_npy(Tensor::from_vector(lp.send_offsets), pd + "/send_offsets.npy");
      write_npy(Tensor::from_vector(lp.send_ids), pd + "/send_ids.npy");
      const std::vector<int64_t> owned(lp.global_ids.begin(), lp.global_ids.begin() + lp.n_owned);
      if (d.x.defined()) write_npy(gather_rows(d.x, owned), pd + "/x.npy");
      if (d.y.defined()) write_npy(gather_rows(d.y, owned), pd + "/y.npy");
      const std::pair<const Tensor*, const char*> splits[] = {
          {&d.train_idx, "train_idx"}, {&d.val_idx, "val_idx"}, {&d.test_idx, "test_idx"}};
      for (auto [t, name] : splits)
        if (t->defined())
          write_npy(local_split(*t, owner, local, lp.part), pd + "/" + name + ".npy");
    }
    const std::string text = summary_json(meta, parts).dump(1) + "\n";
    write_file_atomic((tmp / "meta.json").string(), text.data(), text.size());
    if (fs::exists(target)) {  // overwrite: the old directory goes only once the new one is whole
      const fs::path old = parent / ("." + target.filename().string() + ".old-" + unique_suffix());
      fs::rename(target, old);
      fs::rename(tmp, target);
      fs::remove_all(old);
    } else {
      fs::rename(tmp, target);
    }
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
}

namespace {

json read_json(const std::string& path) {
  SPGNN_CHECK(fs::exists(path), FormatError, path,
              ": missing (not a partition directory written by `spgnn partition`?)");
  try {
    return json::parse(read_file_decompressed(path));
  } catch (const json::exception& e) {
    throw FormatError(path + ": not valid JSON: " + e.what());
  }
}

// A JSON value for a message, shortened.
std::string short_dump(const json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 60) + "...";
  return s;
}

// `v` (the value of `key`) as T. Integers must be JSON integers within T's range: nlohmann's
// own conversion would truncate 2^32 + 1 to 1 and make 1e300 undefined behaviour.
template <class T>
T convert(const json& v, const char* key, const std::string& path) {
  if constexpr (std::is_integral_v<T>) {
    static_assert(std::is_signed_v<T>, "meta.json integers are read as signed types");
    using L = std::numeric_limits<T>;
    const bool ok = v.is_number_unsigned()  ? v.get<uint64_t>() <= static_cast<uint64_t>(L::max())
                    : v.is_number_integer() ? v.get<int64_t>() >= L::min() &&
                                                  v.get<int64_t>() <= L::max()
                                            : false;
    SPGNN_CHECK(ok, FormatError, path, ": \"", key, "\" is ", short_dump(v),
                ", expected an integer in [", L::min(), ", ", L::max(), "]");
    return static_cast<T>(v.get<int64_t>());
  } else {
    try {
      return v.get<T>();
    } catch (const json::exception&) {
      throw FormatError(path + ": \"" + key + "\" is " + short_dump(v) +
                        ", which has the wrong type");
    }
  }
}

template <class T>
T field(const json& j, const char* key, const std::string& path) {
  SPGNN_CHECK(j.is_object() && j.contains(key), FormatError, path, ": no \"", key, "\"");
  return convert<T>(j.at(key), key, path);
}

// Like field, but `fallback` when the key is absent (never when it has the wrong type).
template <class T>
T optional_field(const json& j, const char* key, T fallback, const std::string& path) {
  if (!j.is_object() || !j.contains(key)) return fallback;
  return convert<T>(j.at(key), key, path);
}

std::vector<int64_t> read_i64(const std::string& path, int64_t expect, const char* what) {
  SPGNN_CHECK(fs::exists(path), FormatError, path, ": missing (", what, ")");
  Tensor t = read_npy(path);
  SPGNN_CHECK(t.ndim() == 1 && (t.dtype() == DType::i64 || t.dtype() == DType::i32), FormatError,
              path, ": expected a 1-D int64 array (", what, "), got ", dtype_name(t.dtype()), " ",
              t.shape_str());
  if (t.dtype() != DType::i64) t = t.astype(DType::i64);
  SPGNN_CHECK(expect < 0 || t.numel() == expect, FormatError, path, ": ", t.numel(),
              " entries, expected ", expect, " (", what, ", from meta.json)");
  return t.to_vector<int64_t>();
}

void check_offsets(const std::vector<int64_t>& off, int64_t total, const std::string& path) {
  for (size_t i = 0; i + 1 < off.size(); ++i)
    SPGNN_CHECK(off[i] <= off[i + 1], FormatError, path, ": offsets decrease at ", i);
  SPGNN_CHECK(!off.empty() && off.front() == 0 && off.back() == total, FormatError, path,
              ": offsets must run from 0 to ", total);
}

PartitionMeta meta_from_json(const json& j, const std::string& path) {
  SPGNN_CHECK(j.is_object() && j.contains("format") && j.at("format") == kFormat, FormatError,
              path, ": not a spgnn partition (\"format\" should be \"", kFormat, "\")");
  const int64_t v = field<int64_t>(j, "version", path);
  SPGNN_CHECK(v == kVersion, FormatError, path, ": version ", v, ", this spgnn reads ", kVersion);
  PartitionMeta m;
  m.parts = field<int64_t>(j, "parts", path);
  m.method = field<std::string>(j, "method", path);
  m.note = optional_field<std::string>(j, "note", "", path);
  m.source = optional_field<std::string>(j, "source", "", path);
  m.summary.num_nodes = field<int64_t>(j, "num_nodes", path);
  m.summary.num_edges = field<int64_t>(j, "num_edges", path);
  m.summary.edge_cut = field<int64_t>(j, "edge_cut", path);
  m.summary.halo_volume = field<int64_t>(j, "halo_volume", path);
  m.feature_dim = optional_field<int64_t>(j, "feature_dim", 0, path);
  m.num_classes = optional_field<int64_t>(j, "num_classes", 0, path);
  SPGNN_CHECK(m.parts >= 1 && m.summary.num_nodes >= 0, FormatError, path,
              ": parts must be >= 1 and num_nodes >= 0");
  const json per = optional_field<json>(j, "part", json::array(), path);
  SPGNN_CHECK(per.is_array() && static_cast<int64_t>(per.size()) == m.parts, FormatError, path,
              ": \"part\" lists ", per.is_array() ? per.size() : 0, " parts, \"parts\" says ",
              m.parts);
  return m;
}

}  // namespace

PartitionMeta read_partition_meta(const std::string& dir) {
  SPGNN_CHECK(fs::is_directory(dir), FormatError, dir, ": not a directory");
  const std::string path = (fs::path(dir) / "meta.json").string();
  return meta_from_json(read_json(path), path);
}

PartitionPart read_partition_part(const std::string& dir, int64_t p) {
  PartitionPart r;
  SPGNN_CHECK(fs::is_directory(dir), FormatError, dir, ": not a directory");
  const std::string meta_path = (fs::path(dir) / "meta.json").string();
  // One read of meta.json: the summary and this part's entry come from the same text.
  const json meta = read_json(meta_path);
  r.meta = meta_from_json(meta, meta_path);
  SPGNN_CHECK(p >= 0 && p < r.meta.parts, InvalidArgument, dir, ": part ", p,
              " requested, the partition has parts 0..", r.meta.parts - 1,
              " (launched with a different number of ranks?)");
  const json& info = meta.at("part").at(static_cast<size_t>(p));
  const int64_t owned = field<int64_t>(info, "owned", meta_path);
  const int64_t halo = field<int64_t>(info, "halo", meta_path);
  const int64_t edges = field<int64_t>(info, "edges", meta_path);
  SPGNN_CHECK(owned >= 0 && halo >= 0 && edges >= 0 && halo <= INT64_MAX - owned, FormatError,
              meta_path, ": part ", p, " has owned ", owned, ", halo ", halo, ", edges ", edges,
              "; expected non-negative counts");
  const std::string pd = part_dir(dir, p);
  SPGNN_CHECK(fs::is_directory(pd), FormatError, pd, ": missing (part ", p, " of ", r.meta.parts,
              ")");
  LocalPart& lp = r.local;
  lp.part = static_cast<int32_t>(p);
  lp.n_owned = owned;
  const std::string gpath = pd + "/graph.spg";
  SPGNN_CHECK(fs::exists(gpath), FormatError, gpath, ": missing (the part's graph)");
  lp.graph = read_spg(gpath);
  SPGNN_CHECK(lp.graph.n_rows == owned && lp.graph.n_cols == owned + halo &&
                  lp.graph.nnz() == edges,
              FormatError, gpath, ": ", lp.graph.n_rows, " x ", lp.graph.n_cols, " with ",
              lp.graph.nnz(), " edges, meta.json says ", owned, " x ", owned + halo, " with ",
              edges);
  lp.global_ids = read_i64(pd + "/global_ids.npy", owned + halo, "local -> global ids");
  for (int64_t g : lp.global_ids)
    SPGNN_CHECK(g >= 0 && g < r.meta.summary.num_nodes, FormatError, pd,
                "/global_ids.npy: id ", g, " outside 0..", r.meta.summary.num_nodes - 1);
  lp.halo_offsets = read_i64(pd + "/halo_offsets.npy", r.meta.parts + 1, "halo offsets");
  check_offsets(lp.halo_offsets, halo, pd + "/halo_offsets.npy");
  SPGNN_CHECK(lp.halo_offsets[static_cast<size_t>(p) + 1] == lp.halo_offsets[static_cast<size_t>(p)],
              FormatError, pd, "/halo_offsets.npy: part ", p, " lists a halo of its own vertices");
  lp.send_offsets = read_i64(pd + "/send_offsets.npy", r.meta.parts + 1, "send offsets");
  lp.send_ids = read_i64(pd + "/send_ids.npy", -1, "rows sent to peers");
  check_offsets(lp.send_offsets, static_cast<int64_t>(lp.send_ids.size()), pd + "/send_offsets.npy");
  for (int64_t s : lp.send_ids)
    SPGNN_CHECK(s >= 0 && s < owned, FormatError, pd, "/send_ids.npy: local id ", s,
                " is not an owned row (0..", owned - 1, ")");
  auto read_optional = [&](const char* name, Tensor& out, bool rows) {
    const std::string f = pd + "/" + name + ".npy";
    if (!fs::exists(f)) return;
    out = read_npy(f);
    if (rows)
      SPGNN_CHECK(out.ndim() >= 1 && out.dim(0) == owned, FormatError, f, ": ", out.shape_str(),
                  ", expected ", owned, " rows (the part's owned vertices)");
    else
      for (int64_t v : read_i64(f, -1, name))
        SPGNN_CHECK(v >= 0 && v < owned, FormatError, f, ": local id ", v, " is not owned");
  };
  read_optional("x", r.x, true);
  read_optional("y", r.y, true);
  read_optional("train_idx", r.train_idx, false);
  read_optional("val_idx", r.val_idx, false);
  read_optional("test_idx", r.test_idx, false);
  return r;
}

}  // namespace spgnn
