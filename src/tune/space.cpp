#include "tune/space.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "dispatch/registry.hpp"

namespace spgnn::tune {

Space::Space(OpKind op, std::vector<SpaceStrategy> strategies, const Validate& validate)
    : op_(op), strategies_(std::move(strategies)) {
  for (const auto& s : strategies_) {
    size_t n = 1;
    for (const auto& p : s.params) {
      SPGNN_CHECK(!p.values.empty(), InvalidArgument, "tune space: parameter ", s.name, ".",
                  p.name, " has no values");
      n *= p.values.size();
    }
    offsets_.push_back(offsets_.back() + n);
  }
  size_ = offsets_.back();
  reasons_.resize(size_);
  for (size_t i = 0; i < size_; ++i) {
    if (validate) reasons_[i] = validate(schedule(i));
    n_valid_ += reasons_[i].empty();
  }
}

std::vector<size_t> Space::valid_indices() const {
  std::vector<size_t> v;
  for (size_t i = 0; i < size_; ++i)
    if (valid(i)) v.push_back(i);
  return v;
}

Space::Point Space::point(size_t i) const {
  SPGNN_CHECK(i < size_, InvalidArgument, "tune space: index ", i, " out of ", size_);
  Point p;
  p.strategy = size_t(std::upper_bound(offsets_.begin(), offsets_.end(), i) - offsets_.begin()) - 1;
  size_t rest = i - offsets_[p.strategy];
  const auto& params = strategies_[p.strategy].params;
  p.v.assign(params.size(), 0);
  for (size_t k = params.size(); k-- > 0;) {
    const size_t n = params[k].values.size();
    p.v[k] = static_cast<int>(rest % n);
    rest /= n;
  }
  return p;
}

size_t Space::index(const Point& p) const {
  const auto& params = strategies_.at(p.strategy).params;
  size_t i = 0;
  for (size_t k = 0; k < params.size(); ++k) i = i * params[k].values.size() + size_t(p.v[k]);
  return offsets_[p.strategy] + i;
}

Schedule Space::schedule(size_t i) const {
  const Point p = point(i);
  const auto& s = strategies_[p.strategy];
  Schedule out{s.name, {}};
  for (size_t k = 0; k < s.params.size(); ++k)
    out.params[s.params[k].name] = s.params[k].values[size_t(p.v[k])];
  return out;
}

namespace {
int default_value_index(const ParamSpec& spec) {
  auto it = std::find(spec.values.begin(), spec.values.end(), spec.default_value);
  return it == spec.values.end() ? 0 : int(it - spec.values.begin());
}
}  // namespace

size_t Space::default_index(size_t strategy) const {
  Point p;
  p.strategy = strategy;
  for (const auto& spec : strategies_.at(strategy).params) p.v.push_back(default_value_index(spec));
  return index(p);
}

int Space::distance_from_default(size_t i) const {
  const Point p = point(i);
  const auto& params = strategies_[p.strategy].params;
  int d = 0;
  for (size_t k = 0; k < params.size(); ++k) d += std::abs(p.v[k] - default_value_index(params[k]));
  return d;
}

std::optional<size_t> Space::find(const Schedule& s) const {
  for (size_t si = 0; si < strategies_.size(); ++si) {
    if (strategies_[si].name != s.strategy) continue;
    const auto& params = strategies_[si].params;
    Point p;
    p.strategy = si;
    size_t matched = 0;
    for (const auto& spec : params) {
      auto it = s.params.find(spec.name);
      int v = default_value_index(spec);
      if (it != s.params.end()) {
        auto at = std::find(spec.values.begin(), spec.values.end(), it->second);
        if (at == spec.values.end()) return std::nullopt;
        v = int(at - spec.values.begin());
        ++matched;
      }
      p.v.push_back(v);
    }
    if (matched != s.params.size()) {
      // Parameters outside the tunable set must be at their registry defaults.
      const StrategyInfo* info = nullptr;
      try {
        info = &find_strategy(op_, s.strategy);
      } catch (const Error&) {
        return std::nullopt;
      }
      for (const auto& [k, v] : s.params) {
        const bool tunable = std::any_of(params.begin(), params.end(),
                                         [&](const ParamSpec& q) { return q.name == k; });
        if (tunable) continue;
        auto spec = std::find_if(info->params.begin(), info->params.end(),
                                 [&](const ParamSpec& q) { return q.name == k; });
        if (spec == info->params.end() || spec->default_value != v) return std::nullopt;
      }
    }
    return index(p);
  }
  return std::nullopt;
}

std::optional<size_t> Space::nearest_valid(size_t i) const {
  if (valid(i)) return i;
  const Point p = point(i);
  std::optional<size_t> best;
  int best_diff = std::numeric_limits<int>::max(), best_dist = best_diff;
  const size_t lo = offsets_[p.strategy], hi = offsets_[p.strategy + 1];
  for (size_t j = lo; j < hi; ++j) {
    if (!valid(j)) continue;
    const Point q = point(j);
    int diff = 0, dist = 0;
    for (size_t k = 0; k < p.v.size(); ++k) {
      diff += p.v[k] != q.v[k];
      dist += std::abs(p.v[k] - q.v[k]);
    }
    if (diff < best_diff || (diff == best_diff && dist < best_dist)) {
      best = j;
      best_diff = diff;
      best_dist = dist;
    }
  }
  return best;
}

namespace {
template <class Entry, class P, class ValidFn>
Space build(OpKind op, const std::vector<Entry>& reg, const P& p, std::vector<std::string>* why,
            ValidFn valid_fn) {
  const DeviceType dev = p.g->device().is_cuda() ? DeviceType::cuda : DeviceType::cpu;
  std::vector<SpaceStrategy> strategies;
  for (const auto& e : reg) {
    if (e.info.device != dev || e.info.name == "cpu_ref") continue;
    const std::string reason = e.supports(p);
    if (!reason.empty()) {
      if (why) why->push_back(e.info.name + ": " + reason);
      continue;
    }
    SpaceStrategy s{e.info.name, {}};
    for (const auto& spec : e.info.params)
      if (spec.tunable) s.params.push_back(spec);
    strategies.push_back(std::move(s));
  }
  return Space(op, std::move(strategies), valid_fn);
}
}  // namespace

Space space_for_spmm(const detail::SpmmProblem& p, std::vector<std::string>* unsupported) {
  return build(OpKind::spmm, detail::spmm_registry(), p, unsupported, [&p](const Schedule& s) {
    const auto& e = detail::spmm_entry(s.strategy);
    return e.validate ? e.validate(p, s) : std::string();
  });
}

Space space_for_sddmm(const detail::SddmmProblem& p, std::vector<std::string>* unsupported) {
  return build(OpKind::sddmm, detail::sddmm_registry(), p, unsupported, [&p](const Schedule& s) {
    const auto& e = detail::sddmm_entry(s.strategy);
    return e.validate ? e.validate(p, s) : std::string();
  });
}

Space space_for_cbsr(const detail::CbsrProblem& p, std::vector<std::string>* unsupported) {
  return build(p.op, detail::cbsr_registry(p.op), p, unsupported, [&p](const Schedule& s) {
    const auto& e = detail::cbsr_entry(p.op, s.strategy);
    return e.validate ? e.validate(p, s) : std::string();
  });
}

}  // namespace spgnn::tune
