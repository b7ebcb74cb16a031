// Half precision on the GPU (issue 12): gspmm (warp_vertex, gnnone, and `auto`) and
// gsddmm (shuffle, and `auto`) on float16/bfloat16 operands against the float64 oracle on the
// same (exactly converted) values: every graph shape, int32 and int64 indices, every width of
// test_widths() (odd ones, 4 mod 8, and past one pass of 32 lanes), every op and reduce, scalar
// edge weights in float32 (the graph's) or the half dtype, outputs poisoned with NaN. Each result
// is within the half dtype's rounding (norm-wise; sums of both signs against the sum of their
// magnitudes). A degree-10,000 fp16 row sum equals the float32 sum rounded once (dmlc/dgl#4674:
// fp16 accumulation saturates at 2048). Strategies without half kernels say so by name.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <random>
#include <unistd.h>

#include "dispatch/registry.hpp"
#include "gpu/gpu_check.hpp"
#include "nn/layers_internal.hpp"
#include "spgnn/schedule.hpp"
#include "spgnn/nn/functional.hpp"
#include "spgnn/nn/layers.hpp"
#include "spgnn/tune.hpp"

namespace spgnn::test {
namespace {

struct SeedBase {
  SeedBase() { g_seed_base = 700; }
} const kSeedBase;

// The half rounding of the result (2^-11, 2^-8) doubled, as in tests/test_half.cpp.
double half_tol(DType t) { return t == DType::f16 ? 2.0 / 2048 : 2.0 / 256; }

#if SPGNN_WITH_CUDA
Tensor as_half(const Tensor& t, DType h) { return t.astype(h); }

// ew: 0 = no e, -1 = the graph's own (float32) values, 1 = given scalar weights of dtype w_dtype
// (f32 or h), F = edge rows.
// On the graph pair G (host and device copies), named `gname` in failure messages. Every
// strategy of `strategies` runs on the same inputs against one oracle result (the oracle is most
// of a check's time).
void check_half_spmm_on(const Graphs& G, const std::string& gname, DType h, SpmmOp op, Reduce red,
                        int64_t F, int64_t ew, DType w_dtype,
                        const std::vector<std::string>& strategies) {
  if (g_failures > kMaxReported) return;
  const DType idx = G.host.index_dtype();
  static uint64_t salt = 0;
  const uint64_t seed = seed_for(g_seed_base + 1000 + ++salt);
  std::ostringstream what;
  what << "half spmm " << dtype_name(h) << " " << name(op) << "/" << name(red)
       << " graph=" << gname << " idx=" << dtype_name(idx) << " F=" << F
       << " e_width=" << ew << " w=" << dtype_name(w_dtype)
       << " seed=" << seed;
  SCOPED_TRACE(what.str());
  const int64_t nnz = G.host.nnz();
  Tensor u, e;  // in the dtypes the GPU gets, on the host
  if (op != SpmmOp::copy_e) u = as_half(random_tensor({G.host.n_cols, F}, seed), h);
  if (op != SpmmOp::copy_u && ew != -1) {
    e = random_tensor({nnz, ew}, seed + 1, 0.5f, 1.5f);
    e = ew == 1 ? e.astype(w_dtype) : as_half(e, h);
  }
  auto f64 = [](const Tensor& t) { return t.defined() ? t.astype(DType::f64) : t; };
  if (ew == -1 && !G.host.val.defined()) return;  // the graph has no values of its own
  const Tensor e_ref = f64(ew == -1 ? G.host.val : e);
  Tensor ref;
  gspmm(G.host, op, red, f64(u), e_ref, ref, cpu_ref());
  Tensor mag;  // the sum of the messages' magnitudes: the scale of sums of both signs
  if (red == Reduce::sum || red == Reduce::mean) {
    auto absd = [](Tensor t) {
      if (!t.defined()) return t;
      for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = std::fabs(t.data<double>()[i]);
      return t;
    };
    gspmm(G.host, op == SpmmOp::u_sub_e ? SpmmOp::u_add_e : op, red, absd(f64(u)),
          absd(e_ref.defined() ? e_ref.clone() : e_ref), mag, cpu_ref());
  }
  const Tensor u_d = u.defined() ? u.to(Device::cuda()) : u;
  const Tensor e_d = e.defined() ? e.to(Device::cuda()) : e;
  for (const std::string& strategy : strategies) {
    SCOPED_TRACE("strategy " + strategy);
    Tensor out = Tensor::empty({G.host.n_rows, F}, h, Device::cuda());
    out.fill_(NAN);
    OpOptions o;
    o.schedule = parse_schedule(strategy);  // "name" or "name:param=value,..."
    gspmm(G.dev, op, red, u_d, e_d, out, o);
    ASSERT_EQ(out.dtype(), h);
    // ||out - ref|| over the norm of the messages' magnitudes (>= ||ref||) for sums and means.
    const double err = mag.defined()
                           ? rel_error(out, ref) * norm_of(ref) / std::max(norm_of(mag), 1e-30)
                           : rel_error(out, ref);
    EXPECT_LT(err, half_tol(h));
    if (!(err < half_tol(h))) ++g_failures;
  }
}
void check_half_spmm_on(const Graphs& G, const std::string& gname, DType h, SpmmOp op, Reduce red,
                        int64_t F, int64_t ew, DType w_dtype, const std::string& strategy) {
  check_half_spmm_on(G, gname, h, op, red, F, ew, w_dtype, std::vector<std::string>{strategy});
}

template <class Strategies>
void check_half_spmm(DType h, GraphKind kind, DType idx, SpmmOp op, Reduce red, int64_t F,
                     int64_t ew, DType w_dtype, const Strategies& strategies) {
  check_half_spmm_on(graphs(kind, idx), kind_name(kind), h, op, red, F, ew, w_dtype, strategies);
}

// The strategies' split-row paths in both half dtypes: copy_u/sum, u_mul_e/mean with scalar
// half weights and u_add_e/sum with wide half edge rows, on the graphs whose rows get split (a
// star's hub, the half row, R-MAT's hubs) and on empty rows.
void check_split_rows(const std::vector<std::string>& strategies,
                      std::initializer_list<int64_t> widths) {
  for (DType h : {DType::f16, DType::bf16})
    for (GraphKind k : {GraphKind::star, GraphKind::half_row, GraphKind::rmat,
                        GraphKind::empty_rows})
      for (DType idx : kIndex)
        for (int64_t F : widths) {
          check_half_spmm(h, k, idx, SpmmOp::copy_u, Reduce::sum, F, 0, DType::f32, strategies);
          check_half_spmm(h, k, idx, SpmmOp::u_mul_e, Reduce::mean, F, 1, h, strategies);
          check_half_spmm(h, k, idx, SpmmOp::u_add_e, Reduce::sum, F, F, h, strategies);
        }
}

void check_half_sddmm_on(const Graphs& G, const std::string& gname, DType h, SddmmOp op,
                         Target lt, Target rt, int64_t F,
                         const std::vector<std::string>& strategies) {
  if (g_failures > kMaxReported) return;
  const DType idx = G.host.index_dtype();
  static uint64_t salt = 0;
  const uint64_t seed = seed_for(g_seed_base + 5000 + ++salt);
  std::ostringstream what;
  what << "half sddmm " << dtype_name(h) << " " << name(op) << " lhs=" << name(lt)
       << " rhs=" << name(rt) << " graph=" << gname << " idx=" << dtype_name(idx)
       << " F=" << F << " seed=" << seed;
  SCOPED_TRACE(what.str());
  Tensor l, r;
  if (op != SddmmOp::copy_rhs) l = as_half(operand(lt, G.host, F, seed, false), h);
  if (op != SddmmOp::copy_lhs) r = as_half(operand(rt, G.host, F, seed + 1, op == SddmmOp::div), h);
  auto f64 = [](const Tensor& t) { return t.defined() ? t.astype(DType::f64) : t; };
  Tensor ref;
  gsddmm(G.host, op, f64(l), f64(r), ref, lt, rt, cpu_ref());
  const int64_t width = op == SddmmOp::dot ? 1 : F;
  const Tensor l_d = l.defined() ? l.to(Device::cuda()) : l;
  const Tensor r_d = r.defined() ? r.to(Device::cuda()) : r;
  // A dot product of signed terms is held to its terms' magnitudes (sqrt(F) of them at most).
  const double tol = op == SddmmOp::dot ? half_tol(h) * std::sqrt(double(std::max<int64_t>(F, 1)))
                                        : half_tol(h);
  for (const std::string& strategy : strategies) {
    SCOPED_TRACE("strategy " + strategy);
    Tensor out = Tensor::empty({G.host.nnz(), width}, h, Device::cuda());
    out.fill_(NAN);
    OpOptions o;
    o.schedule = parse_schedule(strategy);
    gsddmm(G.dev, op, l_d, r_d, out, lt, rt, o);
    ASSERT_EQ(out.dtype(), h);
    const double err = rel_error(out, ref);
    EXPECT_LT(err, tol);
    if (!(err < tol)) ++g_failures;
  }
}
void check_half_sddmm_on(const Graphs& G, const std::string& gname, DType h, SddmmOp op,
                         Target lt, Target rt, int64_t F, const std::string& strategy) {
  check_half_sddmm_on(G, gname, h, op, lt, rt, F, std::vector<std::string>{strategy});
}

template <class Strategies>
void check_half_sddmm(DType h, GraphKind kind, DType idx, SddmmOp op, Target lt, Target rt,
                      int64_t F, const Strategies& strategies) {
  check_half_sddmm_on(graphs(kind, idx), kind_name(kind), h, op, lt, rt, F, strategies);
}
#endif

TEST(HalfGpu, GspmmEveryGraphWidthOpAndReduce) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const std::vector<std::string> all = {"warp_vertex", "gnnone", "auto"};
  const std::vector<std::string> no_gnnone = {"warp_vertex", "auto"};  // gnnone has no max/min
  for (DType h : {DType::f16, DType::bf16})
    for (GraphKind k : kinds())
      for (DType idx : kIndex)
        for (int64_t F : widths()) {
          check_half_spmm(h, k, idx, SpmmOp::copy_u, Reduce::sum, F, 0, DType::f32, all);
          check_half_spmm(h, k, idx, SpmmOp::u_mul_e, Reduce::mean, F, 1, DType::f32, all);
          check_half_spmm(h, k, idx, SpmmOp::u_mul_e, Reduce::sum, F, -1, DType::f32, all);
          check_half_spmm(h, k, idx, SpmmOp::u_mul_e, Reduce::sum, F, 1, h, all);
          check_half_spmm(h, k, idx, SpmmOp::u_add_e, Reduce::sum, F, F, h, all);
          check_half_spmm(h, k, idx, SpmmOp::copy_e, Reduce::sum, F, F, h, all);
          if (F <= 33 || quick()) {
            check_half_spmm(h, k, idx, SpmmOp::copy_u, Reduce::max, F, 0, DType::f32, no_gnnone);
            check_half_spmm(h, k, idx, SpmmOp::copy_e, Reduce::min, F, F, h, no_gnnone);
            check_half_spmm(h, k, idx, SpmmOp::u_div_e, Reduce::max, F, 1, h, no_gnnone);
            check_half_spmm(h, k, idx, SpmmOp::u_sub_e, Reduce::mean, F, F, h, no_gnnone);
          }
        }
#endif
}

// gnnone in half precision: the cut rows' float32 scratch and the fix-up at every sub-slice
// length (cache_size 32..1024 over 1-32 lanes per group), 1..16 warps, and widths past one pass.
TEST(HalfGpu, GnnoneCutRowsAtEverySubSliceLength) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  std::vector<std::string> st;
  for (int64_t cache : {32, 64, 256, 512, 1024})
    st.push_back("gnnone:cache_size=" + std::to_string(cache) + ",warps=" +
                 (cache == 64 ? "16" : "1"));
  check_split_rows(st, {1, 6, 64, 264, 520});
#endif
}

