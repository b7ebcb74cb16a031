// The training engine on the GPU against the same engine on the CPU: every dense building block
// (cuBLAS GEMM, bias, activations, dropout masks, fused activation + dropout, column sums, dots,
// log-softmax + NLL, accuracy, Adam, attention dots), every layer's forward and backward (GCN,
// SAGE, GIN with fixed and trainable eps, GAT, MaxK variants) on graphs of every shape, whole
// models (MaxK between GAT layers too), and a short training run with the phase profile.
// Outputs are poisoned with NaN before each GPU run.
// SPGNN_TEST_QUICK=1 (compute-sanitizer runs) shrinks graphs and the case list.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "spgnn/nn/functional.hpp"
#include "spgnn/nn/layers.hpp"
#include "spgnn/nn/model.hpp"
#include "test_util.hpp"

namespace spgnn::test {
namespace {

using nn::ConvKind;

[[maybe_unused]] bool quick() {
  const char* q = std::getenv("SPGNN_TEST_QUICK");
  return q && *q && std::string(q) != "0";
}

const Device kGpu = Device::cuda();

// GIN's eps gradient is one sum of n * F products of both signs, so cancellation leaves float32
// fewer correct digits than the tensors have: it is compared with an absolute floor. So are
// GAT's attention vectors': each d_z = a_e (d_a_e - t) cancels (exactly 0 where a row has one
// edge, as in a graph of self-loops only), and the GPU's one walk by source sums feat·q and t
// in another order than the CPU's per-edge terms. Their error is measured against `scale`, the
// layer's weight gradient (a sum of the same products of x and the upstream gradient).
void expect_grad_close(const nn::Parameter& got, const nn::Parameter& want, double rel,
                       double scale = 0) {
  if (got.name == "att_src" || got.name == "att_dst") {
    const double err = rel_error(got.grad, want.grad) * norm_of(want.grad) /
                       std::max({norm_of(want.grad), scale, 1e-30});
    EXPECT_LT(err, rel) << "grad " << got.name << " (against the weight gradient's norm)";
    return;
  }
  if (got.name != "eps") {
    EXPECT_LT(rel_error(got.grad, want.grad), rel) << "grad " << got.name;
    return;
  }
  const double a = got.grad.to(Device::cpu()).astype(DType::f64).data<double>()[0];
  const double b = want.grad.to(Device::cpu()).astype(DType::f64).data<double>()[0];
  EXPECT_NEAR(a, b, 1e-4 * (1 + std::fabs(b))) << "grad eps";
}

Tensor poisoned_gpu(std::vector<int64_t> shape) {
  return Tensor::full(std::move(shape), DType::f32, NAN, kGpu);
}

TEST(NnGpuFunctional, GemmAllTransposesMatchesCpu) {
  SPGNN_REQUIRE_GPU();
  for (int64_t m : {1, 33, 300}) {
    for (int64_t k : {1, 7, 129}) {
      for (int64_t n : {1, 5, 64}) {
        for (int t = 0; t < 4; ++t) {
          const bool ta = t & 1, tb = t & 2;
          Tensor a = random_tensor(ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}, seed_for(1 + t));
          Tensor b = random_tensor(tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, seed_for(5 + t));
          Tensor ref = nn::matmul(a.astype(DType::f64), b.astype(DType::f64), ta, tb);
          Tensor c = poisoned_gpu({m, n});
          nn::gemm(a.to(kGpu), ta, b.to(kGpu), tb, c, 0);
          // Error relative to sum_p |a_ip b_pj|, not to the result: one dot product with
          // cancellation (m = n = 1) has a tiny result but float32 rounding proportional to its
          // terms (1x7x1 drew 1.02e-5 relative to the result on one seed).
          const Tensor scale =
              nn::matmul(abs_of(a).astype(DType::f64), abs_of(b).astype(DType::f64), ta, tb);
          EXPECT_LT(rel_error(c, ref) * norm_of(ref) / norm_of(scale), 2e-6)
              << m << "x" << k << "x" << n << " t=" << t;
        }
      }
    }
  }
}

TEST(NnGpuFunctional, ElementwiseAndRowwiseKernelsMatchCpu) {
  SPGNN_REQUIRE_GPU();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {37, 5}, {1000, 33}, {4099, 7}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    Tensor x = random_tensor({rows, cols}, seed_for(10)), b = random_tensor({cols}, seed_for(11));
    Tensor hx = x.clone(), dx = x.to(kGpu);
    nn::add_bias_(hx, b);
    nn::add_bias_(dx, b.to(kGpu));
    EXPECT_LT(rel_error(dx, hx), 1e-6) << "bias";
    Tensor hs, ds = poisoned_gpu({cols});
    nn::column_sum(hx, hs);
    nn::column_sum(dx, ds);
    EXPECT_LT(rel_error(ds, hs), 1e-5) << "column_sum";
    for (auto act : {nn::Activation::relu, nn::Activation::elu}) {
      Tensor ha = hx.clone(), da = dx.clone();
      nn::activation_(ha, act);
      nn::activation_(da, act);
      EXPECT_LT(rel_error(da, ha), 1e-6) << "activation";
      Tensor hg = random_tensor({rows, cols}, seed_for(12)), dg = hg.to(kGpu);
      nn::activation_backward_(hg, ha, act);
      nn::activation_backward_(dg, da, act);
      EXPECT_LT(rel_error(dg, hg), 1e-6) << "activation backward";
    }
    Tensor hd = nn::dropout(hx, 0.4, 99), dd = nn::dropout(dx, 0.4, 99);
    // The kept set must be identical; kept values may differ in the last bit (the 1/(1-p) scale
    // is rounded differently by the host and device compilers).
    auto same_mask = [](const Tensor& got, const Tensor& want) {
      const auto g = got.to(Device::cpu()).to_vector<float>();
      const auto w = want.to(Device::cpu()).to_vector<float>();
      for (size_t i = 0; i < g.size(); ++i)
        if ((g[i] == 0.f) != (w[i] == 0.f)) return false;
      return true;
    };
    EXPECT_TRUE(same_mask(dd, hd)) << "dropout masks must be identical on host and device";
    EXPECT_LT(rel_error(dd, hd), 1e-6);
    Tensor hgd = hx.clone(), dgd = dx.clone();
    nn::dropout_backward_(hgd, 0.4, 99);
    nn::dropout_backward_(dgd, 0.4, 99);
    EXPECT_TRUE(same_mask(dgd, hgd));
    EXPECT_LT(rel_error(dgd, hgd), 1e-6);
    Tensor hy = hx.clone(), dy = dx.clone();
    nn::axpy_(hy, 0.5, hx);
    nn::axpy_(dy, 0.5, dx);
    EXPECT_LT(rel_error(dy, hy), 1e-6) << "axpy";
  }
}

