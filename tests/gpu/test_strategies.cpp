// The row-parallel SpMM strategies (mergepath, warp_vertex, rowtile), the shuffle SDDMM and GPU
// `auto`, against the float64 oracle cpu_ref: fresh random graphs of every shape in
// test_util.hpp, int32 and int64 indices, every width of test_widths() plus 6, 500 and 1024,
// every supported op and reduce, and every value of every parameter (sampled across the other
// parameters, not their full cross product). Outputs are poisoned with NaN before each GPU run,
// so an unwritten element fails. SPGNN_TEST_QUICK=1 (compute-sanitizer runs) shrinks graphs and
// sweeps.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "spgnn/ops.hpp"
#include "test_util.hpp"

#if SPGNN_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace spgnn::test {
namespace {

[[maybe_unused]] bool quick() {
  const char* q = std::getenv("SPGNN_TEST_QUICK");
  return q && *q && std::string(q) != "0";
}
[[maybe_unused]] int64_t graph_n() { return quick() ? 300 : 1500; }

[[maybe_unused]] std::vector<int64_t> widths() {
  if (quick()) return {1, 3, 6, 32, 33, 128, 256};
  std::vector<int64_t> w = test_widths();
  for (int64_t extra : {6, 500, 1024}) w.push_back(extra);
  return w;
}
[[maybe_unused]] std::vector<GraphKind> kinds() {
  if (quick()) return {GraphKind::rmat, GraphKind::half_row, GraphKind::empty_rows,
                       GraphKind::single, GraphKind::no_edges};
  return all_graph_kinds();
}

struct Graphs {
  Graph host, dev;
};
// One host graph and its device copy per (kind, index dtype), built once per process.
[[maybe_unused]] const Graphs& graphs(GraphKind kind, DType idx) {
  static std::map<std::pair<int, int>, Graphs> cache;
  const auto key = std::make_pair(static_cast<int>(kind), static_cast<int>(idx));
  auto it = cache.find(key);
  if (it == cache.end()) {
    Graphs g;
    g.host = with_index(random_graph(kind, graph_n(), seed_for(300 + static_cast<int>(kind))), idx);
    g.dev = g.host.to(Device::cuda());
    it = cache.emplace(key, std::move(g)).first;
  }
  return it->second;
}

[[maybe_unused]] Schedule sched(const std::string& strategy,
                                std::map<std::string, int64_t> params = {}) {
  Schedule s;
  s.strategy = strategy;
  s.params = std::move(params);
  return s;
}
[[maybe_unused]] OpOptions cpu_ref() {
  OpOptions o;
  o.schedule.strategy = "cpu_ref";
  return o;
}

[[maybe_unused]] const std::vector<std::string> kSpmmStrategies = {"mergepath", "warp_vertex",
                                                                   "rowtile"};
[[maybe_unused]] const std::vector<DType> kIndex = {DType::i32, DType::i64};
[[maybe_unused]] constexpr double kTol = 1e-5;
[[maybe_unused]] int g_failures = 0;
[[maybe_unused]] constexpr int kMaxReported = 20;

#if SPGNN_WITH_CUDA
// Checks one gspmm against cpu_ref. ew = e width (0 = no e; 1 = broadcast, as [nnz] when
// e_1d; F = per feature).
void check_spmm(GraphKind kind, DType idx, SpmmOp op, Reduce red, int64_t F, int64_t ew,
                const Schedule& s, cudaStream_t stream = nullptr, bool e_1d = false) {
  if (g_failures > kMaxReported) return;
  const Graphs& G = graphs(kind, idx);
  static uint64_t salt = 0;
  const uint64_t seed = seed_for(7000 + ++salt);
  std::ostringstream what;
  what << "spmm " << name(op) << "/" << name(red) << " graph=" << kind_name(kind)
       << " idx=" << dtype_name(idx) << " F=" << F << " e_width=" << ew << " " << s.str()
       << (stream ? " (stream)" : "") << " seed=" << seed;
  SCOPED_TRACE(what.str());
  const int64_t nnz = G.host.nnz();
  Tensor u_h, e_h, u_d, e_d;
  if (op != SpmmOp::copy_e) u_h = random_tensor({G.host.n_cols, F}, seed);
  if (op != SpmmOp::copy_u)
    e_h = (ew == 1 && e_1d) ? random_tensor({nnz}, seed + 1, 0.5f, 1.5f)
                            : random_tensor({nnz, ew}, seed + 1, 0.5f, 1.5f);
  Tensor ref;
  gspmm(G.host, op, red, u_h, e_h, ref, cpu_ref());
  if (u_h.defined()) u_d = u_h.to(Device::cuda());
  if (e_h.defined()) e_d = e_h.to(Device::cuda());
  Tensor out = Tensor::empty({G.host.n_rows, F}, DType::f32, Device::cuda());
  out.fill_(NAN, stream);
  OpOptions o;
  o.schedule = s;
  o.stream = stream;
  gspmm(G.dev, op, red, u_d, e_d, out, o);
  if (stream) {
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  const double err = rel_error(out, ref);
  EXPECT_LT(err, kTol);
  if (!(err < kTol)) ++g_failures;
}

Tensor operand(Target t, const Graph& g, int64_t F, uint64_t seed, bool positive) {
  const int64_t rows = t == Target::u ? g.n_cols : t == Target::v ? g.n_rows : g.nnz();
  return positive ? random_tensor({rows, F}, seed, 0.5f, 1.5f) : random_tensor({rows, F}, seed);
}

void check_sddmm(GraphKind kind, DType idx, SddmmOp op, Target lt, Target rt, int64_t F,
                 const Schedule& s, cudaStream_t stream = nullptr) {
  if (g_failures > kMaxReported) return;
  const Graphs& G = graphs(kind, idx);
  static uint64_t salt = 0;
  const uint64_t seed = seed_for(9000 + ++salt);
  std::ostringstream what;
  what << "sddmm " << name(op) << " lhs=" << name(lt) << " rhs=" << name(rt)
       << " graph=" << kind_name(kind) << " idx=" << dtype_name(idx) << " F=" << F << " "
       << s.str() << (stream ? " (stream)" : "") << " seed=" << seed;
  SCOPED_TRACE(what.str());
  Tensor l_h, r_h, l_d, r_d;
  // dot's operands are positive: a float32 dot of signed terms that nearly cancel (one edge, a
  // few features) has a relative error far above kTol whatever the kernel does.
  if (op != SddmmOp::copy_rhs) l_h = operand(lt, G.host, F, seed, op == SddmmOp::dot);
  if (op != SddmmOp::copy_lhs)
    r_h = operand(rt, G.host, F, seed + 1, op == SddmmOp::div || op == SddmmOp::dot);
  Tensor ref;
  gsddmm(G.host, op, l_h, r_h, ref, lt, rt, cpu_ref());
  if (l_h.defined()) l_d = l_h.to(Device::cuda());
  if (r_h.defined()) r_d = r_h.to(Device::cuda());
  const int64_t width = op == SddmmOp::dot ? 1 : F;
  Tensor out = Tensor::empty({G.host.nnz(), width}, DType::f32, Device::cuda());
  out.fill_(NAN, stream);
  OpOptions o;
  o.schedule = s;
  o.stream = stream;
  gsddmm(G.dev, op, l_d, r_d, out, lt, rt, o);
  if (stream) {
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  const double err = rel_error(out, ref);
  EXPECT_LT(err, kTol);
  if (!(err < kTol)) ++g_failures;
}

// Every value of every parameter of `strategy`, each combined with a rotating choice of the
// others (a sample of the cross product that still visits each value with several partners).
std::vector<Schedule> sampled_schedules(OpKind op, const std::string& strategy) {
  const StrategyInfo& info = find_strategy(op, strategy);
  std::vector<Schedule> out;
  int salt = 0;
  for (size_t pi = 0; pi < info.params.size(); ++pi)
    for (int64_t v : info.params[pi].values) {
      Schedule s = sched(strategy);
      s.params[info.params[pi].name] = v;
      ++salt;
      for (size_t qi = 0; qi < info.params.size(); ++qi) {
        if (qi == pi) continue;
        const auto& vals = info.params[qi].values;
        s.params[info.params[qi].name] = vals[(salt * 7 + qi * 3) % vals.size()];
      }
      out.push_back(s);
    }
  return out;
}
#endif

// ---- SpMM -------------------------------------------------------------------------------------

TEST(StrategySpmm, EveryGraphIndexAndWidth) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  for (const auto& st : kSpmmStrategies)
    for (GraphKind k : kinds())
      for (DType idx : kIndex)
        for (int64_t F : widths()) {
          check_spmm(k, idx, SpmmOp::copy_u, Reduce::sum, F, 0, sched(st));
          check_spmm(k, idx, SpmmOp::u_mul_e, Reduce::mean, F, 1, sched(st), nullptr, F % 2 == 0);
          if ((F + static_cast<int64_t>(idx == DType::i64)) % 2 == 0 || quick())
            check_spmm(k, idx, SpmmOp::u_mul_e, Reduce::sum, F, F, sched(st));
        }
#endif
}

TEST(StrategySpmm, EveryOpAndReduce) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const std::vector<int64_t> fs = quick() ? std::vector<int64_t>{6, 33}
                                          : std::vector<int64_t>{1, 4, 6, 33, 256};
  for (const auto& st : kSpmmStrategies)
    for (GraphKind k : {GraphKind::rmat, GraphKind::half_row, GraphKind::empty_rows})
      for (SpmmOp op : {SpmmOp::copy_u, SpmmOp::copy_e, SpmmOp::u_mul_e, SpmmOp::u_add_e,
                        SpmmOp::u_sub_e, SpmmOp::u_div_e})
        for (Reduce red : {Reduce::sum, Reduce::mean})
          for (int64_t F : fs) {
            const DType idx = F % 2 ? DType::i64 : DType::i32;
            if (op == SpmmOp::copy_u) {
              check_spmm(k, idx, op, red, F, 0, sched(st));
            } else if (op == SpmmOp::copy_e) {
              check_spmm(k, idx, op, red, F, F, sched(st), nullptr, F == 1);
            } else {
              check_spmm(k, idx, op, red, F, 1, sched(st));
              check_spmm(k, idx, op, red, F, F, sched(st));
            }
          }
#endif
}

TEST(StrategySpmm, EveryParameterValue) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const std::vector<int64_t> fs = quick() ? std::vector<int64_t>{5, 32, 136}
                                          : std::vector<int64_t>{1, 5, 6, 16, 32, 136, 500};
  const std::vector<GraphKind> ks = {GraphKind::rmat, GraphKind::half_row, GraphKind::star,
                                     GraphKind::empty_rows};
  int i = 0;
  for (const auto& st : kSpmmStrategies)
    for (const Schedule& s : sampled_schedules(OpKind::spmm, st))
      for (GraphKind k : ks)
        for (int64_t F : fs) {
          const DType idx = ++i % 2 ? DType::i64 : DType::i32;
          if (i % 3 == 0) check_spmm(k, idx, SpmmOp::copy_u, Reduce::mean, F, 0, s);
          else check_spmm(k, idx, SpmmOp::u_mul_e, Reduce::sum, F, i % 3 == 1 ? 1 : F, s);
        }
#endif
}

