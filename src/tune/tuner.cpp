// The autotuner's front door: tune_spmm / tune_sddmm build the problem on the tuner's own
// tensors, the search space from the registry, the ranking (cost model or prior), run the search
// with real timings (1 warm-up + 10 runs, fitness 1 / median) and store the result and every
// timing. Also `auto`'s cache hook and tune-on-miss.
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "core/timing.hpp"
#include "dispatch/registry.hpp"
#include "spgnn/tune.hpp"
#include "tune/auto_cache.hpp"
#include "tune/cache.hpp"
#include "tune/cost_model.hpp"
#include "tune/search.hpp"
#include "tune/space.hpp"

namespace spgnn {

const char* name(TuneMode m) {
  switch (m) {
    case TuneMode::genetic: return "genetic";
    case TuneMode::random: return "random";
    case TuneMode::exhaustive: return "exhaustive";
  }
  return "?";
}

TuneMode parse_tune_mode(const std::string& s) {
  if (s == "genetic") return TuneMode::genetic;
  if (s == "random") return TuneMode::random;
  if (s == "exhaustive") return TuneMode::exhaustive;
  throw InvalidArgument("unknown tuning mode '" + s + "'; expected genetic, random or exhaustive");
}

namespace tune {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void check_feature_dtype(DType dtype, const char* fn) {
  SPGNN_CHECK(dtype == DType::f32 || is_half(dtype), InvalidArgument, fn,
              ": dtype must be f32, f16 or bf16 (the features' dtype), got ", dtype_name(dtype));
}

void check_options(const TuneOptions& o, const char* fn) {
  SPGNN_CHECK(std::isfinite(o.budget_s) && o.budget_s >= 0, InvalidArgument, fn,
              ": budget must be >= 0 seconds (0 = none), got ", o.budget_s);
  SPGNN_CHECK(o.warmup >= 0, InvalidArgument, fn, ": warmup must be >= 0, got ", o.warmup);
  SPGNN_CHECK(o.reps >= 1, InvalidArgument, fn, ": reps must be >= 1, got ", o.reps);
  SPGNN_CHECK(o.min_timed_ms >= 0 && std::isfinite(o.min_timed_ms), InvalidArgument, fn,
              ": min_timed_ms must be a finite number >= 0, got ", o.min_timed_ms);
  SPGNN_CHECK(o.top_k >= 5 && o.top_k <= 20, InvalidArgument, fn,
              ": top_k must be in 5..20 (the pruned space), got ", o.top_k);
  check_feature_dtype(o.dtype, fn);
}

// Seed-deterministic uniform values (splitmix64 per element), filled on the host in parallel
// and copied once to the graph's device.
Tensor random_input(std::vector<int64_t> shape, uint64_t seed, Device dev, float lo = -1.f,
                    float hi = 1.f) {
  Tensor t = Tensor::empty(std::move(shape), DType::f32);
  float* p = t.data<float>();
  const int64_t n = t.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ULL + uint64_t(i) + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    p[i] = lo + (hi - lo) * float(double(z >> 11) * (1.0 / 9007199254740992.0));
  }
  return dev.is_cuda() ? t.to(dev) : t;
}

Tensor in_dtype(const Tensor& t, DType dtype) { return dtype == DType::f32 ? t : t.astype(dtype); }

ProblemStats problem_stats(const Graph& g, OpKind op, int64_t F) {
  const auto st = detail::degree_stats(g);
  ProblemStats p;
  p.op = op;
  p.n_rows = g.n_rows;
  p.n_cols = g.n_cols;
  p.nnz = g.nnz();
  p.F = F;
  p.avg_deg = st->avg;
  p.max_deg = double(st->max_deg);
  p.deg_cv = st->cv;
  p.empty_rows = st->empty_rows;
  p.gpu = g.device().is_cuda();
  return p;
}

// Each strategy's default schedule (parameters unset: what `--strategy NAME` runs, including
// gnnone's graph-sized defaults), every cuSPARSE algorithm (the baseline is the best of them,
// as in `spgnn bench`), and the heuristic's choice.
std::vector<Schedule> baselines_of(const Space& space, const Schedule& heuristic) {
  std::vector<Schedule> out;
  auto add = [&](const Schedule& s) {
    for (const auto& b : out)
      if (b.str() == s.str()) return;
    out.push_back(s);
  };
  for (const auto& s : space.strategies()) {
    if (s.name == "cusparse" && !s.params.empty()) {
      for (const auto& spec : s.params)
        for (int64_t v : spec.values) add(Schedule{s.name, {{spec.name, v}}});
      continue;
    }
    add(Schedule{s.name, {}});
  }
  // The heuristic names cuSPARSE without parameters, i.e. alg 0, which is timed already.
  if (!(heuristic.strategy == "cusparse" && heuristic.params.empty())) add(heuristic);
  return out;
}

// What tune_spmm and tune_sddmm share once their problem is built.
struct Job {
  const Graph* g = nullptr;
  OpKind op = OpKind::spmm;
  KeyParts key;
  const Space* space = nullptr;
  Schedule heuristic;
  std::function<void(const Schedule&)> call;  // one run through the op's front door
  std::function<bool(const Schedule&)> usable;
};

TuneResult run_job(const Job& job, const TuneOptions& o, Clock::time_point t0) {
  const std::string file = resolve_cache_file(o.cache_path);
  TuneResult r;
  r.key = job.key.str();
  r.device = job.key.device;
  r.heuristic = job.heuristic;
  r.space_size = job.space->size();
  r.valid_size = job.space->valid_count();
  if (o.reuse_cached) {
    if (auto e = tuning_cache_lookup(r.key, file); e && job.usable(e->schedule)) {
      r.best = e->schedule;
      r.best_ms = e->ms;
      r.from_cache = true;
      r.seconds = seconds_since(t0);
      return r;
    }
  }

  const ProblemStats stats = problem_stats(*job.g, job.op, job.key.F);
  std::optional<CostModel> model;
  // The cost models are fitted to float32 timings: half problems rank by the prior (the CBSR
  // products are float32 only: tune_cbsr checks).
  const bool f32 = o.dtype == DType::f32;
  if (o.use_model && f32) model = find_cost_model(file, job.op, job.key.device);
  ScoreFn score;
  if (model) {
    r.model_used = true;
    score = [&](size_t i) { return model->predict(stats, job.space->schedule(i)); };
  }

  const Device dev = job.g->device();
  MeasureFn measure = [&](const Schedule& s) {
    // The first run surfaces errors (Unsupported, launch failures) before any timing.
    job.call(s);
    detail::synchronize(dev);
    const auto t = detail::time_runs([&] { job.call(s); }, dev, std::max(0, o.warmup - 1), o.reps);
    if (!(t.median > 0) || t.median * o.reps >= o.min_timed_ms) return t.median;
    const double want = std::ceil(o.min_timed_ms / t.median);
    const int reps = static_cast<int>(std::min<double>(20.0 * o.reps, want));
    return detail::time_runs([&] { job.call(s); }, dev, 0, reps).median;
  };

  SearchOptions so;
  so.mode = o.mode;
  so.budget_s = o.budget_s;
  so.seed = o.seed;
  so.top_k = o.top_k;
  so.baselines = baselines_of(*job.space, job.heuristic);
  so.progress = o.progress;
  SearchOutcome out = run_search(*job.space, measure, score, so);
  r.candidates = out.candidates;
  r.budget_exhausted = out.budget_exhausted;
  if (out.best < 0) {
    std::string why;
    for (const auto& c : out.candidates) why += "\n  " + c.schedule.str() + ": " + c.error;
    throw Unsupported("tune: no candidate schedule could run this problem" +
                      (why.empty() ? std::string(" (the space is empty)") : why));
  }
  r.best = out.candidates[size_t(out.best)].schedule;
  r.best_ms = out.candidates[size_t(out.best)].ms;
  r.seconds = seconds_since(t0);

  if (o.store) {
    TuningCacheEntry e;
    e.key = r.key;
    e.schedule = r.best;
    e.ms = r.best_ms;
    e.op = job.key.op;
    e.sub_op = job.key.sub_op;
    e.device = job.key.device;
    e.version = spgnn_version();
    e.mode = name(o.mode);
    e.F = job.key.F;
    e.graph = job.key.graph;
    e.space_size = r.space_size;
    e.measured = r.candidates.size();
    e.tune_seconds = r.seconds;
    // Only fully specified schedules train the cost model: an unset parameter may be sized to
    // the graph by the launcher (gnnone), so its features would not describe what ran.
    // The cost models cover SpMM and SDDMM; the CBSR products' spaces are small enough for the
    // prior and the genetic search alone, so their timings train nothing.
    std::vector<Measurement> ms;
    // Half timings would teach the float32 model the wrong costs: they train nothing either.
    const bool trains_model = (job.op == OpKind::spmm || job.op == OpKind::sddmm) && f32;
    for (const auto& c : r.candidates) {
      if (!trains_model) break;
      if (!std::isfinite(c.ms)) continue;
      const auto at = job.space->find(c.schedule);
      if (!at || job.space->schedule(*at).params.size() != c.schedule.params.size()) continue;
      ms.push_back(Measurement{stats, c.schedule, c.ms, job.key.device});
    }
    try {
      tuning_cache_store(e, file);
      append_measurements(file, ms, job.key.sub_op);
      r.stored = true;
    } catch (const Error& ex) {
      std::fprintf(stderr, "spgnn: warning: the tuning result was not stored: %s\n", ex.what());
    }
  }
  r.seconds = seconds_since(t0);
  return r;
}

// A (cached) schedule this problem can run: a named strategy with legal parameters that
// supports the problem and passes its validity rules.
template <class P>
bool usable(OpKind op, const P& p, const Schedule& s,
            std::string (*problem)(const P&, const Schedule&)) {
  try {
    if (s.strategy == "auto") return false;
    check_schedule(op, s);
    return problem(p, s).empty();
  } catch (const Error&) {
    return false;
  }
}
bool usable_spmm(const detail::SpmmProblem& p, const Schedule& s) {
  return usable(OpKind::spmm, p, s, &detail::spmm_schedule_problem);
}
bool usable_sddmm(const detail::SddmmProblem& p, const Schedule& s) {
  return usable(OpKind::sddmm, p, s, &detail::sddmm_schedule_problem);
}
bool usable_cbsr(const detail::CbsrProblem& p, const Schedule& s) {
  return usable(p.op, p, s, &detail::cbsr_schedule_problem);
}

void check_cbsr_problem(const Graph& g, OpKind op, int64_t k, int64_t F, const char* fn) {
  detail::check_graph_arrays(g, fn);
  SPGNN_CHECK(op == OpKind::cbsr_spgemm || op == OpKind::cbsr_sspmm, InvalidArgument, fn,
              ": op must be cbsr_spgemm or cbsr_sspmm, got ", op_kind_name(op));
  SPGNN_CHECK(F >= 1 && F <= (int64_t{1} << 16), InvalidArgument, fn,
              ": F must be in 1..65536, got ", F);
  SPGNN_CHECK(k >= 1 && k <= F, InvalidArgument, fn, ": k must be in 1..F = ", F, ", got ", k);
}

// The problem `auto` sees for these arguments (no tensors: only shapes matter to supports()).
detail::SpmmProblem shape_only_spmm(const Graph& g, SpmmOp op, Reduce reduce, int64_t F,
                                    bool wide_e, DType dtype) {
  detail::SpmmProblem p;
  p.g = &g;
  p.dtype = dtype;
  p.op = op;
  p.reduce = reduce;
  p.F = F;
  const bool wide = op == SpmmOp::copy_e || wide_e;
  p.e_width = op == SpmmOp::copy_u ? 0 : (wide ? F : 1);
  return p;
}

detail::SddmmProblem shape_only_sddmm(const Graph& g, SddmmOp op, Target lhs, Target rhs,
                                      int64_t F, DType dtype) {
  detail::SddmmProblem p;
  p.g = &g;
  p.dtype = dtype;
  p.op = op;
  p.lhs_target = lhs;
  p.rhs_target = rhs;
  p.F = F;
  return p;
}

TuneSpace summarize(const Space& space, const std::vector<std::string>& unsupported) {
  TuneSpace out;
  out.size = space.size();
  out.valid = space.valid_count();
  for (size_t s = 0; s < space.strategies().size(); ++s) {
    TuneSpaceStrategy t;
    t.strategy = space.strategies()[s].name;
    for (const auto& p : space.strategies()[s].params) t.params.push_back(p.name);
    t.combinations = space.count(s);
    std::map<std::string, size_t> reasons;
    for (size_t i = space.offset(s); i < space.offset(s) + space.count(s); ++i) {
      if (space.valid(i)) {
        ++t.valid;
        continue;
      }
      std::string why = space.invalid_reason(i);
      why = why.substr(0, why.find(" ("));
      ++reasons[why];
    }
    t.invalid_reasons.assign(reasons.begin(), reasons.end());
    out.strategies.push_back(std::move(t));
  }
  for (const auto& u : unsupported) {
    TuneSpaceStrategy t;
    t.strategy = u.substr(0, u.find(':'));
    t.invalid_reasons.push_back({"unsupported: " + u.substr(u.find(':') + 2), 0});
    out.strategies.push_back(std::move(t));
  }
  return out;
}

}  // namespace
}  // namespace tune

