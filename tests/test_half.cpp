// Half precision (float16, bfloat16) on the host: the conversions round to nearest even and keep
// inf/NaN; tensors convert, fill and (float16) round-trip through .npy; gspmm and gsddmm take half
// operands on the CPU, compute in float32 and match the float64 oracle to the half dtype's
// rounding; so do edge_softmax, the GAT aggregation and MaxK/CBSR, forward and backward; an fp16
// row sum of degree 10,000 does not saturate; mixed dtypes are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "spgnn/io.hpp"
#include "spgnn/ops.hpp"
#include "test_util.hpp"

namespace spgnn::test {
namespace {

float as_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Per-dtype tolerance of a result against the float64 oracle (norm-wise relative error): the one
// rounding of the float32 result to the half dtype (unit roundoff 2^-11 for float16, 2^-8 for
// bfloat16), doubled for the float32 accumulation before it.
double tolerance(DType t) { return t == DType::f16 ? 2.0 / 2048 : 2.0 / 256; }

// The value of the half bit pattern `bits` of dtype t, as a double.
double value_of(DType t, uint16_t bits) {
  return t == DType::f16 ? half_to_float(Half{bits}) : bf16_to_float(BFloat16{bits});
}
uint16_t bits_of(DType t, float x) {
  return t == DType::f16 ? float_to_half(x).bits : float_to_bf16(x).bits;
}

// x rounds to the representable neighbour nearest to it, ties to an even mantissa.
void expect_nearest_even(DType t, float x) {
  const uint16_t b = bits_of(t, x);
  const double got = value_of(t, b), err = std::fabs(double(x) - got);
  ASSERT_TRUE(std::isfinite(got)) << dtype_name(t) << " " << x;
  for (int d : {-1, 1}) {
    const uint16_t nb = static_cast<uint16_t>(b + d);
    const double other = value_of(t, nb);
    // Only neighbours of the same sign and finite; crossing zero or into inf is no neighbour.
    if (!std::isfinite(other) || std::signbit(other) != std::signbit(got)) continue;
    const double oerr = std::fabs(double(x) - other);
    EXPECT_LE(err, oerr) << dtype_name(t) << ": " << x << " -> " << got << ", " << other
                         << " is nearer";
    if (err == oerr) {
      EXPECT_EQ(b & 1, 0) << dtype_name(t) << ": tie of " << x << " not to even";
    }
  }
}

TEST(Half, ConversionsRoundToNearestEvenAndKeepSpecials) {
  for (DType t : {DType::f16, DType::bf16}) {
    // Every pattern survives float and back (NaNs stay NaN).
    for (uint32_t b = 0; b < 65536; ++b) {
      const float f = static_cast<float>(value_of(t, static_cast<uint16_t>(b)));
      if (std::isnan(f)) {
        EXPECT_TRUE(std::isnan(value_of(t, bits_of(t, f)))) << b;
        continue;
      }
      ASSERT_EQ(bits_of(t, f), b) << dtype_name(t) << " pattern " << b;
    }
    std::mt19937_64 rng(seed_for(1) + static_cast<uint64_t>(t));
    std::uniform_int_distribution<uint32_t> bits;
    const float top = t == DType::f16 ? 65504.f : 3.0e38f;
    for (int i = 0; i < 200000; ++i) {
      const float x = as_float(bits(rng));
      if (!std::isfinite(x) || std::fabs(x) > top) continue;
      if (t == DType::f16 && std::fabs(x) > 1e-9f && std::fabs(x) < 7e4f) {
        expect_nearest_even(t, x);
      } else if (t == DType::bf16) {
        expect_nearest_even(t, x);
      }
    }
    // Halfway points between consecutive values: ties go to the even neighbour.
    for (uint16_t b : {uint16_t(0x3c00), uint16_t(0x3c01), uint16_t(0x0001), uint16_t(0x4000)}) {
      const double mid = (value_of(t, b) + value_of(t, uint16_t(b + 1))) / 2;
      expect_nearest_even(t, static_cast<float>(mid));
    }
    EXPECT_TRUE(std::isinf(value_of(t, bits_of(t, std::numeric_limits<float>::infinity()))));
    EXPECT_TRUE(std::isnan(value_of(t, bits_of(t, std::numeric_limits<float>::quiet_NaN()))));
    EXPECT_EQ(value_of(t, bits_of(t, -0.0f)), 0.0);
    EXPECT_TRUE(std::signbit(value_of(t, bits_of(t, -0.0f))));
  }
  // float16's edges: the largest finite value, overflow at 65520 (the tie with 2^16), subnormals.
  EXPECT_EQ(half_to_float(float_to_half(65519.f)), 65504.f);
  EXPECT_TRUE(std::isinf(half_to_float(float_to_half(65520.f))));
  EXPECT_TRUE(std::isinf(half_to_float(float_to_half(-1e6f))));
  EXPECT_EQ(half_to_float(float_to_half(std::ldexp(1.f, -24))), std::ldexp(1.f, -24));
  EXPECT_EQ(half_to_float(float_to_half(std::ldexp(1.f, -25))), 0.f);  // a tie: to even (0)
  EXPECT_EQ(half_to_float(float_to_half(std::ldexp(3.f, -26))), std::ldexp(1.f, -24));
  EXPECT_EQ(half_to_float(float_to_half(std::ldexp(1023.f, -24))), std::ldexp(1023.f, -24));
  // Rounding up out of the subnormals gives the smallest normal.
  EXPECT_EQ(half_to_float(float_to_half(std::ldexp(1023.75f, -24))), std::ldexp(1.f, -14));
}

TEST(Half, TensorsConvertFillAndRoundTripThroughNpy) {
  Tensor x = random_tensor({5, 7}, seed_for(2), -100.f, 100.f);
  for (DType t : {DType::f16, DType::bf16}) {
    Tensor h = x.astype(t);
    EXPECT_EQ(h.dtype(), t);
    EXPECT_EQ(dtype_size(t), 2u);
    Tensor back = h.astype(DType::f32);
    for (int64_t i = 0; i < x.numel(); ++i)
      EXPECT_EQ(back.data<float>()[i], value_of(t, bits_of(t, x.data<float>()[i])));
    Tensor d = h.astype(DType::f64);
    EXPECT_EQ(d.data<double>()[3], double(back.data<float>()[3]));
    Tensor f = Tensor::full({3}, t, 1.5);
    EXPECT_EQ(f.astype(DType::f32).to_vector<float>(), (std::vector<float>{1.5f, 1.5f, 1.5f}));
  }
  const std::string path = ::testing::TempDir() + "spgnn_half_" +
                           std::to_string(base_seed() % 100000) + ".npy";
  Tensor h = x.astype(DType::f16);
  write_npy(h, path);
  Tensor r = read_npy(path);
  ASSERT_EQ(r.dtype(), DType::f16);
  EXPECT_EQ(r.shape(), h.shape());
  EXPECT_EQ(std::memcmp(r.raw(), h.raw(), size_t(h.numel()) * 2), 0);
  std::remove(path.c_str());
  try {
    write_npy(x.astype(DType::bf16), path);
    ADD_FAILURE() << "a bfloat16 .npy was written";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("bfloat16"), std::string::npos) << e.what();
  }
}

OpOptions cpu_ref() {
  OpOptions o;
  o.schedule.strategy = "cpu_ref";
  return o;
}

// Random half operands, and their exact values in float64 for the oracle.
struct Operand {
  Tensor half, f64;
};
Operand random_half(DType t, std::vector<int64_t> shape, uint64_t seed, float lo, float hi) {
  Tensor h = random_tensor(std::move(shape), seed, lo, hi).astype(t);
  return {h, h.astype(DType::f64)};
}

TEST(Half, GspmmOnTheCpuMatchesTheFloat64Oracle) {
  const std::vector<SpmmOp> ops = {SpmmOp::copy_u,  SpmmOp::copy_e,  SpmmOp::u_mul_e,
                                   SpmmOp::u_add_e, SpmmOp::u_sub_e, SpmmOp::u_div_e};
  for (DType t : {DType::f16, DType::bf16}) {
    for (GraphKind kind : {GraphKind::rmat, GraphKind::empty_rows, GraphKind::half_row}) {
      Graph g = random_graph(kind, 300, seed_for(10 + int(kind)), false);
      for (int64_t F : {1, 3, 16}) {
        const Operand u = random_half(t, {g.n_cols, F}, seed_for(20 + F), -1.f, 1.f);
        // Divisors kept away from zero, so that no quotient overflows float16.
        const Operand e = random_half(t, {g.nnz(), F}, seed_for(30 + F), 0.5f, 1.5f);
        for (SpmmOp op : ops) {
          for (Reduce r : {Reduce::sum, Reduce::mean, Reduce::max, Reduce::min}) {
            SCOPED_TRACE(std::string(dtype_name(t)) + " " + kind_name(kind) + " F=" +
                         std::to_string(F) + " op " + std::to_string(int(op)) + " reduce " +
                         std::to_string(int(r)));
            const bool uses_u = op != SpmmOp::copy_e, uses_e = op != SpmmOp::copy_u;
            Tensor want;
            gspmm(g, op, r, uses_u ? u.f64 : Tensor(), uses_e ? e.f64 : Tensor(), want,
                  cpu_ref());
            // Poisoned: NaN in the half dtype.
            Tensor got = Tensor::full(want.shape(), t, std::nan(""));
            if (r == Reduce::max || r == Reduce::min) {
              Tensor au = Tensor::full(want.shape(), DType::i64, -7);
              Tensor ae = Tensor::full(want.shape(), DType::i64, -7);
              gspmm(g, op, r, uses_u ? u.half : Tensor(), uses_e ? e.half : Tensor(), got, au, ae);
              for (int64_t i = 0; i < au.numel(); ++i)
                ASSERT_NE(au.data<int64_t>()[i], -7) << "arg_u not written at " << i;
            } else {
              gspmm(g, op, r, uses_u ? u.half : Tensor(), uses_e ? e.half : Tensor(), got);
            }
            ASSERT_EQ(got.dtype(), t);
            EXPECT_LT(rel_error(got, want), tolerance(t));
          }
        }
      }
    }
  }
}

TEST(Half, GsddmmOnTheCpuMatchesTheFloat64Oracle) {
  for (DType t : {DType::f16, DType::bf16}) {
    Graph g = random_graph(GraphKind::rmat, 200, seed_for(40), false);
    for (int64_t F : {1, 5, 8}) {
      const Operand a = random_half(t, {g.n_cols, F}, seed_for(50 + F), -1.f, 1.f);
      const Operand b = random_half(t, {g.n_rows, F}, seed_for(60 + F), 0.5f, 1.5f);
      for (SddmmOp op : {SddmmOp::dot, SddmmOp::add, SddmmOp::sub, SddmmOp::mul, SddmmOp::div,
                         SddmmOp::copy_lhs, SddmmOp::copy_rhs}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " F=" + std::to_string(F) + " op " +
                     std::to_string(int(op)));
        Tensor want;
        gsddmm(g, op, a.f64, b.f64, want, Target::u, Target::v, cpu_ref());
        Tensor got = Tensor::full(want.shape(), t, std::nan(""));
        gsddmm(g, op, a.half, b.half, got, Target::u, Target::v);
        ASSERT_EQ(got.dtype(), t);
        EXPECT_LT(rel_error(got, want), tolerance(t));
      }
    }
  }
}

