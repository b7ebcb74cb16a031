// The one list of strategies. Adding a strategy = one entry here plus its kernel file.
#include "dispatch/registry.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <omp.h>

#include "kernels/cbsr_shape.hpp"
#include "kernels/shuffle_shape.hpp"
#include "kernels/cpu/cpu_kernels.hpp"
#include "tune/auto_cache.hpp"
#include "tune/device_info.hpp"
#if SPGNN_WITH_CUDA
#include "kernels/cuda/cuda_kernels.hpp"
#endif

namespace spgnn::detail {

namespace {

template <class P>
std::string needs_cpu(const P& p) {
  return p.g->device().is_cuda() ? "graph and tensors are on the GPU; this strategy runs on the CPU"
                                 : "";
}

template <class P>
std::string needs_gpu(const P& p) {
  return p.g->device().is_cuda() ? ""
                                 : "graph and tensors are on the CPU; this strategy runs on a GPU";
}

// The registry's validate hooks: bind a problem's sizes, the device's limits and the strategy's
// declared parameters to the rules at the end of this file.
std::string cpu_mergepath_valid(const SpmmProblem& p, const Schedule& s) {
  return validate_cpu_mergepath(find_strategy(OpKind::spmm, "cpu_mergepath"), s, p.g->n_rows,
                                p.g->nnz(), std::max(1, omp_get_max_threads()));
}
#if SPGNN_WITH_CUDA
int64_t value_or_default(const StrategyInfo& info, const Schedule& s, const char* name);  // below
std::string gnnone_spmm_valid(const SpmmProblem& p, const Schedule& s) {
  const StrategyInfo& info = find_strategy(OpKind::spmm, "gnnone");
  if (is_half(p.dtype) && (value_or_default(info, s, "nze_cache") == 0 ||
                           value_or_default(info, s, "consecutive") == 0))
    return std::string("nze_cache=0 and consecutive=0 are float32 ablations; gnnone's ") +
           dtype_name(p.dtype) + " kernel needs both on";
  // Both kernels skew their consecutive sub-slices by one word per thread group (at most 32).
  return validate_gnnone(info, s, p.g->index_dtype(), launch_limits(p.g->device()), 32);
}
std::string gnnone_sddmm_valid(const SddmmProblem& p, const Schedule& s) {
  return validate_gnnone(find_strategy(OpKind::sddmm, "gnnone"), s, p.g->index_dtype(),
                         launch_limits(p.g->device()), 32);
}
std::string rowtile_valid(const SpmmProblem& p, const Schedule& s) {
  return validate_rowtile(find_strategy(OpKind::spmm, "rowtile"), s, p.g->index_dtype(), p.F,
                          launch_limits(p.g->device()));
}
std::string warp_vertex_valid(const SpmmProblem&, const Schedule& s) {
  return validate_warp_vertex(find_strategy(OpKind::spmm, "warp_vertex"), s);
}
std::string mergepath_valid(const SpmmProblem& p, const Schedule& s) {
  return validate_mergepath(find_strategy(OpKind::spmm, "mergepath"), s, p.g->n_rows, p.g->nnz(),
                            p.F);
}
std::string shuffle_valid(const SddmmProblem& p, const Schedule& s) {
  const StrategyInfo& info = find_strategy(OpKind::sddmm, "shuffle");
  if (p.op != SddmmOp::dot && value_or_default(info, s, "blocked") == 1)
    return "same as blocked=0 (blocked changes dot only)";
  return validate_shuffle(info, s, p.F, is_half(p.dtype));
}
std::string cbsr_valid(const CbsrProblem& p, const Schedule& s) {
  const auto st = degree_stats(*p.g);
  return validate_cbsr(find_strategy(p.op, "gpu"), s, p.op, p.k, p.F, st->avg, st->max_deg);
}
#endif

#if SPGNN_WITH_CUDA
// gnnone's SpMM and SDDMM share one launch geometry (gnnone_common.cuh), hence one parameter list.
std::vector<ParamSpec> gnnone_params(std::vector<int64_t> caches, const char* unset) {
  return {{"cache_size", std::move(caches), 128,
           std::string("non-zeros cached per warp (stage 1); unset: ") + unset +
               ", halved down to 32 while the graph has fewer than 16 warp slices per SM"},
          {"warps", {1, 2, 4, 8, 16}, 4,
           "warps per block; unset: 4, halved down to 1 while there are fewer than 4 blocks per SM"},
          {"nze_cache", {0, 1}, 1,
           "ablation (paper figures; not tuned): stage-1 shared-memory cache on/off", false},
          {"vector_loads", {0, 1}, 1,
           "ablation (paper figures; not tuned): float4/float2 feature loads on/off", false},
          {"consecutive", {0, 1}, 1,
           "ablation (paper figures; not tuned): 1 = consecutive, 0 = round-robin", false}};
}
#endif

std::vector<SpmmEntry> make_spmm_registry() {
  std::vector<SpmmEntry> r;
  r.push_back({{"cpu_ref", OpKind::spmm, DeviceType::cpu,
                "float64-accumulating reference (the test oracle); every op and reduce", {}},
               &needs_cpu<SpmmProblem>, &cpu_ref_spmm});
  r.push_back({{"cpu_mergepath", OpKind::spmm, DeviceType::cpu,
                "OpenMP merge-path SpMM: even split of rows+non-zeros, partial rows combined "
                "without a serial fix-up",
                {{"row_cost", {1, 2, 4, 8}, 1, "merge-path cost of a row relative to a non-zero"},
                 {"chunks_per_thread", {1, 2, 4, 8}, 2, "merge-path chunks per OpenMP thread"}}},
               &needs_cpu<SpmmProblem>, &cpu_mergepath_spmm, &cpu_mergepath_valid});
#if SPGNN_WITH_CUDA
  r.push_back({{"gnnone", OpKind::spmm, DeviceType::cuda,
                "GNNOne two-stage COO SpMM: edge-balanced non-zero cache per warp, thread groups "
                "with vector loads, running reduction, atomics only at row splits (float16/"
                "bfloat16: split rows through float32 scratch, one rounding)",
                gnnone_params({32, 64, 128, 256, 512, 1024},
                              "256 (half with 8-lane groups of 8 halves: 512)")},
               &gnnone_spmm_supports, &gnnone_spmm, &gnnone_spmm_valid});
  r.push_back({{"cusparse", OpKind::spmm, DeviceType::cuda,
                "cusparseSpMM baseline (copy_u / u_mul_e with sum)",
                {{"alg", {0, 1, 2, 3}, 0,
                  "cusparseSpMM algorithm (all take row-major B and C): 0 = CSR_ALG2, 1 = CSR_ALG1, "
                  "2 = COO_ALG4, 3 = CSR_ALG3 (deterministic)"}}},
               &cusparse_spmm_supports, &cusparse_spmm});
  r.push_back({{"mergepath", OpKind::spmm, DeviceType::cuda,
                "MergePath-SpMM: merge-path split of rows+non-zeros, complete rows stored, cut "
                "rows added atomically; schedule computed on the GPU and cached with the graph",
                {{"cost", {4, 8, 16, 24, 32, 48, 64, 128}, 32,
                  "merge-path items (rows + non-zeros) per thread; lowered when the grid would "
                  "not fill the GPU"},
                 {"online", {0, 1}, 0,
                  "ablation (paper figures; not tuned): 1 = recompute the schedule on every call "
                  "(online)",
                  false}}},
               &mergepath_spmm_supports, &mergepath_spmm, &mergepath_valid});
  r.push_back({{"warp_vertex", OpKind::spmm, DeviceType::cuda,
                "TLPGNN: one warp (or sub-warp group when F is narrow) per vertex, lanes over "
                "features, result in registers, no atomics",
                {{"warps", {1, 2, 4, 8, 16}, 4, "warps per block"},
                 {"assign", {0, 1, 2}, 0,
                  "0 = heuristic (software when n > 1M or avg degree > 50), 1 = hardware, "
                  "2 = software task pool"},
                 {"step", {1, 2, 4, 8, 16, 32}, 4, "warp-tasks taken per atomic (software)"},
                 {"split", {0, -1, 32, 128, 512, 2048, 8192}, 0,
                  "rows with more non-zeros go to a block each (its groups share the row): "
                  "0 = auto (a quarter of a group's average share, or 8x the average degree when "
                  "less, at least 128), -1 = never"}}},
               &warp_vertex_spmm_supports, &warp_vertex_spmm, &warp_vertex_valid});
  r.push_back({{"rowtile", OpKind::spmm, DeviceType::cuda,
                "G-Sparse: rows in decreasing-length order, non-zero tiles in shared memory, "
                "strided register tiles, m_tile x n_tile block tiles",
                {{"m_tile", {1, 2, 4, 8, 16, 32}, 4, "rows per block (kMTile)"},
                 {"n_tile", {8, 16, 32, 64, 128, 256}, 128, "features per block (kNTile)"},
                 {"reg_tile", {1, 2, 4, 8}, 4, "strided features per lane (kNRegTile)"},
                 {"nnz_tile", {32, 64, 128, 256}, 64, "non-zeros staged in shared memory (kNnzTile)"},
                 {"swizzle", {0, 1}, 1, "1 = rows by decreasing length, 0 = natural order"}}},
               &rowtile_spmm_supports, &rowtile_spmm, &rowtile_valid});
#endif
  return r;
}

std::vector<SddmmEntry> make_sddmm_registry() {
  std::vector<SddmmEntry> r;
  r.push_back({{"cpu_ref", OpKind::sddmm, DeviceType::cpu,
                "float64-accumulating reference (the test oracle); every op and target", {}},
               &needs_cpu<SddmmProblem>, &cpu_ref_sddmm});
  r.push_back({{"cpu_edge", OpKind::sddmm, DeviceType::cpu,
                "OpenMP edge-parallel SDDMM over row-sorted edges", {}},
               &needs_cpu<SddmmProblem>, &cpu_edge_sddmm});
#if SPGNN_WITH_CUDA
  r.push_back({{"gnnone", OpKind::sddmm, DeviceType::cuda,
                "GNNOne two-stage COO SDDMM: cached non-zeros, row features reused while the "
                "row is unchanged, log2(group) shuffle rounds",
                gnnone_params({32, 64, 128, 256}, "128")},
               &gnnone_sddmm_supports, &gnnone_sddmm, &gnnone_sddmm_valid});
  r.push_back({{"cusparse", OpKind::sddmm, DeviceType::cuda,
                "cusparseSDDMM (CSR) baseline: dot of destination and source features", {}},
               &cusparse_sddmm_supports, &cusparse_sddmm});
  r.push_back({{"shuffle", OpKind::sddmm, DeviceType::cuda,
                "G-Sparse edge-parallel SDDMM: edges per block, L lanes per edge, dot reduced "
                "by log2(L) warp shuffles",
                {{"lanes", {0, 2, 4, 8, 16, 32}, 0, "lanes per edge; 0 = adaptive to F"},
                 {"edges_per_block", {32, 64, 128, 256, 512, 1024}, 256, "edges per block"},
                 {"blocked", {0, 1}, 0,
                  "dot: 1 = each lane reads consecutive vectors (its i-th loads, across the "
                  "lanes, are spread over the row), 0 = every lane's i-th vectors adjacent"}}},
               &shuffle_sddmm_supports, &shuffle_sddmm, &shuffle_valid});
#endif
  return r;
}

std::vector<CbsrEntry> make_cbsr_registry(OpKind op) {
  const bool fwd = op == OpKind::cbsr_spgemm;
  std::vector<CbsrEntry> r;
  r.push_back({{"cpu_ref", op, DeviceType::cpu,
                "serial float64-accumulating reference (the test oracle)", {}},
               &needs_cpu<CbsrProblem>});
  r.push_back({{"cpu", op, DeviceType::cpu,
                fwd ? "OpenMP over the rows of A, each a dense accumulator row"
                    : "OpenMP over the rows of A, sampled at the kept columns",
                {}},
               &needs_cpu<CbsrProblem>});
#if SPGNN_WITH_CUDA
  r.push_back({{"gpu", op, DeviceType::cuda,
                fwd ? "MaxK-GNN row-wise SpGEMM: a warp per segment of a row's edges, lane groups "
                      "over the kept values, shared-memory accumulation rows"
                    : "MaxK-GNN outer-product SSpMM: a warp per segment, d_out rows staged in "
                      "shared memory (or a warp per chunk of edges on short rows), results added "
                      "to the kept values atomically",
                cbsr_gpu_params(op)},
               &needs_gpu<CbsrProblem>, &cbsr_valid});
#endif
  return r;
}

template <class Entry>
const Entry& find_entry(const std::vector<Entry>& reg, const std::string& name, const char* op) {
  for (const auto& e : reg)
    if (e.info.name == name) return e;
  std::string known = "auto";
  for (const auto& e : reg) known += ", " + e.info.name;
  throw InvalidArgument(std::string("unknown ") + op + " strategy '" + name +
                        "'; this build has: " + known);
}

}  // namespace

const std::vector<SpmmEntry>& spmm_registry() {
  static const std::vector<SpmmEntry> r = make_spmm_registry();
  return r;
}
const std::vector<SddmmEntry>& sddmm_registry() {
  static const std::vector<SddmmEntry> r = make_sddmm_registry();
  return r;
}
const SpmmEntry& spmm_entry(const std::string& name) {
  return find_entry(spmm_registry(), name, "spmm");
}
const SddmmEntry& sddmm_entry(const std::string& name) {
  return find_entry(sddmm_registry(), name, "sddmm");
}
const std::vector<CbsrEntry>& cbsr_registry(OpKind op) {
  static const std::vector<CbsrEntry> fwd = make_cbsr_registry(OpKind::cbsr_spgemm);
  static const std::vector<CbsrEntry> bwd = make_cbsr_registry(OpKind::cbsr_sspmm);
  SPGNN_CHECK(op == OpKind::cbsr_spgemm || op == OpKind::cbsr_sspmm, InvalidArgument,
              "cbsr_registry: op must be cbsr_spgemm or cbsr_sspmm, got ", op_kind_name(op));
  return op == OpKind::cbsr_spgemm ? fwd : bwd;
}
const CbsrEntry& cbsr_entry(OpKind op, const std::string& name) {
  return find_entry(cbsr_registry(op), name, op_kind_name(op));
}

std::vector<ParamSpec> cbsr_gpu_params(OpKind op) {
  const bool fwd = op == OpKind::cbsr_spgemm;
  std::vector<int64_t> segments;
  for (int64_t v = 32; v <= 65536; v *= 2) segments.push_back(v);
  return {{"warps", {1, 2, 4, 8, 16}, cbsr::kDefaultWarps,
           "warps per block; fewer when the block's shared-memory rows would pass 96 KB"},
          {"segment", segments, 256,
           "edges per warp segment (a longer row is split, its output combined atomically); "
           "unset: the next power of two >= 4 x the average degree, in 64..4096" +
               std::string(fwd ? ""
                           : "; with flat=1, edges per warp chunk (unset: 64 when the "
                             "average degree is < 64, else 256, halved down to 32 until the "
                             "grid has 16 warps per SM)")},
          {"vec", {1, 2, 4}, 4,
           "values per lane and load (capped by k's divisibility); unset: 4"
           + std::string(fwd ? ", or 1 when the average degree is < 64 and k <= 32" : "")},
          {"private_rows", {0, 1}, 1,
           fwd ? "1 = a shared-memory row per lane group with plain adds, 0 = one row per warp "
                 "with shared-memory atomics; unset: 1 unless blocks would drop under 4 warps"
               : "the forward's accumulation; the backward ignores it (not tuned)",
           fwd},
          {"regs", {0, 40}, 0,
           "40 = blocks of <= 8 warps at 40 registers per thread, 0 = up to 64" +
               std::string(fwd ? "; unset: 40 with private rows on short rows (average degree "
                                 "< 64) and scalar lanes"
                               : "; row segments (flat=0) take it only with shared-memory rows")},
          {"flat", {0, 1}, 1,
           fwd ? "the backward's split of the edges; the forward ignores it (not tuned)"
               : "1 = a warp per chunk of `segment` consecutive edges, whatever their rows, d_out "
                 "read from global memory (no staged rows); 0 = a warp per row segment; unset: 1 "
                 "when the average degree is < 64 or k <= 16",
           !fwd},
          {"stream_edges", {0, 1}, 1,
           fwd ? "the backward's edge-list loads; the forward ignores it (not tuned)"
               : "with flat=1: 1 = the edge list (columns, rows, weights) read with streaming "
                 "(evict-first) loads, 0 = cached loads; unset: 1 at k <= 16",
           !fwd},
          {"smem_buffer", {0, 1}, 1,
           "ablation (not tuned): 0 = accumulate in global memory instead of shared-memory rows",
           false}};
}

// `auto`: the tuning cache first (src/tune/auto_cache.cpp), else a heuristic over cached graph
// statistics and F (the rules and their reasons are in docs/STRATEGIES.md). Whatever the
// heuristic proposes is checked with the strategy's own supports(); when that refuses, any
// supporting strategy of the data's device is taken, then any at all (cpu_ref is the last resort
// on the CPU).
namespace {

// avg and cv from n, nnz and sum_sq.
void finish_stats(DegreeStats& s) {
  s.avg = s.n ? double(s.nnz) / double(s.n) : 0.0;
  const double var = s.n ? std::max(0.0, s.sum_sq / double(s.n) - s.avg * s.avg) : 0.0;
  s.cv = s.avg > 0 ? std::sqrt(var) / s.avg : 0.0;
}

template <class I>
void fill_stats(const Tensor& rowptr, DegreeStats& s) {
  const std::vector<I> rp = rowptr.to_vector<I>();
  for (int64_t i = 0; i < s.n; ++i) {
    const int64_t d = static_cast<int64_t>(rp[i + 1] - rp[i]);
    s.max_deg = std::max(s.max_deg, d);
    s.empty_rows += d == 0;
    s.sum_sq += double(d) * double(d);
  }
  finish_stats(s);
}

// Graph::cache's key of g's statistics: keyed by the arrays' identity too, since copies of a
// Graph share the cache even after their index arrays are replaced (astype), and must not see
// each other's statistics.
std::string stats_key(const Graph& g) {
  return std::string("auto.stats@") + dtype_name(g.index_dtype()) + ":" +
         std::to_string(reinterpret_cast<uintptr_t>(g.rowptr.raw())) + ":" +
         std::to_string(g.n_rows) + ":" + std::to_string(g.nnz());
}

// Drops parameters equal to their declared defaults, so the heuristic's choice prints (and
// compares, in `spgnn bench`) like the plain strategy name when it changes nothing.
Schedule normalized(OpKind op, Schedule s) {
  const StrategyInfo& info = find_strategy(op, s.strategy);
  for (const auto& spec : info.params) {
    auto it = s.params.find(spec.name);
    if (it != s.params.end() && it->second == spec.default_value) s.params.erase(it);
  }
  return s;
}

// The GPU rules (docs/STRATEGIES.md, "auto"), set from the H100 suite in docs/BENCHMARKS.md
// (6 graphs x 5 widths x SpMM/SDDMM, every strategy timed in one process):
//  - gnnone is the default: its fixed non-zeros per warp make it immune to hub rows, which cost
//    the row-parallel kernels (warp_vertex, rowtile) 5-10x on R-MAT graphs.
//  - Tiny graphs (< 20K edges) are launch-bound (~10 us) and stay with gnnone at every width.
//    On the H100 cuSPARSE's single launch beat gnnone's zero-fill + main kernel pair by 1-2 us
//    below F = 32, but on the H200, the card spgnn is measured on now, gnnone wins at every
//    width: Cora and CiteSeer, F = 1-64, median of 50 runs, SpMM gnnone 0.0106-0.0113 ms against
//    cuSPARSE's default algorithm at 0.0153-0.0167 (1.4-1.5x) and within noise of its best of
//    four (0.0106-0.0123, one cell 0.0085); SDDMM gnnone 0.0064-0.0081 against 0.0070-0.0086.
//    From F = 32 gnnone beat cuSPARSE's best in 11 of 12 cells on both cards (docs/BENCHMARKS.md,
//    "`auto` on the tiny graphs" and "`auto` against cuSPARSE on the real graphs").
//  - Regular, dense-row graphs (average degree >= 64, degree CV < 0.5, e.g. Reddit-shaped):
//    a warp per row streams long rows with no atomics and wins SpMM at F >= 128 (1.12-1.16x over
//    gnnone on the H100) where the average degree is at least 128 (H200, u_mul_e, float32,
//    F = 128: degree 80 / 70 gnnone 4.90 / 17.19 ms against 6.09 / 19.22; degree 300 warp_vertex
//    6.16 against 7.13; degree 160 level; the Reddit shape, degree 489, gnnone 6.73 against 7.39,
//    the rule's one loss, left for the tuner); for SDDMM at F <= 32 cuSPARSE's CSR kernel wins
//    (1.3x), gnnone at wider F (up to F = 128 cuSPARSE on cards with at least 4 TB/s of DRAM
//    bandwidth: gpu_sddmm_choice).
// Every proposal still passes through the strategy's supports(); pick() falls back otherwise.
constexpr int64_t kTinyNnz = 20000;
constexpr double kDenseRowDegree = 64;
constexpr double kRegularCv = 0.5;

bool regular_dense_rows(const DegreeStats& st) {
  return st.avg >= kDenseRowDegree && st.cv < kRegularCv;
}

// Float32 copy_u SpMM (sum or mean: GraphSAGE, GIN) on regular dense rows, H200, every schedule
// timed in one process (docs/BENCHMARKS.md, "`auto`'s float32 copy_u SpMM on regular rows"):
// - 32 <= F <= 64: a group per row, hardware block assignment, no split rows (the Reddit shape at
//   F = 44 / 64: 2.42 / 3.14 ms against gnnone's 2.59 / 3.76, level at F = 32; ER graphs of
//   average degree 70-300 at F = 32 / 64: 1-28% faster than gnnone). Below F = 32 gnnone (Reddit
//   shape, F = 8 / 16 / 24: 0.91 / 0.88 / 1.26 against 1.21 / 0.91 / 1.31).
// - Wider, only where rows are long (average degree >= 128): 2 warps a block below F = 128
//   (F = 96, degree 300 / 489: 3.83 / 4.62 against gnnone's 5.23 / 4.90), one task per atomic and
//   no split rows from F = 128 (F = 256, degree 160 / 300 / 489: 9.68 / 10.16 / 12.31 against
//   gnnone's 11.15 / 13.86 / 13.03). At degree 80 gnnone wins from F = 96 (F = 256: 9.70 against
//   10.82-11.13); at degree 70 (2M rows) the two are within 4%.
// Weighted SpMMs (u_mul_e: GCN's normalisation) keep the older rule above: a group per row reads
// an edge value per non-zero and lost to gnnone (Reddit shape, F = 16 / 32: 1.46 / 2.22 against
// 0.94 / 1.72). Without split rows one group walks a whole row, so these schedules are kept for
// graphs with no row far above average.
constexpr int64_t kGroupRowMinF = 32, kGroupRowMaxF = 64;
constexpr double kLongRowDegree = 128;

bool no_outlier_rows(const DegreeStats& st) {
  return double(st.max_deg) <= 4 * st.avg;
}

bool long_regular_rows(const DegreeStats& st) {
  return regular_dense_rows(st) && st.avg >= kLongRowDegree;
}

// Half precision (float16/bfloat16): SpMM has two half kernels, gnnone (edge-balanced; cut rows
// through float32 scratch) and warp_vertex (a group per row). Tiny or empty graphs take
// warp_vertex (one kernel; cuSPARSE's half SpMM rounds per partial); everywhere else gnnone, set
// on the H200 (docs/BENCHMARKS.md, "Half SpMM on regular rows on the H200" and "Half weighted
// SpMM on long regular rows, re-measured"). Over regular graphs of 50K-2M rows, average degree
// 70-489, bfloat16 and float16:
// - copy_u: gnnone at every width (Reddit shape, bfloat16, F = 32 / 128 / 256: 1.00 / 3.44 /
//   6.88 ms against warp_vertex's 1.36 / 4.17 / 7.84); on 300K rows of degree 300 warp_vertex
//   won by 3-7%.
// - weighted ops (u_mul_e ...): gnnone since its weighted kernel stopped spilling (kUMulEScalar);
//   it used to trail warp_vertex with one task per atomic at F >= 128 on long rows, which had a
//   rule of its own. Re-measured, bfloat16, F = 128 / 256: Reddit shape 3.99 / 8.04 ms against
//   4.50 / 8.41, 400K rows of degree 160 3.19 / 6.29 against 3.36 / 6.43; only 300K rows of
//   degree 300 still favour warp_vertex (3.92 / 7.75 against 3.90 / 7.39), by less than the
//   Reddit shape gains, and no degree statistic separates that graph from the other two.
Schedule gpu_spmm_choice(const DegreeStats& st, SpmmOp op, int64_t F, DType dtype) {
  if (is_half(dtype)) {
    if (st.nnz < kTinyNnz) return Schedule{"warp_vertex", {}};
    return Schedule{"gnnone", {}};
  }
  if (st.nnz == 0) return Schedule{"warp_vertex", {}};  // one kernel, nothing to balance
  if (op == SpmmOp::copy_u && st.nnz >= kTinyNnz && regular_dense_rows(st) &&
      no_outlier_rows(st)) {
    if (F >= kGroupRowMinF && F <= kGroupRowMaxF)
      return Schedule{"warp_vertex", {{"assign", 1}, {"split", -1}}};
    if (F > kGroupRowMaxF && long_regular_rows(st))
      return F >= 128 ? Schedule{"warp_vertex", {{"step", 1}, {"split", -1}}}
                      : Schedule{"warp_vertex", {{"assign", 1}, {"split", -1}, {"warps", 2}}};
    return Schedule{"gnnone", {}};
  }
  if (long_regular_rows(st) && F >= 128) return Schedule{"warp_vertex", {}};
  return Schedule{"gnnone", {}};
}

// Half SDDMM: shuffle with 1024 edges per block, 1.01-1.07x faster than 256 on every case
// measured (H200, float16, F = 64 / 128 / 256: the Reddit shape 3.22 / 6.72 / 13.98 ms against
// 3.45 / 6.94 / 14.14, R-MAT scale 21 1.01 / 1.88 / 3.67 against 1.07 / 1.93 / 3.70).
// From 72 to 128 half features (4 lanes per edge, 3-4 vectors a lane) each lane also reads
// consecutive vectors (`blocked`): H200, bfloat16, F = 128: the Reddit shape 5.85 against 6.26 ms,
// R-MAT scale 21 1.69 against 1.98, the products shape 5.84 against 6.34; at F = 64 and 256 it
// lost (3.70 against 3.41, 14.80 against 12.42 on the Reddit shape).
// From 40 to 64 half features, two lanes per edge, each reading its 3-4 vectors consecutively
// (the same vectors a lane as at F = 128; the adaptive width gives 4 lanes of 2 vectors, and
// `blocked` alone did not pay there): H100, F = 64, the tuner's pick on all three large graphs,
// bfloat16 the Reddit shape 2.74 against 3.61 ms, R-MAT scale 21 0.816 against 1.107, the products
// shape 2.81 against 3.80 (float16 alike), 1.32-1.36x (docs/BENCHMARKS.md, "Half SDDMM, two lanes").
// float16 dot products of at most 64 features on regular dense rows go to cuSPARSE, as float32's
// do at F <= 32: on the Reddit shape at F = 64 its float16 SDDMM took 2.24 ms against shuffle's
// 3.46 on the H100 and 1.89 against 3.32 on the H200 (docs/BENCHMARKS.md, "Half SDDMM"), while
// shuffle stays 3-4x ahead on the R-MAT graphs. At F = 128 the GPUs disagree (H100: shuffle
// 6.32 against 6.74; H200: cuSPARSE 4.77 against 5.85): see the DRAM rule below. bfloat16 has no
// cuSPARSE SDDMM in CUDA 13. Only 16-byte rows (F % 8 == 0): the widths measured, and the
// alignment cuSPARSE's half kernels are known to run with.
//
// On cards with faster DRAM cuSPARSE's CSR SDDMM gains more than spgnn's kernels, and on
// regular dense rows it wins up to F = 128, float32 and float16 alike. H200 (4.8 TB/s peak),
// the Reddit shape, F = 64 / 128 / 256, float32: cuSPARSE 4.59 / 9.99 / 22.74 ms against
// gnnone's 5.52 / 10.99 / 22.04; float16: 1.89 / 4.73 / 15.45 against shuffle's - / 5.88 / 12.34
// (docs/BENCHMARKS.md, "`auto`'s SDDMM on the H200"). On the H100 (3.4 TB/s) gnnone won float32
// at F = 64 and 128 (5.97 against 6.24, 11.94 against 13.65) and shuffle float16 at F = 128.
// So the wider range holds from 4 TB/s; cards that report no memory clock keep the H100 rule.
// F = 256 stays with spgnn on both cards (H200: gnnone 22.04 / 22.34 ms on the directed /
// symmetric Reddit shapes against cuSPARSE's 22.74 / 24.17).
constexpr double kFastDramGbps = 4000;

bool uv_dot(const SddmmProblem& p) {
  const bool uv = (p.lhs_target == Target::u && p.rhs_target == Target::v) ||
                  (p.lhs_target == Target::v && p.rhs_target == Target::u);
  return p.op == SddmmOp::dot && uv;
}

bool cusparse_half_sddmm_pays(const DegreeStats& st, const SddmmProblem& p) {
  // fast_dram last: it reads the device's properties, which only these few problems need
  return p.dtype == DType::f16 && uv_dot(p) && st.nnz >= kTinyNnz && regular_dense_rows(st) &&
         p.F % 8 == 0 && (p.F <= 64 || (p.F <= 128 && fast_dram(p.g->device())));
}

Schedule gpu_sddmm_choice(const DegreeStats& st, const SddmmProblem& p) {
  if (is_half(p.dtype)) {
    if (cusparse_half_sddmm_pays(st, p)) return Schedule{"cusparse", {}};
    Schedule s{"shuffle", {{"edges_per_block", 1024}}};
    if (p.op == SddmmOp::dot && p.F % 8 == 0 && p.F > 32 && p.F <= 128) {
      s.params["blocked"] = 1;
      if (p.F <= 64) s.params["lanes"] = 2;
    }
    return s;
  }
  if (regular_dense_rows(st) && p.F <= 32) return Schedule{"cusparse", {}};
  if (regular_dense_rows(st) && p.F <= 128 && uv_dot(p) && fast_dram(p.g->device()))
    return Schedule{"cusparse", {}};
  return Schedule{"gnnone", {}};
}

template <class Entry, class P>
Schedule pick(const std::vector<Entry>& reg, const P& p, OpKind op, Schedule proposal) {
  for (const auto& e : reg)
    if (e.info.name == proposal.strategy && e.supports(p).empty()) return normalized(op, proposal);
  // The proposal cannot run this problem: the first supporting strategy of the data's device
  // (registry order puts the fast kernels first), then any.
  const DeviceType dev = p.g->device().is_cuda() ? DeviceType::cuda : DeviceType::cpu;
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& e : reg)
      if ((pass == 1 || e.info.device == dev) && e.info.name != "cpu_ref" && e.supports(p).empty())
        return Schedule{e.info.name, {}};
  std::string reasons;
  for (const auto& e : reg) {
    const std::string why = e.supports(p);
    if (why.empty()) return Schedule{e.info.name, {}};
    reasons += "\n  " + e.info.name + ": " + why;
  }
  throw Unsupported(std::string("no ") + op_kind_name(op) +
                    " strategy in this build supports this problem:" + reasons);
}

template <class Entry, class P>
std::string schedule_problem(const Entry& e, const P& p, const Schedule& s) {
  std::string why = e.supports(p);
  if (why.empty() && e.validate) why = e.validate(p, s);
  return why;
}

// A parameter's value in `s`, or the default `info` declares (0 if it declares no such one).
int64_t value_or_default(const StrategyInfo& info, const Schedule& s, const char* name) {
  auto it = s.params.find(name);
  if (it != s.params.end()) return it->second;
  for (const auto& spec : info.params)
    if (spec.name == name) return spec.default_value;
  return 0;
}

// Widest vector the CUDA launchers use for width F when every pointer is aligned (tensors the
// library allocates are): float4, float2 or scalar.
int64_t vector_width(int64_t F) { return F % 4 == 0 ? 4 : F % 2 == 0 ? 2 : 1; }

// Smallest legal value of `name` that is >= `at_least` (the largest legal value if none is).
int64_t smallest_legal_at_least(const StrategyInfo& info, const char* name, int64_t at_least) {
  for (const auto& spec : info.params) {
    if (spec.name != name || spec.values.empty()) continue;
    std::vector<int64_t> v = spec.values;
    std::sort(v.begin(), v.end());
    for (int64_t x : v)
      if (x >= at_least) return x;
    return v.back();
  }
  return at_least;
}

}  // namespace

