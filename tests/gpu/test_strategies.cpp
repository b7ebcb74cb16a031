// The row-parallel SpMM strategies (mergepath, warp_vertex, rowtile; warp_vertex's max/min with
// arg outputs), the shuffle SDDMM and GPU `auto`, against the float64 oracle cpu_ref: fresh random graphs of every shape in
// test_util.hpp, int32 and int64 indices, every width of test_widths() plus 6, 500 and 1024,
// every supported op and reduce, and every value of every parameter (sampled across the other
// parameters, not their full cross product). Outputs are poisoned with NaN before each GPU run,
// so an unwritten element fails. SPGNN_TEST_QUICK=1 (compute-sanitizer runs) shrinks graphs and
// sweeps.
#include <algorithm>
#include <cstdio>

#include "dispatch/registry.hpp"
#include "gpu/gpu_check.hpp"
#include "spgnn/tune.hpp"
#include "tune/device_info.hpp"

namespace spgnn::test {
namespace {

struct SeedBase {
  SeedBase() { g_seed_base = 300; }
} const kSeedBase;

const std::vector<std::string> kSpmmStrategies = {"mergepath", "warp_vertex", "rowtile"};

#if SPGNN_WITH_CUDA
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

// warp_vertex's heavy rows: rows longer than `split` go to a block each, whose groups share the
// row and add their partials in shared memory. Thresholds that split many rows (32), the hubs
// only (128, also the automatic floor) and none (-1), on graphs with a hub (star, half_row) and a
// skewed one (rmat), every mode, widths that take several passes and odd widths; with the
// hardware and the software assignment.
TEST(StrategySpmm, WarpVertexSplitsHeavyRows) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  for (int64_t split : {32, 128, -1})
    for (int64_t assign : {1, 2})
      for (GraphKind k : {GraphKind::star, GraphKind::half_row, GraphKind::rmat, GraphKind::empty_rows,
                          GraphKind::no_edges, GraphKind::single})
        for (DType idx : {DType::i32, DType::i64})
          for (int64_t F : {1, 6, 64, 130, 300}) {
            const Schedule s = sched("warp_vertex", {{"split", split}, {"assign", assign}});
            check_spmm(k, idx, SpmmOp::copy_u, Reduce::sum, F, 0, s);
            check_spmm(k, idx, SpmmOp::u_mul_e, Reduce::mean, F, 1, s);
            if (F <= 64) {
              check_spmm(k, idx, SpmmOp::u_sub_e, Reduce::sum, F, F, s);
              check_spmm(k, idx, SpmmOp::copy_e, Reduce::mean, F, F, s);
            }
          }
#endif
}

// max/min with their arg outputs: warp_vertex against cpu_ref, every op, graph kind (empty
// rows, a hub row, parallel edges), index type and width; values and the winning edge and source
// must agree exactly (a message is one float operation, as in cpu_ref, and ties keep the first
// edge). Outputs are poisoned first. The other row-parallel strategies refuse max/min.
// With `specials`, some inputs are NaN, -inf or +inf (a NaN message wins and the first NaN
// stays; a row of -inf still names its first edge), and NaN outputs compare equal.
void check_spmm_arg(GraphKind kind, DType idx, SpmmOp op, Reduce red, int64_t F, int64_t ew,
                    const Schedule& s, bool want_args, bool specials = false) {
  if (g_failures > kMaxReported) return;
  const Graphs& G = graphs(kind, idx);
  static uint64_t salt = 0;
  const uint64_t seed = seed_for(g_seed_base + 5000 + ++salt);
  SCOPED_TRACE(std::string("spmm ") + name(op) + "/" + name(red) + " graph=" + kind_name(kind) +
               " idx=" + dtype_name(idx) + " F=" + std::to_string(F) + " e_width=" +
               std::to_string(ew) + " " + s.str() + " seed=" + std::to_string(seed));
  const int64_t nnz = G.host.nnz();
  Tensor u_h, e_h, u_d, e_d;
  if (op != SpmmOp::copy_e) u_h = random_tensor({G.host.n_cols, F}, seed);
  if (op != SpmmOp::copy_u) e_h = random_tensor({nnz, ew}, seed + 1, 0.5f, 1.5f);
  if (specials) {
    Tensor& t = u_h.defined() ? u_h : e_h;
    float* x = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i)
      if (i % 7 == 3) x[i] = NAN;
      else if (i % 5 == 1) x[i] = -INFINITY;
      else if (i % 11 == 4) x[i] = INFINITY;
  }
  Tensor ref, ref_u, ref_e;
  gspmm(G.host, op, red, u_h, e_h, ref, ref_u, ref_e, cpu_ref());
  if (u_h.defined()) u_d = u_h.to(Device::cuda());
  if (e_h.defined()) e_d = e_h.to(Device::cuda());
  Tensor out = Tensor::empty({G.host.n_rows, F}, DType::f32, Device::cuda());
  Tensor au = Tensor::empty({G.host.n_rows, F}, DType::i64, Device::cuda());
  Tensor ae = Tensor::empty({G.host.n_rows, F}, DType::i64, Device::cuda());
  out.fill_(NAN);
  au.fill_(-7);
  ae.fill_(-7);
  OpOptions o;
  o.schedule = s;
  if (want_args) gspmm(G.dev, op, red, u_d, e_d, out, au, ae, o);
  else gspmm(G.dev, op, red, u_d, e_d, out, o);
  const std::vector<float> got_v = out.to_vector<float>(), ref_v = ref.to_vector<float>();
  const bool same = std::equal(got_v.begin(), got_v.end(), ref_v.begin(), ref_v.end(),
                               [](float a, float b) { return a == b || (a != a && b != b); });
  EXPECT_TRUE(same) << "values differ (rel error " << rel_error(out, ref) << ")";
  bool args_same = true;
  if (want_args) {
    args_same = au.to_vector<int64_t>() == ref_u.to_vector<int64_t>() &&
                ae.to_vector<int64_t>() == ref_e.to_vector<int64_t>();
    EXPECT_TRUE(args_same) << "arg_u/arg_e differ from cpu_ref";
  }
  if (!same || !args_same) ++g_failures;
}

