// Shared pieces of the CLI: graph specs, progress display, tables.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "spgnn/graph.hpp"
#include "spgnn/io.hpp"

namespace spgnn::cli {

// A graph given on the command line: a file or directory path, or a generator spec
//   rmat:SCALE[:EDGE_FACTOR[:SEED]]   er:N:AVG_DEGREE[:SEED]   planted:N[:CLASSES[:SEED]]
// `builtin` is rmat:16:16:1 symmetrised (the default when no graph is given).
bool is_generator_spec(const std::string& spec);
Graph load_graph(const std::string& spec, const ReadOptions& options, bool show_progress);
std::string describe_spec(const std::string& spec);
// The parameters of a planted:N[:CLASSES[:SEED]] spec (checked like load_graph's); the seed is
// `default_seed` when the spec gives none.
PlantedPartitionParams planted_params(const std::string& spec, uint64_t default_seed);

// A one-line progress display on stderr, shown only when stderr is a terminal.
class Progress {
 public:
  explicit Progress(std::string label, bool enabled = true);
  ~Progress();
  void update(double fraction);
  void done();

 private:
  std::string label_;
  bool enabled_;
  bool finished_ = false;
  int last_percent_ = -1;
  std::chrono::steady_clock::time_point start_;
};

std::string human_bytes(double bytes);
std::string fixed(double v, int digits);
// The feature dtype of a --dtype value the option already checked: f32, f16 or bf16.
DType feature_dtype(const std::string& text);

// Left/right-aligned text table.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string str() const;
  std::string csv() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace spgnn::cli
