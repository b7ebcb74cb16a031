// MaxK-GNN on the GPU (strategy "gpu") against the CPU oracle cpu_ref: maxk bit-exact (values and
// columns, ties included) for F in {16, 64, 256, 300} and k in {1, 2, 7, 8, 16, 32, 64, 96, 128,
// 192, F}, on rows of random values, few distinct values, equal values, signed zeros /
// infinities and outliers; every register layout of the kernel (float4 and scalar loads, 1 to 32
// values per lane, F not a multiple of 32), many rows per warp (its prefetch), and the wide
// shared-memory path; maxk_backward (rows built in shared memory up to F = 1024, the scatter
// kernel above, repeated columns); cbsr_spgemm and cbsr_sspmm (rel error < 1e-5) on every
// graph kind of test_util.hpp, int32 and int64 indices, each source of edge weights, and the
// kernel parameters (split rows, the buffer-less path, one warp per block, the backward's edge
// chunks and row segments, a stream). Outputs are poisoned with NaN first. SPGNN_TEST_QUICK=1
// (compute-sanitizer runs) shrinks graphs and sweeps.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "spgnn/ops.hpp"
#include "spgnn/tune.hpp"
#include "tune/space.hpp"
#include "gpu/gpu_test_util.hpp"
#include "test_util.hpp"

#if SPGNN_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace spgnn::test {
namespace {

[[maybe_unused]] constexpr double kTol = 1e-5;
[[maybe_unused]] const float kNaN = std::numeric_limits<float>::quiet_NaN();

[[maybe_unused]] int64_t graph_n() { return quick() ? 300 : 1500; }
[[maybe_unused]] std::vector<int64_t> widths() {
  if (quick()) return {16, 300};
  return {16, 64, 256, 300};
}
[[maybe_unused]] std::vector<int64_t> ks_for(int64_t F) {
  std::vector<int64_t> ks;
  const std::vector<int64_t> all = quick() ? std::vector<int64_t>{1, 7, 16, 96}
                                           : std::vector<int64_t>{1, 2, 7, 8, 16, 32, 64, 96,
                                                                  128, 192};
  for (int64_t k : all)
    if (k < F) ks.push_back(k);
  ks.push_back(F);
  return ks;
}
[[maybe_unused]] std::vector<GraphKind> kinds() {
  if (quick()) return {GraphKind::rmat, GraphKind::half_row, GraphKind::empty_rows,
                       GraphKind::single, GraphKind::no_edges};
  return all_graph_kinds();
}

[[maybe_unused]] OpOptions strategy(const std::string& name,
                                    std::map<std::string, int64_t> params = {}) {
  OpOptions o;
  o.schedule.strategy = name;
  o.schedule.params = std::move(params);
  return o;
}

[[maybe_unused]] uint32_t key_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b ^ ((b & 0x80000000u) ? 0xffffffffu : 0x80000000u);
}

// Rows of eight kinds: uniform random; few distinct values; all equal; signed zeros, infinities
// and tiny values; normal values with a few huge outliers (slow for value interpolation); values
// of two magnitudes (1e-30 and 1e30 scales, the key interval spans most of the key range);
// normal values (the search's pivot from the row's mean and deviation); normal values through a
// ReLU (half of them tie at zero).
[[maybe_unused]] Tensor maxk_input(int64_t n, int64_t F, uint64_t seed) {
  Tensor x = random_tensor({n, F}, seed);
  float* p = x.data<float>();
  std::mt19937_64 rng(seed + 99);
  std::normal_distribution<float> normal;
  const float special[] = {0.f, -0.f, 1e-38f, -1e-38f, INFINITY, -INFINITY, 1.f, -1.f};
  for (int64_t r = 0; r < n; ++r) {
    float* row = p + r * F;
    switch (r % 8) {
      case 1: for (int64_t j = 0; j < F; ++j) row[j] = float(rng() % 3) - 1.f; break;
      case 2: for (int64_t j = 0; j < F; ++j) row[j] = 0.25f; break;
      case 3: for (int64_t j = 0; j < F; ++j) row[j] = special[rng() % 8]; break;
      case 4:
        for (int64_t j = 0; j < F; ++j) row[j] = normal(rng);
        for (int o = 0; o < 3; ++o) row[rng() % uint64_t(F)] = (rng() % 2 ? 1e30f : -1e30f);
        break;
      case 5:
        for (int64_t j = 0; j < F; ++j) row[j] = normal(rng) * (rng() % 2 ? 1e30f : 1e-30f);
        break;
      case 6: for (int64_t j = 0; j < F; ++j) row[j] = 3.f + 0.5f * normal(rng); break;
      case 7: for (int64_t j = 0; j < F; ++j) row[j] = std::max(normal(rng), 0.f); break;
      default: break;
    }
  }
  return x;
}

