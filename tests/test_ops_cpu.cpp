// The CPU strategies of gspmm/gsddmm: the cpu_ref oracle against hand-computed results, every
// other CPU strategy against cpu_ref on fresh random graphs of every shape and width, merge-path
// partitions swept over parameters and thread counts, and the front door's argument checks.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "spgnn/ops.hpp"
#include "test_util.hpp"

namespace spgnn::test {
namespace {

constexpr double kTolerance = 1e-5;
constexpr int64_t kGraphSize = 1000;
// SDDMM has no row-balance subtleties (every edge is independent), so a smaller graph of the same
// shape covers it at a fraction of the runtime.
constexpr int64_t kSddmmGraphSize = 400;
constexpr int64_t kArgPoison = -7;  // never a legal arg (-1 is "no edge")
const float kNaN = std::numeric_limits<float>::quiet_NaN();

const std::vector<SpmmOp> kSpmmOps = {SpmmOp::copy_u,  SpmmOp::copy_e,  SpmmOp::u_mul_e,
                                      SpmmOp::u_add_e, SpmmOp::u_sub_e, SpmmOp::u_div_e};
const std::vector<Reduce> kReduces = {Reduce::sum, Reduce::mean, Reduce::max, Reduce::min};
const std::vector<SddmmOp> kSddmmOps = {SddmmOp::dot, SddmmOp::add,      SddmmOp::sub,
                                        SddmmOp::mul, SddmmOp::div,      SddmmOp::copy_lhs,
                                        SddmmOp::copy_rhs};
const std::vector<Target> kTargets = {Target::u, Target::v, Target::e};

bool has_args(Reduce r) { return r == Reduce::max || r == Reduce::min; }

// Sets the OpenMP thread count for one scope (the kernels read omp_get_max_threads()).
class OmpThreads {
 public:
  explicit OmpThreads(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~OmpThreads() { omp_set_num_threads(saved_); }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  int saved_;
};

// The CPU strategies under test: every CPU strategy of the registry except the oracle itself,
// so a new CPU kernel is covered the day it is registered.
std::vector<std::string> cpu_strategies(OpKind op) {
  std::vector<std::string> names;
  for (const auto& s : list_strategies(op))
    if (s.device == DeviceType::cpu && s.name != "cpu_ref") names.push_back(s.name);
  return names;
}

OpOptions with_schedule(const std::string& strategy, std::map<std::string, int64_t> params = {}) {
  OpOptions o;
  o.schedule.strategy = strategy;
  o.schedule.params = std::move(params);
  return o;
}

// ---- running an op on poisoned outputs -------------------------------------------------------

struct SpmmResult {
  Tensor out, arg_u, arg_e;
};

// Outputs start as NaN (args as kArgPoison), so anything a kernel forgets to write fails the
// comparison.
SpmmResult run_spmm(const Graph& g, SpmmOp op, Reduce reduce, const Tensor& u, const Tensor& e,
                    const OpOptions& options) {
  const Tensor& ev = e.defined() ? e : g.val;  // an undefined e means the graph's values
  const int64_t F = op == SpmmOp::copy_e ? (ev.ndim() == 1 ? 1 : ev.dim(1)) : u.dim(1);
  SpmmResult r;
  r.out = Tensor::full({g.n_rows, F}, DType::f32, kNaN);
  if (has_args(reduce)) {
    r.arg_u = Tensor::full({g.n_rows, F}, DType::i64, double(kArgPoison));
    r.arg_e = Tensor::full({g.n_rows, F}, DType::i64, double(kArgPoison));
    gspmm(g, op, reduce, u, e, r.out, r.arg_u, r.arg_e, options);
  } else {
    gspmm(g, op, reduce, u, e, r.out, options);
  }
  return r;
}

Tensor run_sddmm(const Graph& g, SddmmOp op, const Tensor& lhs, const Tensor& rhs, Target lt,
                 Target rt, const OpOptions& options) {
  const int64_t F = op == SddmmOp::copy_rhs ? rhs.dim(1) : lhs.dim(1);
  Tensor out = Tensor::full({g.nnz(), op == SddmmOp::dot ? 1 : F}, DType::f32, kNaN);
  gsddmm(g, op, lhs, rhs, out, lt, rt, options);
  return out;
}

// Values within kTolerance of the oracle; args equal wherever the two values are equal (a
// differing value is already judged by the tolerance; equal values with different args mean
// the tie rule "first edge in row order" or the winner bookkeeping is broken).
void expect_spmm_match(const SpmmResult& got, const SpmmResult& want) {
  EXPECT_LT(rel_error(got.out, want.out), kTolerance);
  if (!want.arg_e.defined()) return;
  const float* gv = got.out.data<float>();
  const float* wv = want.out.data<float>();
  const int64_t* gu = got.arg_u.data<int64_t>();
  const int64_t* ge = got.arg_e.data<int64_t>();
  const int64_t* wu = want.arg_u.data<int64_t>();
  const int64_t* we = want.arg_e.data<int64_t>();
  const int64_t F = got.out.dim(1);
  int64_t bad = 0;
  for (int64_t i = 0; i < got.out.numel(); ++i) {
    const bool unwritten = gu[i] == kArgPoison || ge[i] == kArgPoison;
    if (!unwritten && (gv[i] != wv[i] || (gu[i] == wu[i] && ge[i] == we[i]))) continue;
    if (bad++ < 3)
      ADD_FAILURE() << "arg mismatch at row " << i / F << " f " << i % F << ": value " << gv[i]
                    << " (oracle " << wv[i] << "), arg_u " << gu[i] << " (oracle " << wu[i]
                    << "), arg_e " << ge[i] << " (oracle " << we[i] << ")";
  }
  EXPECT_EQ(bad, 0) << "outputs with a wrong or unwritten arg";
}

// Operands for an SpMM op of width F: u [n_cols, F] and e [nnz, e_width]. u_div_e gets edge
// values away from 0 so the quotients stay well conditioned.
// Inputs with NaN, -inf and +inf at fixed positions, and the exact comparison they need (NaN
// equals NaN; max/min take no rounding, so values and args must be identical).
void add_specials(Tensor& t) {
  float* x = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (i % 7 == 3) x[i] = std::nanf("");
    else if (i % 5 == 1) x[i] = -std::numeric_limits<float>::infinity();
    else if (i % 11 == 4) x[i] = std::numeric_limits<float>::infinity();
}
void expect_spmm_identical(const SpmmResult& got, const SpmmResult& want) {
  const std::vector<float> g = got.out.to_vector<float>(), w = want.out.to_vector<float>();
  ASSERT_EQ(g.size(), w.size());
  int64_t bad = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (!(g[i] == w[i] || (g[i] != g[i] && w[i] != w[i])) && bad++ < 3)
      ADD_FAILURE() << "value " << g[i] << " at " << i << ", oracle " << w[i];
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(got.arg_u.to_vector<int64_t>(), want.arg_u.to_vector<int64_t>());
  EXPECT_EQ(got.arg_e.to_vector<int64_t>(), want.arg_e.to_vector<int64_t>());
}

struct SpmmInputs {
  Tensor u, e;
};
SpmmInputs spmm_inputs(const Graph& g, SpmmOp op, int64_t F, int64_t e_width, uint64_t seed) {
  SpmmInputs in;
  if (op != SpmmOp::copy_e) in.u = random_tensor({g.n_cols, F}, seed);
  if (op != SpmmOp::copy_u) {
    const float lo = op == SpmmOp::u_div_e ? 0.5f : -1.f;
    const float hi = op == SpmmOp::u_div_e ? 1.5f : 1.f;
    in.e = random_tensor({g.nnz(), e_width}, seed + 1, lo, hi);
  }
  return in;
}

Tensor sddmm_operand(const Graph& g, Target t, int64_t F, uint64_t seed, bool divisor) {
  const int64_t rows = t == Target::u ? g.n_cols : t == Target::v ? g.n_rows : g.nnz();
  return divisor ? random_tensor({rows, F}, seed, 0.5f, 1.5f) : random_tensor({rows, F}, seed);
}

// ---- the oracle against hand-computed results ------------------------------------------------
//
// Three vertices, four edges, row 1 empty:
//   e0 = (0 <- 1, w 2), e1 = (0 <- 2, w 0.5), e2 = (2 <- 0, w 1), e3 = (2 <- 1, w 4).
template <class Index>
Graph hand_graph() {
  Graph g;
  g.n_rows = g.n_cols = 3;
  g.row = Tensor::from_vector<Index>({0, 0, 2, 2});
  g.col = Tensor::from_vector<Index>({1, 2, 0, 1});
  g.rowptr = Tensor::from_vector<Index>({0, 2, 2, 4});
  g.val = Tensor::from_vector<float>({2.f, 0.5f, 1.f, 4.f});
  return g;
}
const std::vector<float> kHandU = {1, -2, /**/ 3, 4, /**/ -5, 20};      // [3, 2]
const std::vector<float> kHandX = {1, 2, /**/ 0.5f, -1, /**/ 2, 0.5f};  // [3, 2]
const std::vector<float> kHandEdgeF = {2, 1, /**/ 0.5f, -1, /**/ 1, 3, /**/ 4, 0.25f};  // [4, 2]

void expect_values(const Tensor& t, const std::vector<float>& want) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  const float* p = t.data<float>();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(p[i], want[i]) << "element " << i;
}
void expect_indices(const Tensor& t, const std::vector<int64_t>& want) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  const int64_t* p = t.data<int64_t>();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(p[i], want[i]) << "element " << i;
}

struct HandSpmmCase {
  SpmmOp op;
  Reduce reduce;
  bool edge_per_feature;  // e is [nnz, 2] instead of the graph's values
  std::vector<float> out;
  std::vector<int64_t> arg_u, arg_e;
};

const std::vector<HandSpmmCase>& hand_spmm_cases() {
  static const std::vector<HandSpmmCase> cases = {
      {SpmmOp::copy_u, Reduce::sum, false, {-2, 24, 0, 0, 4, 2}, {}, {}},
      {SpmmOp::copy_e, Reduce::sum, false, {2.5f, 0, 5}, {}, {}},
      {SpmmOp::u_mul_e, Reduce::sum, false, {3.5f, 18, 0, 0, 13, 14}, {}, {}},
      {SpmmOp::u_add_e, Reduce::sum, false, {0.5f, 26.5f, 0, 0, 9, 7}, {}, {}},
      {SpmmOp::u_sub_e, Reduce::sum, false, {-4.5f, 21.5f, 0, 0, -1, -3}, {}, {}},
      {SpmmOp::u_div_e, Reduce::sum, false, {-8.5f, 42, 0, 0, 1.75f, -1}, {}, {}},
      {SpmmOp::u_mul_e, Reduce::sum, true, {3.5f, -16, 0, 0, 13, -5}, {}, {}},
      {SpmmOp::u_mul_e, Reduce::mean, false, {1.75f, 9, 0, 0, 6.5f, 7}, {}, {}},
      {SpmmOp::u_mul_e, Reduce::max, false, {6, 10, 0, 0, 12, 16},
       {1, 2, -1, -1, 1, 1}, {0, 1, -1, -1, 3, 3}},
      {SpmmOp::u_mul_e, Reduce::min, false, {-2.5f, 8, 0, 0, 1, -2},
       {2, 1, -1, -1, 0, 0}, {1, 0, -1, -1, 2, 2}},
      {SpmmOp::copy_u, Reduce::max, false, {3, 20, 0, 0, 3, 4},
       {1, 2, -1, -1, 1, 1}, {0, 1, -1, -1, 3, 3}},
  };
  return cases;
}

template <class Index>
void check_hand_spmm(const std::string& strategy) {
  const Graph g = hand_graph<Index>();
  const Tensor u = Tensor::from_vector(kHandU, {3, 2});
  for (const auto& c : hand_spmm_cases()) {
    SCOPED_TRACE(std::string(name(c.op)) + "/" + name(c.reduce) +
                 (c.edge_per_feature ? "/e[nnz,F]" : "/graph values"));
    // An undefined e makes the op use the graph's own values.
    const Tensor e = c.edge_per_feature ? Tensor::from_vector(kHandEdgeF, {4, 2}) : Tensor();
    const SpmmResult r = run_spmm(g, c.op, c.reduce, u, e, with_schedule(strategy));
    expect_values(r.out, c.out);
    if (has_args(c.reduce)) {
      expect_indices(r.arg_u, c.arg_u);
      expect_indices(r.arg_e, c.arg_e);
    }
  }
  // Ties go to the first edge in row order.
  SCOPED_TRACE("copy_e ties");
  const Tensor tied = Tensor::from_vector<float>({3, 3, 7, 7});
  for (Reduce r : {Reduce::max, Reduce::min}) {
    const SpmmResult res = run_spmm(g, SpmmOp::copy_e, r, Tensor(), tied, with_schedule(strategy));
    expect_values(res.out, {3, 0, 7});
    expect_indices(res.arg_e, {0, -1, 2});
    expect_indices(res.arg_u, {1, -1, 0});
  }
  // NaN propagates (torch.max and PyG do): a NaN message beats every number, the first NaN
  // stays. A row of -inf (+inf for min) messages, the reduction's identity, still names its
  // first edge for the backward.
  SCOPED_TRACE("copy_e NaN and infinities");
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  for (Reduce r : {Reduce::max, Reduce::min}) {
    const SpmmResult res = run_spmm(g, SpmmOp::copy_e, r, Tensor(),
                                    Tensor::from_vector<float>({1, nan, 5, nan}),
                                    with_schedule(strategy));
    const float* o = res.out.data<float>();
    EXPECT_TRUE(std::isnan(o[0]) && o[1] == 0 && std::isnan(o[2])) << name(r);
    expect_indices(res.arg_e, {1, -1, 3});
    const float id = r == Reduce::max ? -inf : inf;
    const SpmmResult ids = run_spmm(g, SpmmOp::copy_e, r, Tensor(),
                                    Tensor::from_vector<float>({id, id, -id, id}),
                                    with_schedule(strategy));
    expect_values(ids.out, {id, 0, -id});
    expect_indices(ids.arg_e, {0, -1, 2});
  }
  const SpmmResult first_nan = run_spmm(g, SpmmOp::copy_e, Reduce::max, Tensor(),
                                        Tensor::from_vector<float>({nan, 9, 2, 3}),
                                        with_schedule(strategy));
  expect_indices(first_nan.arg_e, {0, -1, 3});
}

struct HandSddmmCase {
  SddmmOp op;
  Target lt, rt;
  std::vector<float> out;
};

const std::vector<HandSddmmCase>& hand_sddmm_cases() {
  static const std::vector<HandSddmmCase> cases = {
      // lhs = kHandU at the source, rhs = kHandX at the destination.
      {SddmmOp::dot, Target::u, Target::v, {11, 35, 1, 8}},
      {SddmmOp::add, Target::u, Target::v, {4, 6, -4, 22, 3, -1.5f, 5, 4.5f}},
      {SddmmOp::sub, Target::u, Target::v, {2, 2, -6, 18, -1, -2.5f, 1, 3.5f}},
      {SddmmOp::mul, Target::u, Target::v, {3, 8, -5, 40, 2, -1, 6, 2}},
      {SddmmOp::div, Target::u, Target::v, {3, 2, -5, 10, 0.5f, -4, 1.5f, 8}},
      {SddmmOp::copy_lhs, Target::u, Target::v, {3, 4, -5, 20, 1, -2, 3, 4}},
      {SddmmOp::copy_rhs, Target::u, Target::v, {1, 2, 1, 2, 2, 0.5f, 2, 0.5f}},
      // lhs = kHandEdgeF per edge, rhs = kHandU at the source.
      {SddmmOp::mul, Target::e, Target::u, {6, 4, -2.5f, -20, 1, -6, 12, 1}},
      // lhs = kHandX at the destination, rhs = kHandU at the source.
      {SddmmOp::sub, Target::v, Target::u, {-2, -2, 6, -18, 1, 2.5f, -1, -3.5f}},
      // both sides kHandX at the destination.
      {SddmmOp::dot, Target::v, Target::v, {5, 5, 4.25f, 4.25f}},
  };
  return cases;
}

template <class Index>
void check_hand_sddmm(const std::string& strategy) {
  const Graph g = hand_graph<Index>();
  // Each target reads its own table: kHandU at the source, kHandX at the destination and
  // kHandEdgeF per edge.
  auto operand = [](Target t) {
    if (t == Target::e) return Tensor::from_vector(kHandEdgeF, {4, 2});
    if (t == Target::u) return Tensor::from_vector(kHandU, {3, 2});
    return Tensor::from_vector(kHandX, {3, 2});
  };
  for (const auto& c : hand_sddmm_cases()) {
    SCOPED_TRACE(std::string(name(c.op)) + " " + name(c.lt) + "," + name(c.rt));
    const Tensor out =
        run_sddmm(g, c.op, operand(c.lt), operand(c.rt), c.lt, c.rt,
                  with_schedule(strategy));
    expect_values(out, c.out);
  }
}

TEST(CpuRefOracle, SpmmMatchesHandComputedResults) {
  check_hand_spmm<int32_t>("cpu_ref");
  check_hand_spmm<int64_t>("cpu_ref");
}
TEST(CpuRefOracle, SddmmMatchesHandComputedResults) {
  check_hand_sddmm<int32_t>("cpu_ref");
  check_hand_sddmm<int64_t>("cpu_ref");
}
TEST(CpuStrategies, MatchHandComputedResults) {
  for (const auto& s : cpu_strategies(OpKind::spmm)) {
    SCOPED_TRACE(s);
    check_hand_spmm<int32_t>(s);
    check_hand_spmm<int64_t>(s);
  }
  for (const auto& s : cpu_strategies(OpKind::sddmm)) {
    SCOPED_TRACE(s);
    check_hand_sddmm<int32_t>(s);
    check_hand_sddmm<int64_t>(s);
  }
}

// ---- property tests: every strategy against the oracle ---------------------------------------

uint64_t salt_of(GraphKind kind, int op, int strategy) {
  return (static_cast<uint64_t>(kind) << 16) ^ (static_cast<uint64_t>(op) << 8) ^
         static_cast<uint64_t>(strategy) ^ 0x5eedULL;
}

std::string trace_of(GraphKind kind, const Graph& g, uint64_t seed) {
  return detail::concat("graph ", kind_name(kind), " n=", g.n_rows, " nnz=", g.nnz(),
                        " seed=", seed, " (SPGNN_TEST_SEED=", base_seed(), ")");
}

using SpmmParam = std::tuple<std::string, GraphKind, SpmmOp>;
class SpmmAgainstOracle : public ::testing::TestWithParam<SpmmParam> {};

TEST_P(SpmmAgainstOracle, EveryReduceWidthAndEdgeWidth) {
  const auto& [strategy, kind, op] = GetParam();
  const uint64_t seed = seed_for(salt_of(kind, int(op), 1));
  const Graph g = random_graph(kind, kGraphSize, seed);
  SCOPED_TRACE(trace_of(kind, g, seed));
  for (int64_t F : test_widths()) {
    std::vector<int64_t> e_widths;
    if (op != SpmmOp::copy_u) e_widths.push_back(1);
    if (op != SpmmOp::copy_u && F > 1) e_widths.push_back(F);
    if (op == SpmmOp::copy_u) e_widths.push_back(0);
    for (int64_t ew : e_widths) {
      // copy_e takes its width from e, so only e of width F means width F for it.
      if (op == SpmmOp::copy_e && ew != F) continue;
      const SpmmInputs in = spmm_inputs(g, op, F, ew, seed + static_cast<uint64_t>(F));
      for (Reduce r : kReduces) {
        SCOPED_TRACE(detail::concat("F=", F, " e_width=", ew, " reduce=", name(r)));
        const SpmmResult want = run_spmm(g, op, r, in.u, in.e, with_schedule("cpu_ref"));
        const SpmmResult got = run_spmm(g, op, r, in.u, in.e, with_schedule(strategy));
        expect_spmm_match(got, want);
        if (HasFailure()) return;  // one readable failure beats hundreds
      }
    }
  }
}

std::string spmm_param_name(const ::testing::TestParamInfo<SpmmParam>& info) {
  return std::get<0>(info.param) + "_" + kind_name(std::get<1>(info.param)) + "_" +
         name(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Cpu, SpmmAgainstOracle,
                         ::testing::Combine(::testing::ValuesIn(cpu_strategies(OpKind::spmm)),
                                            ::testing::ValuesIn(all_graph_kinds()),
                                            ::testing::ValuesIn(kSpmmOps)),
                         spmm_param_name);

using SddmmParam = std::tuple<std::string, GraphKind, SddmmOp>;
class SddmmAgainstOracle : public ::testing::TestWithParam<SddmmParam> {};

TEST_P(SddmmAgainstOracle, EveryTargetPairAndWidth) {
  const auto& [strategy, kind, op] = GetParam();
  const uint64_t seed = seed_for(salt_of(kind, int(op), 2));
  const Graph g = random_graph(kind, kSddmmGraphSize, seed);
  SCOPED_TRACE(trace_of(kind, g, seed));
  for (int64_t F : test_widths()) {
    // One operand per side and target, shared by the nine target pairs.
    std::vector<Tensor> lhs_of, rhs_of;
    for (Target t : kTargets) {
      const uint64_t s = seed + static_cast<uint64_t>(F) * 16 + static_cast<uint64_t>(t) * 2;
      lhs_of.push_back(sddmm_operand(g, t, F, s, false));
      rhs_of.push_back(sddmm_operand(g, t, F, s + 1, op == SddmmOp::div));
    }
    for (Target lt : kTargets) {
      for (Target rt : kTargets) {
        SCOPED_TRACE(detail::concat("F=", F, " lhs=", name(lt), " rhs=", name(rt)));
        const Tensor& lhs = lhs_of[static_cast<size_t>(lt)];
        const Tensor& rhs = rhs_of[static_cast<size_t>(rt)];
        const Tensor want = run_sddmm(g, op, lhs, rhs, lt, rt, with_schedule("cpu_ref"));
        const Tensor got = run_sddmm(g, op, lhs, rhs, lt, rt, with_schedule(strategy));
        EXPECT_LT(rel_error(got, want), kTolerance);
        if (HasFailure()) return;
      }
    }
  }
}

std::string sddmm_param_name(const ::testing::TestParamInfo<SddmmParam>& info) {
  return std::get<0>(info.param) + "_" + kind_name(std::get<1>(info.param)) + "_" +
         name(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Cpu, SddmmAgainstOracle,
                         ::testing::Combine(::testing::ValuesIn(cpu_strategies(OpKind::sddmm)),
                                            ::testing::ValuesIn(all_graph_kinds()),
                                            ::testing::ValuesIn(kSddmmOps)),
                         sddmm_param_name);

// `auto` on host data must pick a CPU strategy and agree with the oracle.
TEST(CpuAuto, SpmmAndSddmmAgreeWithOracle) {
  const uint64_t seed = seed_for(77);
  const Graph g = random_graph(GraphKind::rmat, kGraphSize, seed);
  SCOPED_TRACE(trace_of(GraphKind::rmat, g, seed));
  const Tensor u = random_tensor({g.n_cols, 32}, seed + 1);
  EXPECT_NE(resolve_spmm_schedule(g, SpmmOp::u_mul_e, Reduce::sum, 32, Schedule{}).strategy,
            "auto");
  expect_spmm_match(run_spmm(g, SpmmOp::u_mul_e, Reduce::max, u, Tensor(), OpOptions{}),
                    run_spmm(g, SpmmOp::u_mul_e, Reduce::max, u, Tensor(),
                             with_schedule("cpu_ref")));
  const Tensor v = random_tensor({g.n_rows, 32}, seed + 2);
  EXPECT_LT(rel_error(run_sddmm(g, SddmmOp::dot, u, v, Target::u, Target::v, OpOptions{}),
                      run_sddmm(g, SddmmOp::dot, u, v, Target::u, Target::v,
                                with_schedule("cpu_ref"))),
            kTolerance);
}

// ---- int64 index graphs ----------------------------------------------------------------------

// A skewed graph (a hub row, a run of empty rows, random edges) built with 64-bit indices.
Graph int64_graph(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t n = 700;
  std::vector<int64_t> r, c;
  for (int64_t i = 0; i < n; ++i) { r.push_back(n / 3); c.push_back(i); }
  for (int64_t i = 0; i < 4 * n; ++i) {
    const int64_t dst = static_cast<int64_t>(rng() % uint64_t(n));
    if (dst > n / 2 && dst < n / 2 + 50) continue;  // empty rows
    r.push_back(dst);
    c.push_back(static_cast<int64_t>(rng() % uint64_t(n)));
  }
  BuildOptions opt;
  opt.duplicates = DuplicatePolicy::drop;
  opt.index_width = IndexWidth::i64;
  return graph_from_edges(n, n, r, c, {}, opt);
}

TEST(CpuInt64Index, EveryOpMatchesOracle) {
  const uint64_t seed = seed_for(64);
  const Graph g = int64_graph(seed);
  ASSERT_EQ(g.index_dtype(), DType::i64);
  SCOPED_TRACE(detail::concat("int64 graph nnz=", g.nnz(), " seed=", seed));
  for (int64_t F : {1, 5, 32, 33}) {
    for (SpmmOp op : kSpmmOps) {
      const int64_t ew = op == SpmmOp::copy_u ? 0 : (op == SpmmOp::copy_e ? F : 1);
      const SpmmInputs in = spmm_inputs(g, op, F, ew, seed + static_cast<uint64_t>(F));
      for (Reduce r : kReduces) {
        SCOPED_TRACE(detail::concat("F=", F, " ", name(op), "/", name(r)));
        const SpmmResult want = run_spmm(g, op, r, in.u, in.e, with_schedule("cpu_ref"));
        for (const auto& s : cpu_strategies(OpKind::spmm)) {
          SCOPED_TRACE(s);
          expect_spmm_match(run_spmm(g, op, r, in.u, in.e, with_schedule(s)), want);
        }
      }
    }
    for (SddmmOp op : kSddmmOps) {
      for (auto [lt, rt] : {std::pair{Target::u, Target::v}, std::pair{Target::e, Target::u},
                            std::pair{Target::v, Target::e}}) {
        SCOPED_TRACE(detail::concat("F=", F, " ", name(op), " ", name(lt), ",", name(rt)));
        const Tensor lhs = sddmm_operand(g, lt, F, seed + 3, false);
        const Tensor rhs = sddmm_operand(g, rt, F, seed + 4, op == SddmmOp::div);
        const Tensor want = run_sddmm(g, op, lhs, rhs, lt, rt, with_schedule("cpu_ref"));
        for (const auto& s : cpu_strategies(OpKind::sddmm)) {
          SCOPED_TRACE(s);
          EXPECT_LT(rel_error(run_sddmm(g, op, lhs, rhs, lt, rt, with_schedule(s)), want),
                    kTolerance);
        }
      }
    }
  }
}

// ---- merge-path partitions -------------------------------------------------------------------

// Every row_cost x chunks_per_thread x thread count: chunks that cut a hub row many times, that
// fall inside a run of empty rows, that hold no non-zero at all (a row_cost step wider than the
// chunk), and more chunks than path items (n = 1).
// Max/min also with NaN and infinite inputs: partial rows merged across chunks keep the first
// NaN, and a feature of -inf (+inf for min) messages names its first edge.
TEST(CpuMergepath, EveryPartitionMatchesOracle) {
  struct Case {
    SpmmOp op;
    Reduce reduce;
    int64_t F;
    bool e_per_feature;
    bool specials = false;
  };
  const std::vector<Case> cases = {{SpmmOp::u_mul_e, Reduce::sum, 7, true},
                                   {SpmmOp::copy_u, Reduce::max, 32, false},
                                   {SpmmOp::u_add_e, Reduce::mean, 1, false},
                                   {SpmmOp::copy_e, Reduce::min, 5, true},
                                   {SpmmOp::copy_u, Reduce::max, 9, false, true},
                                   {SpmmOp::copy_e, Reduce::min, 3, true, true}};
  const std::vector<GraphKind> kinds = {GraphKind::star,  GraphKind::half_row,
                                        GraphKind::empty_rows, GraphKind::rmat,
                                        GraphKind::single, GraphKind::no_edges};
  for (GraphKind kind : kinds) {
    const uint64_t seed = seed_for(salt_of(kind, 99, 3));
    const Graph g = random_graph(kind, 300, seed);
    SCOPED_TRACE(trace_of(kind, g, seed));
    for (const Case& c : cases) {
      SpmmInputs in =
          spmm_inputs(g, c.op, c.F, c.e_per_feature ? c.F : 1, seed + static_cast<uint64_t>(c.F));
      if (c.specials) add_specials(in.u.defined() ? in.u : in.e);
      const SpmmResult want = run_spmm(g, c.op, c.reduce, in.u, in.e, with_schedule("cpu_ref"));
      for (int threads : {1, 2, 3, 7}) {
        OmpThreads scope(threads);
        for (int64_t row_cost : {1, 2, 4, 8}) {
          for (int64_t chunks : {1, 2, 4, 8}) {
            SCOPED_TRACE(detail::concat(name(c.op), "/", name(c.reduce), " F=", c.F, " threads=",
                                        threads, " row_cost=", row_cost, " chunks_per_thread=",
                                        chunks));
            const SpmmResult got =
                run_spmm(g, c.op, c.reduce, in.u, in.e,
                         with_schedule("cpu_mergepath",
                                       {{"row_cost", row_cost}, {"chunks_per_thread", chunks}}));
            if (c.specials) expect_spmm_identical(got, want);
            else expect_spmm_match(got, want);
            if (HasFailure()) return;
          }
        }
      }
    }
  }
}

// One hub row at the very end after a long run of empty rows: the hub is split across every
// chunk and all carries meet in the last chunk.
TEST(CpuMergepath, HubRowAfterEmptyRows) {
  const int64_t n = 500;
  std::vector<int64_t> r, c;
  for (int64_t i = 0; i < n; ++i) { r.push_back(n - 1); c.push_back(i); }
  const Graph g = graph_from_edges(n, n, r, c);
  const Tensor u = random_tensor({n, 16}, seed_for(5));
  for (Reduce red : kReduces) {
    const SpmmResult want = run_spmm(g, SpmmOp::copy_u, red, u, Tensor(), with_schedule("cpu_ref"));
    for (int threads : {1, 3, 7}) {
      OmpThreads scope(threads);
      for (int64_t chunks : {1, 8}) {
        SCOPED_TRACE(detail::concat(name(red), " threads=", threads, " chunks=", chunks));
        expect_spmm_match(run_spmm(g, SpmmOp::copy_u, red, u, Tensor(),
                                   with_schedule("cpu_mergepath", {{"chunks_per_thread", chunks}})),
                          want);
      }
    }
  }
}

// cpu_edge splits edges by thread count: check odd counts and more threads than edges.
TEST(CpuEdgeSddmm, EveryThreadCountMatchesOracle) {
  for (GraphKind kind : {GraphKind::half_row, GraphKind::single, GraphKind::star}) {
    const uint64_t seed = seed_for(salt_of(kind, 98, 4));
    const Graph g = random_graph(kind, 300, seed);
    SCOPED_TRACE(trace_of(kind, g, seed));
    const Tensor x = random_tensor({g.n_rows, 9}, seed + 1);
    const Tensor y = random_tensor({g.n_cols, 9}, seed + 2);
    for (SddmmOp op : {SddmmOp::dot, SddmmOp::sub}) {
      const Tensor want = run_sddmm(g, op, x, y, Target::v, Target::u, with_schedule("cpu_ref"));
      for (int threads : {1, 2, 3, 7}) {
        OmpThreads scope(threads);
        SCOPED_TRACE(detail::concat(name(op), " threads=", threads));
        EXPECT_LT(rel_error(run_sddmm(g, op, x, y, Target::v, Target::u, with_schedule("cpu_edge")),
                            want),
                  kTolerance);
      }
    }
  }
}

// ---- the front door's argument checks --------------------------------------------------------

// Runs fn, expecting an exception of type Ex whose message contains `needle`.
template <class Ex>
void expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
  } catch (const Ex& ex) {
    EXPECT_NE(std::string(ex.what()).find(needle), std::string::npos)
        << "message does not name '" << needle << "': " << ex.what();
    return;
  } catch (const std::exception& ex) {
    ADD_FAILURE() << "wrong exception type for '" << needle << "': " << ex.what();
    return;
  }
  ADD_FAILURE() << "no exception; expected one naming '" << needle << "'";
}

// Each check gets fresh, undefined outputs: a rejected call must not depend on what an earlier
// call allocated.
class FrontDoor : public ::testing::Test {
 protected:
  Graph g = hand_graph<int32_t>();
  Tensor u = Tensor::from_vector(kHandU, {3, 2});
  Tensor x = Tensor::from_vector(kHandX, {3, 2});

