// Internal: the autotuner's learned cost model (G-Sparse §D). It ranks schedules of one problem
// so that real measurements are spent on the promising ones; it never decides alone.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "spgnn/schedule.hpp"

namespace spgnn::tune {

// What the model knows of a problem, independent of the schedule: graph statistics, op, width.
struct ProblemStats {
  OpKind op = OpKind::spmm;
  int64_t n_rows = 0, n_cols = 0, nnz = 0, F = 0;
  double avg_deg = 0, max_deg = 0, deg_cv = 0;  // row degrees: mean, max, stddev / mean
  int64_t empty_rows = 0;
  bool gpu = true;
};

// One real run: a schedule on a problem and its median time.
struct Measurement {
  ProblemStats problem;
  Schedule schedule;
  double ms = 0;
  std::string device_name;  // "NVIDIA H100 80GB HBM3", "cpu:<model>"
};

// Numeric features of (problem, schedule): log-scaled sizes and degree statistics, F, a one-hot of
// the strategy over the op's registry, every parameter of every strategy of the op (its default
// when the schedule leaves it unset, 0 for other strategies), and derived quantities (non-zeros
// and rows per warp, estimated bytes moved). Same length and order for every schedule of an op.
std::vector<double> featurize(const ProblemStats& p, const Schedule& s);
std::vector<std::string> feature_names(OpKind op);

// A small MLP (log inputs, batch norm, three dense layers, MSE on normalised runtime: each
// problem's times divided by its fastest, then log). One model per op.
class CostModel {
 public:
  struct FitOptions {
    int epochs = 400;
    double lr = 1e-3;
    int hidden = 64;
    uint64_t seed = 1;
    double holdout = 0.2;  // fraction of *problems* held out for the reported correlation
  };
  struct FitReport {
    size_t n_train = 0, n_holdout = 0;
    double pearson_train = 0, pearson_holdout = 0, mse_holdout = 0;
  };

  explicit CostModel(OpKind op = OpKind::spmm) : op_(op) {}
  // Trains on the measurements of this model's op (others are ignored). Throws InvalidArgument
  // when there are too few (fewer than 2 problems or 16 measurements).
  FitReport fit(const std::vector<Measurement>& data, const FitOptions& options);
  bool trained() const { return trained_; }
  OpKind op() const { return op_; }
  // Predicted log of (time / fastest time of the problem): only the order among schedules of one
  // problem is meaningful. Requires trained().
  double predict(const ProblemStats& p, const Schedule& s) const;
  nlohmann::json to_json() const;
  // Throws InvalidArgument on a malformed or mismatching document (caller warns and ignores).
  static CostModel from_json(const nlohmann::json& j);

 private:
  OpKind op_;
  bool trained_ = false;
  // Layer weights, batch-norm statistics, feature normalisation: the implementation's choice.
  std::vector<double> params_;
  std::vector<int64_t> shape_;
};

// Pearson correlation of two equal-length series (0 when either is constant).
double pearson(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace spgnn::tune
