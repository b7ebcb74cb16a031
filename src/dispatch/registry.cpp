// The one list of strategies. Adding a strategy = one entry here plus its kernel file.
#include "dispatch/registry.hpp"

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
                {{"cache_size", {32, 64, 128, 256}, 128, "non-zeros cached per warp (stage 1)"},
                 {"warps", {1, 2, 4, 8, 16}, 4, "warps per block"},
                 {"nze_cache", {0, 1}, 1, "ablation: stage-1 shared-memory cache on/off"},
                 {"vector_loads", {0, 1}, 1, "ablation: float4/float2 feature loads on/off"},
                 {"consecutive", {0, 1}, 1, "ablation: 1 = consecutive, 0 = round-robin"}}},
               &gnnone_spmm_supports, &gnnone_spmm});
  r.push_back({{"cusparse", OpKind::spmm, DeviceType::cuda,
                "cusparseSpMM baseline (copy_u / u_mul_e with sum)",
                {{"alg", {0, 1, 2, 3}, 0,
                  "0 = CSR_ALG2, 1 = CSR_ALG1, 2 = COO_ALG4, 3 = COO_ALG1... see cusparse.cu"}}},
               &cusparse_spmm_supports, &cusparse_spmm});
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
                {{"cache_size", {32, 64, 128, 256}, 128, "non-zeros cached per warp (stage 1)"},
                 {"warps", {1, 2, 4, 8, 16}, 4, "warps per block"},
                 {"nze_cache", {0, 1}, 1, "ablation: stage-1 shared-memory cache on/off"},
                 {"vector_loads", {0, 1}, 1, "ablation: float4/float2 feature loads on/off"},
                 {"consecutive", {0, 1}, 1, "ablation: 1 = consecutive, 0 = round-robin"}}},
               &gnnone_sddmm_supports, &gnnone_sddmm});
  r.push_back({{"cusparse", OpKind::sddmm, DeviceType::cuda,
                "cusparseSDDMM (CSR) baseline: dot of destination and source features", {}},
               &cusparse_sddmm_supports, &cusparse_sddmm});
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

// `auto` until the tuner exists: the fast kernel of the data's device when it supports the
// problem, else any supporting strategy in registry order (cpu_ref last resort on the CPU).
namespace {
template <class Entry, class P>
Schedule pick(const std::vector<Entry>& reg, const P& p, const char* preferred_gpu,
              const char* preferred_cpu, const char* op) {
  const char* first = p.g->device().is_cuda() ? preferred_gpu : preferred_cpu;
  for (const auto& e : reg)
    if (e.info.name == first && e.supports(p).empty()) return Schedule{e.info.name, {}};
  std::string reasons;
  for (const auto& e : reg) {
    const std::string why = e.supports(p);
    if (why.empty()) return Schedule{e.info.name, {}};
    reasons += "\n  " + e.info.name + ": " + why;
  }
  throw Unsupported(std::string("no ") + op + " strategy in this build supports this problem:" +
                    reasons);
}
}  // namespace

Schedule auto_spmm_schedule(const SpmmProblem& p) {
  return pick(spmm_registry(), p, "gnnone", "cpu_mergepath", "spmm");
}
Schedule auto_sddmm_schedule(const SddmmProblem& p) {
  return pick(sddmm_registry(), p, "gnnone", "cpu_edge", "sddmm");
}

}  // namespace spgnn::detail
