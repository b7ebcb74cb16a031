// Attention ops on the GPU against the float64 oracle cpu_ref: edge_softmax (forward and
// backward), gat_aggregate with the fused TLPGNN kernel (forward, both backward variants) and the
// unfused composition, on fresh random graphs of every shape in test_util.hpp (rows without
// edges, a star, one row with half the edges, n = 1, no edges), int32 and int64 indices,
// H in {1, 2, 4, 8}, F in {1, 3, 8, 16, 32, 33, 64, 128}, dropout on and off, default and
// non-default streams; the fused forward's column chunks (1, 2, 4 or 8 heads per pass, H not a
// multiple of them, heads wider than one warp pass) and the backward's groups of several heads,
// rows split over several warps, and rows of
// every length class (group, warp, split) on one graph; the same in float16 and bfloat16 (the
// half path). Outputs are poisoned with NaN before each GPU run.
// SPGNN_TEST_QUICK=1 (compute-sanitizer runs) shrinks graphs and sweeps.
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

#include "kernels/cuda/attention_kernels.hpp"
#endif

namespace spgnn::test {
namespace {

[[maybe_unused]] int64_t graph_n() { return quick() ? 200 : 1000; }
[[maybe_unused]] std::vector<int64_t> heads() {
  return quick() ? std::vector<int64_t>{1, 4} : std::vector<int64_t>{1, 2, 4, 8};
}
[[maybe_unused]] std::vector<int64_t> widths() {
  return quick() ? std::vector<int64_t>{1, 3, 32, 33}
                 : std::vector<int64_t>{1, 3, 8, 16, 32, 33, 41, 64, 128};
}
[[maybe_unused]] std::vector<GraphKind> kinds() {
  if (quick()) return {GraphKind::rmat, GraphKind::star, GraphKind::empty_rows, GraphKind::single,
                       GraphKind::no_edges};
  return all_graph_kinds();
}

[[maybe_unused]] const Graphs& graphs(GraphKind kind, DType idx) {
  return cached_graphs(kind, idx, graph_n(), 300);
}

[[maybe_unused]] OpOptions with(const std::string& s, std::map<std::string, int64_t> params = {},
                                void* stream = nullptr) {
  OpOptions o;
  o.schedule.strategy = s;
  o.schedule.params = std::move(params);
  o.stream = stream;
  return o;
}

[[maybe_unused]] constexpr double kTol = 1e-5;
[[maybe_unused]] int g_failures = 0;
[[maybe_unused]] constexpr int kMaxReported = 20;

#if SPGNN_WITH_CUDA
void sync(void* stream) {
  ASSERT_EQ(stream ? cudaStreamSynchronize(static_cast<cudaStream_t>(stream))
                   : cudaDeviceSynchronize(),
            cudaSuccess);
}

void expect_close(const Tensor& got, const Tensor& ref, const char* what) {
  const double err = rel_error(got, ref);
  EXPECT_LT(err, kTol) << what;
  if (!(err < kTol)) ++g_failures;
}

// grad_el and grad_er are sums of a_e (d_a_e - t) (leaky-ReLU'd) that cancel (a one-edge row's
// are exactly 0). A backward whose t is another rounding of the same sum than its edges' terms
// (params.forward_out) keeps float32 rounding of those terms, so its errors are measured against
// the terms' magnitudes: per (v, h) |grad_out[v]|·out_abs[v] for er, per (u, h)
// |feat[u]|·grad_feat_abs[u] for el, from cpu_ref runs on |feat| and |grad_out| (host float32).
std::pair<Tensor, Tensor> logit_grad_magnitudes(const Graph& g, const Tensor& feat,
                                                const Tensor& el, const Tensor& er,
                                                const Tensor& attn, const Tensor& gout,
                                                const GatParams& prm, int64_t H, int64_t F) {
  Tensor out_abs, attn_abs, gf_abs, gel_abs, ger_abs;
  gat_aggregate(g, abs_of(feat), el, er, prm, out_abs, attn_abs, with("cpu_ref"));
  gat_aggregate_backward(g, feat, el, er, attn, abs_of(gout), prm, gf_abs, gel_abs, ger_abs,
                         with("cpu_ref"));
  const auto head_dots = [&](const Tensor& x, const Tensor& y) {
    Tensor m = Tensor::empty({x.dim(0), H}, DType::f64);
    const Tensor xa = abs_of(x).astype(DType::f64), ya = abs_of(y).astype(DType::f64);
    for (int64_t i = 0; i < x.dim(0); ++i)
      for (int64_t h = 0; h < H; ++h) {
        double d = 0;
        for (int64_t f = 0; f < F; ++f)
          d += xa.data<double>()[i * H * F + h * F + f] * ya.data<double>()[i * H * F + h * F + f];
        m.data<double>()[i * H + h] = d;
      }
    return m;
  };
  return {head_dots(feat, gf_abs), head_dots(gout, out_abs)};
}

void expect_close_terms(const Tensor& got, const Tensor& ref, const Tensor& mag, double tol,
                        const char* what) {
  const double err =
      rel_error(got, ref) * norm_of(ref) / std::max({norm_of(ref), norm_of(mag), 1e-30});
  EXPECT_LT(err, tol) << what << " (against its terms' magnitudes)";
  if (!(err < tol)) ++g_failures;
}

// One gat_aggregate case: forward with `strategy` and (when backward) the backward variants
// (gather, atomic, gather given the forward's out), each against cpu_ref on the same inputs.
void check_gat(GraphKind kind, DType idx, int64_t H, int64_t F, float dropout,
               const std::string& strategy, bool backward, std::map<std::string, int64_t> params = {},
               void* stream = nullptr) {
  if (g_failures > kMaxReported) return;
  const Graphs& G = graphs(kind, idx);
  static uint64_t salt = 0;
  const uint64_t seed = seed_for(20000 + 8 * ++salt);
  std::ostringstream what;
  what << "gat " << strategy << " graph=" << kind_name(kind) << " idx=" << dtype_name(idx)
       << " H=" << H << " F=" << F << " dropout=" << dropout << (stream ? " (stream)" : "")
       << " seed=" << seed;
  SCOPED_TRACE(what.str());
  const Graph& g = G.host;
  const Tensor feat = random_tensor({g.n_cols, H * F}, seed);
  const Tensor el = random_tensor({g.n_cols, H}, seed + 1, -2.f, 2.f);
  const Tensor er = random_tensor({g.n_rows, H}, seed + 2, -2.f, 2.f);
  const Tensor gout = random_tensor({g.n_rows, H * F}, seed + 3);
  GatParams prm;
  prm.heads = H;
  prm.attn_dropout = dropout;
  prm.dropout_seed = seed + 4;
  Tensor out_ref, attn_ref;
  gat_aggregate(g, feat, el, er, prm, out_ref, attn_ref, with("cpu_ref"));
  const Tensor feat_d = dev(feat), el_d = dev(el), er_d = dev(er);
  Tensor out = poisoned({g.n_rows, H * F}, stream), attn = poisoned({g.nnz(), H}, stream);
  gat_aggregate(G.dev, feat_d, el_d, er_d, prm, out, attn, with(strategy, params, stream));
  sync(stream);
  expect_close(out, out_ref, "out");
  expect_close(attn, attn_ref, "attn");
  if (!backward) return;
  Tensor gf_ref, gel_ref, ger_ref;
  gat_aggregate_backward(g, feat, el, er, attn_ref, gout, prm, gf_ref, gel_ref, ger_ref,
                         with("cpu_ref"));
  const Tensor attn_d = dev(attn_ref), gout_d = dev(gout);
  const auto [mag_el, mag_er] = logit_grad_magnitudes(g, feat, el, er, attn_ref, gout, prm, H, F);
  for (int variant : {0, 1, 2}) {
    const bool atomic = variant == 1;
    SCOPED_TRACE(atomic ? "backward bwd_atomic=1"
                        : variant == 2 ? "backward (gather, params.forward_out)"
                                       : "backward (gather over transpose)");
    Tensor gf = poisoned({g.n_cols, H * F}, stream), gel = poisoned({g.n_cols, H}, stream),
           ger = poisoned({g.n_rows, H}, stream);
    auto p = params;
    p["bwd_atomic"] = atomic;
    GatParams bp = prm;
    if (variant == 2) bp.forward_out = &out;
    gat_aggregate_backward(G.dev, feat_d, el_d, er_d, attn_d, gout_d, bp, gf, gel, ger,
                           with("gat_fused", p, stream));
    sync(stream);
    expect_close(gf, gf_ref, "grad_feat");
    if (variant == 2) {
      expect_close_terms(gel, gel_ref, mag_el, kTol, "grad_el");
      expect_close_terms(ger, ger_ref, mag_er, kTol, "grad_er");
    } else {
      expect_close(gel, gel_ref, "grad_el");
      expect_close(ger, ger_ref, "grad_er");
    }
  }
  // The forward asked for the softmax state and the negative-logit sums (as spgnn train's GAT
  // layer does), then the backward given all three walks the edges once, by source, with each
  // weight recomputed from the state and grad_er from the sums (GatParams::negative_logit_sums).
  // The forward's out and attn are the plain forward's, bit for bit.
  if (strategy != "gat_fused") return;
  {
    SCOPED_TRACE("one walk by source (softmax_state, negative_logit_sums)");
    Tensor out2 = poisoned({g.n_rows, H * F}, stream), attn2 = poisoned({g.nnz(), H}, stream),
           st = poisoned({g.n_rows, H, 2}, stream), neg = poisoned({g.n_rows, H * F}, stream);
    GatParams fp = prm;
    fp.softmax_state = &st;
    fp.negative_logit_sums = &neg;
    gat_aggregate(G.dev, feat_d, el_d, er_d, fp, out2, attn2, with(strategy, params, stream));
    sync(stream);
    ASSERT_TRUE(st.defined() && neg.defined());
    EXPECT_EQ(rel_error(out2, out), 0.0) << "out with the sums";
    EXPECT_EQ(rel_error(attn2, attn), 0.0) << "attn with the sums";
    GatParams bp = prm;
    bp.forward_out = &out2;
    bp.softmax_state = &st;
    bp.negative_logit_sums = &neg;
    Tensor gf = poisoned({g.n_cols, H * F}, stream), gel = poisoned({g.n_cols, H}, stream),
           ger = poisoned({g.n_rows, H}, stream);
    gat_aggregate_backward(G.dev, feat_d, el_d, er_d, attn_d, gout_d, bp, gf, gel, ger,
                           with("gat_fused", params, stream));
    sync(stream);
    expect_close(gf, gf_ref, "grad_feat (one walk by source)");
    expect_close_terms(gel, gel_ref, mag_el, kTol, "grad_el (one walk by source)");
    expect_close_terms(ger, ger_ref, mag_er, kTol, "grad_er (one walk by source)");

  }
}

// The half path of the fused kernels (every tensor float16 or bfloat16, float32 sums, one
// rounding per result) against cpu_ref on the same, exactly converted values: forward out and
// attn within the dtype's rounding, the gradients (from the GPU's own half attn) within two.
double half_tol(DType t) { return t == DType::f16 ? 2.0 / 2048 : 2.0 / 256; }

void check_gat_half(GraphKind kind, DType idx, DType dt, int64_t H, int64_t F, float dropout,
                    std::map<std::string, int64_t> params = {}, void* stream = nullptr) {
  if (g_failures > kMaxReported) return;
  const Graphs& G = graphs(kind, idx);
  static uint64_t salt = 0;
  const uint64_t seed = seed_for(40000 + 8 * ++salt);
  std::ostringstream what;
  what << "gat half " << dtype_name(dt) << " graph=" << kind_name(kind)
       << " idx=" << dtype_name(idx) << " H=" << H << " F=" << F << " dropout=" << dropout
       << (params.count("heavy_deg") ? " heavy_deg=" + std::to_string(params["heavy_deg"]) : "")
       << (stream ? " (stream)" : "") << " seed=" << seed;
  SCOPED_TRACE(what.str());
  const Graph& g = G.host;
  auto half = [&](std::vector<int64_t> shape, uint64_t s, float lo, float hi) {
    return random_tensor(std::move(shape), s, lo, hi).astype(dt);
  };
  auto f32 = [](const Tensor& t) { return t.to(Device::cpu()).astype(DType::f32); };
  const Tensor feat = half({g.n_cols, H * F}, seed, -1.f, 1.f);
  const Tensor el = half({g.n_cols, H}, seed + 1, -2.f, 2.f);
  const Tensor er = half({g.n_rows, H}, seed + 2, -2.f, 2.f);
  const Tensor gout = half({g.n_rows, H * F}, seed + 3, -1.f, 1.f);
  GatParams prm;
  prm.heads = H;
  prm.attn_dropout = dropout;
  prm.dropout_seed = seed + 4;
  Tensor out_ref, attn_ref;
  gat_aggregate(g, f32(feat), f32(el), f32(er), prm, out_ref, attn_ref, with("cpu_ref"));
  const Tensor feat_d = dev(feat), el_d = dev(el), er_d = dev(er);
  Tensor out = poisoned({g.n_rows, H * F}, stream, dt), attn = poisoned({g.nnz(), H}, stream, dt);
  gat_aggregate(G.dev, feat_d, el_d, er_d, prm, out, attn, with("gat_fused", params, stream));
  sync(stream);
  ASSERT_EQ(out.dtype(), dt);
  ASSERT_EQ(attn.dtype(), dt);
  const double tol = half_tol(dt);
  auto close = [&](const Tensor& got, const Tensor& ref, double t, const char* name) {
    const double err = rel_error(got, ref);
    EXPECT_LT(err, t) << name;
    if (!(err < t)) ++g_failures;
  };
  close(out, out_ref, tol, "out");
  close(attn, attn_ref, tol, "attn");
  Tensor gf_ref, gel_ref, ger_ref;
  gat_aggregate_backward(g, f32(feat), f32(el), f32(er), f32(attn), f32(gout), prm, gf_ref,
                         gel_ref, ger_ref, with("cpu_ref"));
  Tensor gf = poisoned({g.n_cols, H * F}, stream, dt), gel = poisoned({g.n_cols, H}, stream, dt),
         ger = poisoned({g.n_rows, H}, stream, dt);
  gat_aggregate_backward(G.dev, feat_d, el_d, er_d, attn, dev(gout), prm, gf, gel, ger,
                         with("gat_fused", params, stream));
  sync(stream);
  ASSERT_EQ(gf.dtype(), dt);
  close(gf, gf_ref, 2 * tol, "grad_feat");
  close(gel, gel_ref, 2 * tol, "grad_el");
  close(ger, ger_ref, 2 * tol, "grad_er");
  // Given the forward's (half) out: checked, not used (GatParams::forward_out), the same sums.
  {
    GatParams bp = prm;
    bp.forward_out = &out;
    Tensor gfo = poisoned({g.n_cols, H * F}, stream, dt), gelo = poisoned({g.n_cols, H}, stream, dt),
           gero = poisoned({g.n_rows, H}, stream, dt);
    gat_aggregate_backward(G.dev, feat_d, el_d, er_d, attn, dev(gout), bp, gfo, gelo, gero,
                           with("gat_fused", params, stream));
    sync(stream);
    close(gfo, gf_ref, 2 * tol, "grad_feat (params.forward_out)");
    close(gelo, gel_ref, 2 * tol, "grad_el (params.forward_out)");
    close(gero, ger_ref, 2 * tol, "grad_er (params.forward_out)");
  }
  // A float32 out (the sums unrounded) and the rows' softmax state, as spgnn train's GAT layer
  // asks for them. Given both, the backward recomputes each weight in float32 and walks each row
  // once: its gradients are those of the unrounded weights (cpu_ref's attn_ref) to float32
  // rounding of their terms, and within one rounding in half. Rows the half kernels do not take
  // (F % 4 != 0: the float32 copy) leave the state undefined and read the half weights.
  {
    const bool fused = F % 4 == 0;
    Tensor out32 = poisoned({g.n_rows, H * F}, stream), attn2 = poisoned({g.nnz(), H}, stream, dt),
           st = poisoned({g.n_rows, H, 2}, stream), neg = poisoned({g.n_rows, H * F}, stream);
    GatParams fp = prm;
    fp.softmax_state = &st;
    fp.negative_logit_sums = &neg;
    gat_aggregate(G.dev, feat_d, el_d, er_d, fp, out32, attn2, with("gat_fused", params, stream));
    sync(stream);
    ASSERT_EQ(out32.dtype(), DType::f32);
    ASSERT_EQ(st.defined(), fused);
    ASSERT_EQ(neg.defined(), fused);
    close(out32, out_ref, 1e-5, "out (float32 out)");
    close(attn2, attn_ref, tol, "attn (float32 out)");
    Tensor gfx, gelx, gerx;
    gat_aggregate_backward(g, f32(feat), f32(el), f32(er), attn_ref, f32(gout), prm, gfx, gelx,
                           gerx, with("cpu_ref"));
    const auto [mag_el, mag_er] =
        logit_grad_magnitudes(g, f32(feat), f32(el), f32(er), attn_ref, f32(gout), prm, H, F);
    GatParams bp = prm;
    bp.forward_out = &out32;
    bp.softmax_state = &st;
    bp.negative_logit_sums = &neg;  // the one walk by source (both below)
    Tensor gfa = poisoned({g.n_cols, H * F}, stream), gela = poisoned({g.n_cols, H}, stream),
           gera = poisoned({g.n_rows, H}, stream);
    gat_aggregate_backward(G.dev, feat_d, el_d, er_d, attn2, dev(gout), bp, gfa, gela, gera,
                           with("gat_fused", params, stream));
    Tensor gfb = poisoned({g.n_cols, H * F}, stream, dt), gelb = poisoned({g.n_cols, H}, stream, dt),
           gerb = poisoned({g.n_rows, H}, stream, dt);
    gat_aggregate_backward(G.dev, feat_d, el_d, er_d, attn2, dev(gout), bp, gfb, gelb, gerb,
                           with("gat_fused", params, stream));
    sync(stream);
    const double t32 = fused ? 1e-5 : 2 * tol, th = fused ? tol : 2 * tol;
    close(gfa, gfx, t32, "grad_feat (float32 out and state)");
    expect_close_terms(gela, gelx, mag_el, t32, "grad_el (float32 out and state)");
    expect_close_terms(gera, gerx, mag_er, t32, "grad_er (float32 out and state)");
    close(gfb, gfx, th, "grad_feat (float32 out and state, half gradients)");
    expect_close_terms(gelb, gelx, mag_el, th, "grad_el (float32 out and state, half gradients)");
    expect_close_terms(gerb, gerx, mag_er, th, "grad_er (float32 out and state, half gradients)");
    // Without the sums: the destination pass's one walk from t (the fiftieth session's path).
    bp.negative_logit_sums = nullptr;
    Tensor gfc = poisoned({g.n_cols, H * F}, stream), gelc = poisoned({g.n_cols, H}, stream),
           gerc = poisoned({g.n_rows, H}, stream);
    gat_aggregate_backward(G.dev, feat_d, el_d, er_d, attn2, dev(gout), bp, gfc, gelc, gerc,
                           with("gat_fused", params, stream));
    sync(stream);
    close(gfc, gfx, t32, "grad_feat (float32 out and state, two passes)");
    expect_close_terms(gelc, gelx, mag_el, t32, "grad_el (float32 out and state, two passes)");
    expect_close_terms(gerc, gerx, mag_er, t32, "grad_er (float32 out and state, two passes)");
  }
  // float32 outputs take the float32 sums unrounded (spgnn train's GAT layer asks for them).
  Tensor gf32 = poisoned({g.n_cols, H * F}, stream), gel32 = poisoned({g.n_cols, H}, stream),
         ger32 = poisoned({g.n_rows, H}, stream);
  gat_aggregate_backward(G.dev, feat_d, el_d, er_d, attn, dev(gout), prm, gf32, gel32, ger32,
                         with("gat_fused", params, stream));
  sync(stream);
  ASSERT_EQ(gf32.dtype(), DType::f32);
  close(gf32, gf_ref, 1e-4, "grad_feat (float32 out)");
  close(gel32, gel_ref, 1e-4, "grad_el (float32 out)");
  close(ger32, ger_ref, 1e-4, "grad_er (float32 out)");
  // float32 el and er beside the half rows (spgnn train's GAT layer and autocast pass them so):
  // used unrounded, forward and backward, into half and into float32 gradients.
  const Tensor el32 = random_tensor({g.n_cols, H}, seed + 5, -2.f, 2.f);
  const Tensor er32 = random_tensor({g.n_rows, H}, seed + 6, -2.f, 2.f);
  Tensor out_ref_m, attn_ref_m;
  gat_aggregate(g, f32(feat), el32, er32, prm, out_ref_m, attn_ref_m, with("cpu_ref"));
  const Tensor el32_d = dev(el32), er32_d = dev(er32);
  Tensor out_m = poisoned({g.n_rows, H * F}, stream, dt), attn_m = poisoned({g.nnz(), H}, stream, dt);
  gat_aggregate(G.dev, feat_d, el32_d, er32_d, prm, out_m, attn_m,
                with("gat_fused", params, stream));
  sync(stream);
  ASSERT_EQ(out_m.dtype(), dt);
  close(out_m, out_ref_m, tol, "out (float32 el, er)");
  close(attn_m, attn_ref_m, tol, "attn (float32 el, er)");
  Tensor gf_ref_m, gel_ref_m, ger_ref_m;
  gat_aggregate_backward(g, f32(feat), el32, er32, f32(attn_m), f32(gout), prm, gf_ref_m,
                         gel_ref_m, ger_ref_m, with("cpu_ref"));
  Tensor gf_m = poisoned({g.n_cols, H * F}, stream, dt), gel_m = poisoned({g.n_cols, H}, stream, dt),
         ger_m = poisoned({g.n_rows, H}, stream, dt);
  gat_aggregate_backward(G.dev, feat_d, el32_d, er32_d, attn_m, dev(gout), prm, gf_m, gel_m, ger_m,
                         with("gat_fused", params, stream));
  Tensor gf_m32 = poisoned({g.n_cols, H * F}, stream), gel_m32 = poisoned({g.n_cols, H}, stream),
         ger_m32 = poisoned({g.n_rows, H}, stream);
  gat_aggregate_backward(G.dev, feat_d, el32_d, er32_d, attn_m, dev(gout), prm, gf_m32, gel_m32,
                         ger_m32, with("gat_fused", params, stream));
  sync(stream);
  close(gf_m, gf_ref_m, 2 * tol, "grad_feat (float32 el, er)");
  close(gel_m, gel_ref_m, 2 * tol, "grad_el (float32 el, er)");
  close(ger_m, ger_ref_m, 2 * tol, "grad_er (float32 el, er)");
  close(gf_m32, gf_ref_m, 1e-4, "grad_feat (float32 el, er and out)");
  close(gel_m32, gel_ref_m, 1e-4, "grad_el (float32 el, er and out)");
  close(ger_m32, ger_ref_m, 1e-4, "grad_er (float32 el, er and out)");
}
#endif

[[maybe_unused]] const std::vector<DType> kIndex = {DType::i32, DType::i64};

TEST(EdgeSoftmaxGpu, EveryGraphAndHeads) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  uint64_t salt = 0;
  for (GraphKind k : kinds())
    for (DType idx : kIndex)
      for (int64_t H : {1, 2, 5, 8}) {
        const Graphs& G = graphs(k, idx);
        const uint64_t seed = seed_for(100 + ++salt);
        SCOPED_TRACE(std::string("graph=") + kind_name(k) + " idx=" + dtype_name(idx) +
                     " H=" + std::to_string(H) + " seed=" + std::to_string(seed));
        const bool flat = H == 1 && idx == DType::i64;  // also the [nnz] form
        const std::vector<int64_t> shape =
            flat ? std::vector<int64_t>{G.host.nnz()} : std::vector<int64_t>{G.host.nnz(), H};
        const Tensor s = random_tensor(shape, seed, -6.f, 6.f);
        const Tensor dy = random_tensor(shape, seed + 1);
        Tensor ref, gref;
        edge_softmax(G.host, s, ref, with("cpu_ref"));
        edge_softmax_backward(G.host, ref, dy, gref, with("cpu_ref"));
        Tensor out = poisoned(shape), gs = poisoned(shape);
        edge_softmax(G.dev, dev(s), out);
        edge_softmax_backward(G.dev, dev(ref), dev(dy), gs);
        sync(nullptr);
        expect_close(out, ref, "edge_softmax");
        expect_close(gs, gref, "edge_softmax_backward");
      }
#endif
}

TEST(GatFusedGpu, EveryGraphHeadsAndWidth) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  int i = 0;
  for (GraphKind k : kinds())
    for (int64_t H : heads())
      for (int64_t F : widths()) {
        ++i;
        const DType idx = i % 2 ? DType::i64 : DType::i32;
        check_gat(k, idx, H, F, 0.f, "gat_fused", true);
        check_gat(k, idx, H, F, 0.35f, "gat_fused", !quick());
      }
#endif
}