TEST(StrategySpmm, CachedScheduleIsReused) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  // The merge-path schedule and the row order are cached with the graph: repeated calls (and
  // the online recomputation) must give the same, correct answer; a copy of the graph shares the
  // cache, and an index-type copy must not pick up the other's items.
  for (DType idx : kIndex)
    for (int rep = 0; rep < 3; ++rep)
      for (int64_t F : {8, 64}) {
        check_spmm(GraphKind::rmat, idx, SpmmOp::u_mul_e, Reduce::sum, F, 1,
                   sched("mergepath", {{"cost", 8}, {"online", rep == 1 ? 1 : 0}}));
        check_spmm(GraphKind::star, idx, SpmmOp::copy_u, Reduce::mean, F, 0,
                   sched("rowtile", {{"swizzle", 1}}));
      }
  const Graphs& G = graphs(GraphKind::rmat, DType::i32);
  const size_t items = G.dev.cache->items.size();
  EXPECT_GT(items, 0u);
  check_spmm(GraphKind::rmat, DType::i32, SpmmOp::u_mul_e, Reduce::sum, 8, 1,
             sched("mergepath", {{"cost", 8}}));
  EXPECT_EQ(G.dev.cache->items.size(), items) << "a repeated call must reuse the cached schedule";
#endif
}