// gnnone's empty rows in half precision: runs of at most 64 rows are zeroed by the main kernel,
// longer ones by the fix-up kernel. Runs of 100 (leading), 64 and 65 (the boundary), 2,670
// (middle) and 1,900 (trailing) rows around 201 rows with edges.
TEST(HalfGpu, GnnoneLongRunsOfEmptyRows) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const int64_t n = 5000;
  std::mt19937_64 rng(seed_for(77));
  std::vector<int64_t> r, c;
  std::vector<float> v;
  auto add_row = [&](int64_t i) {
    const int64_t deg = 1 + static_cast<int64_t>(rng() % 40);
    for (int64_t k = 0; k < deg; ++k) {
      r.push_back(i);
      c.push_back(static_cast<int64_t>(rng() % n));
      v.push_back(0.5f + static_cast<float>(rng() % 1000) / 1000.f);
    }
  };
  for (int64_t i = 100; i < 200; ++i) add_row(i);
  add_row(264);  // after a run of 64 empty rows
  add_row(330);  // after a run of 65
  for (int64_t i = 3001; i < 3100; ++i) add_row(i);  // then 1,900 empty rows to the end
  BuildOptions opt;
  opt.duplicates = DuplicatePolicy::drop;
  const Graph host = graph_from_edges(n, n, r, c, v, opt);
  for (DType idx : kIndex) {
    const Graphs G = with_device_copy(with_index(host, idx));
    for (DType h : {DType::f16, DType::bf16})
      for (int64_t F : {6, 64, 264}) {
        for (const std::string st : {"gnnone", "gnnone:cache_size=32,warps=1", "auto"})
          check_half_spmm_on(G, "long_empty_runs", h, SpmmOp::copy_u, Reduce::sum, F, 0,
                             DType::f32, st);
        check_half_spmm_on(G, "long_empty_runs", h, SpmmOp::u_mul_e, Reduce::mean, F, -1,
                           DType::f32, "gnnone");
      }
  }
