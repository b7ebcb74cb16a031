// Each subcommand registers its options and callback on the root app.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "spgnn/graph.hpp"

namespace spgnn::cli {

void register_generate(CLI::App& app);
void register_convert(CLI::App& app);
void register_info(CLI::App& app);
void register_bench(CLI::App& app);
void register_strategies(CLI::App& app);
void register_train(CLI::App& app);
void register_tune(CLI::App& app);
void register_partition(CLI::App& app);

// Options shared by the commands that read a graph (canonicalisation on load).
struct LoadFlags {
  bool symmetrize = false;
  std::string duplicates = "sum";
  std::string self_loops = "keep";
  std::string index_width = "auto";
  bool allow_nonfinite = false;
  bool pattern = false;
  std::string edge_index_rows = "auto";
};
void add_load_flags(CLI::App& cmd, LoadFlags& f);
// --edge-index-rows (auto | src,dst | dst,src), shared by the graph commands and train.
void add_edge_index_rows_flag(CLI::App& cmd, std::string& value);
// An integer >= lo, said as such (CLI::Range would print its upper end, INT64_MAX, in full).
CLI::Validator at_least(int64_t lo);
// A number that `ok` accepts, else "must be <requirement>, got ..." (CLI11's PositiveNumber and
// Range print their ends up to DBL_MAX in full, and Range lets NaN through).
CLI::Validator number_that(bool (*ok)(double), const std::string& requirement);
// --seed, a non-negative integer: an unsigned option alone reads "-1" as 2^64 - 1, a different
// seed than the user meant, without a word.
void add_seed_option(CLI::App& cmd, uint64_t& seed, const std::string& help);
// Reads a graph file/directory/spec with the canonicalisation the flags ask for, with progress.
Graph load_with_flags(const std::string& spec, const LoadFlags& f);
}  // namespace spgnn::cli