bool fast_dram(Device d) {
  return d.is_cuda() && tune::gpu_props(d.index).dram_gbps >= kFastDramGbps;
}

std::shared_ptr<const DegreeStats> degree_stats(const Graph& g) {
  const std::string key = stats_key(g);
  std::lock_guard<std::mutex> lock(g.cache->mutex);
  auto& slot = g.cache->items[key];
  if (!slot) {
    auto s = std::make_shared<DegreeStats>();
    s->n = g.n_rows;
    s->nnz = g.nnz();
    if (g.rowptr.defined() && g.rowptr.numel() == g.n_rows + 1) {
      if (g.index_dtype() == DType::i64) fill_stats<int64_t>(g.rowptr, *s);
      else fill_stats<int32_t>(g.rowptr, *s);
    }
    slot = s;
  }
  return std::static_pointer_cast<const DegreeStats>(slot);
}

void provide_stats(const Graph& g, const DegreeSummary& in) {
  const int64_t n = g.n_rows, nnz = g.nnz();
  // What any graph of n rows and nnz edges satisfies: a row of the maximum degree holds at most
  // every edge, and the squares lie between nnz^2 / n (equal rows) and max_degree * nnz.
  const bool sizes_ok =
      in.max_degree >= 0 && in.max_degree <= nnz && in.empty_rows >= 0 && in.empty_rows <= n &&
      (nnz == 0) == (in.max_degree == 0) && (nnz == 0 || in.empty_rows < n) &&
      std::isfinite(in.sum_sq) && in.sum_sq >= 0 &&
      in.sum_sq <= double(in.max_degree) * double(nnz) * (1 + 1e-9) &&
      (n == 0 || in.sum_sq >= double(nnz) * double(nnz) / double(n) * (1 - 1e-9));
  SPGNN_CHECK(sizes_ok, InvalidArgument, "provide_degree_summary: max degree ", in.max_degree,
              ", ", in.empty_rows, " empty rows and a sum of squared degrees of ", in.sum_sq,
              " are impossible for a graph of ", n, " rows and ", nnz, " edges");
  auto s = std::make_shared<DegreeStats>();
  s->n = n;
  s->nnz = nnz;
  s->max_deg = in.max_degree;
  s->empty_rows = in.empty_rows;
  s->sum_sq = in.sum_sq;
  finish_stats(*s);
  std::lock_guard<std::mutex> lock(g.cache->mutex);
  auto& slot = g.cache->items[stats_key(g)];
  if (!slot) slot = s;
}

