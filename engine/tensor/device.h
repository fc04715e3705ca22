// Devices and element types of tensors. A Device names where memory lives (the host or one CUDA
// device); DType names how its bytes are read; the scalar 16-bit float conversions live here too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ringmaster {

enum class DeviceType { kCpu, kCuda };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;

  static Device cpu() { return {DeviceType::kCpu, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::kCuda, index}; }
  bool isCuda() const { return type == DeviceType::kCuda; }
  bool operator==(const Device&) const = default;
  // "cpu" or "cuda:0".
  std::string str() const;
};

// True when this build has the CUDA path and the machine has at least one device.
bool cudaAvailable();
int cudaDeviceCount();
// "cpu", or the CUDA device's product name ("NVIDIA H100 80GB HBM3").
std::string deviceName(Device device);
// Waits for all work queued on the device (nothing to wait for on the host).
void synchronize(Device device);

enum class DType { kF32, kBF16, kF16, kF64, kI32, kI64, kU8 };

size_t dtypeSize(DType dtype);
// Safetensors' spelling: "F32", "BF16", "F16", "F64", "I32", "I64", "U8".
const char* dtypeName(DType dtype);
// Parses a safetensors dtype name; returns false for names we do not carry.
bool parseDTypeName(const std::string& name, DType* out);

template <typename T>
constexpr DType dtypeOf();
template <> constexpr DType dtypeOf<float>() { return DType::kF32; }
template <> constexpr DType dtypeOf<double>() { return DType::kF64; }
template <> constexpr DType dtypeOf<int32_t>() { return DType::kI32; }
template <> constexpr DType dtypeOf<int64_t>() { return DType::kI64; }
template <> constexpr DType dtypeOf<uint8_t>() { return DType::kU8; }

// bfloat16 conversion with round-to-nearest-even, as PyTorch does.
uint16_t floatToBf16(float value);
float bf16ToFloat(uint16_t value);

// IEEE binary16 (fp16) conversion, bit for bit what x86's F16C (vcvtps2ph with round to nearest
// even) gives: ties to even, subnormals kept, overflow to +-inf, NaN stays a quiet NaN with its
// payload's top bits. halfToFloat is exact (a NaN comes back quiet). The scalar reference of the
// fp16 kernels and of comm.
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t value);

}  // namespace ringmaster
