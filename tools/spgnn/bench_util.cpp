#include "spgnn/bench_util.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

namespace spgnn::cli {

Device bench_device(const std::string& flag) {
  const Device dev = flag == "auto" ? (cuda_available() ? Device::cuda() : Device::cpu())
                                    : parse_device(flag);
  SPGNN_CHECK(!dev.is_cuda() || cuda_available(), InvalidArgument, "--device ", flag,
              ": no CUDA device is available (this build has CUDA: ",
              SPGNN_WITH_CUDA ? "yes" : "no", ")");
  return dev;
}

void check_bench_names(const std::vector<std::string>& graphs,
                       const std::vector<std::string>& names) {
  SPGNN_CHECK(names.empty() || names.size() == graphs.size(), InvalidArgument,
              "--name: give one name per --graph (", graphs.size(), " graphs, ", names.size(),
              " names)");
}

namespace {
// The i-th value of the seed's splitmix64 stream, uniform in [0, 1).
double unit_at(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ULL + i + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return double(z >> 11) * (1.0 / 9007199254740992.0);
}
}  // namespace

Tensor random_values(std::vector<int64_t> shape, uint64_t seed, float lo, float hi) {
  Tensor t = Tensor::empty(std::move(shape), DType::f32);
  float* p = t.data<float>();
  const int64_t n = t.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = lo + (hi - lo) * float(unit_at(seed, uint64_t(i)));
  return t;
}

Tensor random_normal(std::vector<int64_t> shape, uint64_t seed) {
  Tensor t = Tensor::empty(std::move(shape), DType::f32);
  float* p = t.data<float>();
  const int64_t n = t.numel();
  constexpr double kTwoPi = 6.283185307179586;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    // Value i from the pair (2i, 2i + 1); 1 - u keeps the logarithm's argument in (0, 1].
    const double u = 1.0 - unit_at(seed, 2 * uint64_t(i)), w = unit_at(seed, 2 * uint64_t(i) + 1);
    p[i] = float(std::sqrt(-2.0 * std::log(u)) * std::cos(kTwoPi * w));
  }
  return t;
}

RowSample sample_rows(const Graph& g, int64_t max_rows, uint64_t seed) {
  RowSample s;
  const std::vector<int64_t> rp = g.rowptr.astype(DType::i64).to_vector<int64_t>();
  if (g.n_rows <= max_rows) {
    for (int64_t i = 0; i < g.n_rows; ++i) s.rows.push_back(i);
  } else {
    int64_t big = 0;
    for (int64_t i = 0; i < g.n_rows; ++i)
      if (rp[size_t(i) + 1] - rp[size_t(i)] > rp[size_t(big) + 1] - rp[size_t(big)]) big = i;
    s.rows.push_back(big);
    std::mt19937_64 rng(seed);
    while (int64_t(s.rows.size()) < max_rows) s.rows.push_back(int64_t(rng() % uint64_t(g.n_rows)));
    std::sort(s.rows.begin(), s.rows.end());
    s.rows.erase(std::unique(s.rows.begin(), s.rows.end()), s.rows.end());
  }
  const std::vector<int64_t> col = g.col.astype(DType::i64).to_vector<int64_t>();
  std::vector<int64_t> r, c;
  for (size_t k = 0; k < s.rows.size(); ++k)
    for (int64_t e = rp[size_t(s.rows[k])]; e < rp[size_t(s.rows[k]) + 1]; ++e) {
      r.push_back(int64_t(k));
      c.push_back(col[size_t(e)]);
      s.edges.push_back(e);
    }
  BuildOptions keep;
  keep.duplicates = DuplicatePolicy::keep;
  keep.index_width = IndexWidth::i64;
  s.graph = graph_from_edges(int64_t(s.rows.size()), g.n_cols, r, c, {}, keep);
  return s;
}

Tensor gather_rows(const Tensor& t_any, const std::vector<int64_t>& ids) {
  const Tensor t = t_any.device().is_cuda() ? t_any.to(Device::cpu()) : t_any;
  const int64_t w = t.ndim() == 1 ? 1 : t.dim(1);
  const size_t es = dtype_size(t.dtype());
  Tensor out = Tensor::empty({int64_t(ids.size()), w}, t.dtype());
  const auto* src = static_cast<const unsigned char*>(t.raw());
  auto* dst = static_cast<unsigned char*>(out.raw());
  for (size_t i = 0; i < ids.size(); ++i)
    std::memcpy(dst + i * size_t(w) * es, src + size_t(ids[i]) * size_t(w) * es, size_t(w) * es);
  return out;
}

double rel_err(const Tensor& got_any, const Tensor& ref_any) {
  // Half-precision results are compared by their exact float32 values.
  auto f32 = [](const Tensor& t) {
    const Tensor h = t.to(Device::cpu());
    return h.dtype() == DType::f32 ? h : h.astype(DType::f32);
  };
  const Tensor got = f32(got_any), ref = f32(ref_any);
  const float* a = got.data<float>();
  const float* b = ref.data<float>();
  double num = 0, den = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

}  // namespace spgnn::cli
