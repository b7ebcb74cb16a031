// The autotuner's files, keys and graph fingerprints (see cache.hpp and include/spgnn/tune.hpp).
#include "tune/cache.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>

#include "dispatch/problem.hpp"
#include "spgnn/io.hpp"
#include "tune/device_info.hpp"

#ifndef SPGNN_VERSION
#error "SPGNN_VERSION must be defined by the build (CMakeLists.txt passes PROJECT_VERSION)"
#endif

namespace spgnn {

namespace fs = std::filesystem;
using nlohmann::json;

const char* spgnn_version() { return SPGNN_VERSION; }

// ---- paths ---------------------------------------------------------------------------------------

namespace {
std::mutex& path_mutex() {
  static std::mutex m;
  return m;
}
std::string& path_override() {
  static std::string p;
  return p;
}
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}
}  // namespace

std::string tuning_cache_path() {
  {
    std::lock_guard<std::mutex> lock(path_mutex());
    if (!path_override().empty()) return tune::resolve_cache_file(path_override());
  }
  if (!env("SPGNN_CACHE_DIR").empty()) return (fs::path(env("SPGNN_CACHE_DIR")) / "tuning.json").string();
  if (!env("XDG_CACHE_HOME").empty())
    return (fs::path(env("XDG_CACHE_HOME")) / "spgnn" / "tuning.json").string();
  if (!env("HOME").empty()) return (fs::path(env("HOME")) / ".cache" / "spgnn" / "tuning.json").string();
  return (fs::temp_directory_path() / "spgnn-cache" / "tuning.json").string();
}

void set_tuning_cache_path(const std::string& path) {
  std::lock_guard<std::mutex> lock(path_mutex());
  path_override() = path;
}

namespace tune {

std::string resolve_cache_file(const std::string& path) {
  if (path.empty()) return tuning_cache_path();
  std::error_code ec;
  if (path.back() == '/' || fs::is_directory(path, ec)) return (fs::path(path) / "tuning.json").string();
  return path;
}

std::string sibling_file(const std::string& cache_file, const std::string& name) {
  return (fs::path(cache_file).parent_path() / name).string();
}

// ---- documents -----------------------------------------------------------------------------------

void warn_ignored(const std::string& file, const std::string& why) {
  static std::mutex m;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(m);
  if (!warned.insert(file).second) return;
  std::fprintf(stderr, "spgnn: warning: ignoring %s: %s (it will be overwritten by the next store)\n",
               file.c_str(), why.c_str());
}

json new_document(const std::string& schema) {
  return json{{"schema", schema}, {"schema_version", 1}, {"spgnn_version", spgnn_version()}};
}

std::optional<json> read_document(const std::string& file, const std::string& schema) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::nullopt;
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    warn_ignored(file, "cannot be opened");
    return std::nullopt;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  json doc = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    warn_ignored(file, "not valid JSON");
    return std::nullopt;
  }
  if (!doc.is_object() || !doc.contains("schema") || doc["schema"] != schema) {
    warn_ignored(file, "not a " + schema + " document");
    return std::nullopt;
  }
  if (!doc.contains("schema_version") || doc["schema_version"] != 1) {
    warn_ignored(file, "unknown schema version");
    return std::nullopt;
  }
  if (!doc.contains("spgnn_version") || doc["spgnn_version"] != spgnn_version()) {
    const std::string v = doc.contains("spgnn_version") ? doc["spgnn_version"].dump() : "?";
    warn_ignored(file, "written by spgnn " + v + ", this is " + spgnn_version());
    return std::nullopt;
  }
  return doc;
}

