// CPU attention kernels: edge softmax (forward, backward) and GAT aggregation (forward,
// backward). One template per op serves both strategies: Acc = double and serial for cpu_ref (the
// oracle), Acc = float and OpenMP over rows for cpu. Softmax is max-subtracted per destination
// row and head; rows without edges produce nothing (and a zero output row for GAT).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/attention_hash.hpp"
#include "kernels/cpu/attention_cpu.hpp"
#include "kernels/cpu/cpu_kernels.hpp"

namespace spgnn::detail {

namespace {

// Below kMinParallelWork edge-heads (cpu_kernels.hpp) a loop runs on the calling thread.

inline float leaky(float z, float slope) { return z > 0.f ? z : z * slope; }

// The edge index a dropout mask is drawn for: GatProblem::edge_ids[j], or j itself.
struct EdgeIds {
  const int64_t* ids;
  explicit EdgeIds(const GatProblem& p)
      : ids(p.edge_ids ? p.edge_ids->data<int64_t>() : nullptr) {}
  int64_t operator[](int64_t j) const { return ids ? ids[j] : j; }
};

template <class Acc>
inline Acc exp_of(Acc x) {
  return std::exp(x);
}

template <class Acc, class I, bool kParallel>
void softmax_forward(const SoftmaxProblem& p) {
  const Graph& g = *p.g;
  const int64_t n = g.n_rows, H = p.H;
  const I* rowptr = g.rowptr.data<I>();
  const float* s = p.scores->data<float>();
  float* o = p.out->data<float>();
  const bool par = kParallel && g.nnz() * H >= kMinParallelWork;
#pragma omp parallel if (par)
  {
    std::vector<Acc> x;  // a row's exps, one per edge (as gat_forward)
#pragma omp for schedule(dynamic, 64)
    for (int64_t v = 0; v < n; ++v) {
      const int64_t b = rowptr[v], e = rowptr[v + 1];
      if (b == e) continue;
      x.resize(static_cast<size_t>(e - b));
      for (int64_t h = 0; h < H; ++h) {
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t j = b; j < e; ++j) m = std::max(m, s[j * H + h]);
        Acc z = 0;
        for (int64_t j = b; j < e; ++j) {
          x[j - b] = exp_of<Acc>(Acc(s[j * H + h]) - Acc(m));
          z += x[j - b];
        }
        const Acc iz = Acc(1) / z;
        for (int64_t j = b; j < e; ++j) o[j * H + h] = static_cast<float>(x[j - b] * iz);
      }
    }
  }
}

template <class Acc, class I, bool kParallel>
void softmax_backward(const SoftmaxBwdProblem& p) {
  const Graph& g = *p.g;
  const int64_t n = g.n_rows, H = p.H;
  const I* rowptr = g.rowptr.data<I>();
  const float* y = p.out->data<float>();
  const float* dy = p.grad_out->data<float>();
  float* dx = p.grad_scores->data<float>();
  const bool par = kParallel && g.nnz() * H >= kMinParallelWork;
#pragma omp parallel for schedule(dynamic, 64) if (par)
  for (int64_t v = 0; v < n; ++v) {
    const int64_t b = rowptr[v], e = rowptr[v + 1];
    for (int64_t h = 0; h < H; ++h) {
      Acc t = 0;
      for (int64_t j = b; j < e; ++j) t += Acc(y[j * H + h]) * Acc(dy[j * H + h]);
      for (int64_t j = b; j < e; ++j)
        dx[j * H + h] = static_cast<float>(Acc(y[j * H + h]) * (Acc(dy[j * H + h]) - t));
    }
  }
}

// Per row and head, each logit is computed and exponentiated once: the row's logits wait in `s`
// (per thread) between the max, the sum and the weighted gather. Computing each logit three
// times (max, sum, weight) with two exps took 1.5-2x as long: 140 ms against 70 for 8 heads of 8
// on a 1M-edge graph (two cores), slower than the unfused composition. Walking the edges once
// with all heads of an edge together measured 85 ms there: a row's source rows stay in L1
// between heads, and the per-head loops are the simpler ones.
template <class Acc, class I, bool kParallel>
void gat_forward(const GatProblem& p) {
  const Graph& g = *p.g;
  const int64_t n = g.n_rows, H = p.H, F = p.F, W = H * F;
  const I* rowptr = g.rowptr.data<I>();
  const I* col = g.col.data<I>();
  const float* feat = p.feat->data<float>();
  const float* el = p.el->data<float>();
  const float* er = p.er->data<float>();
  float* out = p.out->data<float>();
  float* attn = p.attn->data<float>();
  const bool drop = p.dropout > 0.f;
  const uint64_t key = attention_key(p.seed);
  const EdgeIds eid(p);
  const bool par = kParallel && g.nnz() * W >= kMinParallelWork;
#pragma omp parallel if (par)
  {
    std::vector<Acc> acc(static_cast<size_t>(F)), s;
#pragma omp for schedule(dynamic, 32)
    for (int64_t v = 0; v < n; ++v) {
      const int64_t b = rowptr[v], e = rowptr[v + 1];
      float* ov = out + v * W;
      if (b == e) {
        std::fill(ov, ov + W, 0.f);
        continue;
      }
      s.resize(static_cast<size_t>(e - b));
      for (int64_t h = 0; h < H; ++h) {
        const float erv = er[v * H + h];
        Acc mh = -std::numeric_limits<Acc>::infinity();
        for (int64_t j = b; j < e; ++j) {
          const Acc x = leaky(el[static_cast<int64_t>(col[j]) * H + h] + erv, p.negative_slope);
          s[j - b] = x;
          mh = std::max(mh, x);
        }
        Acc z = 0;
        for (int64_t j = b; j < e; ++j) {
          s[j - b] = exp_of<Acc>(s[j - b] - mh);
          z += s[j - b];
        }
        const Acc iz = Acc(1) / z;
        std::fill(acc.begin(), acc.end(), Acc(0));
        for (int64_t j = b; j < e; ++j) {
          const Acc a = s[j - b] * iz;
          attn[j * H + h] = static_cast<float>(a);
          const Acc w = drop ? a * Acc(attention_dropout_factor(key, uint64_t(eid[j] * H + h),
                                                                p.dropout, p.dropout_scale))
                             : a;
          if (w == Acc(0)) continue;
          const float* x = feat + static_cast<int64_t>(col[j]) * W + h * F;
          for (int64_t f = 0; f < F; ++f) acc[static_cast<size_t>(f)] += w * Acc(x[f]);
        }
        for (int64_t f = 0; f < F; ++f) ov[h * F + f] = static_cast<float>(acc[static_cast<size_t>(f)]);
      }
    }
  }
}

// The per-edge part of the backward pass shared by both strategies: for destination v, head h,
//   d_a_e = grad_out[v, h]·feat[u, h] * mask,  t = sum_row a_e d_a_e,
//   d_z_e = a_e (d_a_e - t) * leaky'(el[u, h] + er[v, h]),  grad_er[v, h] = sum_row d_z_e.
// `sink(j, h, u, dz, w)` receives each edge's d_z and its dropped-out weight w = a * mask.
// Per thread: the row's d_a and dropout factors (each edge hashed once); key = attention_key(seed).
template <class Acc>
struct BwdRowScratch {
  std::vector<Acc> da, mk;
};
template <class Acc, class I, class Sink>
void gat_backward_row(const GatProblem& p, uint64_t key, int64_t v, BwdRowScratch<Acc>& sc,
                      Sink&& sink) {
  const Graph& g = *p.g;
  const int64_t H = p.H, F = p.F, W = H * F;
  const I* rowptr = g.rowptr.data<I>();
  const I* col = g.col.data<I>();
  const float* feat = p.feat->data<float>();
  const float* el = p.el->data<float>();
  const float* er = p.er->data<float>();
  const float* attn = p.attn->data<float>();
  const float* gout = p.grad_out->data<float>();
  float* grad_er = p.grad_er->data<float>();
  const bool drop = p.dropout > 0.f;
  const EdgeIds eid(p);
  const int64_t b = rowptr[v], e = rowptr[v + 1];
  std::vector<Acc>& da = sc.da;
  std::vector<Acc>& mk = sc.mk;
  da.resize(static_cast<size_t>(e - b));
  mk.resize(static_cast<size_t>(e - b));
  for (int64_t h = 0; h < H; ++h) {
    const float* gv = gout + v * W + h * F;
    Acc t = 0;
    for (int64_t j = b; j < e; ++j) {
      // A dropped edge's d_a is 0: its source row is not read.
      const Acc m = drop ? Acc(attention_dropout_factor(key, uint64_t(eid[j] * H + h), p.dropout,
                                                        p.dropout_scale))
                         : Acc(1);
      Acc d = 0;
      if (m != Acc(0)) {
        const float* x = feat + static_cast<int64_t>(col[j]) * W + h * F;
        for (int64_t f = 0; f < F; ++f) d += Acc(gv[f]) * Acc(x[f]);
        d *= m;
      }
      da[static_cast<size_t>(j - b)] = d;
      mk[static_cast<size_t>(j - b)] = m;
      t += Acc(attn[j * H + h]) * d;
    }
    Acc ger = 0;
    const float erv = er[v * H + h];
    for (int64_t j = b; j < e; ++j) {
      const int64_t u = col[j];
      const Acc a = attn[j * H + h];
      const Acc ds = a * (da[static_cast<size_t>(j - b)] - t);
      const Acc dz = el[u * H + h] + erv > 0.f ? ds : ds * Acc(p.negative_slope);
      ger += dz;
      sink(j, h, u, dz, a * mk[static_cast<size_t>(j - b)]);
    }
    grad_er[v * H + h] = static_cast<float>(ger);
  }
}

// Oracle: serial, scatters source gradients into float64 buffers.
template <class I>
void gat_backward_ref(const GatProblem& p) {
  const Graph& g = *p.g;
  const int64_t H = p.H, F = p.F, W = H * F;
  const float* gout = p.grad_out->data<float>();
  std::vector<double> gf(static_cast<size_t>(g.n_cols * W), 0.0);
  std::vector<double> gel(static_cast<size_t>(g.n_cols * H), 0.0);
  BwdRowScratch<double> sc;
  const uint64_t key = attention_key(p.seed);
  for (int64_t v = 0; v < g.n_rows; ++v) {
    gat_backward_row<double, I>(p, key, v, sc, [&](int64_t, int64_t h, int64_t u, double dz,
                                                   double w) {
      gel[static_cast<size_t>(u * H + h)] += dz;
      if (w == 0.0) return;
      const float* gv = gout + v * W + h * F;
      double* dst = gf.data() + u * W + h * F;
      for (int64_t f = 0; f < F; ++f) dst[f] += w * double(gv[f]);
    });
  }
  float* grad_feat = p.grad_feat->data<float>();
  float* grad_el = p.grad_el->data<float>();
  for (size_t i = 0; i < gf.size(); ++i) grad_feat[i] = static_cast<float>(gf[i]);
  for (size_t i = 0; i < gel.size(); ++i) grad_el[i] = static_cast<float>(gel[i]);
}

// OpenMP: pass 1 over destination rows stores (d_z, dropped weight) per edge-head, as the GPU's
// pairs; pass 2 over the transposed graph gathers each source's gradients from them with one
// read an edge and no second hash (no atomics, no races, deterministic).
template <class I>
void gat_backward_omp(const GatProblem& p) {
  const Graph& g = *p.g;
  const Graph& gt = *p.gt;
  const int64_t H = p.H, F = p.F, W = H * F;
  const float* gout = p.grad_out->data<float>();
  struct DzW {
    float dz, w;
  };
  std::vector<DzW> pairs(static_cast<size_t>(g.nnz() * H));
  const bool par = g.nnz() * W >= kMinParallelWork;
  const uint64_t key = attention_key(p.seed);
#pragma omp parallel if (par)
  {
    BwdRowScratch<float> sc;
#pragma omp for schedule(dynamic, 32)
    for (int64_t v = 0; v < g.n_rows; ++v)
      gat_backward_row<float, I>(p, key, v, sc,
                                 [&](int64_t j, int64_t h, int64_t, float dz, float w) {
                                   pairs[static_cast<size_t>(j * H + h)] = {dz, w};
                                 });
  }
  const I* rpt = gt.rowptr.data<I>();
  const I* colt = gt.col.data<I>();
  const int64_t* perm = p.perm->data<int64_t>();
  float* grad_feat = p.grad_feat->data<float>();
  float* grad_el = p.grad_el->data<float>();
#pragma omp parallel for schedule(dynamic, 32) if (par)
  for (int64_t u = 0; u < gt.n_rows; ++u) {
    float* gfu = grad_feat + u * W;
    std::fill(gfu, gfu + W, 0.f);
    for (int64_t h = 0; h < H; ++h) {
      float gel = 0.f;
      for (int64_t t = rpt[u]; t < rpt[u + 1]; ++t) {
        const DzW pw = pairs[static_cast<size_t>(perm[t] * H + h)];
        gel += pw.dz;
        const float w = pw.w;
        if (w == 0.f) continue;
        const float* gv = gout + static_cast<int64_t>(colt[t]) * W + h * F;
        for (int64_t f = 0; f < F; ++f) gfu[h * F + f] += w * gv[f];
      }
      grad_el[u * H + h] = gel;
    }
  }
}

template <class Fn>
void by_index(const Graph& g, Fn&& fn) {
  if (g.index_dtype() == DType::i64) fn(int64_t{});
  else fn(int32_t{});
}

}  // namespace

