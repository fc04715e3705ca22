// Names, checks and the host reduction kernels of reduce_op.h.
#include "comm/reduce_op.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster {

std::string_view toString(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::kSum:
      return "sum";
    case ReduceKind::kAvg:
      return "avg";
    case ReduceKind::kProduct:
      return "product";
    case ReduceKind::kMin:
      return "min";
    case ReduceKind::kMax:
      return "max";
    case ReduceKind::kBand:
      return "band";
    case ReduceKind::kBor:
      return "bor";
    case ReduceKind::kBxor:
      return "bxor";
    case ReduceKind::kPremulSum:
      return "premul_sum";
  }
  return "?";
}

bool isFloating(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kBF16 ||
         dtype == DType::kF16;
}

std::string_view commDTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "float32";
    case DType::kBF16:
      return "bfloat16";
    case DType::kF16:
      return "float16";
    case DType::kF64:
      return "float64";
    case DType::kI32:
      return "int32";
    case DType::kI64:
      return "int64";
    case DType::kU8:
      return "uint8";
  }
  return "?";
}

void checkReduceSupported(ReduceOp op, DType dtype) {
  bool bitwise =
      op.kind == ReduceKind::kBand || op.kind == ReduceKind::kBor || op.kind == ReduceKind::kBxor;
  if (bitwise && isFloating(dtype)) {
    RM_THROW(kInvalidArgument, fmt::format("reduce op {} needs an integer tensor, got {}",
                                           toString(op.kind), commDTypeName(dtype)));
  }
  if (op.kind == ReduceKind::kPremulSum && !isFloating(dtype)) {
    RM_THROW(kInvalidArgument, fmt::format("reduce op premul_sum needs a floating tensor, got {}",
                                           commDTypeName(dtype)));
  }
}

ReduceKind baseKind(ReduceKind kind) {
  return kind == ReduceKind::kAvg || kind == ReduceKind::kPremulSum ? ReduceKind::kSum : kind;
}

// ---------------------------------------------------------------------------------------------
// Kernels.

namespace {

template <typename T, typename F>
void apply(void* acc, const void* in, size_t count, F f) {
  auto* a = static_cast<T*>(acc);
  const auto* b = static_cast<const T*>(in);
  for (size_t i = 0; i < count; ++i) a[i] = f(a[i], b[i]);
}

// Integer sums and products wrap around (two's complement), as PyTorch's do, instead of
// overflowing into undefined behaviour.
template <typename T>
T wrappingAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(a) + U(b));
  } else {
    return T(a + b);
  }
}

template <typename T>
T wrappingMultiply(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(a) * U(b));
  } else {
    return T(a * b);
  }
}

template <typename T>
void reduceTyped(ReduceKind kind, void* acc, const void* in, size_t count) {
  switch (kind) {
    case ReduceKind::kSum:
      return apply<T>(acc, in, count, wrappingAdd<T>);
    case ReduceKind::kProduct:
      return apply<T>(acc, in, count, wrappingMultiply<T>);
    case ReduceKind::kMin:
      return apply<T>(acc, in, count, [](T a, T b) {
        if constexpr (std::is_floating_point_v<T>) {
          if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
        }
        return std::min(a, b);
      });
    case ReduceKind::kMax:
      return apply<T>(acc, in, count, [](T a, T b) {
        if constexpr (std::is_floating_point_v<T>) {
          if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
        }
        return std::max(a, b);
      });
    case ReduceKind::kBand:
    case ReduceKind::kBor:
    case ReduceKind::kBxor:
      if constexpr (std::is_integral_v<T>) {
        if (kind == ReduceKind::kBand)
          return apply<T>(acc, in, count, [](T a, T b) { return T(a & b); });
        if (kind == ReduceKind::kBor)
          return apply<T>(acc, in, count, [](T a, T b) { return T(a | b); });
        return apply<T>(acc, in, count, [](T a, T b) { return T(a ^ b); });
      }
      break;
    default:
      break;
  }
  RM_ENFORCE(false, fmt::format("reduceInto: unsupported kind {}", toString(kind)));
}

