// The autotuner's cost model (G-Sparse §D): features of (problem, schedule) and a small MLP that
// predicts each schedule's time relative to the fastest schedule of its problem.
//
// Choices, with their reasons:
//  - Batch normalisation is a fixed standardisation fitted on the training set (the population
//    mean/stddev of every feature). As the first layer of the paper's network, batch norm on the
//    (log) inputs is exactly "standardise, then an affine map"; the affine map is absorbed by the
//    first dense layer, and the statistics BN would converge to as running averages are the ones
//    computed here directly. It avoids noisy 64-sample batch statistics over a mostly one-hot
//    input and any train/inference difference, and keeps fitting deterministic and simple.
//  - The paper's final "normalisation layer" is a standardisation of the target (mean/stddev of
//    log(ms / fastest ms) on the training set), undone at prediction.
//  - After the held-out report, the model is refitted on all problems: measurements are scarce
//    (each costs real GPU runs) and every measured graph shape helps ranking on the next graph;
//    the held-out correlation then estimates the fitting procedure, slightly pessimistically.
//  - Training cost is bounded: `epochs` passes over the training set, but at most
//    kMaxSamplePasses samples in all, so 10k measurements fit in a few seconds on one core.
#include "tune/cost_model.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/shape_math.hpp"
#include "kernels/shuffle_shape.hpp"
#include "spgnn/error.hpp"

