// GNNOne SpMM and SDDMM (strategy `gnnone`) against the float64 oracle cpu_ref, on fresh random
// graphs of every shape in test_util.hpp, int32 and int64 indices, every width of test_widths()
// plus 6, 500 and 1024, every op / reduce / target the strategy supports and every value of its
// parameters. Outputs are poisoned with NaN before each GPU run, so an unwritten element fails.
// SPGNN_TEST_QUICK=1 (set by scripts/gpu-check.sh for the compute-sanitizer runs) shrinks graphs
// and sweeps.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <cstdio>
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
    g.host = with_index(random_graph(kind, graph_n(), seed_for(100 + static_cast<int>(kind))), idx);
    g.dev = g.host.to(Device::cuda());
    it = cache.emplace(key, std::move(g)).first;
  }
  return it->second;
}

[[maybe_unused]] Schedule gnnone(std::map<std::string, int64_t> params = {}) {
  Schedule s;
  s.strategy = "gnnone";
  s.params = std::move(params);
  return s;
}
[[maybe_unused]] OpOptions cpu_ref() {
  OpOptions o;
  o.schedule.strategy = "cpu_ref";
  return o;
}

[[maybe_unused]] constexpr double kTol = 1e-5;
[[maybe_unused]] int g_failures = 0;
[[maybe_unused]] constexpr int kMaxReported = 20;