// 16-bit floats: widen to float, reduce, round back (per element, in blocks).
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void reduceHalfLike(ReduceKind kind, void* acc, const void* in, size_t count) {
  auto* a = static_cast<uint16_t*>(acc);
  const auto* b = static_cast<const uint16_t*>(in);
  float fa[256], fb[256];
  for (size_t base = 0; base < count; base += 256) {
    size_t n = std::min<size_t>(256, count - base);
    for (size_t i = 0; i < n; ++i) {
      fa[i] = ToFloat(a[base + i]);
      fb[i] = ToFloat(b[base + i]);
    }
    reduceTyped<float>(kind, fa, fb, n);
    for (size_t i = 0; i < n; ++i) a[base + i] = FromFloat(fa[i]);
  }
}

template <typename T>
void scaleTyped(void* data, size_t count, double factor) {
  auto* p = static_cast<T*>(data);
  for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] * factor);
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void scaleHalfLike(void* data, size_t count, double factor) {
  auto* p = static_cast<uint16_t*>(data);
  for (size_t i = 0; i < count; ++i) p[i] = FromFloat(static_cast<float>(ToFloat(p[i]) * factor));
}

}  // namespace

void reduceInto(ReduceKind kind, DType dtype, void* acc, const void* in, size_t count) {
  switch (dtype) {
    case DType::kF32:
      return reduceTyped<float>(kind, acc, in, count);
    case DType::kF64:
      return reduceTyped<double>(kind, acc, in, count);
    case DType::kI32:
      return reduceTyped<int32_t>(kind, acc, in, count);
    case DType::kI64:
      return reduceTyped<int64_t>(kind, acc, in, count);
    case DType::kU8:
      return reduceTyped<uint8_t>(kind, acc, in, count);
    case DType::kBF16:
      return reduceHalfLike<bf16ToFloat, floatToBf16>(kind, acc, in, count);
    case DType::kF16:
      return reduceHalfLike<halfToFloat, floatToHalf>(kind, acc, in, count);
  }
}

void scaleInPlace(DType dtype, void* data, size_t count, double factor) {
  switch (dtype) {
    case DType::kF32:
      return scaleTyped<float>(data, count, factor);
    case DType::kF64:
      return scaleTyped<double>(data, count, factor);
    case DType::kBF16:
      return scaleHalfLike<bf16ToFloat, floatToBf16>(data, count, factor);
    case DType::kF16:
      return scaleHalfLike<halfToFloat, floatToHalf>(data, count, factor);
    default:
      RM_THROW(kInvalidArgument, fmt::format("cannot scale a {} tensor", commDTypeName(dtype)));
  }
}

void divideInPlace(DType dtype, void* data, size_t count, int64_t divisor) {
  switch (dtype) {
    case DType::kF32: {
      auto* p = static_cast<float*>(data);
      for (size_t i = 0; i < count; ++i) p[i] /= static_cast<float>(divisor);
      return;
    }
    case DType::kF64: {
      auto* p = static_cast<double*>(data);
      for (size_t i = 0; i < count; ++i) p[i] /= static_cast<double>(divisor);
      return;
    }
    case DType::kBF16:
      return scaleHalfLike<bf16ToFloat, floatToBf16>(data, count,
                                                     1.0 / static_cast<double>(divisor));
    case DType::kF16:
      return scaleHalfLike<halfToFloat, floatToHalf>(data, count,
                                                     1.0 / static_cast<double>(divisor));
    case DType::kI32: {
      auto* p = static_cast<int32_t*>(data);
      for (size_t i = 0; i < count; ++i) p[i] = static_cast<int32_t>(p[i] / divisor);
      return;
    }
    case DType::kI64: {
      auto* p = static_cast<int64_t*>(data);
      for (size_t i = 0; i < count; ++i) p[i] /= divisor;
      return;
    }
    case DType::kU8: {
      auto* p = static_cast<uint8_t*>(data);
      for (size_t i = 0; i < count; ++i) p[i] = static_cast<uint8_t>(p[i] / divisor);
      return;
    }
  }
}

}  // namespace ringmaster