TEST(GatFusedGpu, EveryParameterValueAndStream) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  for (int64_t warps : {1, 2, 4, 8, 16})
    for (GraphKind k : {GraphKind::rmat, GraphKind::half_row})
      check_gat(k, warps % 2 ? DType::i64 : DType::i32, 2, 33, 0.2f, "gat_fused", true,
                {{"warps", warps}});
  // Rows above heavy_deg edges are split over several warps and merged (forward) or summed with
  // atomics (backward, on the graph and on its transpose): small thresholds put many rows (the
  // star's hub, the half row, R-MAT's hubs) through that path. H = 4, F = 3 and H = 1, F = 16
  // walk two edges a lane (fwd_e2), the others one.
  for (int64_t heavy : {64, 256, 4096})
    for (GraphKind k : {GraphKind::rmat, GraphKind::star, GraphKind::half_row})
      for (auto [H, F] : std::vector<std::pair<int64_t, int64_t>>{{1, 32}, {4, 3}, {2, 64}, {1, 16}})
        check_gat(k, (H + heavy) % 2 ? DType::i64 : DType::i32, H, F, H == 4 ? 0.3f : 0.f,
                  "gat_fused", !quick() || heavy == 64, {{"heavy_deg", heavy}});
  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreate(&st), cudaSuccess);
  for (int64_t F : {1, 32, 64})
    check_gat(GraphKind::rmat, DType::i32, 4, F, 0.1f, "gat_fused", true, {}, st);
  cudaStreamDestroy(st);
