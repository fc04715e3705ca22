// A contiguous, row-major tensor on one device whose memory comes from that device's caching
// allocator. Tensors share storage on copy (like torch.Tensor); clone() copies. Views (view,
// narrowRows) share storage too. There is no autograd: modules compute their backward explicitly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/device.h"

namespace ringmaster {

using Shape = std::vector<int64_t>;

std::string shapeStr(const Shape& shape);
int64_t shapeNumel(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;

  static Tensor empty(const Shape& shape, DType dtype = DType::kF32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::kF32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, float value, Device device = Device::cpu());
  static Tensor fromVector(const std::vector<float>& values, const Shape& shape,
                           Device device = Device::cpu());
  static Tensor fromInts(const std::vector<int32_t>& values, const Shape& shape,
                         Device device = Device::cpu());

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int axis) const;
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtypeSize(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }

  void* raw();
  const void* raw() const;
  // Typed access; checks that T matches the dtype.
  template <typename T>
  T* data() {
    checkType(dtypeOf<T>());
    return static_cast<T*>(raw());
  }
  template <typename T>
  const T* data() const {
    checkType(dtypeOf<T>());
    return static_cast<const T*>(raw());
  }

  // A copy on `device` (a new storage even when the device is the same).
  Tensor to(Device device) const;
  Tensor clone() const { return to(device_); }
  // Copies src's elements into this tensor (same dtype and numel; any two devices).
  void copyFrom(const Tensor& src);
  // Host copy of the elements as float (F32, BF16, F16, F64 and integers are converted).
  std::vector<float> toFloatVector() const;
  // A copy in `dtype` on the same device: F32, BF16 and F16 into each other (ops::cast: round to
  // nearest even, exact when widening), or a clone when the dtype is already `dtype`.
  Tensor toDType(DType dtype) const;

  // Same storage, new shape with the same numel.
  Tensor view(const Shape& shape) const;
  // Rows [start, start + count) along the first axis, sharing storage.
  Tensor narrowRows(int64_t start, int64_t count) const;
  bool sharesStorageWith(const Tensor& other) const { return storage_ == other.storage_; }
  // Whether this is the only handle on its storage (no view, copy or pending operation holds it),
  // so that writing into it in place changes nothing anyone else can read.
  bool isSoleHandle() const { return storage_.use_count() == 1; }

 private:
  struct Storage;
  void checkType(DType expected) const;

  std::shared_ptr<Storage> storage_;
  size_t offset_bytes_ = 0;
  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::kF32;
  Device device_;
};

}  // namespace ringmaster
