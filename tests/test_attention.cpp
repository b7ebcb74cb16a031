// Attention ops on the CPU: the OpenMP strategy `cpu` and the unfused composition against the
// float64 oracle cpu_ref on every graph shape of test_util.hpp, finite-difference gradient checks
// of edge_softmax and gat_aggregate (the oracle's backward against its own forward, in double
// precision terms), softmax invariants, dropout determinism, and argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/attention_problem.hpp"
#include "kernels/cuda/attention_kernels.hpp"  // gat_bwd_prefers_atomic: plain C++
#include "spgnn/ops.hpp"
#include "test_util.hpp"

namespace spgnn::test {
namespace {

OpOptions with(const std::string& strategy) {
  OpOptions o;
  o.schedule.strategy = strategy;
  return o;
}

Tensor nan_tensor(std::vector<int64_t> shape) { return Tensor::full(std::move(shape), DType::f32, NAN); }

constexpr double kTol = 1e-5;

struct GatCase {
  Graph g;
  Tensor feat, el, er, grad_out;
  GatParams prm;
};

GatCase make_case(GraphKind kind, int64_t n, int64_t H, int64_t F, float dropout, uint64_t salt,
                  DType idx = DType::i32) {
  GatCase c;
  c.g = with_index(random_graph(kind, n, seed_for(salt), false), idx);
  c.feat = random_tensor({c.g.n_cols, H * F}, seed_for(salt + 1));
  c.el = random_tensor({c.g.n_cols, H}, seed_for(salt + 2), -2.f, 2.f);
  c.er = random_tensor({c.g.n_rows, H}, seed_for(salt + 3), -2.f, 2.f);
  c.grad_out = random_tensor({c.g.n_rows, H * F}, seed_for(salt + 4));
  c.prm.heads = H;
  c.prm.negative_slope = 0.2f;
  c.prm.attn_dropout = dropout;
  c.prm.dropout_seed = 1234 + salt;
  return c;
}

TEST(EdgeSoftmax, CpuMatchesReferenceAndRowsSumToOne) {
  uint64_t salt = 10;
  for (GraphKind k : all_graph_kinds())
    for (int64_t H : {1, 3, 8}) {
      const Graph g = random_graph(k, 400, seed_for(++salt), false);
      SCOPED_TRACE(std::string("graph=") + kind_name(k) + " H=" + std::to_string(H));
      const Tensor s = random_tensor({g.nnz(), H}, seed_for(++salt), -5.f, 5.f);
      Tensor ref, got = nan_tensor({g.nnz(), H});
      edge_softmax(g, s, ref, with("cpu_ref"));
      edge_softmax(g, s, got, with("cpu"));
      EXPECT_LT(rel_error(got, ref), kTol);
      // Each non-empty row's weights sum to 1 per head.
      const auto rp = g.rowptr.astype(DType::i64).to_vector<int64_t>();
      const float* a = ref.data<float>();
      for (int64_t v = 0; v < g.n_rows; ++v) {
        if (rp[v] == rp[v + 1]) continue;
        for (int64_t h = 0; h < H; ++h) {
          double sum = 0;
          for (int64_t j = rp[v]; j < rp[v + 1]; ++j) sum += a[j * H + h];
          ASSERT_NEAR(sum, 1.0, 1e-5);
        }
      }
      Tensor dy = random_tensor({g.nnz(), H}, seed_for(++salt));
      Tensor gref, ggot = nan_tensor({g.nnz(), H});
      edge_softmax_backward(g, ref, dy, gref, with("cpu_ref"));
      edge_softmax_backward(g, ref, dy, ggot, with("cpu"));
      EXPECT_LT(rel_error(ggot, gref), kTol);
    }
}

TEST(EdgeSoftmax, LargeScoresAreStable) {
  const Graph g = random_graph(GraphKind::star, 200, seed_for(3), false);
  Tensor s = random_tensor({g.nnz()}, seed_for(4), 80.f, 120.f);  // exp would overflow unshifted
  Tensor out;
  edge_softmax(g, s, out, with("cpu"));
  ASSERT_EQ(out.shape(), s.shape());
  for (float x : out.to_vector<float>()) ASSERT_TRUE(std::isfinite(x));
}

// Finite differences of L = sum(out * w) for a random w, against edge_softmax_backward.
TEST(EdgeSoftmax, FiniteDifferenceGradient) {
  const Graph g = random_graph(GraphKind::uniform, 12, seed_for(21), false);
  const int64_t H = 2;
  Tensor s = random_tensor({g.nnz(), H}, seed_for(22), -2.f, 2.f);
  const Tensor w = random_tensor({g.nnz(), H}, seed_for(23));
  auto loss = [&](const Tensor& scores) {
    Tensor out;
    edge_softmax(g, scores, out, with("cpu_ref"));
    double l = 0;
    for (int64_t i = 0; i < out.numel(); ++i) l += double(out.data<float>()[i]) * w.data<float>()[i];
    return l;
  };
  Tensor out, grad;
  edge_softmax(g, s, out, with("cpu_ref"));
  edge_softmax_backward(g, out, w, grad, with("cpu_ref"));
  const float eps = 1e-2f;
  for (int64_t i = 0; i < s.numel(); ++i) {
    const float x = s.data<float>()[i];
    s.data<float>()[i] = x + eps;
    const double lp = loss(s);
    s.data<float>()[i] = x - eps;
    const double lm = loss(s);
    s.data<float>()[i] = x;
    EXPECT_NEAR((lp - lm) / (2 * eps), grad.data<float>()[i], 2e-4) << "score " << i;
  }
}

TEST(GatAggregate, CpuAndUnfusedMatchReference) {
  uint64_t salt = 100;
  for (GraphKind k : all_graph_kinds())
    for (DType idx : {DType::i32, DType::i64})
      for (auto [H, F] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 33}, {2, 3}, {4, 8}, {3, 16}})
        for (float drop : {0.f, 0.3f}) {
          salt += 10;
          GatCase c = make_case(k, 300, H, F, drop, salt, idx);
          std::ostringstream what;
          what << "graph=" << kind_name(k) << " idx=" << dtype_name(idx) << " H=" << H
               << " F=" << F << " dropout=" << drop << " seed=" << seed_for(salt);
          SCOPED_TRACE(what.str());
          Tensor out_ref, attn_ref;
          gat_aggregate(c.g, c.feat, c.el, c.er, c.prm, out_ref, attn_ref, with("cpu_ref"));
          for (const char* s : {"cpu", "unfused"}) {
            SCOPED_TRACE(s);
            Tensor out = nan_tensor({c.g.n_rows, H * F}), attn = nan_tensor({c.g.nnz(), H});
            gat_aggregate(c.g, c.feat, c.el, c.er, c.prm, out, attn, with(s));
            EXPECT_LT(rel_error(out, out_ref), kTol);
            EXPECT_LT(rel_error(attn, attn_ref), kTol);
          }
          Tensor gf_ref, gel_ref, ger_ref;
          gat_aggregate_backward(c.g, c.feat, c.el, c.er, attn_ref, c.grad_out, c.prm, gf_ref,
                                 gel_ref, ger_ref, with("cpu_ref"));
          Tensor gf = nan_tensor({c.g.n_cols, H * F}), gel = nan_tensor({c.g.n_cols, H}),
                 ger = nan_tensor({c.g.n_rows, H});
          gat_aggregate_backward(c.g, c.feat, c.el, c.er, attn_ref, c.grad_out, c.prm, gf, gel,
                                 ger, with("cpu"));
          EXPECT_LT(rel_error(gf, gf_ref), kTol);
          EXPECT_LT(rel_error(gel, gel_ref), kTol);
          EXPECT_LT(rel_error(ger, ger_ref), kTol);
        }
}