#endif
}

TEST(GatFusedGpu, HeadsPerChunkAndWideHeads) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  // heads_per_chunk forces 1, 2, 4 or 8 heads per pass over the edges (auto takes all heads on
  // these small graphs); H = 3 and 5 leave a partly filled last chunk; F = 3 and 33 use scalar
  // loads, 3 * 4 heads = 12 of 16 lanes. heavy_deg = 64 also sends R-MAT's hubs and the half
  // row through the split-row kernels with the same chunks, and through the backward's. The
  // backward's groups take 4 heads (bwd_heads_log2) here, so H = 3 and 5 leave lanes of a group
  // with no head, and H = 8, F = 1 is 8 heads of one lane. H = 6, F = 4 leaves two of 8 heads of
  // a chunk empty; H = 8, F = 12 is 8 heads of 3 float4 lanes (24 of 32).
  int i = 0;
  for (int64_t hpc : {1, 2, 4, 8})
    for (auto [H, F] : std::vector<std::pair<int64_t, int64_t>>{{3, 3}, {4, 8}, {5, 32}, {8, 1},
                                                                {2, 33}, {6, 4}, {8, 12}})
      for (GraphKind k : {GraphKind::rmat, GraphKind::half_row, GraphKind::empty_rows}) {
        if (quick() && (k == GraphKind::empty_rows || hpc == 2)) continue;
        ++i;
        std::map<std::string, int64_t> prm{{"heads_per_chunk", hpc}};
        if (i % 2) prm["heavy_deg"] = 64;
        check_gat(k, i % 3 ? DType::i32 : DType::i64, H, F, i % 4 ? 0.f : 0.3f, "gat_fused",
                  prm.count("heavy_deg") > 0, prm);
      }
  // Heads wider than 32 vectors: K vectors a lane (head_lanes), forward and backward: 41 and 129
  // (scalar: 8 lanes of 8, 32 lanes of 8 minus a tail), 70 (float2: 16 lanes of 4), 200 and 256
  // (float4: 32 lanes of 2, one chunk), 301 (scalar: two chunks / passes of 256 vectors) and 600
  // (float4: three of 64 vectors; only the first chunk writes attn).
  for (auto [H, F] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 41}, {2, 70}, {1, 129}, {2, 256}, {3, 200}, {1, 301}, {2, 600}})
    for (GraphKind k : {GraphKind::rmat, GraphKind::star}) {
      if (quick() && F > 301) continue;
      check_gat(k, DType::i32, H, F, 0.f, "gat_fused", true);
      check_gat(k, DType::i64, H, F, 0.2f, "gat_fused", true, {{"heavy_deg", 128}});
    }