namespace spgnn::tune {

namespace {

constexpr const char* kFormatName = "spgnn-cost-model";
constexpr int kFormatVersion = 1;
constexpr int kMaxHidden = 4096;
constexpr int kBatch = 64;
constexpr double kPi = 3.14159265358979323846;
constexpr int64_t kMaxSamplePasses = 400000;
constexpr size_t kMinMeasurements = 16;
constexpr size_t kMinProblems = 2;
// Features model the launchers for an H100 (the target GPU of the suite): used only where a
// launcher sizes itself from the device (gnnone's unset cache_size/warps, warp_vertex's persistent
// grid, gnnone's L2-bounded feature chunks). Other GPUs shift these features consistently.
constexpr int64_t kAssumedSms = 132;
constexpr double kAssumedL2Bytes = 50.0 * (1 << 20);
constexpr int64_t kWarpsPerSm = 64;              // warp_vertex.cu kWarpsPerSm
constexpr int64_t kMergePathMinWarps = 8192;     // mergepath_spmm.cu kMinWarps
constexpr int64_t kMergePathWarpsPerBlock = 4;   // mergepath_spmm.cu kWarps
constexpr int64_t kShuffleMaxWarpsPerBlock = 8;  // shuffle_sddmm.cu kMaxWarpsPerBlock
constexpr int64_t kWvSoftwareMinVertices = 1000000;
constexpr double kWvSoftwareMinAvgDegree = 50.0;
constexpr int64_t kInt32Limit = 2147483647;  // pick_index_dtype switches to int64 here

// ---- features ------------------------------------------------------------------------------

// Strategies of the op in name order, so the one-hot and parameter blocks do not move when the
// registry is reordered.
std::vector<StrategyInfo> sorted_strategies(OpKind op) {
  std::vector<StrategyInfo> s = list_strategies(op);
  std::sort(s.begin(), s.end(),
            [](const StrategyInfo& a, const StrategyInfo& b) { return a.name < b.name; });
  return s;
}

bool pow2_coded(const ParamSpec& p) {
  if (p.values.empty()) return false;
  for (int64_t v : p.values)
    if (v <= 0 || (v & (v - 1)) != 0) return false;
  return true;
}

double encode_param(const ParamSpec& p, int64_t v) {
  return pow2_coded(p) ? std::log2(static_cast<double>(std::max<int64_t>(v, 1)))
                       : static_cast<double>(v);
}

int64_t ceil_div(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }
using detail::log2_ceil;
// Vector width the CUDA kernels pick for F (device buffers are always aligned for it).
int vector_width(int64_t F) { return F % 4 == 0 ? 4 : F % 2 == 0 ? 2 : 1; }

// Launch geometry of a strategy as its launcher computes it. `units` are warps (CPU: chunks),
// `row_units` the warps that cover every row once (units without the feature splitting), so
// nnz / row_units is the work of one warp.
struct Geometry {
  double units = 0, row_units = 0, block_threads = 0, blocks = 0;
};

int64_t param_value(const StrategyInfo& info, const Schedule& s, const std::string& name) {
  auto it = s.params.find(name);
  if (it != s.params.end()) return it->second;
  for (const auto& p : info.params)
    if (p.name == name) return p.default_value;
  return 0;
}

Geometry geometry(const ProblemStats& p, const StrategyInfo& info, const Schedule& s) {
  Geometry g;
  const auto prm = [&](const char* name) { return param_value(info, s, name); };
  const int64_t n = p.n_rows, nnz = p.nnz, F = std::max<int64_t>(p.F, 1);
  const std::string& name = info.name;
  if (name == "gnnone") {
    // gnnone_common.cuh read_params / make_geometry / max_group_lanes.
    const bool unset_cache = s.params.count("cache_size") == 0;
    auto sized = [&](int64_t c) {  // an unset cache halves while the graph has few slices
      while (unset_cache && c > 32 && ceil_div(nnz, c) < kAssumedSms * 16) c /= 2;
      return c;
    };
    int64_t cache = sized(prm("cache_size")), warps = prm("warps");
    if (s.params.count("warps") == 0) {
      const int64_t slices = ceil_div(nnz, cache);
      while (warps > 1 && ceil_div(slices, warps) < kAssumedSms * 4) warps /= 2;
    }
    // gnnone_spmm.cu then restarts an unset cache at 256 (float32; this model has no dtype).
    if (p.op == OpKind::spmm && unset_cache) cache = sized(256);
    cache = std::max<int64_t>(cache, 1);
    warps = std::max<int64_t>(warps, 1);
    const int V = prm("vector_loads") ? vector_width(F) : 1;
    const int64_t cols = p.op == OpKind::spmm ? p.n_cols : std::max(p.n_cols, p.n_rows);
    const int max_group = detail::gnnone_max_group(F, vector_width(F), 4, cols,
                                                   kAssumedL2Bytes, p.op == OpKind::spmm);
    const int64_t nv = F / V;
    int lg = 0;
    while ((int64_t{1} << lg) < nv && (2 << lg) <= max_group) ++lg;
    const int64_t passes = ceil_div(nv, int64_t{1} << lg);
    const int64_t slices = ceil_div(nnz, cache);
    g.row_units = double(slices);
    g.units = double(slices) * double(passes);
    g.block_threads = double(warps * 32);
    g.blocks = double(ceil_div(slices, warps)) * double(passes);
  } else if (name == "mergepath") {
    // mergepath_spmm.cu: `cost` merge-path items per thread, lowered to fill kMinWarps warps.
    const int64_t cost = std::max<int64_t>(prm("cost"), 1);
    const int64_t nv = F / vector_width(F);
    const int g_log2 = std::min(5, log2_ceil(nv));
    const int64_t passes = ceil_div(nv, 32);
    const int64_t total = n + nnz;
    const int64_t min_threads =
        std::max<int64_t>(1, kMergePathMinWarps * (32 >> g_log2) / std::max<int64_t>(passes, 1));
    const int64_t eff_cost = std::clamp<int64_t>(ceil_div(total, min_threads), 1, cost);
    const int64_t threads = ceil_div(total, eff_cost);
    const int64_t warps = ceil_div(threads, 32 >> g_log2);
    g.row_units = double(warps);
    g.units = double(warps) * double(passes);
    g.block_threads = double(kMergePathWarpsPerBlock * 32);
    g.blocks = double(ceil_div(warps * passes, kMergePathWarpsPerBlock));
  } else if (name == "warp_vertex") {
    // warp_vertex.cu: groups of next_pow2(F/V) lanes (<= 32) per vertex; hardware assignment
    // launches a warp per warp-task, software a persistent grid taking `step` tasks at a time.
    const int64_t warps = std::max<int64_t>(prm("warps"), 1);
    const int64_t assign = prm("assign"), step = std::max<int64_t>(prm("step"), 1);
    const int64_t nv = F / vector_width(F);
    const int g_log2 = std::min(5, log2_ceil(nv));
    const int64_t tasks = ceil_div(n, 32 >> g_log2);
    const bool software = assign == 2 || (assign == 0 && (n > kWvSoftwareMinVertices ||
                                                          p.avg_deg > kWvSoftwareMinAvgDegree));
    int64_t blocks = ceil_div(tasks, warps);
    if (software)
      blocks = std::max<int64_t>(
          1, std::min(kAssumedSms * (kWarpsPerSm / warps), ceil_div(ceil_div(tasks, step), warps)));
    g.row_units = double(tasks);
    g.units = double(tasks);
    g.block_threads = double(warps * 32);
    g.blocks = double(blocks);
  } else if (name == "rowtile") {
    // rowtile_spmm.cu: teams of n_tile / reg_tile lanes per row, m_tile rows per block.
    const int64_t m_tile = std::max<int64_t>(prm("m_tile"), 1);
    const int64_t n_tile = std::max<int64_t>(prm("n_tile"), 1);
    const int64_t reg_tile = std::max<int64_t>({prm("reg_tile"), n_tile / 32, 1});
    const int64_t lanes = std::max<int64_t>(1, n_tile / reg_tile);
    const int64_t threads = m_tile * lanes;
    const int64_t feature_tiles = ceil_div(F, lanes * reg_tile);
    const int64_t warps_per_block = ceil_div(threads, 32);
    const int64_t row_blocks = ceil_div(n, m_tile);
    g.row_units = double(row_blocks) * double(warps_per_block);
    g.units = g.row_units * double(feature_tiles);
    g.block_threads = double(threads);
    g.blocks = double(row_blocks) * double(feature_tiles);
  } else if (name == "shuffle") {
    // shuffle_sddmm.cu: L lanes per edge (0 = smallest power of two giving a lane <= 2
    // vectors), edges_per_block edges per block, at most 8 warps per block.
    const int64_t lanes = prm("lanes"), epb = std::max<int64_t>(prm("edges_per_block"), 1);
    const int64_t nv = F / vector_width(F);
    const int lanes_log2 =
        lanes ? log2_ceil(lanes) : detail::shuffle::adaptive_lanes_log2(nv, /*wide_half=*/false);
    const int64_t wpb = std::clamp<int64_t>(ceil_div(epb, 32 >> lanes_log2), 1,
                                            kShuffleMaxWarpsPerBlock);
    const int64_t blocks = ceil_div(nnz, epb);
    g.row_units = double(blocks) * double(wpb);
    g.units = g.row_units;
    g.block_threads = double(wpb * 32);
    g.blocks = double(blocks);
  } else if (name == "cpu_mergepath") {
    // cpu_mergepath.cpp: threads x chunks_per_thread chunks of the merge path, whose length is
    // row_cost * n + nnz. The thread count is this process's, like the kernel's.
    const int64_t threads = std::max(1, omp_get_max_threads());
    const int64_t row_cost = std::max<int64_t>(prm("row_cost"), 1);
    const int64_t total = row_cost * n + nnz;
    const int64_t chunks =
        std::max<int64_t>(1, std::min<int64_t>(threads * prm("chunks_per_thread"), total));
    g.row_units = double(chunks);
    g.units = double(chunks);
    g.block_threads = 1;
    g.blocks = double(threads);
  }
  // cusparse, cpu_ref, cpu_edge: no parameter defines their decomposition; left at 0.
  return g;
}

// nnz * (row + col index + value) + one gathered feature row per edge + one output row per row:
// the convention of spmm_bytes / sddmm_bytes (u_mul_e SpMM, u.v SDDMM have the same count).
double bytes_moved(const ProblemStats& p) {
  const double idx =
      (p.n_rows >= kInt32Limit || p.n_cols >= kInt32Limit || p.nnz >= kInt32Limit) ? 8.0 : 4.0;
  const double nnz = double(p.nnz), F = double(p.F);
  return nnz * (2 * idx + 4) + nnz * F * 4 + double(p.n_rows) * F * 4;
}

void check_problem(const ProblemStats& p) {
  SPGNN_CHECK(p.n_rows >= 0 && p.n_cols >= 0 && p.nnz >= 0 && p.F >= 0 && p.empty_rows >= 0,
              InvalidArgument, "cost model: problem sizes must be >= 0, got n_rows=", p.n_rows,
              " n_cols=", p.n_cols, " nnz=", p.nnz, " F=", p.F, " empty_rows=", p.empty_rows);
  SPGNN_CHECK(p.empty_rows <= p.n_rows, InvalidArgument, "cost model: empty_rows=", p.empty_rows,
              " exceeds n_rows=", p.n_rows);
  const std::pair<const char*, double> degrees[] = {
      {"avg_deg", p.avg_deg}, {"max_deg", p.max_deg}, {"deg_cv", p.deg_cv}};
  for (const auto& [name, v] : degrees)
    SPGNN_CHECK(std::isfinite(v) && v >= 0, InvalidArgument, "cost model: problem ", name,
                " must be finite and >= 0, got ", v);
}

// ---- the network ---------------------------------------------------------------------------

// Offsets of the parts of CostModel::params_ for d inputs and h hidden units. Dense weights are
// stored input-major (w[i * out + o]) so both passes run unit-stride loops over the outputs.
struct Layout {
  size_t d, h;
  size_t mean() const { return 0; }
  size_t stdev() const { return d; }
  size_t w1() const { return 2 * d; }
  size_t b1() const { return w1() + d * h; }
  size_t w2() const { return b1() + h; }
  size_t b2() const { return w2() + h * h; }
  size_t w3() const { return b2() + h; }
  size_t b3() const { return w3() + h; }
  size_t target_mean() const { return b3() + 1; }
  size_t target_std() const { return target_mean() + 1; }
  size_t size() const { return target_std() + 1; }
  // The trainable block w1..b3 is contiguous.
  size_t trainable_begin() const { return w1(); }
  size_t trainable_size() const { return b3() + 1 - w1(); }
};

template <class T>
double forward_one(const Layout& L, const T* theta, const double* x, std::vector<double>& a1,
                   std::vector<double>& a2) {
  const size_t d = L.d, h = L.h;
  const T* w1 = theta;
  const T* b1 = w1 + d * h;
  const T* w2 = b1 + h;
  const T* b2 = w2 + h * h;
  const T* w3 = b2 + h;
  const T* b3 = w3 + h;
  a1.assign(b1, b1 + h);
  for (size_t i = 0; i < d; ++i)
    for (size_t o = 0; o < h; ++o) a1[o] += x[i] * double(w1[i * h + o]);
  for (auto& v : a1) v = std::max(v, 0.0);
  a2.assign(b2, b2 + h);
  for (size_t j = 0; j < h; ++j)
    if (a1[j] != 0)
      for (size_t o = 0; o < h; ++o) a2[o] += a1[j] * double(w2[j * h + o]);
  double out = double(*b3);
  for (size_t j = 0; j < h; ++j) out += std::max(a2[j], 0.0) * double(w3[j]);
  return out;
}

// Deterministic across standard libraries (std::*_distribution are not).
struct FitRng {
  std::mt19937_64 g;
  explicit FitRng(uint64_t seed) : g(seed) {}
  double uniform() { return double(g() >> 11) * 0x1.0p-53; }
  size_t below(size_t n) { return n ? size_t(g() % n) : 0; }
  template <class V>
  void shuffle(V& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(i)]);
  }
};

