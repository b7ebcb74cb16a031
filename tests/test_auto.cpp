// `auto` on host data: it resolves to a strategy that supports the problem (never a CUDA one, and
// never cpu_ref when a fast CPU kernel exists), resolve_*_schedule is stable across calls and
// copies of a graph, its graph statistics are cached once per structure, and running an op with
// the default schedule matches cpu_ref. Also checks that the GPU strategies of this issue are
// registered with parameter spaces the front door enforces (builds with CUDA only).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "spgnn/ops.hpp"
#include "spgnn/schedule.hpp"
#include "test_util.hpp"

namespace spgnn::test {
namespace {

std::vector<DType> index_types() { return {DType::i32, DType::i64}; }

Graph host_graph(GraphKind k, DType idx) {
  Graph g = random_graph(k, 400, seed_for(40 + static_cast<int>(k)));
  if (g.index_dtype() == idx) return g;
  Graph h = g;
  h.row = g.row.astype(idx);
  h.col = g.col.astype(idx);
  h.rowptr = g.rowptr.astype(idx);
  return h;
}

TEST(Auto, SpmmResolvesToASupportedCpuStrategy) {
  for (GraphKind k : all_graph_kinds())
    for (DType idx : index_types()) {
      const Graph g = host_graph(k, idx);
      for (SpmmOp op : {SpmmOp::copy_u, SpmmOp::copy_e, SpmmOp::u_mul_e, SpmmOp::u_div_e})
        for (Reduce red : {Reduce::sum, Reduce::mean, Reduce::max, Reduce::min})
          for (int64_t F : {1, 7, 32, 256}) {
            const Schedule s = resolve_spmm_schedule(g, op, red, F, Schedule{});
            SCOPED_TRACE(std::string(kind_name(k)) + " " + dtype_name(idx) + " " + name(op) +
                         "/" + name(red) + " F=" + std::to_string(F) + " -> " + s.str());
            ASSERT_NE(s.strategy, "auto");
            EXPECT_EQ(find_strategy(OpKind::spmm, s.strategy).device, DeviceType::cpu);
            EXPECT_EQ(s.strategy, "cpu_mergepath");  // the fast CPU kernel handles every op
            EXPECT_NO_THROW(check_schedule(OpKind::spmm, s));
          }
    }
}

TEST(Auto, SddmmResolvesToASupportedCpuStrategy) {
  for (GraphKind k : all_graph_kinds())
    for (SddmmOp op : {SddmmOp::dot, SddmmOp::add, SddmmOp::mul, SddmmOp::copy_rhs})
      for (int64_t F : {1, 5, 64}) {
        const Graph g = host_graph(k, F % 2 ? DType::i64 : DType::i32);
        const Schedule s = resolve_sddmm_schedule(g, op, F, Schedule{});
        SCOPED_TRACE(std::string(kind_name(k)) + " " + name(op) + " -> " + s.str());
        EXPECT_EQ(find_strategy(OpKind::sddmm, s.strategy).device, DeviceType::cpu);
        EXPECT_EQ(s.strategy, "cpu_edge");
        EXPECT_NO_THROW(check_schedule(OpKind::sddmm, s));
      }
}

TEST(Auto, ResolutionIsStableAndStatisticsAreCachedOnce) {
  for (GraphKind k : {GraphKind::rmat, GraphKind::star, GraphKind::no_edges})
    for (DType idx : index_types()) {
      const Graph g = host_graph(k, idx);
      const Schedule first = resolve_spmm_schedule(g, SpmmOp::u_mul_e, Reduce::sum, 64, Schedule{});
      const size_t items = g.cache->items.size();
      for (int rep = 0; rep < 5; ++rep) {
        EXPECT_EQ(resolve_spmm_schedule(g, SpmmOp::u_mul_e, Reduce::sum, 64, Schedule{}).str(),
                  first.str());
        EXPECT_EQ(resolve_sddmm_schedule(g, SddmmOp::dot, 64, Schedule{}).str(),
                  resolve_sddmm_schedule(g, SddmmOp::dot, 64, Schedule{}).str());
      }
      // Repeated calls add nothing to the cache: the statistics were computed once.
      EXPECT_EQ(g.cache->items.size(), items);
      // A copy (sharing the cache) resolves the same way.
      const Graph copy = g;
      EXPECT_EQ(resolve_spmm_schedule(copy, SpmmOp::u_mul_e, Reduce::sum, 64, Schedule{}).str(),
                first.str());
    }
}

// degree_summary is the graph's; one handed in (provide_degree_summary, as the Python package
// does with what its GPU build computes) is what `auto` reads from then on, unless the graph
// has one already; values no graph of its sizes can have are refused.
TEST(Auto, ProvidedDegreeSummaryIsTheOneAutoReads) {
  for (GraphKind k : all_graph_kinds())
    for (DType idx : index_types()) {
      const Graph g = host_graph(k, idx);
      SCOPED_TRACE(std::string(kind_name(k)) + " " + dtype_name(idx));
      const std::vector<int64_t> rp = g.rowptr.astype(DType::i64).to_vector<int64_t>();
      DegreeSummary want;
      for (int64_t r = 0; r < g.n_rows; ++r) {
        const int64_t d = rp[size_t(r) + 1] - rp[size_t(r)];
        want.max_degree = std::max(want.max_degree, d);
        want.empty_rows += d == 0;
        want.sum_sq += double(d) * double(d);
      }
      const DegreeSummary got = degree_summary(g);
      EXPECT_EQ(got.max_degree, want.max_degree);
      EXPECT_EQ(got.empty_rows, want.empty_rows);
      EXPECT_EQ(got.sum_sq, want.sum_sq);

      const int64_t n = g.n_rows, nnz = g.nnz();
      auto fresh = [&] {
        Graph c = g;
        c.cache = std::make_shared<GraphCache>();
        return c;
      };
      if (nnz > 0 && n >= 2) {  // every edge in one row: possible, and not this graph's
        const DegreeSummary one_row{nnz, n - 1, double(nnz) * double(nnz)};
        const Graph h = fresh();
        provide_degree_summary(h, one_row);
        provide_degree_summary(h, want);  // the first one stays
        EXPECT_EQ(degree_summary(h).max_degree, nnz);
        EXPECT_EQ(degree_summary(h).empty_rows, n - 1);
        EXPECT_EQ(degree_summary(h).sum_sq, double(nnz) * double(nnz));
      }
      const Graph h = fresh();
      for (const DegreeSummary& bad :
           {DegreeSummary{nnz + 1, 0, 0}, DegreeSummary{-1, 0, 0},
            DegreeSummary{want.max_degree, n + 1, want.sum_sq},
            DegreeSummary{want.max_degree, want.empty_rows, -1.0},
            DegreeSummary{want.max_degree, want.empty_rows, std::nan("")},
            DegreeSummary{want.max_degree, want.empty_rows,
                          double(want.max_degree) * double(nnz) + 1e6}})
        EXPECT_THROW(provide_degree_summary(h, bad), InvalidArgument);
      if (nnz > 0) {
        EXPECT_THROW(provide_degree_summary(h, DegreeSummary{0, 0, 0}), InvalidArgument);
        EXPECT_THROW(provide_degree_summary(h, DegreeSummary{want.max_degree, n, want.sum_sq}),
                     InvalidArgument);
        // fewer squares than equal rows give
        EXPECT_THROW(provide_degree_summary(
                         h, DegreeSummary{want.max_degree, want.empty_rows,
                                          0.5 * double(nnz) * double(nnz) / double(n)}),
                     InvalidArgument);
      }
      provide_degree_summary(h, want);
      EXPECT_EQ(degree_summary(h).max_degree, want.max_degree);
    }
}

TEST(Auto, ExplicitSchedulesPassThroughAndAreChecked) {
  const Graph g = host_graph(GraphKind::uniform, DType::i32);
  Schedule s;
  s.strategy = "cpu_mergepath";
  s.params["row_cost"] = 2;
  EXPECT_EQ(resolve_spmm_schedule(g, SpmmOp::copy_u, Reduce::sum, 8, s).str(), s.str());
  s.params["row_cost"] = 3;
  EXPECT_THROW(resolve_spmm_schedule(g, SpmmOp::copy_u, Reduce::sum, 8, s), InvalidArgument);
  Schedule bad;
  bad.params["cost"] = 8;  // auto takes no parameters
  EXPECT_THROW(resolve_spmm_schedule(g, SpmmOp::copy_u, Reduce::sum, 8, bad), InvalidArgument);
  // A parameter given twice, or a value with blanks or beyond int64, is an error, not one of
  // them taken silently.
  EXPECT_THROW(parse_schedule("cpu_mergepath:row_cost=1,row_cost=2"), InvalidArgument);
  EXPECT_THROW(parse_schedule("cpu_mergepath:row_cost= 2"), InvalidArgument);
  EXPECT_THROW(parse_schedule("cpu_mergepath:row_cost=99999999999999999999"), InvalidArgument);
  EXPECT_EQ(parse_schedule("cpu_mergepath:row_cost=2").params.at("row_cost"), 2);
}

TEST(Auto, DefaultScheduleMatchesReference) {
  for (GraphKind k : all_graph_kinds())
    for (int64_t F : {1, 6, 33}) {
      const Graph g = host_graph(k, F % 2 ? DType::i64 : DType::i32);
      SCOPED_TRACE(std::string(kind_name(k)) + " F=" + std::to_string(F));
      const Tensor u = random_tensor({g.n_cols, F}, seed_for(50 + F));
      const Tensor e = random_tensor({g.nnz()}, seed_for(60 + F), 0.5f, 1.5f);
      OpOptions ref_opt;
      ref_opt.schedule.strategy = "cpu_ref";
      Tensor ref, out = Tensor::full({g.n_rows, F}, DType::f32, NAN);
      gspmm(g, SpmmOp::u_mul_e, Reduce::mean, u, e, ref, ref_opt);
      gspmm(g, SpmmOp::u_mul_e, Reduce::mean, u, e, out);
      EXPECT_LT(rel_error(out, ref), 1e-5);
      Tensor dref, dout = Tensor::full({g.nnz(), 1}, DType::f32, NAN);
      const Tensor v = random_tensor({g.n_rows, F}, seed_for(70 + F));
      gsddmm(g, SddmmOp::dot, u, v, dref, Target::u, Target::v, ref_opt);
      gsddmm(g, SddmmOp::dot, u, v, dout, Target::u, Target::v);
      EXPECT_LT(rel_error(dout, dref), 1e-5);
    }
}

#if SPGNN_WITH_CUDA
TEST(Auto, GpuStrategiesAreRegisteredWithTheirParameterSpaces) {
  for (const char* s : {"mergepath", "warp_vertex", "rowtile"})
    EXPECT_EQ(find_strategy(OpKind::spmm, s).device, DeviceType::cuda) << s;
  EXPECT_EQ(find_strategy(OpKind::sddmm, "shuffle").device, DeviceType::cuda);
  EXPECT_NO_THROW(check_schedule(OpKind::spmm, parse_schedule("mergepath:cost=16,online=1")));
  EXPECT_NO_THROW(check_schedule(OpKind::spmm, parse_schedule("warp_vertex:assign=2,step=8")));
  EXPECT_NO_THROW(check_schedule(OpKind::spmm,
                                 parse_schedule("rowtile:m_tile=8,n_tile=64,reg_tile=2")));
  EXPECT_NO_THROW(check_schedule(OpKind::sddmm, parse_schedule("shuffle:lanes=4")));
  EXPECT_THROW(check_schedule(OpKind::spmm, parse_schedule("mergepath:cost=5")), InvalidArgument);
  EXPECT_THROW(check_schedule(OpKind::spmm, parse_schedule("warp_vertex:assign=3")),
               InvalidArgument);
  EXPECT_THROW(check_schedule(OpKind::sddmm, parse_schedule("shuffle:lanes=3")), InvalidArgument);
  EXPECT_THROW(check_schedule(OpKind::spmm, parse_schedule("rowtile:tile=3")), InvalidArgument);
}
#endif

}  // namespace
}  // namespace spgnn::test

// The graph-blind half-SpMM width rule (Python's autocast): 16-byte half vectors (F % 8 == 0)
// from 64 to 256, where gnnone runs a half row in one pass, then multiples of 64.
TEST(Auto, HalfSpmmWidthRule) {
  for (int64_t F : {64, 72, 80, 96, 104, 120, 128, 136, 152, 192, 200, 248, 256, 320, 512})
    EXPECT_TRUE(spgnn::half_spmm_width_pays(F)) << F;
  for (int64_t F : {-64, 0, 1, 8, 16, 32, 48, 56, 63, 68, 100, 130, 252, 260, 264, 312})
    EXPECT_FALSE(spgnn::half_spmm_width_pays(F)) << F;
}
