#include "dispatch/half.hpp"

#include <cstdlib>
#include <string>

#include "core/device.hpp"
#include "spgnn/error.hpp"
#include "spgnn/ops.hpp"

namespace spgnn::detail {

DType half_operands(const char* op, std::initializer_list<std::pair<const Tensor*, const char*>> ts) {
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
  return half->dtype();
}

namespace {
// dst = src converted (float32 <-> half), on src's CUDA device, ordered on `stream`.
void convert_on_device(const Tensor& src, Tensor& dst, void* stream) {
  cuda_convert(src.raw(), src.dtype(), dst.raw(), dst.dtype(), src.numel(), src.device().index,
               stream);
}
}  // namespace

Tensor as_f32(const Tensor& t, void* stream) {
  if (!t.defined() || t.dtype() == DType::f32) return t;
  if (!t.device().is_cuda() || !is_half(t.dtype())) return t.astype(DType::f32);
  Tensor r = Tensor::empty(t.shape(), DType::f32, t.device());
  convert_on_device(t, r, stream);
  return r;
}

void store_half(const Tensor& r, Tensor& out, DType half, const char* op, const char* arg,
                void* stream) {
  const bool cuda = r.device().is_cuda();
  if (!out.defined()) {
    if (!cuda) {
      out = r.astype(half);
      return;
    }
    out = Tensor::empty(r.shape(), half, r.device());
    return convert_on_device(r, out, stream);
  }
  SPGNN_CHECK(out.dtype() == half, InvalidArgument, op, ": output '", arg, "' must be ",
              dtype_name(half), " like the inputs, got ", dtype_name(out.dtype()));
  SPGNN_CHECK(out.device() == r.device(), InvalidArgument, op, ": output '", arg, "' is on ",
              out.device().str(), ", expected ", r.device().str());
  SPGNN_CHECK(out.shape() == r.shape(), InvalidArgument, op, ": output '", arg, "' has shape ",
              out.shape_str(), ", expected ", r.shape_str());
  if (cuda) return convert_on_device(r, out, stream);
  out.copy_from(r.astype(half));
}

}  // namespace spgnn::detail