// A transpose handed in (provide_attention_transpose, as the Python package does with the one it
// builds on the GPU) is what the backward reads: the true one gives the same gradients as the
// backward's own, one with the same shape but other edges gives other gradients, and one of
// the wrong shape is refused; a cache that holds one already keeps it.
TEST(GatAggregate, ProvidedTransposeIsTheOneTheBackwardReads) {
  GatCase c = make_case(GraphKind::rmat, 200, 2, 5, 0.f, 4000);
  Tensor attn, out;
  gat_aggregate(c.g, c.feat, c.el, c.er, c.prm, out, attn, with("cpu"));
  auto backward = [&](const Graph& g) {
    Tensor gf, gel, ger;
    gat_aggregate_backward(g, c.feat, c.el, c.er, attn, c.grad_out, c.prm, gf, gel, ger,
                           with("cpu"));
    return gf;
  };
  const Tensor want = backward(c.g);  // its own transpose, now cached with c.g's structure
  Graph fresh = c.g;
  fresh.cache = std::make_shared<GraphCache>();
  Transposed t = transpose(fresh);
  provide_attention_transpose(fresh, t.graph, t.perm);
  EXPECT_EQ(rel_error(backward(fresh), want), 0.0);

  Graph other = c.g;  // same shape, the transpose's edges in another order: other gradients
  other.cache = std::make_shared<GraphCache>();
  Tensor rev = Tensor::empty({c.g.nnz()}, DType::i64);
  for (int64_t e = 0; e < c.g.nnz(); ++e)
    rev.data<int64_t>()[e] = t.perm.data<int64_t>()[c.g.nnz() - 1 - e];
  provide_attention_transpose(other, t.graph, rev);
  EXPECT_GT(rel_error(backward(other), want), 1e-3);
  provide_attention_transpose(other, t.graph, t.perm);  // the cache keeps the first
  EXPECT_GT(rel_error(backward(other), want), 1e-3);

  Graph bad = c.g;
  bad.cache = std::make_shared<GraphCache>();
  EXPECT_THROW(provide_attention_transpose(bad, t.graph, Tensor::empty({3}, DType::i64)),
               InvalidArgument);
  EXPECT_THROW(provide_attention_transpose(bad, c.g.n_rows == c.g.n_cols ? transpose(
                   random_graph(GraphKind::uniform, 7, 1, false)).graph : c.g, t.perm),
               InvalidArgument);
}