std::string spmm_schedule_problem(const SpmmProblem& p, const Schedule& s) {
  return schedule_problem(spmm_entry(s.strategy), p, s);
}
std::string sddmm_schedule_problem(const SddmmProblem& p, const Schedule& s) {
  return schedule_problem(sddmm_entry(s.strategy), p, s);
}
std::string cbsr_schedule_problem(const CbsrProblem& p, const Schedule& s) {
  return schedule_problem(cbsr_entry(p.op, s.strategy), p, s);
}

bool half_spmm_width(int64_t F, int64_t min_f) {
  return F % kHalfSpmmWidthMultiple == 0 && F >= min_f &&
         (F <= kHalfSpmmOnePassF || F % kHalfSpmmMinF == 0);
}
bool half_spmm_pays(const Graph& g, int64_t F) {
  return g.device().is_cuda() && half_spmm_width(F, kHalfSpmmMinRegularF) &&
         regular_dense_rows(*degree_stats(g));
}

Schedule heuristic_spmm_schedule(const SpmmProblem& p) {
  Schedule proposal{"cpu_mergepath", {}};
  if (p.g->device().is_cuda()) proposal = gpu_spmm_choice(*degree_stats(*p.g), p.op, p.F, p.dtype);
  return pick(spmm_registry(), p, OpKind::spmm, proposal);
}
Schedule heuristic_sddmm_schedule(const SddmmProblem& p) {
  Schedule proposal{"cpu_edge", {}};
  if (p.g->device().is_cuda()) proposal = gpu_sddmm_choice(*degree_stats(*p.g), p);
  return pick(sddmm_registry(), p, OpKind::sddmm, proposal);
}

