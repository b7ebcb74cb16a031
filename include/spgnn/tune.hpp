// The autotuner (G-Sparse §D): finds the fastest strategy and parameters of a g-SpMM / g-SDDMM
// problem by timing real runs, guided by a learned cost model, and remembers the answer in a
// tuning cache that `auto` reads. Everything here works on CPU graphs too (the CPU strategies
// have parameters), which is what the tests exercise.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "spgnn/graph.hpp"
#include "spgnn/ops.hpp"
#include "spgnn/schedule.hpp"

namespace spgnn {

// genetic: rank the space (cost model, else the prior: each strategy's default parameters
//          first, then by distance from them), take the best top_k as the first population,
//          3 generations of elitism + roulette selection + crossover + 20% mutation.
// random:  3 candidates drawn from the best top_k (the fast mode).
// exhaustive: every valid candidate (the reference the genetic result is judged against).
// Every mode also times each strategy's default schedule and the heuristic's choice first, so a
// tuned result is never slower than the best fixed strategy or than untuned `auto` (up to noise).
enum class TuneMode : uint8_t { genetic, random, exhaustive };
const char* name(TuneMode m);
TuneMode parse_tune_mode(const std::string& s);  // InvalidArgument names the legal modes

struct TuneProgress {
  size_t measured = 0;  // candidates timed so far in this call
  size_t planned = 0;   // how many this mode times at most
  double elapsed_s = 0;
  double best_ms = 0;   // NaN until one candidate succeeded
  std::string last;     // the schedule just timed
};

struct TuneOptions {
  TuneMode mode = TuneMode::genetic;
  double budget_s = 0;  // search time limit in seconds (0 = none); stops early, keeps the best
  int warmup = 1;       // untimed runs per candidate
  int reps = 10;        // timed runs per candidate; fitness = 1 / median
  // A candidate whose `reps` runs take less than this in total is timed again with enough runs
  // to fill it (at most 20 x reps): the median of 10 runs of a ~10 us kernel moves by ~10%, more
  // than the differences being ranked on small graphs. 0 = always exactly `reps`.
  double min_timed_ms = 2.0;
  uint64_t seed = 1;    // genetic operators and random sampling
  int top_k = 16;       // 5..20: size of the pruned space (= the genetic population)
  std::string cache_path;  // tuning.json (or its directory); "" = tuning_cache_path()
  bool use_model = true;   // rank with the trained cost model of cost_model.json when present
  bool store = true;       // write the result to the tuning cache and every timing to
                           // measurements.json (the cost model's training data)
  bool reuse_cached = false;  // return a valid cached entry without measuring
  bool wide_e = false;     // spmm ops with an edge operand: e is [nnz, F] instead of [nnz, 1]
  // spmm/sddmm: the feature dtype tuned (f32, f16 or bf16; its own cache entries). Half problems
  // are searched by the prior and the genetic search only: the cost model is trained on float32
  // timings, and half timings are not added to its training data.
  DType dtype = DType::f32;
  std::function<void(const TuneProgress&)> progress;
};

struct TuneCandidate {
  Schedule schedule;
  double ms = 0;       // median of the timed runs; NaN when the run threw
  std::string error;   // the exception's message when it threw
  bool baseline = false;  // a strategy's default schedule or the heuristic's choice
};

struct TuneResult {
  Schedule best;
  double best_ms = 0;
  std::vector<TuneCandidate> candidates;  // every schedule timed, in order
  size_t space_size = 0;   // every combination of the supporting strategies' tunable values
  size_t valid_size = 0;   // those that pass the strategies' validity rules
  double seconds = 0;      // wall time of the whole call
  bool budget_exhausted = false;
  bool model_used = false;  // ranked by a trained cost model (else by the prior)
  bool from_cache = false;  // reuse_cached found an entry: nothing was measured
  bool stored = false;
  std::string key;      // the tuning-cache key
  std::string device;   // device name in the key
  Schedule heuristic;   // what `auto` picks without a cache entry
};

// Tunes one problem shape on the tuner's own inputs (random features of width F on the graph's
// device; the caller's tensors are never touched). F >= 1.
TuneResult tune_spmm(const Graph& g, SpmmOp op, Reduce reduce, int64_t F,
                     const TuneOptions& options = {});
TuneResult tune_sddmm(const Graph& g, SddmmOp op, Target lhs_target, Target rhs_target, int64_t F,
                      const TuneOptions& options = {});

// The CBSR products of MaxK-GNN (op = OpKind::cbsr_spgemm or cbsr_sspmm): the GPU kernel's
// parameters for a graph, k kept values of F, with edge values (weighted: a layer's normalised
// graph) or without, timed on the tuner's own random rows selected by maxk. `auto` of
// cbsr_spgemm / cbsr_sspmm then runs the stored schedule (float32 problems). 1 <= k <= F <= 65536.
TuneResult tune_cbsr(const Graph& g, OpKind op, int64_t k, int64_t F, bool weighted,
                     const TuneOptions& options = {});

// The search space of a problem without timing anything: per supporting strategy (never
// cpu_ref) the cartesian product of its tunable parameters' values, and how many pass validity.
struct TuneSpaceStrategy {
  std::string strategy;
  size_t combinations = 0, valid = 0;
  std::vector<std::string> params;  // the tunable ones
  std::vector<std::pair<std::string, size_t>> invalid_reasons;  // first words of each reason
};
struct TuneSpace {
  std::vector<TuneSpaceStrategy> strategies;
  size_t size = 0, valid = 0;
};
TuneSpace spmm_tune_space(const Graph& g, SpmmOp op, Reduce reduce, int64_t F,
                          bool wide_e = false, DType dtype = DType::f32);
TuneSpace sddmm_tune_space(const Graph& g, SddmmOp op, Target lhs_target, Target rhs_target,
                           int64_t F, DType dtype = DType::f32);
TuneSpace cbsr_tune_space(const Graph& g, OpKind op, int64_t k, int64_t F, bool weighted);

// ---- graph fingerprint and tuning cache ----------------------------------------------------------
// n_rows, n_cols, nnz, index dtype and a 64-bit hash of rowptr plus a strided sample of at most
// 65,536 col entries. Computed once per graph structure (cached in Graph::cache); for a GPU graph
// only rowptr and the sampled entries are copied to the host.
struct GraphFingerprint {
  int64_t n_rows = 0, n_cols = 0, nnz = 0;
  std::string index_dtype;
  uint64_t hash = 0;
  std::string str() const;  // "n=..,m=..,nnz=..,i32,h=<16 hex digits>"
};
GraphFingerprint graph_fingerprint(const Graph& g);

// The name of a device as it appears in cache keys: the GPU's name, or
// "cpu:<model name> (<threads> threads)".
std::string tuning_device_name(Device d);
// The spgnn version stamped into cache files and keys.
const char* spgnn_version();

// Cache keys: graph fingerprint, op and sub-op, F, dtypes, device name, spgnn version.
std::string spmm_tuning_key(const Graph& g, SpmmOp op, Reduce reduce, int64_t F,
                            bool wide_e = false, DType dtype = DType::f32);
std::string sddmm_tuning_key(const Graph& g, SddmmOp op, Target lhs_target, Target rhs_target,
                             int64_t F, DType dtype = DType::f32);
std::string cbsr_tuning_key(const Graph& g, OpKind op, int64_t k, int64_t F, bool weighted);

struct TuningCacheEntry {
  std::string key;
  Schedule schedule;
  double ms = 0;
  std::string op, sub_op, device, version, mode;
  int64_t F = 0;
  GraphFingerprint graph;
  size_t space_size = 0, measured = 0;
  double tune_seconds = 0;
};

// The tuning cache file: set_tuning_cache_path(), else $SPGNN_CACHE_DIR/tuning.json, else
// $XDG_CACHE_HOME/spgnn/tuning.json, else ~/.cache/spgnn/tuning.json. A path naming a directory
// (existing, or ending in '/') means <dir>/tuning.json. measurements.json and cost_model.json
// live next to it. Setting SPGNN_TUNING_CACHE=off makes `auto` ignore the cache.
std::string tuning_cache_path();
void set_tuning_cache_path(const std::string& path);  // "" restores the default rules

// `path` "" = tuning_cache_path(). A missing file is an empty cache; a corrupt, foreign-version or
// wrong-schema file is ignored with one warning on stderr and overwritten by the next store.
std::optional<TuningCacheEntry> tuning_cache_lookup(const std::string& key,
                                                    const std::string& path = "");
std::vector<TuningCacheEntry> tuning_cache_entries(const std::string& path = "");
void tuning_cache_store(const TuningCacheEntry& entry, const std::string& path = "");
void tuning_cache_clear(const std::string& path = "");

// With tune-on-miss on, `auto` tunes a problem the cache does not know (once per key and
// process, with these options, on the tuner's own tensors), stores the result and uses it.
void set_tune_on_miss(bool enabled, const TuneOptions& options = {});
bool tune_on_miss();

}  // namespace spgnn
