// Tensor storage, construction, copies and views.
#include "tensor/tensor.h"

#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "tensor/allocator.h"
#include "tensor/kernels.h"
#include "tensor/ops.h"

namespace ringmaster {

struct Tensor::Storage {
  Storage(size_t bytes, Device device)
      : data(allocatorFor(device).allocate(bytes)), bytes(bytes), device(device) {}
  ~Storage() { allocatorFor(device).deallocate(data); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data;
  size_t bytes;
  Device device;
};

std::string shapeStr(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

int64_t shapeNumel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    RM_CHECK_ARG(d >= 0, fmt::format("negative dimension in shape {}", shapeStr(shape)));
    n *= d;
  }
  return n;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  Tensor t;
  t.shape_ = shape;
  t.numel_ = shapeNumel(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = std::make_shared<Storage>(t.nbytes(), device);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  if (device.isCuda()) {
    std::vector<char> zero(t.nbytes(), 0);
    copyBytes(t.raw(), device, zero.data(), Device::cpu(), zero.size());
  } else {
    std::memset(t.raw(), 0, t.nbytes());
  }
  return t;
}

Tensor Tensor::full(const Shape& shape, float value, Device device) {
  return fromVector(std::vector<float>(shapeNumel(shape), value), shape, device);
}

Tensor Tensor::fromVector(const std::vector<float>& values, const Shape& shape, Device device) {
  RM_CHECK_ARG(static_cast<int64_t>(values.size()) == shapeNumel(shape),
               fmt::format("{} values for shape {}", values.size(), shapeStr(shape)));
  Tensor t = empty(shape, DType::kF32, device);
  copyBytes(t.raw(), device, values.data(), Device::cpu(), t.nbytes());
  return t;
}

Tensor Tensor::fromInts(const std::vector<int32_t>& values, const Shape& shape, Device device) {
  RM_CHECK_ARG(static_cast<int64_t>(values.size()) == shapeNumel(shape),
               fmt::format("{} values for shape {}", values.size(), shapeStr(shape)));
  Tensor t = empty(shape, DType::kI32, device);
  copyBytes(t.raw(), device, values.data(), Device::cpu(), t.nbytes());
  return t;
}

int64_t Tensor::dim(int axis) const {
  RM_CHECK_ARG(axis >= 0 && axis < rank(),
               fmt::format("axis {} out of range for shape {}", axis, shapeStr(shape_)));
  return shape_[axis];
}

void* Tensor::raw() {
  RM_CHECK_ARG(defined(), "access to an undefined tensor");
  return static_cast<char*>(storage_->data) + offset_bytes_;
}

const void* Tensor::raw() const {
  RM_CHECK_ARG(defined(), "access to an undefined tensor");
  return static_cast<const char*>(storage_->data) + offset_bytes_;
}

void Tensor::checkType(DType expected) const {
  RM_CHECK_ARG(dtype_ == expected, fmt::format("tensor of dtype {} accessed as {}",
                                               dtypeName(dtype_), dtypeName(expected)));
}

Tensor Tensor::to(Device device) const {
  Tensor out = empty(shape_, dtype_, device);
  copyBytes(out.raw(), device, raw(), device_, nbytes());
  return out;
}

void Tensor::copyFrom(const Tensor& src) {
  RM_CHECK_ARG(src.dtype_ == dtype_ && src.numel_ == numel_,
               fmt::format("copy of {} {} into {} {}", dtypeName(src.dtype_), shapeStr(src.shape_),
                           dtypeName(dtype_), shapeStr(shape_)));
  copyBytes(raw(), device_, src.raw(), src.device_, nbytes());
}

std::vector<float> Tensor::toFloatVector() const {
  Tensor host = device_.isCuda() ? to(Device::cpu()) : *this;
  std::vector<float> out(numel_);
  if (dtype_ == DType::kBF16 || dtype_ == DType::kF16) {
    cpu::castToFloat(static_cast<const uint16_t*>(host.raw()), out.data(), numel_, dtype_);
    return out;
  }
  for (int64_t i = 0; i < numel_; ++i) {
    switch (dtype_) {
      case DType::kF32: out[i] = host.data<float>()[i]; break;
      case DType::kF64: out[i] = static_cast<float>(host.data<double>()[i]); break;
      case DType::kI32: out[i] = static_cast<float>(host.data<int32_t>()[i]); break;
      case DType::kI64: out[i] = static_cast<float>(host.data<int64_t>()[i]); break;
      case DType::kU8: out[i] = host.data<uint8_t>()[i]; break;
      case DType::kBF16:
      case DType::kF16: break;  // converted above
    }
  }
  return out;
}

Tensor Tensor::toDType(DType dtype) const {
  if (dtype == dtype_) return clone();
  const auto floating = [](DType d) {
    return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16;
  };
  RM_CHECK_ARG(floating(dtype_) && floating(dtype),
               fmt::format("no conversion from {} to {}", dtypeName(dtype_), dtypeName(dtype)));
  // BF16 <-> F16 goes through F32, which holds both exactly.
  const Tensor wide = ops::cast(*this, DType::kF32);
  return ops::cast(wide, dtype);
}

Tensor Tensor::view(const Shape& shape) const {
  RM_CHECK_ARG(shapeNumel(shape) == numel_,
               fmt::format("view {} of a tensor of shape {}", shapeStr(shape), shapeStr(shape_)));
  Tensor out = *this;
  out.shape_ = shape;
  return out;
}

Tensor Tensor::narrowRows(int64_t start, int64_t count) const {
  RM_CHECK_ARG(rank() >= 1 && start >= 0 && count >= 0 && start + count <= shape_[0],
               fmt::format("rows [{}, {}) of a tensor of shape {}", start, start + count,
                           shapeStr(shape_)));
  int64_t row_elements = shape_[0] == 0 ? 0 : numel_ / shape_[0];
  Tensor out = *this;
  out.shape_[0] = count;
  out.numel_ = count * row_elements;
  out.offset_bytes_ += static_cast<size_t>(start * row_elements) * dtypeSize(dtype_);
  return out;
}

}  // namespace ringmaster