  void spmm(SpmmOp op, Reduce r, const Tensor& uu, const Tensor& e, const OpOptions& o = {}) {
    Tensor out;
    gspmm(g, op, r, uu, e, out, o);
  }
  void sddmm(SddmmOp op, const Tensor& lhs, const Tensor& rhs, Target lt = Target::u,
             Target rt = Target::v, const OpOptions& o = {}) {
    Tensor out;
    gsddmm(g, op, lhs, rhs, out, lt, rt, o);
  }
};

TEST_F(FrontDoor, SpmmRejectsWrongOperandRows) {
  const Tensor bad = random_tensor({4, 2}, 1);
  expect_error<InvalidArgument>([&] { spmm(SpmmOp::copy_u, Reduce::sum, bad, Tensor()); },
                                "'u' has 4 rows");
}
TEST_F(FrontDoor, SpmmRejectsWrongDtype) {
  const Tensor u64 = u.astype(DType::f64);
  const Tensor e32 = Tensor::from_vector<float>({1, 2, 3, 4});
  expect_error<InvalidArgument>([&] { spmm(SpmmOp::u_mul_e, Reduce::sum, u64, e32); },
                                "'e' is float32 but 'u' is float64");
  const Tensor e_int = Tensor::from_vector<int32_t>({1, 2, 3, 4});
  expect_error<InvalidArgument>([&] { spmm(SpmmOp::u_mul_e, Reduce::sum, u, e_int); },
                                "'e' must be float32");
  OpOptions o;
  o.schedule.strategy = "cpu_mergepath";
  expect_error<Unsupported>([&] { spmm(SpmmOp::copy_u, Reduce::sum, u64, Tensor(), o); },
                            "takes float32 only");
}

// float64 operands run on cpu_ref and give float64 results: the same values as float32 inputs
// (exactly representable here) summed in double, with every reduce and its arg outputs.
TEST_F(FrontDoor, Float64RunsOnTheOracle) {
  const Tensor u64 = u.astype(DType::f64), x64 = x.astype(DType::f64);
  const Tensor e64 = Tensor::from_vector<double>({0.5, -2, 3, 0.25});
  for (Reduce r : {Reduce::sum, Reduce::mean, Reduce::max, Reduce::min}) {
    Tensor o32, o64, a32u, a32e, a64u, a64e;
    if (r == Reduce::max || r == Reduce::min) {
      gspmm(g, SpmmOp::u_mul_e, r, u, e64.astype(DType::f32), o32, a32u, a32e);
      gspmm(g, SpmmOp::u_mul_e, r, u64, e64, o64, a64u, a64e);
      EXPECT_EQ(a32u.to_vector<int64_t>(), a64u.to_vector<int64_t>());
      EXPECT_EQ(a32e.to_vector<int64_t>(), a64e.to_vector<int64_t>());
    } else {
      gspmm(g, SpmmOp::u_mul_e, r, u, e64.astype(DType::f32), o32);
      gspmm(g, SpmmOp::u_mul_e, r, u64, e64, o64);
    }
    ASSERT_EQ(o64.dtype(), DType::f64);
    const auto a = o32.to_vector<float>();
    const auto b = o64.to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6 * (1 + std::abs(b[i])));
  }
  Tensor d32, d64;
  gsddmm(g, SddmmOp::dot, u, x, d32);
  gsddmm(g, SddmmOp::dot, u64, x64, d64);
  ASSERT_EQ(d64.dtype(), DType::f64);
  const auto a = d32.to_vector<float>();
  const auto b = d64.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6 * (1 + std::abs(b[i])));
}
// The graph's own float32 values weigh float64 features (GCN's normalised or SAGE's mean weights
// in a float64 model): widened exactly, the result is float64 and equals passing them as e.
TEST_F(FrontDoor, Float64FeaturesTakeTheGraphsFloat32Values) {
  Graph w = g;
  w.val = Tensor::from_vector<float>({0.5f, -2.f, 3.f, 0.1f});
  const Tensor u64 = u.astype(DType::f64);
  for (Reduce r : {Reduce::sum, Reduce::mean}) {
    Tensor own, given;
    gspmm(w, SpmmOp::u_mul_e, r, u64, Tensor(), own);
    gspmm(w, SpmmOp::u_mul_e, r, u64, w.val.astype(DType::f64), given);
    ASSERT_EQ(own.dtype(), DType::f64);
    EXPECT_EQ(own.to_vector<double>(), given.to_vector<double>());
  }
  // Given operands still have to agree.
  Tensor out;
  expect_error<InvalidArgument>([&] { gspmm(w, SpmmOp::u_mul_e, Reduce::sum, u64, w.val, out); },
                                "'e' is float32 but 'u' is float64");
}
TEST_F(FrontDoor, SpmmRejectsEdgeWidthMismatch) {
  const Tensor e3 = random_tensor({4, 3}, 2);
  expect_error<InvalidArgument>([&] { spmm(SpmmOp::u_mul_e, Reduce::sum, u, e3); },
                                "'e' width 3");
  const Tensor e_rows = random_tensor({5, 1}, 3);
  expect_error<InvalidArgument>([&] { spmm(SpmmOp::u_add_e, Reduce::sum, u, e_rows); },
                                "'e' has 5 rows");
}
TEST_F(FrontDoor, SpmmRejectsOutputOfWrongShape) {
  Tensor wrong = Tensor::empty({3, 3}, DType::f32);
  expect_error<InvalidArgument>(
      [&] { gspmm(g, SpmmOp::copy_u, Reduce::sum, u, Tensor(), wrong); }, "'out' has shape");
  expect_error<InvalidArgument>(
      [&] {
        Tensor out, arg_u = Tensor::empty({3, 1}, DType::i64), arg_e;
        gspmm(g, SpmmOp::copy_u, Reduce::max, u, Tensor(), out, arg_u, arg_e);
      },
      "'arg_u' has shape");
}
TEST_F(FrontDoor, SpmmRejectsArgTensorsForSum) {
  expect_error<InvalidArgument>(
      [&] {
        Tensor out, arg_u, arg_e;
        gspmm(g, SpmmOp::copy_u, Reduce::sum, u, Tensor(), out, arg_u, arg_e);
      },
      "arg_u");
}
TEST_F(FrontDoor, RejectsUnknownStrategy) {
  expect_error<InvalidArgument>(
      [&] { spmm(SpmmOp::copy_u, Reduce::sum, u, Tensor(), with_schedule("nope")); }, "'nope'");
  expect_error<InvalidArgument>(
      [&] { sddmm(SddmmOp::dot, u, x, Target::u, Target::v, with_schedule("nope")); }, "'nope'");
}
TEST_F(FrontDoor, RejectsBadParameters) {
  expect_error<InvalidArgument>(
      [&] {
        spmm(SpmmOp::copy_u, Reduce::sum, u, Tensor(),
             with_schedule("cpu_mergepath", {{"row_cost", 3}}));
      },
      "row_cost");
  expect_error<InvalidArgument>(
      [&] {
        spmm(SpmmOp::copy_u, Reduce::sum, u, Tensor(),
             with_schedule("cpu_mergepath", {{"warps", 4}}));
      },
      "'warps'");
  expect_error<InvalidArgument>(
      [&] {
        sddmm(SddmmOp::dot, u, x, Target::u, Target::v,
              with_schedule("cpu_edge", {{"cache_size", 64}}));
      },
      "'cache_size'");
}
TEST_F(FrontDoor, GpuStrategyOnHostData) {
  // Without CUDA 'gnnone' is unknown (InvalidArgument); with CUDA it cannot run host data
  // (Unsupported). Either way the message names the strategy.
  auto check = [](const std::function<void()>& fn) {
    try {
      fn();
      ADD_FAILURE() << "gnnone ran on host data";
    } catch (const InvalidArgument& ex) {
      EXPECT_NE(std::string(ex.what()).find("gnnone"), std::string::npos) << ex.what();
    } catch (const Unsupported& ex) {
      EXPECT_NE(std::string(ex.what()).find("gnnone"), std::string::npos) << ex.what();
    }
  };
  check([&] { spmm(SpmmOp::copy_u, Reduce::sum, u, Tensor(), with_schedule("gnnone")); });
  check([&] { sddmm(SddmmOp::dot, u, x, Target::u, Target::v, with_schedule("gnnone")); });
}
TEST_F(FrontDoor, SddmmRejectsMismatchedOperands) {
  const Tensor wide = random_tensor({3, 5}, 4);
  expect_error<InvalidArgument>([&] { sddmm(SddmmOp::add, u, wide); }, "'rhs' has width 5");
  const Tensor few = random_tensor({2, 2}, 5);
  expect_error<InvalidArgument>([&] { sddmm(SddmmOp::add, u, few); }, "'rhs' has 2 rows");
  expect_error<InvalidArgument>([&] { sddmm(SddmmOp::mul, few, x, Target::e, Target::v); },
                                "'lhs' has 2 rows");
  const Tensor u64 = u.astype(DType::f64);
  expect_error<InvalidArgument>([&] { sddmm(SddmmOp::mul, u64, x); },
                                "'rhs' is float32 but 'lhs' is float64");
  Tensor wrong = Tensor::empty({4, 2}, DType::f32);  // dot writes [nnz, 1]
  expect_error<InvalidArgument>([&] { gsddmm(g, SddmmOp::dot, u, x, wrong); }, "'out' has shape");
}

}  // namespace
}  // namespace spgnn::test