// The ops whose oracle takes float32 (cpu_ref computes in float64 inside): the half inputs' exact
// float32 values go to cpu_ref, the half inputs to the default strategy.
TEST(Half, AttentionOpsOnTheCpuMatchTheOracle) {
  for (DType t : {DType::f16, DType::bf16}) {
    for (GraphKind kind : {GraphKind::rmat, GraphKind::empty_rows}) {
      Graph g = random_graph(kind, 250, seed_for(90 + int(kind)), false);
      for (int64_t H : {1, 3}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " " + kind_name(kind) + " H=" +
                     std::to_string(H));
        const int64_t F = 5;
        auto half = [&](std::vector<int64_t> shape, uint64_t salt) {
          return random_tensor(std::move(shape), seed_for(salt), -1.f, 1.f).astype(t);
        };
        const Tensor scores = half({g.nnz(), H}, 100), gout = half({g.nnz(), H}, 101);
        Tensor want, got = Tensor::full({g.nnz(), H}, t, std::nan(""));
        edge_softmax(g, scores.astype(DType::f32), want, cpu_ref());
        edge_softmax(g, scores, got);
        ASSERT_EQ(got.dtype(), t);
        EXPECT_LT(rel_error(got, want), tolerance(t));
        Tensor gs_want, gs = Tensor::full({g.nnz(), H}, t, std::nan(""));
        edge_softmax_backward(g, got.astype(DType::f32), gout.astype(DType::f32), gs_want,
                              cpu_ref());
        edge_softmax_backward(g, got, gout, gs);
        EXPECT_LT(rel_error(gs, gs_want), tolerance(t));

        const Tensor feat = half({g.n_cols, H * F}, 102), el = half({g.n_cols, H}, 103),
                     er = half({g.n_rows, H}, 104), go = half({g.n_rows, H * F}, 105);
        GatParams params;
        params.heads = H;
        Tensor out_want, attn_want;
        gat_aggregate(g, feat.astype(DType::f32), el.astype(DType::f32), er.astype(DType::f32),
                      params, out_want, attn_want, cpu_ref());
        Tensor out = Tensor::full({g.n_rows, H * F}, t, std::nan("")), attn;
        gat_aggregate(g, feat, el, er, params, out, attn);
        ASSERT_EQ(attn.dtype(), t);
        EXPECT_LT(rel_error(out, out_want), tolerance(t));
        EXPECT_LT(rel_error(attn, attn_want), tolerance(t));
        Tensor gf_want, gl_want, gr_want, gf, gl, gr = Tensor::full({g.n_rows, H}, t, std::nan(""));
        gat_aggregate_backward(g, feat.astype(DType::f32), el.astype(DType::f32),
                               er.astype(DType::f32), attn.astype(DType::f32),
                               go.astype(DType::f32), params, gf_want, gl_want, gr_want, cpu_ref());
        gat_aggregate_backward(g, feat, el, er, attn, go, params, gf, gl, gr);
        EXPECT_LT(rel_error(gf, gf_want), tolerance(t));
        EXPECT_LT(rel_error(gl, gl_want), tolerance(t));
        EXPECT_LT(rel_error(gr, gr_want), tolerance(t));
        // float32 gradient outputs (all three) take the float32 sums unrounded: what the cpu
        // strategy computes on the widened inputs, exactly.
        Tensor gf_f32, gl_f32, gr_f32;
        gat_aggregate_backward(g, feat.astype(DType::f32), el.astype(DType::f32),
                               er.astype(DType::f32), attn.astype(DType::f32),
                               go.astype(DType::f32), params, gf_f32, gl_f32, gr_f32);
        Tensor gf32 = Tensor::full({g.n_cols, H * F}, DType::f32, std::nan("")),
               gl32 = Tensor::full({g.n_cols, H}, DType::f32, std::nan("")),
               gr32 = Tensor::full({g.n_rows, H}, DType::f32, std::nan(""));
        gat_aggregate_backward(g, feat, el, er, attn, go, params, gf32, gl32, gr32);
        EXPECT_EQ(gf32.to_vector<float>(), gf_f32.to_vector<float>());
        EXPECT_EQ(gl32.to_vector<float>(), gl_f32.to_vector<float>());
        EXPECT_EQ(gr32.to_vector<float>(), gr_f32.to_vector<float>());
        // Half outputs beside them are not a mix it takes: the rest come out half, named.
        Tensor gl_half;
        expect_throw<InvalidArgument>(
            [&] { gat_aggregate_backward(g, feat, el, er, attn, go, params, gf32, gl_half, gr32); },
            {"gat_aggregate_backward", "grad_feat"});
        // el and er may be float32 beside half rows, and are then used unrounded: the result is
        // the float32 op's on the widened rows, rounded once.
        const Tensor el32 = random_tensor({g.n_cols, H}, seed_for(106), -1.f, 1.f),
                     er32 = random_tensor({g.n_rows, H}, seed_for(107), -1.f, 1.f);
        Tensor o32, a32;
        gat_aggregate(g, feat.astype(DType::f32), el32, er32, params, o32, a32);
        Tensor o2, a2;
        gat_aggregate(g, feat, el32, er32, params, o2, a2);
        ASSERT_EQ(o2.dtype(), t);
        EXPECT_EQ(o2.astype(DType::f32).to_vector<float>(),
                  o32.astype(t).astype(DType::f32).to_vector<float>());
        EXPECT_EQ(a2.astype(DType::f32).to_vector<float>(),
                  a32.astype(t).astype(DType::f32).to_vector<float>());
        Tensor gfm, glm, grm, gfm32, glm32, grm32;
        gat_aggregate_backward(g, feat.astype(DType::f32), el32, er32, a2.astype(DType::f32),
                               go.astype(DType::f32), params, gfm32, glm32, grm32);
        gfm = Tensor::full({g.n_cols, H * F}, DType::f32, std::nan(""));
        glm = Tensor::full({g.n_cols, H}, DType::f32, std::nan(""));
        grm = Tensor::full({g.n_rows, H}, DType::f32, std::nan(""));
        gat_aggregate_backward(g, feat, el32, er32, a2, go, params, gfm, glm, grm);
        EXPECT_EQ(gfm.to_vector<float>(), gfm32.to_vector<float>());
        EXPECT_EQ(glm.to_vector<float>(), glm32.to_vector<float>());
        EXPECT_EQ(grm.to_vector<float>(), grm32.to_vector<float>());
        // Any other mix is refused, named: the other half dtype, or half el beside float32 rows.
        const DType other = t == DType::f16 ? DType::bf16 : DType::f16;
        Tensor o3, a3;
        expect_throw<InvalidArgument>(
            [&] { gat_aggregate(g, feat, el32.astype(other), er, params, o3, a3); },
            {"gat_aggregate", "'el' must be float32 or"});
        expect_throw<InvalidArgument>(
            [&] { gat_aggregate(g, feat, el, er32.astype(other), params, o3, a3); },
            {"gat_aggregate", "'er' must be float32 or"});
        expect_throw<InvalidArgument>(
            [&] { gat_aggregate(g, feat.astype(DType::f32), el, er32, params, o3, a3); },
            {"gat_aggregate", "'feat' is float32"});
      }
    }
  }
}

