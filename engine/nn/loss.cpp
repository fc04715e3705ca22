// Softmax cross-entropy forward (mean loss) and backward (softmax minus one-hot, over the batch),
// for class logits and for a language model's per-token logits alike.
#include "nn/loss.h"

#include <fmt/format.h>

#include "core/error.h"
#include "tensor/ops.h"

namespace ringmaster {

double SoftmaxCrossEntropy::forward(const Tensor& logits, const Tensor& labels) {
  RM_CHECK_ARG(logits.rank() >= 2, "cross-entropy expects logits [batch, ..., classes]");
  const int64_t classes = logits.dim(static_cast<int>(logits.rank() - 1));
  const int64_t rows = logits.numel() / classes;
  RM_CHECK_ARG(labels.numel() == rows, fmt::format("cross-entropy: {} labels for logits {}",
                                                   labels.numel(), shapeStr(logits.shape())));
  logits_shape_ = logits.shape();
  probs_ = Tensor::empty({rows, classes}, DType::kF32, logits.device());
  labels_ = labels.view({rows});
  return ops::softmaxCrossEntropyForward(logits.view({rows, classes}), labels_, probs_);
}

Tensor SoftmaxCrossEntropy::backward(float loss_scale) {
  RM_CHECK_ARG(probs_.defined(), "SoftmaxCrossEntropy::backward before forward");
  Tensor grad = Tensor::empty(probs_.shape(), DType::kF32, probs_.device());
  const int64_t rows = probs_.dim(0);
  ops::softmaxCrossEntropyBackward(probs_, labels_, grad,
                                   rows > 0 ? loss_scale / static_cast<float>(rows) : 0.0f);
  return grad.view(logits_shape_);
}

int64_t SoftmaxCrossEntropy::correct() const {
  RM_CHECK_ARG(probs_.defined(), "SoftmaxCrossEntropy::correct before forward");
  return ops::countCorrect(probs_, labels_);  // the softmax keeps the logits' order
}

}  // namespace ringmaster