[[maybe_unused]] Cbsr to_device(const Cbsr& c) {
  Cbsr d = c;
  d.data = c.data.to(Device::cuda());
  d.index = c.index.to(Device::cuda());
  return d;
}

[[maybe_unused]] ::testing::AssertionResult same_cbsr(const Cbsr& got_dev, const Cbsr& ref) {
  const Tensor gd = got_dev.data.to(Device::cpu());
  const Tensor gi = got_dev.index.to(Device::cpu()).astype(DType::i64);
  const Tensor ri = ref.index.astype(DType::i64);
  if (gd.shape() != ref.data.shape() || got_dev.index.dtype() != ref.index.dtype())
    return ::testing::AssertionFailure() << "shape or index dtype differs";
  for (int64_t i = 0; i < ref.data.numel(); ++i) {
    if (gi.data<int64_t>()[i] != ri.data<int64_t>()[i] ||
        key_of(gd.data<float>()[i]) != key_of(ref.data.data<float>()[i]))
      return ::testing::AssertionFailure()
             << "row " << i / ref.k << " slot " << i % ref.k << ": got column "
             << gi.data<int64_t>()[i] << " value " << gd.data<float>()[i] << ", expected column "
             << ri.data<int64_t>()[i] << " value " << ref.data.data<float>()[i];
  }
  return ::testing::AssertionSuccess();
}

[[maybe_unused]] const Graphs& graphs(GraphKind kind, DType idx) {
  return cached_graphs(kind, idx, graph_n(), 300);
}

TEST(MaxkGpu, MaxkMatchesReferenceBitExact) {
  SPGNN_REQUIRE_GPU();
  const int64_t n = quick() ? 64 : 1000;
  std::vector<int64_t> Fs = widths();
  if (!quick()) Fs.insert(Fs.end(), {1, 33, 1000});
  for (int64_t F : Fs) {
    const Tensor x = maxk_input(n, F, seed_for(10 + uint64_t(F)));
    const Tensor xd = x.to(Device::cuda());
    for (int64_t k : ks_for(F)) {
      SCOPED_TRACE("F=" + std::to_string(F) + " k=" + std::to_string(k) +
                   " SPGNN_TEST_SEED=" + std::to_string(base_seed()));
      const Cbsr ref = maxk(x, k, strategy("cpu_ref"));
      const Cbsr got = maxk(xd, k);  // auto on CUDA data = gpu
      EXPECT_TRUE(got.data.device().is_cuda());
      EXPECT_TRUE(same_cbsr(got, ref));
    }
  }
}

TEST(MaxkGpu, MaxkEveryRegisterLayout) {
  SPGNN_REQUIRE_GPU();
  // Widths picking each register layout of the kernel: float4 loads with 1, 2, 3, 4 and 8 chunks
  // of 128 columns (two chunks twice: 256, whose column checks are compiled out, and 252),
  // scalar loads with 1, 2, 4, 8, 16 and 32 chunks of 32 (F % 4 != 0), partly filled last
  // chunks, and 1025 (the first width of the wide path).
  const std::vector<int64_t> Fs = quick() ? std::vector<int64_t>{5, 252, 255, 256, 1000}
                                          : std::vector<int64_t>{2, 5, 31, 36, 60, 127, 132, 252,
                                                                 255, 256, 257, 380, 500, 513, 999,
                                                                 1000, 1024, 1025};
  for (int64_t F : Fs) {
    const Tensor x = maxk_input(quick() ? 24 : 120, F, seed_for(50 + uint64_t(F)));
    const Tensor xd = x.to(Device::cuda());
    for (int64_t k : {int64_t{1}, int64_t{2}, F / 3 + 1, F / 2, F - 1, F}) {
      if (k < 1) continue;
      SCOPED_TRACE("F=" + std::to_string(F) + " k=" + std::to_string(k) +
                   " SPGNN_TEST_SEED=" + std::to_string(base_seed()));
      EXPECT_TRUE(same_cbsr(maxk(xd, k), maxk(x, k, strategy("cpu_ref"))));
    }
  }
}

