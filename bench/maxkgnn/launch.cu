#include "launch.hpp"

#include <sys/types.h>

// Defined in MaxK-GNN's kernels/spmm_maxk.cu and spmm_maxk_backward.cu, with these signatures.
__global__ void spmm_kernel_opt2_sparse_v3(const int* warp4, const int* idx, const float* val,
                                           const float* vin_data, const u_int8_t* vin_selector,
                                           float* vout, const int num_v, const int num_e,
                                           const int feat_in, const int dim_sparse,
                                           const int num_warps);
__global__ void spmm_kernel_opt2_sparse_backward_v3(const int* warp4, const int* idx,
                                                    const float* val, const float* vin_data,
                                                    const u_int8_t* vin_selector, float* vout,
                                                    const int num_v, const int num_e,
                                                    const int feat_in, const int dim_sparse,
                                                    const int num_warps);

namespace maxkgnn {

namespace {
dim3 grid_of(const Args& a) { return dim3((a.num_warps + kWarpsPerBlock - 1) / kWarpsPerBlock); }
size_t shared_of(const Args& a) { return size_t(kWarpsPerBlock) * a.F * sizeof(float); }
}  // namespace

cudaError_t spgemm(const Args& a) {
  spmm_kernel_opt2_sparse_v3<<<grid_of(a), kWarpsPerBlock * 32, shared_of(a)>>>(
      a.warp4, a.col, a.val, a.vin, a.selector, a.vout, a.num_v, a.num_e, a.F, a.k, a.num_warps);
  return cudaGetLastError();
}

cudaError_t sspmm(const Args& a) {
  spmm_kernel_opt2_sparse_backward_v3<<<grid_of(a), kWarpsPerBlock * 32, shared_of(a)>>>(
      a.warp4, a.col, a.val, a.vin, a.selector, a.vout, a.num_v, a.num_e, a.F, a.k, a.num_warps);
  return cudaGetLastError();
}

}  // namespace maxkgnn