// L = sum(out * grad_out); its gradient w.r.t. feat, el and er by central differences of the
// oracle's forward, against the oracle's backward (with and without dropout: the mask is a
// function of (seed, edge, head) and does not move with the inputs).
TEST(GatAggregate, FiniteDifferenceGradient) {
  for (float drop : {0.f, 0.4f})
    for (GraphKind k : {GraphKind::uniform, GraphKind::star, GraphKind::empty_rows}) {
      GatCase c = make_case(k, 10, 2, 3, drop, 700 + static_cast<uint64_t>(k));
      SCOPED_TRACE(std::string("graph=") + kind_name(k) + " dropout=" + std::to_string(drop));
      auto loss = [&] {
        Tensor out, attn;
        gat_aggregate(c.g, c.feat, c.el, c.er, c.prm, out, attn, with("cpu_ref"));
        double l = 0;
        for (int64_t i = 0; i < out.numel(); ++i)
          l += double(out.data<float>()[i]) * c.grad_out.data<float>()[i];
        return l;
      };
      Tensor out, attn, gf, gel, ger;
      gat_aggregate(c.g, c.feat, c.el, c.er, c.prm, out, attn, with("cpu_ref"));
      gat_aggregate_backward(c.g, c.feat, c.el, c.er, attn, c.grad_out, c.prm, gf, gel, ger,
                             with("cpu_ref"));
      const float eps = 1e-2f;
      // LeakyReLU has a kink at 0: skip el / er entries with an edge whose logit z lies within a
      // few eps of it (a central difference across the kink measures neither slope).
      const int64_t H = c.prm.heads;
      std::vector<char> near_el(static_cast<size_t>(c.el.numel()), 0),
          near_er(static_cast<size_t>(c.er.numel()), 0);
      {
        const auto row = c.g.row.astype(DType::i64).to_vector<int64_t>();
        const auto col = c.g.col.astype(DType::i64).to_vector<int64_t>();
        for (size_t j = 0; j < row.size(); ++j)
          for (int64_t h = 0; h < H; ++h) {
            const float z = c.el.data<float>()[col[j] * H + h] + c.er.data<float>()[row[j] * H + h];
            if (std::fabs(z) < 4 * eps) near_el[col[j] * H + h] = near_er[row[j] * H + h] = 1;
          }
      }
      auto check = [&](Tensor& x, const Tensor& grad, const char* name) {
        const std::vector<char>* skip = x.raw() == c.el.raw() ? &near_el
                                        : x.raw() == c.er.raw() ? &near_er : nullptr;
        for (int64_t i = 0; i < x.numel(); ++i) {
          if (skip && (*skip)[static_cast<size_t>(i)]) continue;
          float* p = x.data<float>() + i;
          const float x0 = *p;
          *p = x0 + eps;
          const double lp = loss();
          *p = x0 - eps;
          const double lm = loss();
          *p = x0;
          const double fd = (lp - lm) / (2 * eps);
          EXPECT_NEAR(fd, grad.data<float>()[i], 5e-3 * (1 + std::fabs(fd))) << name << "[" << i << "]";
        }
      };
      check(c.feat, gf, "feat");
      check(c.el, gel, "el");
      check(c.er, ger, "er");
    }
}

