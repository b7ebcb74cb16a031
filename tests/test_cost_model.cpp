// The autotuner's cost model: features (length, order, finiteness, defaults), JSON round trip and
// rejection of foreign documents, and learning: on synthetic measurements from a known smooth cost
// function of (problem, schedule), the model must correlate with held-out problems and rank their
// true best schedule near the top.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "spgnn/error.hpp"
#include "spgnn/schedule.hpp"
#include "test_util.hpp"
#include "kernels/shape_math.hpp"
#include "tune/cost_model.hpp"

namespace spgnn::tune {
namespace {

using spgnn::test::seed_for;

double uniform(std::mt19937_64& rng, double lo, double hi) {
  return lo + (hi - lo) * double(rng() >> 11) * 0x1.0p-53;
}

bool any_cuda_strategy(OpKind op) {
  for (const auto& s : list_strategies(op))
    if (s.device == DeviceType::cuda) return true;
  return false;
}

ProblemStats random_problem(std::mt19937_64& rng, OpKind op) {
  ProblemStats p;
  p.op = op;
  p.n_rows = std::llround(std::pow(10.0, uniform(rng, 2, 6)));
  p.n_cols = p.n_rows;
  p.nnz = std::llround(double(p.n_rows) * std::pow(10.0, uniform(rng, 0, 2.4)));
  p.avg_deg = double(p.nnz) / double(p.n_rows);
  p.max_deg = std::min(double(p.n_cols), p.avg_deg * std::pow(10.0, uniform(rng, 0, 2)));
  p.deg_cv = uniform(rng, 0, 3);
  p.empty_rows = std::llround(double(p.n_rows) * uniform(rng, 0, 0.5));
  static const int64_t widths[] = {1, 2, 3, 4, 8, 16, 32, 33, 64, 128, 256};
  p.F = widths[rng() % (sizeof(widths) / sizeof(widths[0]))];
  p.gpu = any_cuda_strategy(op);
  return p;
}

// Every combination of a strategy's legal values, or `cap` of them sampled (its defaults always
// among them), for every strategy of the op: the candidate schedules of one problem.
std::vector<Schedule> candidate_schedules(OpKind op, std::mt19937_64& rng, size_t cap) {
  std::vector<Schedule> out;
  for (const auto& st : list_strategies(op)) {
    std::vector<Schedule> all(1, Schedule{st.name, {}});
    for (const auto& p : st.params) {
      std::vector<Schedule> next;
      for (const auto& s : all)
        for (int64_t v : p.values) {
          Schedule t = s;
          t.params[p.name] = v;
          next.push_back(t);
        }
      all = std::move(next);
    }
    if (all.size() > cap) {
      std::shuffle(all.begin(), all.end(), rng);
      all.resize(cap);
      Schedule defaults{st.name, {}};
      for (const auto& p : st.params) defaults.params[p.name] = p.default_value;
      if (std::find_if(all.begin(), all.end(), [&](const Schedule& s) {
            return s.params == defaults.params;
          }) == all.end())
        all[0] = defaults;
    }
    out.insert(out.end(), all.begin(), all.end());
  }
  return out;
}

// The known cost: a size term, a per-strategy offset that moves with degree, width and skew, and
// a quadratic penalty per parameter around an optimum that also moves with the problem.
double true_log_ms(const ProblemStats& p, const Schedule& s) {
  std::vector<StrategyInfo> sts = list_strategies(p.op);
  std::sort(sts.begin(), sts.end(),
            [](const StrategyInfo& a, const StrategyInfo& b) { return a.name < b.name; });
  const double z1 = std::log1p(p.avg_deg) / std::log(300.0);
  const double z2 = std::log1p(double(p.F)) / std::log(257.0);
  const double z3 = std::min(1.0, std::log1p(p.deg_cv) / std::log(4.0));
  double c = std::log(1e-6 * double(p.nnz + p.n_rows) * double(p.F + 1) + 0.01);
  int j = 0;
  for (size_t k = 0; k < sts.size(); ++k) {
    const StrategyInfo& st = sts[k];
    const bool chosen = st.name == s.strategy;
    if (chosen)
      c += 0.5 * std::sin(1.7 * double(k) + 0.3) + 0.8 * (z1 - 0.5) * std::cos(2.3 * double(k)) +
           0.6 * (z2 - 0.5) * std::sin(1.1 * double(k) + 1) + 0.4 * z3 * std::cos(0.7 * k + 0.5);
    for (const auto& prm : st.params) {
      ++j;
      if (!chosen) continue;
      auto it = s.params.find(prm.name);
      const int64_t v = it == s.params.end() ? prm.default_value : it->second;
      const auto pos = std::find(prm.values.begin(), prm.values.end(), v) - prm.values.begin();
      const double u = prm.values.size() > 1 ? double(pos) / double(prm.values.size() - 1) : 0;
      const double opt = 0.5 + 0.35 * std::sin(double(j) + 3 * z1 - 2 * z2);
      c += (0.8 + 0.4 * std::cos(double(j))) * (u - opt) * (u - opt);
    }
  }
  return c;
}

struct Synthetic {
  std::vector<Measurement> data;
  std::vector<ProblemStats> problems;
  std::vector<std::vector<Schedule>> candidates;
};

Synthetic make_synthetic(OpKind op, size_t n_problems, size_t cap, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, 0.03);
  Synthetic s;
  for (size_t k = 0; k < n_problems; ++k) {
    s.problems.push_back(random_problem(rng, op));
    s.candidates.push_back(candidate_schedules(op, rng, cap));
    for (const auto& sch : s.candidates.back())
      s.data.push_back({s.problems.back(), sch,
                        std::exp(true_log_ms(s.problems.back(), sch) + noise(rng)), "synthetic"});
  }
  return s;
}

template <class F>
void expect_invalid(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected InvalidArgument mentioning '" << needle << "'";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message '" << e.what() << "' does not mention '" << needle << "'";
  }
}