#if SPGNN_WITH_CUDA
// Checks one gspmm against cpu_ref. ew = e width (0 = no e; 1 = broadcast, as [nnz] when
// e_1d; F = per feature).
void check_spmm(GraphKind kind, DType idx, SpmmOp op, Reduce red, int64_t F, int64_t ew,
                const Schedule& sched, cudaStream_t stream = nullptr, bool e_1d = false) {
  if (g_failures > kMaxReported) return;
  const Graphs& G = graphs(kind, idx);
  static uint64_t salt = 0;
  const uint64_t seed = seed_for(1000 + ++salt);
  std::ostringstream what;
  what << "spmm " << name(op) << "/" << name(red) << " graph=" << kind_name(kind)
       << " idx=" << dtype_name(idx) << " F=" << F << " e_width=" << ew << " "
       << sched.str() << (stream ? " (stream)" : "") << " seed=" << seed;
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
  o.schedule = sched;
  o.stream = stream;
  gspmm(G.dev, op, red, u_d, e_d, out, o);
  if (stream) {
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  const double err = rel_error(out, ref);
  EXPECT_LT(err, kTol);
  if (!(err < kTol)) ++g_failures;
}

Tensor abs_of(const Tensor& t) {
  Tensor a = t.clone();
  float* p = a.data<float>();
  for (int64_t i = 0; i < a.numel(); ++i) p[i] = std::fabs(p[i]);
  return a;
}
double norm_of(const Tensor& t) {
  Tensor h = t.astype(DType::f64);
  const double* p = h.data<double>();
  double s = 0;
  for (int64_t i = 0; i < h.numel(); ++i) s += p[i] * p[i];
  return std::sqrt(s);
}

Tensor operand(Target t, const Graph& g, int64_t F, uint64_t seed, bool positive) {
  const int64_t rows = t == Target::u ? g.n_cols : t == Target::v ? g.n_rows : g.nnz();
  return positive ? random_tensor({rows, F}, seed, 0.5f, 1.5f) : random_tensor({rows, F}, seed);
}

void check_sddmm(GraphKind kind, DType idx, SddmmOp op, Target lt, Target rt, int64_t F,
                 const Schedule& sched, cudaStream_t stream = nullptr) {
  if (g_failures > kMaxReported) return;
  const Graphs& G = graphs(kind, idx);
  static uint64_t salt = 0;
  const uint64_t seed = seed_for(5000 + ++salt);
  std::ostringstream what;
  what << "sddmm " << name(op) << " lhs=" << name(lt) << " rhs=" << name(rt)
       << " graph=" << kind_name(kind) << " idx=" << dtype_name(idx) << " F=" << F << " "
       << sched.str() << (stream ? " (stream)" : "") << " seed=" << seed;
  SCOPED_TRACE(what.str());
  Tensor l_h, r_h, l_d, r_d;
  if (op != SddmmOp::copy_rhs) l_h = operand(lt, G.host, F, seed, false);
  if (op != SddmmOp::copy_lhs) r_h = operand(rt, G.host, F, seed + 1, op == SddmmOp::div);
  Tensor ref;
  gsddmm(G.host, op, l_h, r_h, ref, lt, rt, cpu_ref());
  if (l_h.defined()) l_d = l_h.to(Device::cuda());
  if (r_h.defined()) r_d = r_h.to(Device::cuda());
  const int64_t width = op == SddmmOp::dot ? 1 : F;
  Tensor out = Tensor::empty({G.host.nnz(), width}, DType::f32, Device::cuda());
  out.fill_(NAN, stream);
  OpOptions o;
  o.schedule = sched;
  o.stream = stream;
  gsddmm(G.dev, op, l_d, r_d, out, lt, rt, o);
  if (stream) {
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  // A dot product's float32 error scales with sum |l_f * r_f|, not with |sum l_f * r_f| (which
  // cancellation can make tiny): measure it against the dot of the absolute values.
  double err = rel_error(out, ref);
  if (op == SddmmOp::dot) {
    Tensor ref_abs;
    gsddmm(G.host, op, abs_of(l_h), abs_of(r_h), ref_abs, lt, rt, cpu_ref());
    err = err * norm_of(ref) / std::max(norm_of(ref_abs), 1e-30);
  }
  EXPECT_LT(err, kTol);
  if (!(err < kTol)) ++g_failures;
}
#endif

[[maybe_unused]] const std::vector<DType> kIndex = {DType::i32, DType::i64};

// ---- SpMM -------------------------------------------------------------------------------------

TEST(GnnoneSpmm, EveryGraphIndexAndWidth) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  for (GraphKind k : kinds())
    for (DType idx : kIndex)
      for (int64_t F : widths()) {
        check_spmm(k, idx, SpmmOp::copy_u, Reduce::sum, F, 0, gnnone());
        check_spmm(k, idx, SpmmOp::u_mul_e, Reduce::mean, F, 1, gnnone(), nullptr, F % 2 == 0);
        check_spmm(k, idx, SpmmOp::u_mul_e, Reduce::sum, F, F, gnnone());
      }
#endif
}

TEST(GnnoneSpmm, EveryOpAndReduce) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const std::vector<int64_t> fs = quick() ? std::vector<int64_t>{6, 33}
                                          : std::vector<int64_t>{1, 4, 6, 32, 33, 256};
  for (GraphKind k : {GraphKind::rmat, GraphKind::half_row, GraphKind::empty_rows})
    for (SpmmOp op : {SpmmOp::copy_u, SpmmOp::copy_e, SpmmOp::u_mul_e, SpmmOp::u_add_e,
                      SpmmOp::u_sub_e, SpmmOp::u_div_e})
      for (Reduce red : {Reduce::sum, Reduce::mean})
        for (int64_t F : fs) {
          const DType idx = F % 2 ? DType::i64 : DType::i32;
          if (op == SpmmOp::copy_u) {
            check_spmm(k, idx, op, red, F, 0, gnnone());
          } else if (op == SpmmOp::copy_e) {
            check_spmm(k, idx, op, red, F, F, gnnone(), nullptr, F == 1);
          } else {
            check_spmm(k, idx, op, red, F, 1, gnnone());
            check_spmm(k, idx, op, red, F, F, gnnone());
          }
        }
#endif
}