Schedule auto_spmm_schedule(const SpmmProblem& p) {
  if (auto hit = tune::cached_spmm_schedule(p)) return *hit;
  return heuristic_spmm_schedule(p);
}
Schedule auto_sddmm_schedule(const SddmmProblem& p) {
  if (auto hit = tune::cached_sddmm_schedule(p)) return *hit;
  return heuristic_sddmm_schedule(p);
}
Schedule auto_cbsr_schedule(const CbsrProblem& p) {
  if (auto hit = tune::cached_cbsr_schedule(p)) return *hit;
  return Schedule{p.g->device().is_cuda() ? "gpu" : "cpu", {}};
}

// ---- validity rules (see registry.hpp) ------------------------------------------------------

LaunchLimits launch_limits(Device d) {
  LaunchLimits lim;
  if (!d.is_cuda()) return lim;
  const tune::GpuProps props = tune::gpu_props(d.index);
  lim.max_threads_per_block = props.max_threads_per_block;
  lim.max_smem_per_block = props.max_smem_per_block_optin;
  return lim;
}

// gnnone_common.cuh: warps * 32 threads; with the stage-1 cache on, every warp holds
// (cache + 2) row indices, cache column indices and cache values in shared memory (16-byte
// rounded; `skew` spare words more in each array, gnnone::sub_slice_skew), and the launcher
// opts in above 48 KB up to the device limit. warps left unset is sized down from the default,
// so the default bounds it; an unset cache_size is checked at the default, and the SpMM
// launcher, which starts it higher on large graphs, halves it itself until the block fits
// (gnnone_spmm.cu).
std::string validate_gnnone(const StrategyInfo& info, const Schedule& s, DType index,
                            const LaunchLimits& lim, int64_t skew) {
  const int64_t cache = value_or_default(info, s, "cache_size");
  const int64_t warps = value_or_default(info, s, "warps");
  const bool nze_cache = value_or_default(info, s, "nze_cache") != 0;
  if (warps * 32 > lim.max_threads_per_block)
    return "warps=" + std::to_string(warps) + " is " + std::to_string(warps * 32) +
           " threads per block; the device allows " + std::to_string(lim.max_threads_per_block);
  const int64_t idx = int64_t(dtype_size(index));
  const int64_t per_warp =
      ((cache + 2 + skew) * idx + (cache + skew) * idx + (cache + skew) * 4 + 15) / 16 * 16;
  if (nze_cache && warps * per_warp > lim.max_smem_per_block)
    return "cache_size=" + std::to_string(cache) + " x warps=" + std::to_string(warps) + " needs " +
           std::to_string(warps * per_warp) + " bytes of shared memory per block; the device "
           "allows " + std::to_string(lim.max_smem_per_block);
  return "";
}