TEST(StrategySpmm, NonDefaultStream) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreate(&st), cudaSuccess);
  for (const auto& s : kSpmmStrategies)
    for (int64_t F : {1, 6, 64, 256})
      for (GraphKind k : {GraphKind::rmat, GraphKind::empty_rows}) {
        check_spmm(k, DType::i32, SpmmOp::u_mul_e, Reduce::mean, F, 1, sched(s), st);
        check_spmm(k, DType::i64, SpmmOp::copy_u, Reduce::sum, F, 0, sched(s), st);
      }
  // Software task pool on a stream of its own (its counter is per stream).
  for (int64_t F : {3, 128})
    check_spmm(GraphKind::half_row, DType::i32, SpmmOp::copy_u, Reduce::sum, F, 0,
               sched("warp_vertex", {{"assign", 2}, {"step", 1}}), st);
  cudaStreamDestroy(st);
#endif
}

TEST(StrategySpmm, MaxMinAreDeclaredUnsupported) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const Graphs& G = graphs(GraphKind::rmat, DType::i32);
  Tensor u = Tensor::zeros({G.host.n_cols, 4}, DType::f32, Device::cuda());
  for (const auto& s : kSpmmStrategies)
    for (Reduce red : {Reduce::max, Reduce::min}) {
      Tensor out;
      OpOptions o;
      o.schedule = sched(s);
      EXPECT_THROW(gspmm(G.dev, SpmmOp::copy_u, red, u, Tensor(), out, o), Unsupported) << s;
    }