TEST(StrategySpmm, MaxMinWithArgsOnWarpVertex) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const std::vector<int64_t> fs = quick() ? std::vector<int64_t>{1, 33}
                                          : std::vector<int64_t>{1, 3, 4, 32, 33, 70};
  int i = 0;
  for (GraphKind k : kinds())
    for (SpmmOp op : {SpmmOp::copy_u, SpmmOp::copy_e, SpmmOp::u_mul_e, SpmmOp::u_add_e,
                      SpmmOp::u_sub_e, SpmmOp::u_div_e})
      for (Reduce red : {Reduce::max, Reduce::min})
        for (int64_t F : fs) {
          const DType idx = ++i % 2 ? DType::i64 : DType::i32;
          const Schedule s = i % 3 ? sched("warp_vertex") : Schedule{};  // auto picks it too
          if (op == SpmmOp::copy_u) {
            check_spmm_arg(k, idx, op, red, F, 0, s, i % 4 != 0);
            check_spmm_arg(k, idx, op, red, F, 0, s, true, true);
          } else if (op == SpmmOp::copy_e) {
            check_spmm_arg(k, idx, op, red, F, F, s, true);
            check_spmm_arg(k, idx, op, red, F, F, s, true, true);
          } else {
            check_spmm_arg(k, idx, op, red, F, F, s, true);
            check_spmm_arg(k, idx, op, red, F, 1, s, i % 4 != 1);
          }
        }
  const Graphs& G = graphs(GraphKind::rmat, DType::i32);
  Tensor u = Tensor::zeros({G.host.n_cols, 4}, DType::f32, Device::cuda());
  for (const auto& s : {"mergepath", "rowtile", "gnnone", "cusparse"})
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
  // Parallel edges can give more entries than rows x columns, which cuSPARSE refuses: auto (which
  // prefers cuSPARSE on tiny graphs) must take another kernel, and cusparse must say why.
  {
    BuildOptions keep;
    keep.duplicates = DuplicatePolicy::keep;
    const Graph h = graph_from_edges(2, 2, {0, 0, 0, 0, 1}, {0, 0, 0, 1, 1}, {}, keep);  // 5 > 2 x 2
    const Graph d = h.to(Device::cuda());
    const Tensor x = random_tensor({2, 3}, seed_for(77));
    Tensor ref, out, sref, sout;
    gspmm(h, SpmmOp::copy_u, Reduce::sum, x, Tensor(), ref, cpu_ref());
    gspmm(d, SpmmOp::copy_u, Reduce::sum, x.to(Device::cuda()), Tensor(), out);
    EXPECT_LT(rel_error(out, ref), kTol);
    gsddmm(h, SddmmOp::dot, x, x, sref, Target::u, Target::v, cpu_ref());
    gsddmm(d, SddmmOp::dot, x.to(Device::cuda()), x.to(Device::cuda()), sout);
    EXPECT_LT(rel_error(sout, sref), kTol);
    Tensor bad;
    OpOptions o;
    o.schedule = sched("cusparse");
    EXPECT_THROW(gspmm(d, SpmmOp::copy_u, Reduce::sum, x.to(Device::cuda()), Tensor(), bad, o),
                 Unsupported);
  }
  // max/min: auto takes the one GPU strategy that runs them (warp_vertex).
  const Graphs& G = graphs(GraphKind::rmat, DType::i32);
  EXPECT_EQ(resolve_spmm_schedule(G.dev, SpmmOp::copy_u, Reduce::max, 8, Schedule{}).strategy,
            "warp_vertex");
