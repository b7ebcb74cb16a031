// The cuSPARSE baseline (strategy `cusparse`) against cpu_ref: SpMM copy_u / u_mul_e (e width 1)
// with sum for every `alg` value, SDDMM dot with targets v/u and u/v, on every graph shape of
// test_util.hpp with int32 and int64 indices and every width of test_widths(); outputs poisoned
// with NaN first. Unsupported problems must be refused with a reason. SPGNN_TEST_QUICK=1 shrinks
// the sweep for the compute-sanitizer runs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "spgnn/ops.hpp"
#include "gpu/gpu_test_util.hpp"
#include "test_util.hpp"

#if SPGNN_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace spgnn::test {
namespace {


[[maybe_unused]] const Graphs& graphs(GraphKind kind, DType idx) {
  return cached_graphs(kind, idx, quick() ? 300 : 1500, 300);
}

[[maybe_unused]] Schedule cusparse(int64_t alg = -1) {
  Schedule s;
  s.strategy = "cusparse";
  if (alg >= 0) s.params["alg"] = alg;
  return s;
}
[[maybe_unused]] OpOptions with(const Schedule& s, void* stream = nullptr) {
  OpOptions o;
  o.schedule = s;
  o.stream = stream;
  return o;
}

[[maybe_unused]] constexpr double kTol = 1e-5;
[[maybe_unused]] int g_failures = 0;

#if SPGNN_WITH_CUDA
void check_spmm(GraphKind kind, DType idx, SpmmOp op, int64_t F, const Schedule& sched,
                cudaStream_t stream = nullptr) {
  if (g_failures > 20) return;
  const Graphs& G = graphs(kind, idx);
  static uint64_t salt = 0;
  const uint64_t seed = seed_for(7000 + ++salt);
  std::ostringstream what;
  what << "spmm " << name(op) << "/sum graph=" << kind_name(kind) << " idx=" << dtype_name(idx)
       << " F=" << F << " " << sched.str() << " seed=" << seed;
  SCOPED_TRACE(what.str());
  Tensor u_h = random_tensor({G.host.n_cols, F}, seed), e_h;
  if (op == SpmmOp::u_mul_e) e_h = random_tensor({G.host.nnz()}, seed + 1, 0.5f, 1.5f);
  Tensor ref;
  OpOptions ro;
  ro.schedule.strategy = "cpu_ref";
  gspmm(G.host, op, Reduce::sum, u_h, e_h, ref, ro);
  Tensor u_d = u_h.to(Device::cuda()), e_d;
  if (e_h.defined()) e_d = e_h.to(Device::cuda());
  Tensor out = Tensor::empty({G.host.n_rows, F}, DType::f32, Device::cuda());
  out.fill_(NAN, stream);
  gspmm(G.dev, op, Reduce::sum, u_d, e_d, out, with(sched, stream));
  if (stream) {
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  const double err = rel_error(out, ref);
  EXPECT_LT(err, kTol);
  if (!(err < kTol)) ++g_failures;
}

void check_sddmm(GraphKind kind, DType idx, Target lt, Target rt, int64_t F,
                 cudaStream_t stream = nullptr) {
  if (g_failures > 20) return;
  const Graphs& G = graphs(kind, idx);
  static uint64_t salt = 0;
  const uint64_t seed = seed_for(9000 + ++salt);
  std::ostringstream what;
  what << "sddmm dot lhs=" << name(lt) << " rhs=" << name(rt) << " graph=" << kind_name(kind)
       << " idx=" << dtype_name(idx) << " F=" << F << " seed=" << seed;
  SCOPED_TRACE(what.str());
  auto rows = [&](Target t) { return t == Target::u ? G.host.n_cols : G.host.n_rows; };
  // Positive operands: a single short dot of signed values can cancel to near zero, where any
  // float32 summation order differs from the float64 reference by more than the tolerance.
  Tensor l_h = random_tensor({rows(lt), F}, seed, 0.f, 1.f),
         r_h = random_tensor({rows(rt), F}, seed + 1, 0.f, 1.f);
  Tensor ref;
  OpOptions ro;
  ro.schedule.strategy = "cpu_ref";
  gsddmm(G.host, SddmmOp::dot, l_h, r_h, ref, lt, rt, ro);
  Tensor l_d = l_h.to(Device::cuda()), r_d = r_h.to(Device::cuda());
  Tensor out = Tensor::empty({G.host.nnz(), 1}, DType::f32, Device::cuda());
  out.fill_(NAN, stream);
  gsddmm(G.dev, SddmmOp::dot, l_d, r_d, out, lt, rt, with(cusparse(), stream));
  if (stream) {
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  const double err = rel_error(out, ref);
  EXPECT_LT(err, kTol);
  if (!(err < kTol)) ++g_failures;
}
#endif

[[maybe_unused]] std::vector<int64_t> widths() {
  if (quick()) return {1, 3, 32, 33, 128};
  return test_widths();
}
[[maybe_unused]] std::vector<GraphKind> kinds() {
  if (quick()) return {GraphKind::rmat, GraphKind::empty_rows, GraphKind::single,
                       GraphKind::no_edges};
  return all_graph_kinds();
}

TEST(CusparseSpmm, EveryAlgGraphIndexAndWidth) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  for (int64_t alg : {0, 1, 2, 3})
    for (GraphKind k : kinds())
      for (DType idx : {DType::i32, DType::i64})
        for (int64_t F : widths()) {
          check_spmm(k, idx, SpmmOp::copy_u, F, cusparse(alg));
          check_spmm(k, idx, SpmmOp::u_mul_e, F, cusparse(alg));
        }
#endif
}

TEST(CusparseSpmm, NonDefaultStream) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreate(&st), cudaSuccess);
  for (int64_t F : {1, 32, 256}) check_spmm(GraphKind::rmat, DType::i32, SpmmOp::u_mul_e, F,
                                            cusparse(), st);
  cudaStreamDestroy(st);
#endif
}

