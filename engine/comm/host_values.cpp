// Element-wise conversion between doubles and every tensor dtype.
#include "comm/host_values.h"

#include "comm/reduce_op.h"
#include "core/error.h"
#include "tensor/device.h"  // floatToBf16, floatToHalf

namespace ringmaster {
namespace {

void store(DType dtype, void* p, double v) {
  switch (dtype) {
    case DType::kF32:
      *static_cast<float*>(p) = static_cast<float>(v);
      break;
    case DType::kF64:
      *static_cast<double*>(p) = v;
      break;
    case DType::kI32:
      *static_cast<int32_t*>(p) = static_cast<int32_t>(v);
      break;
    case DType::kI64:
      *static_cast<int64_t*>(p) = static_cast<int64_t>(v);
      break;
    case DType::kU8:
      *static_cast<uint8_t*>(p) = static_cast<uint8_t>(v);
      break;
    case DType::kBF16:
      *static_cast<uint16_t*>(p) = floatToBf16(static_cast<float>(v));
      break;
    case DType::kF16:
      *static_cast<uint16_t*>(p) = floatToHalf(static_cast<float>(v));
      break;
  }
}

double load(DType dtype, const void* p) {
  switch (dtype) {
    case DType::kF32:
      return *static_cast<const float*>(p);
    case DType::kF64:
      return *static_cast<const double*>(p);
    case DType::kI32:
      return *static_cast<const int32_t*>(p);
    case DType::kI64:
      return static_cast<double>(*static_cast<const int64_t*>(p));
    case DType::kU8:
      return *static_cast<const uint8_t*>(p);
    case DType::kBF16:
      return bf16ToFloat(*static_cast<const uint16_t*>(p));
    case DType::kF16:
      return halfToFloat(*static_cast<const uint16_t*>(p));
  }
  return 0;
}

}  // namespace

void fillHostTensor(Tensor& tensor, const std::function<double(int64_t)>& value) {
  RM_CHECK_ARG(!tensor.device().isCuda(), "fillHostTensor needs a CPU tensor");
  auto* base = static_cast<uint8_t*>(tensor.raw());
  const size_t width = dtypeSize(tensor.dtype());
  for (int64_t i = 0; i < tensor.numel(); ++i)
    store(tensor.dtype(), base + static_cast<size_t>(i) * width, value(i));
}

Tensor makeHostTensor(DType dtype, int64_t n, const std::function<double(int64_t)>& value) {
  Tensor t = Tensor::empty({n}, dtype);
  fillHostTensor(t, value);
  return t;
}

std::vector<double> hostValues(const Tensor& tensor) {
  RM_CHECK_ARG(!tensor.device().isCuda(), "hostValues needs a CPU tensor");
  std::vector<double> out(static_cast<size_t>(tensor.numel()));
  const auto* base = static_cast<const uint8_t*>(tensor.raw());
  const size_t width = dtypeSize(tensor.dtype());
  for (size_t i = 0; i < out.size(); ++i) out[i] = load(tensor.dtype(), base + i * width);
  return out;
}

double roundTrip(DType dtype, double value) {
  alignas(8) uint8_t slot[8];
  store(dtype, slot, value);
  return load(dtype, slot);
}

}  // namespace ringmaster
