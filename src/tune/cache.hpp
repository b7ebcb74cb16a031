// Internal: the autotuner's files (tuning.json, measurements.json, cost_model.json), their
// locations, cache keys and the graph fingerprint. Every file is JSON with a schema name, a
// schema version and the spgnn version that wrote it; one that is missing is empty, one that is
// corrupt, foreign or of the wrong shape is ignored with one warning per file and process, and
// every write goes through a temporary file and a rename.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "spgnn/tune.hpp"
#include "tune/cost_model.hpp"

namespace spgnn::tune {

// "" -> tuning_cache_path(); a directory (existing, or ending in '/') -> <dir>/tuning.json.
std::string resolve_cache_file(const std::string& path);
// measurements.json / cost_model.json next to a tuning.json.
std::string sibling_file(const std::string& cache_file, const std::string& name);

// Prints "spgnn: warning: ignoring <file>: <why> ..." once per file and process.
void warn_ignored(const std::string& file, const std::string& why);
// The document of `file` when it exists and is a valid `schema` document of this version;
// nullopt otherwise (with warn_ignored for anything but a missing file).
std::optional<nlohmann::json> read_document(const std::string& file, const std::string& schema);
nlohmann::json new_document(const std::string& schema);
// Creates the directory and writes atomically. indent < 0: compact, with `array_key`'s elements
// (when given) one per line.
void write_document(const std::string& file, const nlohmann::json& doc, int indent,
                    const std::string& array_key = "");

// ---- keys ------------------------------------------------------------------------------------
struct KeyParts {
  std::string op, sub_op, dtype, device;
  int64_t F = 0;
  GraphFingerprint graph;
  std::string str() const;  // op|sub_op|F=..|dtype|graph|device|v<version>
};
std::string spmm_sub_op(SpmmOp op, Reduce reduce, int64_t F, bool wide_e);
std::string sddmm_sub_op(SddmmOp op, Target lhs, Target rhs);
// dtype: the features' (f32, f16, bf16); the key's dtype part is "<features>/<index dtype>".
KeyParts spmm_key_parts(const Graph& g, SpmmOp op, Reduce reduce, int64_t F, bool wide_e,
                        DType dtype = DType::f32);
KeyParts sddmm_key_parts(const Graph& g, SddmmOp op, Target lhs, Target rhs, int64_t F,
                         DType dtype = DType::f32);
// The CBSR products: sub-op "k=<k>/e" (edge values) or "k=<k>/1".
KeyParts cbsr_key_parts(const Graph& g, OpKind op, int64_t k, int64_t F, bool weighted);

// ---- tuning.json -----------------------------------------------------------------------------
// The in-memory view of one file, loaded lazily once per process (thread-safe).
bool cache_has_entries(const std::string& file);

nlohmann::json schedule_to_json(const Schedule& s);
Schedule schedule_from_json(const nlohmann::json& j);  // throws nlohmann::json::exception

// ---- measurements.json -----------------------------------------------------------------------
constexpr size_t kMaxMeasurements = 200000;  // the oldest are dropped beyond this
void append_measurements(const std::string& cache_file, const std::vector<Measurement>& m,
                         const std::string& sub_op);
std::vector<Measurement> load_measurements(const std::string& cache_file);

// ---- cost_model.json -------------------------------------------------------------------------
struct StoredModel {
  CostModel model;
  std::string device;
  CostModel::FitReport report;
};
std::vector<StoredModel> load_cost_models(const std::string& cache_file);
// Replaces the models of the same (op, device), keeps the others.
void store_cost_models(const std::string& cache_file, const std::vector<StoredModel>& models);
std::optional<CostModel> find_cost_model(const std::string& cache_file, OpKind op,
                                         const std::string& device);

}  // namespace spgnn::tune
