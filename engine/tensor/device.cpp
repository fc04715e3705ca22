// Device names, dtype sizes and names, and the scalar bfloat16 and float16 conversions.
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

uint16_t floatToHalf(float value) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) {  // inf, or NaN made quiet with its payload's top 9 bits (as F16C does)
    return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));
  }
  const int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (e <= 0) {                                               // subnormal or zero
    if (e < -10) return static_cast<uint16_t>(sign);          // below half the smallest subnormal
    mant |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1u))) ++half;  // may become the smallest normal
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into the exponent
  return static_cast<uint16_t>(half);
}

float halfToFloat(uint16_t h) {
  const uint32_t sign = (uint32_t{h} & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while (!(mant & 0x400u));
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {  // inf, or NaN made quiet (as F16C does)
    x = sign | 0x7f800000u | (mant ? 0x400000u | (mant << 13) : 0u);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace ringmaster