// rowtile_spmm.cu: a team has at most 32 lanes, so reg_tile is raised to n_tile / 32 (a smaller
// reg_tile is the same kernel as reg_tile = n_tile / 32); m_tile teams of n_tile / reg_tile lanes
// per block; m_tile * nnz_tile (index + value) staged in shared memory (opt-in above 48 KB);
// ceil(F / n_tile) feature tiles in grid.y (at most 65535).
std::string validate_rowtile(const StrategyInfo& info, const Schedule& s, DType index, int64_t F,
                             const LaunchLimits& lim) {
  const int64_t m_tile = value_or_default(info, s, "m_tile");
  const int64_t n_tile = value_or_default(info, s, "n_tile");
  const int64_t reg_tile = value_or_default(info, s, "reg_tile");
  const int64_t nnz_tile = value_or_default(info, s, "nnz_tile");
  if (reg_tile < n_tile / 32)
    return "same as reg_tile=" + std::to_string(n_tile / 32) + " (n_tile=" +
           std::to_string(n_tile) + " at 32 lanes raises reg_tile to n_tile / 32)";
  const int64_t lanes = std::max<int64_t>(1, n_tile / reg_tile);
  if (m_tile * lanes > lim.max_threads_per_block)
    return "m_tile=" + std::to_string(m_tile) + " x " + std::to_string(lanes) +
           " lanes exceeds " + std::to_string(lim.max_threads_per_block) +
           " threads per block";
  const int64_t smem = m_tile * nnz_tile * (int64_t(dtype_size(index)) + 4);
  if (smem > lim.max_smem_per_block)
    return "m_tile=" + std::to_string(m_tile) + " x nnz_tile=" + std::to_string(nnz_tile) +
           " needs " + std::to_string(smem) + " bytes of shared memory per block; the device "
           "allows " + std::to_string(lim.max_smem_per_block);
  const int64_t tile_f = std::max<int64_t>(lanes * reg_tile, 1);
  if ((F + tile_f - 1) / tile_f > 65535)
    return "F=" + std::to_string(F) + " needs more than 65535 feature tiles of n_tile=" +
           std::to_string(n_tile);
  return "";
}