#endif
}

TEST(GatFusedGpu, AutoPicksFusedAndMatchesUnfused) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  for (GraphKind k : kinds())
    for (int64_t H : {1, 4})
      for (int64_t F : {3, 32}) {
        check_gat(k, DType::i32, H, F, 0.f, "unfused", false);
        check_gat(k, DType::i64, H, F, 0.25f, "unfused", false);
        check_gat(k, DType::i32, H, F, 0.25f, "auto", false);
      }
#endif
}

// Without a bwd_atomic parameter the float32 backward picks its variant by graph and width
// (gat_bwd_prefers_atomic): on graphs past 2^20 edges, narrow heads take the atomic scatter and
// build no transpose; wider ones gather over it. Each pick, given the forward's state and sums as
// spgnn train's GAT layer gives them, against cpu_ref; on a uniform and on a skewed graph.
TEST(GatFusedGpu, DefaultBackwardPicksByGraphAndWidth) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  RmatParams rp;
  rp.scale = 17;
  rp.seed = seed_for(50001);
  const std::vector<std::pair<std::string, Graph>> hosts = {
      {"er:70000:16", generate_erdos_renyi(70000, 16, seed_for(50000))},
      {"rmat:17:16", generate_rmat(rp)}};
  int picked_atomic = 0, picked_gather = 0;
  for (const auto& [name, host] : hosts) {
    ASSERT_GE(host.nnz(), int64_t{1} << 20) << name << ": the rule needs 2^20 edges";
    for (const auto& [H, F] : std::vector<std::pair<int64_t, int64_t>>{{1, 16}, {2, 16}, {1, 24},
                                                                        {4, 32}, {2, 33}}) {
      const bool atomic = detail::gat_bwd_prefers_atomic(host.nnz(), host.n_rows, H, F);
      (atomic ? picked_atomic : picked_gather)++;
      const uint64_t seed = seed_for(50010 + 8 * (picked_atomic + picked_gather));
      SCOPED_TRACE(name + " H=" + std::to_string(H) + " F=" + std::to_string(F) +
                   (atomic ? " (atomic)" : " (gather)") + " seed=" + std::to_string(seed));
      const Graphs G = with_device_copy(host);  // a fresh cache: no transpose yet
      const Tensor feat = random_tensor({host.n_cols, H * F}, seed);
      const Tensor el = random_tensor({host.n_cols, H}, seed + 1, -2.f, 2.f);
      const Tensor er = random_tensor({host.n_rows, H}, seed + 2, -2.f, 2.f);
      const Tensor gout = random_tensor({host.n_rows, H * F}, seed + 3);
      GatParams prm;
      prm.heads = H;
      Tensor out_ref, attn_ref, gf_ref, gel_ref, ger_ref;
      gat_aggregate(host, feat, el, er, prm, out_ref, attn_ref, with("cpu_ref"));
      gat_aggregate_backward(host, feat, el, er, attn_ref, gout, prm, gf_ref, gel_ref, ger_ref,
                             with("cpu_ref"));
      const auto [mag_el, mag_er] =
          logit_grad_magnitudes(host, feat, el, er, attn_ref, gout, prm, H, F);
      const Tensor feat_d = dev(feat), el_d = dev(el), er_d = dev(er);
      Tensor out = poisoned({host.n_rows, H * F}), attn = poisoned({host.nnz(), H}),
             st = poisoned({host.n_rows, H, 2}), neg = poisoned({host.n_rows, H * F});
      GatParams fp = prm;
      fp.softmax_state = &st;
      fp.negative_logit_sums = &neg;
      gat_aggregate(G.dev, feat_d, el_d, er_d, fp, out, attn, with("auto"));
      GatParams bp = prm;
      bp.forward_out = &out;
      bp.softmax_state = &st;
      bp.negative_logit_sums = &neg;
      Tensor gf = poisoned({host.n_cols, H * F}), gel = poisoned({host.n_cols, H}),
             ger = poisoned({host.n_rows, H});
      gat_aggregate_backward(G.dev, feat_d, el_d, er_d, attn, dev(gout), bp, gf, gel, ger,
                             with("auto"));
      sync(nullptr);
      expect_close(gf, gf_ref, "grad_feat");
      expect_close_terms(gel, gel_ref, mag_el, kTol, "grad_el");
      expect_close_terms(ger, ger_ref, mag_er, kTol, "grad_er");
      bool has_transpose = false;
      for (const auto& [key, item] : G.dev.cache->items)
        has_transpose = has_transpose || (key.rfind("attention.transpose.", 0) == 0 && item);
      EXPECT_EQ(has_transpose, !atomic) << "the atomic backward needs no transpose";
    }
  }
  EXPECT_GT(picked_atomic, 0);
  EXPECT_GT(picked_gather, 0);
