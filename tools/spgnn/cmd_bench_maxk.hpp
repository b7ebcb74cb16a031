// `spgnn bench maxk`: the MaxK-GNN kernels (maxk, CBSR SpGEMM forward, CBSR SSpMM backward) next
// to cuSPARSE SpMM at the same width F, each checked against the float64 reference on sampled
// rows first. Routed from cmd_bench.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "spgnn/commands.hpp"

namespace spgnn::cli {

struct MaxkBenchArgs {
  std::vector<std::string> graphs{"builtin"};
  std::vector<std::string> names;
  std::vector<int64_t> dims{256};  // F, the width before MaxK
  std::vector<int64_t> ks{2, 4, 8, 16, 32, 64, 96, 128, 192};
  std::string device = "auto";
  int warmup = 5, reps = 20;
  std::string format = "table";
  bool no_check = false;
  uint64_t seed = 1;
  int64_t check_rows = 4096;
  // Values of maxk's input x: "uniform" in [-1, 1) (the default; the inputs maxkgnn_baseline
  // draws) or "normal" (standard normal rows, like a linear layer's output: slower to select).
  std::string input = "uniform";
  // --param key=value: parameters of the CBSR products' `gpu` strategy (warps, segment,
  // smem_buffer, vec, private_rows, regs, flat), e.g. to time an ablation.
  std::vector<std::string> params;
  LoadFlags flags;
};

void run_bench_maxk(const MaxkBenchArgs& args);

}  // namespace spgnn::cli
