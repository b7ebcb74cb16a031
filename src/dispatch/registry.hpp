// Internal: the strategy registry. Every strategy of every op is listed in registry.cpp with its
// parameter space, a `supports` predicate, an optional `validate` rule and its entry point;
// `auto`, the autotuner (src/tune/) and the CLI read it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dispatch/problem.hpp"
#include "spgnn/schedule.hpp"

namespace spgnn::detail {

// Returns "" when the strategy can run the problem, else the reason it cannot.
using SpmmSupports = std::string (*)(const SpmmProblem&);
using SddmmSupports = std::string (*)(const SddmmProblem&);
// Returns "" when this parameter combination is valid for the problem, else why not (a launch
// limit the kernel would exceed, or "same as ...": a combination the launcher silently turns
// into another one, so the autotuner never times the same kernel twice). Only called on problems
// the strategy supports, with parameter values from the declared legal sets.
using SpmmValidate = std::string (*)(const SpmmProblem&, const Schedule&);
using SddmmValidate = std::string (*)(const SddmmProblem&, const Schedule&);
using SpmmRun = void (*)(const SpmmProblem&, const Schedule&);
using SddmmRun = void (*)(const SddmmProblem&, const Schedule&);

struct SpmmEntry {
  StrategyInfo info;
  SpmmSupports supports;
  SpmmRun run;
  SpmmValidate validate = nullptr;  // nullptr: every combination of legal values is valid
};
struct SddmmEntry {
  StrategyInfo info;
  SddmmSupports supports;
  SddmmRun run;
  SddmmValidate validate = nullptr;
};

// The CBSR products (OpKind::cbsr_spgemm / cbsr_sspmm): one kernel per device, so the entries
// carry no entry point (src/dispatch/maxk_ops.cpp runs the backend the schedule names); they are
// here for their parameter space, which the autotuner searches.
using CbsrSupports = std::string (*)(const CbsrProblem&);
using CbsrValidate = std::string (*)(const CbsrProblem&, const Schedule&);
struct CbsrEntry {
  StrategyInfo info;
  CbsrSupports supports;
  CbsrValidate validate = nullptr;
};

const std::vector<SpmmEntry>& spmm_registry();
const std::vector<SddmmEntry>& sddmm_registry();
const SpmmEntry& spmm_entry(const std::string& name);
const SddmmEntry& sddmm_entry(const std::string& name);
// op: cbsr_spgemm or cbsr_sspmm.
const std::vector<CbsrEntry>& cbsr_registry(OpKind op);
const CbsrEntry& cbsr_entry(OpKind op, const std::string& name);
// The GPU kernel's parameters (declared in every build, so CPU-only builds check them by name
// and range, and their tests exercise validate_cbsr).
std::vector<ParamSpec> cbsr_gpu_params(OpKind op);
// check_schedule's name-and-range check against one strategy's declared parameters.
void check_params(const StrategyInfo& info, const Schedule& s);

// A schedule's validity for a problem: "" or the reason (supports(), then validate()).
std::string spmm_schedule_problem(const SpmmProblem& p, const Schedule& s);
std::string sddmm_schedule_problem(const SddmmProblem& p, const Schedule& s);
std::string cbsr_schedule_problem(const CbsrProblem& p, const Schedule& s);

// Row-degree statistics of a graph's structure: one pass over rowptr (one copy of it to the host
// for a GPU graph), cached in Graph::cache so later calls cost O(1). Read by `auto` and by the
// autotuner's cost-model features.
struct DegreeStats {
  int64_t n = 0, nnz = 0, max_deg = 0, empty_rows = 0;
  double avg = 0, cv = 0;  // mean degree, coefficient of variation (stddev / mean)
  double sum_sq = 0;       // of the degrees (provide_degree_summary hands it in)
};
std::shared_ptr<const DegreeStats> degree_stats(const Graph& g);
// provide_degree_summary (schedule.hpp): g's statistics handed in, checked against its sizes.
void provide_stats(const Graph& g, const DegreeSummary& s);
// Whether a sum/mean SpMM of width F over g runs faster on the GPU with half-precision features
// (the half kernels `auto` picks) than in float32 (auto): on regular dense rows, at widths that
// fill 16-byte half vectors (F % 8 == 0) from F = 32 to 256, and at multiples of 64 beyond.
// H200, the Reddit shape, copy_u, bfloat16 against float32 `auto` (docs/BENCHMARKS.md, "Half
// aggregations from 32 features" and "One pass of 16 lanes"): F = 32 / 40 / 48 / 56 / 64 1.64x /
// 1.35x / 1.54x / 1.44x / 1.84x; F = 72 / 80 / 96 / 104 / 120 1.40x / 1.41x / 1.51x / 1.42x /
// 1.34x (gnnone's one 16-lane pass); F = 128 / 256 1.78-1.80x; F = 136 / 168 / 200 / 248
// 1.67x / 1.42x / 1.21x / 1.10x (one 32-lane pass; three or more passes of 8 were level or
// slower), F = 16 0.83x, F = 44 0.82x, F = 68 / 100 (pairs of halves) 0.6-0.7x. u_mul_e
// alike (F = 32 / 48 / 64: 1.28x / 1.38x / 1.81x). R-MAT (scale 21, average degree 16) loses
// below F = 64 (0.86-0.92x at 40 / 48 / 56), less than the conversions around the SpMM would
// cost. Callers that may choose (nn::aggregate under --dtype bf16|f16) keep float32 elsewhere.
// False for graphs on the host (the CPU converts and computes in float32).
bool half_spmm_pays(const Graph& g, int64_t F);
// True for a GPU whose peak DRAM bandwidth is at least 4 TB/s (H200 4.8, H100 SXM 3.35): there
// `auto` gives regular dense rows' u.v dot SDDMM to cuSPARSE up to F = 128, float32 and float16
// (registry.cpp, gpu_sddmm_choice, with the measurements).
bool fast_dram(Device d);
// The widths of half_spmm_pays: F % 8 == 0 (16-byte half vectors), from kHalfSpmmMinRegularF
// on regular dense rows and from kHalfSpmmMinF on any graph (half_spmm_width_pays, for Python's
// autocast, which cannot read the graph while torch.compile traces: R-MAT loses below 64), up
// to kHalfSpmmOnePassF (gnnone's widest one-pass half row, 32 lanes of 8 halves, on
// Reddit-sized graphs), then multiples of kHalfSpmmMinF. bfloat16 against float32 `auto`,
// copy_u (H200): R-MAT scale 21 F = 64 / 72 / 96 / 120 / 128 / 136 / 200 / 248 1.39x / 1.74x /
// 1.60x / 1.70x / 1.77x / 1.31x / 1.65x / 1.64x; the Reddit shape F = 136 / 200 / 248 1.67x /
// 1.21x / 1.10x.
constexpr int64_t kHalfSpmmMinF = 64, kHalfSpmmOnePassF = 256;
constexpr int64_t kHalfSpmmMinRegularF = 32, kHalfSpmmWidthMultiple = 8;
bool half_spmm_width(int64_t F, int64_t min_f);

// `auto`: the tuning cache first (src/tune/auto_cache.cpp; with tune-on-miss enabled a miss is
// tuned and stored), then the heuristic. Both return a schedule the problem supports.
Schedule auto_spmm_schedule(const SpmmProblem& p);
Schedule auto_sddmm_schedule(const SddmmProblem& p);
// The heuristic alone (docs/STRATEGIES.md): a supported strategy from graph statistics, F and
// the device.
Schedule heuristic_spmm_schedule(const SpmmProblem& p);
Schedule heuristic_sddmm_schedule(const SddmmProblem& p);
// The CBSR products' `auto`: a tuned schedule from the tuning cache (or tune-on-miss), else the
// data's device's kernel at its defaults ("gpu" or "cpu").
Schedule auto_cbsr_schedule(const CbsrProblem& p);

// ---- validity rules ------------------------------------------------------------------------
// Plain functions of the strategy's declared parameters (`info`: defaults for unset ones, legal
// values), the launch limits and the problem's sizes, compiled in every build so that CPU-only
// tests exercise the CUDA strategies' rules too. Each mirrors a check or a silent clamp in the
// strategy's launcher (src/kernels/cuda/*.cu, src/kernels/cpu/cpu_mergepath.cpp).
struct LaunchLimits {
  int64_t max_threads_per_block = 1024;
  int64_t max_smem_per_block = 48 * 1024;  // the opt-in limit (launchers opt in above 48 KB)
};
// The limits of the graph's device (cudaGetDeviceProperties, cached); defaults on the CPU.
LaunchLimits launch_limits(Device d);

// skew: the spare words per shared array the kernels may add (one per thread group, at most 32).
std::string validate_gnnone(const StrategyInfo& info, const Schedule& s, DType index,
                            const LaunchLimits& lim, int64_t skew = 0);
std::string validate_rowtile(const StrategyInfo& info, const Schedule& s, DType index, int64_t F,
                             const LaunchLimits& lim);
std::string validate_warp_vertex(const StrategyInfo& info, const Schedule& s);
std::string validate_mergepath(const StrategyInfo& info, const Schedule& s, int64_t n_rows,
                               int64_t nnz, int64_t F);
std::string validate_shuffle(const StrategyInfo& info, const Schedule& s, int64_t F,
                             bool half = false);
// The CBSR GPU kernel (cbsr_spgemm.cu, cbsr_sspmm.cu; cbsr_shape.hpp): a combination is left out
// when changing one explicitly set parameter to an earlier legal value launches the same kernel
// in the same shape (the launchers clamp warps to the shared memory, cap vec by k, and ignore
// regs / private_rows / flat / smem_buffer where they do not apply; segments longer than every
// row split nothing, except as the backward's flat chunks).
// avg_deg, max_deg: the graph's degree statistics (rows of A).
std::string validate_cbsr(const StrategyInfo& info, const Schedule& s, OpKind op, int64_t k,
                          int64_t F, double avg_deg, int64_t max_deg);
// The launch of a CBSR schedule in words (validate_cbsr's "both launch ..."): two schedules run
// the same kernel in the same shape exactly when these are equal.
std::string cbsr_launch_str(const Schedule& s, OpKind op, int64_t k, int64_t F, double avg_deg,
                            int64_t max_deg);
std::string validate_cpu_mergepath(const StrategyInfo& info, const Schedule& s, int64_t n_rows,
                                   int64_t nnz, int64_t threads);

}  // namespace spgnn::detail