struct Trained {
  std::vector<double> params;  // Layout order
};

// Standardises x (n x d, row-major) and y, then trains the MLP with Adam on mini-batches, in float
// (the sizes are tiny; float halves the time of the unit-stride loops).
Trained train(const std::vector<double>& x, const std::vector<double>& y, size_t d,
              const CostModel::FitOptions& o) {
  const size_t n = y.size(), h = static_cast<size_t>(o.hidden);
  const Layout L{d, h};
  Trained out;
  out.params.assign(L.size(), 0.0);
  double* mean = out.params.data() + L.mean();
  double* sd = out.params.data() + L.stdev();
  for (size_t r = 0; r < n; ++r)
    for (size_t i = 0; i < d; ++i) mean[i] += x[r * d + i];
  for (size_t i = 0; i < d; ++i) mean[i] /= double(n);
  for (size_t r = 0; r < n; ++r)
    for (size_t i = 0; i < d; ++i) sd[i] += (x[r * d + i] - mean[i]) * (x[r * d + i] - mean[i]);
  // A constant feature (a strategy absent from the data) stays 0 after centring.
  for (size_t i = 0; i < d; ++i) {
    sd[i] = std::sqrt(sd[i] / double(n));
    if (!(sd[i] > 1e-12)) sd[i] = 1.0;
  }
  double ym = 0, ys = 0;
  for (double v : y) ym += v;
  ym /= double(n);
  for (double v : y) ys += (v - ym) * (v - ym);
  ys = std::sqrt(ys / double(n));
  if (!(ys > 1e-12)) ys = 1.0;
  out.params[L.target_mean()] = ym;
  out.params[L.target_std()] = ys;

  std::vector<float> X(n * d), T(n);
  for (size_t r = 0; r < n; ++r) {
    for (size_t i = 0; i < d; ++i) X[r * d + i] = float((x[r * d + i] - mean[i]) / sd[i]);
    T[r] = float((y[r] - ym) / ys);
  }

  // He-uniform initialisation, biases 0.
  FitRng rng(o.seed);
  const size_t P = L.trainable_size();
  std::vector<float> theta(P, 0.f), grad(P), m(P, 0.f), v(P, 0.f);
  const size_t ow1 = 0, ob1 = d * h, ow2 = ob1 + h, ob2 = ow2 + h * h, ow3 = ob2 + h,
               ob3 = ow3 + h;
  auto init = [&](size_t off, size_t count, size_t fan_in) {
    const double lim = std::sqrt(6.0 / double(std::max<size_t>(fan_in, 1)));
    for (size_t k = 0; k < count; ++k) theta[off + k] = float((2 * rng.uniform() - 1) * lim);
  };
  init(ow1, d * h, d);
  init(ow2, h * h, h);
  init(ow3, h, h);

  const size_t batch = std::min<size_t>(kBatch, n);
  const int64_t epochs = std::max<int64_t>(
      1, std::min<int64_t>(o.epochs, kMaxSamplePasses / static_cast<int64_t>(n)));
  const size_t steps_per_epoch = (n + batch - 1) / batch;
  const double total_steps = double(epochs) * double(steps_per_epoch);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::vector<float> z1(batch * h), z2(batch * h), a2(batch * h), dz2(h), da1(h), w2t(h * h);
  std::vector<float> outv(batch);
  const double b1c = 0.9, b2c = 0.999, eps = 1e-8;
  double b1t = 1, b2t = 1;
  int64_t step = 0;
  for (int64_t ep = 0; ep < epochs; ++ep) {
    rng.shuffle(order);
    for (size_t start = 0; start < n; start += batch) {
      const size_t B = std::min(batch, n - start);
      std::fill(grad.begin(), grad.end(), 0.f);
      const float* w1 = theta.data() + ow1;
      const float* w2 = theta.data() + ow2;
      const float* w3 = theta.data() + ow3;
      for (size_t j = 0; j < h; ++j)
        for (size_t k = 0; k < h; ++k) w2t[k * h + j] = w2[j * h + k];
      // Forward; z1/z2 keep pre-activations (their sign is the ReLU mask in the backward pass).
      for (size_t b = 0; b < B; ++b) {
        const float* xr = X.data() + order[start + b] * d;
        float* z1r = z1.data() + b * h;
        float* z2r = z2.data() + b * h;
        float* a2r = a2.data() + b * h;
        std::copy(theta.begin() + ob1, theta.begin() + ob1 + h, z1r);
        for (size_t i = 0; i < d; ++i) {
          const float xi = xr[i];
          const float* wr = w1 + i * h;
          for (size_t k = 0; k < h; ++k) z1r[k] += xi * wr[k];
        }
        std::copy(theta.begin() + ob2, theta.begin() + ob2 + h, z2r);
        for (size_t j = 0; j < h; ++j) {
          const float aj = std::max(z1r[j], 0.f);
          if (aj == 0.f) continue;
          const float* wr = w2 + j * h;
          for (size_t k = 0; k < h; ++k) z2r[k] += aj * wr[k];
        }
        float acc = theta[ob3];
        for (size_t k = 0; k < h; ++k) {
          a2r[k] = std::max(z2r[k], 0.f);
          acc += a2r[k] * w3[k];
        }
        outv[b] = acc;
      }
      // Backward of mean squared error over the batch.
      for (size_t b = 0; b < B; ++b) {
        const float* xr = X.data() + order[start + b] * d;
        const float* z1r = z1.data() + b * h;
        const float* z2r = z2.data() + b * h;
        const float* a2r = a2.data() + b * h;
        const float dout = 2.f * (outv[b] - T[order[start + b]]) / float(B);
        grad[ob3] += dout;
        for (size_t k = 0; k < h; ++k) {
          grad[ow3 + k] += dout * a2r[k];
          dz2[k] = z2r[k] > 0.f ? dout * w3[k] : 0.f;
          grad[ob2 + k] += dz2[k];
        }
        std::fill(da1.begin(), da1.end(), 0.f);
        for (size_t k = 0; k < h; ++k) {
          const float g = dz2[k];
          if (g == 0.f) continue;
          const float* wr = w2t.data() + k * h;
          for (size_t j = 0; j < h; ++j) da1[j] += g * wr[j];
        }
        for (size_t j = 0; j < h; ++j) {
          const float aj = std::max(z1r[j], 0.f);
          if (aj != 0.f) {
            float* gr = grad.data() + ow2 + j * h;
            for (size_t k = 0; k < h; ++k) gr[k] += aj * dz2[k];
          }
          da1[j] = z1r[j] > 0.f ? da1[j] : 0.f;
          grad[ob1 + j] += da1[j];
        }
        for (size_t i = 0; i < d; ++i) {
          const float xi = xr[i];
          float* gr = grad.data() + ow1 + i * h;
          for (size_t k = 0; k < h; ++k) gr[k] += xi * da1[k];
        }
      }
      // Adam with a cosine decay to a tenth of the rate: the late, small steps settle the fit.
      ++step;
      b1t *= b1c;
      b2t *= b2c;
      const double lr = o.lr * (0.1 + 0.45 * (1 + std::cos(kPi * double(step) / total_steps)));
      const float alpha = float(lr * std::sqrt(1 - b2t) / (1 - b1t));
      for (size_t k = 0; k < P; ++k) {
        m[k] = float(b1c) * m[k] + float(1 - b1c) * grad[k];
        v[k] = float(b2c) * v[k] + float(1 - b2c) * grad[k] * grad[k];
        theta[k] -= alpha * m[k] / (std::sqrt(v[k]) + float(eps));
      }
    }
  }
  for (size_t k = 0; k < P; ++k) out.params[L.trainable_begin() + k] = double(theta[k]);
  return out;
}