#endif
}

// warp_vertex's heavy-row blocks in half precision: many rows split (32), the hubs only (512) and
// none (-1), with the automatic and the software assignment.
TEST(HalfGpu, GspmmHeavyRowsSplitOrNot) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  std::vector<std::string> st;
  for (int64_t split : {32, 512, -1})
    for (const char* assign : {"", ",assign=2"})
      st.push_back("warp_vertex:split=" + std::to_string(split) + assign);
  check_split_rows(st, {1, 10, 64, 264, 520});
#endif
}

TEST(HalfGpu, GsddmmEveryGraphWidthAndOp) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const std::vector<SddmmOp> ops = {SddmmOp::dot, SddmmOp::add, SddmmOp::sub, SddmmOp::mul,
                                    SddmmOp::div, SddmmOp::copy_lhs, SddmmOp::copy_rhs};
  const std::vector<std::string> plain = {"shuffle", "auto"};
  const std::vector<std::string> all = {"shuffle", "auto", "shuffle:blocked=1"};
  for (DType h : {DType::f16, DType::bf16})
    for (GraphKind k : kinds())
      for (DType idx : kIndex)
        for (int64_t F : widths()) {
          check_half_sddmm(h, k, idx, SddmmOp::dot, Target::u, Target::v, F, all);
          // blocked changes only dot: every lane width
          check_half_sddmm(h, k, idx, SddmmOp::dot, Target::e, Target::u, F, "shuffle:blocked=1");
          check_half_sddmm(h, k, idx, SddmmOp::dot, Target::v, Target::u, F + 24,
                           "shuffle:blocked=1,lanes=2");
          check_half_sddmm(h, k, idx, SddmmOp::mul, Target::u, Target::e, F, plain);
          if (F <= 33 || quick())
            for (SddmmOp op : ops) check_half_sddmm(h, k, idx, op, Target::v, Target::u, F, plain);
        }
#endif
}

// The tuner in half precision on the GPU: it searches the half kernels only (shuffle for SDDMM;
// gnnone / warp_vertex for SpMM, cuSPARSE where it takes the dtype), stores the result under
// the dtype's key, and `auto` then runs the stored schedule correctly.
TEST(HalfGpu, TunerSearchesHalfKernelsAndAutoRunsTheEntry) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("spgnn-half-tune-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const Graphs& G = graphs(GraphKind::rmat, DType::i32);
  TuneOptions o;
  o.cache_path = dir.string();
  o.mode = TuneMode::random;
  o.reps = 2;
  set_tuning_cache_path(dir.string());
  for (DType h : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(h));
    o.dtype = h;
    const TuneResult sd = tune_sddmm(G.dev, SddmmOp::dot, Target::u, Target::v, 64, o);
    EXPECT_TRUE(sd.best.strategy == "shuffle" || (h == DType::f16 && sd.best.strategy == "cusparse"))
        << sd.best.str();
    EXPECT_EQ(sd.key, sddmm_tuning_key(G.dev, SddmmOp::dot, Target::u, Target::v, 64, h));
    EXPECT_TRUE(sd.stored);
    for (const auto& c : sd.candidates) {
      if (!c.error.empty()) continue;
      EXPECT_TRUE(c.schedule.strategy == "shuffle" || c.schedule.strategy == "cusparse")
          << c.schedule.str();
    }
    const TuneResult sp = tune_spmm(G.dev, SpmmOp::u_mul_e, Reduce::sum, 64, o);
    EXPECT_TRUE(sp.best.strategy == "gnnone" || sp.best.strategy == "warp_vertex" ||
                sp.best.strategy == "cusparse") << sp.best.str();
    EXPECT_TRUE(std::isfinite(sp.best_ms));
    // `auto` reads the entries just stored (same graph, dtype, F).
    check_half_sddmm(h, GraphKind::rmat, DType::i32, SddmmOp::dot, Target::u, Target::v, 64, "auto");
  }
  set_tuning_cache_path("");
  fs::remove_all(dir);
#endif
}