// The two-pass column sums (slabs of rows) on tall operands, the fused activation + dropout
// passes and the device-scalar helpers against the host.
TEST(NnGpuFunctional, ReductionsAndFusedPassesMatchCpu) {
  SPGNN_REQUIRE_GPU();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{100003, 41}, {20011, 256}, {3, 300}, {0, 5}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    Tensor x = random_tensor({rows, cols}, seed_for(60));
    Tensor hs, ds = poisoned_gpu({cols});
    nn::column_sum(x, hs);
    nn::column_sum(x.to(kGpu), ds);
    EXPECT_LT(rel_error(ds, hs), 1e-5) << "column_sum";
    Tensor hb = random_tensor({cols}, seed_for(61)), db = hb.to(kGpu);
    nn::column_sum(x, hb, 0.5);
    nn::column_sum(x.to(kGpu), db, 0.5);
    EXPECT_LT(rel_error(db, hb), 1e-5) << "column_sum, beta = 0.5";
    if (rows == 0) continue;
    for (auto act : {nn::Activation::none, nn::Activation::relu, nn::Activation::elu}) {
      for (double p : {0.0, 0.5}) {
        Tensor hy = x.clone(), dy = x.to(kGpu);
        nn::activation_dropout_(hy, act, p, 5);
        nn::activation_dropout_(dy, act, p, 5);
        EXPECT_LT(rel_error(dy, hy), 1e-6) << "activation_dropout_ act " << int(act) << " p " << p;
        Tensor hg = random_tensor({rows, cols}, seed_for(62)), dg = hg.to(kGpu);
        nn::activation_dropout_backward_(hg, hy, act, p, 5);
        nn::activation_dropout_backward_(dg, dy, act, p, 5);
        EXPECT_LT(rel_error(dg, hg), 1e-5) << "activation_dropout_backward_ act " << int(act) << " p " << p;
      }
    }
    Tensor y = random_tensor({rows, cols}, seed_for(63));
    Tensor hd, dd = poisoned_gpu({1});
    nn::dot(x, y, hd);
    nn::dot(x.to(kGpu), y.to(kGpu), dd);
    EXPECT_LT(rel_error(dd, hd), 1e-5) << "dot";
    Tensor wide = random_tensor({rows, cols + 3}, seed_for(64)), dwide = wide.to(kGpu);
    nn::copy_columns(x, wide, cols);
    nn::copy_columns(x.to(kGpu), dwide, cols);
    EXPECT_EQ(rel_error(dwide, wide), 0.0) << "copy_columns";
    Tensor s = Tensor::full({1}, DType::f32, -0.375);
    Tensor ha = y.clone(), da = y.to(kGpu);
    nn::add_scaled_(ha, x, s, 1.0);
    nn::add_scaled_(da, x.to(kGpu), s.to(kGpu), 1.0);
    EXPECT_LT(rel_error(da, ha), 1e-6) << "add_scaled_";
  }
}