TEST(MaxkGpu, MaxkManyRowsPerWarp) {
  SPGNN_REQUIRE_GPU();
  // More rows than resident warps, so each warp selects in one row while the next one loads.
  const int64_t n = quick() ? 20000 : 150000;
  for (int64_t F : {int64_t{16}, int64_t{256}, int64_t{300}}) {
    const Tensor x = maxk_input(F == 16 ? 4 * n : n, F, seed_for(60 + uint64_t(F)));
    const Tensor xd = x.to(Device::cuda());
    for (int64_t k : {int64_t{1}, int64_t{7}, int64_t{16}}) {
      SCOPED_TRACE("F=" + std::to_string(F) + " k=" + std::to_string(k));
      EXPECT_TRUE(same_cbsr(maxk(xd, k), maxk(x, k, strategy("cpu"))));
    }
  }
}

TEST(MaxkGpu, MaxkRowTooWideForSharedMemory) {
  SPGNN_REQUIRE_GPU();
  // F > 24576 floats: the kernel re-reads x from global memory each round.
  const int64_t F = 30000;
  const Tensor x = maxk_input(8, F, seed_for(21));
  for (int64_t k : {int64_t{1}, int64_t{100}, int64_t{4099}, F}) {
    SCOPED_TRACE("k=" + std::to_string(k));
    EXPECT_TRUE(same_cbsr(maxk(x.to(Device::cuda()), k), maxk(x, k, strategy("cpu_ref"))));
  }
}

TEST(MaxkGpu, MaxkBackward) {
  SPGNN_REQUIRE_GPU();
  // Rows built in shared memory up to F = 1024 (float4 writes when F % 4 == 0, scalar ones
  // otherwise), the zero-then-scatter kernel above; more rows than the grid's warps; outputs
  // poisoned first. A caller's CBSR may repeat a column: its gradients add up.
  const std::vector<int64_t> Fs = quick() ? std::vector<int64_t>{5, 256, 300, 1500}
                                          : std::vector<int64_t>{1, 5, 16, 255, 256, 300, 1000,
                                                                 1024, 1025, 3000};
  for (int64_t F : Fs) {
    for (int64_t n : {int64_t{200}, int64_t{quick() ? 20000 : 60000}}) {
      if (n > 200 && F > 1024) continue;  // the grid-stride loop is the row kernel's
      const Tensor x = maxk_input(n, F, seed_for(30 + uint64_t(F) + uint64_t(n)));
      for (int64_t k : {int64_t{1}, std::min<int64_t>(7, F), std::min<int64_t>(40, F), F}) {
        SCOPED_TRACE("F=" + std::to_string(F) + " n=" + std::to_string(n) +
                     " k=" + std::to_string(k));
        const Cbsr c = maxk(x, k, strategy("cpu"));
        const Tensor d = random_tensor({n, k}, seed_for(31 + uint64_t(k)));
        const Tensor ref = maxk_backward(c, d, strategy("cpu_ref"));
        Tensor got = Tensor::empty({n, F}, DType::f32, Device::cuda());
        got.fill_(NAN);
        maxk_backward(to_device(c), d.to(Device::cuda()), got);
        EXPECT_EQ(got.to_vector<float>(), ref.to_vector<float>());
      }
    }
  }
  for (int64_t F : {int64_t{9}, int64_t{256}, int64_t{1000}, int64_t{2000}}) {
    SCOPED_TRACE("repeated columns, F=" + std::to_string(F));
    const int64_t n = 300, k = 6;
    Cbsr c = maxk(maxk_input(n, F, seed_for(33)), k, strategy("cpu"));
    Tensor idx = c.index.astype(DType::i64);
    for (int64_t r = 0; r < n; ++r) {  // columns 1 and 2 of each row repeat column 0
      int64_t* row = idx.data<int64_t>() + r * k;
      row[1] = row[0];
      if (r % 2) row[2] = row[0];
    }
    c.index = idx.astype(c.index.dtype());
    const Tensor d = random_tensor({n, k}, seed_for(34));
    const Tensor ref = maxk_backward(c, d, strategy("cpu_ref"));
    const Tensor got = maxk_backward(to_device(c), d.to(Device::cuda()));
    const std::vector<float> g = got.to_vector<float>(), e = ref.to_vector<float>();
    ASSERT_EQ(g.size(), e.size());
    for (size_t i = 0; i < g.size(); ++i)  // two or three float adds: in any order
      ASSERT_NEAR(g[i], e[i], 1e-6 * (1 + std::fabs(e[i]))) << "element " << i;
  }
}