TuneResult tune_spmm(const Graph& g, SpmmOp op, Reduce reduce, int64_t F, const TuneOptions& o) {
  const auto t0 = tune::Clock::now();
  detail::check_graph_arrays(g, "tune_spmm");
  SPGNN_CHECK(F >= 1, InvalidArgument, "tune_spmm: F must be >= 1, got ", F);
  tune::check_options(o, "tune_spmm");
  const Device dev = g.device();
  const bool wide = F > 1 && (op == SpmmOp::copy_e || o.wide_e);
  // Half problems: features (and wide edge operands) in the dtype, scalar edge weights in
  // float32, as the layers pass them (a GCN's normalised adjacency).
  Tensor u, e;
  if (op != SpmmOp::copy_e)
    u = tune::in_dtype(tune::random_input({g.n_cols, F}, o.seed + 1, dev), o.dtype);
  if (op != SpmmOp::copy_u) {
    e = tune::random_input({g.nnz(), wide ? F : 1}, o.seed + 2, dev, 0.5f, 1.5f);
    if (wide) e = tune::in_dtype(e, o.dtype);
  }
  Tensor out = Tensor::empty({g.n_rows, F}, o.dtype, dev);

  const detail::SpmmProblem p = tune::shape_only_spmm(g, op, reduce, F, o.wide_e, o.dtype);
  const tune::Space space = tune::space_for_spmm(p);
  tune::Job job;
  job.g = &g;
  job.op = OpKind::spmm;
  job.key = tune::spmm_key_parts(g, op, reduce, F, o.wide_e, o.dtype);
  job.space = &space;
  job.heuristic = detail::heuristic_spmm_schedule(p);
  job.call = [&](const Schedule& s) {
    OpOptions oo;
    oo.schedule = s;
    gspmm(g, op, reduce, u, e, out, oo);
  };
  job.usable = [&](const Schedule& s) { return tune::usable_spmm(p, s); };
  return tune::run_job(job, o, t0);
}