// warp_vertex.cu: `step` is read only by the software task pool; with hardware assignment
// (assign=1) every step is the same kernel.
std::string validate_warp_vertex(const StrategyInfo& info, const Schedule& s) {
  const int64_t assign = value_or_default(info, s, "assign");
  const int64_t step = value_or_default(info, s, "step");
  const int64_t step0 = value_or_default(info, Schedule{info.name, {}}, "step");
  if (assign == 1 && step != step0)
    return "same as step=" + std::to_string(step0) +
           " (assign=1 is hardware assignment; step applies to the software task pool only)";
  return "";
}

// mergepath_spmm.cu: the items per thread are lowered to ceil((n + nnz) / min_threads) so the
// grid keeps kMinWarps (8192) warps of sub-warp groups; every larger `cost` runs the same
// schedule as the smallest legal value at or above that cap.
std::string validate_mergepath(const StrategyInfo& info, const Schedule& s, int64_t n_rows,
                               int64_t nnz, int64_t F) {
  if (F <= 0) return "";
  constexpr int64_t kMinWarps = 8192;
  const int64_t cost = value_or_default(info, s, "cost");
  const int64_t nv = F / vector_width(F);
  const int g_log2 = std::min(5, log2_ceil(nv));
  const int64_t passes = (nv + 31) / 32;
  const int64_t min_threads = std::max<int64_t>(1, kMinWarps * (32 >> g_log2) / passes);
  const int64_t cap = std::max<int64_t>(1, (n_rows + nnz + min_threads - 1) / min_threads);
  if (cost <= cap) return "";
  const int64_t same = smallest_legal_at_least(info, "cost", cap);
  if (same == cost) return "";
  return "same as cost=" + std::to_string(same) + " (the launcher lowers cost to " +
         std::to_string(cap) + " items per thread on this graph to fill the GPU)";
}