TEST(NnGpuFunctional, LossAccuracyAdamHeadDotMatchCpu) {
  SPGNN_REQUIRE_GPU();
  const int64_t n = 2000, c = 7;
  Tensor logits = random_tensor({n, c}, seed_for(20), -3, 3);
  std::vector<int64_t> yv, iv;
  for (int64_t i = 0; i < n; ++i) {
    yv.push_back(i % 11 == 0 ? -1 : (i * 7) % c);
    if (i % 3 != 0) iv.push_back(i);
  }
  Tensor y = Tensor::from_vector(yv), idx = Tensor::from_vector(iv);
  Tensor hg, dg = poisoned_gpu({n, c});
  const double hl = nn::log_softmax_nll(logits, y, idx, &hg);
  const double dl = nn::log_softmax_nll(logits.to(kGpu), y.to(kGpu), idx.to(kGpu), &dg);
  EXPECT_NEAR(dl, hl, 1e-5 * std::fabs(hl));
  EXPECT_LT(rel_error(dg, hg), 1e-5);
  EXPECT_DOUBLE_EQ(nn::accuracy(logits.to(kGpu), y.to(kGpu), idx.to(kGpu)), nn::accuracy(logits, y, idx));

  Tensor p = random_tensor({1031}, seed_for(21)), g = random_tensor({1031}, seed_for(22));
  Tensor hp = p.clone(), dp = p.to(kGpu), hm, hv, dm, dv;
  nn::AdamParams a{0.01, 0.9, 0.999, 1e-8, 5e-4};
  for (int64_t step = 1; step <= 3; ++step) {
    nn::adam_step(hp, g, hm, hv, step, a);
    nn::adam_step(dp, g.to(kGpu), dm, dv, step, a);
  }
  EXPECT_LT(rel_error(dp, hp), 1e-6) << "adam";

  const int64_t heads = 4, f = 9;
  Tensor x = random_tensor({n, heads * f}, seed_for(23)), av = random_tensor({heads * f}, seed_for(24));
  EXPECT_LT(rel_error(nn::head_dot(x.to(kGpu), av.to(kGpu), heads), nn::head_dot(x, av, heads)), 1e-5);
  Tensor go = random_tensor({n, heads}, seed_for(25));
  Tensor hgx = random_tensor({n, heads * f}, seed_for(26)), dgx = hgx.to(kGpu), hga, dga = poisoned_gpu({heads * f});
  nn::head_dot_backward(x, av, heads, go, hgx, hga);
  nn::head_dot_backward(x.to(kGpu), av.to(kGpu), heads, go.to(kGpu), dgx, dga);
  EXPECT_LT(rel_error(dgx, hgx), 1e-5);
  EXPECT_LT(rel_error(dga, hga), 1e-5);
}

struct LayerCase {
  ConvKind kind;
  int64_t maxk;
  int64_t heads;
  bool train_eps = false;
  std::string name() const {
    return std::string(nn::conv_name(kind)) + (maxk ? "_maxk" : "") + (heads > 1 ? "_heads" : "") +
           (train_eps ? "_train_eps" : "");
  }
};

class NnGpuLayer : public ::testing::TestWithParam<LayerCase> {};