// `auto`'s float16 rule for SDDMM: dot products of <= 64 features on regular long rows go to
// cuSPARSE (faster there on the H100 and H200), and of <= 128 on cards with at least 4 TB/s of
// DRAM bandwidth (the H200), everything else half to shuffle; both answers are checked against
// the oracle.
TEST(HalfGpu, AutoSddmmTakesCusparseForNarrowFloat16DotsOnRegularLongRows) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  set_tuning_cache_path("");  // the heuristic's choice, not a tuned entry
  const Graphs dense = regular_long_rows(seed_for(76));
  const Graphs& rmat = graphs(GraphKind::rmat, DType::i32);
  struct Case {
    const Graphs* g;
    const char* gname;
    DType h;
    SddmmOp op;
    int64_t F;
    const char* want;
  };
  const std::vector<Case> cases = {
      {&dense, "dense regular", DType::f16, SddmmOp::dot, 64, "cusparse"},
      {&dense, "dense regular", DType::f16, SddmmOp::dot, 16, "cusparse"},
      {&dense, "dense regular", DType::f16, SddmmOp::dot, 128,
       detail::fast_dram(dense.dev.device()) ? "cusparse" : "shuffle"},
      {&dense, "dense regular", DType::f16, SddmmOp::dot, 256, "shuffle"},
      {&dense, "dense regular", DType::f16, SddmmOp::dot, 36, "shuffle"},  // rows not 16 bytes
      {&dense, "dense regular", DType::bf16, SddmmOp::dot, 64, "shuffle"},  // no cuSPARSE bf16
      {&dense, "dense regular", DType::f16, SddmmOp::mul, 64, "shuffle"},   // cuSPARSE: dot only
      {&rmat, "rmat", DType::f16, SddmmOp::dot, 64, "shuffle"},
  };
  // Half dot products of 40-64 features that stay with shuffle: two lanes per edge, each
  // reading its vectors consecutively (registry.cpp, gpu_sddmm_choice).
  for (int64_t F : {40, 64}) {
    const Schedule s = resolve_sddmm_schedule(rmat.dev, SddmmOp::dot, F, Schedule{}, DType::bf16);
    EXPECT_EQ(s.strategy, "shuffle") << "F=" << F;
    EXPECT_EQ(s.params.count("lanes") ? s.params.at("lanes") : 0, 2) << "F=" << F;
    EXPECT_EQ(s.params.count("blocked") ? s.params.at("blocked") : 0, 1) << "F=" << F;
    check_half_sddmm_on(rmat, "rmat", DType::bf16, SddmmOp::dot, Target::u, Target::v, F, "auto");
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.gname) + " " + dtype_name(c.h) + " " + name(c.op) +
                 " F=" + std::to_string(c.F));
    EXPECT_EQ(resolve_sddmm_schedule(c.g->dev, c.op, c.F, Schedule{}, c.h).strategy, c.want);
    check_half_sddmm_on(*c.g, c.gname, c.h, c.op, Target::u, Target::v, c.F, "auto");
    if (c.op == SddmmOp::dot)
      check_half_sddmm_on(*c.g, c.gname, c.h, c.op, Target::v, Target::u, c.F, "auto");
  }
#endif
}

// Half SpMM: gnnone past the tiny-graph rule, weighted or not, at every width, on long regular
// rows (average degree >= 128; these once sent weighted ops at F >= 128 to warp_vertex), on a
// long-row graph with one outlier row, a degree-96 graph and R-MAT. Each resolved schedule runs
// against the oracle, as `auto` runs it.
TEST(HalfGpu, AutoSpmmTakesGnnonePastTinyGraphs) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  set_tuning_cache_path("");  // the heuristic's choice, not a tuned entry
  const Graphs dense = regular_long_rows(seed_for(77));  // average degree 96
  const Graphs longer = with_device_copy(generate_erdos_renyi(1200, 400, seed_for(79)));
  const Graphs rmat = rmat_past_tiny(seed_for(78));
  // degree ~150 with row 0 widened to 700 non-zeros: > 4x the average, CV still < 0.5
  const Graph base = generate_erdos_renyi(4000, 150, seed_for(80));
  std::vector<int64_t> rows = base.row.astype(DType::i64).to_vector<int64_t>();
  std::vector<int64_t> cols = base.col.astype(DType::i64).to_vector<int64_t>();
  for (int64_t j = 0; j < 700; ++j) {
    rows.push_back(0);
    cols.push_back(j);
  }
  const Graphs outlier = with_device_copy(graph_from_edges(base.n_rows, base.n_cols, rows, cols));
  ASSERT_GE(detail::degree_stats(outlier.host)->avg, 128);
  ASSERT_GT(double(detail::degree_stats(outlier.host)->max_deg),
            4 * detail::degree_stats(outlier.host)->avg);
  ASSERT_LT(detail::degree_stats(outlier.host)->cv, 0.5);
  using P = std::map<std::string, int64_t>;
  const SpmmOp cu = SpmmOp::copy_u, mul = SpmmOp::u_mul_e;
  struct Case {
    const Graphs* g;
    const char* gname;
    SpmmOp op;
    int64_t F;
    const char* want;
    P params;  // as resolved, defaults left out
  };
  const std::vector<Case> cases = {
      {&dense, "degree 96", mul, 16, "gnnone", {}},
      {&dense, "degree 96", mul, 24, "gnnone", {}},
      {&dense, "degree 96", mul, 32, "gnnone", {}},
      {&dense, "degree 96", mul, 128, "gnnone", {}},
      {&dense, "degree 96", cu, 256, "gnnone", {}},
      {&longer, "degree 400", mul, 64, "gnnone", {}},
      {&longer, "degree 400", mul, 128, "gnnone", {}},
      {&longer, "degree 400", mul, 256, "gnnone", {}},
      {&longer, "degree 400", cu, 32, "gnnone", {}},
      {&longer, "degree 400", cu, 128, "gnnone", {}},
      {&longer, "degree 400", cu, 256, "gnnone", {}},
      {&outlier, "degree 150, one row of 700", mul, 128, "gnnone", {}},
      {&rmat, "rmat", mul, 32, "gnnone", {}},
      {&rmat, "rmat", mul, 128, "gnnone", {}},
  };
  for (const Case& c : cases)
    for (DType h : {DType::bf16, DType::f16}) {
      SCOPED_TRACE(std::string(c.gname) + " " + dtype_name(h) + " " + name(c.op) +
                   " F=" + std::to_string(c.F));
      const Schedule s = resolve_spmm_schedule(c.g->dev, c.op, Reduce::sum, c.F, Schedule{}, h);
      EXPECT_EQ(s.strategy, c.want);
      EXPECT_EQ(s.params, c.params) << s.str();
      if (c.op == mul) {
        check_half_spmm_on(*c.g, c.gname, h, mul, Reduce::sum, c.F, 1, DType::f32, "auto");
        check_half_spmm_on(*c.g, c.gname, h, mul, Reduce::mean, c.F, 1, h, "auto");
      } else {
        check_half_spmm_on(*c.g, c.gname, h, cu, Reduce::sum, c.F, 0, DType::f32, "auto");
        check_half_spmm_on(*c.g, c.gname, h, cu, Reduce::mean, c.F, 0, DType::f32, "auto");
      }
    }
