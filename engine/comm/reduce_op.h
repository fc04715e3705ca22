// Reduce operations (PyTorch's ReduceOp: SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR, PREMUL_SUM)
// and the host reduction kernels every CPU backend and the tests' reference share. The
// communicator's operation kinds are in comm_op.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tensor/device.h"

namespace ringmaster {

enum class ReduceKind { kSum, kAvg, kProduct, kMin, kMax, kBand, kBor, kBxor, kPremulSum };

struct ReduceOp {
  ReduceKind kind = ReduceKind::kSum;
  double factor = 1.0;  // PREMUL_SUM's scalar: every input is multiplied by it before the sum

  static ReduceOp sum() { return {ReduceKind::kSum}; }
  static ReduceOp avg() { return {ReduceKind::kAvg}; }
  static ReduceOp product() { return {ReduceKind::kProduct}; }
  static ReduceOp min() { return {ReduceKind::kMin}; }
  static ReduceOp max() { return {ReduceKind::kMax}; }
  static ReduceOp band() { return {ReduceKind::kBand}; }
  static ReduceOp bor() { return {ReduceKind::kBor}; }
  static ReduceOp bxor() { return {ReduceKind::kBxor}; }
  static ReduceOp premulSum(double factor) { return {ReduceKind::kPremulSum, factor}; }
};

// "sum", "avg", "product", "min", "max", "band", "bor", "bxor", "premul_sum".
std::string_view toString(ReduceKind kind);
// Throws kInvalidArgument for a combination PyTorch refuses too: bitwise ops on floating types,
// PREMUL_SUM on integers.
void checkReduceSupported(ReduceOp op, DType dtype);
bool isFloating(DType dtype);
// "float32", "bfloat16", "int64", ... (PyTorch's spelling, as telemetry carries it).
std::string_view commDTypeName(DType dtype);

// acc[i] = acc[i] (op) in[i] for `count` elements. `kind` is one of SUM, PRODUCT, MIN, MAX, BAND,
// BOR, BXOR (AVG and PREMUL_SUM are composed from SUM by the caller). bf16 / fp16 reduce in
// float and round back, as PyTorch's CPU kernels do (with tensor/device.h's conversions).
void reduceInto(ReduceKind kind, DType dtype, void* acc, const void* in, size_t count);
// The elementwise kind a composed op reduces with (AVG, PREMUL_SUM -> SUM).
ReduceKind baseKind(ReduceKind kind);
// data[i] *= factor (PREMUL_SUM's pre-scaling), floating types only.
void scaleInPlace(DType dtype, void* data, size_t count, double factor);
// data[i] /= divisor (AVG after SUM); integers divide with truncation toward zero, as torch.div
// with rounding_mode="trunc".
void divideInPlace(DType dtype, void* data, size_t count, int64_t divisor);

}  // namespace ringmaster