#endif
}

// `auto` on tiny graphs (< 20K edges): gnnone at every width (faster than cuSPARSE's default
// algorithm on Cora and CiteSeer on the H200 from F = 1); each pick checked against cpu_ref.
TEST(AutoGpu, TinyGraphsTakeGnnoneAtEveryWidth) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  set_tuning_cache_path("");  // the heuristic's choice, not a tuned entry
  const Graphs& G = graphs(GraphKind::uniform, DType::i32);
  ASSERT_GT(G.host.nnz(), 0);
  ASSERT_LT(G.host.nnz(), 20000);
  for (int64_t F : {1, 3, 16, 31, 32, 64, 256}) {
    SCOPED_TRACE("F=" + std::to_string(F));
    EXPECT_EQ(resolve_spmm_schedule(G.dev, SpmmOp::u_mul_e, Reduce::sum, F, Schedule{}).strategy,
              "gnnone");
    EXPECT_EQ(resolve_sddmm_schedule(G.dev, SddmmOp::dot, F, Schedule{}).strategy, "gnnone");
    check_spmm(GraphKind::uniform, DType::i32, SpmmOp::u_mul_e, Reduce::sum, F, 1, Schedule{});
    check_sddmm(GraphKind::uniform, DType::i32, SddmmOp::dot, Target::u, Target::v, F,
                Schedule{});
  }
#endif
}

// `auto`'s float32 copy_u SpMM on regular rows: a group per row with hardware assignment and no
// split rows at 32 <= F <= 64 (gnnone below); wider, warp_vertex without split rows only where
// rows are long (average degree >= 128: 2 warps a block below F = 128, one task per atomic from
// it), gnnone where they are not. Weighted SpMMs (u_mul_e) and a regular graph with one row far
// above average keep the earlier rule (plain warp_vertex from F = 128 where the average degree
// is >= 128, gnnone below), R-MAT gnnone. Each resolved schedule runs against cpu_ref.
TEST(AutoGpu, Float32SpmmOnRegularRowsFollowsOpWidthAndRowLength) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  set_tuning_cache_path("");  // the heuristic's choice, not a tuned entry
  const Graphs dense = regular_long_rows(seed_for(82));  // average degree 96
  const Graphs longer = with_device_copy(generate_erdos_renyi(1200, 400, seed_for(83)));
  const Graphs rmat = rmat_past_tiny(seed_for(84));
  // the dense graph with row 0 widened to 600 non-zeros: > 4x the average, CV still < 0.5
  std::vector<int64_t> rows = dense.host.row.astype(DType::i64).to_vector<int64_t>();
  std::vector<int64_t> cols = dense.host.col.astype(DType::i64).to_vector<int64_t>();
  for (int64_t j = 0; j < 600; ++j) {
    rows.push_back(0);
    cols.push_back(j);
  }
  const Graphs outlier =
      with_device_copy(graph_from_edges(dense.host.n_rows, dense.host.n_cols, rows, cols));
  ASSERT_GE(detail::degree_stats(outlier.host)->max_deg, 600);
  ASSERT_LT(detail::degree_stats(outlier.host)->cv, 0.5);
  using P = std::map<std::string, int64_t>;
  const P group = {{"assign", 1}, {"split", -1}};
  struct Case {
    const Graphs* g;
    const char* gname;
    SpmmOp op;
    int64_t F;
    const char* want;
    P params;  // as resolved, defaults left out
  };
  const SpmmOp cu = SpmmOp::copy_u, mul = SpmmOp::u_mul_e;
  const std::vector<Case> cases = {
      {&dense, "degree 96", cu, 16, "gnnone", {}},
      {&dense, "degree 96", cu, 32, "warp_vertex", group},
      {&dense, "degree 96", cu, 44, "warp_vertex", group},
      {&dense, "degree 96", cu, 64, "warp_vertex", group},
      {&dense, "degree 96", cu, 96, "gnnone", {}},
      {&dense, "degree 96", cu, 256, "gnnone", {}},
      {&dense, "degree 96", mul, 64, "gnnone", {}},
      {&dense, "degree 96", mul, 128, "gnnone", {}},
      {&longer, "degree 400", cu, 24, "gnnone", {}},
      {&longer, "degree 400", cu, 41, "warp_vertex", group},
      {&longer, "degree 400", cu, 96, "warp_vertex", {{"assign", 1}, {"split", -1}, {"warps", 2}}},
      {&longer, "degree 400", cu, 128, "warp_vertex", {{"step", 1}, {"split", -1}}},
      {&longer, "degree 400", cu, 256, "warp_vertex", {{"step", 1}, {"split", -1}}},
      {&longer, "degree 400", mul, 32, "gnnone", {}},
      {&longer, "degree 400", mul, 128, "warp_vertex", {}},
      {&longer, "degree 400", mul, 256, "warp_vertex", {}},
      {&outlier, "degree 96, one row of 600", cu, 64, "gnnone", {}},
      {&outlier, "degree 96, one row of 600", cu, 128, "gnnone", {}},
      {&rmat, "rmat", cu, 64, "gnnone", {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.gname) + " " + name(c.op) + " F=" + std::to_string(c.F));
    const Schedule s = resolve_spmm_schedule(c.g->dev, c.op, Reduce::sum, c.F, Schedule{});
    EXPECT_EQ(s.strategy, c.want);
    EXPECT_EQ(s.params, c.params) << s.str();
    const Tensor e =
        c.op == mul ? random_tensor({c.g->host.nnz()}, seed_for(86), 0.5f, 1.5f) : Tensor();
    for (Reduce red : {Reduce::mean, Reduce::sum}) {  // the resolved schedule, as auto runs it
      const Tensor x =
          random_tensor({c.g->host.n_cols, c.F}, seed_for(85 + c.F + (red == Reduce::sum)));
      Tensor ref;
      gspmm(c.g->host, c.op, red, x, e, ref, cpu_ref());
      Tensor out = poisoned({c.g->host.n_rows, c.F});
      gspmm(c.g->dev, c.op, red, dev(x), e.defined() ? dev(e) : Tensor(), out);
      EXPECT_LT(rel_error(out, ref), kTol) << name(c.op) << "/" << name(red);
    }
  }
