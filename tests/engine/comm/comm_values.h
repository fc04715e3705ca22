// Short names for the engine's host-value helpers, and the slow, obvious host reference of every
// reduction that the collectives are checked against.
#pragma once

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "comm/host_values.h"
#include "comm/reduce_op.h"
#include "tensor/tensor.h"

namespace ringmaster::testing {

inline Tensor makeTensor(DType dtype, int64_t n, const std::function<double(int64_t)>& f) {
  return makeHostTensor(dtype, n, f);
}

inline std::vector<double> values(const Tensor& t) {
  return hostValues(t);
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
