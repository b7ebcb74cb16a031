// The multicore CPU kernels: merge-path SpMM (MergePath-SpMM, ISPASS'23, §III) and an
// edge-parallel SDDMM. Both run unit-stride inner loops over F that the compiler vectorises and
// prefetch the randomly gathered source rows; SpMM accumulates in float32, SDDMM's dot in
// float64 (see edge_sddmm). cpu_ref is the float64 oracle they are tested against.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_kernels.hpp"

namespace spgnn::detail {

namespace {

// Below kMinParallelWork (row + non-zero) x feature elements a problem runs on the calling
// thread (the chunking is identical, so the result does not depend on it).
// Source-row prefetch: how many edges ahead, and the floats in one 64-byte cache line.
constexpr int64_t kPrefetchEdges = 8;
constexpr int64_t kFloatsPerLine = 16;
// Max/min record winners as int32 offsets within blocks of at most this many edges.
constexpr int64_t kMaxArgBlock = int64_t{1} << 30;

// ---- SpMM: reduction functors (messages: spmm_message, cpu_kernels.hpp) ------------------------

// A reduction keeps a running value per feature and, for max/min, the edge that produced it
// (update() is only used by max/min; sum and mean simply add).
// Ties keep the value already held: partial results are always merged in edge order, so the
// first edge in row order wins, as cpu_ref (and DGL) define it. As in cpu_ref a NaN message
// beats every number and the first NaN stays (torch and PyG propagate NaN). A feature whose
// messages all equal the identity (-inf for max) keeps arg -1 here; finalize() names the row's
// first edge for it.
template <Reduce R>
struct Reduction {
  static constexpr bool kTracksArg = R == Reduce::max || R == Reduce::min;
  static constexpr float identity() {
    if constexpr (R == Reduce::max) return -std::numeric_limits<float>::infinity();
    else if constexpr (R == Reduce::min) return std::numeric_limits<float>::infinity();
    else return 0.f;
  }
  // Written as selects and a bit mask rather than a branch: GCC turns a conditional arg store
  // into a masked store, which plain x86-64 (SSE2) lacks, and then leaves the loop scalar.
  // !(m <= held) is m > held or m NaN; `&` rather than `&&` keeps it branch-free.
  template <class Arg>
  static inline void update(float& acc, Arg& arg, float m, Arg edge) {
    const float held = acc;
    const bool better = (R == Reduce::max ? !(m <= held) : !(m >= held)) & (held == held);
    const Arg mask = static_cast<Arg>(-static_cast<Arg>(better));
    acc = better ? m : held;
    arg = static_cast<Arg>((edge & mask) | (arg & ~mask));
  }
};

// ---- SpMM: the merge-path kernel ---------------------------------------------------------------
//
// The merge path walks rowptr[1..n] (row ends) against the non-zero indices 0..nnz-1: state
// (i, j) means rows < i are finished and non-zeros < j are consumed, with
// rowptr[i] <= j <= rowptr[i+1]. A non-zero costs 1, finishing a row costs `row_cost`, so the
// cost of state (i, j) is row_cost*i + j and the whole path costs row_cost*n + nnz. Chunk c gets
// the path between diagonals c*total/P and (c+1)*total/P, found by a binary search over rows,
// so every chunk does the same amount of work however skewed the degrees are (a star's hub row
// is cut into many chunks; a run of empty rows costs row_cost each and is cut too).
//
// Ownership: chunk c *owns* the rows it finishes, split_row[c] <= r < split_row[c+1], and writes
// each of them exactly once. Rows it finishes but did not start (its first row, when that row's
// earlier non-zeros belong to earlier chunks) and the row it starts but does not finish (its
// tail) are partial:
//   pass 1 (parallel over chunks): complete rows are reduced straight into `out`; the first row's
//     own share goes to the chunk's head slot, the unfinished tail row's share to its carry slot.
//   pass 2 (parallel over chunks): each owner of a split row merges, in edge order, the carries
//     of the chunks in front of it that ended inside that row, then its head, and finalises.
// There is no serial fix-up and no atomics: the split rows are combined concurrently by their
// owners, and an owner merges one F-wide slot per chunk the row spans (at most P, usually 1),
// so pass 2 costs O(P*F) in total against pass 1's O(nnz*F), whatever the longest row is.
template <SpmmOp Op, Reduce R, class Index>
class MergePathSpmm {
  using Red = Reduction<R>;
  static constexpr bool kUsesU = Op != SpmmOp::copy_e;
  static constexpr bool kUsesE = Op != SpmmOp::copy_u;
  static constexpr bool kTracksArg = Red::kTracksArg;

