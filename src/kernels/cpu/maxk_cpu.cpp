// MaxK-GNN on the CPU: the oracle of the GPU tests (reference = true: serial, selection by a full
// sort, sums in float64) and the OpenMP kernels (reference = false: partial selection, float32
// sums, rows in parallel). Both rank values by maxk_order_key, ties to the lower column.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/cpu/maxk_cpu.hpp"

namespace spgnn::detail {

namespace {

// Below this many elements of work a kernel runs on the calling thread (fork/join costs more).
constexpr int64_t kMaxkMinParallelWork = int64_t{1} << 15;

uint32_t key_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return maxk_order_key(b);
}

// The oracle: a full sort of the row's columns by (key descending, column ascending).
template <class IdxT>
void maxk_row_sorted(const float* xr, int64_t F, int64_t k, float* data, IdxT* index,
                     std::vector<int64_t>& order, std::vector<uint32_t>& keys) {
  for (int64_t j = 0; j < F; ++j) keys[size_t(j)] = key_of(xr[j]);
  std::iota(order.begin(), order.end(), int64_t{0});
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return keys[size_t(a)] != keys[size_t(b)] ? keys[size_t(a)] > keys[size_t(b)] : a < b;
  });
  std::sort(order.begin(), order.begin() + k);  // CBSR keeps ascending column order
  for (int64_t j = 0; j < k; ++j) {
    data[j] = xr[order[size_t(j)]];
    index[j] = static_cast<IdxT>(order[size_t(j)]);
  }
}

// The OpenMP kernel, without data-dependent branches in its inner loops (a comparison sort or
// nth_element branches on every compare of a random row): the k-th largest key t by
// bisection over the key range, each round one count of keys >= mid that the compiler
// vectorises; a round whose count is exactly k ends it (the kept set is then keys >= mid and has
// no tie at its edge). One pass in column order then keeps every key above t and the first
// k - (count above t) keys equal to t: the same set as the sort (ties to the lower column),
// already in ascending column order. Keys are maxk_order_key shifted to signed, so the counts
// compare int32s.
struct SelectScratch {
  std::vector<int32_t> keys;
  std::vector<float> vals;
  std::vector<int32_t> cols;
  explicit SelectScratch(int64_t F)
      : keys(static_cast<size_t>(F)), vals(static_cast<size_t>(F)), cols(static_cast<size_t>(F)) {}
};

inline int32_t signed_key(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return static_cast<int32_t>(maxk_order_key(b) ^ 0x80000000u);
}

template <class IdxT>
void maxk_row_select(const float* xr, int64_t F, int64_t k, float* data, IdxT* index,
                     SelectScratch& s) {
  int32_t* keys = s.keys.data();
  int32_t lo = std::numeric_limits<int32_t>::max(), hi = std::numeric_limits<int32_t>::min();
  for (int64_t j = 0; j < F; ++j) {
    keys[j] = signed_key(xr[j]);
    lo = std::min(lo, keys[j]);
    hi = std::max(hi, keys[j]);
  }
  auto count_ge = [&](int32_t t) {
    int32_t c = 0;
    for (int64_t j = 0; j < F; ++j) c += keys[j] >= t ? 1 : 0;
    return int64_t{c};
  };
  // Invariant: count(keys >= lo) = c_lo >= k, count(keys >= hi + 1) = c_hi < k. Rounds alternate
  // between interpolating (counts as if linear in the key between the bounds, aiming between the
  // k-th and (k+1)-th key) and halving, so at most ~64 rounds whatever the data; on random rows
  // the interpolation ends it in a few.
  int64_t t = 0, ties = 0, c_lo = F, c_hi = 0;
  bool exact = false;
  for (int round = 0; lo < hi; ++round) {
    const int64_t width = int64_t{hi} - lo + 1;
    int64_t step = (width + 1) / 2;
    if (round % 2 == 0) {
      const double f = (double(c_lo - k) + 0.5) / double(c_lo - c_hi);
      step = std::clamp<int64_t>(static_cast<int64_t>(f * double(width)), 1, width - 1);
    }
    const int32_t mid = static_cast<int32_t>(lo + step);
    const int64_t c = count_ge(mid);
    if (c == k) {
      t = int64_t{mid} - 1;  // keep keys > mid - 1, i.e. >= mid; no ties to split
      exact = true;
      break;
    }
    if (c > k) {
      lo = mid;
      c_lo = c;
    } else {
      hi = mid - 1;
      c_hi = c;
    }
  }
  if (!exact) {
    t = lo;  // the k-th largest key
    ties = k - (lo == std::numeric_limits<int32_t>::max() ? 0 : count_ge(lo + 1));
  }
  float* vals = s.vals.data();
  int32_t* cols = s.cols.data();
  int64_t o = 0;
  for (int64_t j = 0; j < F; ++j) {
    const bool eq = keys[j] == t;
    const bool take = keys[j] > t || (eq && ties > 0);
    ties -= (eq && take) ? 1 : 0;
    vals[o] = xr[j];  // written always, kept only when taken: no branch on the data
    cols[o] = static_cast<int32_t>(j);
    o += take ? 1 : 0;
  }
  for (int64_t j = 0; j < k; ++j) {
    data[j] = vals[j];
    index[j] = static_cast<IdxT>(cols[j]);
  }
}

