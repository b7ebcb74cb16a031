// The shared scaffolding of the GPU strategy tests (test_gnnone.cpp, test_strategies.cpp): sweep
// sizes, cached host/device graph pairs, and one check of a gspmm / gsddmm on the GPU against the
// float64 oracle cpu_ref with the output poisoned with NaN first. SPGNN_TEST_QUICK=1 (set by
// scripts/gpu-check.sh for the compute-sanitizer runs) shrinks graphs and sweeps.
// Each test binary includes this once (everything is in an anonymous namespace).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
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

[[maybe_unused]] const std::vector<DType> kIndex = {DType::i32, DType::i64};
[[maybe_unused]] constexpr double kTol = 1e-5;
[[maybe_unused]] int g_failures = 0;  // after kMaxReported failures the sweeps stop checking
[[maybe_unused]] constexpr int kMaxReported = 20;

// Seeds of the random graphs and inputs; each test binary sets its own so that two binaries do
// not test the very same inputs.
[[maybe_unused]] uint64_t g_seed_base = 100;

[[maybe_unused]] const Graphs& graphs(GraphKind kind, DType idx) {
  return cached_graphs(kind, idx, graph_n(), g_seed_base);
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

#if SPGNN_WITH_CUDA
// Checks one gspmm against cpu_ref. ew = e width (0 = no e; 1 = broadcast, as [nnz] when
// e_1d; F = per feature).
[[maybe_unused]] void check_spmm(GraphKind kind, DType idx, SpmmOp op, Reduce red, int64_t F,
                                 int64_t ew, const Schedule& s, cudaStream_t stream = nullptr,
                                 bool e_1d = false) {
  if (g_failures > kMaxReported) return;
  const Graphs& G = graphs(kind, idx);
  static uint64_t salt = 0;
  const uint64_t seed = seed_for(g_seed_base + 1000 + ++salt);
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

[[maybe_unused]] Tensor operand(Target t, const Graph& g, int64_t F, uint64_t seed, bool positive) {
  const int64_t rows = t == Target::u ? g.n_cols : t == Target::v ? g.n_rows : g.nnz();
  return positive ? random_tensor({rows, F}, seed, 0.5f, 1.5f) : random_tensor({rows, F}, seed);
}

// Checks one gsddmm against cpu_ref, with signed operands (positive divisors).
[[maybe_unused]] void check_sddmm(GraphKind kind, DType idx, SddmmOp op, Target lt, Target rt,
                                  int64_t F, const Schedule& s, cudaStream_t stream = nullptr) {
  if (g_failures > kMaxReported) return;
  const Graphs& G = graphs(kind, idx);
  static uint64_t salt = 0;
  const uint64_t seed = seed_for(g_seed_base + 5000 + ++salt);
  std::ostringstream what;
  what << "sddmm " << name(op) << " lhs=" << name(lt) << " rhs=" << name(rt)
       << " graph=" << kind_name(kind) << " idx=" << dtype_name(idx) << " F=" << F << " "
       << s.str() << (stream ? " (stream)" : "") << " seed=" << seed;
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
  o.schedule = s;
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

}  // namespace
}  // namespace spgnn::test
