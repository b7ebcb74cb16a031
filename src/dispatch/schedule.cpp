// Schedules: parsing, printing and checking against the registry's declared parameter spaces.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "dispatch/registry.hpp"
#include "spgnn/schedule.hpp"

namespace spgnn {

std::string Schedule::str() const {
  std::string s = strategy;
  if (params.empty()) return s;
  s += "(";
  bool first = true;
  for (const auto& [k, v] : params) {
    s += (first ? "" : ",") + k + "=" + std::to_string(v);
    first = false;
  }
  return s + ")";
}

Schedule parse_schedule(const std::string& text) {
  Schedule s;
  const size_t colon = text.find(':');
  s.strategy = text.substr(0, colon);
  SPGNN_CHECK(!s.strategy.empty(), InvalidArgument, "schedule '", text,
              "': expected name or name:key=value,...");
  if (colon == std::string::npos) return s;
  std::stringstream rest(text.substr(colon + 1));
  std::string item;
  while (std::getline(rest, item, ',')) {
    const size_t eq = item.find('=');
    SPGNN_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < item.size(), InvalidArgument,
                "schedule '", text, "': parameter '", item, "' is not key=value");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(value.c_str(), &end, 10);
    SPGNN_CHECK(end && *end == '\0' && errno == 0 && !std::isspace(static_cast<unsigned char>(value[0])),
                InvalidArgument, "schedule '", text, "': value of '", key,
                "' must be an integer, got '", value, "'");
    // "row_cost=1,row_cost=2" would otherwise run with one of the two silently.
    SPGNN_CHECK(s.params.count(key) == 0, InvalidArgument, "schedule '", text, "': parameter '",
                key, "' is given twice");
    s.params[key] = v;
  }
  return s;
}

std::vector<StrategyInfo> list_strategies(OpKind op) {
  std::vector<StrategyInfo> out;
  if (op == OpKind::spmm)
    for (const auto& e : detail::spmm_registry()) out.push_back(e.info);
  else if (op == OpKind::sddmm)
    for (const auto& e : detail::sddmm_registry()) out.push_back(e.info);
  else
    for (const auto& e : detail::cbsr_registry(op)) out.push_back(e.info);
  return out;
}

const StrategyInfo& find_strategy(OpKind op, const std::string& name) {
  if (op == OpKind::spmm) return detail::spmm_entry(name).info;
  if (op == OpKind::sddmm) return detail::sddmm_entry(name).info;
  return detail::cbsr_entry(op, name).info;
}

void check_schedule(OpKind op, const Schedule& s) {
  if (s.strategy == "auto") {
    SPGNN_CHECK(s.params.empty(), InvalidArgument,
                "strategy 'auto' takes no parameters; name a strategy to set them");
    return;
  }
  detail::check_params(find_strategy(op, s.strategy), s);
}

namespace detail {
void check_params(const StrategyInfo& info, const Schedule& s) {
  for (const auto& [k, v] : s.params) {
    auto it = std::find_if(info.params.begin(), info.params.end(),
                           [&](const ParamSpec& p) { return p.name == k; });
    if (it == info.params.end()) {
      std::string known;
      for (const auto& p : info.params) known += (known.empty() ? "" : ", ") + p.name;
      throw InvalidArgument("strategy '" + s.strategy + "' has no parameter '" + k + "'" +
                            (known.empty() ? " (it takes none)" : "; its parameters: " + known));
    }
    if (std::find(it->values.begin(), it->values.end(), v) == it->values.end()) {
      std::string legal;
      for (int64_t x : it->values) legal += (legal.empty() ? "" : ", ") + std::to_string(x);
      throw InvalidArgument("parameter " + s.strategy + "." + k + "=" + std::to_string(v) +
                            " is out of range; legal values: " + legal);
    }
  }
}

int64_t param(const Schedule& s, const std::string& name, int64_t fallback) {
  auto it = s.params.find(name);
  return it == s.params.end() ? fallback : it->second;
}
}  // namespace detail

}  // namespace spgnn
