// The pieces of torch.autocast the modules share (Module::computeDType(): kF32, kBF16 or kF16):
// the 16-bit operands of a matrix product, its output rounded through the format, and a weight's
// gradient rounded as the 16-bit copy's .grad is before it is added into the fp32 master's. With
// kF32 each is what the module did before autocast existed, bit for bit.
#pragma once

#include "tensor/tensor.h"

namespace ringmaster {

// BF16 or F16: a compute type under which products take 16-bit operands.
bool isLowPrecision(DType compute);

// x as a product's operand: x itself under kF32, else x cast to the 16-bit format.
Tensor autocastOperand(const Tensor& x, DType compute);

// A product's output as autocast leaves it: under a 16-bit format its values rounded through it.
void roundOutput(Tensor& y, DType compute);

// y = op(a) op(b) in fp32 accumulation (a and b: autocastOperand's), rounded as roundOutput.
void autocastMatmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& y,
                    DType compute);
void autocastMatmulBatched(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& y,
                           DType compute);

// grad += op(a) op(b): under kF32 accumulated in place; under a 16-bit format the product is
// rounded through it first (the 16-bit weight copy's gradient), then added in fp32.
void accumulateWeightGrad(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                          Tensor& grad, DType compute);
// grad += the sum of dy's rows, rounded as accumulateWeightGrad's product (dy [N, out]).
void accumulateBiasGrad(const Tensor& dy, Tensor& grad, DType compute);

// The bias a product adds: the parameter under kF32, else its values rounded through the format
// (autocast casts every operand of addmm, the bias too).
Tensor autocastBias(const Tensor& bias, DType compute);

// An F32 tensor with the values of `x` (16-bit or F32): x itself when it is F32.
Tensor widened(const Tensor& x);

}  // namespace ringmaster