#endif
}

TEST(GatFusedGpu, DropoutMaskMatchesCpuAndIsDeterministic) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const Graphs& G = graphs(GraphKind::rmat, DType::i32);
  const int64_t H = 4, F = 1;
  // feat = 1 and el = er = 0: every weight is 1/deg and out[v, h] = (kept edges of v) / deg /
  // (1 - p), so any disagreement in the mask shows up exactly.
  const Tensor feat = Tensor::full({G.host.n_cols, H * F}, DType::f32, 1.0);
  const Tensor el = Tensor::zeros({G.host.n_cols, H}, DType::f32);
  const Tensor er = Tensor::zeros({G.host.n_rows, H}, DType::f32);
  GatParams prm;
  prm.heads = H;
  prm.attn_dropout = 0.5f;
  prm.dropout_seed = 77;
  Tensor ref, attn_ref, o1, a1, o2, a2;
  gat_aggregate(G.host, feat, el, er, prm, ref, attn_ref, with("cpu_ref"));
  gat_aggregate(G.dev, dev(feat), dev(el), dev(er), prm, o1, a1);
  gat_aggregate(G.dev, dev(feat), dev(el), dev(er), prm, o2, a2);
  EXPECT_LT(rel_error(o1, ref), kTol);
  EXPECT_EQ(o1.to_vector<float>(), o2.to_vector<float>());