#endif
}

// gnnone's half chunk on a graph whose 8-lane chunk is the widest within 60% of L2 (160K
// columns; Reddit-sized graphs): rows of 64 < F < 128 halves run one pass of 16 lanes, the
// other widths the chunk rule; each against the oracle, poisoned outputs.
TEST(HalfGpu, GnnoneOnePassBetweenTwoEightLaneChunks) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const int64_t cols = 160000;  // x 128 bytes < 0.6 x 50 MB < x 256 bytes
  std::vector<int64_t> rows, colv;
  std::mt19937_64 rng(seed_for(90));
  for (int64_t r = 0; r < 3000; ++r)
    for (int j = 0; j < 40; ++j) {
      rows.push_back(r);
      colv.push_back(int64_t(rng() % uint64_t(cols)));
    }
  const Graphs G = with_device_copy(graph_from_edges(3000, cols, rows, colv));
  for (DType h : {DType::bf16, DType::f16})
    for (int64_t F : {64, 72, 88, 120, 128, 136, 184, 248, 256, 264})
      check_half_spmm_on(G, "160K columns", h, SpmmOp::u_mul_e, Reduce::sum, F, 1, DType::f32,
                         "gnnone");
#endif
}

TEST(HalfGpu, Fp16RowSumOfDegree10000MatchesFloat32Accumulation) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const int64_t deg = 10000;
  std::vector<int64_t> rows(deg, 0), cols(deg);
  for (int64_t i = 0; i < deg; ++i) cols[i] = i;
  BuildOptions keep;
  keep.duplicates = DuplicatePolicy::keep;
  const Graph g = graph_from_edges(1, deg, rows, cols, {}, keep).to(Device::cuda());
  Tensor ones = Tensor::full({deg, 8}, DType::f16, 1.0).to(Device::cuda());
  Tensor out;
  gspmm(g, SpmmOp::copy_u, Reduce::sum, ones, Tensor(), out);
  const Tensor o = out.to(Device::cpu()).astype(DType::f32);
  for (int64_t f = 0; f < 8; ++f) EXPECT_EQ(o.data<float>()[f], 10000.f) << f;
  const Tensor u = random_tensor({deg, 3}, seed_for(71), 0.f, 1.f).astype(DType::f16);
  Tensor o16, o32;
  gspmm(g, SpmmOp::copy_u, Reduce::sum, u.to(Device::cuda()), Tensor(), o16);
  gspmm(g, SpmmOp::copy_u, Reduce::sum, u.astype(DType::f32).to(Device::cuda()), Tensor(), o32);
  const Tensor h16 = o16.to(Device::cpu()).astype(DType::f64), h32 = o32.to(Device::cpu());
  for (int64_t f = 0; f < 3; ++f) {
    const float want = h32.data<float>()[f];
    EXPECT_GT(want, 4000.f);
    // float32 sums in another order differ in the last bits; the fp16 rounding is 4 here.
    EXPECT_NEAR(h16.data<double>()[f], want, 8.0) << f;
  }
#endif
}

// Tensor::astype converts float32 <-> float16/bfloat16 on the device, bit for bit as the host
// (NaN: a NaN, whatever its payload).
TEST(HalfGpu, DeviceConversionsEqualTheHosts) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  Tensor x = random_tensor({1000, 7}, seed_for(73), -70000.f, 70000.f);
  x.data<float>()[0] = 1e-8f;  // subnormal in float16
  for (DType h : {DType::f16, DType::bf16}) {
    const Tensor want = x.astype(h);
    const Tensor got = x.to(Device::cuda()).astype(h).to(Device::cpu());
    ASSERT_EQ(got.dtype(), h);
    EXPECT_EQ(std::memcmp(got.raw(), want.raw(), size_t(x.numel()) * 2), 0) << dtype_name(h);
    const Tensor nan = Tensor::full({1}, DType::f32, NAN).to(Device::cuda()).astype(h);
    EXPECT_TRUE(std::isnan(nan.astype(DType::f32).to(Device::cpu()).data<float>()[0]));
    const Tensor back = want.to(Device::cuda()).astype(DType::f32).to(Device::cpu());
    const Tensor back_h = want.astype(DType::f32);
    EXPECT_EQ(std::memcmp(back.raw(), back_h.raw(), size_t(x.numel()) * 4), 0) << dtype_name(h);
  }
#endif
}