TEST(GnnoneSpmm, EveryParameterValue) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const std::vector<int64_t> fs = quick() ? std::vector<int64_t>{5, 32, 136}
                                          : std::vector<int64_t>{1, 5, 6, 16, 32, 136, 256};
  const std::vector<GraphKind> ks = {GraphKind::rmat, GraphKind::half_row, GraphKind::star};
  for (int64_t cache : {32, 64, 128, 256})
    for (int64_t warps : {1, 2, 4, 8, 16}) {
      if (quick() && warps != 1 && warps != 16 && cache != 32 && cache != 256) continue;
      for (GraphKind k : ks)
        for (int64_t F : fs) {
          const DType idx = (cache + warps + F) % 2 ? DType::i64 : DType::i32;
          check_spmm(k, idx, SpmmOp::u_mul_e, Reduce::sum, F, 1,
                     gnnone({{"cache_size", cache}, {"warps", warps}}));
        }
    }
  // Each ablation switch, alone and all together, with int32 and int64 indices.
  const std::vector<std::map<std::string, int64_t>> ablations = {
      {{"nze_cache", 0}},
      {{"vector_loads", 0}},
      {{"consecutive", 0}},
      {{"nze_cache", 0}, {"vector_loads", 0}, {"consecutive", 0}, {"cache_size", 256}},
      {{"nze_cache", 1}, {"vector_loads", 1}, {"consecutive", 1}, {"cache_size", 32},
       {"warps", 16}}};
  for (const auto& abl : ablations)
    for (GraphKind k : ks)
      for (DType idx : kIndex)
        for (int64_t F : fs) {
          check_spmm(k, idx, SpmmOp::copy_u, Reduce::mean, F, 0, gnnone(abl));
          check_spmm(k, idx, SpmmOp::u_mul_e, Reduce::sum, F, 1, gnnone(abl));
          check_spmm(k, idx, SpmmOp::u_mul_e, Reduce::sum, F, F, gnnone(abl));
        }
#endif
}

TEST(GnnoneSpmm, NonDefaultStream) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreate(&st), cudaSuccess);
  for (int64_t F : {1, 6, 64, 256})
    for (GraphKind k : {GraphKind::rmat, GraphKind::empty_rows}) {
      check_spmm(k, DType::i32, SpmmOp::u_mul_e, Reduce::mean, F, 1, gnnone(), st);
      check_spmm(k, DType::i64, SpmmOp::copy_u, Reduce::sum, F, 0, gnnone(), st);
    }
  cudaStreamDestroy(st);
#endif
}

TEST(GnnoneSpmm, MaxMinAreDeclaredUnsupported) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const Graphs& G = graphs(GraphKind::rmat, DType::i32);
  Tensor u = Tensor::zeros({G.host.n_cols, 4}, DType::f32, Device::cuda());
  Tensor out;
  OpOptions o;
  o.schedule = gnnone();
  EXPECT_THROW(gspmm(G.dev, SpmmOp::copy_u, Reduce::max, u, Tensor(), out, o), Unsupported);
  // auto still answers on the GPU for sum, with a GPU strategy (which one depends on the
  // graph's size and shape: see docs/STRATEGIES.md).
  const Schedule a = resolve_spmm_schedule(G.dev, SpmmOp::copy_u, Reduce::sum, 32, Schedule{});
  EXPECT_EQ(find_strategy(OpKind::spmm, a.strategy).device, DeviceType::cuda) << a.str();
#endif
}

// ---- SDDMM ------------------------------------------------------------------------------------

TEST(GnnoneSddmm, EveryGraphIndexAndWidth) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  for (GraphKind k : kinds())
    for (DType idx : kIndex)
      for (int64_t F : widths()) {
        check_sddmm(k, idx, SddmmOp::dot, Target::u, Target::v, F, gnnone());
        check_sddmm(k, idx, SddmmOp::dot, Target::v, Target::u, F, gnnone());
        check_sddmm(k, idx, SddmmOp::mul, Target::u, Target::v, F, gnnone());
      }
#endif
}

