// torch.autocast's casts and roundings for the modules' matrix products (nn/autocast.h).
#include "nn/autocast.h"

#include "tensor/ops.h"

namespace ringmaster {

bool isLowPrecision(DType compute) {
  return compute == DType::kBF16 || compute == DType::kF16;
}

Tensor autocastOperand(const Tensor& x, DType compute) {
  return isLowPrecision(compute) ? ops::cast(x, compute) : x;
}

void roundOutput(Tensor& y, DType compute) {
  if (isLowPrecision(compute)) ops::roundThrough(y, compute);
}

void autocastMatmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& y,
                    DType compute) {
  ops::matmul(a, trans_a, b, trans_b, y);
  roundOutput(y, compute);
}

void autocastMatmulBatched(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& y,
                           DType compute) {
  ops::matmulBatched(a, trans_a, b, trans_b, y);
  roundOutput(y, compute);
}

void accumulateWeightGrad(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                          Tensor& grad, DType compute) {
  if (!isLowPrecision(compute)) {
    ops::matmul(a, trans_a, b, trans_b, grad, 1.0f, 1.0f);
    return;
  }
  Tensor product = Tensor::empty(grad.shape(), DType::kF32, grad.device());
  ops::matmul(a, trans_a, b, trans_b, product);
  ops::roundThrough(product, compute);
  ops::axpy(1.0f, product, grad);
}

void accumulateBiasGrad(const Tensor& dy, Tensor& grad, DType compute) {
  if (!isLowPrecision(compute)) {
    ops::sumRows(dy, grad, 1.0f);
    return;
  }
  Tensor sum = Tensor::zeros(grad.shape(), DType::kF32, grad.device());
  ops::sumRows(dy, sum, 0.0f);
  ops::roundThrough(sum, compute);
  ops::axpy(1.0f, sum, grad);
}

Tensor autocastBias(const Tensor& bias, DType compute) {
  if (!isLowPrecision(compute)) return bias;
  Tensor rounded = bias.clone();
  ops::roundThrough(rounded, compute);
  return rounded;
}

Tensor widened(const Tensor& x) {
  return ops::cast(x, DType::kF32);
}

}  // namespace ringmaster
