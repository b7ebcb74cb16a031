// MaxK-GNN on the CPU: maxk against hand-computed rows and the order/tie properties it promises,
// the OpenMP kernels (strategy "cpu") against the float64 oracle cpu_ref on fresh random graphs of
// every shape, the CBSR products against independent dense compositions (gspmm on the densified
// X, on the transpose for SSpMM), the adjoint identity that makes SSpMM SpGEMM's backward, and
// the front door's argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "spgnn/ops.hpp"
#include "test_util.hpp"

namespace spgnn::test {
namespace {

constexpr double kTol = 1e-5;
constexpr int64_t kGraphSize = 400;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

OpOptions strategy(const std::string& name) {
  OpOptions o;
  o.schedule.strategy = name;
  return o;
}

std::vector<int64_t> ks_for(int64_t F) {
  std::vector<int64_t> ks;
  for (int64_t k : {1, 2, 7, 8, 16, 32, 64, 96, 128, 192})
    if (k < F) ks.push_back(k);
  ks.push_back(F);
  return ks;
}

// Rows of four kinds: uniform random; few distinct values (many ties); all equal; and a mix of
// signed zeros, infinities and tiny values (the order-key edge cases).
Tensor maxk_input(int64_t n, int64_t F, uint64_t seed) {
  Tensor x = random_tensor({n, F}, seed);
  float* p = x.data<float>();
  std::mt19937_64 rng(seed + 99);
  const float special[] = {0.f, -0.f, 1e-38f, -1e-38f, INFINITY, -INFINITY, 1.f, -1.f};
  for (int64_t r = 0; r < n; ++r) {
    float* row = p + r * F;
    switch (r % 4) {
      case 1:
        for (int64_t j = 0; j < F; ++j) row[j] = float(rng() % 3) - 1.f;
        break;
      case 2:
        for (int64_t j = 0; j < F; ++j) row[j] = 0.25f;
        break;
      case 3:
        for (int64_t j = 0; j < F; ++j) row[j] = special[rng() % 8];
        break;
      default: break;
    }
  }
  return x;
}

template <class IdxT>
std::vector<int64_t> index_row(const Cbsr& c, int64_t r) {
  const IdxT* p = c.index.data<IdxT>() + r * c.k;
  return std::vector<int64_t>(p, p + c.k);
}
std::vector<int64_t> index_row_any(const Cbsr& c, int64_t r) {
  return c.index.dtype() == DType::u8 ? index_row<uint8_t>(c, r) : index_row<uint16_t>(c, r);
}

uint32_t key_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b ^ ((b & 0x80000000u) ? 0xffffffffu : 0x80000000u);
}

// Checks the CBSR promise on row r: k ascending distinct columns, data = x at those columns, every
// kept value ranks at or above every dropped one, and a dropped value equal to a kept one sits at
// a higher column than every kept column of that value (ties to the lower column).
void check_maxk_row(const Tensor& x, const Cbsr& c, int64_t r) {
  const int64_t F = x.dim(1);
  const float* xr = x.data<float>() + r * F;
  const std::vector<int64_t> idx = index_row_any(c, r);
  const float* d = c.data.data<float>() + r * c.k;
  std::vector<bool> kept(static_cast<size_t>(F), false);
  for (int64_t j = 0; j < c.k; ++j) {
    ASSERT_LT(idx[size_t(j)], F);
    if (j > 0) {
      ASSERT_LT(idx[size_t(j - 1)], idx[size_t(j)]) << "row " << r << " not ascending";
    }
    kept[size_t(idx[size_t(j)])] = true;
    ASSERT_EQ(key_of(d[j]), key_of(xr[idx[size_t(j)]])) << "row " << r << " slot " << j;
  }
  uint32_t min_kept = 0xffffffffu;
  for (int64_t j = 0; j < F; ++j)
    if (kept[size_t(j)]) min_kept = std::min(min_kept, key_of(xr[j]));
  for (int64_t j = 0; j < F; ++j) {
    if (kept[size_t(j)]) continue;
    ASSERT_LE(key_of(xr[j]), min_kept) << "row " << r << ": dropped column " << j
                                       << " ranks above a kept one";
    if (key_of(xr[j]) == min_kept) {
      for (int64_t i = j + 1; i < F; ++i) {
        ASSERT_FALSE(kept[size_t(i)] && key_of(xr[i]) == min_kept)
            << "row " << r << ": tie kept column " << i << " over lower column " << j;
      }
    }
  }
}

void expect_same_cbsr(const Cbsr& a, const Cbsr& b) {
  ASSERT_EQ(a.F, b.F);
  ASSERT_EQ(a.k, b.k);
  ASSERT_EQ(a.index.dtype(), b.index.dtype());
  ASSERT_EQ(a.data.shape(), b.data.shape());
  const float* da = a.data.data<float>();
  const float* db = b.data.data<float>();
  for (int64_t i = 0; i < a.data.numel(); ++i)
    ASSERT_EQ(key_of(da[i]), key_of(db[i])) << "data element " << i;
  for (int64_t r = 0; r < a.data.dim(0); ++r)
    ASSERT_EQ(index_row_any(a, r), index_row_any(b, r)) << "index row " << r;
}

// X as a dense [n, F] matrix (zeros outside the kept positions).
Tensor densify(const Cbsr& c) {
  const int64_t n = c.data.dim(0);
  Tensor d = Tensor::zeros({n, c.F}, DType::f32);
  for (int64_t r = 0; r < n; ++r) {
    const std::vector<int64_t> idx = index_row_any(c, r);
    for (int64_t j = 0; j < c.k; ++j)
      d.data<float>()[r * c.F + idx[size_t(j)]] += c.data.data<float>()[r * c.k + j];
  }
  return d;
}

TEST(MaxkCpu, HandComputedRows) {
  const Tensor x = Tensor::from_vector<float>({3, 1, 3, 2,  1, 1, 1, 1,  -1, -2, -0.5f, -3,
                                               0, -0.f, 0, 5},
                                              {4, 4});
  for (const char* s : {"cpu_ref", "cpu"}) {
    SCOPED_TRACE(s);
    const Cbsr c = maxk(x, 2, strategy(s));
    EXPECT_EQ(c.index.dtype(), DType::u8);
    EXPECT_EQ(index_row_any(c, 0), (std::vector<int64_t>{0, 2}));  // 3 at 0 and 2
    EXPECT_EQ(index_row_any(c, 1), (std::vector<int64_t>{0, 1}));  // all tied: lowest columns
    EXPECT_EQ(index_row_any(c, 2), (std::vector<int64_t>{0, 2}));  // -1 and -0.5
    EXPECT_EQ(index_row_any(c, 3), (std::vector<int64_t>{0, 3}));  // +0 ranks above -0
    EXPECT_EQ(c.data.to_vector<float>(), (std::vector<float>{3, 3, 1, 1, -1, -0.5f, 0, 5}));
  }
}

TEST(MaxkCpu, OpenMpMatchesReferenceAndPromises) {
  for (int64_t F : {1, 3, 16, 64, 256, 257, 300}) {
    const Tensor x = maxk_input(97, F, seed_for(10 + uint64_t(F)));
    for (int64_t k : ks_for(F)) {
      SCOPED_TRACE("F=" + std::to_string(F) + " k=" + std::to_string(k) +
                   " seed=" + std::to_string(base_seed()));
      const Cbsr ref = maxk(x, k, strategy("cpu_ref"));
      EXPECT_EQ(ref.index.dtype(), F <= 256 ? DType::u8 : DType::u16);
      for (int64_t r = 0; r < x.dim(0); ++r) check_maxk_row(x, ref, r);
      expect_same_cbsr(maxk(x, k, strategy("cpu")), ref);
      expect_same_cbsr(maxk(x, k), ref);  // auto on host data = cpu
    }
  }
}

// The ends of the key range: all-ones bit patterns (a NaN ranked above +inf, the one with the sign
// bit below -inf), with ties and every k. The OpenMP kernel searches the key range by counting,
// so the extreme keys must neither overflow its bounds nor be lost.
TEST(MaxkCpu, ExtremeKeysMatchReference) {
  auto bits = [](uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  };
  const float hi = bits(0x7fffffffu), lo = bits(0xffffffffu);
  const std::vector<float> rows = {hi, lo, hi, 0.f, lo, -INFINITY, INFINITY, hi,   // mixed
                                   lo, lo, lo, lo, lo, lo, lo, lo,                  // all lowest
                                   hi, hi, hi, hi, hi, hi, hi, hi,                  // all highest
                                   lo, hi, lo, hi, lo, hi, lo, hi};
  const Tensor x = Tensor::from_vector<float>(rows, {4, 8});
  for (int64_t k = 1; k <= 8; ++k) {
    SCOPED_TRACE("k=" + std::to_string(k));
    expect_same_cbsr(maxk(x, k, strategy("cpu")), maxk(x, k, strategy("cpu_ref")));
  }
}

TEST(MaxkCpu, BackwardScattersToKeptPositions) {
  const Tensor x = maxk_input(50, 64, seed_for(3));
  const Cbsr c = maxk(x, 7);
  const Tensor d = random_tensor({50, 7}, seed_for(4));
  const Tensor dx = maxk_backward(c, d);
  ASSERT_EQ(dx.shape(), (std::vector<int64_t>{50, 64}));
  std::vector<float> want(50 * 64, 0.f);
  for (int64_t r = 0; r < 50; ++r) {
    const auto idx = index_row_any(c, r);
    for (int64_t j = 0; j < 7; ++j) want[size_t(r * 64 + idx[size_t(j)])] = d.data<float>()[r * 7 + j];
  }
  EXPECT_EQ(dx.to_vector<float>(), want);
}

struct Case {
  Graph g;
  Cbsr x;
  Tensor e;  // undefined: graph values (or 1)
};

void check_products(const Graph& g, int64_t F, int64_t k, int weights, uint64_t seed) {
  // weights: 0 = explicit e [nnz], 1 = explicit e [nnz, 1], 2 = graph values, 3 = none (ones)
  Graph gg = g;
  if (weights == 3) gg.val = Tensor();
  Tensor e;
  if (weights == 0) e = random_tensor({g.nnz()}, seed + 1, 0.5f, 1.5f);
  if (weights == 1) e = random_tensor({g.nnz(), 1}, seed + 1, 0.5f, 1.5f);
  const Cbsr x = maxk(random_tensor({g.n_cols, F}, seed + 2), k);
  std::ostringstream what;
  what << "n=" << g.n_rows << " nnz=" << g.nnz() << " idx=" << dtype_name(g.index_dtype())
       << " F=" << F << " k=" << k << " weights=" << weights << " seed=" << seed;
  SCOPED_TRACE(what.str());

  // SpGEMM: cpu vs cpu_ref, and cpu_ref vs gspmm(u_mul_e) on the densified X.
  Tensor ref, out = Tensor::full({g.n_rows, F}, DType::f32, kNaN);
  cbsr_spgemm(gg, x, e, ref, strategy("cpu_ref"));
  cbsr_spgemm(gg, x, e, out, strategy("cpu"));
  EXPECT_LT(rel_error(out, ref), kTol);
  Tensor w = e.defined() ? e.reshape({g.nnz()})
                         : gg.has_values() ? gg.val : Tensor::full({g.nnz()}, DType::f32, 1.0);
  Tensor dense;
  gspmm(gg, SpmmOp::u_mul_e, Reduce::sum, densify(x), w, dense, strategy("cpu_ref"));
  EXPECT_LT(rel_error(ref, dense), kTol);

  // SSpMM: cpu vs cpu_ref, and cpu_ref vs (A^T d_out) from gspmm on the transpose, sampled.
  const Tensor d_out = random_tensor({g.n_rows, F}, seed + 3);
  Tensor dref, dd = Tensor::full({g.n_cols, k}, DType::f32, kNaN);
  cbsr_sspmm(gg, e, d_out, x, dref, strategy("cpu_ref"));
  cbsr_sspmm(gg, e, d_out, x, dd, strategy("cpu"));
  EXPECT_LT(rel_error(dd, dref), kTol);
  Graph plain = gg;
  plain.val = Tensor();
  const Transposed t = transpose(plain);
  Tensor wt = Tensor::empty({g.nnz()}, DType::f32);
  for (int64_t i = 0; i < g.nnz(); ++i)
    wt.data<float>()[i] = w.data<float>()[t.perm.data<int64_t>()[i]];
  Tensor at_dout;
  gspmm(t.graph, SpmmOp::u_mul_e, Reduce::sum, d_out, wt, at_dout, strategy("cpu_ref"));
  Tensor sampled = Tensor::empty({g.n_cols, k}, DType::f32);
  for (int64_t u = 0; u < g.n_cols; ++u) {
    const auto idx = index_row_any(x, u);
    for (int64_t j = 0; j < k; ++j)
      sampled.data<float>()[u * k + j] = at_dout.data<float>()[u * F + idx[size_t(j)]];
  }
  EXPECT_LT(rel_error(dref, sampled), kTol);

  // Adjoint: <A X, d_out> = <X.data, sspmm(d_out)>, the identity that makes SSpMM the backward.
  double lhs = 0, rhs = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) lhs += double(ref.data<float>()[i]) * d_out.data<float>()[i];
  for (int64_t i = 0; i < dref.numel(); ++i) rhs += double(dref.data<float>()[i]) * x.data.data<float>()[i];
  EXPECT_NEAR(lhs, rhs, 1e-4 * (std::abs(lhs) + 1.0));
}