TuneResult tune_sddmm(const Graph& g, SddmmOp op, Target lhs_target, Target rhs_target, int64_t F,
                      const TuneOptions& o) {
  const auto t0 = tune::Clock::now();
  detail::check_graph_arrays(g, "tune_sddmm");
  SPGNN_CHECK(F >= 1, InvalidArgument, "tune_sddmm: F must be >= 1, got ", F);
  tune::check_options(o, "tune_sddmm");
  const Device dev = g.device();
  auto rows_of = [&](Target t) {
    return t == Target::u ? g.n_cols : t == Target::v ? g.n_rows : g.nnz();
  };
  Tensor lhs, rhs;
  if (op != SddmmOp::copy_rhs)
    lhs = tune::in_dtype(tune::random_input({rows_of(lhs_target), F}, o.seed + 3, dev), o.dtype);
  if (op != SddmmOp::copy_lhs)
    rhs = tune::in_dtype(tune::random_input({rows_of(rhs_target), F}, o.seed + 4, dev), o.dtype);
  Tensor out = Tensor::empty({g.nnz(), op == SddmmOp::dot ? 1 : F}, o.dtype, dev);

  const detail::SddmmProblem p = tune::shape_only_sddmm(g, op, lhs_target, rhs_target, F, o.dtype);
  const tune::Space space = tune::space_for_sddmm(p);
  tune::Job job;
  job.g = &g;
  job.op = OpKind::sddmm;
  job.key = tune::sddmm_key_parts(g, op, lhs_target, rhs_target, F, o.dtype);
  job.space = &space;
  job.heuristic = detail::heuristic_sddmm_schedule(p);
  job.call = [&](const Schedule& s) {
    OpOptions oo;
    oo.schedule = s;
    gsddmm(g, op, lhs, rhs, out, lhs_target, rhs_target, oo);
  };
  job.usable = [&](const Schedule& s) { return tune::usable_sddmm(p, s); };
  return tune::run_job(job, o, t0);
}