double predict_row(const Layout& L, const std::vector<double>& params, const double* raw) {
  std::vector<double> xs(L.d), a1, a2;
  for (size_t i = 0; i < L.d; ++i)
    xs[i] = (raw[i] - params[L.mean() + i]) / params[L.stdev() + i];
  const double z = forward_one(L, params.data() + L.trainable_begin(), xs.data(), a1, a2);
  return z * params[L.target_std()] + params[L.target_mean()];
}

// Measurements of one problem on one device are compared with each other only.
using ProblemKey =
    std::tuple<int, int64_t, int64_t, int64_t, int64_t, double, double, double, int64_t, bool,
               std::string>;
ProblemKey key_of(const Measurement& m) {
  const ProblemStats& p = m.problem;
  return {int(p.op), p.n_rows, p.n_cols, p.nnz, p.F, p.avg_deg, p.max_deg, p.deg_cv,
          p.empty_rows, p.gpu, m.device_name};
}

// ---- JSON ----------------------------------------------------------------------------------

const nlohmann::json& field(const nlohmann::json& j, const char* name) {
  SPGNN_CHECK(j.contains(name), InvalidArgument, "cost model JSON: missing field '", name, "'");
  return j.at(name);
}

std::vector<double> number_array(const nlohmann::json& j, const char* name, size_t expected) {
  const nlohmann::json& a = field(j, name);
  SPGNN_CHECK(a.is_array(), InvalidArgument, "cost model JSON: field '", name,
              "' must be an array of numbers");
  SPGNN_CHECK(a.size() == expected, InvalidArgument, "cost model JSON: field '", name, "' has ",
              a.size(), " values, expected ", expected);
  std::vector<double> out;
  out.reserve(expected);
  for (size_t k = 0; k < a.size(); ++k) {
    SPGNN_CHECK(a[k].is_number() && std::isfinite(a[k].get<double>()), InvalidArgument,
                "cost model JSON: field '", name, "'[", k, "] is not a finite number");
    out.push_back(a[k].get<double>());
  }
  return out;
}