TEST(MaxkCpu, CbsrProductsMatchReferenceOnEveryGraphKind) {
  uint64_t salt = 0;
  for (GraphKind kind : all_graph_kinds()) {
    SCOPED_TRACE(kind_name(kind));
    const Graph g32 = random_graph(kind, kGraphSize, seed_for(200 + int(kind)));
    for (DType idx : {DType::i32, DType::i64}) {
      const Graph g = with_index(g32, idx);
      for (int64_t F : {16, 64, 256, 300}) {
        const std::vector<int64_t> ks = ks_for(F);
        // Every k at F = 64; a spread elsewhere keeps the runtime small.
        for (size_t i = 0; i < ks.size(); ++i) {
          if (F != 64 && i % 3 != (salt % 3) && ks[i] != F) continue;
          ++salt;
          check_products(g, F, ks[i], int(salt % 4), seed_for(1000 + salt));
        }
      }
    }
  }
}

TEST(MaxkCpu, RectangularGraph) {
  // n_rows != n_cols: X has n_cols rows, out has n_rows rows, d_data n_cols rows.
  std::vector<int64_t> r, c;
  std::mt19937_64 rng(seed_for(7));
  for (int i = 0; i < 400; ++i) {
    r.push_back(int64_t(rng() % 30));
    c.push_back(int64_t(rng() % 70));
  }
  BuildOptions opt;
  opt.duplicates = DuplicatePolicy::drop;
  const Graph g = graph_from_edges(30, 70, r, c, {}, opt);
  check_products(g, 40, 5, 3, seed_for(8));
  check_products(g, 40, 40, 0, seed_for(9));
}