TEST(GatAggregate, DropoutIsDeterministicAndUnbiased) {
  GatCase c = make_case(GraphKind::uniform, 500, 2, 4, 0.5f, 900);
  Tensor o1, a1, o2, a2, o3, a3;
  gat_aggregate(c.g, c.feat, c.el, c.er, c.prm, o1, a1, with("cpu"));
  gat_aggregate(c.g, c.feat, c.el, c.er, c.prm, o2, a2, with("cpu"));
  EXPECT_EQ(o1.to_vector<float>(), o2.to_vector<float>());
  EXPECT_EQ(a1.to_vector<float>(), a2.to_vector<float>());
  GatParams other = c.prm;
  other.dropout_seed += 1;
  gat_aggregate(c.g, c.feat, c.el, c.er, other, o3, a3, with("cpu"));
  EXPECT_NE(o1.to_vector<float>(), o3.to_vector<float>());
  EXPECT_EQ(a1.to_vector<float>(), a3.to_vector<float>());  // attn is saved before dropout
  // Roughly half of the edge-heads are dropped at p = 0.5: count via a feat of ones, F = 1.
  GatCase d = make_case(GraphKind::uniform, 2000, 1, 1, 0.5f, 950);
  d.feat.fill_(1.0);
  Tensor od, ad;
  gat_aggregate(d.g, d.feat, d.el, d.er, d.prm, od, ad, with("cpu_ref"));
  double mean = 0;
  for (float x : od.to_vector<float>()) mean += x;
  mean /= double(od.numel());
  EXPECT_NEAR(mean, 1.0, 0.05);  // E[mask / (1 - p)] = 1 and each row's weights sum to 1
}