TEST(Half, MaxkAndCbsrProductsOnTheCpuMatchTheOracle) {
  for (DType t : {DType::f16, DType::bf16}) {
    Graph g = random_graph(GraphKind::empty_rows, 200, seed_for(110), true);
    for (int64_t k : {1, 4, 16}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " k=" + std::to_string(k));
      const int64_t F = 16;
      // Few distinct values: many ties, broken by the lower column as in float32.
      Tensor x = random_tensor({g.n_cols, F}, seed_for(111 + k), -4.f, 4.f);
      for (int64_t i = 0; i < x.numel(); ++i)
        x.data<float>()[i] = std::round(x.data<float>()[i] * 2.f) / 2.f;
      const Tensor xh = x.astype(t);
      const Cbsr want = maxk(xh.astype(DType::f32), k, cpu_ref());
      Cbsr got;
      got.data = Tensor::full({g.n_cols, k}, t, std::nan(""));
      got.index = Tensor::zeros({g.n_cols, k}, DType::u8);
      maxk(xh, k, got);
      ASSERT_EQ(got.data.dtype(), t);
      EXPECT_EQ(got.index.to_vector<uint8_t>(), want.index.to_vector<uint8_t>());
      EXPECT_EQ(rel_error(got.data, want.data), 0.0);  // the kept values are the input's own
      const Tensor dd = random_tensor({g.n_cols, k}, seed_for(112)).astype(t);
      Tensor dx = maxk_backward(got, dd);
      ASSERT_EQ(dx.dtype(), t);
      EXPECT_EQ(rel_error(dx, maxk_backward(want, dd.astype(DType::f32), cpu_ref())), 0.0);

      Tensor out_want, out = Tensor::full({g.n_rows, F}, t, std::nan(""));
      cbsr_spgemm(g, want, Tensor(), out_want, cpu_ref());
      cbsr_spgemm(g, got, Tensor(), out);
      EXPECT_LT(rel_error(out, out_want), tolerance(t));
      const Tensor e = random_tensor({g.nnz()}, seed_for(113)).astype(t);
      const Tensor dout = random_tensor({g.n_rows, F}, seed_for(114)).astype(t);
      Tensor d_want, d = Tensor::full({g.n_cols, k}, t, std::nan(""));
      cbsr_sspmm(g, e.astype(DType::f32), dout.astype(DType::f32), want, d_want, cpu_ref());
      cbsr_sspmm(g, e, dout, got, d);
      EXPECT_LT(rel_error(d, d_want), tolerance(t));
      Tensor d2;
      expect_throw<InvalidArgument>([&] { cbsr_sspmm(g, e.astype(DType::f32), dout, got, d2); },
                                    {"cbsr_sspmm", "'e' is float32"});
    }
  }
}