template <class E>
void expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an error mentioning '" << needle << "'";
  } catch (const E& ex) {
    EXPECT_NE(std::string(ex.what()).find(needle), std::string::npos) << ex.what();
  }
}

TEST(MaxkCpu, BadArguments) {
  const Tensor x = random_tensor({10, 20}, seed_for(1));
  expect_error<InvalidArgument>([&] { maxk(x, 0); }, "'k'");
  expect_error<InvalidArgument>([&] { maxk(x, -3); }, "'k'");
  expect_error<InvalidArgument>([&] { maxk(x, 21); }, "F = 20");
  expect_error<InvalidArgument>([&] { maxk(Tensor(), 2); }, "'x'");
  expect_error<InvalidArgument>([&] { maxk(x.astype(DType::f64), 2); }, "float32");
  expect_error<InvalidArgument>([&] { maxk(x.reshape({200}), 2); }, "2-D");
  expect_error<InvalidArgument>([&] { maxk(Tensor::zeros({1, 70000}, DType::f32), 2); }, "65536");
  expect_error<InvalidArgument>([&] { maxk(x, 2, strategy("fastest")); }, "unknown strategy");
  expect_error<InvalidArgument>(
      [&] {
        OpOptions o = strategy("cpu");
        o.schedule.params["warps"] = 4;
        maxk(x, 2, o);
      },
      "no parameter 'warps'");
  expect_error<Unsupported>([&] { maxk(x, 2, strategy("gpu")); }, "gpu");

  const Graph g = random_graph(GraphKind::uniform, 10, seed_for(2));
  const Cbsr c = maxk(x, 4);
  Tensor out;
  // CBSR operand: index dtype must follow F, shapes must match, entries must be < F.
  Cbsr wrong_dtype = c;
  wrong_dtype.index = c.index.astype(DType::u16);
  expect_error<InvalidArgument>([&] { cbsr_spgemm(g, wrong_dtype, Tensor(), out); }, "u8");
  Cbsr wrong_k = c;
  wrong_k.k = 5;
  expect_error<InvalidArgument>([&] { cbsr_spgemm(g, wrong_k, Tensor(), out); }, "x.data");
  Cbsr wrong_f = c;
  wrong_f.F = 3;
  expect_error<InvalidArgument>([&] { cbsr_spgemm(g, wrong_f, Tensor(), out); }, "x.k");
  Cbsr bad_col = c;
  bad_col.index = c.index.clone();
  bad_col.index.data<uint8_t>()[5] = 20;
  expect_error<InvalidArgument>([&] { cbsr_spgemm(g, bad_col, Tensor(), out); }, "outside");
  Cbsr few_rows = maxk(random_tensor({9, 20}, seed_for(5)), 4);
  expect_error<InvalidArgument>([&] { cbsr_spgemm(g, few_rows, Tensor(), out); }, "n_cols");
  expect_error<InvalidArgument>(
      [&] { cbsr_spgemm(g, c, Tensor::zeros({g.nnz(), 2}, DType::f32), out); }, "'e'");
  Tensor bad_out = Tensor::zeros({10, 19}, DType::f32);
  expect_error<InvalidArgument>([&] { cbsr_spgemm(g, c, Tensor(), bad_out); }, "'out'");
  Tensor dd;
  expect_error<InvalidArgument>(
      [&] { cbsr_sspmm(g, Tensor(), Tensor::zeros({10, 21}, DType::f32), c, dd); }, "d_out");
  Tensor bad_dd = Tensor::zeros({10, 3}, DType::f32);
  expect_error<InvalidArgument>(
      [&] { cbsr_sspmm(g, Tensor(), Tensor::zeros({10, 20}, DType::f32), c, bad_dd); },
      "d_data");
  expect_error<InvalidArgument>([&] { maxk_backward(c, Tensor::zeros({10, 3}, DType::f32)); },
                                "d_data");
  expect_error<Unsupported>([&] { cbsr_spgemm(g, c, Tensor(), out, strategy("gpu")); }, "gpu");
  expect_error<InvalidArgument>(
      [&] {
        OpOptions o = strategy("gpu");
        o.schedule.params["segment"] = 100;
        cbsr_spgemm(g, c, Tensor(), out, o);
      },
      "gpu.segment=100 is out of range; legal values: 32, 64, 128");
  // The products' parameters are the registry's (OpKind::cbsr_*), checked in every build.
  for (const auto& [key, value, why] :
       std::vector<std::tuple<std::string, int64_t, std::string>>{
           {"vec", 3, "cbsr_sspmm: parameter gpu.vec=3 is out of range; legal values: 1, 2, 4"},
           {"private_rows", 2, "gpu.private_rows=2 is out of range; legal values: 0, 1"},
           {"regs", 32, "gpu.regs=32 is out of range; legal values: 0, 40"},
           {"flat", 2, "gpu.flat=2 is out of range; legal values: 0, 1"},
           {"stream_edges", -1, "gpu.stream_edges=-1 is out of range; legal values: 0, 1"},
           {"warps", 3, "gpu.warps=3 is out of range; legal values: 1, 2, 4, 8, 16"},
           {"lanes", 4, "has no parameter 'lanes'"}})
    expect_error<InvalidArgument>(
        [&, key = key, value = value] {
          OpOptions o = strategy("gpu");
          o.schedule.params[key] = value;
          cbsr_sspmm(g, Tensor(), Tensor::zeros({10, 20}, DType::f32), c, dd, o);
        },
        why);
}

