// The oracle of every kernel test: one edge at a time in row order, sums in float64. It is
// written to be read; the only concessions to speed are independent rows (or edges) in parallel
// and contiguous feature reads, neither of which changes any result. Every other strategy is
// judged against it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/cpu_kernels.hpp"

namespace spgnn::detail {

namespace {

// Messages (spmm_message, cpu_kernels.hpp) are taken in double for sum/mean (the float64
// accumulation the oracle promises) and in the operands' type for max/min: a float32 kernel
// decides the winner among float32 messages, so the oracle must compare the same float32 values
// or near-ties would give a different arg than every kernel under test (the value itself is
// identical: +, -, * of two floats is exact in double, and rounding it to float is the float op).

// V is the value type of the operands: float, or double for the float64 path.
template <SpmmOp Op, class Index, class V>
void ref_spmm_op(const SpmmProblem& p) {
  const Graph& g = *p.g;
  const int64_t n = g.n_rows, F = p.F;
  const Index* rowptr = g.rowptr.data<Index>();
  const Index* col = g.col.data<Index>();
  const V* u = p.uses_u() ? p.u->data<V>() : nullptr;
  const V* e = p.uses_e() ? p.e->data<V>() : nullptr;
  const int64_t ew = p.e_width;
  V* out = p.out->data<V>();
  int64_t* arg_u = p.arg_u ? p.arg_u->data<int64_t>() : nullptr;
  int64_t* arg_e = p.arg_e ? p.arg_e->data<int64_t>() : nullptr;
  // An operand the op does not read is a row of zeros; a scalar edge weight (width 1) is read
  // at stride 0 for every feature.
  const std::vector<V> zeros(static_cast<size_t>(F), V(0));
  const int64_t w_stride = e && ew == 1 ? 0 : 1;
  auto x_row = [&](int64_t edge) {
    return u ? u + static_cast<int64_t>(col[edge]) * F : zeros.data();
  };
  auto w_row = [&](int64_t edge) { return e ? e + edge * ew : zeros.data(); };

  // Rows are independent, so they run in parallel; within a row the edges are taken in row
  // order for every feature (the order of one (row, feature) at a time, but reading each
  // edge's F values contiguously: the oracle dominates the run time of the kernel tests).
  const bool sums = p.reduce == Reduce::sum || p.reduce == Reduce::mean;
#pragma omp parallel
  {
    std::vector<double> acc(sums ? F : 0);
    std::vector<V> best(sums ? 0 : F);
    std::vector<int64_t> best_edge(sums ? 0 : F);
#pragma omp for schedule(dynamic, 16)
    for (int64_t r = 0; r < n; ++r) {
      const int64_t begin = rowptr[r], end = rowptr[r + 1];
      V* o = out + r * F;
      if (begin == end) {  // no edges: 0 for every reduce, no winner
        std::fill(o, o + F, V(0));
        if (arg_u) std::fill(arg_u + r * F, arg_u + (r + 1) * F, int64_t{-1});
        if (arg_e) std::fill(arg_e + r * F, arg_e + (r + 1) * F, int64_t{-1});
        continue;
      }
      if (sums) {
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t k = begin; k < end; ++k) {
          const V* x = x_row(k);
          const V* w = w_row(k);
          for (int64_t f = 0; f < F; ++f)
            acc[f] += spmm_message<Op, double>(x[f], w[f * w_stride]);
        }
        const double deg = p.reduce == Reduce::mean ? static_cast<double>(end - begin) : 1.0;
        for (int64_t f = 0; f < F; ++f) o[f] = static_cast<V>(acc[f] / deg);
        continue;
      }
      // max/min: the first edge of the row starts as the winner and is replaced only by a
      // strictly better message, so ties go to the first edge in row order. A NaN message beats
      // every number and the first NaN stays (torch.max, scatter_reduce("amax") and PyG
      // propagate NaN; a plain comparison would drop it).
      const bool is_max = p.reduce == Reduce::max;
      for (int64_t k = begin; k < end; ++k) {
        const V* x = x_row(k);
        const V* w = w_row(k);
        for (int64_t f = 0; f < F; ++f) {
          const V m = spmm_message<Op, V>(x[f], w[f * w_stride]);
          const bool nan = std::isnan(m) && !std::isnan(best[f]);
          if (k == begin || nan || (is_max ? m > best[f] : m < best[f])) {
            best[f] = m;
            best_edge[f] = k;
          }
        }
      }
      for (int64_t f = 0; f < F; ++f) {
        o[f] = best[f];
        if (arg_u) arg_u[r * F + f] = static_cast<int64_t>(col[best_edge[f]]);
        if (arg_e) arg_e[r * F + f] = best_edge[f];
      }
    }
  }
}

template <class Index, class V>
void ref_spmm(const SpmmProblem& p) {
  with_spmm_op(p.op, [&](auto op) { ref_spmm_op<decltype(op)::value, Index, V>(p); });
}

double sddmm_combine(SddmmOp op, double a, double b) {
  switch (op) {
    case SddmmOp::dot:
    case SddmmOp::mul: return a * b;
    case SddmmOp::add: return a + b;
    case SddmmOp::sub: return a - b;
    case SddmmOp::div: return a / b;
    case SddmmOp::copy_lhs: return a;
    case SddmmOp::copy_rhs: return b;
  }
  return a;
}

template <class Index, class V>
void ref_sddmm(const SddmmProblem& p) {
  const Graph& g = *p.g;
  const int64_t nnz = g.nnz(), F = p.F;
  const Index* row = g.row.data<Index>();
  const Index* col = g.col.data<Index>();
  const V* lhs = p.uses_lhs() ? p.lhs->data<V>() : nullptr;
  const V* rhs = p.uses_rhs() ? p.rhs->data<V>() : nullptr;
  V* out = p.out->data<V>();

  // The operand row an edge reads: its source (u), destination (v) or the edge itself (e).
  auto operand_row = [&](Target t, int64_t edge) -> int64_t {
    switch (t) {
      case Target::u: return static_cast<int64_t>(col[edge]);
      case Target::v: return static_cast<int64_t>(row[edge]);
      case Target::e: return edge;
    }
    return edge;
  };

#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < nnz; ++k) {
    const int64_t lr = operand_row(p.lhs_target, k), rr = operand_row(p.rhs_target, k);
    auto a = [&](int64_t f) { return lhs ? static_cast<double>(lhs[lr * F + f]) : 0.0; };
    auto b = [&](int64_t f) { return rhs ? static_cast<double>(rhs[rr * F + f]) : 0.0; };
    if (p.op == SddmmOp::dot) {
      double acc = 0;
      for (int64_t f = 0; f < F; ++f) acc += a(f) * b(f);
      out[k] = static_cast<V>(acc);
      continue;
    }
    for (int64_t f = 0; f < F; ++f)
      out[k * F + f] = static_cast<V>(sddmm_combine(p.op, a(f), b(f)));
  }
}

}  // namespace

void cpu_ref_spmm(const SpmmProblem& p, const Schedule&) {
  const bool i64 = p.g->index_dtype() == DType::i64, f64 = p.dtype == DType::f64;
  if (i64) f64 ? ref_spmm<int64_t, double>(p) : ref_spmm<int64_t, float>(p);
  else f64 ? ref_spmm<int32_t, double>(p) : ref_spmm<int32_t, float>(p);
}

void cpu_ref_sddmm(const SddmmProblem& p, const Schedule&) {
  const bool i64 = p.g->index_dtype() == DType::i64, f64 = p.dtype == DType::f64;
  if (i64) f64 ? ref_sddmm<int64_t, double>(p) : ref_sddmm<int64_t, float>(p);
  else f64 ? ref_sddmm<int32_t, double>(p) : ref_sddmm<int32_t, float>(p);
}

}  // namespace spgnn::detail