// shuffle_sddmm.cu: L lanes per edge reduce the F / V vector slots of one edge; lanes = 0 picks
// shuffle::adaptive_lanes_log2 (V: 4 floats or 8 halves where F allows). An explicit L equal to
// that is the same kernel as 0, and an L above the slot count (rounded up to a power of two, at
// least 2) leaves lanes idle on every edge.
std::string validate_shuffle(const StrategyInfo& info, const Schedule& s, int64_t F, bool half) {
  if (F <= 0) return "";
  const int64_t lanes = value_or_default(info, s, "lanes");
  const int64_t V = shuffle::vector_width(F, half);
  const int64_t nv = F / V;
  const int64_t adaptive = int64_t{1} << shuffle::adaptive_lanes_log2(nv, half && V == 8);
  if (value_or_default(info, s, "blocked") == 1 && nv <= (lanes ? lanes : adaptive))
    return "same as blocked=0 (one vector a lane)";
  if (lanes == 0) return "";
  if (lanes == adaptive) return "same as lanes=0 (adaptive picks " + std::to_string(lanes) + ")";
  const int64_t useful = std::max<int64_t>(2, int64_t{1} << log2_ceil(nv));
  if (lanes > useful)
    return "lanes=" + std::to_string(lanes) + " exceeds the " + std::to_string(nv) +
           " vector slots of F=" + std::to_string(F) + "; the extra lanes would idle";
  return "";
}

