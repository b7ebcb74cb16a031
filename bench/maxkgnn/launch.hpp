// Launches MaxK-GNN's CBSR kernels (their kernels/spmm_maxk.cu and spmm_maxk_backward.cu,
// compiled from the checkout that SPGNN_MAXKGNN_SRC names) the way their SPMM_MAXK::run and
// SPMM_MAXK_BACKWARD::run do: one warp per task record, 12 warps a block, a block's shared memory
// 12 rows of F floats. Both kernels accumulate with atomicAdd, so `vout` must be zero first.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace maxkgnn {

constexpr int kWarpsPerBlock = 12;  // WARPS_PER_BLOCK in their spmm_maxk*.cu
constexpr int kWarpMaxNz = 64;      // warp_max_nz in their generate_meta.py

struct Args {
  const int* warp4 = nullptr;  // num_warps records {row, first non-zero, count, 0}
  int num_warps = 0;
  const int* col = nullptr;    // the CSR's columns (sources) and edge weights
  const float* val = nullptr;
  const float* vin = nullptr;  // SpGEMM: the CBSR values [n, k]; SSpMM: dOut [n, F]
  const uint8_t* selector = nullptr;  // the CBSR columns [n, k]
  float* vout = nullptr;       // SpGEMM: out [n, F]; SSpMM: d_data [n, k]
  int num_v = 0, num_e = 0, F = 0, k = 0;
};

cudaError_t spgemm(const Args& a);  // forward (spmm_kernel_opt2_sparse_v3)
cudaError_t sspmm(const Args& a);   // backward (spmm_kernel_opt2_sparse_backward_v3)

}  // namespace maxkgnn