// The out-parameter forms write into the caller's buffers (same storage across calls, the point
// of them in training loops), give what the returning forms give, and reject a wrong buffer.
TEST(MaxkCpu, OutputBuffersAreReused) {
  const Tensor x1 = random_tensor({50, 40}, seed_for(20));
  const Tensor x2 = random_tensor({50, 40}, seed_for(21));
  Cbsr kept;
  maxk(x1, 6, kept);
  const void* data = kept.data.raw();
  const void* index = kept.index.raw();
  maxk(x2, 6, kept);  // a second call with the same shape: the same storage
  EXPECT_EQ(kept.data.raw(), data);
  EXPECT_EQ(kept.index.raw(), index);
  const Cbsr fresh = maxk(x2, 6);
  EXPECT_EQ(kept.data.to_vector<float>(), fresh.data.to_vector<float>());
  EXPECT_EQ(kept.index.to_vector<uint8_t>(), fresh.index.to_vector<uint8_t>());
  EXPECT_EQ(kept.F, 40);
  EXPECT_EQ(kept.k, 6);

  const Tensor d = random_tensor({50, 6}, seed_for(22));
  Tensor dx = Tensor::full({50, 40}, DType::f32, kNaN);  // every entry must be written
  const void* dx_storage = dx.raw();
  maxk_backward(kept, d, dx);
  EXPECT_EQ(dx.raw(), dx_storage);
  EXPECT_EQ(dx.to_vector<float>(), maxk_backward(kept, d).to_vector<float>());
  Tensor undefined;
  maxk_backward(kept, d, undefined);
  EXPECT_EQ(undefined.shape(), (std::vector<int64_t>{50, 40}));

  Cbsr wrong_k = kept;
  expect_error<InvalidArgument>([&] { maxk(x1, 5, wrong_k); }, "out.data");
  Cbsr wrong_index = kept;
  wrong_index.index = Tensor::zeros({50, 6}, DType::u16);
  expect_error<InvalidArgument>([&] { maxk(x1, 6, wrong_index); }, "out.index");
  Cbsr no_index = kept;
  no_index.index = Tensor();
  expect_error<InvalidArgument>([&] { maxk(x1, 6, no_index); }, "undefined");
  Tensor narrow = Tensor::zeros({50, 39}, DType::f32);
  expect_error<InvalidArgument>([&] { maxk_backward(kept, d, narrow); }, "'dx'");
}

TEST(MaxkCpu, EmptyShapes) {
  const Cbsr c = maxk(Tensor::zeros({0, 8}, DType::f32), 3);
  EXPECT_EQ(c.data.shape(), (std::vector<int64_t>{0, 3}));
  const Graph g = random_graph(GraphKind::no_edges, 5, seed_for(6));
  const Cbsr x = maxk(random_tensor({5, 8}, seed_for(7)), 3);
  Tensor out = Tensor::full({5, 8}, DType::f32, kNaN), dd = Tensor::full({5, 3}, DType::f32, kNaN);
  for (const char* s : {"cpu_ref", "cpu"}) {
    cbsr_spgemm(g, x, Tensor(), out, strategy(s));
    cbsr_sspmm(g, Tensor(), random_tensor({5, 8}, seed_for(8)), x, dd, strategy(s));
    for (float v : out.to_vector<float>()) EXPECT_EQ(v, 0.f);
    for (float v : dd.to_vector<float>()) EXPECT_EQ(v, 0.f);
  }
}

}  // namespace
}  // namespace spgnn::test