double number(const nlohmann::json& j, const char* name) {
  const nlohmann::json& v = field(j, name);
  SPGNN_CHECK(v.is_number() && std::isfinite(v.get<double>()), InvalidArgument,
              "cost model JSON: field '", name, "' must be a finite number");
  return v.get<double>();
}

}  // namespace

// ---- public API ----------------------------------------------------------------------------

std::vector<std::string> feature_names(OpKind op) {
  std::vector<std::string> names = {"log1p_n_rows",  "log1p_n_cols",  "log1p_nnz",
                                    "log1p_F",       "log1p_avg_deg", "log1p_max_deg",
                                    "log1p_deg_cv",  "empty_row_frac", "gpu"};
  const std::vector<StrategyInfo> strategies = sorted_strategies(op);
  for (const auto& s : strategies) names.push_back("strategy=" + s.name);
  for (const auto& s : strategies)
    for (const auto& p : s.params)
      names.push_back(pow2_coded(p) ? "log2(" + s.name + "." + p.name + ")"
                                    : s.name + "." + p.name);
  for (const char* d : {"log1p_warps", "log1p_warps_covering_rows", "log1p_block_threads",
                        "log1p_blocks", "log1p_nnz_per_warp", "log1p_rows_per_warp",
                        "log1p_bytes_moved"})
    names.push_back(d);
  return names;
}