#if SPGNN_WITH_CUDA
int g_failures = 0;

// weights: 0 = explicit e [nnz], 1 = explicit e [nnz, 1], 2 = graph values, 3 = none (ones).
// mangle: changes the CBSR operand before both runs (a caller-built CBSR).
void check_products(GraphKind kind, DType idx, int64_t F, int64_t k, int weights,
                    const OpOptions& gpu, cudaStream_t stream = nullptr,
                    void (*mangle)(Cbsr&) = nullptr) {
  if (g_failures > 20) return;
  const Graphs& G = graphs(kind, idx);
  static uint64_t salt = 0;
  const uint64_t seed = seed_for(5000 + ++salt);
  std::ostringstream what;
  what << "graph=" << kind_name(kind) << " idx=" << dtype_name(idx) << " F=" << F << " k=" << k
       << " weights=" << weights << " " << gpu.schedule.str() << (stream ? " (stream)" : "")
       << " seed=" << seed;
  SCOPED_TRACE(what.str());
  Graph host = G.host, dev = G.dev;
  if (weights == 3) {
    host.val = Tensor();
    dev.val = Tensor();
  }
  Tensor e_h, e_d;
  if (weights == 0) e_h = random_tensor({host.nnz()}, seed + 1, 0.5f, 1.5f);
  if (weights == 1) e_h = random_tensor({host.nnz(), 1}, seed + 1, 0.5f, 1.5f);
  if (e_h.defined()) e_d = e_h.to(Device::cuda());
  Cbsr x = maxk(random_tensor({host.n_cols, F}, seed + 2), k, strategy("cpu_ref"));
  if (mangle) mangle(x);
  const Cbsr xd = to_device(x);
  OpOptions o = gpu;
  o.stream = stream;

  Tensor ref;
  cbsr_spgemm(host, x, e_h, ref, strategy("cpu_ref"));
  Tensor out = Tensor::empty({host.n_rows, F}, DType::f32, Device::cuda());
  out.fill_(NAN, stream);
  cbsr_spgemm(dev, xd, e_d, out, o);

  const Tensor d_out = random_tensor({host.n_rows, F}, seed + 3);
  Tensor dref;
  cbsr_sspmm(host, e_h, d_out, x, dref, strategy("cpu_ref"));
  Tensor dd = Tensor::empty({host.n_cols, k}, DType::f32, Device::cuda());
  dd.fill_(NAN, stream);
  cbsr_sspmm(dev, e_d, d_out.to(Device::cuda()), xd, dd, o);
  if (stream) {
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  const double err_f = rel_error(out, ref), err_b = rel_error(dd, dref);
  EXPECT_LT(err_f, kTol) << "cbsr_spgemm";
  EXPECT_LT(err_b, kTol) << "cbsr_sspmm";
  if (!(err_f < kTol) || !(err_b < kTol)) ++g_failures;
}
#endif

TEST(MaxkGpu, CbsrProductsEveryGraphKindWidthAndK) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  int salt = 0;
  for (GraphKind kind : kinds())
    for (DType idx : {DType::i32, DType::i64}) {
      if (quick() && idx == DType::i64 && kind != GraphKind::rmat) continue;
      for (int64_t F : widths())
        for (int64_t k : ks_for(F)) {
          // int64 graphs take a spread of k (the kernels are the same templates over the index).
          if (idx == DType::i64 && ++salt % 3 != 0 && k != F) continue;
          check_products(kind, idx, F, k, (salt + int(k)) % 4, strategy("gpu"));
        }
    }
#endif
}