// The GAT logit of an edge, el[u] + er[v], nearest to LeakyReLU's kink, in float64 from the
// layer's weights (W [in, H*out], attention vectors [H, out]) over the graph the layer attends
// on. Within float32 rounding of 0, the GPU (cuBLAS's summation order) and the CPU may land on
// different sides of the kink and take different slopes in the backward: with
// SPGNN_TEST_SEED=1454637078 one logit was 5e-8 from 0 and grad x differed by 0.4% (HEAD's
// kernels and these alike; the CPU layer matched float64 to 2e-7), where other seeds' nearest
// logits sit 1e-6 and more away. Such inputs test rounding, not the kernels, and are redrawn.
double nearest_gat_logit(const Graph& g, const Tensor& x, nn::Layer& layer, int64_t H, int64_t F) {
  const auto ps = layer.parameters();
  const float* w = ps[0]->value.data<float>();
  const float* as = ps[1]->value.data<float>();
  const float* ad = ps[2]->value.data<float>();
  const int64_t n = x.dim(0), in = x.dim(1), W = H * F;
  std::vector<double> el(size_t(n * H), 0.0), er(size_t(n * H), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < W; ++j) {
      double f = 0;
      for (int64_t k = 0; k < in; ++k) f += double(x.data<float>()[i * in + k]) * w[k * W + j];
      el[size_t(i * H + j / F)] += f * as[j];
      er[size_t(i * H + j / F)] += f * ad[j];
    }
  const Tensor row = g.row.astype(DType::i64), col = g.col.astype(DType::i64);
  double best = INFINITY;
  for (int64_t e = 0; e < g.nnz(); ++e)
    for (int64_t h = 0; h < H; ++h)
      best = std::min(best, std::fabs(el[size_t(col.data<int64_t>()[e] * H + h)] +
                                      er[size_t(row.data<int64_t>()[e] * H + h)]));
  return best;
}

// The smallest gap, over x W's rows, between the k-th and the (k+1)-th largest value, in float64
// from the layer's first weight (the one MaxK's pre-activation x W uses, [in, out]). Within
// float32 rounding of a tie, cuBLAS and the CPU GEMM may keep different columns, and every
// result downstream differs by a whole value (1-2% relative error). Such inputs test rounding,
// not the kernels, and are redrawn, as are GAT's logits at the kink.
double nearest_maxk_tie(const Tensor& x, nn::Layer& layer, int64_t k) {
  const Tensor& wt = layer.parameters()[0]->value;
  const float* w = wt.data<float>();
  const int64_t n = x.dim(0), in = x.dim(1), out = wt.dim(1);
  double best = INFINITY;
  std::vector<double> h(static_cast<size_t>(out));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < out; ++j) {
      double f = 0;
      for (int64_t q = 0; q < in; ++q) f += double(x.data<float>()[i * in + q]) * w[q * out + j];
      h[size_t(j)] = f;
    }
    if (k >= out) continue;
    std::nth_element(h.begin(), h.begin() + k, h.end(), std::greater<double>());
    const double kth = *std::min_element(h.begin(), h.begin() + k);  // k-th largest
    best = std::min(best, kth - h[size_t(k)]);                       // (k+1)-th largest
  }
  return best;
}