void write_document(const std::string& file, const json& doc, int indent,
                    const std::string& array_key) {
  const fs::path dir = fs::path(file).parent_path();
  std::error_code ec;
  if (!dir.empty()) fs::create_directories(dir, ec);
  SPGNN_CHECK(!ec, Error, "cannot create the directory of '", file, "': ", ec.message());
  std::string text;
  if (indent < 0 && !array_key.empty() && doc.contains(array_key)) {
    // A long list stays diff- and grep-friendly with one element per line.
    json head = doc;
    head.erase(array_key);
    text = head.dump();
    text.pop_back();  // the closing brace
    text += std::string(head.empty() ? "" : ",") + "\n\"" + array_key + "\": [";
    bool first = true;
    for (const auto& e : doc[array_key]) {
      text += (first ? "\n" : ",\n") + e.dump();
      first = false;
    }
    text += "\n]}\n";
  } else {
    text = doc.dump(indent) + "\n";
  }
  write_file_atomic(file, text.data(), text.size());
}

// ---- fingerprint and keys ------------------------------------------------------------------------

namespace {
// A word-at-a-time multiply-rotate hash with a final avalanche (the xxhash/murmur family's
// structure, our own constants): several GB/s, so hashing rowptr in full costs little next to
// the tuning it guards.
struct Hasher {
  uint64_t h = 0x243F6A8885A308D3ULL;
  void add(uint64_t w) {
    h ^= w * 0x9E3779B97F4A7C15ULL;
    h = ((h << 27) | (h >> 37)) * 0xC2B2AE3D27D4EB4FULL + 0x165667B19E3779F9ULL;
  }
  uint64_t digest() const {
    uint64_t z = h;
    z ^= z >> 33;
    z *= 0xFF51AFD7ED558CCDULL;
    z ^= z >> 33;
    z *= 0xC4CEB9FE1A85EC53ULL;
    return z ^ (z >> 33);
  }
};

template <class I>
void hash_rowptr(const Tensor& rowptr, Hasher& h) {
  const std::vector<I> rp = rowptr.to_vector<I>();
  for (I v : rp) h.add(static_cast<uint64_t>(static_cast<int64_t>(v)));
}

constexpr int64_t kColSample = 65536;

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}
}  // namespace

}  // namespace tune

std::string GraphFingerprint::str() const {
  return "n=" + std::to_string(n_rows) + ",m=" + std::to_string(n_cols) + ",nnz=" +
         std::to_string(nnz) + "," + index_dtype + ",h=" + tune::hex64(hash);
}

GraphFingerprint graph_fingerprint(const Graph& g) {
  detail::check_graph_arrays(g, "graph_fingerprint");
  // Keyed like the degree statistics (registry.cpp): copies of a Graph share the cache even
  // after their arrays are replaced.
  const std::string key = std::string("tune.fingerprint@") + dtype_name(g.index_dtype()) + ":" +
                          std::to_string(reinterpret_cast<uintptr_t>(g.rowptr.raw())) + ":" +
                          std::to_string(g.n_rows) + ":" + std::to_string(g.nnz());
  {
    std::lock_guard<std::mutex> lock(g.cache->mutex);
    auto it = g.cache->items.find(key);
    if (it != g.cache->items.end() && it->second)
      return *std::static_pointer_cast<const GraphFingerprint>(it->second);
  }
  auto fp = std::make_shared<GraphFingerprint>();
  fp->n_rows = g.n_rows;
  fp->n_cols = g.n_cols;
  fp->nnz = g.nnz();
  fp->index_dtype = dtype_name(g.index_dtype());
  tune::Hasher h;
  h.add(uint64_t(g.n_rows));
  h.add(uint64_t(g.n_cols));
  h.add(uint64_t(g.nnz()));
  if (g.index_dtype() == DType::i64) tune::hash_rowptr<int64_t>(g.rowptr, h);
  else tune::hash_rowptr<int32_t>(g.rowptr, h);
  const int64_t nnz = g.nnz();
  if (nnz > 0) {
    const int64_t stride = (nnz + tune::kColSample - 1) / tune::kColSample;
    const int64_t count = (nnz + stride - 1) / stride;
    h.add(uint64_t(stride));
    for (int64_t c : tune::strided_sample(g.col, stride, count)) h.add(uint64_t(c));
  }
  fp->hash = h.digest();
  std::lock_guard<std::mutex> lock(g.cache->mutex);
  g.cache->items[key] = fp;
  return *fp;
}

std::string tuning_device_name(Device d) { return tune::device_name(d); }

