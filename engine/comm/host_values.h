// Host tensors of any dtype written from and read back as doubles: how bench-comm's --check and the
// comm tests build inputs whose every reduction is exactly predictable, and compare results.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tensor/tensor.h"

namespace ringmaster {

// A CPU tensor of `n` elements, element i = value(i) converted to `dtype` (rounded to nearest for
// bf16 / fp16, truncated for integers).
Tensor makeHostTensor(DType dtype, int64_t n, const std::function<double(int64_t)>& value);

// Writes value(i) into element i of a CPU tensor.
void fillHostTensor(Tensor& tensor, const std::function<double(int64_t)>& value);

// Every element of a CPU tensor, as double.
std::vector<double> hostValues(const Tensor& tensor);

// `value` as stored in `dtype` and read back: what a result of that dtype can hold exactly.
double roundTrip(DType dtype, double value);

}  // namespace ringmaster