// nn::aggregate with bfloat16 aggregations (spgnn train --dtype bf16): on the GPU it moves
// bfloat16 only where the half kernel wins (detail::half_spmm_pays: wide rows of a regular dense
// graph), and there it equals the host's bfloat16 emulation; elsewhere it runs float32 (the
// float32 aggregation's result, not the host's rounded one).
TEST(HalfGpu, NnAggregateInBfloat16WhereItPays) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const auto agg = [](const Graph& g, Reduce r, const Tensor& x) {
    return nn::aggregate(g, g.val, r, x);
  };
  struct Case {
    const char* what;
    Graph host;
    int64_t F;
    bool half;
  };
  std::vector<Case> cases;
  cases.push_back({"rmat F=40", graphs(GraphKind::rmat, DType::i32).host, 40, false});
  const Graph dense = generate_erdos_renyi(3000, 96, seed_for(75));  // avg 96, CV ~0.1
  cases.push_back({"dense regular F=16", dense, 16, false});
  cases.push_back({"dense regular F=32", dense, 32, true});
  cases.push_back({"dense regular F=44", dense, 44, false});  // not a multiple of 8
  cases.push_back({"dense regular F=48", dense, 48, true});
  cases.push_back({"dense regular F=64", dense, 64, true});
  cases.push_back({"dense regular F=70", dense, 70, false});
  cases.push_back({"dense regular F=72", dense, 72, true});  // gnnone's one 16-lane pass
  cases.push_back({"dense regular F=100", dense, 100, false});
  cases.push_back({"dense regular F=120", dense, 120, true});
  cases.push_back({"dense regular F=128", dense, 128, true});
  cases.push_back({"dense regular F=136", dense, 136, true});  // gnnone's one 32-lane pass
  cases.push_back({"dense regular F=192", dense, 192, true});
  cases.push_back({"dense regular F=264", dense, 264, false});  // past 256: multiples of 64
  cases.push_back({"rmat F=72", graphs(GraphKind::rmat, DType::i32).host, 72, false});
  for (const Case& c : cases) {
    const Graph dev = c.host.to(Device::cuda());
    EXPECT_EQ(detail::half_spmm_pays(dev, c.F), c.half) << c.what;
    EXPECT_FALSE(detail::half_spmm_pays(c.host, c.F)) << c.what;
    const Tensor x = random_tensor({c.host.n_cols, c.F}, seed_for(74));
    for (Reduce r : {Reduce::sum, Reduce::mean}) {
      nn::set_aggregation_dtype(DType::f32);
      const Tensor f32 = agg(dev, r, x.to(Device::cuda()));
      nn::set_aggregation_dtype(DType::bf16);
      const Tensor host = agg(c.host, r, x);
      const Tensor got = agg(dev, r, x.to(Device::cuda()));
      ASSERT_EQ(got.dtype(), DType::f32);
      EXPECT_LT(rel_error(got, host), half_tol(DType::bf16)) << c.what << " " << name(r);
      if (c.half) EXPECT_GT(rel_error(got, f32), 1e-5) << c.what << " " << name(r);
      else EXPECT_LT(rel_error(got, f32), 1e-6) << c.what << " " << name(r);
    }
    nn::set_aggregation_dtype(DType::f32);
  }
  // Transform-first layers pad their aggregation to a multiple of 8 under half aggregations where
  // the half SpMM pays at that width (the dense graph), to a multiple of 4 otherwise.
  const Graph dense_dev = dense.to(Device::cuda());
  const Graph rmat_dev = graphs(GraphKind::rmat, DType::i32).dev;
  const Tensor xd = Tensor::zeros({4, 8}, DType::f32, Device::cuda());
  const Tensor xh = Tensor::zeros({4, 8}, DType::f32);
  EXPECT_EQ(nn::detail::aggregation_width(41, xd, &dense_dev), 44);  // float32 aggregations
  nn::set_aggregation_dtype(DType::bf16);
  EXPECT_EQ(nn::detail::aggregation_width(41, xd, &dense_dev), 48);
  EXPECT_EQ(nn::detail::aggregation_width(20, xd, &dense_dev), 20);  // 24 < 32: float32 at 20
  EXPECT_EQ(nn::detail::aggregation_width(41, xd, &rmat_dev), 44);
  EXPECT_EQ(nn::detail::aggregation_width(41, xd), 44);
  EXPECT_EQ(nn::detail::aggregation_width(41, xh, &dense), 41);  // the host: no padding
  nn::set_aggregation_dtype(DType::f32);
#endif
}

// Layers under bfloat16 aggregations on a regular dense graph: a 41-wide transform-first
// aggregation runs in bfloat16 at 48 (zero columns) on the GPU and unpadded on the host, which
// rounds to bfloat16 as the GPU does; forward, d x and every weight gradient agree to bfloat16's
// tolerance, and the padded columns never reach the output.
TEST(HalfGpu, LayersPadHalfAggregationsToEight) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const Graph g = generate_erdos_renyi(3000, 96, seed_for(87));
  for (nn::ConvKind kind : {nn::ConvKind::gcn, nn::ConvKind::sage, nn::ConvKind::gin}) {
    SCOPED_TRACE(nn::conv_name(kind));
    nn::ConvSpec s;
    s.kind = kind;
    s.in = 70;
    s.out = 41;
    s.seed = 5;
    nn::set_aggregation_dtype(DType::bf16);
    nn::GraphContext hctx(g, Device::cpu()), dctx(g, Device::cuda());
    auto hl = nn::make_conv(s, DType::f32, Device::cpu());
    auto dl = nn::make_conv(s, DType::f32, Device::cuda());
    const Tensor x = random_tensor({g.n_rows, s.in}, seed_for(88));
    const Tensor r = random_tensor({g.n_rows, hl->out_width()}, seed_for(89));
    const Tensor hy = hl->forward(hctx, x, false, 0);
    const Tensor dy = dl->forward(dctx, x.to(Device::cuda()), false, 0);
    ASSERT_EQ(dy.shape(), hy.shape());
    EXPECT_LT(rel_error(dy, hy), half_tol(DType::bf16)) << "forward";
    const Tensor hdx = hl->backward(hctx, r, true);
    const Tensor ddx = dl->backward(dctx, r.to(Device::cuda()), true);
    EXPECT_LT(rel_error(ddx, hdx), half_tol(DType::bf16)) << "grad x";
    auto hp = hl->parameters(), dp = dl->parameters();
    for (size_t i = 0; i < hp.size(); ++i) {
      if (hp[i]->name == "eps") continue;
      EXPECT_LT(rel_error(dp[i]->grad, hp[i]->grad), half_tol(DType::bf16)) << hp[i]->name;
    }
    nn::set_aggregation_dtype(DType::f32);
  }
#endif
}