// dmlc/dgl#4674: fp16 sums stuck at 2048 (2048 + 1 rounds back to 2048 in fp16). spgnn adds
// in float32: a row of 10,000 ones sums to 10,000 (exact in fp16), and random values give the
// float32 sum rounded once.
TEST(Half, Fp16RowSumOfDegree10000MatchesFloat32Accumulation) {
  const int64_t deg = 10000;
  std::vector<int64_t> rows(deg, 0), cols(deg);
  for (int64_t i = 0; i < deg; ++i) cols[i] = i;
  BuildOptions keep;
  keep.duplicates = DuplicatePolicy::keep;
  Graph g = graph_from_edges(1, deg, rows, cols, {}, keep);
  Tensor ones = Tensor::full({deg, 1}, DType::f16, 1.0);
  Tensor out;
  gspmm(g, SpmmOp::copy_u, Reduce::sum, ones, Tensor(), out);
  EXPECT_EQ(out.astype(DType::f32).data<float>()[0], 10000.f);
  Tensor u = random_tensor({deg, 3}, seed_for(70), 0.f, 1.f).astype(DType::f16);
  Tensor o16, o32;
  gspmm(g, SpmmOp::copy_u, Reduce::sum, u, Tensor(), o16);
  gspmm(g, SpmmOp::copy_u, Reduce::sum, u.astype(DType::f32), Tensor(), o32);
  for (int64_t f = 0; f < 3; ++f) {
    const float want = o32.data<float>()[f];
    EXPECT_GT(want, 4000.f);
    EXPECT_EQ(half_to_float(o16.data<Half>()[f]), half_to_float(float_to_half(want))) << f;
  }
}