ProblemStats small_problem(OpKind op) {
  ProblemStats p;
  p.op = op;
  p.n_rows = 1000;
  p.n_cols = 1000;
  p.nnz = 8000;
  p.F = 32;
  p.avg_deg = 8;
  p.max_deg = 40;
  p.deg_cv = 0.7;
  p.empty_rows = 10;
  p.gpu = any_cuda_strategy(op);
  return p;
}

// ---- features --------------------------------------------------------------------------------

TEST(CostModelFeatures, LengthOrderAndFiniteOnEdgeCases) {
  for (OpKind op : {OpKind::spmm, OpKind::sddmm}) {
    const std::vector<std::string> names = feature_names(op);
    EXPECT_EQ(names, feature_names(op));
    // The one-hot block lists the strategies by name.
    std::vector<std::string> onehot;
    for (const auto& n : names)
      if (n.rfind("strategy=", 0) == 0) onehot.push_back(n.substr(9));
    EXPECT_EQ(onehot.size(), list_strategies(op).size());
    EXPECT_TRUE(std::is_sorted(onehot.begin(), onehot.end()));

    ProblemStats normal = small_problem(op);
    ProblemStats empty = normal;  // no edges at all
    empty.nnz = 0;
    empty.avg_deg = empty.max_deg = empty.deg_cv = 0;
    empty.empty_rows = empty.n_rows;
    ProblemStats nothing = empty;  // no rows either, F = 1
    nothing.n_rows = nothing.n_cols = nothing.empty_rows = 0;
    nothing.F = 1;
    ProblemStats huge = normal;  // int64 indices, star-shaped
    huge.n_rows = huge.n_cols = int64_t{3} << 30;
    huge.nnz = int64_t{1} << 33;
    huge.avg_deg = double(huge.nnz) / double(huge.n_rows);
    huge.max_deg = double(huge.n_cols);
    huge.deg_cv = 5e4;
    huge.F = 1;
    for (const ProblemStats& p : {normal, empty, nothing, huge})
      for (const auto& sch : [&] {
             std::mt19937_64 rng(seed_for(1));
             return candidate_schedules(op, rng, 8);
           }()) {
        const std::vector<double> f = featurize(p, sch);
        ASSERT_EQ(f.size(), names.size()) << sch.str();
        for (size_t k = 0; k < f.size(); ++k)
          EXPECT_TRUE(std::isfinite(f[k])) << names[k] << " of " << sch.str() << " n=" << p.n_rows
                                           << " nnz=" << p.nnz;
        // Exactly the chosen strategy's one-hot is set.
        for (size_t k = 0; k < names.size(); ++k) {
          if (names[k].rfind("strategy=", 0) == 0) {
            EXPECT_EQ(f[k], names[k] == "strategy=" + sch.strategy ? 1.0 : 0.0) << names[k];
          }
        }
        EXPECT_EQ(f, featurize(p, sch));  // deterministic
      }
  }
}