// A GAT layer under half aggregations runs its attention on half copies of feat, el and er
// (the fused kernels' half path on the GPU, at heads padded to a multiple of 4; the host converts
// the same values): forward, d x and every weight gradient agree within two roundings, in both
// half dtypes, for a padded (41) and an unpadded (16) head width.
TEST(HalfGpu, GatLayerRunsItsAttentionInHalf) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const Graph g = generate_erdos_renyi(2000, 40, seed_for(90));
  // Half heads run at a multiple of 8 above 8 (41 -> 48, 12 -> 16); in = 16 with one head and
  // out = 41 attends over x itself, in = 44 does not (x would need padding to 48)
  struct Shape {
    int64_t in, out, heads;
  };
  for (DType dt : {DType::bf16, DType::f16})
    for (Shape sh : {Shape{70, 41, 2}, Shape{70, 16, 2}, Shape{70, 12, 2}, Shape{16, 41, 1},
                     Shape{44, 41, 1}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " in=" + std::to_string(sh.in) +
                   " out=" + std::to_string(sh.out) + " heads=" + std::to_string(sh.heads));
      nn::ConvSpec s;
      s.kind = nn::ConvKind::gat;
      s.in = sh.in;
      s.out = sh.out;
      s.heads = sh.heads;
      s.seed = 6;
      nn::set_aggregation_dtype(dt);
      nn::GraphContext hctx(g, Device::cpu()), dctx(g, Device::cuda());
      auto hl = nn::make_conv(s, DType::f32, Device::cpu());
      auto dl = nn::make_conv(s, DType::f32, Device::cuda());
      const Tensor x = random_tensor({g.n_rows, s.in}, seed_for(91));
      const Tensor r = random_tensor({g.n_rows, hl->out_width()}, seed_for(92));
      const double tol = 2 * half_tol(dt);
      // A training forward (no dropout here) keeps what the backward's one walk by source reads;
      // an evaluation forward does not, and its backward takes the destination pass.
      for (bool training : {true, false}) {
        SCOPED_TRACE(training ? "training forward" : "evaluation forward");
        const Tensor hy = hl->forward(hctx, x, training, 0);
        const Tensor dy = dl->forward(dctx, x.to(Device::cuda()), training, 0);
        ASSERT_EQ(dy.shape(), hy.shape());
        EXPECT_LT(rel_error(dy, hy), tol) << "forward";
        const Tensor hdx = hl->backward(hctx, r, true);
        const Tensor ddx = dl->backward(dctx, r.to(Device::cuda()), true);
        EXPECT_LT(rel_error(ddx, hdx), tol) << "grad x";
        auto hp = hl->parameters(), dp = dl->parameters();
        for (size_t i = 0; i < hp.size(); ++i)
          EXPECT_LT(rel_error(dp[i]->grad, hp[i]->grad), tol) << hp[i]->name;
      }
      nn::set_aggregation_dtype(DType::f32);
    }
#endif
}

TEST(HalfGpu, StrategiesWithoutHalfKernelsSaySo) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const Graphs& G = graphs(GraphKind::rmat, DType::i32);
  const Tensor u = random_tensor({G.host.n_cols, 16}, seed_for(72)).astype(DType::bf16).to(
      Device::cuda());
  for (const std::string st : {"mergepath", "rowtile"}) {
    OpOptions o;
    o.schedule = sched(st);
    Tensor out;
    expect_throw<Unsupported>([&] { gspmm(G.dev, SpmmOp::copy_u, Reduce::sum, u, Tensor(), out, o); },
                              {st, "bfloat16"});
  }
  // cuSPARSE's SpMM takes bfloat16 (checked against the host's result here); its SDDMM does so
  // only in CUDA releases that have it, and otherwise refuses by name.
  {
    OpOptions o;
    o.schedule = sched("cusparse");
    Tensor out, want;
    gspmm(G.dev, SpmmOp::copy_u, Reduce::sum, u, Tensor(), out, o);
    gspmm(G.host, SpmmOp::copy_u, Reduce::sum, u.to(Device::cpu()).astype(DType::f64), Tensor(),
          want, cpu_ref());
    EXPECT_LT(rel_error(out, want), half_tol(DType::bf16));
    Tensor sd;
    try {
      gsddmm(G.dev, SddmmOp::dot, u, u, sd, Target::u, Target::v, o);
      Tensor sd_want;
      const Tensor u64 = u.to(Device::cpu()).astype(DType::f64);
      gsddmm(G.host, SddmmOp::dot, u64, u64, sd_want, Target::u, Target::v, cpu_ref());
      EXPECT_LT(rel_error(sd, sd_want), half_tol(DType::bf16) * 4);
    } catch (const Unsupported& e) {
      EXPECT_NE(std::string(e.what()).find("bfloat16"), std::string::npos) << e.what();
    }
  }
  {
    OpOptions o;
    o.schedule = sched("gnnone");
    Tensor out;
    expect_throw<Unsupported>(
        [&] { gsddmm(G.dev, SddmmOp::dot, u, u, out, Target::u, Target::v, o); },
        {"gnnone", "bfloat16"});
  }
#endif
}

