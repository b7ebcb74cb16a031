// `spgnn bench gat`: the fused GAT aggregation against the unfused composition (and the two
// backward variants), each checked against the float64 reference first. Routed from cmd_bench.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "spgnn/commands.hpp"

namespace spgnn::cli {

struct GatBenchArgs {
  std::vector<std::string> graphs{"builtin"};
  std::vector<std::string> names;
  std::vector<int64_t> dims{32};   // F per head
  std::vector<int64_t> heads{1, 4};
  std::string device = "auto";
  int warmup = 5, reps = 20;
  std::string format = "table";
  bool no_check = false;
  bool backward = true;
  uint64_t seed = 1;
  int64_t check_rows = 4096;
  LoadFlags flags;
  std::vector<std::string> params;  // key=value for the fused strategy (e.g. heavy_deg)
  std::vector<std::string> dtypes{"f32"};  // f32, f16, bf16: every tensor of the op
  double attn_dropout = 0;  // dropout on the attention weights, as in training
};

void run_bench_gat(const GatBenchArgs& args);

}  // namespace spgnn::cli