TEST(CostModelFeatures, UnsetParametersTakeDefaultsOthersZero) {
  for (OpKind op : {OpKind::spmm, OpKind::sddmm}) {
    const std::vector<std::string> names = feature_names(op);
    const ProblemStats p = small_problem(op);
    for (const auto& st : list_strategies(op)) {
      Schedule bare{st.name, {}}, full{st.name, {}};
      for (const auto& prm : st.params) full.params[prm.name] = prm.default_value;
      const std::vector<double> a = featurize(p, bare), b = featurize(p, full);
      for (size_t k = 0; k < names.size(); ++k) {
        const std::string& n = names[k];
        const bool param = n.find('.') != std::string::npos;
        if (param) {
          EXPECT_EQ(a[k], b[k]) << st.name << " " << n;
        }
        // Another strategy's parameters are 0.
        const bool mine = n.find(st.name + ".") == 0 || n.find("log2(" + st.name + ".") == 0;
        if (param && !mine) {
          EXPECT_EQ(a[k], 0.0) << st.name << " " << n;
        }
      }
      // gnnone sizes an unset cache/warps to the graph (its launcher does), so only its derived
      // features may differ between "unset" and "set to the default".
      if (st.name != "gnnone") {
        EXPECT_EQ(a, b) << st.name;
      }
    }
  }
  // A parameter value shows up log2-coded when its legal set is powers of two.
  const auto names = feature_names(OpKind::spmm);
  const auto at = std::find(names.begin(), names.end(), "log2(cpu_mergepath.row_cost)");
  ASSERT_NE(at, names.end());
  const std::vector<double> f =
      featurize(small_problem(OpKind::spmm), Schedule{"cpu_mergepath", {{"row_cost", 8}}});
  EXPECT_DOUBLE_EQ(f[static_cast<size_t>(at - names.begin())], 3.0);
}

TEST(CostModelFeatures, RejectsBadInput) {
  const ProblemStats p = small_problem(OpKind::spmm);
  expect_invalid([&] { featurize(p, Schedule{"auto", {}}); }, "auto");
  expect_invalid([&] { featurize(p, Schedule{"no_such", {}}); }, "no_such");
  expect_invalid([&] { featurize(p, Schedule{"cpu_mergepath", {{"bogus", 1}}}); }, "bogus");
  expect_invalid([&] { featurize(p, Schedule{"cpu_mergepath", {{"row_cost", 3}}}); },
                 "row_cost");
  ProblemStats neg = p;
  neg.nnz = -1;
  expect_invalid([&] { featurize(neg, Schedule{"cpu_mergepath", {}}); }, "nnz=-1");
  ProblemStats nan = p;
  nan.avg_deg = NAN;
  expect_invalid([&] { featurize(nan, Schedule{"cpu_mergepath", {}}); }, "avg_deg");
}

TEST(CostModelPearson, KnownValues) {
  EXPECT_NEAR(pearson({1, 2, 3, 4}, {2, 4, 6, 8}), 1.0, 1e-12);
  EXPECT_NEAR(pearson({1, 2, 3, 4}, {8, 6, 4, 2}), -1.0, 1e-12);
  EXPECT_NEAR(pearson({1, 2, 3}, {1, 3, 2}), 0.5, 1e-12);
  EXPECT_EQ(pearson({1, 2, 3}, {5, 5, 5}), 0.0);
  EXPECT_EQ(pearson({}, {}), 0.0);
  expect_invalid([] { pearson({1, 2}, {1}); }, "lengths");
}