namespace tune {

std::string KeyParts::str() const {
  return op + "|" + sub_op + "|F=" + std::to_string(F) + "|" + dtype + "|" + graph.str() + "|" +
         device + "|v" + spgnn_version();
}

std::string spmm_sub_op(SpmmOp op, Reduce reduce, int64_t F, bool wide_e) {
  std::string s = std::string(name(op)) + "/" + name(reduce);
  if (op != SpmmOp::copy_u) {
    // copy_e's edge operand is F wide by definition; width 1 and F coincide at F = 1.
    const bool wide = F > 1 && (op == SpmmOp::copy_e || wide_e);
    s += wide ? "/e=F" : "/e=1";
  }
  return s;
}

std::string sddmm_sub_op(SddmmOp op, Target lhs, Target rhs) {
  // dot, add and mul are symmetric in their operands, and the kernels' traffic depends only on
  // which side reads per destination row: (u, v) and (v, u) are one problem and share an entry
  // (spgnn bench defaults to (v, u), resolve_sddmm_schedule to (u, v)).
  if ((op == SddmmOp::dot || op == SddmmOp::add || op == SddmmOp::mul) && int(lhs) > int(rhs))
    std::swap(lhs, rhs);
  if (op == SddmmOp::copy_lhs) rhs = lhs;
  if (op == SddmmOp::copy_rhs) lhs = rhs;
  return std::string(name(op)) + "(" + name(lhs) + "," + name(rhs) + ")";
}

// The features' dtype in keys: "f32" (as before half problems were tuned), "f16", "bf16".
std::string key_dtype(DType t) {
  return t == DType::f16 ? "f16" : t == DType::bf16 ? "bf16" : "f32";
}

KeyParts spmm_key_parts(const Graph& g, SpmmOp op, Reduce reduce, int64_t F, bool wide_e,
                        DType dtype) {
  KeyParts k;
  k.op = "spmm";
  k.sub_op = spmm_sub_op(op, reduce, F, wide_e);
  k.F = F;
  k.dtype = key_dtype(dtype) + "/" + dtype_name(g.index_dtype());
  k.graph = graph_fingerprint(g);
  k.device = device_name(g.device());
  return k;
}

KeyParts sddmm_key_parts(const Graph& g, SddmmOp op, Target lhs, Target rhs, int64_t F,
                         DType dtype) {
  KeyParts k;
  k.op = "sddmm";
  k.sub_op = sddmm_sub_op(op, lhs, rhs);
  k.F = F;
  k.dtype = key_dtype(dtype) + "/" + dtype_name(g.index_dtype());
  k.graph = graph_fingerprint(g);
  k.device = device_name(g.device());
  return k;
}

KeyParts cbsr_key_parts(const Graph& g, OpKind op, int64_t k, int64_t F, bool weighted) {
  KeyParts kp;
  kp.op = op_kind_name(op);
  kp.sub_op = "k=" + std::to_string(k) + (weighted ? "/e" : "/1");
  kp.F = F;
  kp.dtype = std::string("f32/") + dtype_name(g.index_dtype());
  kp.graph = graph_fingerprint(g);
  kp.device = device_name(g.device());
  return kp;
}

// ---- tuning.json ---------------------------------------------------------------------------------

namespace {
constexpr const char* kCacheSchema = "spgnn-tuning-cache";
constexpr const char* kMeasurementSchema = "spgnn-measurements";
constexpr const char* kModelSchema = "spgnn-cost-model";

struct CacheFile {
  std::mutex mutex;
  bool loaded = false;
  std::map<std::string, TuningCacheEntry> entries;
};

CacheFile& cache_state(const std::string& file) {
  static std::mutex m;
  static std::map<std::string, std::unique_ptr<CacheFile>> files;
  std::lock_guard<std::mutex> lock(m);
  auto& slot = files[file];
  if (!slot) slot = std::make_unique<CacheFile>();
  return *slot;
}

json fingerprint_to_json(const GraphFingerprint& f) {
  return {{"n_rows", f.n_rows}, {"n_cols", f.n_cols}, {"nnz", f.nnz},
          {"index_dtype", f.index_dtype}, {"hash", hex64(f.hash)}};
}

GraphFingerprint fingerprint_from_json(const json& j) {
  GraphFingerprint f;
  f.n_rows = j.at("n_rows").get<int64_t>();
  f.n_cols = j.at("n_cols").get<int64_t>();
  f.nnz = j.at("nnz").get<int64_t>();
  f.index_dtype = j.at("index_dtype").get<std::string>();
  const std::string h = j.at("hash").get<std::string>();
  char* end = nullptr;
  f.hash = std::strtoull(h.c_str(), &end, 16);
  if (h.size() != 16 || !end || *end != '\0')
    throw InvalidArgument("graph hash must be 16 hex digits");
  return f;
}

json entry_to_json(const TuningCacheEntry& e) {
  return {{"op", e.op},
          {"sub_op", e.sub_op},
          {"F", e.F},
          {"device", e.device},
          {"graph", fingerprint_to_json(e.graph)},
          {"schedule", schedule_to_json(e.schedule)},
          {"schedule_text", e.schedule.str()},
          {"ms", e.ms},
          {"mode", e.mode},
          {"space_size", e.space_size},
          {"measured", e.measured},
          {"tune_seconds", e.tune_seconds},
          {"version", e.version}};
}

TuningCacheEntry entry_from_json(const std::string& key, const json& j) {
  TuningCacheEntry e;
  e.key = key;
  e.op = j.at("op").get<std::string>();
  e.sub_op = j.at("sub_op").get<std::string>();
  e.F = j.at("F").get<int64_t>();
  e.device = j.at("device").get<std::string>();
  e.graph = fingerprint_from_json(j.at("graph"));
  e.schedule = schedule_from_json(j.at("schedule"));
  e.ms = j.at("ms").get<double>();
  e.mode = j.value("mode", std::string());
  e.space_size = j.value("space_size", size_t{0});
  e.measured = j.value("measured", size_t{0});
  e.tune_seconds = j.value("tune_seconds", 0.0);
  e.version = j.at("version").get<std::string>();
  return e;
}

// Entries of a tuning.json on disk; {} (with one warning) when it is unusable.
std::map<std::string, TuningCacheEntry> read_entries(const std::string& file) {
  std::map<std::string, TuningCacheEntry> out;
  auto doc = read_document(file, kCacheSchema);
  if (!doc) return out;
  try {
    for (const auto& [key, value] : doc->at("entries").items()) out[key] = entry_from_json(key, value);
  } catch (const std::exception& ex) {
    warn_ignored(file, std::string("wrong entry types: ") + ex.what());
    out.clear();
  }
  return out;
}

void write_entries(const std::string& file, const std::map<std::string, TuningCacheEntry>& es) {
  json doc = new_document(kCacheSchema);
  json entries = json::object();
  for (const auto& [key, e] : es) entries[key] = entry_to_json(e);
  doc["entries"] = entries;
  write_document(file, doc, 2);
}

void ensure_loaded(CacheFile& c, const std::string& file) {
  if (c.loaded) return;
  c.entries = read_entries(file);
  c.loaded = true;
}
}  // namespace

json schedule_to_json(const Schedule& s) {
  json params = json::object();
  for (const auto& [k, v] : s.params) params[k] = v;
  return {{"strategy", s.strategy}, {"params", params}};
}

Schedule schedule_from_json(const json& j) {
  Schedule s;
  s.strategy = j.at("strategy").get<std::string>();
  for (const auto& [k, v] : j.at("params").items()) s.params[k] = v.get<int64_t>();
  return s;
}

bool cache_has_entries(const std::string& file) {
  CacheFile& c = cache_state(file);
  std::lock_guard<std::mutex> lock(c.mutex);
  ensure_loaded(c, file);
  return !c.entries.empty();
}

}  // namespace tune