TuneResult tune_cbsr(const Graph& g, OpKind op, int64_t k, int64_t F, bool weighted,
                     const TuneOptions& o) {
  const auto t0 = tune::Clock::now();
  tune::check_cbsr_problem(g, op, k, F, "tune_cbsr");
  tune::check_options(o, "tune_cbsr");
  SPGNN_CHECK(o.dtype == DType::f32, InvalidArgument,
              "tune_cbsr: the CBSR products are tuned in float32; dtype must be f32, got ",
              dtype_name(o.dtype));
  const Device dev = g.device();
  const bool fwd = op == OpKind::cbsr_spgemm;
  // maxk of random rows: k distinct, ascending columns per row, as the layers produce.
  OpOptions device_kernel;
  device_kernel.schedule.strategy = dev.is_cuda() ? "gpu" : "cpu";
  const Cbsr kept = maxk(tune::random_input({g.n_cols, F}, o.seed + 1, dev), k, device_kernel);
  Tensor e, d_out;
  if (weighted) e = tune::random_input({g.nnz()}, o.seed + 2, dev, 0.5f, 1.5f);
  if (!fwd) d_out = tune::random_input({g.n_rows, F}, o.seed + 3, dev);
  Tensor out = fwd ? Tensor::empty({g.n_rows, F}, DType::f32, dev)
                   : Tensor::empty({g.n_cols, k}, DType::f32, dev);

  const detail::CbsrProblem p{&g, op, k, F, weighted};
  const tune::Space space = tune::space_for_cbsr(p);
  tune::Job job;
  job.g = &g;
  job.op = op;
  job.key = tune::cbsr_key_parts(g, op, k, F, weighted);
  job.space = &space;
  job.heuristic = Schedule{dev.is_cuda() ? "gpu" : "cpu", {}};
  job.call = [&](const Schedule& s) {
    OpOptions oo;
    oo.schedule = s;
    if (fwd) cbsr_spgemm(g, kept, e, out, oo);
    else cbsr_sspmm(g, e, d_out, kept, out, oo);
  };
  job.usable = [&](const Schedule& s) { return tune::usable_cbsr(p, s); };
  return tune::run_job(job, o, t0);
}