TEST_P(NnGpuLayer, ForwardAndBackwardMatchCpu) {
  SPGNN_REQUIRE_GPU();
  const LayerCase c = GetParam();
  std::vector<GraphKind> kinds = quick() ? std::vector<GraphKind>{GraphKind::rmat, GraphKind::empty_rows, GraphKind::no_edges}
                                         : all_graph_kinds();
  const int64_t n = quick() ? 200 : 1500;
  for (GraphKind kind : kinds) {
    // in = 16 < out: one GAT head attends over x itself (aggregate-first); in = 13 transforms
    // first (x would need padding to 16)
    for (auto [in, out] : {std::pair<int64_t, int64_t>{13, 33}, {16, 33}, {70, 6}}) {
      SCOPED_TRACE(c.name() + " on " + kind_name(kind) + " in=" + std::to_string(in));
      Graph g = random_graph(kind, n, seed_for(30 + int(kind)), false);
      nn::ConvSpec s;
      s.kind = c.kind;
      s.in = in;
      s.out = out;
      s.heads = c.heads;
      s.maxk = c.maxk;
      s.train_eps = c.train_eps;
      s.gin_eps = 0.1;
      s.seed = 5;
      nn::GraphContext hctx(g, Device::cpu()), dctx(g, kGpu);
      auto hl = nn::make_conv(s, DType::f32, Device::cpu());
      auto dl = nn::make_conv(s, DType::f32, kGpu);
      Tensor x = random_tensor({g.n_rows, in}, seed_for(40));
      auto near_rounding = [&] {
        if (c.kind == ConvKind::gat)
          return nearest_gat_logit(hctx.loops(false), x, *hl, c.heads, out) < 1e-5;
        return c.maxk > 0 && nearest_maxk_tie(x, *hl, c.maxk) < 1e-5;
      };
      for (uint64_t redraw = 1; redraw < 20 && near_rounding(); ++redraw)
        x = random_tensor({g.n_rows, in}, seed_for(40 + 1000 * redraw));
      Tensor r = random_tensor({g.n_rows, hl->out_width()}, seed_for(41));
      // training (no dropout here): a GAT layer's GPU forward then keeps what its backward's one
      // walk by source reads
      Tensor hy = hl->forward(hctx, x, true, 0);
      Tensor dy = dl->forward(dctx, x.to(kGpu), true, 0);
      EXPECT_LT(rel_error(dy, hy), 1e-5) << "forward";
      Tensor hdx = hl->backward(hctx, r, true);
      Tensor ddx = dl->backward(dctx, r.to(kGpu), true);
      EXPECT_LT(rel_error(ddx, hdx), 1e-5) << "grad x";
      auto hp = hl->parameters(), dp = dl->parameters();
      for (size_t i = 0; i < hp.size(); ++i)
        expect_grad_close(*dp[i], *hp[i], 1e-5, norm_of(hp[0]->grad));
    }
  }
}
INSTANTIATE_TEST_SUITE_P(Layers, NnGpuLayer,
                         ::testing::Values(LayerCase{ConvKind::gcn, 0, 1}, LayerCase{ConvKind::sage, 0, 1},
                                           LayerCase{ConvKind::gin, 0, 1}, LayerCase{ConvKind::gat, 0, 1},
                                           LayerCase{ConvKind::gat, 0, 4}, LayerCase{ConvKind::gcn, 4, 1},
                                           LayerCase{ConvKind::sage, 4, 1}, LayerCase{ConvKind::gin, 4, 1},
                                           LayerCase{ConvKind::gin, 0, 1, true},
                                           LayerCase{ConvKind::gin, 4, 1, true}),
                         [](const auto& pinfo) { return pinfo.param.name(); });

// Whole models on the GPU against the same model on the CPU: the fused activation + dropout
// passes between layers, reused buffers over two steps, MaxK between GAT layers, GIN's trainable
// eps (with and without MaxK).
TEST(NnGpuModel, ForwardAndBackwardMatchCpu) {
  SPGNN_REQUIRE_GPU();
  struct Case {
    ConvKind kind;
    int64_t maxk;
    bool train_eps;
  };
  for (const Case& c : {Case{ConvKind::sage, 0, false}, Case{ConvKind::gcn, 0, false},
                        Case{ConvKind::sage, 8, false}, Case{ConvKind::gat, 6, false},
                        Case{ConvKind::gat, 0, false}, Case{ConvKind::gin, 0, true},
                        Case{ConvKind::gin, 8, true}}) {
    SCOPED_TRACE(std::string(nn::conv_name(c.kind)) + " maxk " + std::to_string(c.maxk) +
                 (c.train_eps ? " train_eps" : ""));
    // MaxK picks the k largest of each row, and ReLU's derivative jumps at 0: CPU and GPU round
    // differently, so a near tie at the k-th value, or a pre-activation within rounding of 0,
    // takes a different branch on each, which leaves the forward equal but changes a gradient
    // by a whole term. GIN's pre-activations are sums over hubs (large terms that cancel), so its
    // rounding reaches further from 0: with 2000 rows SPGNN_TEST_SEED=3207226802 flips one in
    // the second step (float32 against float64 on the CPU differs exactly as the GPU did).
    // Fewer rows keep such ties unlikely.
    const int64_t n = quick() || c.maxk > 0 || c.kind == ConvKind::gin ? 300 : 2000;
    Graph g = random_graph(GraphKind::rmat, n, seed_for(70), false);
    nn::ModelConfig mc;
    mc.kind = c.kind;
    mc.in = 37;
    mc.hidden = 24;
    mc.classes = 5;
    mc.layers = 3;
    mc.heads = 2;
    mc.maxk = c.maxk;
    mc.train_eps = c.train_eps;
    mc.attn_dropout = 0;
    mc.seed = 3;
    nn::GraphContext hctx(g, Device::cpu()), dctx(g, kGpu);
    nn::Model hm(mc, DType::f32, Device::cpu()), dm(mc, DType::f32, kGpu);
    Tensor x = random_tensor({g.n_rows, mc.in}, seed_for(71));
    // GAT: a logit within float32 rounding of the LeakyReLU's kink may take a different slope
    // on each device (nearest_gat_logit), so each layer's input in the CPU model's forward of
    // both steps goes through that check, and inputs that come that close are redrawn. With
    // SPGNN_TEST_SEED=1879859073 one logit of the second layer (step 1) sat 1.2e-7 from 0 among
    // logits up to 8.6; the gradients of that layer's weights and of everything below it then
    // differed by 0.07-0.5%, deterministically and with either backward (CPU float32 matched
    // float64 to 1e-6).
    auto near_kink = [&] {
      if (c.kind != ConvKind::gat) return false;
      for (uint64_t step : {1, 2}) {
        hm.forward(hctx, x, true, step);
        for (size_t i = 0; i < hm.num_layers(); ++i) {
          const bool last = i + 1 == hm.num_layers();
          if (nearest_gat_logit(hctx.loops(false), hm.layer_input(i), hm.layer(i),
                                last ? 1 : mc.heads, last ? mc.classes : mc.hidden) < 1e-5)
            return true;
        }
      }
      return false;
    };
    for (uint64_t redraw = 1; redraw < 20 && near_kink(); ++redraw)
      x = random_tensor({g.n_rows, mc.in}, seed_for(71 + 1000 * redraw));
    const Tensor dx = x.to(kGpu);
    for (uint64_t step : {1, 2}) {  // the second step runs in the buffers of the first
      Tensor hl = hm.forward(hctx, x, true, step);
      Tensor dl = dm.forward(dctx, dx, true, step);
      EXPECT_LT(rel_error(dl, hl), 1e-4) << "logits, step " << step;
      Tensor r = random_tensor({g.n_rows, mc.classes}, seed_for(72 + int(step)));
      hm.backward(hctx, r);
      dm.backward(dctx, r.to(kGpu));
      auto hp = hm.parameters(), dp = dm.parameters();
      ASSERT_EQ(hp.size(), dp.size());
      for (size_t i = 0; i < hp.size(); ++i) expect_grad_close(*dp[i], *hp[i], 1e-4);
    }
  }
}

