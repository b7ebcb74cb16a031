// The autotuner's search (issue 7, G-Sparse §D): the space ranked by the cost model or a prior,
// then a small genetic search, a random sample, or every point, each timed at most once.
#include "tune/search.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <tuple>

namespace spgnn::tune {

std::vector<size_t> rank_space(const Space& space, const ScoreFn& score) {
  std::vector<size_t> v = space.valid_indices();
  if (score) {
    std::vector<double> s(space.size(), INFINITY);
    for (size_t i : v) {
      const double x = score(i);
      s[i] = std::isfinite(x) ? x : INFINITY;
    }
    std::stable_sort(v.begin(), v.end(), [&](size_t a, size_t b) { return s[a] < s[b]; });
    return v;
  }
  // The prior: a strategy's declared defaults are its authors' best single guess, and nearby
  // values are the next best. Equal distances interleave the strategies, so a pruned space of a
  // few points still covers every strategy instead of the first one's neighbourhood.
  std::map<std::pair<size_t, int>, int> seen;
  std::vector<std::tuple<int, int, size_t, size_t>> keyed;
  for (size_t i : v) {
    const size_t s = space.point(i).strategy;
    const int d = space.distance_from_default(i);
    keyed.emplace_back(d, seen[{s, d}]++, s, i);
  }
  std::sort(keyed.begin(), keyed.end());
  for (size_t k = 0; k < keyed.size(); ++k) v[k] = std::get<3>(keyed[k]);
  return v;
}

namespace {

// Uniform doubles and integers from the 64-bit engine with our own arithmetic: the standard
// distributions are implementation-defined, and a seed must give the same search everywhere.
struct Rng {
  std::mt19937_64 engine;
  explicit Rng(uint64_t seed) : engine(seed) {}
  double uniform() { return double(engine() >> 11) * (1.0 / 9007199254740992.0); }
  size_t below(size_t n) { return n ? size_t(engine() % n) : 0; }
  bool coin() { return (engine() >> 63) != 0; }
};

class Runner {
 public:
  Runner(const Space& space, const MeasureFn& measure, const SearchOptions& o, size_t planned)
      : space_(space), measure_(measure), o_(o), planned_(planned),
        start_(std::chrono::steady_clock::now()) {}

  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  bool stopped() const { return stopped_; }
  bool measured(const Schedule& s) const { return seen_.count(s.str()) > 0; }

  // Times `s` unless it was timed already; false when the budget stopped the search first.
  bool eval(const Schedule& s, bool baseline) {
    const std::string key = s.str();
    if (seen_.count(key)) return true;
    if (stopped_) return false;
    const bool over_time = o_.budget_s > 0 && elapsed() >= o_.budget_s;
    const bool over_count = o_.max_measurements > 0 && out_.candidates.size() >= o_.max_measurements;
    if (!out_.candidates.empty() && (over_time || over_count)) {
      stopped_ = true;
      out_.budget_exhausted = true;
      return false;
    }
    TuneCandidate c;
    c.schedule = s;
    c.baseline = baseline;
    try {
      c.ms = measure_(s);
      if (!std::isfinite(c.ms) || c.ms < 0) {
        c.error = "measurement returned " + std::to_string(c.ms) + " ms";
        c.ms = NAN;
      }
    } catch (const std::exception& e) {
      c.ms = NAN;
      c.error = e.what();
    }
    seen_[key] = out_.candidates.size();
    out_.candidates.push_back(c);
    if (std::isfinite(c.ms) && (out_.best < 0 || c.ms < out_.candidates[size_t(out_.best)].ms))
      out_.best = long(out_.candidates.size() - 1);
    if (o_.progress) {
      TuneProgress p;
      p.measured = out_.candidates.size();
      p.planned = std::max(planned_, p.measured);
      p.elapsed_s = elapsed();
      p.best_ms = out_.best >= 0 ? out_.candidates[size_t(out_.best)].ms : NAN;
      p.last = key;
      o_.progress(p);
    }
    return true;
  }

  // 1 / median ms of a timed point; 0 when it failed or was not timed.
  double fitness(size_t i) const {
    auto it = seen_.find(space_.schedule(i).str());
    if (it == seen_.end()) return 0;
    const double ms = out_.candidates[it->second].ms;
    return std::isfinite(ms) && ms > 0 ? 1.0 / ms : 0;
  }

  SearchOutcome finish() {
    out_.seconds = elapsed();
    return std::move(out_);
  }