namespace {
// What the CBSR launchers do with a schedule (the decisions of run() in cbsr_spgemm.cu and
// cbsr_sspmm.cu, step by step): two schedules with equal launches run the same kernel.
struct CbsrLaunch {
  int form = 0;         // 0 = rows in global memory, 1 = a shared row per warp, 2 = private rows,
                        // 3 = the backward's flat form (edge chunks, rows in global memory)
  int V = 1;            // values per lane
  int warps = 0;        // per block, after the shared-memory and lean caps
  int regs = 0;         // 0 or kLeanRegs
  int64_t segment = 0;  // edges per segment (0 = no row is split), or per chunk in form 3
  bool stream = false;  // form 3: the edge list read with streaming loads
  bool operator==(const CbsrLaunch& o) const {
    return form == o.form && V == o.V && warps == o.warps && regs == o.regs &&
           segment == o.segment && stream == o.stream;
  }
  std::string str() const {
    static const char* forms[] = {"rows in global memory", "a shared-memory row per warp",
                                  "a shared-memory row per lane group",
                                  "an edge chunk per warp, rows in global memory"};
    return std::string(forms[form]) + ", " + std::to_string(V) + " values per lane, " +
           std::to_string(warps) + " warps per block" + (regs ? ", 40 registers" : "") +
           (form == 3  ? ", chunks of " + std::to_string(segment) + " edges"
            : segment ? ", segments of " + std::to_string(segment)
                      : ", no row split") +
           (stream ? ", streaming edge loads" : "");
  }
};

CbsrLaunch cbsr_launch(const Schedule& s, OpKind op, int64_t k, int64_t F, double avg,
                       int64_t max_deg) {
  auto get = [&](const char* name, int64_t unset) {
    auto it = s.params.find(name);
    return it == s.params.end() ? unset : it->second;
  };
  const int64_t warps = get("warps", 0), vec = get("vec", 0), pr = get("private_rows", -1),
                regs = get("regs", -1);
  const bool smem_buffer = get("smem_buffer", 1) != 0;
  // The forward ignores flat.
  const bool flat = op == OpKind::cbsr_sspmm && cbsr::sspmm_flat(get("flat", -1), avg, k);
  CbsrLaunch L;
  if (flat) {
    // A chunk's length matters whatever the rows' (it sets the warps' share of the edge list).
    // Unset, the launcher also shortens it on graphs too small to fill the card, which this
    // rule does not see; only set values are compared (validate_cbsr), so that changes no rule.
    L.segment = get("segment", 0) > 0 ? get("segment", 0) : cbsr::flat_chunk(avg);
    L.stream = cbsr::flat_stream_edges(get("stream_edges", -1), k);
  } else {
    const int64_t S = get("segment", 0) > 0 ? get("segment", 0) : cbsr::default_segment(avg);
    L.segment = S >= max_deg ? 0 : S;
  }
  cbsr::BlockShape bs;
  if (op == OpKind::cbsr_spgemm) {
    const bool want_private = pr != 0;
    int64_t max_v = 4;
    if (vec > 0) max_v = vec;
    else if (want_private && avg < 64.0 && k <= 32) max_v = 1;
    L.V = cbsr::vector_width(k, std::min<int64_t>(max_v, 4));
    const int groups = 32 >> cbsr::lanes_log2(k, L.V);
    bs = cbsr::block_shape(F, warps, false);
    if (smem_buffer && want_private) {
      bs = cbsr::block_shape(F, warps, true, groups);
      if (bs.smem && (pr == 1 || bs.warps >= std::min(4, bs.warps_requested))) L.form = 2;
    }
    if (smem_buffer && L.form == 0) {
      bs = cbsr::block_shape(F, warps, true);
      if (bs.smem) L.form = 1;
    }
    const bool lean_default = avg < 64.0 && L.V == 1;
    L.regs = L.form == 2 && (regs > 0 || (regs < 0 && lean_default)) ? cbsr::kLeanRegs : 0;
  } else {
    L.V = cbsr::vector_width(k, vec > 0 ? std::min<int64_t>(vec, 4) : 4);
    bs = cbsr::block_shape(F, warps, smem_buffer && !flat);  // the flat form stages no row
    L.form = flat ? 3 : bs.smem ? 1 : 0;
    L.regs = L.form != 0 && regs > 0 ? cbsr::kLeanRegs : 0;
  }
  if (L.regs) cbsr::make_lean(bs);
  L.warps = bs.warps;
  return L;
}
}  // namespace

std::string cbsr_launch_str(const Schedule& s, OpKind op, int64_t k, int64_t F, double avg_deg,
                            int64_t max_deg) {
  return cbsr_launch(s, op, k, F, avg_deg, max_deg).str();
}

std::string validate_cbsr(const StrategyInfo& info, const Schedule& s, OpKind op, int64_t k,
                          int64_t F, double avg_deg, int64_t max_deg) {
  if (k <= 0 || F <= 0) return "";
  const CbsrLaunch mine = cbsr_launch(s, op, k, F, avg_deg, max_deg);
  // Only explicitly set parameters can make a duplicate: an unset one is the launcher's choice.
  // Each set value is compared with the earlier legal values of the same parameter, so of a
  // group of schedules that launch alike the one with the earliest values stays valid.
  for (const auto& spec : info.params) {
    auto it = s.params.find(spec.name);
    if (it == s.params.end()) continue;
    auto at = std::find(spec.values.begin(), spec.values.end(), it->second);
    for (auto v = spec.values.begin(); v != at && at != spec.values.end(); ++v) {
      Schedule t = s;
      t.params[spec.name] = *v;
      if (cbsr_launch(t, op, k, F, avg_deg, max_deg) == mine)
        return "same as " + spec.name + "=" + std::to_string(*v) + " (both launch " +
               mine.str() + ")";
    }
  }
  return "";
}

// cpu_mergepath.cpp: threads * chunks_per_thread chunks, but never more than the merge path's
// row_cost * n + nnz items; a chunk count clamped that way is the same partition as the smallest
// legal chunks_per_thread that already reaches the clamp.
std::string validate_cpu_mergepath(const StrategyInfo& info, const Schedule& s, int64_t n_rows,
                                   int64_t nnz, int64_t threads) {
  const int64_t row_cost = value_or_default(info, s, "row_cost");
  const int64_t cpt = value_or_default(info, s, "chunks_per_thread");
  const int64_t total = std::max<int64_t>(1, row_cost * n_rows + nnz);
  threads = std::max<int64_t>(1, threads);
  if (threads * cpt <= total) return "";
  const int64_t same = smallest_legal_at_least(info, "chunks_per_thread",
                                               (total + threads - 1) / threads);
  if (same == cpt) return "";
  return "same as chunks_per_thread=" + std::to_string(same) + " (" + std::to_string(threads) +
         " threads x " + std::to_string(cpt) + " chunks exceed the " + std::to_string(total) +
         " merge-path items; chunks are capped at one per item)";
}

}  // namespace spgnn::detail

namespace spgnn {
bool half_spmm_width_pays(int64_t F) { return detail::half_spmm_width(F, detail::kHalfSpmmMinF); }

DegreeSummary degree_summary(const Graph& g) {
  const auto st = detail::degree_stats(g);
  return DegreeSummary{st->max_deg, st->empty_rows, st->sum_sq};
}

void provide_degree_summary(const Graph& g, const DegreeSummary& s) { detail::provide_stats(g, s); }
}  // namespace spgnn