 public:
  explicit MergePathSpmm(const SpmmProblem& p)
      : n_(p.g->n_rows),
        nnz_(p.g->nnz()),
        F_(p.F),
        ew_(p.e_width),
        rowptr_(p.g->rowptr.data<Index>()),
        col_(p.g->col.data<Index>()),
        u_(kUsesU ? p.u->data<float>() : nullptr),
        e_(kUsesE ? p.e->data<float>() : nullptr),
        out_(p.out->data<float>()),
        arg_u_(p.arg_u ? p.arg_u->data<int64_t>() : nullptr),
        arg_e_(p.arg_e ? p.arg_e->data<int64_t>() : nullptr) {}

  void run(int64_t row_cost, int64_t chunks_per_thread) const {
    const int threads = std::max(1, omp_get_max_threads());
    const int64_t total = row_cost * n_ + nnz_;
    // More chunks than path items would only create empty chunks.
    const int64_t P = std::max<int64_t>(1, std::min<int64_t>(threads * chunks_per_thread, total));
    std::vector<int64_t> split_row(static_cast<size_t>(P + 1)), split_nz(split_row.size());
    const size_t slots = static_cast<size_t>(P * F_);
    std::vector<float> head(slots), carry(slots);
    std::vector<int64_t> head_arg(kTracksArg ? slots : 0), carry_arg(head_arg.size());
    std::vector<char> has_carry(static_cast<size_t>(P), 0);

    const bool parallel = (n_ + nnz_) * F_ >= kMinParallelWork;
#pragma omp parallel num_threads(threads) if (parallel)
    {
      // Winners of a complete row go straight to arg_e when the caller asked for it.
      std::vector<int64_t> scratch_arg(kTracksArg && !arg_e_ ? static_cast<size_t>(F_) : 0);
      std::vector<int32_t> block_arg(kTracksArg ? static_cast<size_t>(F_) : 0);

#pragma omp for schedule(static)
      for (int64_t c = 0; c <= P; ++c) {
        // (total / P) * c + (total % P) * c / P == floor(total * c / P) without overflow.
        const int64_t d = (total / P) * c + (total % P) * c / P;
        const int64_t i = last_row_at_or_before(d, row_cost);
        split_row[static_cast<size_t>(c)] = i;
        split_nz[static_cast<size_t>(c)] =
            i < n_ ? std::min<int64_t>(d - row_cost * i, rowptr_[i + 1]) : nnz_;
      }

#pragma omp for schedule(static)
      for (int64_t c = 0; c < P; ++c) {
        const size_t sc = static_cast<size_t>(c);
        const int64_t i0 = split_row[sc], j0 = split_nz[sc];
        const int64_t i1 = split_row[sc + 1], j1 = split_nz[sc + 1];
        for (int64_t r = i0; r < i1; ++r) {
          const int64_t begin = rowptr_[r], end = rowptr_[r + 1];
          if (r == i0 && j0 > begin) {  // started by earlier chunks: pass 2 finishes it
            float* acc = head.data() + c * F_;
            int64_t* arg = kTracksArg ? head_arg.data() + c * F_ : nullptr;
            init(acc, arg);
            accumulate(acc, arg, block_arg.data(), j0, end);
            continue;
          }
          float* acc = out_ + r * F_;
          int64_t* arg = kTracksArg ? (arg_e_ ? arg_e_ + r * F_ : scratch_arg.data()) : nullptr;
          init(acc, arg);
          accumulate(acc, arg, block_arg.data(), begin, end);
          finalize(r, acc, arg);
        }
        if (i1 < n_) {
          const int64_t begin = std::max<int64_t>(j0, rowptr_[i1]);
          if (j1 > begin) {
            float* acc = carry.data() + c * F_;
            int64_t* arg = kTracksArg ? carry_arg.data() + c * F_ : nullptr;
            init(acc, arg);
            accumulate(acc, arg, block_arg.data(), begin, j1);
            has_carry[sc] = 1;
          }
        }
      }

#pragma omp for schedule(static)
      for (int64_t c = 1; c < P; ++c) {
        const size_t sc = static_cast<size_t>(c);
        const int64_t r = split_row[sc];
        if (r >= split_row[sc + 1] || split_nz[sc] <= rowptr_[r]) continue;  // no split row
        // Chunks a..c-1 all ended inside row r (chunk k's tail row is split_row[k + 1]).
        int64_t a = c - 1;
        while (a > 0 && split_row[static_cast<size_t>(a)] == r) --a;
        float* acc = out_ + r * F_;
        int64_t* arg = kTracksArg ? (arg_e_ ? arg_e_ + r * F_ : scratch_arg.data()) : nullptr;
        init(acc, arg);
        for (int64_t k = a; k < c; ++k)
          if (has_carry[static_cast<size_t>(k)])
            merge(acc, arg, carry.data() + k * F_,
                  kTracksArg ? carry_arg.data() + k * F_ : nullptr);
        merge(acc, arg, head.data() + c * F_, kTracksArg ? head_arg.data() + c * F_ : nullptr);
        finalize(r, acc, arg);
      }
    }
  }