 private:
  const Space& space_;
  const MeasureFn& measure_;
  const SearchOptions& o_;
  size_t planned_;
  std::chrono::steady_clock::time_point start_;
  std::map<std::string, size_t> seen_;
  SearchOutcome out_;
  bool stopped_ = false;
};

// Moves each parameter to a neighbouring legal value with probability `rate` (`force`: at least
// one parameter moves when any can).
void mutate(const Space& space, Space::Point& p, double rate, bool force, Rng& rng) {
  const auto& params = space.strategies()[p.strategy].params;
  std::vector<size_t> movable;
  for (size_t k = 0; k < params.size(); ++k)
    if (params[k].values.size() > 1) movable.push_back(k);
  auto step = [&](size_t k) {
    const int n = int(params[k].values.size());
    int& v = p.v[k];
    if (v == 0) v = 1;
    else if (v == n - 1) v = n - 2;
    else v += rng.coin() ? 1 : -1;
  };
  bool moved = false;
  for (size_t k : movable)
    if (rng.uniform() < rate) {
      step(k);
      moved = true;
    }
  if (force && !moved && !movable.empty()) step(movable[rng.below(movable.size())]);
}

size_t roulette(const std::vector<size_t>& pop, const std::vector<double>& fit, Rng& rng) {
  double total = 0;
  for (double f : fit) total += f;
  if (!(total > 0)) return pop[rng.below(pop.size())];
  double r = rng.uniform() * total;
  for (size_t k = 0; k < pop.size(); ++k) {
    r -= fit[k];
    if (r < 0) return pop[k];
  }
  return pop.back();
}

// One child: uniform crossover of two roulette-picked parents of the same strategy (a pair of
// different strategies gives a mutant of the first), 20% mutation, an invalid result replaced
// by its nearest valid point. A few retries look for a child not timed yet.
size_t breed(const Space& space, const std::vector<size_t>& pop, const std::vector<double>& fit,
             const std::set<size_t>& taken, const Runner& runner, const SearchOptions& o,
             Rng& rng) {
  constexpr int kTries = 8;
  size_t child = pop.front();
  for (int attempt = 0; attempt < kTries; ++attempt) {
    const size_t a = roulette(pop, fit, rng), b = roulette(pop, fit, rng);
    const Space::Point pa = space.point(a), pb = space.point(b);
    Space::Point c = pa;
    if (pa.strategy == pb.strategy) {
      for (size_t k = 0; k < c.v.size(); ++k) c.v[k] = rng.coin() ? pa.v[k] : pb.v[k];
      mutate(space, c, o.mutation, false, rng);
    } else {
      mutate(space, c, o.mutation, true, rng);
    }
    size_t idx = space.index(c);
    if (!space.valid(idx)) {
      const auto near = space.nearest_valid(idx);
      if (!near) continue;
      idx = *near;
    }
    child = idx;
    if (!taken.count(idx) && !runner.measured(space.schedule(idx))) break;
  }
  return child;
}

}  // namespace

SearchOutcome run_search(const Space& space, const MeasureFn& measure, const ScoreFn& score,
                         const SearchOptions& o) {
  SPGNN_CHECK(o.top_k >= 1, InvalidArgument, "tune: top_k must be >= 1, got ", o.top_k);
  const std::vector<size_t> ranking = rank_space(space, score);
  const size_t P = std::min(size_t(o.top_k), ranking.size());
  const size_t elite = std::min(size_t(std::max(0, o.elite)), P > 0 ? P - 1 : 0);
  size_t planned = o.baselines.size();
  if (o.mode == TuneMode::exhaustive) planned += ranking.size();
  else if (o.mode == TuneMode::random) planned += std::min(size_t(std::max(0, o.random_samples)), P);
  else planned += P + size_t(std::max(0, o.generations)) * (P - elite);

  Runner run(space, measure, o, planned);
  Rng rng(o.seed);
  for (const auto& b : o.baselines) run.eval(b, true);

  if (o.mode == TuneMode::exhaustive) {
    for (size_t i : space.valid_indices())
      if (!run.eval(space.schedule(i), false)) break;
  } else if (o.mode == TuneMode::random) {
    std::vector<size_t> pool(ranking.begin(), ranking.begin() + long(P));
    for (size_t k = 0; k < pool.size(); ++k) std::swap(pool[k], pool[k + rng.below(pool.size() - k)]);
    pool.resize(std::min(pool.size(), size_t(std::max(0, o.random_samples))));
    for (size_t i : pool)
      if (!run.eval(space.schedule(i), false)) break;
  } else if (P > 0) {
    std::vector<size_t> pop(ranking.begin(), ranking.begin() + long(P));
    for (size_t i : pop)
      if (!run.eval(space.schedule(i), false)) break;
    for (int gen = 0; gen < o.generations && !run.stopped(); ++gen) {
      std::stable_sort(pop.begin(), pop.end(),
                       [&](size_t a, size_t b) { return run.fitness(a) > run.fitness(b); });
      std::vector<double> fit;
      for (size_t i : pop) fit.push_back(run.fitness(i));
      std::vector<size_t> next(pop.begin(), pop.begin() + long(elite));
      std::set<size_t> taken(next.begin(), next.end());
      while (next.size() < P) {
        const size_t child = breed(space, pop, fit, taken, run, o, rng);
        next.push_back(child);
        taken.insert(child);
      }
      for (size_t k = elite; k < next.size(); ++k)
        if (!run.eval(space.schedule(next[k]), false)) break;
      pop = std::move(next);
    }
  }
  return run.finish();
}

}  // namespace spgnn::tune