void cpu_ref_edge_softmax(const SoftmaxProblem& p) {
  by_index(*p.g, [&](auto i) { softmax_forward<double, decltype(i), false>(p); });
}
void cpu_edge_softmax(const SoftmaxProblem& p) {
  by_index(*p.g, [&](auto i) { softmax_forward<float, decltype(i), true>(p); });
}
void cpu_ref_edge_softmax_backward(const SoftmaxBwdProblem& p) {
  by_index(*p.g, [&](auto i) { softmax_backward<double, decltype(i), false>(p); });
}
void cpu_edge_softmax_backward(const SoftmaxBwdProblem& p) {
  by_index(*p.g, [&](auto i) { softmax_backward<float, decltype(i), true>(p); });
}
void cpu_ref_gat_forward(const GatProblem& p) {
  by_index(*p.g, [&](auto i) { gat_forward<double, decltype(i), false>(p); });
}
void cpu_gat_forward(const GatProblem& p) {
  by_index(*p.g, [&](auto i) { gat_forward<float, decltype(i), true>(p); });
}
void cpu_ref_gat_backward(const GatProblem& p) {
  by_index(*p.g, [&](auto i) { gat_backward_ref<decltype(i)>(p); });
}
void cpu_gat_backward(const GatProblem& p) {
  by_index(*p.g, [&](auto i) { gat_backward_omp<decltype(i)>(p); });
}

