// Strategies, schedules and the registry queries. A strategy is one way to compute an op; its
// parameters are tunable; a strategy plus parameter values is a schedule.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "spgnn/tensor.hpp"

namespace spgnn {

// The CBSR products of MaxK-GNN (cbsr_spgemm, cbsr_sspmm in ops.hpp) are op kinds too: their
// GPU kernel's parameters are declared here like the SpMM/SDDMM strategies', and the autotuner
// covers them (tune_cbsr in tune.hpp).
enum class OpKind : uint8_t { spmm, sddmm, cbsr_spgemm, cbsr_sspmm };
const char* op_kind_name(OpKind k);
// "spmm", "sddmm", "cbsr_spgemm" or "cbsr_sspmm"; InvalidArgument names the legal values.
OpKind parse_op_kind(const std::string& s);

struct Schedule {
  std::string strategy = "auto";
  std::map<std::string, int64_t> params;  // missing parameters take their defaults
  std::string str() const;                // "gnnone(cache_size=128,warps=4)"
};
// Parses "name" or "name:key=value,key=value" (the CLI's --strategy/--param syntax).
Schedule parse_schedule(const std::string& text);

struct ParamSpec {
  std::string name;
  std::vector<int64_t> values;  // the legal values (the search space)
  int64_t default_value = 0;
  std::string help;
  // False for switches that exist to reproduce a paper's ablation figures (they only make a
  // kernel slower): the autotuner leaves them at their defaults and never searches them.
  bool tunable = true;
};

struct StrategyInfo {
  std::string name;
  OpKind op = OpKind::spmm;
  DeviceType device = DeviceType::cpu;
  std::string description;
  std::vector<ParamSpec> params;
};

// Strategies compiled into this build for an op (CUDA ones only when built with CUDA).
std::vector<StrategyInfo> list_strategies(OpKind op);
// Throws InvalidArgument (listing the known names) for an unknown strategy, and for a parameter
// the strategy does not declare or a value outside its legal set.
const StrategyInfo& find_strategy(OpKind op, const std::string& name);
void check_schedule(OpKind op, const Schedule& s);

// Whether gspmm's half-precision GPU kernel beat float32 at feature width F on every graph of
// the measurements behind `auto` (multiples of 8 from 64 to 256, then multiples of 64;
// docs/STRATEGIES.md): code that picks an aggregation's dtype without seeing the graph (the
// Python package under torch.autocast) keeps float32 at other widths; `spgnn train --dtype
// bf16|f16` also reads the graph's degrees.
bool half_spmm_width_pays(int64_t F);

// The row-degree statistics `auto` picks GPU kernels by. They are computed from g's offsets on
// first use (for a graph on a GPU that copies the offsets to the host: a wait for the GPU) and
// cached with g.
struct DegreeSummary {
  int64_t max_degree = 0, empty_rows = 0;
  double sum_sq = 0;  // the sum of the squared row degrees
};
struct Graph;
DegreeSummary degree_summary(const Graph& g);
// Hands in g's statistics, computed where g lives: the Python package's GPU build reads them
// back with the few numbers it reads anyway, so a new graph costs `auto` no wait of its own
// (a mini-batch loop builds one every step). They steer kernel choices only, never results;
// values no graph of g's sizes can have are refused. A no-op when g has them already.
void provide_degree_summary(const Graph& g, const DegreeSummary& s);

}  // namespace spgnn
