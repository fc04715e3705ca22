// Device names, dtype sizes and names, and bfloat16 conversion.
#include "tensor/device.h"

#include <cstring>

#include "core/error.h"
#include "tensor/cuda/cuda_runtime.h"

namespace ringmaster {

std::string Device::str() const {
  return isCuda() ? "cuda:" + std::to_string(index) : std::string("cpu");
}

int cudaDeviceCount() {
  static const int count = cuda::deviceCount();
  return count;
}

bool cudaAvailable() { return cudaDeviceCount() > 0; }

std::string deviceName(Device device) {
  return device.isCuda() ? cuda::deviceName(device.index) : std::string("cpu");
}

void synchronize(Device device) {
  if (device.isCuda()) cuda::synchronize(device.index);
}

size_t dtypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kF64: return 8;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
  }
  RM_ENFORCE(false, "unknown dtype");
}

const char* dtypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kF64: return "F64";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
    case DType::kU8: return "U8";
  }
  return "?";
}

bool parseDTypeName(const std::string& name, DType* out) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16, DType::kF64, DType::kI32, DType::kI64,
                  DType::kU8}) {
    if (name == dtypeName(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

uint16_t floatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // keep NaN a quiet NaN
  }
  uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float bf16ToFloat(uint16_t value) {
  uint32_t bits = static_cast<uint32_t>(value) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

}  // namespace ringmaster