TEST(MaxkGpu, CbsrProductsParameters) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  // segment=32 splits most rows (zeroed split rows, atomic write-back); smem_buffer=0 is the
  // buffer-less path; warps=1 and 16 change the block shape; private_rows=0 is the forward's
  // row per warp with shared atomics, =1 forces a row per lane group even where it leaves
  // blocks of one warp; vec sets the values per lane (1 lane group of up to 32 lanes per edge
  // when k <= 32 at vec=1, up to 8 groups at vec=4); regs caps the registers (blocks of at most
  // 8 warps, so warps=16 is lowered). flat=1 runs the backward's edge chunks (segment = chunk
  // length; chunks of 32 split rows between warps, chunks of 65536 hold all the edges of these
  // graphs) and flat=0 its row segments. stream_edges=1 / 0 read the chunks' edge lists with
  // streaming / cached loads (k = 96 takes cached by default, k <= 16 streaming). These graphs' average degrees (< 64) pick the chunks by
  // default, so the sets without flat run them too and the flat=0 sets keep the segments (staged
  // rows, split rows, lean blocks, the buffer-less path) covered.
  const std::vector<std::map<std::string, int64_t>> params = {
      {{"segment", 32}}, {{"smem_buffer", 0}}, {{"warps", 1}}, {{"warps", 16}, {"segment", 256}},
      {{"segment", 65536}}, {{"private_rows", 0}}, {{"private_rows", 0}, {"segment", 32}},
      {{"vec", 1}}, {{"vec", 2}, {"segment", 32}}, {{"vec", 4}},
      {{"private_rows", 1}, {"vec", 4}, {"warps", 16}}, {{"private_rows", 1}, {"vec", 1}},
      {{"vec", 4}, {"segment", 32}, {"warps", 2}}, {{"regs", 40}}, {{"regs", 40}, {"warps", 16}},
      {{"regs", 0}, {"segment", 32}}, {{"regs", 40}, {"private_rows", 0}},
      {{"flat", 1}}, {{"flat", 1}, {"segment", 32}}, {{"flat", 1}, {"segment", 65536}},
      {{"flat", 1}, {"vec", 1}, {"warps", 16}}, {{"flat", 1}, {"vec", 2}, {"warps", 1}},
      {{"flat", 1}, {"regs", 40}}, {{"flat", 1}, {"smem_buffer", 0}},
      {{"flat", 1}, {"stream_edges", 1}, {"segment", 32}}, {{"flat", 1}, {"stream_edges", 0}},
      {{"flat", 1}, {"stream_edges", 1}, {"vec", 1}, {"regs", 40}}, {{"stream_edges", 1}},
      {{"flat", 0}, {"segment", 32}}, {{"flat", 0}}, {{"flat", 0}, {"regs", 40}, {"warps", 16}},
      {{"flat", 0}, {"smem_buffer", 0}, {"vec", 2}}};
  for (const auto& p : params)
    for (GraphKind kind : {GraphKind::rmat, GraphKind::half_row, GraphKind::star,
                           GraphKind::empty_rows})
      for (int64_t F : {int64_t{64}, int64_t{300}})
        for (int64_t k : {int64_t{2}, int64_t{7}, int64_t{16}, int64_t{96}, F}) {
          if (k > F || (quick() && k != 7 && k != F)) continue;
          check_products(kind, DType::i32, F, k, int(k % 4), strategy("gpu", p));
        }
#endif
}