// ---- fitting ---------------------------------------------------------------------------------

TEST(CostModelFit, TooLittleDataAndBadMeasurements) {
  const OpKind op = OpKind::spmm;
  Synthetic s = make_synthetic(op, 2, 16, seed_for(2));
  CostModel m(op);
  CostModel::FitOptions o;
  o.epochs = 2;
  std::vector<Measurement> few(s.data.begin(), s.data.begin() + 15);
  few.back().problem = s.problems[1];  // two problems, 15 measurements
  expect_invalid([&] { m.fit(few, o); }, "too little data");
  std::vector<Measurement> one_problem;
  for (const auto& x : s.data)
    if (x.problem.n_rows == s.problems[0].n_rows) one_problem.push_back(x);
  ASSERT_GE(one_problem.size(), 16u);
  expect_invalid([&] { m.fit(one_problem, o); }, "1 problems");
  // Another op's measurements do not count.
  Synthetic other = make_synthetic(OpKind::sddmm, 4, 16, seed_for(3));
  std::vector<Measurement> mixed = other.data;
  mixed.insert(mixed.end(), few.begin(), few.end());
  expect_invalid([&] { m.fit(mixed, o); }, "too little data");
  EXPECT_FALSE(m.trained());
  expect_invalid([&] { m.predict(s.problems[0], Schedule{"cpu_mergepath", {}}); }, "fitted");
  std::vector<Measurement> bad = s.data;
  bad[3].ms = 0;
  expect_invalid([&] { m.fit(bad, o); }, "measurement 3");
  bad = s.data;
  bad[5].schedule.params["nope"] = 1;
  expect_invalid([&] { m.fit(bad, o); }, "measurement 5");
  o.holdout = 1.0;
  expect_invalid([&] { m.fit(s.data, o); }, "holdout");
}

TEST(CostModelFit, DeterministicForASeed) {
  const OpKind op = OpKind::spmm;
  const Synthetic s = make_synthetic(op, 12, 8, seed_for(4));
  CostModel::FitOptions o;
  o.epochs = 20;
  o.hidden = 16;
  o.seed = 7;
  CostModel a(op), b(op), c(op);
  const auto ra = a.fit(s.data, o);
  const auto rb = b.fit(s.data, o);
  EXPECT_EQ(a.to_json().dump(), b.to_json().dump());
  EXPECT_EQ(ra.pearson_holdout, rb.pearson_holdout);
  EXPECT_EQ(ra.n_train + ra.n_holdout, s.data.size());
  EXPECT_GT(ra.n_holdout, 0u);
  o.seed = 8;
  c.fit(s.data, o);
  EXPECT_NE(a.to_json().dump(), c.to_json().dump());
}

// One fit shared by the learning and JSON tests (fitting is the slow part of this file).
struct Fitted {
  OpKind op = OpKind::spmm;
  Synthetic train, fresh;
  CostModel model;
  CostModel::FitReport report;
};
const Fitted& fitted() {
  static const Fitted f = [] {
    Fitted r;
    // CPU build: 17 schedules per problem; CUDA build: up to 8 per strategy, so that ~4k
    // measurements still cover many problems (it is problems, not rows, that teach ranking).
    const auto per_problem = [&](size_t cap) {
      std::mt19937_64 rng(1);
      return candidate_schedules(r.op, rng, cap).size();
    };
    const size_t cap = per_problem(16) > 40 ? 8 : 16;
    const size_t n_problems = std::clamp<size_t>(4000 / per_problem(cap), 40, 150);
    r.train = make_synthetic(r.op, n_problems, cap, seed_for(5));
    r.fresh = make_synthetic(r.op, 200, cap, seed_for(6));
    r.model = CostModel(r.op);
    CostModel::FitOptions o;
    o.seed = seed_for(7);
    r.report = r.model.fit(r.train.data, o);
    std::cerr << "[cost-model] " << r.train.data.size() << " measurements of " << n_problems
              << " problems: n_train=" << r.report.n_train
              << " n_holdout=" << r.report.n_holdout
              << " pearson_train=" << r.report.pearson_train
              << " pearson_holdout=" << r.report.pearson_holdout
              << " mse_holdout=" << r.report.mse_holdout << "\n";
    return r;
  }();
  return f;
}