// The ops without half kernels (edge_softmax, maxk and the CBSR products, forward and backward;
// the unfused GAT composition) take half operands on the GPU too: converted to float32 and back
// on the device, on the op's stream; the fused GAT reads them itself. Run here on a non-blocking stream, whose work the default stream
// does not wait for, with every output poisoned: a conversion on another stream, or one not
// waited for, shows as NaN or stale values. Each result is held to the oracle on the same
// (exactly converted) values within the half dtype's rounding (gradients: two roundings).
TEST(HalfGpu, OpsWithoutHalfKernelsConvertOnTheOpsStream) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  OpOptions o;
  o.stream = st;
  auto done = [&] { ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess); };
  // Outputs are poisoned on st itself: a fill on the default stream is not ordered before work
  // on a non-blocking stream.
  auto f32 = [](const Tensor& t) { return t.to(Device::cpu()).astype(DType::f32); };
  for (DType t : {DType::f16, DType::bf16})
    for (GraphKind kind : {GraphKind::rmat, GraphKind::empty_rows, GraphKind::no_edges}) {
      const Graph g = random_graph(kind, 700, seed_for(130 + int(kind)), false);
      const Graph gd = g.to(Device::cuda());
      const double tol = half_tol(t);
      auto half = [&](std::vector<int64_t> shape, uint64_t salt) {
        return random_tensor(std::move(shape), seed_for(salt), -1.f, 1.f).astype(t);
      };
      for (int64_t H : {1, 4}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " " + kind_name(kind) + " H=" +
                     std::to_string(H));
        const int64_t F = 12;
        const Tensor scores = half({g.nnz(), H}, 140), gout = half({g.nnz(), H}, 141);
        Tensor want, got = poisoned({g.nnz(), H}, st, t);
        edge_softmax(g, f32(scores), want, cpu_ref());
        edge_softmax(gd, dev(scores), got, o);
        done();
        ASSERT_EQ(got.dtype(), t);
        EXPECT_LT(rel_error(got, want), tol) << "edge_softmax";
        Tensor gs_want, gs = poisoned({g.nnz(), H}, st, t);
        edge_softmax_backward(g, f32(got), f32(gout), gs_want, cpu_ref());
        edge_softmax_backward(gd, got, dev(gout), gs, o);
        done();
        EXPECT_LT(rel_error(gs, gs_want), 2 * tol) << "edge_softmax_backward";

        const Tensor feat = half({g.n_cols, H * F}, 142), el = half({g.n_cols, H}, 143),
                     er = half({g.n_rows, H}, 144), go = half({g.n_rows, H * F}, 145);
        GatParams params;
        params.heads = H;
        for (const std::string strategy : {"gat_fused", "unfused"}) {
          SCOPED_TRACE(strategy);
          OpOptions os = o;
          os.schedule = sched(strategy);
          Tensor out_want, attn_want;
          gat_aggregate(g, f32(feat), f32(el), f32(er), params, out_want, attn_want, cpu_ref());
          Tensor out = poisoned({g.n_rows, H * F}, st, t), attn = poisoned({g.nnz(), H}, st, t);
          gat_aggregate(gd, dev(feat), dev(el), dev(er), params, out, attn, os);
          done();
          ASSERT_EQ(attn.dtype(), t);
          EXPECT_LT(rel_error(out, out_want), tol) << "gat_aggregate out";
          EXPECT_LT(rel_error(attn, attn_want), tol) << "gat_aggregate attn";
          Tensor gf = poisoned({g.n_cols, H * F}, st, t), gl = poisoned({g.n_cols, H}, st, t),
                 gr = poisoned({g.n_rows, H}, st, t);
          if (strategy == "unfused") {  // the unfused composition has no backward
            EXPECT_THROW(gat_aggregate_backward(gd, dev(feat), dev(el), dev(er), attn, dev(go),
                                                params, gf, gl, gr, os),
                         Unsupported);
            continue;
          }
          Tensor gf_want, gl_want, gr_want;
          gat_aggregate_backward(g, f32(feat), f32(el), f32(er), f32(attn), f32(go), params,
                                 gf_want, gl_want, gr_want, cpu_ref());
          gat_aggregate_backward(gd, dev(feat), dev(el), dev(er), attn, dev(go), params, gf, gl,
                                 gr, os);
          done();
          EXPECT_LT(rel_error(gf, gf_want), 2 * tol) << "grad_feat";
          EXPECT_LT(rel_error(gl, gl_want), 2 * tol) << "grad_el";
          EXPECT_LT(rel_error(gr, gr_want), 2 * tol) << "grad_er";
        }
      }
      // MaxK: few distinct values, so many ties, broken by the lower column as in float32.
      for (int64_t k : {1, 7, 32}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " " + kind_name(kind) + " k=" +
                     std::to_string(k));
        const int64_t F = 64;
        Tensor x = random_tensor({g.n_cols, F}, seed_for(150 + k), -4.f, 4.f);
        for (int64_t i = 0; i < x.numel(); ++i)
          x.data<float>()[i] = std::round(x.data<float>()[i] * 2.f) / 2.f;
        const Tensor xh = x.astype(t);
        const Cbsr want = maxk(f32(xh), k, cpu_ref());
        Cbsr got;
        got.data = poisoned({g.n_cols, k}, st, t);
        got.index = Tensor::empty({g.n_cols, k}, DType::u8, Device::cuda());
        got.index.fill_(0, st);
        maxk(dev(xh), k, got, o);
        done();
        ASSERT_EQ(got.data.dtype(), t);
        EXPECT_EQ(got.index.to(Device::cpu()).to_vector<uint8_t>(),
                  want.index.to_vector<uint8_t>());
        EXPECT_EQ(rel_error(got.data, want.data), 0.0);  // the kept values are the input's own
        const Tensor dd = half({g.n_cols, k}, 160);
        Tensor dx = poisoned({g.n_cols, F}, st, t);
        maxk_backward(got, dev(dd), dx, o);
        done();
        ASSERT_EQ(dx.dtype(), t);
        EXPECT_EQ(rel_error(dx, maxk_backward(want, f32(dd), cpu_ref())), 0.0);

        Tensor out_want, out = poisoned({g.n_rows, F}, st, t);
        const Tensor e = half({g.nnz()}, 161);
        cbsr_spgemm(g, want, f32(e), out_want, cpu_ref());
        cbsr_spgemm(gd, got, dev(e), out, o);
        done();
        EXPECT_LT(rel_error(out, out_want), tol) << "cbsr_spgemm";
        const Tensor dout = half({g.n_rows, F}, 162);
        Tensor d_want, d = poisoned({g.n_cols, k}, st, t);
        cbsr_sspmm(g, f32(e), f32(dout), want, d_want, cpu_ref());
        cbsr_sspmm(gd, dev(e), dev(dout), got, d, o);
        done();
        EXPECT_LT(rel_error(d, d_want), tol) << "cbsr_sspmm";
      }
    }
  cudaStreamDestroy(st);
#endif
}

}  // namespace
}  // namespace spgnn::test