 private:
  // The largest row i in [0, n] whose path state (i, rowptr[i]) costs at most d; the cost is
  // strictly increasing in i because row_cost >= 1.
  int64_t last_row_at_or_before(int64_t d, int64_t row_cost) const {
    int64_t lo = 0, hi = n_;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (row_cost * mid + static_cast<int64_t>(rowptr_[mid]) <= d) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  void init(float* __restrict acc, int64_t* __restrict arg) const {
    for (int64_t f = 0; f < F_; ++f) acc[f] = Red::identity();
    if constexpr (kTracksArg)
      for (int64_t f = 0; f < F_; ++f) arg[f] = -1;
  }

  // Reduces the messages of edges [begin, end) (all in one row) into acc/arg. Max/min track
  // winners in `block_arg` (F int32 of scratch) as offsets within a block of < 2^31 edges and
  // fold them into the int64 arg once per block: int32 selects are as wide as the float ones,
  // while int64 selects on SSE2 cost several shuffles per lane and made max 3x slower than sum.
  void accumulate(float* acc, int64_t* arg, int32_t* block_arg, int64_t begin,
                  int64_t end) const {
    if constexpr (!kTracksArg) {
      (void)arg;
      (void)block_arg;
      reduce_edges(acc, nullptr, begin, end);
    } else {
      for (int64_t block = begin; block < end; block += kMaxArgBlock) {
        std::fill_n(block_arg, F_, -1);
        reduce_edges(acc, block_arg, block, std::min(end, block + kMaxArgBlock));
        for (int64_t f = 0; f < F_; ++f)
          if (block_arg[f] >= 0) arg[f] = block + block_arg[f];
      }
    }
  }

  // The edge loop of accumulate(); winners are recorded as k - begin. The broadcast edge value
  // is hoisted out of the feature loop so every feature loop is unit-stride and vectorises.
  void reduce_edges(float* acc, int32_t* arg, int64_t begin, int64_t end) const {
    for (int64_t k = begin; k < end; ++k) {
      if constexpr (kUsesU) {
        // Source rows are random gathers from a table far bigger than the caches: ask for them
        // a few edges early so several misses are in flight at once.
        if (k + kPrefetchEdges < end) {
          const float* next = u_ + static_cast<int64_t>(col_[k + kPrefetchEdges]) * F_;
          for (int64_t f = 0; f < F_; f += kFloatsPerLine) __builtin_prefetch(next + f);
        }
      }
      const float* x = kUsesU ? u_ + static_cast<int64_t>(col_[k]) * F_ : nullptr;
      const int32_t id = static_cast<int32_t>(k - begin);
      if constexpr (!kUsesE) {
        reduce_edge(acc, arg, id, [x](int64_t f) { return x[f]; });
      } else if (ew_ == 1) {
        const float w = e_[k];
        reduce_edge(acc, arg, id,
                    [x, w](int64_t f) { return spmm_message<Op>(kUsesU ? x[f] : 0.f, w); });
      } else {
        const float* w = e_ + k * F_;
        reduce_edge(acc, arg, id,
                    [x, w](int64_t f) { return spmm_message<Op>(kUsesU ? x[f] : 0.f, w[f]); });
      }
    }
  }

  // One edge's F messages into the running reduction (arg is null for sum/mean).
  template <class Message>
  void reduce_edge(float* __restrict acc, int32_t* __restrict arg, int32_t id,
                   Message message) const {
    const int64_t F = F_;
    if constexpr (kTracksArg) {
#pragma omp simd
      for (int64_t f = 0; f < F; ++f) Red::update(acc[f], arg[f], message(f), id);
    } else {
      (void)arg;
      (void)id;
#pragma omp simd
      for (int64_t f = 0; f < F; ++f) acc[f] += message(f);
    }
  }

  // acc/arg hold edges that come before those of later/later_arg in row order.
  void merge(float* __restrict acc, int64_t* __restrict arg, const float* __restrict later,
             const int64_t* __restrict later_arg) const {
    for (int64_t f = 0; f < F_; ++f) {
      if constexpr (kTracksArg) Red::update(acc[f], arg[f], later[f], later_arg[f]);
      else acc[f] += later[f];
    }
  }

  // Turns a row's running reduction into its output. acc may be the output row itself and arg
  // the caller's arg_e row, hence no __restrict here.
  void finalize(int64_t r, const float* acc, const int64_t* arg) const {
    float* o = out_ + r * F_;
    const int64_t deg = static_cast<int64_t>(rowptr_[r + 1]) - static_cast<int64_t>(rowptr_[r]);
    if constexpr (R == Reduce::sum) {
      if (acc != o)
        for (int64_t f = 0; f < F_; ++f) o[f] = acc[f];
    } else if constexpr (R == Reduce::mean) {
      const float d = static_cast<float>(deg);
      for (int64_t f = 0; f < F_; ++f) o[f] = deg > 0 ? acc[f] / d : 0.f;
    } else {
      int64_t* au = arg_u_ ? arg_u_ + r * F_ : nullptr;
      int64_t* ae = arg_e_ ? arg_e_ + r * F_ : nullptr;
      for (int64_t f = 0; f < F_; ++f) {
        // arg -1 in a non-empty row: every message was the identity; the first one wins.
        const int64_t edge = deg > 0 ? (arg[f] >= 0 ? arg[f] : int64_t(rowptr_[r])) : -1;
        o[f] = deg > 0 ? acc[f] : 0.f;
        if (ae) ae[f] = edge;
        if (au) au[f] = edge >= 0 ? static_cast<int64_t>(col_[edge]) : -1;
      }
    }
  }

  int64_t n_, nnz_, F_, ew_;
  const Index* rowptr_;
  const Index* col_;
  const float* u_;
  const float* e_;
  float* out_;
  int64_t* arg_u_;
  int64_t* arg_e_;
};

template <SpmmOp Op, Reduce R>
void mergepath_typed(const SpmmProblem& p, int64_t row_cost, int64_t chunks_per_thread) {
  if (p.g->index_dtype() == DType::i64)
    MergePathSpmm<Op, R, int64_t>(p).run(row_cost, chunks_per_thread);
  else
    MergePathSpmm<Op, R, int32_t>(p).run(row_cost, chunks_per_thread);
}

template <SpmmOp Op>
void mergepath_op(const SpmmProblem& p, int64_t row_cost, int64_t chunks_per_thread) {
  switch (p.reduce) {
    case Reduce::sum: return mergepath_typed<Op, Reduce::sum>(p, row_cost, chunks_per_thread);
    case Reduce::mean: return mergepath_typed<Op, Reduce::mean>(p, row_cost, chunks_per_thread);
    case Reduce::max: return mergepath_typed<Op, Reduce::max>(p, row_cost, chunks_per_thread);
    case Reduce::min: return mergepath_typed<Op, Reduce::min>(p, row_cost, chunks_per_thread);
  }
}

// ---- SDDMM: edge-parallel ----------------------------------------------------------------------

template <SddmmOp Op>
inline float sddmm_combine(float a, float b) {
  if constexpr (Op == SddmmOp::add) return a + b;
  else if constexpr (Op == SddmmOp::sub) return a - b;
  else if constexpr (Op == SddmmOp::mul) return a * b;
  else if constexpr (Op == SddmmOp::div) return a / b;
  else if constexpr (Op == SddmmOp::copy_lhs) return a;
  else return b;
}

// Each thread takes one contiguous run of the row-sorted edges (an equal share of nnz, so skew
// does not matter), hence a destination row split between threads is read by at most two of
// them, and a target-v operand row is looked up once per row run and then stays in L1 while
// its edges stream past.
template <SddmmOp Op, class Index>
void edge_sddmm(const SddmmProblem& p) {
  constexpr bool kUsesLhs = Op != SddmmOp::copy_rhs;
  constexpr bool kUsesRhs = Op != SddmmOp::copy_lhs;
  const int64_t nnz = p.g->nnz(), F = p.F;
  const Index* row = p.g->row.data<Index>();
  const Index* col = p.g->col.data<Index>();
  const float* lhs = kUsesLhs ? p.lhs->data<float>() : nullptr;
  const float* rhs = kUsesRhs ? p.rhs->data<float>() : nullptr;
  float* out = p.out->data<float>();
  const Target lt = p.lhs_target, rt = p.rhs_target;

#pragma omp parallel if (nnz * F >= kMinParallelWork)
  {
    const int64_t T = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t begin = nnz / T * t + std::min(t, nnz % T);
    const int64_t end = begin + nnz / T + (t < nnz % T ? 1 : 0);
    int64_t cur_row = -1;
    const float* lhs_v = nullptr;  // lhs/rhs rows of the current destination (target v)
    const float* rhs_v = nullptr;
    for (int64_t k = begin; k < end; ++k) {
      if (k + kPrefetchEdges < end) {  // source rows are random gathers, as in the SpMM
        const int64_t next = col[k + kPrefetchEdges];
        for (int64_t f = 0; f < F; f += kFloatsPerLine) {
          if (kUsesLhs && lt == Target::u) __builtin_prefetch(lhs + next * F + f);
          if (kUsesRhs && rt == Target::u) __builtin_prefetch(rhs + next * F + f);
        }
      }
      const int64_t r = row[k];
      if (r != cur_row) {
        cur_row = r;
        if (kUsesLhs && lt == Target::v) lhs_v = lhs + r * F;
        if (kUsesRhs && rt == Target::v) rhs_v = rhs + r * F;
      }
      const int64_t c = col[k];
      const float* __restrict a = nullptr;
      const float* __restrict b = nullptr;
      if constexpr (kUsesLhs) a = lt == Target::v ? lhs_v : lhs + (lt == Target::u ? c : k) * F;
      if constexpr (kUsesRhs) b = rt == Target::v ? rhs_v : rhs + (rt == Target::u ? c : k) * F;
      if constexpr (Op == SddmmOp::dot) {
        // One dot per edge is the whole output, so there is no averaging over many values to
        // hide a float32 sum's cancellation error (a near-zero dot of wide rows can be off by
        // 1e-4 relative); summing in double costs nothing measurable in this memory-bound loop.
        double s = 0.0;
#pragma omp simd reduction(+ : s)
        for (int64_t f = 0; f < F; ++f) s += static_cast<double>(a[f]) * b[f];
        out[k] = static_cast<float>(s);
      } else {
        float* __restrict o = out + k * F;
#pragma omp simd
        for (int64_t f = 0; f < F; ++f)
          o[f] = sddmm_combine<Op>(kUsesLhs ? a[f] : 0.f, kUsesRhs ? b[f] : 0.f);
      }
    }
  }
}

template <SddmmOp Op>
void edge_sddmm_op(const SddmmProblem& p) {
  if (p.g->index_dtype() == DType::i64) edge_sddmm<Op, int64_t>(p);
  else edge_sddmm<Op, int32_t>(p);
}

}  // namespace

void cpu_mergepath_spmm(const SpmmProblem& p, const Schedule& s) {
  const int64_t row_cost = param(s, "row_cost", 1);
  const int64_t chunks_per_thread = param(s, "chunks_per_thread", 2);
  with_spmm_op(p.op, [&](auto op) {
    mergepath_op<decltype(op)::value>(p, row_cost, chunks_per_thread);
  });
}

void cpu_edge_sddmm(const SddmmProblem& p, const Schedule&) {
  switch (p.op) {
    case SddmmOp::dot: return edge_sddmm_op<SddmmOp::dot>(p);
    case SddmmOp::add: return edge_sddmm_op<SddmmOp::add>(p);
    case SddmmOp::sub: return edge_sddmm_op<SddmmOp::sub>(p);
    case SddmmOp::mul: return edge_sddmm_op<SddmmOp::mul>(p);
    case SddmmOp::div: return edge_sddmm_op<SddmmOp::div>(p);
    case SddmmOp::copy_lhs: return edge_sddmm_op<SddmmOp::copy_lhs>(p);
    case SddmmOp::copy_rhs: return edge_sddmm_op<SddmmOp::copy_rhs>(p);
  }
}

}  // namespace spgnn::detail
