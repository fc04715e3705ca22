// Tensors of any dtype filled from a function of the index, read back as doubles, and the slow,
// obvious host reference of every reduction that the collectives are checked against.
#pragma once

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "comm/reduce_op.h"
#include "tensor/tensor.h"

namespace ringmaster::testing {

inline Tensor makeTensor(DType dtype, int64_t n, const std::function<double(int64_t)>& f) {
  Tensor t = Tensor::empty({n}, dtype);
  for (int64_t i = 0; i < n; ++i) {
    double v = f(i);
    void* p = static_cast<uint8_t*>(t.raw()) + static_cast<size_t>(i) * dtypeSize(dtype);
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
  return t;
}

inline std::vector<double> values(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    const void* p =
        static_cast<const uint8_t*>(t.raw()) + static_cast<size_t>(i) * dtypeSize(t.dtype());
    switch (t.dtype()) {
      case DType::kF32:
        out[i] = *static_cast<const float*>(p);
        break;
      case DType::kF64:
        out[i] = *static_cast<const double*>(p);
        break;
      case DType::kI32:
        out[i] = *static_cast<const int32_t*>(p);
        break;
      case DType::kI64:
        out[i] = static_cast<double>(*static_cast<const int64_t*>(p));
        break;
      case DType::kU8:
        out[i] = *static_cast<const uint8_t*>(p);
        break;
      case DType::kBF16:
        out[i] = bf16ToFloat(*static_cast<const uint16_t*>(p));
        break;
      case DType::kF16:
        out[i] = halfToFloat(*static_cast<const uint16_t*>(p));
        break;
    }
  }
  return out;
}

// The reduction of `inputs` (one per rank) by `op`, computed one rank after another on the host.
inline Tensor referenceReduce(const std::vector<Tensor>& inputs, ReduceOp op) {
  std::vector<Tensor> scaled;
  for (const Tensor& in : inputs) {
    Tensor c = in.clone();
    if (op.kind == ReduceKind::kPremulSum) scaleInPlace(c.dtype(), c.raw(), c.numel(), op.factor);
    scaled.push_back(c);
  }
  Tensor acc = scaled[0].clone();
  for (size_t r = 1; r < scaled.size(); ++r) {
    reduceInto(baseKind(op.kind), acc.dtype(), acc.raw(), scaled[r].raw(),
               static_cast<size_t>(acc.numel()));
  }
  if (op.kind == ReduceKind::kAvg)
    divideInPlace(acc.dtype(), acc.raw(), acc.numel(), static_cast<int64_t>(inputs.size()));
  return acc;
}

// Compares element by element, reporting the first difference and how many differ.
inline ::testing::AssertionResult sameValues(const Tensor& actual, const Tensor& expected) {
  auto a = values(actual), e = values(expected);
  if (a.size() != e.size()) {
    return ::testing::AssertionFailure() << "size " << a.size() << " != " << e.size();
  }
  size_t bad = 0, first = a.size();
  for (size_t i = 0; i < a.size(); ++i) {
    bool same = a[i] == e[i] || (std::isnan(a[i]) && std::isnan(e[i]));
    if (!same && bad++ == 0) first = i;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << a.size() << " elements differ; first at " << first << ": got "
         << a[first] << ", expected " << e[first];
}

}  // namespace ringmaster::testing
