// Dense tensors on the host or a CUDA device: dtype, shape, row-major, shared ownership.
// Deliberately small: spgnn needs storage and shape checks, not a full array library.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "spgnn/error.hpp"

namespace spgnn {

// f16 (IEEE binary16) and bf16 (bfloat16) hold features at half the bytes; arithmetic on them
// converts to float32 and accumulates there (no saturation at any degree).
enum class DType : uint8_t { f32, f64, i32, i64, u8, u16, f16, bf16 };
size_t dtype_size(DType t);
const char* dtype_name(DType t);
inline bool is_half(DType t) { return t == DType::f16 || t == DType::bf16; }

// Storage types of the half dtypes: the bits, converted explicitly (round to nearest even).
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};
float half_to_float(Half h);
Half float_to_half(float f);
inline float bf16_to_float(BFloat16 b) {
  const uint32_t x = static_cast<uint32_t>(b.bits) << 16;
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}
inline BFloat16 float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return {static_cast<uint16_t>((x >> 16) | 0x40u)};  // NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return {static_cast<uint16_t>(x >> 16)};
}

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::u8; }
template <> constexpr DType dtype_of<uint16_t>() { return DType::u16; }
template <> constexpr DType dtype_of<Half>() { return DType::f16; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::bf16; }

enum class DeviceType : uint8_t { cpu, cuda };
struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;
  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::cuda, i}; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;
};
// Parses "cpu", "cuda", "cuda:1"; throws InvalidArgument otherwise.
Device parse_device(const std::string& s);
// True when this build has CUDA and at least one device is visible.
bool cuda_available();

// Raw allocation on a device; the deleter knows where the bytes live. External storage (memory
// spgnn borrows from another library, see Tensor::from_external) is never freed here: `owner`
// keeps it alive and releasing `owner` hands it back.
struct Storage {
  void* ptr = nullptr;
  size_t bytes = 0;
  Device device;
  std::shared_ptr<void> owner;  // set only for external storage
  Storage(size_t nbytes, Device dev);
  Storage(void* external, size_t nbytes, Device dev, std::shared_ptr<void> keep_alive);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

class Tensor {
 public:
  Tensor() = default;
  // Uninitialised tensor. Sizes are checked against overflow before allocating.
  static Tensor empty(std::vector<int64_t> shape, DType dtype, Device device = Device::cpu());
  static Tensor zeros(std::vector<int64_t> shape, DType dtype, Device device = Device::cpu());
  static Tensor full(std::vector<int64_t> shape, DType dtype, double value,
                     Device device = Device::cpu());
  // A view of memory spgnn does not own (zero-copy interop with DLPack producers: PyTorch,
  // NumPy, CuPy): no copy is made, and `keep_alive` is held by every copy of the returned
  // Tensor, so the memory stays valid as long as spgnn uses it. `strides` are in elements, one
  // per dimension, or empty for row-major; spgnn's kernels read row-major memory only, so any
  // other layout is an InvalidArgument naming `what` (dimensions of size 1 may carry any
  // stride, as producers leave them unnormalised). `data` may be null only when the tensor has
  // no elements.
  static Tensor from_external(void* data, std::vector<int64_t> shape,
                              const std::vector<int64_t>& strides, DType dtype, Device device,
                              std::shared_ptr<void> keep_alive, const std::string& what = "tensor");
  template <class T>
  static Tensor from_vector(const std::vector<T>& v, std::vector<int64_t> shape = {}) {
    if (shape.empty()) shape = {static_cast<int64_t>(v.size())};
    Tensor t = empty(shape, dtype_of<T>());
    SPGNN_CHECK(static_cast<size_t>(t.numel()) == v.size(), InvalidArgument,
                "Tensor::from_vector: ", v.size(), " values do not fill shape ", t.shape_str());
    std::copy(v.begin(), v.end(), t.data<T>());
    return t;
  }
  template <class T>
  std::vector<T> to_vector() const {
    Tensor h = to(Device::cpu());
    const T* p = h.data<T>();
    return std::vector<T>(p, p + numel());
  }

  bool defined() const { return defined_; }
  // True when the memory belongs to another library (from_external).
  bool is_external() const { return storage_ && storage_->owner != nullptr; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim(int i) const;
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  std::string shape_str() const;

  void* raw() { return ptr_; }
  const void* raw() const { return ptr_; }
  template <class T>
  T* data() {
    check_dtype(dtype_of<T>());
    return static_cast<T*>(ptr_);
  }
  template <class T>
  const T* data() const {
    check_dtype(dtype_of<T>());
    return static_cast<const T*>(ptr_);
  }

  // Deep copy to `device` (same device: a fresh copy too).
  Tensor to(Device device) const;
  Tensor clone() const { return to(device_); }
  // Same storage, new shape with the same number of elements.
  Tensor reshape(std::vector<int64_t> shape) const;
  // Element type conversion on the host (host tensors only).
  Tensor astype(DType dtype) const;
  // Fills every element with `value` (on the tensor's device; asynchronous on CUDA's default
  // stream unless `stream` is given).
  void fill_(double value, void* stream = nullptr);
  // Copies `src` (same dtype and numel) into this tensor, across devices if needed.
  void copy_from(const Tensor& src);
  // The same, ordered on the CUDA stream `stream` (a cudaStream_t; nullptr = the default
  // stream) when either side is on a device, so it interleaves with a caller's queued work.
  void copy_from(const Tensor& src, void* stream);

 private:
  void check_dtype(DType want) const;
  std::shared_ptr<Storage> storage_;
  void* ptr_ = nullptr;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::f32;
  Device device_;
  bool defined_ = false;
};

}  // namespace spgnn
