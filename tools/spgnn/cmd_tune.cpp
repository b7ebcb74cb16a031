// spgnn tune: the autotuner from the command line (include/spgnn/tune.hpp).
//   spgnn tune --graph G --op spmm|sddmm --dim F ...   tune, store, compare with fixed strategies
//   spgnn tune --graph G --op cbsr_spgemm|cbsr_sspmm --k K --dim F ...   the MaxK CBSR products
//   spgnn tune ... --list-space                        the search space, nothing timed
//   spgnn tune --fit-model [--cache PATH]              fit the cost models from the measurements
//   spgnn tune --show-cache | --clear-cache [--cache PATH]
// Flag values are checked here (not with CLI11 validators) so that a bad value is one
// "spgnn: error: ..." line and exit code 2, like every other input error of the CLI.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "spgnn/bench_util.hpp"
#include "spgnn/commands.hpp"
#include "spgnn/common.hpp"
#include "spgnn/ops.hpp"
#include "spgnn/tune.hpp"
#include "tune/cache.hpp"
#include "tune/cost_model.hpp"

namespace spgnn::cli {

namespace {

using nlohmann::json;

struct TuneCliOpts {
  std::vector<std::string> graphs{"builtin"};
  std::vector<std::string> names;
  std::string op;
  std::vector<int64_t> dims;
  int64_t k = 0;
  bool no_weights = false;
  double budget = 0;
  std::string mode = "genetic";
  std::string cache;
  std::string device = "auto";
  uint64_t seed = 1;
  int top = 16;
  int warmup = 1, reps = 10;
  double min_timed_ms = 2.0;
  std::string format = "table";
  std::string spmm_op = "u_mul_e", reduce = "sum", sddmm_op = "dot", lhs = "v", rhs = "u";
  std::string dtype = "f32";
  bool no_store = false, no_model = false, reuse = false, wide_e = false, progress = false;
  bool list_space = false, fit_model = false, show_cache = false, clear_cache = false;
  LoadFlags flags;
};

// The problem flags, parsed once (each parse_* names the legal values on error).
struct Problem {
  OpKind kind = OpKind::spmm;
  SpmmOp sop = SpmmOp::u_mul_e;
  Reduce red = Reduce::sum;
  SddmmOp dop = SddmmOp::dot;
  Target lt = Target::v, rt = Target::u;
  int64_t k = 0;
  bool weighted = true;
  bool cbsr() const { return kind == OpKind::cbsr_spgemm || kind == OpKind::cbsr_sspmm; }
  std::string label() const {
    if (cbsr()) return "k=" + std::to_string(k) + (weighted ? " weighted" : " unweighted");
    return kind == OpKind::spmm ? std::string(name(sop)) + "/" + name(red)
                                : std::string(name(dop)) + "(" + name(lt) + "," + name(rt) + ")";
  }
  // What "tuned vs" compares with: cuSPARSE on GPUs; on the CPU (and for the CBSR products,
  // which have one kernel per device) the device's default schedule.
  std::string base_name(Device dev) const {
    if (cbsr()) return dev.is_cuda() ? "gpu" : "cpu";
    return dev.is_cuda() ? "cusparse" : (kind == OpKind::spmm ? "cpu_mergepath" : "cpu_edge");
  }
};

Problem parse_problem(const TuneCliOpts& o) {
  SPGNN_CHECK(!o.op.empty(), InvalidArgument,
              "--op is required: spmm, sddmm, cbsr_spgemm or cbsr_sspmm");
  Problem p;
  try {
    p.kind = parse_op_kind(o.op);
  } catch (const InvalidArgument&) {
    throw InvalidArgument("--op must be spmm, sddmm, cbsr_spgemm or cbsr_sspmm, got '" + o.op +
                          "'");
  }
  if (p.cbsr()) {
    SPGNN_CHECK(o.k >= 1, InvalidArgument, "--k is required for --op ", o.op,
                " (the values MaxK keeps per row, >= 1), got ", o.k);
    for (int64_t F : o.dims)
      SPGNN_CHECK(o.k <= F, InvalidArgument, "--k ", o.k, " exceeds --dim ", F,
                  " (MaxK keeps k of the F values of a row)");
    p.k = o.k;
    p.weighted = !o.no_weights;
  } else {
    SPGNN_CHECK(o.k == 0, InvalidArgument, "--k applies to --op cbsr_spgemm and cbsr_sspmm only");
    SPGNN_CHECK(!o.no_weights, InvalidArgument,
                "--no-weights applies to --op cbsr_spgemm and cbsr_sspmm only");
  }
  p.sop = parse_spmm_op(o.spmm_op);
  p.red = parse_reduce(o.reduce);
  p.dop = parse_sddmm_op(o.sddmm_op);
  p.lt = parse_target(o.lhs);
  p.rt = parse_target(o.rhs);
  return p;
}

void check_flags(const TuneCliOpts& o) {
  SPGNN_CHECK(std::isfinite(o.budget) && o.budget >= 0, InvalidArgument,
              "--budget must be >= 0 seconds (0 = no limit), got ", o.budget);
  parse_tune_mode(o.mode);
  SPGNN_CHECK(o.top >= 5 && o.top <= 20, InvalidArgument, "--top must be in 5..20, got ", o.top);
  SPGNN_CHECK(o.warmup >= 0, InvalidArgument, "--warmup must be >= 0, got ", o.warmup);
  SPGNN_CHECK(o.reps >= 1, InvalidArgument, "--reps must be >= 1, got ", o.reps);
  SPGNN_CHECK(o.min_timed_ms >= 0 && std::isfinite(o.min_timed_ms), InvalidArgument,
              "--min-timed-ms must be a number >= 0, got ", o.min_timed_ms);
  SPGNN_CHECK(o.format == "table" || o.format == "json", InvalidArgument,
              "--format must be table or json, got '", o.format, "'");
  for (int64_t F : o.dims)
    SPGNN_CHECK(F >= 1 && F <= (int64_t{1} << 16), InvalidArgument,
                "--dim must be in 1..65536, got ", F);
  SPGNN_CHECK(o.dtype == "f32" || o.op == "spmm" || o.op == "sddmm", InvalidArgument,
              "--dtype ", o.dtype, " applies to --op spmm and sddmm; the CBSR products are tuned "
              "in f32");
  const int actions = int(o.list_space) + int(o.fit_model) + int(o.show_cache) + int(o.clear_cache);
  SPGNN_CHECK(actions <= 1, InvalidArgument,
              "--list-space, --fit-model, --show-cache and --clear-cache exclude each other");
}

std::string ms_text(double ms) { return std::isfinite(ms) ? fixed(ms, 4) : "-"; }
std::string ratio_text(double x) { return std::isfinite(x) ? fixed(x, 2) + "x" : "-"; }
json num_or_null(double v) { return std::isfinite(v) ? json(v) : json(); }

// One progress line on stderr (a TTY, or --progress): candidates timed, best so far.
std::function<void(const TuneProgress&)> progress_printer(const std::string& label, bool force) {
  if (!force && !isatty(STDERR_FILENO)) return {};
  return [label](const TuneProgress& p) {
    const int width = 24;
    const size_t planned = std::max<size_t>(p.planned, 1);
    const int fill = int(std::min<size_t>(p.measured, planned) * width / planned);
    std::fprintf(stderr, "\r%s [%s%s] %zu/%zu  %.1f s  best %s ms   ", label.c_str(),
                 std::string(size_t(fill), '#').c_str(), std::string(size_t(width - fill), '.').c_str(),
                 p.measured, p.planned, p.elapsed_s, ms_text(p.best_ms).c_str());
    std::fflush(stderr);
  };
}

// The comparisons of one tuning run, from the candidates it timed.
struct Summary {
  std::string fixed_name, base_name;
  double fixed_ms = NAN, base_ms = NAN;
};

Summary summarize(const TuneResult& r, const std::string& base_name) {
  Summary s;
  // Best time of each strategy at its default schedule; cuSPARSE is the best of its algorithms.
  std::map<std::string, double> per_strategy;
  for (const auto& c : r.candidates) {
    if (!c.baseline || !std::isfinite(c.ms)) continue;
    if (!c.schedule.params.empty() && c.schedule.strategy != "cusparse") continue;
    auto it = per_strategy.find(c.schedule.strategy);
    if (it == per_strategy.end() || c.ms < it->second) per_strategy[c.schedule.strategy] = c.ms;
  }
  for (const auto& [name, ms] : per_strategy)
    if (!std::isfinite(s.fixed_ms) || ms < s.fixed_ms) {
      s.fixed_ms = ms;
      s.fixed_name = name;
    }
  s.base_name = base_name;
  auto it = per_strategy.find(s.base_name);
  if (it != per_strategy.end()) s.base_ms = it->second;
  return s;
}

Graph load_on(const std::string& spec, const LoadFlags& flags, Device dev) {
  Graph host = load_with_flags(spec, flags);
  return dev.is_cuda() ? host.to(dev) : host;
}

void run_list_space(const TuneCliOpts& o, const Problem& pb, Device dev) {
  json all = json::array();
  Table t({"graph", "F", "strategy", "tunable parameters", "combinations", "valid", "excluded"});
  for (size_t gi = 0; gi < o.graphs.size(); ++gi) {
    const std::string gname = o.names.empty() ? o.graphs[gi] : o.names[gi];
    const Graph g = load_on(o.graphs[gi], o.flags, dev);
    for (int64_t F : o.dims) {
      const TuneSpace sp =
          pb.cbsr()                  ? cbsr_tune_space(g, pb.kind, pb.k, F, pb.weighted)
          : pb.kind == OpKind::spmm
              ? spmm_tune_space(g, pb.sop, pb.red, F, o.wide_e, feature_dtype(o.dtype))
              : sddmm_tune_space(g, pb.dop, pb.lt, pb.rt, F, feature_dtype(o.dtype));
      json js = {{"graph", gname}, {"F", F}, {"size", sp.size}, {"valid", sp.valid},
                 {"strategies", json::array()}};
      for (const auto& s : sp.strategies) {
        std::string params, why;
        for (const auto& p : s.params) params += (params.empty() ? "" : ",") + p;
        json reasons = json::array();
        for (const auto& [text, n] : s.invalid_reasons) {
          why += (why.empty() ? "" : "; ") + (n ? std::to_string(n) + " " : std::string()) + text;
          reasons.push_back({{"reason", text}, {"count", n}});
        }
        t.add({gname, std::to_string(F), s.strategy, params.empty() ? "-" : params,
               std::to_string(s.combinations), std::to_string(s.valid), why});
        js["strategies"].push_back({{"strategy", s.strategy}, {"params", s.params},
                                    {"combinations", s.combinations}, {"valid", s.valid},
                                    {"excluded", reasons}});
      }
      t.add({gname, std::to_string(F), "total", "", std::to_string(sp.size),
             std::to_string(sp.valid), ""});
      all.push_back(js);
    }
  }
  if (o.format == "json") {
    std::cout << all.dump(2) << "\n";
    return;
  }
  std::cout << "search space of " << o.op << " " << pb.label() << " on " << dev.str() << " ("
            << tuning_device_name(dev) << "): every supporting strategy x its tunable parameters; "
            << "'excluded' = invalid or same-as combinations\n"
            << t.str();
}

void run_tune(const TuneCliOpts& o, const Problem& pb, Device dev) {
  TuneOptions to;
  to.mode = parse_tune_mode(o.mode);
  to.budget_s = o.budget;
  to.warmup = o.warmup;
  to.reps = o.reps;
  to.min_timed_ms = o.min_timed_ms;
  to.seed = o.seed;
  to.top_k = o.top;
  to.cache_path = o.cache;
  to.use_model = !o.no_model;
  to.store = !o.no_store;
  to.reuse_cached = o.reuse;
  to.wide_e = o.wide_e;
  to.dtype = feature_dtype(o.dtype);
  const std::string cache_file = tune::resolve_cache_file(o.cache);

  const std::string base_name = pb.base_name(dev);
  json all = json::array();
  Table t({"graph", "F", "tuned schedule", "ms", "best fixed", "ms", "tuned vs fixed",
           base_name + " ms", "tuned vs " + base_name, "space", "valid", "timed", "ranked by",
           "tune s", "stored"});
  for (size_t gi = 0; gi < o.graphs.size(); ++gi) {
    const std::string gname = o.names.empty() ? o.graphs[gi] : o.names[gi];
    const Graph g = load_on(o.graphs[gi], o.flags, dev);
    for (int64_t F : o.dims) {
      to.progress = progress_printer("tuning " + gname + " F=" + std::to_string(F), o.progress);
      const TuneResult r =
          pb.cbsr()                  ? tune_cbsr(g, pb.kind, pb.k, F, pb.weighted, to)
          : pb.kind == OpKind::spmm ? tune_spmm(g, pb.sop, pb.red, F, to)
                                    : tune_sddmm(g, pb.dop, pb.lt, pb.rt, F, to);
      if (to.progress) std::fprintf(stderr, "\n");
      const Summary s = summarize(r, base_name);
      std::string note = r.stored ? "yes" : "no";
      if (r.from_cache) note = "cached";
      if (r.budget_exhausted) note += " (budget hit)";
      t.add({gname, std::to_string(F), r.best.str(), ms_text(r.best_ms),
             s.fixed_name.empty() ? "-" : s.fixed_name, ms_text(s.fixed_ms),
             ratio_text(s.fixed_ms / r.best_ms), ms_text(s.base_ms),
             ratio_text(s.base_ms / r.best_ms), std::to_string(r.space_size),
             std::to_string(r.valid_size), std::to_string(r.candidates.size()),
             r.from_cache || to.mode == TuneMode::exhaustive ? "-" : r.model_used ? "model" : "prior",
             fixed(r.seconds, 2), note});
      json cands = json::array();
      for (const auto& c : r.candidates)
        cands.push_back({{"schedule", c.schedule.str()}, {"ms", num_or_null(c.ms)},
                         {"error", c.error}, {"baseline", c.baseline}});
      all.push_back({{"graph", gname},
                     {"F", F},
                     {"op", o.op},
                     {"dtype", o.dtype},
                     {"sub_op", pb.label()},
                     {"device", r.device},
                     {"mode", o.mode},
                     {"key", r.key},
                     {"best", {{"schedule", r.best.str()}, {"ms", num_or_null(r.best_ms)}}},
                     {"heuristic", r.heuristic.str()},
                     {"best_fixed", {{"strategy", s.fixed_name}, {"ms", num_or_null(s.fixed_ms)}}},
                     {"baseline", {{"strategy", s.base_name}, {"ms", num_or_null(s.base_ms)}}},
                     {"speedup_vs_fixed", num_or_null(s.fixed_ms / r.best_ms)},
                     {"speedup_vs_baseline", num_or_null(s.base_ms / r.best_ms)},
                     {"space_size", r.space_size},
                     {"valid_size", r.valid_size},
                     {"measured", r.candidates.size()},
                     {"seconds", r.seconds},
                     {"budget_exhausted", r.budget_exhausted},
                     {"model_used", r.model_used},
                     {"from_cache", r.from_cache},
                     {"stored", r.stored},
                     {"cache", cache_file},
                     {"candidates", cands}});
    }
  }
  if (o.format == "json") {
    std::cout << all.dump(2) << "\n";
    return;
  }
  std::cout << "spgnn tune: " << o.op << " " << pb.label()
            << (o.dtype == "f32" ? std::string() : " " + o.dtype) << " on " << dev.str() << " ("
            << tuning_device_name(dev) << "); mode " << o.mode << "; "
            << o.warmup << " warm-up + " << o.reps << " timed runs per candidate (median"
            << (o.min_timed_ms > 0 ? "; more when they take < " + fixed(o.min_timed_ms, 1) + " ms"
                                   : std::string())
            << ")"
            << (o.budget > 0 ? "; budget " + fixed(o.budget, 1) + " s" : std::string()) << "\n"
            << "best fixed = fastest strategy at its default parameters; " << base_name
            << (dev.is_cuda() && !pb.cbsr() ? " = best of its algorithms"
                                            : " = its default schedule")
            << "; cache " << cache_file << (o.no_store ? " (not written: --no-store)" : "") << "\n";
  std::cout << t.str();
}

void run_fit_model(const TuneCliOpts& o) {
  const std::string cache_file = tune::resolve_cache_file(o.cache);
  const std::vector<tune::Measurement> all = tune::load_measurements(cache_file);
  const std::string mfile = tune::sibling_file(cache_file, "measurements.json");
  SPGNN_CHECK(!all.empty(), InvalidArgument, "--fit-model: no measurements in ", mfile,
              "; run `spgnn tune` (without --no-store) first");
  std::map<std::string, std::vector<tune::Measurement>> by_device;
  for (const auto& m : all) by_device[m.device_name].push_back(m);
  std::vector<tune::StoredModel> fitted;
  Table t({"op", "device", "measurements", "train", "held out", "Pearson train",
           "Pearson held-out", "note"});
  json rows = json::array();
  for (const auto& [device, data] : by_device) {
    for (OpKind op : {OpKind::spmm, OpKind::sddmm}) {
      const size_t n = size_t(std::count_if(data.begin(), data.end(), [&](const tune::Measurement& m) {
        return m.problem.op == op;
      }));
      if (n == 0) continue;
      tune::CostModel model(op);
      tune::CostModel::FitOptions fo;
      fo.seed = o.seed;
      try {
        const auto rep = model.fit(data, fo);
        fitted.push_back({model, device, rep});
        t.add({op_kind_name(op), device, std::to_string(n), std::to_string(rep.n_train),
               std::to_string(rep.n_holdout), fixed(rep.pearson_train, 3),
               fixed(rep.pearson_holdout, 3), ""});
        rows.push_back({{"op", op_kind_name(op)}, {"device", device}, {"measurements", n},
                        {"n_train", rep.n_train}, {"n_holdout", rep.n_holdout},
                        {"pearson_train", rep.pearson_train},
                        {"pearson_holdout", rep.pearson_holdout}, {"mse_holdout", rep.mse_holdout},
                        {"fitted", true}});
      } catch (const InvalidArgument& ex) {
        t.add({op_kind_name(op), device, std::to_string(n), "-", "-", "-", "-",
               std::string("skipped: ") + ex.what()});
        rows.push_back({{"op", op_kind_name(op)}, {"device", device}, {"measurements", n},
                        {"fitted", false}, {"reason", ex.what()}});
      }
    }
  }
  if (!fitted.empty()) tune::store_cost_models(cache_file, fitted);
  const std::string mpath = tune::sibling_file(cache_file, "cost_model.json");
  if (o.format == "json") {
    std::cout << json{{"models", rows}, {"stored", !fitted.empty()}, {"path", mpath}}.dump(2) << "\n";
  } else {
    std::cout << "cost models fitted from " << mfile << " (" << all.size()
              << " measurements; Pearson of predicted vs measured log time ratio)\n"
              << t.str()
              << (fitted.empty() ? "nothing stored\n" : "stored in " + mpath + "\n");
  }
  SPGNN_CHECK(!fitted.empty(), InvalidArgument,
              "--fit-model: too few measurements to fit any model (see the table)");
}

void run_show_cache(const TuneCliOpts& o) {
  const std::string file = tune::resolve_cache_file(o.cache);
  const auto entries = tuning_cache_entries(file);
  if (o.format == "json") {
    json arr = json::array();
    for (const auto& e : entries)
      arr.push_back({{"key", e.key}, {"op", e.op}, {"sub_op", e.sub_op}, {"F", e.F},
                     {"graph", e.graph.str()}, {"device", e.device},
                     {"schedule", e.schedule.str()}, {"ms", e.ms}, {"mode", e.mode},
                     {"measured", e.measured}, {"space_size", e.space_size},
                     {"tune_seconds", e.tune_seconds}});
    std::cout << json{{"path", file}, {"entries", arr}}.dump(2) << "\n";
    return;
  }
  Table t({"op", "sub-op", "F", "graph", "device", "schedule", "ms", "mode", "timed"});
  for (const auto& e : entries)
    t.add({e.op, e.sub_op, std::to_string(e.F), e.graph.str(), e.device, e.schedule.str(),
           ms_text(e.ms), e.mode, std::to_string(e.measured)});
  std::cout << "tuning cache " << file << ": " << entries.size() << " entries\n" << t.str();
}

void run(const TuneCliOpts& o) {
  check_flags(o);
  if (o.fit_model) return run_fit_model(o);
  if (o.show_cache) return run_show_cache(o);
  if (o.clear_cache) {
    tuning_cache_clear(o.cache);
    std::cout << "cleared " << tune::resolve_cache_file(o.cache) << "\n";
    return;
  }
  const Problem pb = parse_problem(o);
  SPGNN_CHECK(!o.dims.empty(), InvalidArgument, "--dim is required (the feature width F)");
  check_bench_names(o.graphs, o.names);
  const Device dev = bench_device(o.device);
  if (o.list_space) return run_list_space(o, pb, dev);
  run_tune(o, pb, dev);
}

}  // namespace

void register_tune(CLI::App& app) {
  auto o = std::make_shared<TuneCliOpts>();
  auto* cmd = app.add_subcommand(
      "tune", "Autotune a sparse op's strategy and parameters for a graph and width; store the "
              "result in the tuning cache that `auto` reads");
  cmd->add_option("-g,--graph", o->graphs,
                  "Graph file, dataset directory or generator spec (repeatable; default builtin)");
  cmd->add_option("--name", o->names, "Display name per --graph (repeatable)");
  cmd->add_option("--op", o->op, "spmm, sddmm, cbsr_spgemm or cbsr_sspmm (the MaxK products; "
                                 "required unless --fit-model/--show-cache)");
  cmd->add_option("--k", o->k, "cbsr_spgemm/cbsr_sspmm: values MaxK keeps per row (1..F)");
  cmd->add_flag("--no-weights", o->no_weights,
                "cbsr_spgemm/cbsr_sspmm: edges without values (1 each); default: with values, "
                "as a layer's normalised graph");
  cmd->add_option("-d,--dim", o->dims, "Feature widths F (repeatable or comma-separated)")
      ->delimiter(',');
  cmd->add_option("--budget", o->budget, "Search time limit in seconds per case (0 = none); "
                                         "stops early and keeps the best so far")
      ->capture_default_str();
  cmd->add_option("--mode", o->mode, "genetic (cost model/prior + genetic search), random (3 "
                                     "samples of the pruned space) or exhaustive")
      ->capture_default_str();
  cmd->add_option("--cache", o->cache, "Tuning cache file or directory (default: "
                                       "$SPGNN_CACHE_DIR, $XDG_CACHE_HOME/spgnn or ~/.cache/spgnn)");
  cmd->add_option("--device", o->device, "auto (GPU when present), cpu, cuda or cuda:N")
      ->capture_default_str();
  add_seed_option(*cmd, o->seed, "Seed of the search and of the tuner's inputs");
  cmd->add_option("--top", o->top, "Pruned-space size (5..20): the genetic population and the "
                                   "random mode's pool")
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Untimed runs per candidate")->capture_default_str();
  cmd->add_option("--reps", o->reps, "Timed runs per candidate (median)")->capture_default_str();
  cmd->add_option("--min-timed-ms", o->min_timed_ms,
                  "Candidates whose --reps runs take less than this are re-timed with more runs "
                  "(at most 20x --reps) to fill it; 0 = exactly --reps")
      ->capture_default_str();
  cmd->add_option("--format", o->format, "table or json")->capture_default_str();
  cmd->add_option("--spmm-op", o->spmm_op, "spmm: copy_u, copy_e, u_mul_e, u_add_e, u_sub_e, u_div_e")
      ->capture_default_str();
  cmd->add_option("--reduce", o->reduce, "spmm reduce: sum, mean, max, min")->capture_default_str();
  cmd->add_option("--sddmm-op", o->sddmm_op, "sddmm: dot, add, sub, mul, div, copy_lhs, copy_rhs")
      ->capture_default_str();
  cmd->add_option("--lhs-target", o->lhs, "sddmm lhs target: u, v or e")->capture_default_str();
  cmd->add_option("--rhs-target", o->rhs, "sddmm rhs target: u, v or e")->capture_default_str();
  cmd->add_flag("--wide-e", o->wide_e, "spmm: edge operand of width F instead of 1");
  cmd->add_option("--dtype", o->dtype,
                  "spmm/sddmm feature dtype: f32, f16 or bf16 (each has its own cache entries; "
                  "half problems are ranked by the prior, and their timings train no cost model)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  cmd->add_flag("--no-store", o->no_store, "Do not write the tuning cache or the measurements");
  cmd->add_flag("--no-model", o->no_model, "Rank by the prior even when a cost model is trained");
  cmd->add_flag("--reuse", o->reuse, "Return a valid cached result without measuring");
  cmd->add_flag("--progress", o->progress, "Show the progress line even when stderr is not a TTY");
  cmd->add_flag("--list-space", o->list_space, "Print the search space sizes; time nothing");
  cmd->add_flag("--fit-model", o->fit_model,
                "Fit the cost models from the stored measurements and store cost_model.json");
  cmd->add_flag("--show-cache", o->show_cache, "Print the tuning cache's entries");
  cmd->add_flag("--clear-cache", o->clear_cache, "Delete the tuning cache file");
  add_load_flags(*cmd, o->flags);
  cmd->callback([o] { run(*o); });
}

}  // namespace spgnn::cli
