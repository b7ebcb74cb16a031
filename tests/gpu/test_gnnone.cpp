// GNNOne SpMM and SDDMM (strategy `gnnone`) against the float64 oracle cpu_ref, on fresh random
// graphs of every shape in test_util.hpp, int32 and int64 indices, every width of test_widths()
// plus 6, 500 and 1024, every op / reduce / target the strategy supports and every value of its
// parameters. Outputs are poisoned with NaN before each GPU run, so an unwritten element fails.
// SPGNN_TEST_QUICK=1 (set by scripts/gpu-check.sh for the compute-sanitizer runs) shrinks graphs
// and sweeps.
#include <chrono>
#include <cstdio>

#include "gpu/gpu_check.hpp"

namespace spgnn::test {
namespace {

struct SeedBase {
  SeedBase() { g_seed_base = 100; }
} const kSeedBase;

Schedule gnnone(std::map<std::string, int64_t> params = {}) {
  return sched("gnnone", std::move(params));
}

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
  // SpMM's larger caches (512 and 1024 non-zeros a warp) at 4 warps, which fits their shared
  // memory with either index type.
  for (int64_t cache : {512, 1024})
    for (GraphKind k : ks)
      for (int64_t F : fs)
        for (DType idx : {DType::i32, DType::i64})
          check_spmm(k, idx, SpmmOp::u_mul_e, Reduce::sum, F, 1,
                     gnnone({{"cache_size", cache}, {"warps", 4}}));
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
