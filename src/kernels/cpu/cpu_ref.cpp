// The oracle of every kernel test: serial, one edge at a time, sums in float64. It is written
// to be read, not to be fast; every other strategy is judged against it.
#include <cstdint>

#include "kernels/cpu/cpu_kernels.hpp"

namespace spgnn::detail {

namespace {

// One SpMM message u[src, f] op e[edge, f]. `T` is double for sum/mean (the float64
// accumulation the oracle promises) and the operands' type for max/min: a float32 kernel decides the winner
// among float32 messages, so the oracle must compare the same float32 values or near-ties
// would give a different arg than every kernel under test (the value itself is identical:
// +, -, * of two floats is exact in double, and rounding it to float is the float op).
template <class T>
T spmm_message(SpmmOp op, T x, T w) {
  switch (op) {
    case SpmmOp::copy_u: return x;
    case SpmmOp::copy_e: return w;
    case SpmmOp::u_mul_e: return x * w;
    case SpmmOp::u_add_e: return x + w;
    case SpmmOp::u_sub_e: return x - w;
    case SpmmOp::u_div_e: return x / w;
  }
  return x;
}

// V is the value type of the operands: float, or double for the float64 path.
template <class Index, class V>
void ref_spmm(const SpmmProblem& p) {
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

  auto x_at = [&](int64_t edge, int64_t f) {
    return u ? u[static_cast<int64_t>(col[edge]) * F + f] : V(0);
  };
  auto w_at = [&](int64_t edge, int64_t f) { return e ? e[edge * ew + (ew == 1 ? 0 : f)] : V(0); };

  for (int64_t r = 0; r < n; ++r) {
    const int64_t begin = rowptr[r], end = rowptr[r + 1];
    for (int64_t f = 0; f < F; ++f) {
      const int64_t o = r * F + f;
      if (begin == end) {  // no edges: 0 for every reduce, no winner
        out[o] = V(0);
        if (arg_u) arg_u[o] = -1;
        if (arg_e) arg_e[o] = -1;
        continue;
      }
      if (p.reduce == Reduce::sum || p.reduce == Reduce::mean) {
        double acc = 0;
        for (int64_t k = begin; k < end; ++k)
          acc += spmm_message<double>(p.op, x_at(k, f), w_at(k, f));
        if (p.reduce == Reduce::mean) acc /= static_cast<double>(end - begin);
        out[o] = static_cast<V>(acc);
        continue;
      }
      // max/min: the first edge of the row starts as the winner and is replaced only by a
      // strictly better message, so ties go to the first edge in row order.
      V best = spmm_message<V>(p.op, x_at(begin, f), w_at(begin, f));
      int64_t best_edge = begin;
      for (int64_t k = begin + 1; k < end; ++k) {
        const V m = spmm_message<V>(p.op, x_at(k, f), w_at(k, f));
        if (p.reduce == Reduce::max ? m > best : m < best) {
          best = m;
          best_edge = k;
        }
      }
      out[o] = best;
      if (arg_u) arg_u[o] = static_cast<int64_t>(col[best_edge]);
      if (arg_e) arg_e[o] = best_edge;
    }
  }
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