TEST(GnnoneSddmm, EveryOpAndTarget) {
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
          check_sddmm(k, idx, op, lt, rt, F, gnnone());
        }
#endif
}

TEST(GnnoneSddmm, EveryParameterValue) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const std::vector<int64_t> fs = quick() ? std::vector<int64_t>{5, 32, 136}
                                          : std::vector<int64_t>{1, 5, 6, 16, 32, 136, 256};
  const std::vector<GraphKind> ks = {GraphKind::rmat, GraphKind::half_row, GraphKind::star};
  for (int64_t cache : {32, 64, 128, 256})
    for (int64_t warps : {1, 2, 4, 8, 16}) {
      if (quick() && warps != 1 && warps != 16 && cache != 32 && cache != 256) continue;
      for (GraphKind k : ks)
        for (int64_t F : fs) {
          const DType idx = (cache + warps + F) % 2 ? DType::i64 : DType::i32;
          check_sddmm(k, idx, SddmmOp::dot, Target::u, Target::v, F,
                      gnnone({{"cache_size", cache}, {"warps", warps}}));
        }
    }
  const std::vector<std::map<std::string, int64_t>> ablations = {
      {{"nze_cache", 0}},
      {{"vector_loads", 0}},
      {{"consecutive", 0}},
      {{"nze_cache", 0}, {"vector_loads", 0}, {"consecutive", 0}, {"cache_size", 256}},
      {{"nze_cache", 1}, {"vector_loads", 1}, {"consecutive", 1}, {"cache_size", 32},
       {"warps", 16}}};
  for (const auto& abl : ablations)
    for (GraphKind k : ks)
      for (DType idx : kIndex)
        for (int64_t F : fs) {
          check_sddmm(k, idx, SddmmOp::dot, Target::v, Target::u, F, gnnone(abl));
          check_sddmm(k, idx, SddmmOp::sub, Target::v, Target::e, F, gnnone(abl));
          check_sddmm(k, idx, SddmmOp::add, Target::u, Target::u, F, gnnone(abl));
        }
#endif
}

TEST(GnnoneSddmm, NonDefaultStream) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreate(&st), cudaSuccess);
  for (int64_t F : {1, 6, 64, 256})
    for (GraphKind k : {GraphKind::rmat, GraphKind::empty_rows}) {
      check_sddmm(k, DType::i32, SddmmOp::dot, Target::u, Target::v, F, gnnone(), st);
      check_sddmm(k, DType::i64, SddmmOp::mul, Target::v, Target::e, F, gnnone(), st);
    }
  cudaStreamDestroy(st);
#endif
}

// ---- timing (not run by ctest) ----------------------------------------------------------------
// A quick look at speed while the benchmark CLI matures: gnnone against the best cuSPARSE
// algorithm on an R-MAT graph (scale SPGNN_TIMING_SCALE, default 21, edge factor 16; or a
// uniform graph with SPGNN_TIMING_ER=n:avg_degree), SpMM
// u_mul_e/sum and SDDMM dot(u, v), median of 10 CUDA-event timings after 3 warm-ups. Run with
//   test_gnnone --gtest_also_run_disabled_tests --gtest_filter='*Timing*'
// It asserts correctness only through the tests above; it prints, never fails on time.
#if SPGNN_WITH_CUDA
Tensor fast_random(std::vector<int64_t> shape, uint64_t seed, float lo, float hi) {
  Tensor t = Tensor::empty(std::move(shape), DType::f32);
  float* p = t.data<float>();
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    p[i] = lo + (hi - lo) * static_cast<float>((x >> 40) & 0xffffff) / 16777216.f;
  }
  return t;
}

template <class Fn>
double median_ms(Fn&& fn) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 3; ++i) fn();
  std::vector<float> ms;
  for (int i = 0; i < 10; ++i) {
    cudaEventRecord(a);
    fn();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}
#endif

