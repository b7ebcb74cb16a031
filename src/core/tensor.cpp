#include "spgnn/tensor.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>

#include "core/device.hpp"

namespace spgnn {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
    case DType::u16: return 2;
    case DType::f16: return 2;
    case DType::bf16: return 2;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::u8: return "uint8";
    case DType::u16: return "uint16";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
  }
  return "?";
}

std::string Device::str() const {
  return type == DeviceType::cpu ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::cpu();
  if (s == "cuda" || s == "gpu") return Device::cuda(0);
  if (s.rfind("cuda:", 0) == 0) {
    const std::string num = s.substr(5);
    char* end = nullptr;
    long v = std::strtol(num.c_str(), &end, 10);
    if (!num.empty() && end && *end == '\0' && v >= 0 && v < 1024) return Device::cuda(int(v));
  }
  throw InvalidArgument("device '" + s + "': expected cpu, cuda or cuda:N");
}

bool cuda_available() { return detail::cuda_device_count() > 0; }

Storage::Storage(size_t nbytes, Device dev) : bytes(nbytes), device(dev) {
  if (nbytes == 0) return;
  if (dev.type == DeviceType::cpu) {
    // 64-byte alignment keeps vector loads and mmap-style layouts simple.
    ptr = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
    if (!ptr) throw std::bad_alloc();
  } else {
    ptr = detail::cuda_alloc(nbytes, dev.index);
  }
}

Storage::Storage(void* external, size_t nbytes, Device dev, std::shared_ptr<void> keep_alive)
    : ptr(external), bytes(nbytes), device(dev), owner(std::move(keep_alive)) {}

Storage::~Storage() {
  if (!ptr || owner) return;
  if (device.type == DeviceType::cpu) std::free(ptr);
  else detail::cuda_free(ptr, device.index);
}

namespace {
// The element count of `shape`, checked against negative dimensions and overflow (of the byte
// count too, for 8-byte elements) before anything is allocated or addressed.
int64_t checked_numel(const std::vector<int64_t>& shape, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    SPGNN_CHECK(d >= 0, InvalidArgument, what, " has a negative dimension (", d, ")");
    SPGNN_CHECK(d == 0 || n <= std::numeric_limits<int64_t>::max() / 8 / d, InvalidArgument,
                what, " with dimension ", d, " is too large to address");
    n *= d;
  }
  return n;
}
}  // namespace

Tensor Tensor::empty(std::vector<int64_t> shape, DType dtype, Device device) {
  const int64_t n = checked_numel(shape, "tensor shape");
  Tensor t;
  t.shape_ = std::move(shape);
  t.numel_ = n;
  t.dtype_ = dtype;
  t.device_ = device;
  t.defined_ = true;
  t.storage_ = std::make_shared<Storage>(static_cast<size_t>(n) * dtype_size(dtype), device);
  t.ptr_ = t.storage_->ptr;
  return t;
}

Tensor Tensor::from_external(void* data, std::vector<int64_t> shape,
                             const std::vector<int64_t>& strides, DType dtype, Device device,
                             std::shared_ptr<void> keep_alive, const std::string& what) {
  SPGNN_CHECK(keep_alive != nullptr, InvalidArgument, what,
              ": an external tensor needs an owner that keeps its memory alive");
  SPGNN_CHECK(strides.empty() || strides.size() == shape.size(), InvalidArgument, what, ": ",
              strides.size(), " strides for ", shape.size(), " dimensions");
  const int64_t n = checked_numel(shape, what);
  if (n > 0 && !strides.empty()) {
    int64_t expect = 1;
    for (size_t i = shape.size(); i-- > 0;) {
      SPGNN_CHECK(shape[i] == 1 || strides[i] == expect, InvalidArgument, what,
                  " is not contiguous (dimension ", i, " has stride ", strides[i], ", row-major needs ",
                  expect, "): spgnn reads row-major memory in place and never copies its inputs; "
                  "pass a contiguous tensor (e.g. x.contiguous())");
      expect *= shape[i];
    }
  }
  SPGNN_CHECK(data != nullptr || n == 0, InvalidArgument, what, ": null data pointer");
  Tensor t;
  t.shape_ = std::move(shape);
  t.numel_ = n;
  t.dtype_ = dtype;
  t.device_ = device;
  t.defined_ = true;
  t.storage_ = std::make_shared<Storage>(data, static_cast<size_t>(n) * dtype_size(dtype), device,
                                         std::move(keep_alive));
  t.ptr_ = data;
  return t;
}