TuneSpace cbsr_tune_space(const Graph& g, OpKind op, int64_t k, int64_t F, bool weighted) {
  tune::check_cbsr_problem(g, op, k, F, "cbsr_tune_space");
  const detail::CbsrProblem p{&g, op, k, F, weighted};
  std::vector<std::string> unsupported;
  const tune::Space space = tune::space_for_cbsr(p, &unsupported);
  return tune::summarize(space, unsupported);
}

std::string cbsr_tuning_key(const Graph& g, OpKind op, int64_t k, int64_t F, bool weighted) {
  tune::check_cbsr_problem(g, op, k, F, "cbsr_tuning_key");
  return tune::cbsr_key_parts(g, op, k, F, weighted).str();
}

TuneSpace spmm_tune_space(const Graph& g, SpmmOp op, Reduce reduce, int64_t F, bool wide_e,
                          DType dtype) {
  detail::check_graph_arrays(g, "spmm_tune_space");
  SPGNN_CHECK(F >= 1, InvalidArgument, "spmm_tune_space: F must be >= 1, got ", F);
  tune::check_feature_dtype(dtype, "spmm_tune_space");
  const detail::SpmmProblem p = tune::shape_only_spmm(g, op, reduce, F, wide_e, dtype);
  std::vector<std::string> unsupported;
  const tune::Space space = tune::space_for_spmm(p, &unsupported);
  return tune::summarize(space, unsupported);
}

