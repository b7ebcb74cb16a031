#include "arrays.hpp"

#include <memory>
#include <vector>

namespace spgnn::py {

namespace {

DType dtype_of_array(const nb::dlpack::dtype& d, const std::string& what) {
  using Code = nb::dlpack::dtype_code;
  if (d.lanes == 1) {
    if (d.code == uint8_t(Code::Float) && d.bits == 32) return DType::f32;
    if (d.code == uint8_t(Code::Float) && d.bits == 64) return DType::f64;
    if (d.code == uint8_t(Code::Int) && d.bits == 32) return DType::i32;
    if (d.code == uint8_t(Code::Int) && d.bits == 64) return DType::i64;
    if (d.code == uint8_t(Code::UInt) && d.bits == 8) return DType::u8;
    if (d.code == uint8_t(Code::UInt) && d.bits == 16) return DType::u16;
    if (d.code == uint8_t(Code::Float) && d.bits == 16) return DType::f16;
    if (d.code == uint8_t(Code::Bfloat) && d.bits == 16) return DType::bf16;
  }
  const char* kind = d.code == uint8_t(Code::Float)    ? "float"
                     : d.code == uint8_t(Code::Int)    ? "int"
                     : d.code == uint8_t(Code::UInt)   ? "uint"
                     : d.code == uint8_t(Code::Bfloat) ? "bfloat"
                     : d.code == uint8_t(Code::Bool)   ? "bool"
                                                       : "complex/other";
  throw InvalidArgument(detail::concat(
      what, ": dtype ", kind, int(d.bits), " is not supported (spgnn takes float32, float64, "
      "float16, bfloat16, int32, int64, uint8 or uint16 arrays)"));
}

Device device_of_array(const Array& a, const std::string& what) {
  const int type = a.device_type();
  if (type == nb::device::cpu::value) return Device::cpu();
  if (type == nb::device::cuda::value) {
#if SPGNN_WITH_CUDA
    return Device::cuda(a.device_id());
#else
    throw Unsupported(what + " is on a CUDA device, but this spgnn was built without CUDA");
#endif
  }
  throw InvalidArgument(detail::concat(what, ": arrays on DLPack device type ", type,
                                       " are not supported (cpu or cuda only; managed/pinned "
                                       "memory is not accepted)"));
}

}  // namespace

Tensor view(const Array& a, const std::string& what) {
  const DType dt = dtype_of_array(a.dtype(), what);
  const Device dev = device_of_array(a, what);
  std::vector<int64_t> shape(a.ndim()), strides(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) {
    shape[i] = static_cast<int64_t>(a.shape(i));
    strides[i] = a.stride(i);
  }
  // The last reference to the producer's capsule may be dropped wherever the Tensor dies; the
  // producer's deleter (NumPy's, say) needs the GIL then.
  auto* held = new Array(a);
  std::shared_ptr<void> owner(held, [](void* p) {
    nb::gil_scoped_acquire gil;
    delete static_cast<Array*>(p);
  });
  return Tensor::from_external(a.data(), std::move(shape), strides, dt, dev, std::move(owner),
                               what);
}

Tensor view(const std::optional<Array>& a, const std::string& what) {
  return a ? view(*a, what) : Tensor();
}

nb::object to_array(const Tensor& t, bool as_torch) {
  SPGNN_CHECK(t.defined(), InvalidArgument, "to_array: undefined tensor");
  nb::dlpack::dtype d{};
  d.lanes = 1;
  using Code = nb::dlpack::dtype_code;
  switch (t.dtype()) {
    case DType::f32: d.code = uint8_t(Code::Float), d.bits = 32; break;
    case DType::f64: d.code = uint8_t(Code::Float), d.bits = 64; break;
    case DType::i32: d.code = uint8_t(Code::Int), d.bits = 32; break;
    case DType::i64: d.code = uint8_t(Code::Int), d.bits = 64; break;
    case DType::u8: d.code = uint8_t(Code::UInt), d.bits = 8; break;
    case DType::u16: d.code = uint8_t(Code::UInt), d.bits = 16; break;
    case DType::f16: d.code = uint8_t(Code::Float), d.bits = 16; break;
    case DType::bf16: d.code = uint8_t(Code::Bfloat), d.bits = 16; break;
  }
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  // The capsule owns a copy of the Tensor, which shares the storage.
  nb::capsule owner(new Tensor(t), [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  const bool cuda = t.device().is_cuda();
  const int32_t dev_type = cuda ? nb::device::cuda::value : nb::device::cpu::value;
  const int32_t dev_id = cuda ? t.device().index : 0;
  if (as_torch) {
    // nanobind hands the capsule to torch.utils.dlpack at run time (no link against torch),
    // with no producer-stream handshake: the caller orders work on its own stream.
    nb::ndarray<nb::pytorch> a(const_cast<void*>(t.raw()), shape.size(), shape.data(), owner,
                               nullptr, d, dev_type, dev_id);
    return a.cast();
  }
  Array a(const_cast<void*>(t.raw()), shape.size(), shape.data(), owner, nullptr, d, dev_type,
          dev_id);
  return a.cast();
}

}  // namespace spgnn::py