// spgnn bench gat --attn-dropout checks sampled rows: their subgraph's edge k is the graph's edge
// ids[k], and gat_reference_with_edge_ids draws that edge's mask, so the sample's results are
// the whole graph's rows exactly (forward, weights, grad_er); without the ids they are not.
TEST(GatAggregate, ReferenceWithEdgeIdsReproducesTheWholeGraphsMasksOnARowSample) {
  for (int64_t H : {1, 3}) {
    SCOPED_TRACE("H=" + std::to_string(H));
    GatCase c = make_case(GraphKind::rmat, 600, H, 5, 0.5f, 980 + H, DType::i64);
    Tensor out, attn, gf, gel, ger;
    gat_aggregate(c.g, c.feat, c.el, c.er, c.prm, out, attn, with("cpu_ref"));
    gat_aggregate_backward(c.g, c.feat, c.el, c.er, attn, c.grad_out, c.prm, gf, gel, ger,
                           with("cpu_ref"));
    const std::vector<int64_t> rp = c.g.rowptr.to_vector<int64_t>();
    const std::vector<int64_t> col = c.g.col.to_vector<int64_t>();
    std::vector<int64_t> rows, r, cc, ids;
    for (int64_t v = 1; v < c.g.n_rows; v += 3) rows.push_back(v);
    for (size_t k = 0; k < rows.size(); ++k)
      for (int64_t e = rp[size_t(rows[k])]; e < rp[size_t(rows[k]) + 1]; ++e) {
        r.push_back(int64_t(k));
        cc.push_back(col[size_t(e)]);
        ids.push_back(e);
      }
    BuildOptions keep;
    keep.duplicates = DuplicatePolicy::keep;
    keep.index_width = IndexWidth::i64;
    const Graph s = graph_from_edges(int64_t(rows.size()), c.g.n_cols, r, cc, {}, keep);
    ASSERT_EQ(s.nnz(), int64_t(ids.size()));
    auto pick = [](const Tensor& t, const std::vector<int64_t>& which) {
      const int64_t w = t.numel() / t.dim(0);
      const std::vector<float> v = t.to_vector<float>();
      std::vector<float> o;
      for (int64_t i : which) o.insert(o.end(), v.begin() + i * w, v.begin() + (i + 1) * w);
      return Tensor::from_vector(o, {int64_t(which.size()), w});
    };
    const Tensor er_s = pick(c.er, rows), gout_s = pick(c.grad_out, rows);
    Tensor so, sa, sgf, sgel, sger;
    detail::gat_reference_with_edge_ids(s, Tensor::from_vector(ids), c.feat, c.el, er_s, gout_s,
                                        c.prm, so, sa, sgf, sgel, sger);
    EXPECT_LT(rel_error(so, pick(out, rows)), 1e-7);
    EXPECT_LT(rel_error(sa, pick(attn, ids)), 1e-7);
    EXPECT_LT(rel_error(sger, pick(ger, rows)), 1e-7);
    // The sample's own edge indices draw other masks.
    Tensor po, pa;
    gat_aggregate(s, c.feat, c.el, er_s, c.prm, po, pa, with("cpu_ref"));
    EXPECT_GT(rel_error(po, pick(out, rows)), 1e-3);
    // One id per edge, int64.
    Tensor x1, x2, x3, x4, x5;
    EXPECT_THROW(detail::gat_reference_with_edge_ids(
                     s, Tensor::from_vector(std::vector<int64_t>(ids.size() - 1, 0)), c.feat,
                     c.el, er_s, gout_s, c.prm, x1, x2, x3, x4, x5),
                 InvalidArgument);
  }
}

// The fused float32 backward's default variant (no bwd_atomic in the schedule): the atomic
// scatter only on graphs past 2^20 edges whose degree x row width stays within 512 and whose
// heads are a multiple of 4 wide, the cases where it measured faster (attention_kernels.hpp).
TEST(GatAggregate, BackwardDefaultVariantRule) {
  using detail::gat_bwd_prefers_atomic;
  const int64_t big = int64_t{1} << 21;  // 2^21 edges
  // kron21-like (average degree 16): up to 32 columns atomic; wider gathers
  EXPECT_TRUE(gat_bwd_prefers_atomic(big, big / 16, 1, 8));
  EXPECT_TRUE(gat_bwd_prefers_atomic(big, big / 16, 1, 16));
  EXPECT_TRUE(gat_bwd_prefers_atomic(big, big / 16, 1, 24));
  EXPECT_TRUE(gat_bwd_prefers_atomic(big, big / 16, 1, 32));
  EXPECT_TRUE(gat_bwd_prefers_atomic(big, big / 16, 2, 16));
  EXPECT_FALSE(gat_bwd_prefers_atomic(big, big / 16, 2, 24));
  EXPECT_FALSE(gat_bwd_prefers_atomic(big, big / 16, 1, 64));
  EXPECT_FALSE(gat_bwd_prefers_atomic(big, big / 16, 4, 16));
  EXPECT_FALSE(gat_bwd_prefers_atomic(big, big / 16, 8, 8));
  // average degree 8: up to 64 columns; 64: only 8
  EXPECT_TRUE(gat_bwd_prefers_atomic(big, big / 8, 1, 64));
  EXPECT_TRUE(gat_bwd_prefers_atomic(big, big / 8, 8, 8));
  EXPECT_FALSE(gat_bwd_prefers_atomic(big, big / 8, 2, 64));
  EXPECT_TRUE(gat_bwd_prefers_atomic(big, big / 64, 1, 8));
  EXPECT_FALSE(gat_bwd_prefers_atomic(big, big / 64, 1, 16));
  // scalar atomics (F % 4 != 0) and small graphs never
  EXPECT_FALSE(gat_bwd_prefers_atomic(big, big / 4, 1, 7));
  EXPECT_FALSE(gat_bwd_prefers_atomic(big, big / 4, 1, 1));
  EXPECT_FALSE(gat_bwd_prefers_atomic(big, big / 4, 1, 6));
  EXPECT_FALSE(gat_bwd_prefers_atomic((int64_t{1} << 20) - 1, 1 << 17, 1, 16));
  EXPECT_TRUE(gat_bwd_prefers_atomic(int64_t{1} << 20, 1 << 17, 1, 16));
  // degenerate shapes do not divide by zero or pick atomics
  EXPECT_FALSE(gat_bwd_prefers_atomic(big, 0, 1, 16));
  EXPECT_FALSE(gat_bwd_prefers_atomic(big, big, 0, 16));
  EXPECT_FALSE(gat_bwd_prefers_atomic(big, big, 1, 0));
}