#endif
}

// ---- SDDMM ------------------------------------------------------------------------------------

TEST(ShuffleSddmm, EveryGraphIndexAndWidth) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  for (GraphKind k : kinds())
    for (DType idx : kIndex)
      for (int64_t F : widths()) {
        check_sddmm(k, idx, SddmmOp::dot, Target::u, Target::v, F, sched("shuffle"));
        check_sddmm(k, idx, SddmmOp::dot, Target::v, Target::u, F, sched("shuffle"));
        check_sddmm(k, idx, SddmmOp::mul, Target::u, Target::v, F, sched("shuffle"));
        check_sddmm(k, idx, SddmmOp::add, Target::e, Target::v, F, sched("shuffle"));
      }
#endif
}

TEST(ShuffleSddmm, EveryOpAndTarget) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const std::vector<int64_t> fs = quick() ? std::vector<int64_t>{6, 33}
                                          : std::vector<int64_t>{1, 6, 32, 33, 256};
  const std::vector<Target> ts = {Target::u, Target::v, Target::e};
  for (SddmmOp op : {SddmmOp::dot, SddmmOp::add, SddmmOp::sub, SddmmOp::mul, SddmmOp::div,
                     SddmmOp::copy_lhs, SddmmOp::copy_rhs})
    for (Target lt : ts)
      for (Target rt : ts)
        for (int64_t F : fs) {
          const GraphKind k = F % 2 ? GraphKind::star : GraphKind::rmat;
          const DType idx = F % 2 ? DType::i64 : DType::i32;
          check_sddmm(k, idx, op, lt, rt, F, sched("shuffle"));
        }