template <class IdxT>
void maxk_rows(const float* x, int64_t n, int64_t F, int64_t k, float* data, IdxT* index,
               bool reference) {
  if (reference) {  // rows are independent: in parallel, with the same result
#pragma omp parallel if (n * F >= kMaxkMinParallelWork)
    {
      std::vector<int64_t> order(static_cast<size_t>(F));
      std::vector<uint32_t> keys(static_cast<size_t>(F));
#pragma omp for schedule(static)
      for (int64_t r = 0; r < n; ++r)
        maxk_row_sorted(x + r * F, F, k, data + r * k, index + r * k, order, keys);
    }
    return;
  }
#pragma omp parallel if (n * F >= kMaxkMinParallelWork)
  {
    SelectScratch scratch(F);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < n; ++r)
      maxk_row_select(x + r * F, F, k, data + r * k, index + r * k, scratch);
  }
}

// Edge weight of edge e (1 when the problem has none).
inline float weight(const float* w, int64_t e) { return w ? w[e] : 1.f; }

template <class I, class IdxT>
void spgemm_t(const Graph& g, const float* w, const Cbsr& x, Tensor& out, bool reference) {
  const int64_t n = g.n_rows, F = x.F, k = x.k;
  const I* rowptr = g.rowptr.data<I>();
  const I* col = g.col.data<I>();
  const float* xd = x.data.data<float>();
  const IdxT* xi = x.index.data<IdxT>();
  float* o = out.data<float>();
  if (reference) {  // output rows are independent: in parallel, each summed in edge order
#pragma omp parallel if (g.nnz() * k + n * F >= kMaxkMinParallelWork)
    {
      std::vector<double> acc(static_cast<size_t>(F));
#pragma omp for schedule(dynamic, 64)
      for (int64_t r = 0; r < n; ++r) {
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t e = rowptr[r]; e < rowptr[r + 1]; ++e) {
          const int64_t u = col[e];
          for (int64_t j = 0; j < k; ++j)
            acc[xi[u * k + j]] += double(weight(w, e)) * double(xd[u * k + j]);
        }
        for (int64_t f = 0; f < F; ++f) o[r * F + f] = static_cast<float>(acc[size_t(f)]);
      }
    }
    return;
  }
  // Each output row is written once by one thread: its accumulation buffer is the row itself.
#pragma omp parallel for schedule(dynamic, 64) if (g.nnz() * k + n * F >= kMaxkMinParallelWork)
  for (int64_t r = 0; r < n; ++r) {
    float* orow = o + r * F;
    std::fill(orow, orow + F, 0.f);
    for (int64_t e = rowptr[r]; e < rowptr[r + 1]; ++e) {
      const int64_t u = col[e];
      const float we = weight(w, e);
      const float* d = xd + u * k;
      const IdxT* c = xi + u * k;
      for (int64_t j = 0; j < k; ++j) orow[c[j]] += we * d[j];
    }
  }
}

// The transpose (CSC view) of a host graph, built once per structure and kept in Graph::cache:
// the OpenMP SSpMM gathers over a column's edges instead of scattering with atomics.
std::shared_ptr<const Transposed> cached_transpose(const Graph& g) {
  // Keyed by index dtype too: a copy of a Graph with its arrays re-typed shares the cache.
  const std::string kKey = std::string("maxk:cpu_transpose:") + dtype_name(g.index_dtype());
  std::lock_guard<std::mutex> lock(g.cache->mutex);
  auto it = g.cache->items.find(kKey);
  if (it != g.cache->items.end()) return std::static_pointer_cast<const Transposed>(it->second);
  Graph structure = g;
  structure.val = Tensor();  // cache items depend on the structure only
  auto t = std::make_shared<Transposed>(transpose(structure));
  g.cache->items[kKey] = t;
  return t;
}

// Edges ahead whose gathers the SSpMM prefetches. er:50000:10, F = 256, k = 32, 2 threads, five
// interleaved runs: no prefetch 31.5 ms (median), 1 ahead 26.7, 2 ahead 26.2, 3 ahead 26.5, 6
// ahead 29.1; k = 8 unchanged (~11 ms).
constexpr int64_t kPrefetch = 2;