#endif
}

// Half rows: the forward loads 16-byte vectors of 8 halves where F % 8 == 0 and F <= 32 (F = 8
// and 16 with four edges a logit lane, 24 and 32 with two) and 8-byte vectors of 4 otherwise
// (F = 132 and 264 are wide heads of 33 and 66 vectors, two a lane); the backward 16-byte
// vectors of 8 where F % 8 == 0 (F = 8, 16, 24, 32, 64; 264 = 33 vectors, one a lane) and of 4
// otherwise (F = 4, 12, 44, 132). F = 6 and 3 are not multiples of 4 and take the float32 copy.
// Every graph shape, both index types, heads chunked (H = 3 of 4 lanes' chunks), dropout, rows
// split over warps (heavy_deg = 64: the star's hub, the half row, R-MAT's hubs; forward and both
// backward sides), a non-default stream.
TEST(GatFusedGpu, HalfRowsEveryGraphWidthAndSplit) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const std::vector<int64_t> fs = quick() ? std::vector<int64_t>{8, 12, 32, 264, 6}
                                          : std::vector<int64_t>{4, 8, 12, 16, 24, 32, 44, 64, 132,
                                                                 264, 6, 3};
  int i = 0;
  for (DType dt : {DType::bf16, DType::f16})
    for (GraphKind k : kinds())
      for (int64_t F : fs) {
        ++i;
        const int64_t H = i % 3 == 0 ? 3 : (i % 3 == 1 ? 1 : 4);
        const DType idx = i % 2 ? DType::i64 : DType::i32;
        check_gat_half(k, idx, dt, H, F, i % 4 == 0 ? 0.3f : 0.f);
        if (k == GraphKind::rmat || k == GraphKind::star || k == GraphKind::half_row)
          check_gat_half(k, idx, dt, H, F, i % 4 == 1 ? 0.2f : 0.f, {{"heavy_deg", 64}});
      }
  // Which rows the half kernels take themselves (the rest go through the float32 copy).
  const Graphs& G = graphs(GraphKind::uniform, DType::i32);
  for (auto [F, V] : std::vector<std::pair<int64_t, int>>{{8, 8}, {16, 8}, {32, 8}, {40, 8},
                                                          {264, 8}, {12, 4}, {132, 4}, {6, 0},
                                                          {3, 0}}) {
    const int fwd_v = F <= 32 ? V : std::min(V, 4);  // 8 halves only up to 32 (fwd_half_vector)
    const Tensor feat = Tensor::empty({G.host.n_cols, 2 * F}, DType::bf16, Device::cuda());
    Tensor out = Tensor::empty({G.host.n_rows, 2 * F}, DType::bf16, Device::cuda());
    detail::GatProblem p;
    p.g = &G.dev;
    p.feat = &feat;
    p.out = &out;
    p.grad_out = &out;
    p.H = 2;
    p.F = F;
    EXPECT_EQ(detail::gat_fused_half_width(p, false), fwd_v) << "F = " << F;
    EXPECT_EQ(detail::gat_fused_half_width(p, true), V) << "F = " << F;
    const Tensor f32 = Tensor::empty({G.host.n_cols, 2 * F}, DType::f32, Device::cuda());
    p.feat = &f32;
    EXPECT_EQ(detail::gat_fused_half_width(p, false), 0) << "float32, F = " << F;
  }
  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  for (int64_t F : {16, 12})
    check_gat_half(GraphKind::rmat, DType::i32, DType::bf16, 2, F, 0.1f, {{"heavy_deg", 64}}, st);
  cudaStreamDestroy(st);
#endif
}

TEST(GatFusedGpu, CpuStrategiesRefuseGpuData) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  const Graphs& G = graphs(GraphKind::uniform, DType::i32);
  const Tensor feat = Tensor::zeros({G.host.n_cols, 4}, DType::f32, Device::cuda());
  const Tensor el = Tensor::zeros({G.host.n_cols, 1}, DType::f32, Device::cuda());
  const Tensor er = Tensor::zeros({G.host.n_rows, 1}, DType::f32, Device::cuda());
  Tensor out, attn;
  GatParams prm;
  EXPECT_THROW(gat_aggregate(G.dev, feat, el, er, prm, out, attn, with("cpu_ref")), Unsupported);
  // Host tensors with a device graph are an argument error naming the tensor.
  EXPECT_THROW(gat_aggregate(G.dev, feat.to(Device::cpu()), el, er, prm, out, attn),
               InvalidArgument);
#endif
}

}  // namespace
}  // namespace spgnn::test
