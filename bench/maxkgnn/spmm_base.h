// The base class that MaxK-GNN's kernels/spmm_maxk.h and spmm_maxk_backward.h derive from. Their
// repository's copy also carries their host-timed test loop; maxkgnn_baseline launches their
// kernels itself (harness.cu), so this one only has the members their spmm_maxk*.cu touch, for
// those files to compile unchanged. Written for spgnn, not copied from MaxK-GNN.
#pragma once
#include <cuda_runtime.h>

#include <string>
#include <sys/types.h>  // u_int8_t, which their headers use

class SPMM_BASE {
 public:
  SPMM_BASE(std::string graph, int* ptr, int* idx, float* val, float* vin, float* vout, int num_v,
            int num_e, int dim)
      : _graph(std::move(graph)), ptr(ptr), idx(idx), val(val), vin(vin), vout(vout),
        num_v(num_v), num_e(num_e), dim(dim) {}
  virtual ~SPMM_BASE() = default;

 protected:
  virtual void run(int dim) = 0;
  // Their do_test() calls it; the harness never calls do_test(), and times the kernels with CUDA
  // events instead.
  double timing_body(bool, int) { return 0.0; }

  std::string _graph;
  int *ptr, *idx;
  float *val, *vin, *vout;
  int num_v, num_e, dim;
  dim3 grid, block;
};