Tensor Tensor::zeros(std::vector<int64_t> shape, DType dtype, Device device) {
  return full(std::move(shape), dtype, 0.0, device);
}

Tensor Tensor::full(std::vector<int64_t> shape, DType dtype, double value, Device device) {
  Tensor t = empty(std::move(shape), dtype, device);
  t.fill_(value);
  return t;
}

int64_t Tensor::dim(int i) const {
  SPGNN_CHECK(i >= 0 && i < ndim(), InvalidArgument, "dimension ", i, " out of range for shape ",
              shape_str());
  return shape_[static_cast<size_t>(i)];
}

std::string Tensor::shape_str() const {
  std::string s = "[";
  for (size_t i = 0; i < shape_.size(); ++i) s += (i ? ", " : "") + std::to_string(shape_[i]);
  return s + "]";
}

void Tensor::check_dtype(DType want) const {
  SPGNN_CHECK(defined_, InvalidArgument, "tensor is undefined");
  SPGNN_CHECK(dtype_ == want, InvalidArgument, "tensor has dtype ", dtype_name(dtype_),
              ", expected ", dtype_name(want));
}

Tensor Tensor::to(Device device) const {
  SPGNN_CHECK(defined_, InvalidArgument, "cannot copy an undefined tensor");
  Tensor t = empty(shape_, dtype_, device);
  t.copy_from(*this);
  return t;
}

namespace {
// Both copy_from forms: synchronous, or ordered on `stream` when `on_stream`.
void copy_bytes(Tensor& dst, const Tensor& src, bool on_stream, void* stream) {
  SPGNN_CHECK(dst.defined() && src.defined(), InvalidArgument, "copy_from: undefined tensor");
  SPGNN_CHECK(src.dtype() == dst.dtype() && src.numel() == dst.numel(), InvalidArgument,
              "copy_from: source ", dtype_name(src.dtype()), src.shape_str(), " does not match ",
              dtype_name(dst.dtype()), dst.shape_str());
  const size_t n = dst.nbytes();
  if (n == 0) return;
  const bool sd = src.device().is_cuda(), dd = dst.device().is_cuda();
  const int dir = !sd ? 0 : !dd ? 1 : 2;
  if (!sd && !dd) std::memcpy(dst.raw(), src.raw(), n);
  else if (on_stream) detail::cuda_copy_async(dst.raw(), src.raw(), n, dir, stream);
  else detail::cuda_copy(dst.raw(), src.raw(), n, dir);
}
}  // namespace

void Tensor::copy_from(const Tensor& src) { copy_bytes(*this, src, false, nullptr); }

void Tensor::copy_from(const Tensor& src, void* stream) { copy_bytes(*this, src, true, stream); }

Tensor Tensor::reshape(std::vector<int64_t> shape) const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  SPGNN_CHECK(n == numel_, InvalidArgument, "cannot reshape ", shape_str(), " (", numel_,
              " elements) to a shape with ", n, " elements");
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

float half_to_float(Half h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t exp = (h.bits >> 10) & 0x1fu, mant = h.bits & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant x 2^-24, exact in float
    const float f = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -f : f;
  }
  const uint32_t bits = sign | (exp == 31 ? 0x7f800000u | (mant << 13)   // inf, NaN
                                          : ((exp + 112u) << 23) | (mant << 13));
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

Half float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return {static_cast<uint16_t>(sign | 0x7e00u)};  // NaN stays NaN
  if (a >= 0x477ff000u) return {static_cast<uint16_t>(sign | 0x7c00u)};  // >= 65520: inf
  if (a < 0x38800000u) {  // below 2^-14: a subnormal half, in units of 2^-24 (exact scaling)
    float v;
    std::memcpy(&v, &a, sizeof v);
    return {static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(v * 16777216.0f)))};
  }
  uint32_t h = (((a >> 23) - 112u) << 10) | ((a & 0x7fffffu) >> 13);
  const uint32_t rest = a & 0x1fffu;  // the 13 dropped bits: round to nearest, ties to even
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry bumps the exponent
  return {static_cast<uint16_t>(sign | h)};
}