std::vector<double> featurize(const ProblemStats& p, const Schedule& s) {
  check_problem(p);
  SPGNN_CHECK(s.strategy != "auto", InvalidArgument,
              "cost model: a schedule to featurize names a strategy, not 'auto'");
  check_schedule(p.op, s);  // unknown strategy / parameter / illegal value: InvalidArgument
  const StrategyInfo& chosen = find_strategy(p.op, s.strategy);

  std::vector<double> f;
  const double n = double(p.n_rows);
  f.push_back(std::log1p(n));
  f.push_back(std::log1p(double(p.n_cols)));
  f.push_back(std::log1p(double(p.nnz)));
  f.push_back(std::log1p(double(p.F)));
  f.push_back(std::log1p(p.avg_deg));
  f.push_back(std::log1p(p.max_deg));
  // The coefficient of variation reaches sqrt(n) on a star graph: log-scaled like the sizes.
  f.push_back(std::log1p(p.deg_cv));
  f.push_back(p.n_rows > 0 ? double(p.empty_rows) / n : 0.0);
  f.push_back(p.gpu ? 1.0 : 0.0);

  const std::vector<StrategyInfo> strategies = sorted_strategies(p.op);
  for (const auto& st : strategies) f.push_back(st.name == chosen.name ? 1.0 : 0.0);
  for (const auto& st : strategies)
    for (const auto& spec : st.params)
      f.push_back(st.name == chosen.name ? encode_param(spec, param_value(st, s, spec.name)) : 0.0);

  const Geometry g = geometry(p, chosen, s);
  const auto per = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  f.push_back(std::log1p(g.units));
  f.push_back(std::log1p(g.row_units));
  f.push_back(std::log1p(g.block_threads));
  f.push_back(std::log1p(g.blocks));
  f.push_back(std::log1p(per(double(p.nnz), g.row_units)));
  f.push_back(std::log1p(per(n, g.row_units)));
  f.push_back(std::log1p(bytes_moved(p)));
  return f;
}

double pearson(const std::vector<double>& a, const std::vector<double>& b) {
  SPGNN_CHECK(a.size() == b.size(), InvalidArgument, "pearson: series of different lengths (",
              a.size(), " and ", b.size(), ")");
  const size_t n = a.size();
  if (n < 2) return 0.0;
  const double ma = std::accumulate(a.begin(), a.end(), 0.0) / double(n);
  const double mb = std::accumulate(b.begin(), b.end(), 0.0) / double(n);
  double sab = 0, saa = 0, sbb = 0;
  for (size_t k = 0; k < n; ++k) {
    sab += (a[k] - ma) * (b[k] - mb);
    saa += (a[k] - ma) * (a[k] - ma);
    sbb += (b[k] - mb) * (b[k] - mb);
  }
  if (!(saa > 0) || !(sbb > 0)) return 0.0;
  return sab / std::sqrt(saa * sbb);
}