TEST(GatAggregate, BadArguments) {
  GatCase c = make_case(GraphKind::uniform, 50, 2, 4, 0.f, 1000);
  Tensor out, attn;
  auto expect_invalid = [&](auto&& fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "no exception, expected one mentioning '" << needle << "'";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  GatParams p = c.prm;
  expect_invalid([&] { GatParams q = p; q.heads = 0; gat_aggregate(c.g, c.feat, c.el, c.er, q, out, attn); }, "heads");
  expect_invalid([&] { GatParams q = p; q.heads = 3; gat_aggregate(c.g, c.feat, c.el, c.er, q, out, attn); }, "feat");
  expect_invalid([&] { GatParams q = p; q.attn_dropout = 1.f; gat_aggregate(c.g, c.feat, c.el, c.er, q, out, attn); }, "attn_dropout");
  expect_invalid([&] { Tensor el3 = Tensor::empty({c.g.n_cols, 3}, DType::f32); gat_aggregate(c.g, c.feat, el3, c.er, p, out, attn); }, "el");
  expect_invalid([&] { gat_aggregate(c.g, c.feat, Tensor(), c.er, p, out, attn); }, "el");
  expect_invalid([&] { gat_aggregate(c.g, c.feat.astype(DType::f64), c.el, c.er, p, out, attn); }, "feat");
  expect_invalid([&] { Tensor bad = Tensor::empty({3, 3}, DType::f32); gat_aggregate(c.g, c.feat, c.el, c.er, p, bad, attn); }, "out");
  expect_invalid([&] { gat_aggregate(c.g, c.feat, c.el, c.er, p, out, attn, with("nope")); }, "gat_fused");
  expect_invalid([&] { OpOptions o = with("gat_fused"); o.schedule.params["warps"] = 3; gat_aggregate(c.g, c.feat, c.el, c.er, p, out, attn, o); }, "warps");
  expect_invalid([&] { OpOptions o = with("cpu"); o.schedule.params["warps"] = 4; gat_aggregate(c.g, c.feat, c.el, c.er, p, out, attn, o); }, "warps");
  Tensor gf, gel, ger;
  expect_invalid([&] { gat_aggregate_backward(c.g, c.feat, c.el, c.er, Tensor(), c.grad_out, p, gf, gel, ger); }, "attn");
  Tensor o2, a2;
  gat_aggregate(c.g, c.feat, c.el, c.er, p, o2, a2);
  expect_invalid([&] { gat_aggregate_backward(c.g, c.feat, c.el, c.er, a2, c.el, p, gf, gel, ger); }, "grad_out");
  expect_invalid([&] { GatParams q = p; q.forward_out = &c.el; gat_aggregate_backward(c.g, c.feat, c.el, c.er, a2, c.grad_out, q, gf, gel, ger); }, "params.forward_out");
  expect_invalid([&] { GatParams q = p; const Tensor o64 = o2.astype(DType::f64); q.forward_out = &o64; gat_aggregate_backward(c.g, c.feat, c.el, c.er, a2, c.grad_out, q, gf, gel, ger); }, "params.forward_out");
  {  // the CPU strategies compute each row's t themselves: the same gradients with it
    Tensor gf0, gel0, ger0, gf1, gel1, ger1;
    gat_aggregate_backward(c.g, c.feat, c.el, c.er, a2, c.grad_out, p, gf0, gel0, ger0);
    GatParams q = p;
    q.forward_out = &o2;
    gat_aggregate_backward(c.g, c.feat, c.el, c.er, a2, c.grad_out, q, gf1, gel1, ger1);
    EXPECT_EQ(rel_error(gf1, gf0), 0.0);
    EXPECT_EQ(rel_error(gel1, gel0), 0.0);
    EXPECT_EQ(rel_error(ger1, ger0), 0.0);
  }
  {  // half feat: a float32 out takes the sums unrounded; only the fused GPU kernels write the
     // softmax state (here it is left undefined); forward_out may be float32, checked either way
    const Tensor fh = c.feat.astype(DType::bf16), gh = c.grad_out.astype(DType::bf16);
    Tensor o32 = Tensor::empty({c.g.n_rows, c.feat.dim(1)}, DType::f32), ah;
    Tensor st = Tensor::empty({c.g.n_rows, p.heads, 2}, DType::f32);
    GatParams q = p;
    q.attn_dropout = 0.3f;
    q.softmax_state = &st;
    gat_aggregate(c.g, fh, c.el, c.er, q, o32, ah);
    EXPECT_EQ(o32.dtype(), DType::f32);
    EXPECT_EQ(ah.dtype(), DType::bf16);
    EXPECT_FALSE(st.defined());
    Tensor oref, aref;
    q.softmax_state = nullptr;
    gat_aggregate(c.g, fh.astype(DType::f32), c.el, c.er, q, oref, aref);
    EXPECT_EQ(rel_error(o32, oref), 0.0);
    Tensor gf0, gel0, ger0, gf1, gel1, ger1;
    gat_aggregate_backward(c.g, fh, c.el, c.er, ah, gh, q, gf0, gel0, ger0);
    GatParams b = q;
    b.forward_out = &o32;
    gat_aggregate_backward(c.g, fh, c.el, c.er, ah, gh, b, gf1, gel1, ger1);
    EXPECT_EQ(rel_error(gf1, gf0), 0.0);
    EXPECT_EQ(rel_error(ger1, ger0), 0.0);
    const Tensor o64 = oref.astype(DType::f64);
    b.forward_out = &o64;
    expect_invalid([&] { gat_aggregate_backward(c.g, fh, c.el, c.er, ah, gh, b, gf1, gel1, ger1); }, "params.forward_out");
    Tensor bad = Tensor::empty({c.g.n_rows, p.heads + 1, 2}, DType::f32);
    b.forward_out = &o32;
    b.softmax_state = &bad;
    expect_invalid([&] { gat_aggregate_backward(c.g, fh, c.el, c.er, ah, gh, b, gf1, gel1, ger1); }, "params.softmax_state");
  }
  expect_invalid([&] { Tensor s = Tensor::empty({c.g.nnz() + 1}, DType::f32); Tensor o; edge_softmax(c.g, s, o); }, "scores");
  expect_invalid([&] { Tensor s = Tensor::empty({c.g.nnz(), 2}, DType::f32); Tensor o, dy = Tensor::empty({c.g.nnz(), 3}, DType::f32), gs; edge_softmax_backward(c.g, s, dy, gs); }, "grad_out");
  expect_invalid([&] { Tensor s = Tensor::empty({c.g.nnz()}, DType::f32); Tensor o; edge_softmax(c.g, s, o, with("gat_fused")); }, "cuda");
  // GPU-only strategies on CPU data, and the forward-only composition in backward.
  EXPECT_THROW(gat_aggregate(c.g, c.feat, c.el, c.er, p, out, attn, with("gat_fused")), Unsupported);
  EXPECT_THROW(gat_aggregate_backward(c.g, c.feat, c.el, c.er, a2, c.grad_out, p, gf, gel, ger, with("unfused")), Unsupported);
}

}  // namespace
}  // namespace spgnn::test