TEST(Half, MixedDtypesAreRefusedByName) {
  Graph g = random_graph(GraphKind::uniform, 50, seed_for(80), true);
  Tensor u16 = random_tensor({g.n_cols, 4}, seed_for(81)).astype(DType::f16);
  Tensor ubf = u16.astype(DType::bf16);
  Tensor e32 = random_tensor({g.nnz(), 4}, seed_for(82));
  Tensor out;
  expect_throw<InvalidArgument>([&] { gspmm(g, SpmmOp::u_mul_e, Reduce::sum, u16, e32, out); },
                                {"gspmm", "'e' is float32", "'u' is float16"});
  Tensor out2;
  expect_throw<InvalidArgument>(
      [&] { gsddmm(g, SddmmOp::add, u16, ubf, out2, Target::u, Target::u); },
      {"gsddmm", "bfloat16", "float16"});
  // The graph's own float32 values weigh half features: allowed, the result is half.
  Tensor o;
  gspmm(g, SpmmOp::u_mul_e, Reduce::sum, u16, Tensor(), o);
  EXPECT_EQ(o.dtype(), DType::f16);
  // A given output of another dtype is named.
  Tensor wrong = Tensor::zeros({g.n_rows, 4}, DType::f32);
  expect_throw<InvalidArgument>([&] { gspmm(g, SpmmOp::copy_u, Reduce::sum, u16, Tensor(), wrong); },
                                {"output 'out' must be float16"});
}

}  // namespace
}  // namespace spgnn::test
