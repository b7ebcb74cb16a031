// Where a training epoch's time goes (`spgnn train --profile`): every engine operation of the
// training step belongs to one phase; on the GPU each phase is timed with CUDA events around its
// launches, on the host with a steady clock. "other" is the epoch's wall time that no phase
// covers: host work between launches (allocations, argument checks, the loss read-back), launch
// gaps and synchronisation.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace spgnn::nn {

enum class Phase : uint8_t {
  aggregate_forward,   // gspmm / GAT aggregation of the forward pass
  aggregate_backward,  // the same ops over the transposed graph, GAT aggregation backward
  dense_gemm,          // cuBLAS / BLAS GEMMs (transforms, weight and input gradients)
  maxk_cbsr,           // maxk, maxk_backward, cbsr_spgemm, cbsr_sspmm
  elementwise,         // bias, activations, dropout, bias gradients, attention dots, copies
  loss,                // log-softmax + NLL and its gradient
  optimizer,           // Adam
};
constexpr size_t kNumPhases = 7;
const char* phase_name(Phase p);       // "aggregate_forward", ... (JSON keys)
const char* phase_label(Phase p);      // "aggregation forward", ... (tables)

// One epoch's breakdown, or the medians over epochs (then each field is its own median, so the
// fields need not add up to total_ms exactly).
struct PhaseTimes {
  std::array<double, kNumPhases> ms{};
  double other_ms = 0;  // total_ms minus the phases (never negative)
  double total_ms = 0;  // the training step, as in EpochStats::ms
  double& operator[](Phase p) { return ms[static_cast<size_t>(p)]; }
  double operator[](Phase p) const { return ms[static_cast<size_t>(p)]; }
};

// Field-wise medians of per-epoch breakdowns.
PhaseTimes median_phase_times(const std::vector<PhaseTimes>& epochs);

}  // namespace spgnn::nn
