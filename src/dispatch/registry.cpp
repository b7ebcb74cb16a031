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

#include "kernels/cpu/cpu_kernels.hpp"
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
               &needs_cpu<SpmmProblem>, &cpu_mergepath_spmm});
#if SPGNN_WITH_CUDA
  r.push_back({{"gnnone", OpKind::spmm, DeviceType::cuda,
                "GNNOne two-stage COO SpMM: edge-balanced non-zero cache per warp, thread groups "
                "with vector loads, running reduction, atomics only at row splits",
                {{"cache_size", {32, 64, 128, 256}, 128,
                  "non-zeros cached per warp (stage 1); unset: 128, halved down to 32 while the "
                  "graph has fewer than 16 warp slices per SM"},
                 {"warps", {1, 2, 4, 8, 16}, 4,
                  "warps per block; unset: 4, halved down to 1 while there are fewer than 4 "
                  "blocks per SM"},
                 {"nze_cache", {0, 1}, 1, "ablation: stage-1 shared-memory cache on/off"},
                 {"vector_loads", {0, 1}, 1, "ablation: float4/float2 feature loads on/off"},
                 {"consecutive", {0, 1}, 1, "ablation: 1 = consecutive, 0 = round-robin"}}},
               &gnnone_spmm_supports, &gnnone_spmm});
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
                 {"online", {0, 1}, 0, "1 = recompute the schedule on every call (online)"}}},
               &mergepath_spmm_supports, &mergepath_spmm});
  r.push_back({{"warp_vertex", OpKind::spmm, DeviceType::cuda,
                "TLPGNN: one warp (or sub-warp group when F is narrow) per vertex, lanes over "
                "features, result in registers, no atomics",
                {{"warps", {1, 2, 4, 8, 16}, 4, "warps per block"},
                 {"assign", {0, 1, 2}, 0,
                  "0 = heuristic (software when n > 1M or avg degree > 50), 1 = hardware, "
                  "2 = software task pool"},
                 {"step", {1, 2, 4, 8, 16, 32}, 4, "warp-tasks taken per atomic (software)"}}},
               &warp_vertex_spmm_supports, &warp_vertex_spmm});
  r.push_back({{"rowtile", OpKind::spmm, DeviceType::cuda,
                "G-Sparse: rows in decreasing-length order, non-zero tiles in shared memory, "
                "strided register tiles, m_tile x n_tile block tiles",
                {{"m_tile", {1, 2, 4, 8, 16, 32}, 4, "rows per block (kMTile)"},
                 {"n_tile", {8, 16, 32, 64, 128, 256}, 128, "features per block (kNTile)"},
                 {"reg_tile", {1, 2, 4, 8}, 4, "strided features per lane (kNRegTile)"},
                 {"nnz_tile", {32, 64, 128, 256}, 64, "non-zeros staged in shared memory (kNnzTile)"},
                 {"swizzle", {0, 1}, 1, "1 = rows by decreasing length, 0 = natural order"}}},
               &rowtile_spmm_supports, &rowtile_spmm});
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
                {{"cache_size", {32, 64, 128, 256}, 128,
                  "non-zeros cached per warp (stage 1); unset: 128, halved down to 32 while the "
                  "graph has fewer than 16 warp slices per SM"},
                 {"warps", {1, 2, 4, 8, 16}, 4,
                  "warps per block; unset: 4, halved down to 1 while there are fewer than 4 "
                  "blocks per SM"},
                 {"nze_cache", {0, 1}, 1, "ablation: stage-1 shared-memory cache on/off"},
                 {"vector_loads", {0, 1}, 1, "ablation: float4/float2 feature loads on/off"},
                 {"consecutive", {0, 1}, 1, "ablation: 1 = consecutive, 0 = round-robin"}}},
               &gnnone_sddmm_supports, &gnnone_sddmm});
  r.push_back({{"cusparse", OpKind::sddmm, DeviceType::cuda,
                "cusparseSDDMM (CSR) baseline: dot of destination and source features", {}},
               &cusparse_sddmm_supports, &cusparse_sddmm});
  r.push_back({{"shuffle", OpKind::sddmm, DeviceType::cuda,
                "G-Sparse edge-parallel SDDMM: edges per block, L lanes per edge, dot reduced "
                "by log2(L) warp shuffles",
                {{"lanes", {0, 2, 4, 8, 16, 32}, 0, "lanes per edge; 0 = adaptive to F"},
                 {"edges_per_block", {32, 64, 128, 256, 512, 1024}, 256, "edges per block"}}},
               &shuffle_sddmm_supports, &shuffle_sddmm});
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