// Every schedule the autotuner may pick (each valid point of either product's space: the
// forward's sets private_rows, the backward's flat) computes both products exactly; then a tuned
// result is stored and `auto` runs it.
TEST(MaxkGpu, CbsrEveryTunableScheduleAndTheTunedAuto) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  for (OpKind op : {OpKind::cbsr_spgemm, OpKind::cbsr_sspmm})
    for (GraphKind kind : {GraphKind::rmat, GraphKind::empty_rows})
      for (auto [F, k] : {std::pair<int64_t, int64_t>{64, 7}, {300, 32}, {64, 64}}) {
        const Graphs& G = graphs(kind, DType::i32);
        const detail::CbsrProblem p{&G.dev, op, k, F, true};
        const tune::Space space = tune::space_for_cbsr(p);
        ASSERT_EQ(space.strategies().size(), 1u);
        ASSERT_EQ(space.strategies()[0].name, "gpu");
        size_t checked = 0;
        for (size_t i : space.valid_indices()) {
          if (quick() && i % 5 != 0) continue;
          check_products(kind, DType::i32, F, k, int(i % 3),
                         strategy("gpu", space.schedule(i).params));
          ++checked;
        }
        EXPECT_GT(checked, 0u) << op_kind_name(op);
      }
  const std::string dir = ::testing::TempDir() + "spgnn-cbsr-tune-" + std::to_string(getpid());
  set_tuning_cache_path(dir + "/");
  TuneOptions o;
  o.mode = TuneMode::random;
  o.reps = 2;
  o.min_timed_ms = 0;
  const Graphs& G = graphs(GraphKind::rmat, DType::i32);
  for (OpKind op : {OpKind::cbsr_spgemm, OpKind::cbsr_sspmm}) {
    const TuneResult r = tune_cbsr(G.dev, op, 16, 64, true, o);
    EXPECT_EQ(r.best.strategy, "gpu");
    EXPECT_TRUE(r.stored);
    EXPECT_GE(r.candidates.size(), 2u);
    EXPECT_TRUE(std::isfinite(r.best_ms));
    EXPECT_GT(r.valid_size, 1u);
  }
  check_products(GraphKind::rmat, DType::i32, 64, 16, 2, strategy("auto"));
  set_tuning_cache_path("");
  std::filesystem::remove_all(dir);
#endif
}

// A CBSR that maxk did not make may repeat or misorder columns; the forward's plain adds (one
// shared-memory row per lane group) must notice and add such rows with atomics.
[[maybe_unused]] void repeat_and_reverse_columns(Cbsr& x) {
  const int64_t n = x.index.dim(0), k = x.k;
  Tensor idx = x.index.astype(DType::i64);
  int64_t* p = idx.data<int64_t>();
  for (int64_t r = 0; r < n; ++r) {
    int64_t* row = p + r * k;
    if (k < 2) continue;
    if (r % 3 == 0) row[k / 2] = row[k / 2 - 1];                    // a repeat
    if (r % 3 == 1) std::reverse(row, row + k);                     // descending
    if (r % 5 == 2) for (int64_t j = 0; j < k; ++j) row[j] = row[0];  // all the same column
  }
  x.index = idx.astype(x.index.dtype());
}

TEST(MaxkGpu, CbsrProductsRepeatedOrUnsortedColumns) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  for (GraphKind kind : {GraphKind::rmat, GraphKind::star, GraphKind::empty_rows})
    for (int64_t F : {int64_t{64}, int64_t{300}})
      for (int64_t k : {int64_t{2}, int64_t{7}, int64_t{16}, int64_t{32}, int64_t{64}}) {
        if (quick() && k != 7 && k != 32) continue;
        for (const auto& p : std::vector<std::map<std::string, int64_t>>{
                 {}, {{"vec", 1}}, {{"vec", 4}}, {{"vec", 2}, {"segment", 32}}})
          check_products(kind, DType::i32, F, k, int(k % 4), strategy("gpu", p), nullptr,
                         repeat_and_reverse_columns);
      }
#endif
}

TEST(MaxkGpu, CbsrProductsOnAStream) {
  SPGNN_REQUIRE_GPU();
#if SPGNN_WITH_CUDA
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  check_products(GraphKind::rmat, DType::i32, 256, 16, 2, strategy("auto"), s);
  check_products(GraphKind::half_row, DType::i64, 300, 32, 0, strategy("gpu", {{"segment", 64}}),
                 s);
  cudaStreamDestroy(s);
#endif
}

TEST(MaxkGpu, WrongDeviceIsAClearError) {
  SPGNN_REQUIRE_GPU();
  const Graph& g = graphs(GraphKind::uniform, DType::i32).dev;
  const Cbsr host_x = maxk(random_tensor({g.n_cols, 16}, seed_for(40)), 4);
  Tensor out;
  try {
    cbsr_spgemm(g, host_x, Tensor(), out);
    ADD_FAILURE() << "expected InvalidArgument";
  } catch (const InvalidArgument& ex) {
    EXPECT_NE(std::string(ex.what()).find("x.data"), std::string::npos) << ex.what();
  }
  OpOptions cpu;
  cpu.schedule.strategy = "cpu";
  EXPECT_THROW(maxk(random_tensor({4, 16}, 1).to(Device::cuda()), 3, cpu), Unsupported);
}

}  // namespace
}  // namespace spgnn::test