TuneSpace sddmm_tune_space(const Graph& g, SddmmOp op, Target lhs_target, Target rhs_target,
                           int64_t F, DType dtype) {
  detail::check_graph_arrays(g, "sddmm_tune_space");
  SPGNN_CHECK(F >= 1, InvalidArgument, "sddmm_tune_space: F must be >= 1, got ", F);
  tune::check_feature_dtype(dtype, "sddmm_tune_space");
  const detail::SddmmProblem p = tune::shape_only_sddmm(g, op, lhs_target, rhs_target, F, dtype);
  std::vector<std::string> unsupported;
  const tune::Space space = tune::space_for_sddmm(p, &unsupported);
  return tune::summarize(space, unsupported);
}

std::string spmm_tuning_key(const Graph& g, SpmmOp op, Reduce reduce, int64_t F, bool wide_e,
                            DType dtype) {
  detail::check_graph_arrays(g, "spmm_tuning_key");
  tune::check_feature_dtype(dtype, "spmm_tuning_key");
  return tune::spmm_key_parts(g, op, reduce, F, wide_e, dtype).str();
}

std::string sddmm_tuning_key(const Graph& g, SddmmOp op, Target lhs_target, Target rhs_target,
                             int64_t F, DType dtype) {
  detail::check_graph_arrays(g, "sddmm_tuning_key");
  tune::check_feature_dtype(dtype, "sddmm_tuning_key");
  return tune::sddmm_key_parts(g, op, lhs_target, rhs_target, F, dtype).str();
}

// ---- tune on miss and `auto`'s cache hook --------------------------------------------------------

