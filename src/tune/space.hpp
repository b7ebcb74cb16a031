// Internal: the autotuner's search space. A space is a list of strategies, each the cartesian
// product of its tunable parameters' legal values (mixed-radix indices, last parameter fastest),
// with a validity predicate evaluated once per point. Built from the registry for a problem
// (space_for_spmm / space_for_sddmm) or by hand in tests.
#pragma once
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dispatch/problem.hpp"
#include "spgnn/schedule.hpp"

namespace spgnn::tune {

struct SpaceStrategy {
  std::string name;
  std::vector<ParamSpec> params;  // tunable parameters only, values in declared order
};

class Space {
 public:
  // "" = valid, else the reason; called once per point at construction.
  using Validate = std::function<std::string(const Schedule&)>;
  struct Point {
    size_t strategy = 0;
    std::vector<int> v;  // value index per parameter of the strategy
  };

  Space() = default;
  Space(OpKind op, std::vector<SpaceStrategy> strategies, const Validate& validate);

  OpKind op() const { return op_; }
  const std::vector<SpaceStrategy>& strategies() const { return strategies_; }
  size_t size() const { return size_; }
  size_t valid_count() const { return n_valid_; }
  bool valid(size_t i) const { return reasons_[i].empty(); }
  const std::string& invalid_reason(size_t i) const { return reasons_[i]; }
  std::vector<size_t> valid_indices() const;
  // First index and number of points of strategy s.
  size_t offset(size_t s) const { return offsets_[s]; }
  size_t count(size_t s) const { return offsets_[s + 1] - offsets_[s]; }

  Point point(size_t i) const;
  size_t index(const Point& p) const;
  // Every tunable parameter set explicitly (so strategies that size unset parameters to the
  // graph, like gnnone, run exactly the point that was searched).
  Schedule schedule(size_t i) const;
  // The point with every parameter at its declared default.
  size_t default_index(size_t strategy) const;
  // Sum over parameters of |value index - default value index|.
  int distance_from_default(size_t i) const;
  // The point of a schedule: every tunable parameter taken from it (default when unset). Empty
  // when the strategy is not in the space, a value is not legal, or a non-tunable parameter is
  // set to something other than its default.
  std::optional<size_t> find(const Schedule& s) const;
  // The valid point of the same strategy nearest to i: fewest differing parameters, then the
  // smallest sum of value-index distances, then the lowest index. Empty when none is valid.
  std::optional<size_t> nearest_valid(size_t i) const;

 private:
  OpKind op_ = OpKind::spmm;
  std::vector<SpaceStrategy> strategies_;
  std::vector<size_t> offsets_{0};
  std::vector<std::string> reasons_;
  size_t size_ = 0, n_valid_ = 0;
};

// The space of a checked problem: every strategy of the problem's device except cpu_ref whose
// supports() accepts it, with the registry's validate() rules. `unsupported` (optional) receives
// "strategy: reason" for the strategies left out.
Space space_for_spmm(const detail::SpmmProblem& p, std::vector<std::string>* unsupported = nullptr);
Space space_for_sddmm(const detail::SddmmProblem& p,
                      std::vector<std::string>* unsupported = nullptr);
Space space_for_cbsr(const detail::CbsrProblem& p, std::vector<std::string>* unsupported = nullptr);

}  // namespace spgnn::tune