#endif
}

TEST(ShuffleSddmm, EveryParameterValue) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const std::vector<int64_t> fs = quick() ? std::vector<int64_t>{5, 32, 136}
                                          : std::vector<int64_t>{1, 5, 6, 16, 32, 136, 500};
  int i = 0;
  for (int64_t lanes : {0, 2, 4, 8, 16, 32})
    for (int64_t epb : {32, 64, 128, 256, 512, 1024}) {
      if (quick() && epb != 32 && epb != 1024 && lanes != 0 && lanes != 2) continue;
      const Schedule s = sched("shuffle", {{"lanes", lanes}, {"edges_per_block", epb}});
      for (GraphKind k : {GraphKind::rmat, GraphKind::half_row, GraphKind::empty_rows})
        for (int64_t F : fs) {
          const DType idx = ++i % 2 ? DType::i64 : DType::i32;
          if (i % 2) check_sddmm(k, idx, SddmmOp::dot, Target::u, Target::v, F, s);
          else check_sddmm(k, idx, SddmmOp::sub, Target::v, Target::e, F, s);
        }
    }
#endif
}

TEST(ShuffleSddmm, NonDefaultStream) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreate(&st), cudaSuccess);
  for (int64_t F : {1, 6, 64, 256})
    for (GraphKind k : {GraphKind::rmat, GraphKind::empty_rows}) {
      check_sddmm(k, DType::i32, SddmmOp::dot, Target::u, Target::v, F, sched("shuffle"), st);
      check_sddmm(k, DType::i64, SddmmOp::mul, Target::v, Target::e, F, sched("shuffle"), st);
    }
  cudaStreamDestroy(st);
#endif
}

// ---- auto on the GPU ------------------------------------------------------------------------------

TEST(AutoGpu, ResolvesToASupportedStrategyAndIsCorrect) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const std::vector<int64_t> fs = quick() ? std::vector<int64_t>{1, 32, 256}
                                          : std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256, 1024};
  for (GraphKind k : kinds())
    for (int64_t F : fs) {
      const DType idx = F % 3 ? DType::i32 : DType::i64;
      const Graphs& G = graphs(k, idx);
      const Schedule a = resolve_spmm_schedule(G.dev, SpmmOp::u_mul_e, Reduce::sum, F, Schedule{});
      EXPECT_NE(a.strategy, "auto");
      EXPECT_EQ(find_strategy(OpKind::spmm, a.strategy).device, DeviceType::cuda) << a.str();
      EXPECT_NO_THROW(check_schedule(OpKind::spmm, a)) << a.str();
      EXPECT_EQ(resolve_spmm_schedule(G.dev, SpmmOp::u_mul_e, Reduce::sum, F, Schedule{}).str(),
                a.str())
          << "auto must be stable";
      check_spmm(k, idx, SpmmOp::u_mul_e, Reduce::sum, F, 1, Schedule{});
      check_spmm(k, idx, SpmmOp::copy_u, Reduce::mean, F, 0, Schedule{});
      check_sddmm(k, idx, SddmmOp::dot, Target::u, Target::v, F, Schedule{});
      check_sddmm(k, idx, SddmmOp::mul, Target::u, Target::e, F, Schedule{});
    }
  // max/min exist only in cpu_ref: on the GPU `auto` says so instead of picking a wrong kernel.
  const Graphs& G = graphs(GraphKind::rmat, DType::i32);
  Tensor u = Tensor::zeros({G.host.n_cols, 4}, DType::f32, Device::cuda());
  Tensor out;
  EXPECT_THROW(gspmm(G.dev, SpmmOp::copy_u, Reduce::max, u, Tensor(), out), Unsupported);
#endif
}

}  // namespace
}  // namespace spgnn::test