TEST(CostModelFit, LearnsAKnownCostFunction) {
  const Fitted& f = fitted();
  ASSERT_TRUE(f.model.trained());
  EXPECT_GT(f.report.pearson_train, 0.9);
  // The holdout is ~18 whole problems (20% of ~88 in the CUDA build), so which problems land in
  // it moves the correlation: 0.929-0.963 over seeds 101-130, 0.892 with SPGNN_TEST_SEED=
  // 1952034986 (train 0.992, fresh problems 0.953 in that run). Generalisation is held to 0.9
  // below, on 200 fresh problems; the holdout only has to show the fit is not memorising.
  EXPECT_GT(f.report.pearson_holdout, 0.85);
  // Problems never seen in fitting: the true best schedule should be among the model's top 3.
  size_t hits = 0;
  std::vector<double> pred_all, true_all;
  for (size_t k = 0; k < f.fresh.problems.size(); ++k) {
    const ProblemStats& p = f.fresh.problems[k];
    const auto& cands = f.fresh.candidates[k];
    std::vector<double> pred, truth;
    for (const auto& s : cands) {
      pred.push_back(f.model.predict(p, s));
      truth.push_back(true_log_ms(p, s));
    }
    const double best = *std::min_element(truth.begin(), truth.end());
    for (double& t : truth) t -= best;
    pred_all.insert(pred_all.end(), pred.begin(), pred.end());
    true_all.insert(true_all.end(), truth.begin(), truth.end());
    const size_t best_at = size_t(std::min_element(truth.begin(), truth.end()) - truth.begin());
    std::vector<size_t> order(cands.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return pred[a] < pred[b]; });
    if (std::find(order.begin(), order.begin() + std::min<size_t>(3, order.size()), best_at) !=
        order.begin() + std::min<size_t>(3, order.size()))
      ++hits;
  }
  const double rate = double(hits) / double(f.fresh.problems.size());
  const double r_fresh = pearson(pred_all, true_all);
  std::cerr << "[cost-model] fresh problems: top-3 rate " << rate << " (" << hits << "/"
            << f.fresh.problems.size() << "), pearson " << r_fresh << " over "
            << f.fresh.candidates[0].size() << " candidates each\n";
  EXPECT_GT(r_fresh, 0.9);
  // Chance gives 0.18 (17 candidates, the CPU build) and 0.07 (45, the CUDA one). With 40 fresh
  // problems the rate's sampling spread alone (~0.06) failed 0.7 on 2 of 21 seeds in the CUDA
  // build (0.625, 0.675); over 200 it was 0.745-0.86 on 31 seeds, mean 0.80.
  EXPECT_GE(rate, 0.7);
}

TEST(CostModelJson, RoundTripGivesIdenticalPredictions) {
  const Fitted& f = fitted();
  const nlohmann::json j = f.model.to_json();
  const CostModel back = CostModel::from_json(nlohmann::json::parse(j.dump()));
  EXPECT_TRUE(back.trained());
  EXPECT_EQ(back.op(), f.op);
  EXPECT_EQ(back.to_json().dump(), j.dump());
  for (size_t k = 0; k < 10; ++k)
    for (const auto& s : f.fresh.candidates[k])
      EXPECT_EQ(back.predict(f.fresh.problems[k], s), f.model.predict(f.fresh.problems[k], s))
          << s.str();
  expect_invalid([&] { back.predict(small_problem(OpKind::sddmm), Schedule{"cpu_edge", {}}); },
                 "sddmm");
}