TEST(GnnoneTiming, DISABLED_Rmat) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const char* env = std::getenv("SPGNN_TIMING_SCALE");
  const char* er = std::getenv("SPGNN_TIMING_ER");  // "n:avg_degree": uniform graph instead
  const auto t0 = std::chrono::steady_clock::now();
  Graph h;
  std::string label;
  if (er) {
    const std::string spec = er;
    const int64_t n = std::atoll(spec.c_str());
    const double deg = std::atof(spec.substr(spec.find(':') + 1).c_str());
    h = generate_erdos_renyi(n, deg, 1);
    label = "erdos-renyi " + spec;
  } else {
    RmatParams rp;
    rp.scale = env ? std::atoi(env) : 21;
    rp.edge_factor = 16;
    rp.seed = 1;
    h = generate_rmat(rp);
    label = "rmat scale " + std::to_string(rp.scale);
  }
  h.val = fast_random({h.nnz()}, 7, 0.5f, 1.5f);
  const Graph d = h.to(Device::cuda());
  std::printf("%s: n=%lld nnz=%lld (built in %.1f s)\n", label.c_str(),
              static_cast<long long>(h.n_rows), static_cast<long long>(h.nnz()),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  std::printf("%5s | %10s %10s %4s %7s | %10s %10s %7s\n", "F", "spmm gnn1", "cusparse", "alg",
              "speedup", "sddmm gnn1", "cusparse", "speedup");
  std::vector<int64_t> dims = {16, 32, 64, 128, 256};
  if (const char* ds = std::getenv("SPGNN_TIMING_DIMS")) {  // e.g. "16,64"
    dims.clear();
    for (const char* c = ds; *c;) {
      dims.push_back(std::atoll(c));
      while (*c && *c != ',') ++c;
      if (*c == ',') ++c;
    }
  }
  std::printf("gnnone params: %s\n", std::getenv("SPGNN_TIMING_PARAMS") ? std::getenv("SPGNN_TIMING_PARAMS") : "defaults");
  for (int64_t F : dims) {
    const Tensor u = fast_random({h.n_rows, F}, 11 + F, -1.f, 1.f).to(Device::cuda());
    const Tensor v = fast_random({h.n_rows, F}, 13 + F, -1.f, 1.f).to(Device::cuda());
    Tensor out = Tensor::empty({h.n_rows, F}, DType::f32, Device::cuda());
    Tensor eout = Tensor::empty({h.nnz(), 1}, DType::f32, Device::cuda());
    OpOptions o;
    o.schedule = gnnone();
    if (const char* prm = std::getenv("SPGNN_TIMING_PARAMS"))  // e.g. "cache_size=256,warps=8"
      o.schedule = parse_schedule(std::string("gnnone:") + prm);
    const double sp = median_ms([&] { gspmm(d, SpmmOp::u_mul_e, Reduce::sum, u, d.val, out, o); });
    double best = 1e30;
    int best_alg = -1;
    for (int alg = 0; alg < 4; ++alg) {
      OpOptions c;
      c.schedule.strategy = "cusparse";
      c.schedule.params["alg"] = alg;
      const double t = median_ms([&] { gspmm(d, SpmmOp::u_mul_e, Reduce::sum, u, d.val, out, c); });
      if (t < best) { best = t; best_alg = alg; }
    }
    const double sd = median_ms([&] { gsddmm(d, SddmmOp::dot, u, v, eout, Target::u, Target::v, o); });
    OpOptions c;
    c.schedule.strategy = "cusparse";
    const double cd = median_ms([&] { gsddmm(d, SddmmOp::dot, u, v, eout, Target::u, Target::v, c); });
    std::printf("%5lld | %10.4f %10.4f %4d %6.2fx | %10.4f %10.4f %6.2fx\n",
                static_cast<long long>(F), sp, best, best_alg, best / sp, sd, cd, cd / sd);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
#endif
}

}  // namespace
}  // namespace spgnn::test