// `auto` until the tuner exists: a heuristic over cached graph statistics and F (the rules and
// their reasons are in docs/STRATEGIES.md). Whatever it proposes is checked with the strategy's
// own supports(); when that refuses, any supporting strategy of the data's device is taken, then
// any at all (cpu_ref is the last resort on the CPU).
namespace {

// Degree statistics of a graph's structure: one pass over rowptr (one copy of it to the host for a
// GPU graph), then cached in Graph::cache so `auto` costs O(1) on later calls.
struct AutoStats {
  int64_t n = 0, nnz = 0, max_deg = 0;
  double avg = 0, cv = 0;  // mean degree, coefficient of variation (stddev / mean)
};

template <class I>
void fill_stats(const Tensor& rowptr, AutoStats& s) {
  const std::vector<I> rp = rowptr.to_vector<I>();
  double sq = 0;
  for (int64_t i = 0; i < s.n; ++i) {
    const int64_t d = static_cast<int64_t>(rp[i + 1] - rp[i]);
    s.max_deg = std::max(s.max_deg, d);
    sq += double(d) * double(d);
  }
  s.avg = s.n ? double(s.nnz) / double(s.n) : 0.0;
  const double var = s.n ? std::max(0.0, sq / double(s.n) - s.avg * s.avg) : 0.0;
  s.cv = s.avg > 0 ? std::sqrt(var) / s.avg : 0.0;
}

std::shared_ptr<const AutoStats> auto_stats(const Graph& g) {
  // Keyed by the arrays' identity too: copies of a Graph share the cache even after their index
  // arrays are replaced (astype), and must not see each other's statistics.
  const std::string key = std::string("auto.stats@") + dtype_name(g.index_dtype()) + ":" +
                          std::to_string(reinterpret_cast<uintptr_t>(g.rowptr.raw())) + ":" +
                          std::to_string(g.n_rows) + ":" + std::to_string(g.nnz());
  std::lock_guard<std::mutex> lock(g.cache->mutex);
  auto& slot = g.cache->items[key];
  if (!slot) {
    auto s = std::make_shared<AutoStats>();
    s->n = g.n_rows;
    s->nnz = g.nnz();
    if (g.rowptr.defined() && g.rowptr.numel() == g.n_rows + 1) {
      if (g.index_dtype() == DType::i64) fill_stats<int64_t>(g.rowptr, *s);
      else fill_stats<int32_t>(g.rowptr, *s);
    }
    slot = s;
  }
  return std::static_pointer_cast<const AutoStats>(slot);
}

// Drops parameters equal to their declared defaults, so `auto`'s choice prints (and compares, in
// `spgnn bench`) like the plain strategy name when it changes nothing.
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
//  - Tiny graphs (< 20K edges) are launch-bound (~10 us): cuSPARSE's single launch beats
//    gnnone's zero-fill + main kernel pair by 1-2 us, so it goes first where it supports the op.
//  - Regular, dense-row graphs (average degree >= 64, degree CV < 0.5, e.g. Reddit-shaped):
//    a warp per row streams long rows with no atomics and wins SpMM at F >= 128 (1.12-1.16x over
//    gnnone); for SDDMM at F <= 32 cuSPARSE's CSR kernel wins (1.3x), gnnone at wider F.
// Every proposal still passes through the strategy's supports(); pick() falls back otherwise.
constexpr int64_t kTinyNnz = 20000;
constexpr double kDenseRowDegree = 64;
constexpr double kRegularCv = 0.5;

bool regular_dense_rows(const AutoStats& st) {
  return st.avg >= kDenseRowDegree && st.cv < kRegularCv;
}

Schedule gpu_spmm_choice(const AutoStats& st, int64_t F) {
  if (st.nnz == 0) return Schedule{"warp_vertex", {}};  // one kernel, nothing to balance
  if (st.nnz < kTinyNnz) return Schedule{"cusparse", {}};
  if (regular_dense_rows(st) && F >= 128) return Schedule{"warp_vertex", {}};
  return Schedule{"gnnone", {}};
}

Schedule gpu_sddmm_choice(const AutoStats& st, const SddmmProblem& p) {
  if (st.nnz < kTinyNnz) return Schedule{"cusparse", {}};
  if (regular_dense_rows(st) && p.F <= 32) return Schedule{"cusparse", {}};
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

}  // namespace

Schedule auto_spmm_schedule(const SpmmProblem& p) {
  Schedule proposal{"cpu_mergepath", {}};
  if (p.g->device().is_cuda()) proposal = gpu_spmm_choice(*auto_stats(*p.g), p.F);
  return pick(spmm_registry(), p, OpKind::spmm, proposal);
}
Schedule auto_sddmm_schedule(const SddmmProblem& p) {
  Schedule proposal{"cpu_edge", {}};
  if (p.g->device().is_cuda()) proposal = gpu_sddmm_choice(*auto_stats(*p.g), p);
  return pick(sddmm_registry(), p, OpKind::sddmm, proposal);
}

}  // namespace spgnn::detail