template <class I, class IdxT>
void sspmm_t(const Graph& g, const float* w, const Tensor& d_out, const Cbsr& x, Tensor& d_data,
             bool reference) {
  const int64_t F = x.F, k = x.k;
  const IdxT* xi = x.index.data<IdxT>();
  const float* dout = d_out.data<float>();
  float* dd = d_data.data<float>();
  const auto t = cached_transpose(g);
  const I* trowptr = t->graph.rowptr.data<I>();
  const I* tcol = t->graph.col.data<I>();
  const int64_t* perm = t->perm.data<int64_t>();
  if (reference) {
    // The definition: each source u sums its edges in stored (row) order. The transpose
    // lists a source's edges in that order (transpose() is stable), so sources run in parallel
    // with the sums of a serial walk over the edges, bit for bit.
#pragma omp parallel if (g.nnz() * k >= kMaxkMinParallelWork)
    {
      std::vector<double> acc(static_cast<size_t>(k));
#pragma omp for schedule(dynamic, 64)
      for (int64_t u = 0; u < g.n_cols; ++u) {
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t s = trowptr[u]; s < trowptr[u + 1]; ++s) {
          const int64_t e = perm[s], v = tcol[s];
          for (int64_t j = 0; j < k; ++j)
            acc[size_t(j)] += double(weight(w, e)) * double(dout[v * F + xi[u * k + j]]);
        }
        for (int64_t j = 0; j < k; ++j) dd[u * k + j] = static_cast<float>(acc[size_t(j)]);
      }
    }
    return;
  }
#pragma omp parallel for schedule(dynamic, 64) if (g.nnz() * k + g.n_cols * k >= kMaxkMinParallelWork)
  for (int64_t u = 0; u < g.n_cols; ++u) {
    float* du = dd + u * k;
    const IdxT* c = xi + u * k;
    std::fill(du, du + k, 0.f);
    const int64_t te_end = trowptr[u + 1];
    for (int64_t te = trowptr[u]; te < te_end; ++te) {
      // The k gathers land in a random row of d_out, each on its own cache line more often than
      // not: request the lines of the edge kPrefetch ahead while this one is summed.
      if (te + kPrefetch < te_end) {
        const float* ahead = dout + int64_t(tcol[te + kPrefetch]) * F;
        for (int64_t j = 0; j < k; ++j) __builtin_prefetch(ahead + c[j]);
      }
      const float* dv = dout + int64_t(tcol[te]) * F;
      const float we = weight(w, perm[te]);
      for (int64_t j = 0; j < k; ++j) du[j] += we * dv[c[j]];
    }
  }
}

template <class Fn>
auto dispatch_idx(DType index_dtype, DType cbsr_dtype, Fn&& fn) {
  auto inner = [&](auto itag) {
    using I = decltype(itag);
    if (cbsr_dtype == DType::u8) return fn(I{}, uint8_t{});
    return fn(I{}, uint16_t{});
  };
  if (index_dtype == DType::i64) return inner(int64_t{});
  return inner(int32_t{});
}

}  // namespace

void cpu_maxk(const Tensor& x, int64_t k, Tensor& data, Tensor& index, bool reference) {
  const int64_t n = x.dim(0), F = x.dim(1);
  if (index.dtype() == DType::u8)
    maxk_rows(x.data<float>(), n, F, k, data.data<float>(), index.data<uint8_t>(), reference);
  else
    maxk_rows(x.data<float>(), n, F, k, data.data<float>(), index.data<uint16_t>(), reference);
}

void cpu_maxk_backward(const Tensor& d_data, const Tensor& index, int64_t F, Tensor& dx) {
  const int64_t n = d_data.dim(0), k = d_data.dim(1);
  const float* d = d_data.data<float>();
  float* o = dx.data<float>();
  auto run = [&](const auto* idx) {
#pragma omp parallel for schedule(static) if (n * F >= kMaxkMinParallelWork)
    for (int64_t r = 0; r < n; ++r) {
      std::fill(o + r * F, o + (r + 1) * F, 0.f);
      // Added, not stored: a hand-made CBSR that repeats a column gets the sum of its gradients.
      for (int64_t j = 0; j < k; ++j) o[r * F + idx[r * k + j]] += d[r * k + j];
    }
  };
  if (index.dtype() == DType::u8) run(index.data<uint8_t>());
  else run(index.data<uint16_t>());
}

void cpu_cbsr_spgemm(const Graph& g, const float* w, const Cbsr& x, Tensor& out, bool reference) {
  dispatch_idx(g.index_dtype(), x.index.dtype(), [&](auto itag, auto jtag) {
    spgemm_t<decltype(itag), decltype(jtag)>(g, w, x, out, reference);
  });
}

void cpu_cbsr_sspmm(const Graph& g, const float* w, const Tensor& d_out, const Cbsr& x,
                    Tensor& d_data, bool reference) {
  dispatch_idx(g.index_dtype(), x.index.dtype(), [&](auto itag, auto jtag) {
    sspmm_t<decltype(itag), decltype(jtag)>(g, w, d_out, x, d_data, reference);
  });
}

}  // namespace spgnn::detail