CostModel::FitReport CostModel::fit(const std::vector<Measurement>& data,
                                    const FitOptions& options) {
  SPGNN_CHECK(options.epochs >= 1, InvalidArgument, "cost model fit: epochs must be >= 1, got ",
              options.epochs);
  SPGNN_CHECK(std::isfinite(options.lr) && options.lr > 0, InvalidArgument,
              "cost model fit: lr must be a positive number, got ", options.lr);
  SPGNN_CHECK(options.hidden >= 1 && options.hidden <= kMaxHidden, InvalidArgument,
              "cost model fit: hidden must be in 1..", kMaxHidden, ", got ", options.hidden);
  SPGNN_CHECK(options.holdout >= 0 && options.holdout < 1, InvalidArgument,
              "cost model fit: holdout must be in [0, 1), got ", options.holdout);

  // This op's measurements, featurized, grouped by problem (first-appearance order).
  const size_t d = feature_names(op_).size();
  std::vector<double> x;
  std::vector<double> ms;
  std::vector<size_t> group;
  std::map<ProblemKey, size_t> groups;
  for (size_t k = 0; k < data.size(); ++k) {
    const Measurement& m = data[k];
    if (m.problem.op != op_) continue;
    SPGNN_CHECK(std::isfinite(m.ms) && m.ms > 0, InvalidArgument, "cost model fit: measurement ",
                k, " (", m.schedule.str(), "): time must be a positive number of ms, got ", m.ms);
    std::vector<double> f;
    try {
      f = featurize(m.problem, m.schedule);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument("cost model fit: measurement " + std::to_string(k) + ": " + e.what());
    }
    x.insert(x.end(), f.begin(), f.end());
    ms.push_back(m.ms);
    group.push_back(groups.emplace(key_of(m), groups.size()).first->second);
  }
  const size_t n = ms.size(), n_groups = groups.size();
  SPGNN_CHECK(n >= kMinMeasurements && n_groups >= kMinProblems, InvalidArgument,
              "cost model fit: too little data for ", op_kind_name(op_), ": ", n,
              " measurements of ", n_groups, " problems; need at least ", kMinMeasurements,
              " measurements of at least ", kMinProblems, " problems (tune more graphs/widths)");

  // Target: log(ms / fastest ms of the same problem).
  std::vector<double> best(n_groups, INFINITY), y(n);
  for (size_t r = 0; r < n; ++r) best[group[r]] = std::min(best[group[r]], ms[r]);
  for (size_t r = 0; r < n; ++r) y[r] = std::log(ms[r] / best[group[r]]);

  // Hold out whole problems: rows of one problem share every problem feature, so a row split
  // would let the model memorise the problem and overstate the correlation.
  FitRng split_rng(options.seed ^ 0x5851F42D4C957F2DULL);
  std::vector<size_t> perm(n_groups);
  std::iota(perm.begin(), perm.end(), size_t{0});
  split_rng.shuffle(perm);
  size_t n_hold_groups = 0;
  if (options.holdout > 0)
    n_hold_groups = std::clamp<size_t>(
        static_cast<size_t>(std::llround(options.holdout * double(n_groups))), 1, n_groups - 1);
  std::vector<char> held(n_groups, 0);
  for (size_t k = 0; k < n_hold_groups; ++k) held[perm[k]] = 1;

  const auto subset = [&](bool want_held, std::vector<double>& xs, std::vector<double>& ys) {
    for (size_t r = 0; r < n; ++r)
      if (bool(held[group[r]]) == want_held) {
        xs.insert(xs.end(), x.begin() + r * d, x.begin() + (r + 1) * d);
        ys.push_back(y[r]);
      }
  };
  const Layout L{d, static_cast<size_t>(options.hidden)};
  const auto predict_all = [&](const std::vector<double>& params, const std::vector<double>& xs) {
    std::vector<double> out(xs.size() / d);
    for (size_t r = 0; r < out.size(); ++r) out[r] = predict_row(L, params, xs.data() + r * d);
    return out;
  };

  FitReport rep;
  std::vector<double> xt, yt, xh, yh;
  subset(false, xt, yt);
  subset(true, xh, yh);
  rep.n_train = yt.size();
  rep.n_holdout = yh.size();
  Trained t = train(xt, yt, d, options);
  rep.pearson_train = pearson(predict_all(t.params, xt), yt);
  if (!yh.empty()) {
    const std::vector<double> ph = predict_all(t.params, xh);
    rep.pearson_holdout = pearson(ph, yh);
    double se = 0;
    for (size_t r = 0; r < yh.size(); ++r) se += (ph[r] - yh[r]) * (ph[r] - yh[r]);
    rep.mse_holdout = se / double(yh.size());
    t = train(x, y, d, options);  // refit on every problem (see the top of this file)
  }
  params_ = std::move(t.params);
  shape_ = {static_cast<int64_t>(d), static_cast<int64_t>(options.hidden)};
  trained_ = true;
  return rep;
}

double CostModel::predict(const ProblemStats& p, const Schedule& s) const {
  SPGNN_CHECK(trained_, InvalidArgument, "cost model: predict needs a fitted or loaded model");
  SPGNN_CHECK(p.op == op_, InvalidArgument, "cost model: this model is for ", op_kind_name(op_),
              ", the problem is ", op_kind_name(p.op));
  const std::vector<double> f = featurize(p, s);
  const Layout L{static_cast<size_t>(shape_[0]), static_cast<size_t>(shape_[1])};
  SPGNN_CHECK(f.size() == L.d, InvalidArgument, "cost model: ", f.size(),
              " features, the model has ", L.d);
  return predict_row(L, params_, f.data());
}