namespace tune {
namespace {

struct MissState {
  std::mutex mutex;          // guards the fields; tuning itself runs under `tuning`
  std::mutex tuning;         // one tune-on-miss at a time per process
  bool enabled = false;
  TuneOptions options;
  std::map<std::string, std::optional<Schedule>> done;  // key -> result (empty: tuning failed)
};
MissState& miss_state() {
  static MissState s;
  return s;
}
// Set while this thread is tuning, so nothing the tuner runs re-enters tune-on-miss.
thread_local bool t_in_tuning = false;

bool cache_disabled() {
  const char* v = std::getenv("SPGNN_TUNING_CACHE");
  return v && (std::strcmp(v, "off") == 0 || std::strcmp(v, "0") == 0 ||
               std::strcmp(v, "false") == 0);
}

template <class MakeKey, class Usable, class Tune>
std::optional<Schedule> lookup_or_tune(int64_t F, const MakeKey& make_key, const Usable& usable,
                                       const Tune& tune_fn) {
  if (t_in_tuning || F <= 0 || cache_disabled()) return std::nullopt;
  MissState& ms = miss_state();
  bool on_miss;
  TuneOptions options;
  {
    std::lock_guard<std::mutex> lock(ms.mutex);
    on_miss = ms.enabled;
    options = ms.options;
  }
  const std::string file = tuning_cache_path();
  if (!on_miss && !cache_has_entries(file)) return std::nullopt;
  const std::string key = make_key();
  if (auto e = tuning_cache_lookup(key, file); e && usable(e->schedule)) return e->schedule;
  if (!on_miss) return std::nullopt;

  std::lock_guard<std::mutex> tuning(ms.tuning);
  {
    std::lock_guard<std::mutex> lock(ms.mutex);
    auto it = ms.done.find(key);
    if (it != ms.done.end()) return it->second;  // tuned (or failed) once already
  }
  std::optional<Schedule> result;
  if (options.cache_path.empty()) options.cache_path = file;
  t_in_tuning = true;
  try {
    const TuneResult r = tune_fn(options);
    if (usable(r.best)) result = r.best;
  } catch (const Error& ex) {
    std::fprintf(stderr, "spgnn: warning: tuning on a cache miss failed, using the heuristic: %s\n",
                 ex.what());
  }
  t_in_tuning = false;
  std::lock_guard<std::mutex> lock(ms.mutex);
  ms.done[key] = result;
  return result;
}

}  // namespace

// SpMM and SDDMM are keyed and tuned in their features' dtype (float32 and half problems never
// share an entry). A half SpMM whose edge weights are scalar float32 is keyed as the tuner times
// it; other mixes (e.g. scalar half weights) read the same entry, whose schedule `usable` checks.
std::optional<Schedule> cached_spmm_schedule(const detail::SpmmProblem& p) {
  if (p.dtype != DType::f32 && !is_half(p.dtype)) return std::nullopt;
  const bool wide = p.uses_e() && p.F > 1 && p.e_width == p.F;
  return lookup_or_tune(
      p.F, [&] { return spmm_key_parts(*p.g, p.op, p.reduce, p.F, wide, p.dtype).str(); },
      [&](const Schedule& s) { return usable_spmm(p, s); },
      [&](TuneOptions o) {
        o.wide_e = wide;
        o.dtype = p.dtype;
        return tune_spmm(*p.g, p.op, p.reduce, p.F, o);
      });
}

std::optional<Schedule> cached_sddmm_schedule(const detail::SddmmProblem& p) {
  if (p.dtype != DType::f32 && !is_half(p.dtype)) return std::nullopt;
  return lookup_or_tune(
      p.F,
      [&] { return sddmm_key_parts(*p.g, p.op, p.lhs_target, p.rhs_target, p.F, p.dtype).str(); },
      [&](const Schedule& s) { return usable_sddmm(p, s); },
      [&](TuneOptions o) {
        o.dtype = p.dtype;
        return tune_sddmm(*p.g, p.op, p.lhs_target, p.rhs_target, p.F, o);
      });
}

std::optional<Schedule> cached_cbsr_schedule(const detail::CbsrProblem& p) {
  if (p.dtype != DType::f32) return std::nullopt;
  return lookup_or_tune(
      p.F, [&] { return cbsr_key_parts(*p.g, p.op, p.k, p.F, p.weighted).str(); },
      [&](const Schedule& s) { return usable_cbsr(p, s); },
      [&](TuneOptions o) {
        o.dtype = DType::f32;
        return tune_cbsr(*p.g, p.op, p.k, p.F, p.weighted, o);
      });
}

}  // namespace tune

void set_tune_on_miss(bool enabled, const TuneOptions& options) {
  tune::check_options(options, "set_tune_on_miss");
  tune::MissState& ms = tune::miss_state();
  std::lock_guard<std::mutex> lock(ms.mutex);
  ms.enabled = enabled;
  ms.options = options;
  ms.done.clear();
}

bool tune_on_miss() {
  tune::MissState& ms = tune::miss_state();
  std::lock_guard<std::mutex> lock(ms.mutex);
  return ms.enabled;
}

}  // namespace spgnn