std::optional<TuningCacheEntry> tuning_cache_lookup(const std::string& key, const std::string& path) {
  const std::string file = tune::resolve_cache_file(path);
  tune::CacheFile& c = tune::cache_state(file);
  std::lock_guard<std::mutex> lock(c.mutex);
  tune::ensure_loaded(c, file);
  auto it = c.entries.find(key);
  if (it == c.entries.end()) return std::nullopt;
  return it->second;
}

std::vector<TuningCacheEntry> tuning_cache_entries(const std::string& path) {
  const std::string file = tune::resolve_cache_file(path);
  tune::CacheFile& c = tune::cache_state(file);
  std::lock_guard<std::mutex> lock(c.mutex);
  tune::ensure_loaded(c, file);
  std::vector<TuningCacheEntry> out;
  for (const auto& kv : c.entries) out.push_back(kv.second);
  return out;
}

void tuning_cache_store(const TuningCacheEntry& entry, const std::string& path) {
  SPGNN_CHECK(!entry.key.empty(), InvalidArgument, "tuning_cache_store: the entry has no key");
  const std::string file = tune::resolve_cache_file(path);
  tune::CacheFile& c = tune::cache_state(file);
  std::lock_guard<std::mutex> lock(c.mutex);
  // Merge with what is on disk now: another process may have stored entries since we loaded.
  std::map<std::string, TuningCacheEntry> merged = tune::read_entries(file);
  if (c.loaded)
    for (const auto& kv : c.entries) merged.emplace(kv.first, kv.second);
  TuningCacheEntry e = entry;
  if (e.version.empty()) e.version = spgnn_version();
  merged[e.key] = e;
  tune::write_entries(file, merged);
  c.entries = std::move(merged);
  c.loaded = true;
}