nlohmann::json CostModel::to_json() const {
  SPGNN_CHECK(trained_, InvalidArgument, "cost model: to_json needs a fitted or loaded model");
  const Layout L{static_cast<size_t>(shape_[0]), static_cast<size_t>(shape_[1])};
  const auto slice = [&](size_t off, size_t count) {
    return std::vector<double>(params_.begin() + off, params_.begin() + off + count);
  };
  nlohmann::json j;
  j["format"] = kFormatName;
  j["version"] = kFormatVersion;
  j["op"] = op_kind_name(op_);
  j["hidden"] = L.h;
  j["feature_names"] = feature_names(op_);
  j["input_mean"] = slice(L.mean(), L.d);
  j["input_std"] = slice(L.stdev(), L.d);
  j["w1"] = slice(L.w1(), L.d * L.h);
  j["b1"] = slice(L.b1(), L.h);
  j["w2"] = slice(L.w2(), L.h * L.h);
  j["b2"] = slice(L.b2(), L.h);
  j["w3"] = slice(L.w3(), L.h);
  j["b3"] = params_[L.b3()];
  j["target_mean"] = params_[L.target_mean()];
  j["target_std"] = params_[L.target_std()];
  return j;
}

CostModel CostModel::from_json(const nlohmann::json& j) {
  SPGNN_CHECK(j.is_object(), InvalidArgument, "cost model JSON: expected an object");
  const nlohmann::json& fmt = field(j, "format");
  SPGNN_CHECK(fmt.is_string() && fmt.get<std::string>() == kFormatName, InvalidArgument,
              "cost model JSON: field 'format' must be \"", kFormatName, "\"");
  const nlohmann::json& ver = field(j, "version");
  SPGNN_CHECK(ver.is_number_integer() && ver.get<int64_t>() == kFormatVersion, InvalidArgument,
              "cost model JSON: field 'version' is ", ver.dump(), ", this build reads version ",
              kFormatVersion);
  const nlohmann::json& opj = field(j, "op");
  SPGNN_CHECK(opj.is_string() && (opj == "spmm" || opj == "sddmm"), InvalidArgument,
              "cost model JSON: field 'op' must be \"spmm\" or \"sddmm\", got ", opj.dump());
  const OpKind op = opj == "spmm" ? OpKind::spmm : OpKind::sddmm;

  const std::vector<std::string> names = feature_names(op);
  const nlohmann::json& fn = field(j, "feature_names");
  SPGNN_CHECK(fn.is_array(), InvalidArgument,
              "cost model JSON: field 'feature_names' must be an array of strings");
  for (size_t k = 0; k < std::max(fn.size(), names.size()); ++k) {
    const bool same = k < fn.size() && k < names.size() && fn[k].is_string() &&
                      fn[k].get<std::string>() == names[k];
    SPGNN_CHECK(same, InvalidArgument, "cost model JSON: field 'feature_names' does not match "
                "this build (", fn.size(), " names, this build has ", names.size(),
                "; first difference at ", k, ": ", k < fn.size() ? fn[k].dump() : "<none>",
                " vs \"", k < names.size() ? names[k] : "<none>",
                "\"): the model was trained by another build (CUDA/CPU) or spgnn version");
  }
  const nlohmann::json& hid = field(j, "hidden");
  SPGNN_CHECK(hid.is_number_integer() && hid.get<int64_t>() >= 1 &&
                  hid.get<int64_t>() <= kMaxHidden,
              InvalidArgument, "cost model JSON: field 'hidden' must be an integer in 1..",
              kMaxHidden, ", got ", hid.dump());

  const Layout L{names.size(), static_cast<size_t>(hid.get<int64_t>())};
  std::vector<double> params(L.size());
  const auto put = [&](const char* name, size_t off, size_t count) {
    const std::vector<double> v = number_array(j, name, count);
    std::copy(v.begin(), v.end(), params.begin() + off);
  };
  put("input_mean", L.mean(), L.d);
  put("input_std", L.stdev(), L.d);
  for (size_t i = 0; i < L.d; ++i)
    SPGNN_CHECK(params[L.stdev() + i] > 0, InvalidArgument, "cost model JSON: field 'input_std'[",
                i, "] must be > 0");
  put("w1", L.w1(), L.d * L.h);
  put("b1", L.b1(), L.h);
  put("w2", L.w2(), L.h * L.h);
  put("b2", L.b2(), L.h);
  put("w3", L.w3(), L.h);
  params[L.b3()] = number(j, "b3");
  params[L.target_mean()] = number(j, "target_mean");
  params[L.target_std()] = number(j, "target_std");
  SPGNN_CHECK(params[L.target_std()] > 0, InvalidArgument,
              "cost model JSON: field 'target_std' must be > 0");

  CostModel m(op);
  m.params_ = std::move(params);
  m.shape_ = {static_cast<int64_t>(L.d), static_cast<int64_t>(L.h)};
  m.trained_ = true;
  return m;
}

}  // namespace spgnn::tune