TEST(CostModelJson, RejectsMalformedOrForeignDocuments) {
  const nlohmann::json good = fitted().model.to_json();
  const auto with = [&](auto&& edit) {
    nlohmann::json j = good;
    edit(j);
    return j;
  };
  expect_invalid([&] { CostModel::from_json(nlohmann::json::array()); }, "object");
  expect_invalid([&] { CostModel::from_json(with([](auto& j) { j["version"] = 2; })); },
                 "'version'");
  expect_invalid([&] { CostModel::from_json(with([](auto& j) { j.erase("version"); })); },
                 "'version'");
  expect_invalid([&] { CostModel::from_json(with([](auto& j) { j["op"] = "gemm"; })); }, "'op'");
  expect_invalid(
      [&] { CostModel::from_json(with([](auto& j) { j["feature_names"][2] = "log1p_other"; })); },
      "'feature_names'");
  // A model of another build (one strategy fewer or more) has a different name list.
  expect_invalid(
      [&] {
        CostModel::from_json(with([](auto& j) { j["feature_names"].erase(j["feature_names"].size() - 1); }));
      },
      "'feature_names'");
  expect_invalid([&] { CostModel::from_json(with([](auto& j) { j["w2"].erase(0); })); }, "'w2'");
  expect_invalid([&] { CostModel::from_json(with([](auto& j) { j.erase("b3"); })); }, "'b3'");
  expect_invalid([&] { CostModel::from_json(with([](auto& j) { j["w1"][3] = "x"; })); }, "'w1'");
  expect_invalid([&] { CostModel::from_json(with([](auto& j) { j["hidden"] = 0; })); },
                 "'hidden'");
  expect_invalid([&] { CostModel::from_json(with([](auto& j) { j["input_std"][0] = 0.0; })); },
                 "'input_std'");
  // A document for sddmm is checked against sddmm's feature names.
  expect_invalid([&] { CostModel::from_json(with([](auto& j) { j["op"] = "sddmm"; })); },
                 "'feature_names'");
}

}  // namespace
}  // namespace spgnn::tune

// gnnone's feature chunk (kernels/shape_math.hpp), which the CUDA launcher and the cost model
// share: the L2 budget rule, and SpMM's one pass where the whole feature matrix fits in L2.
TEST(GnnoneChunk, BudgetRuleAndWholeRowPass) {
  const double l2 = 50.0 * (1 << 20);
  const int64_t reddit = 232965, rmat = int64_t{1} << 21;
  using spgnn::detail::gnnone_max_group;
  // Budget: the widest of 32 / 16 / 8 lanes whose chunk fits 60% of L2, else 16.
  EXPECT_EQ(gnnone_max_group(64, 4, 4, 1000, l2, false), 32);
  EXPECT_EQ(gnnone_max_group(64, 4, 4, reddit, l2, false), 8);
  EXPECT_EQ(gnnone_max_group(64, 4, 4, rmat, l2, false), 16);
  EXPECT_EQ(gnnone_max_group(41, 1, 4, reddit, l2, false), 32);  // scalar lanes: 4-byte chunks
  // Whole row in one pass: F = 40..56 floats on 233K rows (37-52 MB) fit, F = 64 (60 MB) does not.
  for (int64_t F : {40, 44, 48, 56}) {
    EXPECT_EQ(gnnone_max_group(F, 4, 4, reddit, l2, false), 8) << F;
    EXPECT_EQ(gnnone_max_group(F, 4, 4, reddit, l2, true), 16) << F;
  }
  EXPECT_EQ(gnnone_max_group(64, 4, 4, reddit, l2, true), 8);
  EXPECT_EQ(gnnone_max_group(96, 4, 4, reddit, l2, true), 8);   // more than two chunks
  EXPECT_EQ(gnnone_max_group(32, 4, 4, reddit, l2, true), 8);   // one chunk already
  EXPECT_EQ(gnnone_max_group(48, 4, 4, rmat, l2, true), 16);    // 2M rows never fit
  EXPECT_EQ(gnnone_max_group(41, 1, 4, reddit, l2, true), 32);  // no wider chunk than 32 lanes
}