void tuning_cache_clear(const std::string& path) {
  const std::string file = tune::resolve_cache_file(path);
  tune::CacheFile& c = tune::cache_state(file);
  std::lock_guard<std::mutex> lock(c.mutex);
  std::error_code ec;
  fs::remove(file, ec);
  SPGNN_CHECK(!ec, Error, "cannot remove the tuning cache '", file, "': ", ec.message());
  c.entries.clear();
  c.loaded = true;
}

namespace tune {

// ---- measurements.json ---------------------------------------------------------------------------

namespace {
json measurement_to_json(const Measurement& m, const std::string& sub_op) {
  const ProblemStats& p = m.problem;
  return {{"device", m.device_name}, {"op", op_kind_name(p.op)}, {"sub_op", sub_op},
          {"n_rows", p.n_rows}, {"n_cols", p.n_cols}, {"nnz", p.nnz}, {"F", p.F},
          {"avg_deg", p.avg_deg}, {"max_deg", p.max_deg}, {"deg_cv", p.deg_cv},
          {"empty_rows", p.empty_rows}, {"gpu", p.gpu},
          {"schedule", schedule_to_json(m.schedule)}, {"ms", m.ms}};
}

Measurement measurement_from_json(const json& j) {
  Measurement m;
  m.device_name = j.at("device").get<std::string>();
  const std::string op = j.at("op").get<std::string>();
  if (op != "spmm" && op != "sddmm") throw InvalidArgument("op must be spmm or sddmm");
  m.problem.op = op == "spmm" ? OpKind::spmm : OpKind::sddmm;
  m.problem.n_rows = j.at("n_rows").get<int64_t>();
  m.problem.n_cols = j.at("n_cols").get<int64_t>();
  m.problem.nnz = j.at("nnz").get<int64_t>();
  m.problem.F = j.at("F").get<int64_t>();
  m.problem.avg_deg = j.at("avg_deg").get<double>();
  m.problem.max_deg = j.at("max_deg").get<double>();
  m.problem.deg_cv = j.at("deg_cv").get<double>();
  m.problem.empty_rows = j.at("empty_rows").get<int64_t>();
  m.problem.gpu = j.at("gpu").get<bool>();
  m.schedule = schedule_from_json(j.at("schedule"));
  m.ms = j.at("ms").get<double>();
  return m;
}

json read_measurement_array(const std::string& file) {
  auto doc = read_document(file, kMeasurementSchema);
  if (!doc) return json::array();
  if (!doc->contains("measurements") || !(*doc)["measurements"].is_array()) {
    warn_ignored(file, "'measurements' is not an array");
    return json::array();
  }
  return (*doc)["measurements"];
}

std::mutex& store_mutex() {
  static std::mutex m;
  return m;
}
}  // namespace

void append_measurements(const std::string& cache_file, const std::vector<Measurement>& ms,
                         const std::string& sub_op) {
  if (ms.empty()) return;
  const std::string file = sibling_file(cache_file, "measurements.json");
  std::lock_guard<std::mutex> lock(store_mutex());
  json arr = read_measurement_array(file);
  for (const auto& m : ms) arr.push_back(measurement_to_json(m, sub_op));
  if (arr.size() > kMaxMeasurements) arr.erase(arr.begin(), arr.begin() + long(arr.size() - kMaxMeasurements));
  json doc = new_document(kMeasurementSchema);
  doc["measurements"] = std::move(arr);
  write_document(file, doc, -1, "measurements");
}

std::vector<Measurement> load_measurements(const std::string& cache_file) {
  const std::string file = sibling_file(cache_file, "measurements.json");
  std::lock_guard<std::mutex> lock(store_mutex());
  std::vector<Measurement> out;
  const json arr = read_measurement_array(file);
  try {
    for (const auto& j : arr) out.push_back(measurement_from_json(j));
  } catch (const std::exception& ex) {
    warn_ignored(file, std::string("wrong measurement types: ") + ex.what());
    out.clear();
  }
  return out;
}

// ---- cost_model.json -----------------------------------------------------------------------------

std::vector<StoredModel> load_cost_models(const std::string& cache_file) {
  const std::string file = sibling_file(cache_file, "cost_model.json");
  std::vector<StoredModel> out;
  auto doc = read_document(file, kModelSchema);
  if (!doc) return out;
  try {
    for (const auto& j : doc->at("models")) {
      StoredModel m{CostModel::from_json(j.at("model")), j.at("device").get<std::string>(), {}};
      const json& r = j.at("report");
      m.report.n_train = r.at("n_train").get<size_t>();
      m.report.n_holdout = r.at("n_holdout").get<size_t>();
      m.report.pearson_train = r.at("pearson_train").get<double>();
      m.report.pearson_holdout = r.at("pearson_holdout").get<double>();
      m.report.mse_holdout = r.at("mse_holdout").get<double>();
      out.push_back(std::move(m));
    }
  } catch (const std::exception& ex) {  // json errors and CostModel::from_json's InvalidArgument
    warn_ignored(file, std::string("unusable model: ") + ex.what());
    out.clear();
  }
  return out;
}

void store_cost_models(const std::string& cache_file, const std::vector<StoredModel>& models) {
  const std::string file = sibling_file(cache_file, "cost_model.json");
  std::lock_guard<std::mutex> lock(store_mutex());
  std::vector<StoredModel> all = load_cost_models(cache_file);
  for (const auto& m : models) {
    all.erase(std::remove_if(all.begin(), all.end(),
                             [&](const StoredModel& o) {
                               return o.model.op() == m.model.op() && o.device == m.device;
                             }),
              all.end());
    all.push_back(m);
  }
  json doc = new_document(kModelSchema);
  json arr = json::array();
  for (const auto& m : all)
    arr.push_back({{"op", op_kind_name(m.model.op())},
                   {"device", m.device},
                   {"report",
                    {{"n_train", m.report.n_train}, {"n_holdout", m.report.n_holdout},
                     {"pearson_train", m.report.pearson_train},
                     {"pearson_holdout", m.report.pearson_holdout},
                     {"mse_holdout", m.report.mse_holdout}}},
                   {"model", m.model.to_json()}});
  doc["models"] = std::move(arr);
  write_document(file, doc, -1, "models");
}

std::optional<CostModel> find_cost_model(const std::string& cache_file, OpKind op,
                                         const std::string& device) {
  for (auto& m : load_cost_models(cache_file))
    if (m.model.op() == op && m.device == device && m.model.trained()) return std::move(m.model);
  return std::nullopt;
}

}  // namespace tune
}  // namespace spgnn