#endif
}

// `auto`'s float32 SDDMM on regular long rows: cuSPARSE's CSR kernel up to F = 32, and up to
// F = 128 for u.v dot products on cards with at least 4 TB/s of DRAM bandwidth (the H200),
// gnnone otherwise; R-MAT rows stay with gnnone. Each resolved schedule runs against cpu_ref.
TEST(AutoGpu, SddmmOnRegularLongRowsFollowsTheCardsDram) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  set_tuning_cache_path("");  // the heuristic's choice, not a tuned entry
  const Graphs dense = regular_long_rows(seed_for(79));
  const bool fast = detail::fast_dram(dense.dev.device());
  const tune::GpuProps props = tune::gpu_props(dense.dev.device().index);
  std::printf("[ info     ] %s: peak DRAM %.0f GB/s (fast: %d)\n", props.name.c_str(),
              props.dram_gbps, fast);
  const Graphs rmat = rmat_past_tiny(seed_for(78));
  struct Case {
    const Graphs* g;
    SddmmOp op;
    int64_t F;
    const char* want;
  };
  const std::vector<Case> cases = {
      {&dense, SddmmOp::dot, 32, "cusparse"},
      {&dense, SddmmOp::dot, 64, fast ? "cusparse" : "gnnone"},
      {&dense, SddmmOp::dot, 128, fast ? "cusparse" : "gnnone"},
      {&dense, SddmmOp::dot, 256, "gnnone"},
      {&dense, SddmmOp::mul, 64, "gnnone"},
      {&rmat, SddmmOp::dot, 64, "gnnone"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.g == &dense ? "dense regular" : "rmat") + " " + name(c.op) +
                 " F=" + std::to_string(c.F) + (fast ? " (fast DRAM)" : ""));
    const Schedule s = resolve_sddmm_schedule(c.g->dev, c.op, c.F, Schedule{});
    EXPECT_EQ(s.strategy, c.want);
    const Tensor l = random_tensor({c.g->host.n_cols, c.F}, seed_for(80 + c.F));
    const Tensor r = random_tensor({c.g->host.n_rows, c.F}, seed_for(81 + c.F));
    Tensor ref;
    gsddmm(c.g->host, c.op, l, r, ref, Target::u, Target::v, cpu_ref());
    Tensor out = Tensor::empty(ref.shape(), DType::f32, Device::cuda());
    out.fill_(NAN);
    gsddmm(c.g->dev, c.op, l.to(Device::cuda()), r.to(Device::cuda()), out, Target::u,
           Target::v);
    Tensor ref_abs;  // a dot's error scales with the dot of the absolute values
    gsddmm(c.g->host, c.op, abs_of(l), abs_of(r), ref_abs, Target::u, Target::v, cpu_ref());
    EXPECT_LT(rel_error(out, ref) * norm_of(ref) / std::max(norm_of(ref_abs), 1e-30), kTol);
  }
#endif
}

}  // namespace
}  // namespace spgnn::test