void cpu_leaky_relu_(Tensor& x, float negative_slope) {
  float* d = x.data<float>();
  const int64_t n = x.numel();
#pragma omp parallel for schedule(static) if (n >= kMinParallelWork)
  for (int64_t i = 0; i < n; ++i) d[i] = leaky(d[i], negative_slope);
}

void cpu_apply_dropout(const Tensor& a, Tensor& out, uint64_t seed, float p, float scale) {
  const float* s = a.data<float>();
  float* d = out.data<float>();
  const int64_t n = a.numel();
  const uint64_t key = attention_key(seed);
#pragma omp parallel for schedule(static) if (n >= kMinParallelWork)
  for (int64_t i = 0; i < n; ++i)
    d[i] = s[i] * attention_dropout_factor(key, static_cast<uint64_t>(i), p, scale);
}

void cpu_copy_cols(const Tensor& src, int64_t src_off, Tensor& dst, int64_t dst_off,
                   int64_t width) {
  const int64_t rows = src.ndim() == 0 ? 0 : src.dim(0);
  const int64_t sld = rows ? src.numel() / rows : 0, dld = rows ? dst.numel() / rows : 0;
  const float* s = src.data<float>();
  float* d = dst.data<float>();
#pragma omp parallel for schedule(static) if (rows * width >= kMinParallelWork)
  for (int64_t r = 0; r < rows; ++r)
    std::copy_n(s + r * sld + src_off, width, d + r * dld + dst_off);
}

}  // namespace spgnn::detail
