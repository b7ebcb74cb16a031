#include "dispatch/half.hpp"

#include <cstdlib>
#include <string>

#include "spgnn/error.hpp"
#include "spgnn/ops.hpp"

namespace spgnn::detail {

DType half_operands(const char* op, std::initializer_list<std::pair<const Tensor*, const char*>> ts,
                    bool gpu) {
  const Tensor* half = nullptr;
  const char* half_name = "";
  for (auto [t, name] : ts)
    if (t->defined() && is_half(t->dtype()) && !half) half = t, half_name = name;
  if (!half) return DType::f32;
  for (auto [t, name] : ts)
    SPGNN_CHECK(!t->defined() || t->dtype() == half->dtype() ||
                    !(t->dtype() == DType::f32 || t->dtype() == DType::f64 || is_half(t->dtype())),
                InvalidArgument, op, ": '", name, "' is ", dtype_name(t->dtype()), " but '",
                half_name, "' is ", dtype_name(half->dtype()));
  SPGNN_CHECK(!half->device().is_cuda() || gpu, Unsupported, op, ": '", half_name, "' is ",
              dtype_name(half->dtype()), " on a CUDA device: this op's GPU kernels take float32 "
              "for now (half precision runs on the CPU)");
  return half->dtype();
}

Tensor as_f32(const Tensor& t) { return t.defined() ? t.astype(DType::f32) : t; }

void store_half(const Tensor& r, Tensor& out, DType half, const char* op, const char* arg) {
  if (!out.defined()) {
    out = r.astype(half);
    return;
  }
  SPGNN_CHECK(out.dtype() == half, InvalidArgument, op, ": output '", arg, "' must be ",
              dtype_name(half), " like the inputs, got ", dtype_name(out.dtype()));
  SPGNN_CHECK(out.device() == r.device(), InvalidArgument, op, ": output '", arg, "' is on ",
              out.device().str(), ", expected ", r.device().str());
  SPGNN_CHECK(out.shape() == r.shape(), InvalidArgument, op, ": output '", arg, "' has shape ",
              out.shape_str(), ", expected ", r.shape_str());
  out.copy_from(r.astype(half));
}

}  // namespace spgnn::detail
