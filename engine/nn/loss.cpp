// Softmax cross-entropy forward (mean loss) and backward (softmax minus one-hot, over the batch).
#include "nn/loss.h"

#include "core/error.h"
#include "tensor/ops.h"

namespace ringmaster {

double SoftmaxCrossEntropy::forward(const Tensor& logits, const Tensor& labels) {
  RM_CHECK_ARG(logits.rank() == 2, "cross-entropy expects logits [batch, classes]");
  probs_ = Tensor::empty(logits.shape(), DType::kF32, logits.device());
  labels_ = labels;
  return ops::softmaxCrossEntropyForward(logits, labels, probs_);
}

Tensor SoftmaxCrossEntropy::backward(float loss_scale) {
  RM_CHECK_ARG(probs_.defined(), "SoftmaxCrossEntropy::backward before forward");
  Tensor grad = Tensor::empty(probs_.shape(), DType::kF32, probs_.device());
  const int64_t rows = probs_.dim(0);
  ops::softmaxCrossEntropyBackward(probs_, labels_, grad,
                                   rows > 0 ? loss_scale / static_cast<float>(rows) : 0.0f);
  return grad;
}

}  // namespace ringmaster