TEST(CusparseSpmm, RefusesWhatItCannotDo) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const Graphs& G = graphs(GraphKind::rmat, DType::i32);
  Tensor u = Tensor::zeros({G.host.n_cols, 8}, DType::f32, Device::cuda());
  Tensor e1 = Tensor::zeros({G.host.nnz()}, DType::f32, Device::cuda());
  Tensor e8 = Tensor::zeros({G.host.nnz(), 8}, DType::f32, Device::cuda());
  Tensor out;
  EXPECT_THROW(gspmm(G.dev, SpmmOp::copy_u, Reduce::mean, u, Tensor(), out, with(cusparse())),
               Unsupported);
  EXPECT_THROW(gspmm(G.dev, SpmmOp::u_add_e, Reduce::sum, u, e1, out, with(cusparse())),
               Unsupported);
  EXPECT_THROW(gspmm(G.dev, SpmmOp::u_mul_e, Reduce::sum, u, e8, out, with(cusparse())),
               Unsupported);
  Tensor so1, so2;  // fresh outputs: a refused call still allocates its output's shape
  EXPECT_THROW(gsddmm(G.dev, SddmmOp::add, u, u, so1, Target::u, Target::v, with(cusparse())),
               Unsupported);
  EXPECT_THROW(gsddmm(G.dev, SddmmOp::dot, u, u, so2, Target::u, Target::u, with(cusparse())),
               Unsupported);
#endif
}

TEST(CusparseSddmm, EveryGraphIndexAndWidth) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  for (GraphKind k : kinds())
    for (DType idx : {DType::i32, DType::i64})
      for (int64_t F : widths()) {
        check_sddmm(k, idx, Target::v, Target::u, F);
        check_sddmm(k, idx, Target::u, Target::v, F);
      }
  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreate(&st), cudaSuccess);
  check_sddmm(GraphKind::rmat, DType::i64, Target::u, Target::v, 32, st);
  cudaStreamDestroy(st);
#endif
}

}  // namespace
}  // namespace spgnn::test