namespace {
// Conversions between element types: half types go through float.
template <class To, class From>
To convert_value(From v) {
  if constexpr (std::is_same_v<From, Half>) {
    return convert_value<To>(half_to_float(v));
  } else if constexpr (std::is_same_v<From, BFloat16>) {
    return convert_value<To>(bf16_to_float(v));
  } else if constexpr (std::is_same_v<To, Half>) {
    return float_to_half(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, BFloat16>) {
    return float_to_bf16(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}
template <class T>
void fill_host(void* p, int64_t n, double v) {
  std::fill_n(static_cast<T*>(p), n, convert_value<T>(v));
}
template <class To, class From>
void convert_range(const From* s, To* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = convert_value<To>(s[i]);
}
template <class To>
void convert_into(const Tensor& src, To* dst) {
  const int64_t n = src.numel();
  switch (src.dtype()) {
    case DType::f16: convert_range(src.data<Half>(), dst, n); break;
    case DType::bf16: convert_range(src.data<BFloat16>(), dst, n); break;
    case DType::f32: convert_range(src.data<float>(), dst, n); break;
    case DType::f64: convert_range(src.data<double>(), dst, n); break;
    case DType::i32: convert_range(src.data<int32_t>(), dst, n); break;
    case DType::i64: convert_range(src.data<int64_t>(), dst, n); break;
    case DType::u8: convert_range(src.data<uint8_t>(), dst, n); break;
    case DType::u16: convert_range(src.data<uint16_t>(), dst, n); break;
  }
}
}  // namespace

Tensor Tensor::astype(DType dtype) const {
  SPGNN_CHECK(defined_, InvalidArgument, "astype: undefined tensor");
  // float32 <-> float16/bfloat16 on a GPU: converted there (one kernel on the default stream,
  // then waited for, as the host round trip below is synchronous too).
  if (device_.is_cuda() && ((dtype_ == DType::f32 && is_half(dtype)) ||
                            (is_half(dtype_) && dtype == DType::f32))) {
    Tensor t = empty(shape_, dtype, device_);
    detail::cuda_convert(ptr_, dtype_, t.ptr_, dtype, numel_, device_.index, nullptr);
    detail::cuda_stream_sync(device_.index, nullptr);
    return t;
  }
  Tensor h = device_.is_cuda() ? to(Device::cpu()) : *this;
  Tensor t = empty(shape_, dtype);
  switch (dtype) {
    case DType::f32: convert_into(h, t.data<float>()); break;
    case DType::f64: convert_into(h, t.data<double>()); break;
    case DType::i32: convert_into(h, t.data<int32_t>()); break;
    case DType::i64: convert_into(h, t.data<int64_t>()); break;
    case DType::u8: convert_into(h, t.data<uint8_t>()); break;
    case DType::u16: convert_into(h, t.data<uint16_t>()); break;
    case DType::f16: convert_into(h, t.data<Half>()); break;
    case DType::bf16: convert_into(h, t.data<BFloat16>()); break;
  }
  return device_.is_cuda() ? t.to(device_) : t;
}

void Tensor::fill_(double value, void* stream) {
  SPGNN_CHECK(defined_, InvalidArgument, "fill_: undefined tensor");
  if (numel_ == 0) return;
  if (device_.is_cuda()) {
    detail::cuda_fill(ptr_, dtype_, numel_, value, stream);
    return;
  }
  switch (dtype_) {
    case DType::f32: fill_host<float>(ptr_, numel_, value); break;
    case DType::f64: fill_host<double>(ptr_, numel_, value); break;
    case DType::i32: fill_host<int32_t>(ptr_, numel_, value); break;
    case DType::i64: fill_host<int64_t>(ptr_, numel_, value); break;
    case DType::u8: fill_host<uint8_t>(ptr_, numel_, value); break;
    case DType::u16: fill_host<uint16_t>(ptr_, numel_, value); break;
    case DType::f16: fill_host<Half>(ptr_, numel_, value); break;
    case DType::bf16: fill_host<BFloat16>(ptr_, numel_, value); break;
  }
}

#if !SPGNN_WITH_CUDA
namespace detail {
[[noreturn]] static void no_cuda() {
  throw Unsupported("this spgnn was built without CUDA (SPGNN_WITH_CUDA=OFF or no nvcc found)");
}
void* cuda_alloc(size_t, int) { no_cuda(); }
void cuda_free(void*, int) noexcept {}
void cuda_copy(void*, const void*, size_t, int) { no_cuda(); }
void cuda_copy_async(void*, const void*, size_t, int, void*) { no_cuda(); }
void cuda_fill(void*, DType, int64_t, double, void*) { no_cuda(); }
void cuda_convert(const void*, DType, void*, DType, int64_t, int, void*) { no_cuda(); }
void cuda_stream_sync(int, void*) { no_cuda(); }
int cuda_device_count() noexcept { return 0; }
}  // namespace detail
#endif

}  // namespace spgnn