TEST(NnGpuTrain, BuiltinDatasetTrainsOnTheGpuLikeOnTheCpu) {
  SPGNN_REQUIRE_GPU();
  const Dataset d = nn::load_dataset("builtin");
  for (ConvKind kind : {ConvKind::gcn, ConvKind::sage, ConvKind::gat}) {
    nn::ModelConfig mc;
    mc.kind = kind;
    mc.in = d.x.dim(1);
    mc.classes = d.num_classes;
    // GAT as in TrainBuiltin.EveryModelBeatsChanceByFar (8 x 4 heads, 100 epochs; its lowest
    // accuracy over 60 CPU seeds was 0.904). With 16 x 2 heads and 60 epochs one GPU seed in 14
    // stopped at 0.79 (SPGNN_TEST_SEED=3681787149; the others 0.90-0.985).
    const bool gat = kind == ConvKind::gat;
    mc.hidden = gat ? 8 : 16;
    mc.heads = gat ? 4 : 2;
    mc.seed = seed_for(50);
    nn::TrainConfig tc;
    tc.epochs = quick() ? 5 : gat ? 100 : 60;
    tc.profile = kind == ConvKind::sage;
    nn::Model model(mc, DType::f32, kGpu);
    const nn::TrainResult r = nn::train(model, d, tc);
    if (!quick()) {
      EXPECT_GE(r.test_acc_at_best, 0.8) << nn::conv_name(kind);
    }
    EXPECT_GT(r.median_ms, 0);
    if (tc.profile) {
      // CUDA-event spans lie inside the synchronised epoch: they cannot add up to more than it
      // (a little slack for the two clocks).
      ASSERT_EQ(r.profile.size(), size_t(tc.epochs));
      for (const nn::PhaseTimes& t : r.profile) {
        double covered = 0;
        for (double v : t.ms) covered += v;
        EXPECT_LE(covered, t.total_ms * 1.05 + 0.05);
        EXPECT_GT(t[nn::Phase::aggregate_forward], 0.0);
        EXPECT_GT(t[nn::Phase::aggregate_backward], 0.0);
        EXPECT_GT(t[nn::Phase::dense_gemm], 0.0);
        EXPECT_GT(t[nn::Phase::optimizer], 0.0);
      }
    }
    std::cout << nn::conv_name(kind) << ": test " << r.test_acc_at_best << ", " << r.median_ms
              << " ms/epoch, peak +" << r.peak_device_bytes << " B (sampled)\n";
  }
}

}  // namespace
}  // namespace spgnn::test
